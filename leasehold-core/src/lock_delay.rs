//! A vanished blob is a lock-delay, not a free lease (docs/safety.md, "Recovery from anything").
//!
//! When the lease blob (or a slot blob) is deleted under its leader, that leader learns of it
//! only at its next renew, and its body lives until then, at most until its kill deadline: at
//! most `L` after the deletion. A member that found the blob gone and created it again at once,
//! and led on it, would run its body beside that one. So:
//!
//! * A member that creates a missing blob while the group has other live members marks it; a
//!   brand-new group (no member records but its own) creates it plainly, and leads at once.
//! * A member that finds the blob missing starts no body on it before the lock-delay `L + M`
//!   ([`Pace::lock_delay`]) from then ([`LockDelays::missing`]); one that finds it marked,
//!   before `L + M` (and a second: the service's clocks count whole seconds) from when it was
//!   created again, by the blob's age on the service's clock ([`LockDelays::marked`]). A term
//!   won meanwhile gives the lease back at once, without an epoch.
//! * The first epoch written on the blob removes the mark: whoever wrote it waited out the
//!   lock-delay ([`LockDelays::over`]).
//!
//! Each slot's blob has its own. Each replica of a lease held on several storage accounts has
//! its own too, by its blob's age ([`old_at`], kept with what the member knows of that replica
//! in quorum.rs). `I` is the lease clock's instant; the shell hands in `now`.

use crate::pace::Pace;
use crate::timing::Moment;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What a member knows of one slot's deleted blob.
#[derive(Debug, Clone, Copy)]
struct Delay<I> {
    /// No body on it before this.
    until: I,
    /// Whether the blob exists again (created by this member or read marked).
    exists: bool,
}

/// Until when this member starts no body on each slot's blob, because it found the blob gone or
/// created again after a deletion, and what it knows of each blob's past.
#[derive(Debug, Clone)]
pub struct LockDelays<I> {
    /// By slot.
    delays: BTreeMap<u32, Delay<I>>,
    /// The slots whose blob this member has seen led (with an epoch): found missing later, it
    /// was deleted, whatever the member records say.
    led: BTreeSet<u32>,
    /// The slots whose blob this member found missing (or created again after a deletion): a
    /// wipe takes every blob, so each of them tells of the others.
    missing: BTreeSet<u32>,
    /// Whether this member ever led a slot.
    held: bool,
    /// When each slot's blob under a lock-delay was last looked at.
    looked: BTreeMap<u32, I>,
    /// When this member first saw each slot's blob led (or the blob it knows since): a blob
    /// created later is another one ([`LockDelays::reborn`]).
    led_at: BTreeMap<u32, I>,
    /// The simulator's mutant `create-unmarked`: [`LockDelays::group_was_led`] forgets what
    /// this member saw, so that it creates a missing blob plainly whenever its listing shows
    /// no other live member (off outside the simulator).
    pub create_unmarked: bool,
    /// The simulator's mutant `brand-new-slot-delayed`: [`LockDelays::was_led`] answers for
    /// every slot as soon as this member saw any slot of its group led, so that a slot's blob
    /// no leader took yet is put under a lock-delay (off outside the simulator).
    pub any_slot_led: bool,
}

/// What a read of a slot's blob shows, as its lock-delay reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    /// The blob carries the mark of a blob created again after a deletion.
    pub marked: bool,
    /// The blob carries an epoch (a leader wrote one).
    pub has_epoch: bool,
    /// How old the blob is by the service's clock.
    pub age: Duration,
}

/// What [`LockDelays::before_epoch`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Judged {
    /// The blob is under this member's lock-delay: no epoch, the lease back at once.
    pub delayed: bool,
    /// A lock-delay began, this long.
    pub began: Option<Duration>,
}

impl<I> Default for LockDelays<I> {
    fn default() -> Self {
        Self {
            delays: BTreeMap::new(),
            led: BTreeSet::new(),
            missing: BTreeSet::new(),
            held: false,
            looked: BTreeMap::new(),
            led_at: BTreeMap::new(),
            create_unmarked: false,
            any_slot_led: false,
        }
    }
}

impl<I: Moment> LockDelays<I> {
    /// This member saw the blob of `slot` led at `now`: an epoch on it (a leader wrote one), or
    /// its lease held by another.
    pub fn led(&mut self, slot: u32, now: I) {
        self.led.insert(slot);
        self.led_at.entry(slot).or_insert(now);
    }

    /// This member won a term on the blob of `slot` at `now`.
    pub fn won(&mut self, slot: u32, now: I) {
        self.held = true;
        self.led(slot, now);
    }

