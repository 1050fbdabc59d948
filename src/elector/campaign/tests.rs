//! Winning a term on paused time: the epochs, the polling period, a stop during an acquire,
//! late and unanswered acquires, refused credentials, a failed epoch write.

use super::acquire::first_epoch;
use crate::elector::Unobserved;
use crate::elector::error::Error;
use crate::elector::instance::Elector;
use crate::elector::testing::{elector, timing, transient};
use crate::store::memory::{Behaviour, MemoryStore, Op};
use crate::store::{Holder, LeaseId, StoreError};
use crate::timing::POLL_JITTER;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// The first epoch on a blob without one: the wall clock in milliseconds, read around `f`.
async fn floor_around<T>(f: impl Future<Output = T>) -> (u64, T, u64) {
    let before = first_epoch(crate::clock::wall());
    let t = f.await;
    (before, t, first_epoch(crate::clock::wall()))
}

#[tokio::test(start_paused = true)]
async fn epochs_increase_per_term() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    let (before, first, after) = floor_around(e.win(&CancellationToken::new())).await;
    let first = first.unwrap().unwrap();
    assert!(
        (before..=after).contains(&first.epoch),
        "the first epoch of a blob is the wall clock in ms: {before} <= {} <= {after}",
        first.epoch
    );
    assert!(e.release(first.lease).await);
    let second = e.win(&CancellationToken::new()).await.unwrap().unwrap();
    assert_eq!(second.epoch, first.epoch + 1);
    assert_ne!(first.lease, second.lease, "each term has its own lease id");
    let holder = store.holder().unwrap();
    assert_eq!(holder.identity, "me");
    assert_eq!(holder.lease, Some(second.lease), "the lease id is recorded");
}

/// Issue 15: a blob deleted and created again (no metadata) must not hand out an epoch that
/// was handed out before, nor a smaller one.
#[tokio::test(start_paused = true)]
async fn epochs_keep_growing_when_the_blob_loses_its_metadata() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    let mut epochs = Vec::new();
    for _ in 0..3 {
        let term = e.try_acquire().await.unwrap().unwrap();
        epochs.push(term.epoch);
        assert!(e.release(term.lease).await);
    }
    store.recreate();
    // Real time must pass for the wall clock to move: 3 leaderships took no paused time.
    std::thread::sleep(Duration::from_millis(5));
    let term = e.try_acquire().await.unwrap().unwrap();
    assert!(
        epochs.iter().all(|earlier| term.epoch > *earlier),
        "{epochs:?} then {} after the blob was re-created",
        term.epoch
    );
}

#[tokio::test(start_paused = true)]
async fn tampered_epochs_keep_the_instance_from_leading() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    let holder = |epoch| Holder {
        identity: "someone".into(),
        epoch,
        acquired_at: OffsetDateTime::UNIX_EPOCH,
        lease: None,
        slots: None,
    };
    // An epoch that cannot grow: refused, naming the key, and the lease is given back.
    store.set_holder(Some(holder(u64::MAX)));
    let err = e.try_acquire().await.unwrap_err();
    assert!(err.to_string().contains(crate::store::META_EPOCH), "{err}");
    assert!(!store.is_leased(), "released");
    // A large but growable one carries on.
    store.set_holder(Some(holder(u64::MAX - 1)));
    assert_eq!(e.try_acquire().await.unwrap().unwrap().epoch, u64::MAX);
}

#[tokio::test(start_paused = true)]
async fn a_follower_polls_at_the_jittered_interval() {
    let store = Arc::new(MemoryStore::default());
    store.steal(15);
    let mut e = elector(&store);
    let start = Instant::now();
    let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
    let attempts = store.calls(Op::Acquire);
    let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter()
            .all(|g| *g >= Duration::from_secs(1) && *g <= Duration::from_millis(1200)),
        "{gaps:?}"
    );
    assert!(
        Instant::now() - start >= Duration::from_secs(15),
        "waited for the expiry"
    );
    assert!(term.epoch > 1);
}

