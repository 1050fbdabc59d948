//! One member from its start to its end on paused time, through the shell's driver on the
//! in-memory store: a shutdown that waits for an acquire on its way; credentials refused
//! before storage ever accepted them (fatal) and after, in the same member or in an earlier one
//! of the process (retried); epochs the blob carries that cannot grow or are no number, and
//! epochs that keep growing when the blob loses them; a renew that hangs, and a suspend past
//! the stop deadline (docs/safety.md, rules 1 and 4); a suspend past the keeper's listing
//! period.

use crate::elector::error::Error;
use crate::elector::instance::Elector;
use crate::elector::task::TaskBody;
use crate::elector::testing::{Instance, Lives, timing};
use crate::store::memory::{Behaviour, MemoryStore, Op};
use crate::store::{Holder, META_EPOCH, StoreError};
use leasehold_core::Pace;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// What storage answers to credentials it refuses.
fn denied() -> StoreError {
    StoreError::Status {
        status: 403,
        code: Some("AuthorizationFailure".into()),
    }
}

/// A shutdown while the acquire is on its way does not cut it: its answer is awaited, and the
/// lease it took goes back before any term, so that the lease is not left held by nobody.
#[tokio::test(start_paused = true)]
async fn a_shutdown_never_cuts_an_acquire_on_its_way() {
    let store = Arc::new(MemoryStore::default());
    store.set(Op::Acquire, Behaviour::SlowAnswer(secs(2.0)));
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    while store.calls(Op::Acquire).is_empty() {
        sleep(secs(0.01)).await;
    }
    let sent = store.calls(Op::Acquire)[0];
    sleep(secs(1.0)).await;
    a.stop().await;
    assert!(
        Instant::now() >= sent + secs(2.0),
        "returned before the acquire's answer"
    );
    let took = store.ids(Op::Acquire)[0];
    assert!(
        store.ids(Op::Release).contains(&took),
        "what it took went back"
    );
    assert!(!store.is_leased());
    assert!(lives.all().is_empty(), "no term after a shutdown");
}

/// Storage refuses the credentials before it ever accepted them: the member ends with
/// [`Error::Denied`] (exit 3) at once. Once it accepted them, a refusal is a rotated key or
/// an expired SAS: retried, the member leading again when storage accepts them again.
#[tokio::test(start_paused = true)]
async fn refused_credentials_end_the_member_only_before_storage_accepted_them() {
    let store = Arc::new(MemoryStore::default());
    store.set(Op::Acquire, Behaviour::Fail(denied()));
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    let ended = tokio::time::timeout(secs(60.0), a.running).await;
    assert!(matches!(ended, Ok(Ok(Err(Error::Denied(_))))), "{ended:?}");
    assert_eq!(store.calls(Op::Acquire).len(), 1, "not retried");

    // Accepted first: each term runs 1 s, the next acquire is refused, and retried.
    let store = Arc::new(MemoryStore::default());
    let b = Instance::start(&store, "b", &lives, Some(secs(1.0)));
    lives.nth(1).await;
    store.set(Op::Acquire, Behaviour::Fail(denied()));
    let refused = store.calls(Op::Acquire).len();
    sleep(secs(60.0)).await;
    assert!(!b.running.is_finished(), "kept trying");
    assert!(store.calls(Op::Acquire).len() > refused + 2, "retried");
    store.set(Op::Acquire, Behaviour::Normal);
    lives.nth(2).await;
    b.stop().await;
}

/// The daemon starts a new member at each SIGTSTP/SIGCONT session on the same elector: a
/// refusal in a later session, after an earlier one was accepted, is retried; the same refusal
/// ends a fresh elector's member.
#[tokio::test(start_paused = true)]
async fn a_refusal_in_a_later_session_is_retried() {
    let store = Arc::new(MemoryStore::default());
    let mut e = Elector::with_store(store.clone(), "a", timing()).unwrap();
    let mut body = TaskBody::new(
        |leadership: crate::Leadership| async move { leadership.cancelled().await },
        "a",
        timing().stop_timeout,
        crate::clock::Clock::Host,
    );
    let session = CancellationToken::new();
    let stop = session.clone();
    tokio::spawn(async move {
        sleep(secs(3.0)).await;
        stop.cancel();
    });
    let first = e.lead(&mut body, &session).await;
    assert!(first.is_ok(), "{first:?}");
    assert!(!store.calls(Op::WriteEpoch).is_empty(), "led");
    store.set(Op::Acquire, Behaviour::Fail(denied()));
    let later = CancellationToken::new();
    let led = tokio::time::timeout(secs(60.0), e.lead(&mut body, &later)).await;
    assert!(led.is_err(), "kept trying: {led:?}");

    let mut fresh = Elector::with_store(store.clone(), "b", timing()).unwrap();
    let led = tokio::time::timeout(secs(60.0), fresh.lead(&mut body, &later)).await;
    assert!(matches!(led, Ok(Err(Error::Denied(_)))), "{led:?}");
}

/// The holder metadata as someone wrote it on the blob, naming `epoch`.
fn holder(epoch: u64) -> Option<Holder> {
    Some(Holder {
        identity: "someone".into(),
        epoch,
        acquired_at: OffsetDateTime::UNIX_EPOCH,
        lease: None,
        slots: None,
        stamp: Default::default(),
    })
}

