//! The member record's keeper on paused time: what it sends as this instance's terms come and
//! go.

use crate::config::Election;
use crate::elector::members::Membership;
use crate::elector::observe::Unobserved;
use crate::elector::testing::{joined, timing};
use crate::secret::Secret;
use crate::store::LeaseId;
use crate::store::memory::{MemoryStore, Op};
use leasehold_core::Pace;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::{Instant, sleep};

/// Member `a` of a group of one slot on the host's clocks, once its record is in line.
async fn joined_as_a() -> (Arc<MemoryStore>, Membership) {
    let store = Arc::new(MemoryStore::default());
    let m = Membership::start(
        store.clone(),
        Arc::new(Unobserved),
        timing(),
        crate::clock::Clock::Host,
        "a",
        &Election::default(),
        LeaseId::random(),
        LeaseId::random(),
        &Secret::new("token".into()),
        1,
    );
    joined(&store, "a").await;
    (store, m)
}

/// A new leader lists the line `Pace::TERM_START_QUIET` after its term began, so that a handoff at
/// the term's end knows its successor's lease id as it is. A term that ended and another that
/// began between two looks of the keeper (as on a multi-threaded runtime, where the keeper may
/// look while the line changes twice: the bench's voluntary handovers, back and forth, found
/// 1 to 5 in 20 handed to a stale lease id and taking a poll, ~1.05 s) still gets its listing.
#[tokio::test(start_paused = true)]
async fn a_term_begun_between_two_looks_of_the_keeper_is_listed() {
    let (store, m) = joined_as_a().await;
    let term = || Some((1, OffsetDateTime::now_utc(), LeaseId::random()));
    let lists_since = |from: Instant| -> Vec<Duration> {
        let calls = store.calls(Op::List).into_iter().filter(|t| *t >= from);
        calls.map(|t| t - from).collect()
    };
    sleep(Duration::from_secs(1)).await;
    let first = Instant::now();
    m.leading(term());
    sleep(Pace::TERM_START_QUIET * 2).await;
    assert_eq!(
        lists_since(first),
        [Pace::TERM_START_QUIET],
        "the first term's listing"
    );
    // The first term ends and the next begins before the keeper looks again.
    let second = Instant::now();
    m.leading(None);
    m.leading(term());
    sleep(Pace::TERM_START_QUIET * 2).await;
    let lists = lists_since(second);
    println!("after the second term began: listed at {lists:?}");
    assert_eq!(lists, [Pace::TERM_START_QUIET], "the second term's listing");
    m.leave().await;
}

/// The keeper judges when its listing is due on the lease clock, as the line's instants are:
/// after the machine slept longer than [`Pace::LIST_EVERY`], its next look lists, rather than a
/// `LIST_EVERY` of the monotonic clock later (on which no time passed).
#[tokio::test(start_paused = true)]
async fn after_a_suspend_longer_than_the_listing_period_the_keeper_lists_at_its_next_look() {
    let (store, m) = joined_as_a().await;
    sleep(Duration::from_secs(1)).await;
    let resumed = Instant::now();
    crate::clock::fake::suspend(Pace::LIST_EVERY * 2);
    sleep(Pace::RECORD_RENEW * 2).await;
    let lists: Vec<Duration> = (store.calls(Op::List).into_iter())
        .filter(|t| *t >= resumed)
        .map(|t| t - resumed)
        .collect();
    println!(
        "listed after the resume at {lists:?} (a look every {:?})",
        Pace::RECORD_RENEW
    );
    let first = *lists.first().expect("the keeper listed after the resume");
    assert!(
        first <= Pace::RECORD_RENEW,
        "listed {first:?} after the resume"
    );
    m.leave().await;
}