#[tokio::test(start_paused = true)]
async fn a_stop_request_never_cuts_an_acquire_in_flight() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    store.set(Op::Acquire, Behaviour::SlowAnswer(Duration::from_secs(2)));
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        sleep(Duration::from_secs(1)).await;
        stopper.cancel();
    });
    // The stop came while the (successful) acquire was in flight: the term is returned, so
    // that the caller can release it instead of leaving the lease held by nobody.
    let term = e.win(&stop).await.unwrap().expect("the won term");
    assert_eq!(store.lease_id(), Some(term.lease));
    // Between attempts, a stop ends the campaign at once.
    store.steal(15);
    store.set(Op::Acquire, Behaviour::Normal);
    let began = Instant::now();
    assert!(e.win(&stop).await.unwrap().is_none());
    assert!(Instant::now() - began < Duration::from_secs(1));
}

/// Issue 12, item 2. A crashed leader's lease expires at t0 + 15. A slow instance, whose
/// answers all come R + 0.5 s late, takes it with its next acquire (the request lands at
/// once). A healthy instance, started then, must lead within the slow one's answer delay +
/// one poll, and keep leading: the slow instance must never send an acquire id twice (a
/// resend renews the lease it took), and must release the lease its late success took.
#[tokio::test(start_paused = true)]
async fn an_instance_whose_answers_come_too_late_gives_the_lease_up_at_once() {
    let store = Arc::new(MemoryStore::default());
    store.steal(15);
    let crashed_lease_ends = Instant::now() + Duration::from_secs(15);
    let answer_delay = timing().request_timeout() + Duration::from_millis(500);
    let slow_client = Arc::new(store.client(answer_delay));
    let mut slow = Elector::new(
        slow_client,
        "slow".into(),
        timing(),
        true,
        Arc::new(Unobserved),
    );
    let slow_campaign = tokio::spawn(async move {
        let term = slow.win(&CancellationToken::new()).await;
        (slow, term)
    });
    // The slow instance's first acquire after the expiry takes the lease.
    while Instant::now() <= crashed_lease_ends || !store.is_leased() {
        sleep(Duration::from_millis(10)).await;
        assert!(
            Instant::now() < crashed_lease_ends + Duration::from_secs(30),
            "the slow instance never took the expired lease"
        );
    }
    let taken = Instant::now();
    let slow_lease = store.lease_id().unwrap();
    assert!(store.ids(Op::Acquire).contains(&slow_lease));

    let mut healthy = elector(&store);
    let won = tokio::time::timeout(
        Duration::from_secs(60),
        healthy.win(&CancellationToken::new()),
    )
    .await
    .expect("the healthy instance leads (the slow one keeps renewing with late acquires)")
    .unwrap()
    .unwrap();
    let bound = answer_delay + timing().acquire_interval.mul_f64(1.0 + POLL_JITTER);
    assert!(
        Instant::now() - taken <= bound,
        "healthy led {:?} after the slow instance took the lease (bound {bound:?})",
        Instant::now() - taken
    );
    assert!(
        store.ids(Op::Release).contains(&slow_lease),
        "the slow instance released the lease its late acquire took"
    );

    // Two lease durations later the healthy instance still leads, and the slow one has
    // kept trying with a new id each time.
    let renewing = healthy.keep(&won);
    sleep(Duration::from_secs(30)).await;
    assert!(renewing.tenure().borrow().is_held());
    assert_eq!(store.lease_id(), Some(won.lease));
    assert!(
        !slow_campaign.is_finished(),
        "the slow instance never leads"
    );
    let slow_ids: Vec<LeaseId> = store
        .ids(Op::Acquire)
        .into_iter()
        .filter(|id| *id != won.lease)
        .collect();
    let distinct: std::collections::HashSet<_> = slow_ids.iter().collect();
    assert!(slow_ids.len() >= 4, "{slow_ids:?}");
    assert_eq!(
        distinct.len(),
        slow_ids.len(),
        "an acquire id was sent twice"
    );
    renewing.stop().await;
    slow_campaign.abort();
}

