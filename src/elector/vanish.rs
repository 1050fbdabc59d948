//! A vanished blob is a lock-delay, not a free lease (docs/safety.md, "Recovery from anything"):
//! the core's `lock_delay::LockDelays` keeps the rule (the member's); the start-up prepare
//! (`prepare::Startup`) creates a missing blob before the first campaign, marked
//! ([`META_RECREATED`](crate::store::META_RECREATED)) when a live member other than this one
//! has a record, plainly otherwise (a brand-new group: no body ran on it, no lock-delay).
//! Here, the tests of the lock-delay on paused time.

/// The lock-delay on paused time: instances of one group on the in-memory store.
#[cfg(test)]
mod tests {
    use crate::elector::testing::{Instance, Lives, joined, stop_all, timing};
    use crate::store::memory::MemoryStore;
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::time::{Instant, sleep};

    /// `a` leads; `b` and `c` follow, in line.
    async fn three() -> (Arc<MemoryStore>, Lives, Instance, Instance, Instance) {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let a = Instance::start(&store, "a", &lives, None);
        lives.nth(1).await;
        let b = Instance::start(&store, "b", &lives, None);
        let c = Instance::start(&store, "c", &lives, None);
        joined(&store, "b").await;
        joined(&store, "c").await;
        sleep(Duration::from_secs(20)).await;
        (store, lives, a, b, c)
    }

    /// Issue 25, case 2: the blob deleted under its leader. The leader learns of it at its next
    /// renew and stops its body; a member that finds the blob gone creates it again at once,
    /// marked, and no body starts on it before `L + M` after the deletion was seen: never two
    /// bodies at once, and a leader again within the lock-delay and a poll.
    #[tokio::test(start_paused = true)]
    async fn a_blob_deleted_under_its_leader_is_led_again_after_the_lock_delay_only() {
        let (store, lives, a, b, c) = three().await;
        let deleted = Instant::now();
        store.delete();
        let next = lives.nth(2).await;
        let t = timing();
        let waited = next.start - deleted;
        println!("led again {waited:?} after the deletion");
        assert!(
            waited >= t.duration + t.safety_margin,
            "not before the lock-delay: {waited:?}"
        );
        assert!(
            waited <= t.duration + t.safety_margin + t.longest_poll() + Duration::from_secs(6),
            "{waited:?}"
        );
        assert!(store.exists(), "created again");
        assert!(lives.all()[0].gone.unwrap() <= next.start);
        lives.assert_one_at_a_time();
        stop_all([a, b, c]).await;
    }

    /// Issue 25, case 1: the blob deleted under its leader, then again while the next leader
    /// waits out the lock-delay and is stopped. Nobody watches a leader that is gone: the group
    /// leads again within the liveness bound.
    #[tokio::test(start_paused = true)]
    async fn a_blob_deleted_twice_is_led_again_within_the_liveness_bound() {
        let (store, lives, a, b, c) = three().await;
        store.delete();
        sleep(Duration::from_secs(8)).await;
        store.delete();
        let quiet = Instant::now();
        a.stop().await;
        let next = lives.nth(2).await;
        let bound = crate::sim::liveness_bound(&timing(), 1);
        let took = next.start - quiet;
        println!("led again {took:?} after the second deletion (bound {bound:?})");
        assert!(took <= bound);
        lives.assert_one_at_a_time();
        stop_all([b, c]).await;
    }

    /// The blob deleted under its leader, then again once every member waits out the lock-delay
    /// of the blob created again (simulator seed 12503): they look at the blob every watch
    /// period meanwhile, so the second deletion is seen within one, not only once the first
    /// delay is over (two delays nearly in a row, past the liveness bound).
    #[tokio::test(start_paused = true)]
    async fn a_blob_deleted_again_during_its_lock_delay_is_seen_within_a_watch_period() {
        let (store, lives, a, b, c) = three().await;
        store.delete();
        while !store.exists() {
            sleep(Duration::from_millis(10)).await;
        }
        let t = timing();
        let seen_within = leasehold_core::Pace::new(&t).watch_longest();
        // Each member has read the mark (a watch period) and waits out the delay.
        sleep(seen_within + Duration::from_millis(100)).await;
        store.delete();
        let again = Instant::now();
        let next = lives.nth(2).await;
        let took = next.start - again;
        let most = seen_within + t.duration + t.safety_margin + t.longest_poll() * 2;
        println!("led again {took:?} after the second deletion (at most {most:?})");
        assert!(took >= t.duration + t.safety_margin, "{took:?}");
        assert!(took <= most, "{took:?}");
        lives.assert_one_at_a_time();
        stop_all([a, b, c]).await;
    }

    /// A brand-new group (its blob missing, no member records): the first member creates it
    /// plainly and leads at once.
    #[tokio::test(start_paused = true)]
    async fn a_brand_new_group_leads_at_once() {
        let store = Arc::new(MemoryStore::default());
        store.delete();
        let lives = Lives::default();
        let began = Instant::now();
        let a = Instance::start(&store, "a", &lives, None);
        let first = lives.nth(1).await;
        let took = first.start - began;
        println!("led {took:?} after it started");
        assert!(took < timing().longest_poll() * 2, "{took:?}");
        a.stop().await;
    }
}
