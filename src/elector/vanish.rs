//! A vanished blob is a lock-delay, not a free lease (docs/safety.md, "Recovery from anything").
//!
//! When the lease blob (or a slot blob) is deleted under its leader, that leader learns of it
//! only at its next renew, and its body lives until then, at most until its kill deadline:
//! at most `L` after the deletion. A member that found the blob gone and created it again at
//! once, and led on it, would run its body beside that one. So:
//!
//! * A member that creates a missing blob while the group has other live members marks it
//!   ([`META_RECREATED`](crate::store::META_RECREATED)); a brand-new group (no member records
//!   but its own) creates it plainly, and leads at once.
//! * A member that finds the blob missing starts no body on it before `L + M` from then; one
//!   that finds it marked, before `L + M` (and a second: the service's clocks count whole
//!   seconds) from when it was created again, by the blob's age on the service's clock
//!   ([`Vanished`]). A term won meanwhile gives the lease back at once, without an epoch.
//! * The first epoch written on the blob removes the mark: whoever wrote it waited out the
//!   lock-delay.

use super::observe::{LeaseOp, Observer};
use super::request::timed;
use crate::clock;
use crate::fmt::human;
use crate::store::{LeaseState, LeaseStore, StoreError};
use crate::timing::Timing;
use leasehold_core::Pace;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// Until when this member starts no body on each slot's blob, because it found the blob gone or
/// created again after a deletion (docs/safety.md, "Recovery from anything"), and whether it knows
/// the blob to exist again. Shared by the campaign and the renew loops.
#[derive(Clone, Default)]
pub(crate) struct Vanished(Arc<Mutex<Notes>>);

#[derive(Default)]
struct Notes {
    /// By slot.
    deleted: BTreeMap<u32, Note>,
    /// The slots whose blob this member has seen led (with an epoch): found missing later, it
    /// was deleted, whatever the member records say.
    led: std::collections::BTreeSet<u32>,
    /// The slots whose blob this member found missing (or created again after a deletion): a
    /// wipe takes every blob, so each of them tells of the others.
    missing: std::collections::BTreeSet<u32>,
    /// Whether this member ever led a slot.
    held: bool,
    /// When each slot's blob under a lock-delay was last looked at.
    looked: BTreeMap<u32, Instant>,
    /// When this member first saw each slot's blob led (or the blob it knows since): a blob
    /// created later is another one ([`Vanished::reborn`]).
    led_at: BTreeMap<u32, Instant>,
}

/// What a member knows of one slot's deleted blob.
#[derive(Debug, Clone)]
struct Note {
    /// No body on it before this.
    until: Instant,
    /// Whether the blob exists again (created by this member or read marked).
    exists: bool,
}