    /// Whether the blob of `slot`, created `age` before `now` by the service's clock, was
    /// created after this member first saw that slot led: then the blob it saw led was deleted
    /// since, and this one created again, marked or not (plainly, by a member that took the
    /// group for a brand-new one: a wipe of the blobs and the records), with an epoch on it or
    /// not. Its lock-delay (`lock_delay`) runs from its creation ([`LockDelays::marked`]); once
    /// that is over, this blob is the one known.
    pub fn reborn(&mut self, slot: u32, age: Duration, now: I, lock_delay: Duration) -> bool {
        let Some(seen) = self.led_at.get(&slot).copied() else {
            return false;
        };
        // Born at `now - age`, the same blob unless born after `seen` (and two seconds after:
        // the service's clock counts whole seconds). An age too large to place (a blob there
        // from before any clock this member keeps) is of the same blob.
        if (now - seen).saturating_sub(2 * Pace::SERVICE_CLOCK) <= age {
            return false;
        }
        if age >= Pace::SERVICE_CLOCK + lock_delay {
            self.led_at.insert(slot, now);
            return false;
        }
        true
    }

    /// Whether this member knows the blob of `slot` is no brand-new one: it saw that blob led,
    /// led a slot of its group itself, or found another blob of its group missing (a wipe
    /// takes them all). Only a member that did none of these may take a blob without an
    /// epoch for a brand-new group's (docs/safety.md, "What a lease cannot promise").
    pub fn was_led(&self, slot: u32) -> bool {
        (self.any_slot_led && !self.led.is_empty())
            || self.led.contains(&slot)
            || self.held
            || self.missing.iter().any(|s| *s != slot)
    }

    /// Whether this member knows its group is no brand-new one when it finds the blob of
    /// `slot` missing, so that it creates that blob again marked: [`LockDelays::was_led`], or
    /// it saw a blob of any slot of its group led (a group once led is no brand-new one,
    /// whichever blob showed it, and a wipe takes every blob). Only a member that knows none
    /// of this may create a missing blob plainly, as a brand-new group's, and lead at once.
    /// (A blob that exists without an epoch is another matter: a group's other slots start
    /// that way, [`LockDelays::before_epoch`].)
    pub fn group_was_led(&self, slot: u32) -> bool {
        !self.create_unmarked && (!self.led.is_empty() || self.was_led(slot))
    }

    /// The blob of `slot` is gone (404) at `now`: it was deleted before now, so whatever body
    /// ran on it is dead `L - M` from now at the latest. No body before `lock_delay` from now.
    /// Returns how long the lock-delay is, when one begins (none ran).
    pub fn missing(&mut self, slot: u32, now: I, lock_delay: Duration) -> Option<Duration> {
        self.note(slot, now, lock_delay, false)
    }

    /// The blob of `slot` was created again after a deletion, `age` before `now` by the
    /// service's clock (whole seconds, hence the second added): it was deleted before that.
    /// Returns how long the lock-delay is, when one begins.
    pub fn marked(
        &mut self,
        slot: u32,
        age: Duration,
        now: I,
        lock_delay: Duration,
    ) -> Option<Duration> {
        let left = old_at(now, age, Pace::SERVICE_CLOCK + lock_delay) - now;
        self.note(slot, now, left, true)
    }

    /// Notes a lock-delay of `left` from `now`, or longer if one running already ends later (a
    /// read of the mark counts its age in whole seconds: a longer wait is never wrong, a
    /// shorter one could be). Returns `left` when no lock-delay was running.
    fn note(&mut self, slot: u32, now: I, left: Duration, exists: bool) -> Option<Duration> {
        self.missing.insert(slot);
        let until = now + left;
        let was = self.delays.get(&slot).filter(|d| d.until > now);
        let until = was.map_or(until, |d| until.max(d.until));
        let began = was.is_none().then_some(left);
        self.delays.insert(slot, Delay { until, exists });
        began
    }

    /// Whether the blob of `slot`, as `look` read it at `now` after this member acquired its
    /// lease, is under this member's lock-delay, so that no epoch is written on it (and so no
    /// body starts) before the delay is over. A blob created again after a deletion starts one
    /// (marked, or born after this member saw the slot led); so does a blob with no epoch,
    /// created within a lock-delay, of a slot this member knows was led (created again plainly
    /// after a deletion: a wipe of the blobs and the records looks like a brand-new group to a
    /// member that never saw it led; a body on the deleted blob lived at most `L` after the
    /// deletion, before this creation). An epoch that a leader wrote on it since ends the delay
    /// for everyone.
    pub fn before_epoch(&mut self, slot: u32, look: &Look, now: I, lock_delay: Duration) -> Judged {
        let delayed = if look.marked || self.reborn(slot, look.age, now, lock_delay) {
            true
        } else if look.has_epoch {
            self.over(slot, now);
            false
        } else {
            self.was_led(slot) && look.age < lock_delay + Pace::SERVICE_CLOCK
        };
        if !delayed {
            return Judged::default();
        }
        let began = self.marked(slot, look.age, now, lock_delay);
        Judged {
            delayed: self.until(slot, now).is_some(),
            began,
        }
    }