/// An acquire that never gets an answer (nor, as far as we know, reached the server) keeps
/// the instance out until the lease it may have taken has expired: `sent + L`.
#[tokio::test(start_paused = true)]
async fn an_unanswered_acquire_keeps_the_instance_out_until_its_lease_would_have_expired() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    store.set(Op::Acquire, Behaviour::Hang);
    let healer = store.clone();
    tokio::spawn(async move {
        sleep(Duration::from_secs(5)).await;
        healer.set(Op::Acquire, Behaviour::Normal);
    });
    let start = Instant::now();
    let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
    let attempts = store.calls(Op::Acquire);
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(
        attempts[1],
        start + timing().duration,
        "not before sent + L"
    );
    let ids = store.ids(Op::Acquire);
    assert_ne!(ids[0], ids[1], "a new id");
    assert_eq!(term.lease, ids[1]);
}

/// A stop that comes while a timed-out acquire's answer is still awaited waits for it, and
/// for the release of the lease it took, so that the lease is not left held by nobody.
#[tokio::test(start_paused = true)]
async fn a_stop_waits_for_a_late_acquire_and_releases_what_it_took() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    store.set(
        Op::Acquire,
        Behaviour::SlowAnswer(timing().request_timeout() + Duration::from_millis(500)),
    );
    let stop = CancellationToken::new();
    let stopper = stop.clone();
    tokio::spawn(async move {
        sleep(Duration::from_millis(4200)).await;
        stopper.cancel();
    });
    let start = Instant::now();
    assert!(e.win(&stop).await.unwrap().is_none());
    assert_eq!(
        Instant::now(),
        start + Duration::from_millis(4500),
        "returned when the late answer came and its lease was released"
    );
    assert!(
        !store.is_leased(),
        "the lease the late acquire took was released"
    );
    assert_eq!(store.ids(Op::Release), store.ids(Op::Acquire));
}

/// A retry after an answered failure (a 5xx that may have been applied) keeps its id, so
/// that it still wins if the first attempt did take the lease.
#[tokio::test(start_paused = true)]
async fn an_answered_failure_is_retried_with_the_same_id() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    store.set(Op::Acquire, Behaviour::Fail(transient()));
    assert!(e.try_acquire().await.is_err());
    store.set(Op::Acquire, Behaviour::Normal);
    let term = e.try_acquire().await.unwrap().unwrap();
    let ids = store.ids(Op::Acquire);
    assert_eq!(ids, vec![term.lease, term.lease]);
}

#[tokio::test(start_paused = true)]
async fn refused_credentials_stop_the_campaign_only_before_the_first_accepted_request() {
    let store = Arc::new(MemoryStore::default());
    let denied = StoreError::Status {
        status: 403,
        code: Some("AuthorizationFailure".into()),
    };
    store.set(Op::Acquire, Behaviour::Fail(denied.clone()));
    let mut e = elector(&store);
    assert!(matches!(
        e.win(&CancellationToken::new()).await,
        Err(Error::Denied(_))
    ));

    // Once storage has accepted us, a refusal is retried (a rotated key, an expired SAS).
    store.set(Op::Acquire, Behaviour::Normal);
    let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
    e.release(term.lease).await;
    store.set(Op::Acquire, Behaviour::Fail(denied));
    let never = CancellationToken::new();
    let campaign = tokio::time::timeout(Duration::from_secs(60), e.win(&never)).await;
    assert!(campaign.is_err(), "kept trying");
}

#[tokio::test(start_paused = true)]
async fn a_failed_epoch_write_releases_and_does_not_lead() {
    let store = Arc::new(MemoryStore::default());
    let mut e = elector(&store);
    store.set(Op::WriteEpoch, Behaviour::Fail(transient()));
    assert!(e.try_acquire().await.is_err());
    assert!(!store.is_leased(), "released after the failed write");
    store.set(Op::WriteEpoch, Behaviour::Normal);
    assert!(e.try_acquire().await.unwrap().unwrap().epoch > 1);
    assert_eq!(store.calls(Op::WriteEpoch).len(), 2);
}