impl Vanished {
    fn with<T>(&self, f: impl FnOnce(&mut BTreeMap<u32, Note>) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|e| e.into_inner()).deleted)
    }

    /// This member saw the blob of `slot` led: an epoch on it (a leader wrote one), or its
    /// lease held by another.
    pub fn led(&self, slot: u32) {
        let mut notes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        notes.led.insert(slot);
        notes.led_at.entry(slot).or_insert_with(clock::now);
    }

    /// This member won a term on the blob of `slot`.
    pub fn won(&self, slot: u32) {
        let mut notes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        notes.held = true;
        notes.led.insert(slot);
        notes.led_at.entry(slot).or_insert_with(clock::now);
    }

    /// Whether the blob of `slot`, created `age` ago by the service's clock, was created after
    /// this member first saw that slot led: then the blob it saw led was deleted since, and
    /// this one created again, marked or not (plainly, by a member that took the group for a
    /// brand-new one: a wipe of the blobs and the records), with an epoch on it or not. Its
    /// lock-delay runs from its creation ([`Vanished::marked`]); once that is over, this blob
    /// is the one known.
    pub fn reborn(&self, slot: u32, age: Duration, timing: &Timing) -> bool {
        let now = clock::now();
        let Some(born) = now.checked_sub(age) else {
            return false;
        };
        let mut notes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let Some(seen) = notes.led_at.get(&slot).copied() else {
            return false;
        };
        // (The service's clock counts whole seconds: two of them apart is surely later.)
        if born <= seen + 2 * Pace::SERVICE_CLOCK {
            return false;
        }
        if born + Pace::SERVICE_CLOCK + Pace::new(timing).lock_delay() <= now {
            notes.led_at.insert(slot, now);
            return false;
        }
        true
    }

    /// Whether this member knows the blob of `slot` is no brand-new one: it saw that blob led,
    /// led a slot of its group itself, or found another blob of its group missing (a wipe
    /// takes them all). Only a member that did none of these may take a missing blob, or one
    /// without an epoch, for a brand-new group's (docs/safety.md, "What a lease cannot
    /// promise").
    pub fn was_led(&self, slot: u32) -> bool {
        let notes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        notes.led.contains(&slot) || notes.held || notes.missing.iter().any(|s| *s != slot)
    }

    /// The blob of `slot` is gone (404): it was deleted before now, so whatever body ran on it
    /// is dead `L - M` from now at the latest. No body before `L + M` from now.
    pub fn missing(&self, slot: u32, timing: &Timing) {
        let until = clock::now() + timing.duration + timing.safety_margin;
        self.note(slot, until, false);
    }

    /// The blob of `slot` was created again after a deletion, `age` ago by the service's
    /// clock (whole seconds, hence the second added): it was deleted before that.
    pub fn marked(&self, slot: u32, age: Duration, timing: &Timing) {
        let created =
            clock::now().checked_sub(age).unwrap_or_else(clock::now) + Pace::SERVICE_CLOCK;
        self.note(slot, created + timing.duration + timing.safety_margin, true);
    }

    /// Notes a lock-delay until `until`, or later if one running already ends later (a read of
    /// the mark counts its age in whole seconds: a longer wait is never wrong, a shorter one
    /// could be).
    fn note(&self, slot: u32, until: Instant, exists: bool) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .missing
            .insert(slot);
        let was = self.with(|v| {
            let until = match v.get(&slot) {
                Some(w) if w.until > clock::now() => until.max(w.until),
                _ => until,
            };
            v.insert(slot, Note { until, exists })
        });
        if was.is_none_or(|w| w.until <= clock::now()) {
            tracing::warn!(
                slot,
                "the lease blob was deleted (under its leader?): no body starts on it before a \
                 lock-delay of the lease duration and the safety margin, in {}",
                human(until.saturating_duration_since(clock::now()))
            );
        }
    }

    /// Whether the blob of `slot`, under its lock-delay, is due a look (the last one was at
    /// least `every` ago, or none was); notes this one.
    pub fn look_due(&self, slot: u32, every: Duration) -> bool {
        let now = clock::now();
        let mut notes = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match notes.looked.get(&slot) {
            Some(at) if now.saturating_duration_since(*at) < every => false,
            _ => {
                notes.looked.insert(slot, now);
                true
            }
        }
    }

    /// This member created the blob of `slot` again.
    pub fn created(&self, slot: u32) {
        self.with(|v| {
            if let Some(note) = v.get_mut(&slot) {
                note.exists = true;
            }
        });
    }

    /// A leader wrote an epoch on the blob of `slot` since: its lock-delay is over.
    pub fn over(&self, slot: u32) {
        self.with(|v| v.remove(&slot));
        self.led(slot);
    }

    /// A brand-new blob, created by this member (no body ever ran on it): no lock-delay, and
    /// the blob it found missing was never there (a brand-new group's).
    pub fn fresh(&self, slot: u32) {
        self.with(|v| v.remove(&slot));
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .missing
            .remove(&slot);
    }

    /// Until when no body of `slot` may start (`None`: no lock-delay, or it is over).
    pub fn until(&self, slot: u32) -> Option<Instant> {
        let note = self.with(|v| v.get(&slot).cloned())?;
        (note.until > clock::now()).then_some(note.until)
    }

    /// Whether the blob of `slot` was found gone and is not known to exist again: it is
    /// created again at once (the lock-delay counts from before that), not after the delay.
    pub fn to_create(&self, slot: u32) -> bool {
        self.with(|v| {
            v.get(&slot)
                .is_some_and(|n| !n.exists && n.until > clock::now())
        })
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
    observer: &dyn Observer,
) -> Result<bool, StoreError> {
    let others = led || {
        let limit = clock::now() + timing.request_timeout();
        match timed(observer, LeaseOp::List, limit, group.list_members()).await {
            Ok(members) => members
                .iter()
                .any(|r| r.lease == LeaseState::Leased && r.identity() != me),
            // Credentials that may not list the container keep no member records either (they
            // need sp=rwdlc): the group elects as without members, and so without the delay.
            Err(e) if e.failure() == crate::store::Failure::Denied => false,
            Err(e) => return Err(e),
        }
    };
    let limit = clock::now() + timing.request_timeout();
    if others {
        timed(observer, LeaseOp::Prepare, limit, blob.recreate(me)).await?;
    } else {
        timed(observer, LeaseOp::Prepare, limit, blob.prepare(true)).await?;
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