    /// What a look at the blob of `slot` during its lock-delay found at `now` (`None`: the blob
    /// is missing): deleted again, the lock-delay begins again now; created again by another
    /// member since, it runs from then; an epoch on it ends it (whoever wrote it waited it
    /// out). Returns how long a lock-delay that began is.
    pub fn looked(
        &mut self,
        slot: u32,
        look: Option<&Look>,
        now: I,
        lock_delay: Duration,
    ) -> Option<Duration> {
        match look {
            Some(look) if look.marked => self.marked(slot, look.age, now, lock_delay),
            Some(look) if look.has_epoch => {
                self.over(slot, now);
                None
            }
            Some(_) => None,
            None => self.missing(slot, now, lock_delay),
        }
    }

    /// Whether the blob of `slot`, under its lock-delay, is due a look at `now` (the last one
    /// was at least `every` ago, or none was); notes this one.
    pub fn look_due(&mut self, slot: u32, every: Duration, now: I) -> bool {
        match self.looked.get(&slot) {
            Some(at) if now < *at + every => false,
            _ => {
                self.looked.insert(slot, now);
                true
            }
        }
    }

    /// This member created the blob of `slot` again.
    pub fn created(&mut self, slot: u32) {
        if let Some(delay) = self.delays.get_mut(&slot) {
            delay.exists = true;
        }
    }

    /// A leader wrote an epoch on the blob of `slot` since (seen at `now`): its lock-delay is
    /// over.
    pub fn over(&mut self, slot: u32, now: I) {
        self.delays.remove(&slot);
        self.led(slot, now);
    }

    /// A brand-new blob, created by this member (no body ever ran on it): no lock-delay, and
    /// the blob it found missing was never there (a brand-new group's).
    pub fn fresh(&mut self, slot: u32) {
        self.delays.remove(&slot);
        self.missing.remove(&slot);
    }

    /// Until when no body of `slot` may start, at `now` (`None`: no lock-delay, or it is over).
    pub fn until(&self, slot: u32, now: I) -> Option<I> {
        let delay = self.delays.get(&slot)?;
        (delay.until > now).then_some(delay.until)
    }

    /// Whether the blob of `slot` was found gone and is not known to exist again, at `now`: it
    /// is created again at once (the lock-delay counts from before that), not after the delay.
    pub fn to_create(&self, slot: u32, now: I) -> bool {
        (self.delays.get(&slot)).is_some_and(|d| !d.exists && d.until > now)
    }
}