/// An epoch on the blob that cannot grow, or that is no number, keeps the member from
/// leading: the lease it takes goes back, and no body runs. A large one that can grow still
/// leads, on the next epoch.
#[tokio::test(start_paused = true)]
async fn tampered_epochs_keep_the_member_from_leading() {
    let store = Arc::new(MemoryStore::default());
    store.set_holder(holder(u64::MAX));
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    sleep(secs(10.0)).await;
    assert!(lives.all().is_empty(), "led on an epoch that cannot grow");
    assert!(store.calls(Op::Acquire).len() > 1, "tried again");
    assert!(!store.is_leased(), "released");
    store.set_holder(holder(u64::MAX - 1));
    assert_eq!(lives.nth(1).await.epoch, u64::MAX);
    a.stop().await;

    let store = Arc::new(MemoryStore::default());
    store.set_holder(holder(7));
    store.write_garbage(META_EPOCH, "seven");
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    sleep(secs(10.0)).await;
    assert!(lives.all().is_empty(), "led on an epoch that is no number");
    assert!(store.calls(Op::Acquire).len() > 1, "tried again");
    assert!(!store.is_leased(), "released");
    store.repair();
    assert_eq!(lives.nth(1).await.epoch, 8);
    a.stop().await;
}

/// Issue 15: the epochs of one blob grow term after term, and keep growing when the blob
/// loses its metadata (deleted and created again): never an epoch handed out before.
#[tokio::test(start_paused = true)]
async fn epochs_keep_growing_when_the_blob_loses_its_metadata() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, Some(secs(1.0)));
    for n in 1..=3 {
        lives.nth(n).await;
    }
    store.recreate();
    // Real time must pass for the wall clock to move: the terms took no paused time of it.
    std::thread::sleep(Duration::from_millis(5));
    lives.nth(4).await;
    a.stop().await;
    let epochs: Vec<u64> = lives.all().iter().map(|l| l.epoch).collect();
    assert!(
        epochs.windows(2).all(|w| w[1] > w[0]),
        "epochs grew term after term: {epochs:?}"
    );
    assert_eq!(epochs[1], epochs[0] + 1, "{epochs:?}");
}

/// A renew that hangs is cut at the request timeout and sent again, never past the stop
/// deadline, at which the term ends: sent at +4 s (cut at +8 s) and again after its retry's
/// pause (cut at the stop deadline, +9 s) (docs/safety.md, rule 4).
#[tokio::test(start_paused = true)]
async fn a_hung_renew_is_cut_at_the_request_timeout_and_never_past_the_stop_deadline() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    let life = lives.nth(1).await;
    store.set(Op::Renew, Behaviour::Hang);
    let gone = lives.gone(1).await;
    let t = timing();
    let stop_at = t.duration - t.safety_margin - t.stop_timeout;
    assert_eq!(gone - life.start, stop_at, "ended at the stop deadline");
    let renews: Vec<Duration> = (store.calls(Op::Renew).into_iter())
        .filter(|at| *at < gone)
        .map(|at| at - life.start)
        .collect();
    let r = t.request_timeout();
    let [first, again] = renews[..] else {
        panic!("two renews: {renews:?}")
    };
    assert_eq!(first, r, "{renews:?}");
    // The first cut at +8 s; the retry (after its pause) cut at the stop deadline.
    assert!(again >= r * 2 && again < stop_at, "{renews:?}");
    a.stop().await;
}

/// The machine sleeps past the stop deadline right after winning: CLOCK_MONOTONIC (tokio's
/// time) stands still, the lease clock does not; the term ends at the member's next look
/// without a renew (rule 1: nothing is done on a lease that may have expired).
#[tokio::test(start_paused = true)]
async fn a_suspend_past_the_stop_deadline_ends_the_term_without_a_renew() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    let life = lives.nth(1).await;
    crate::clock::fake::suspend(secs(20.0));
    let gone = tokio::time::timeout(secs(60.0), lives.gone(1)).await;
    let gone = gone.expect("the term ended");
    let t = timing();
    assert!(
        gone - life.start <= t.request_timeout(),
        "ended at its next look, {:?} in",
        gone - life.start
    );
    let renewed = (store.calls(Op::Renew).into_iter()).filter(|at| *at >= life.start);
    assert_eq!(renewed.count(), 0, "no renew past the stop deadline");
    a.stop().await;
}

/// The record keeper judges when its listing is due on the lease clock, as the line's
/// instants are: after the machine slept longer than [`Pace::LIST_EVERY`], its next look
/// lists, rather than a `LIST_EVERY` of the monotonic clock later (on which no time passed).
#[tokio::test(start_paused = true)]
async fn after_a_suspend_longer_than_the_listing_period_the_keeper_lists_at_its_next_look() {
    let store = Arc::new(MemoryStore::default());
    // Someone outside the line holds the lease for long: `a` follows, listing only as its
    // keeper does.
    store.steal(3600);
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    crate::elector::testing::joined(&store, "a").await;
    sleep(secs(60.0)).await;
    let resumed = Instant::now();
    crate::clock::fake::suspend(Pace::LIST_EVERY * 2);
    sleep(Pace::RECORD_RENEW * 2).await;
    let lists: Vec<Duration> = (store.calls(Op::List).into_iter())
        .filter(|t| *t >= resumed)
        .map(|t| t - resumed)
        .collect();
    println!("listed after the resume at {lists:?}");
    let first = *lists.first().expect("the keeper listed after the resume");
    assert!(
        first <= Pace::RECORD_RENEW,
        "listed {first:?} after the resume"
    );
    a.stop().await;
}
