//! A vanished blob is a lock-delay, not a free lease (docs/safety.md, "Recovery from anything"):
//! the core's `lock_delay::LockDelays` keeps the rule, shared here by the campaign and the renew
//! loops at the lease clock's now; [`create`] creates a missing blob, marked
//! ([`META_RECREATED`](crate::store::META_RECREATED)) unless the group is brand-new.

use super::observe::{LeaseOp, Observer};
use super::request::timed;
use crate::clock::Clock;
use crate::fmt::human;
use crate::store::{BlobState, LeaseState, LeaseStore, StoreError};
use crate::timing::Timing;
use leasehold_core::Pace;
use leasehold_core::blob::LeaseBlob;
use leasehold_core::lock_delay::LockDelays;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Until when this member starts no body on each slot's blob, because it found the blob gone or
/// created again after a deletion, and whether it knows the blob to exist again. Shared by the
/// campaign and the renew loops.
#[derive(Clone)]
pub(crate) struct Vanished {
    delays: Arc<Mutex<LockDelays<Instant>>>,
    /// The elector's clocks: the lock-delays run on its lease clock.
    clock: Clock,
}

impl Vanished {
    /// No lock-delay yet, on `clock`.
    pub fn new(clock: Clock) -> Self {
        Self {
            delays: Arc::default(),
            clock,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut LockDelays<Instant>) -> T) -> T {
        f(&mut self.delays.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// This member saw the blob of `slot` led.
    pub fn led(&self, slot: u32) {
        self.with(|d| d.led(slot, self.clock.now()));
    }

    /// This member won a term on the blob of `slot`.
    pub fn won(&self, slot: u32) {
        self.with(|d| d.won(slot, self.clock.now()));
    }

    /// Whether this member knows the blob of `slot` is no brand-new one.
    pub fn was_led(&self, slot: u32) -> bool {
        self.with(|d| d.was_led(slot))
    }

    /// The blob of `slot` is gone (404).
    pub fn missing(&self, slot: u32, timing: &Timing) {
        let lock_delay = Pace::new(timing).lock_delay();
        let began = self.with(|d| d.missing(slot, self.clock.now(), lock_delay));
        say_began(slot, began);
    }

    /// Whether the blob of `slot`, as `state` read it after an acquire, is under this member's
    /// lock-delay ([`LockDelays::before_epoch`]).
    pub fn before_epoch(&self, slot: u32, state: &BlobState, timing: &Timing) -> bool {
        let lock_delay = Pace::new(timing).lock_delay();
        let judged =
            self.with(|d| d.before_epoch(slot, &state.look(), self.clock.now(), lock_delay));
        say_began(slot, judged.began);
        judged.delayed
    }

    /// What a look at the blob of `slot` (during its lock-delay, or a watcher's read) found
    /// (`None`: missing;
    /// [`LockDelays::looked`]).
    pub fn looked(&self, slot: u32, state: Option<&BlobState>, timing: &Timing) {
        let lock_delay = Pace::new(timing).lock_delay();
        let look = state.map(LeaseBlob::look);
        let began = self.with(|d| d.looked(slot, look.as_ref(), self.clock.now(), lock_delay));
        say_began(slot, began);
    }

    /// Whether the blob of `slot`, under its lock-delay, is due a look; notes this one.
    pub fn look_due(&self, slot: u32, every: Duration) -> bool {
        self.with(|d| d.look_due(slot, every, self.clock.now()))
    }

    /// This member created the blob of `slot` again.
    pub fn created(&self, slot: u32) {
        self.with(|d| d.created(slot));
    }

    /// A leader wrote an epoch on the blob of `slot` since: its lock-delay is over.
    pub fn over(&self, slot: u32) {
        self.with(|d| d.over(slot, self.clock.now()));
    }

    /// A brand-new blob, created by this member: no lock-delay.
    pub fn fresh(&self, slot: u32) {
        self.with(|d| d.fresh(slot));
    }

    /// Until when no body of `slot` may start (`None`: no lock-delay, or it is over).
    pub fn until(&self, slot: u32) -> Option<Instant> {
        self.with(|d| d.until(slot, self.clock.now()))
    }

    /// Whether the blob of `slot` was found gone and is not known to exist again.
    pub fn to_create(&self, slot: u32) -> bool {
        self.with(|d| d.to_create(slot, self.clock.now()))
    }
}

/// The log line of a lock-delay that began (`began`: how long it is).
fn say_began(slot: u32, began: Option<Duration>) {
    if let Some(left) = began {
        tracing::warn!(
            slot,
            "the lease blob was deleted (under its leader?): no body starts on it before a \
             lock-delay of the lease duration and the safety margin, in {}",
            human(left)
        );
    }
}

/// Creates the missing blob `blob` of a group whose members `group` lists: marked as created
/// again after a deletion (returns `true`) when this member saw it led before (`led`), or a
/// live member other than `me` has a record; plainly otherwise (a brand-new group: no body
/// ran on it, no lock-delay; returns `false`). The container must exist.
pub(crate) async fn create<S: LeaseStore>(
    group: &S,
    blob: &S,
    me: &str,
    led: bool,
    timing: &Timing,
    clock: Clock,
    observer: &dyn Observer,
) -> Result<bool, StoreError> {
    let others = led || {
        let limit = clock.now() + timing.request_timeout();
        match timed(clock, observer, LeaseOp::List, limit, group.list_members()).await {
            Ok(members) => members
                .iter()
                .any(|r| r.lease == LeaseState::Leased && r.identity() != me),
            // Credentials that may not list the container keep no member records either (they
            // need sp=rwdlc): the group elects as without members, and so without the delay.
            Err(e) if e.failure() == crate::store::Failure::Denied => false,
            Err(e) => return Err(e),
        }
    };
    let limit = clock.now() + timing.request_timeout();
    if others {
        timed(clock, observer, LeaseOp::Prepare, limit, blob.recreate(me)).await?;
    } else {
        timed(clock, observer, LeaseOp::Prepare, limit, blob.prepare(true)).await?;
    }
    Ok(others)
}

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