/// When a blob `age` old at `now` is `lock_delay` old: `now` itself if it is already. A slot's
/// blob created again ([`LockDelays::marked`]) and each replica of a lease held on several
/// storage accounts (quorum.rs, `Replica::aged`) wait for this.
pub fn old_at<I: Moment>(now: I, age: Duration, lock_delay: Duration) -> I {
    now + lock_delay.saturating_sub(age)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    const DELAY: Duration = Duration::from_secs(16);

    /// A member that saw one slot's blob led knows its group is no brand-new one: another
    /// slot's blob found missing was deleted, however few records live; but another slot's
    /// blob that exists without an epoch is one no leader took yet.
    #[test]
    fn a_group_seen_led_on_one_slot_is_no_brand_new_group() {
        let t0 = Instant::now();
        let mut d: LockDelays<Instant> = LockDelays::default();
        assert!(!d.group_was_led(1), "nothing seen yet");
        d.led(0, t0);
        assert!(d.was_led(0));
        assert!(
            d.group_was_led(1),
            "slot 0 seen led: slot 1 missing was deleted"
        );
        assert!(!d.was_led(1), "slot 1 without an epoch: not yet led");
        d.any_slot_led = true;
        assert!(
            d.was_led(1),
            "the mutant brand-new-slot-delayed: led as slot 0 was"
        );
    }

    /// A blob found missing: no body for the lock-delay, created again at once; a read of its
    /// mark later does not shorten it; an epoch written ends it.
    #[test]
    fn a_missing_blob_is_a_lock_delay_until_an_epoch() {
        let t0 = Instant::now();
        let mut d = LockDelays::default();
        assert!(!d.was_led(0), "a brand-new group's blob");
        assert_eq!(d.missing(0, t0, DELAY), Some(DELAY));
        assert!(d.to_create(0, t0));
        assert_eq!(d.until(0, t0), Some(t0 + DELAY));
        d.created(0);
        assert!(!d.to_create(0, t0));
        let t1 = t0 + Duration::from_secs(3);
        assert_eq!(d.marked(0, Duration::ZERO, t1, DELAY), None, "running");
        assert_eq!(d.until(0, t1), Some(t1 + Pace::SERVICE_CLOCK + DELAY));
        assert_eq!(d.missing(1, t1, DELAY), Some(DELAY));
        assert!(d.was_led(0), "slot 1 went missing too: a wipe");
        d.over(0, t1);
        assert_eq!(d.until(0, t1), None);
        d.fresh(1);
        assert_eq!(d.until(1, t1), None);
        // A mark older than the lock-delay: over already.
        assert_eq!(d.marked(2, DELAY * 2, t1, DELAY), Some(Duration::ZERO));
        assert_eq!(d.until(2, t1), None);
    }

    /// A blob created after this member first saw its slot led is another blob: under its
    /// lock-delay from its creation, then the one known.
    #[test]
    fn a_blob_created_after_it_was_seen_led_is_reborn() {
        let t0 = Instant::now();
        let mut d = LockDelays::default();
        assert!(!d.reborn(0, Duration::ZERO, t0, DELAY), "never seen led");
        d.led(0, t0);
        let t1 = t0 + Duration::from_secs(60);
        assert!(
            !d.reborn(0, Duration::from_secs(59), t1, DELAY),
            "the same blob"
        );
        assert!(
            d.reborn(0, Duration::from_secs(5), t1, DELAY),
            "made 55 s later"
        );
        assert!(
            !d.reborn(0, Duration::from_secs(20), t1, DELAY),
            "its delay is over"
        );
        assert!(
            !d.reborn(0, Duration::from_secs(5), t1, DELAY),
            "now the known one"
        );
        // Looks under a lock-delay, one per period.
        assert!(d.look_due(0, DELAY, t1));
        assert!(!d.look_due(0, DELAY, t1 + Duration::from_secs(1)));
        assert!(d.look_due(0, DELAY, t1 + DELAY));
    }

    fn look(marked: bool, has_epoch: bool, age: u64) -> Look {
        Look {
            marked,
            has_epoch,
            age: Duration::from_secs(age),
        }
    }

    /// After an acquire: a marked blob, or one without an epoch created within a lock-delay of
    /// a slot this member saw led, gets no epoch until the delay is over; an epoch ends it.
    #[test]
    fn no_epoch_on_a_blob_under_its_lock_delay() {
        let t0 = Instant::now();
        let mut d = LockDelays::default();
        // A brand-new group's blob, no epoch: this member never saw it led.
        assert_eq!(
            d.before_epoch(0, &look(false, false, 1), t0, DELAY),
            Judged::default()
        );
        // Marked 4 s ago: the delay runs from its creation, plus a second of the service clock.
        let marked = d.before_epoch(0, &look(true, false, 4), t0, DELAY);
        assert!(marked.delayed);
        assert_eq!(
            marked.began,
            Some(DELAY + Pace::SERVICE_CLOCK - Duration::from_secs(4))
        );
        // An epoch written on it since: over, and the slot is known led.
        assert!(!d.before_epoch(0, &look(false, true, 30), t0, DELAY).delayed);
        assert_eq!(d.until(0, t0), None);
        assert!(d.was_led(0));
        // Led, then found with no epoch and young: created again plainly after a deletion.
        let t1 = t0 + Duration::from_secs(60);
        let plain = d.before_epoch(0, &look(false, false, 5), t1, DELAY);
        assert!(plain.delayed, "{plain:?}");
        // Old enough: the same blob as ever.
        let mut old = LockDelays::default();
        old.led(1, t0);
        let judged = old.before_epoch(
            1,
            &look(false, false, 600),
            t0 + Duration::from_secs(1),
            DELAY,
        );
        assert_eq!(judged, Judged::default());
    }

    /// A look during the lock-delay: missing again begins it again; marked runs it from the
    /// creation; an epoch ends it; a plain blob changes nothing.
    #[test]
    fn a_look_during_the_lock_delay_moves_it_as_the_blob_says() {
        let t0 = Instant::now();
        let mut d = LockDelays::default();
        assert_eq!(d.looked(0, None, t0, DELAY), Some(DELAY));
        let t1 = t0 + Duration::from_secs(20);
        assert_eq!(d.looked(0, Some(&look(false, false, 2)), t1, DELAY), None);
        assert_eq!(
            d.until(0, t1),
            None,
            "the first delay is over and nothing began"
        );
        assert!(
            d.looked(0, Some(&look(true, false, 2)), t1, DELAY)
                .is_some()
        );
        assert!(d.until(0, t1).is_some());
        assert_eq!(d.looked(0, Some(&look(false, true, 2)), t1, DELAY), None);
        assert_eq!(d.until(0, t1), None);
    }
}
