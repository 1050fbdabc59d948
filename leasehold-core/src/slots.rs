//! What slots add to a member (docs/slots.md): the group's count as slot 0 records it, and the
//! watch a member waiting for a slot keeps on the record of the member just ahead of it.
//!
//! - [`Count`]: whether this member counts the slots its group counts. The group's count is what
//!   the holder of slot 0 recorded (absent: 1) while slot 0 is leased; a member that counts
//!   otherwise does not campaign, and looks again every
//!   [`Pace::MISMATCH_RECHECK`](crate::Pace::MISMATCH_RECHECK).
//! - [`AheadWatch`]: a member that does not poll reads the record of the member ahead of it and
//!   lists the line only when that record changed (the member won a slot and published a new
//!   lease id) or died, so that one listing per change, by the one member it concerns, moves the
//!   line on.

/// Up to this many slots, a poller's round acquires on every slot (N acquires); past it, it
/// lists the group first (a listing is priced as about ten acquires) and then tries only the
/// free slots ([`Line::slots_to_try`](crate::line::Line::slots_to_try)).
pub const ACQUIRE_ALL_UP_TO: u32 = 10;

/// The count a blob's holder recorded (`recorded`: its `leasehold_slots`, `None` when absent;
/// `led`: whether a leader ever wrote the blob): `None` on a blob no leader wrote.
pub fn recorded(led: bool, recorded: Option<u32>) -> Option<u32> {
    led.then(|| recorded.unwrap_or(1))
}

/// What a holder of a member counting `slots` records of the count: nothing with one slot, so
/// that one slot writes what it always wrote.
pub fn to_record(slots: u32) -> Option<u32> {
    (slots != 1).then_some(slots)
}

/// The group's count beside this member's, as slot 0 last showed it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// The group's count while it differs from this member's.
    pub mismatch: Option<u32>,
}

/// What a look at slot 0 changed of the count ([`Count::note`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountChange {
    /// A mismatch began: the group counts this many (say so once, loudly).
    Began(u32),
    /// A mismatch goes on.
    Goes(u32),
    /// The mismatch with this count is over: campaign again.
    Ended(u32),
    /// The counts match, as they did.
    Matches,
}

impl Count {
    /// Takes what slot 0 says of the group's count (`recorded`, by [`recorded`]; `leased`: slot 0
    /// is leased, so the count stands: only while its lease is held) beside this member's
    /// (`configured`, its `[lease].slots`).
    pub fn note(&mut self, configured: u32, recorded: Option<u32>, leased: bool) -> CountChange {
        let group = recorded.filter(|n| leased && *n != configured);
        let was = std::mem::replace(&mut self.mismatch, group);
        match (was, group) {
            (Some(was), Some(now)) if was == now => CountChange::Goes(now),
            (_, Some(now)) => CountChange::Began(now),
            (Some(was), None) => CountChange::Ended(was),
            (None, None) => CountChange::Matches,
        }
    }

    /// Whether this member counts otherwise than its group (it does not campaign).
    pub fn mismatched(&self) -> bool {
        self.mismatch.is_some()
    }
}

/// What a member waiting for a slot saw last of the record of the member ahead of it: whose
/// record (`K`), at which version (`E`, its ETag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AheadWatch<K, E> {
    seen: Option<(K, E)>,
}

impl<K, E> Default for AheadWatch<K, E> {
    fn default() -> Self {
        Self { seen: None }
    }
}

/// What one read of the record ahead calls for ([`AheadWatch::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// The record changed (the member won a slot, or joined again): list the line, and take the
    /// version as seen only once that listing is (a failed listing leaves the change to be seen
    /// again next round).
    Changed,
    /// The record is the same, and its member is alive: nothing to list. (Whether its process
    /// still answers is the probe's to say.)
    Same,
    /// The record is the same, and its member is dead (its record's lease is gone): list.
    Dead,
}

impl<K: PartialEq, E: PartialEq> AheadWatch<K, E> {
    /// A read of `ahead`'s record found it at `version`, leased (`alive`) or not; `listed` is the
    /// version the last listing showed. The first read of a member's record is compared with
    /// the listing's: taken as the baseline, a change made between the listing and this read
    /// (the member winning a slot) would never be seen, and the line would stand still.
    pub fn read(&self, ahead: &K, version: &E, listed: Option<&E>, alive: bool) -> Ahead {
        let changed = match &self.seen {
            Some((key, seen)) if key == ahead => seen != version,
            _ => listed.is_some_and(|listed| listed != version),
        };
        match (changed, alive) {
            (true, _) => Ahead::Changed,
            (false, true) => Ahead::Same,
            (false, false) => Ahead::Dead,
        }
    }

    /// `ahead`'s record at `version` is seen (for a change: once the listing after it is).
    pub fn saw(&mut self, ahead: K, version: E) {
        self.seen = Some((ahead, version));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_counts_what_slot_0_records_while_leased() {
        assert_eq!(recorded(false, None), None, "no leader wrote it");
        assert_eq!(recorded(true, None), Some(1), "absent: one slot");
        assert_eq!(recorded(true, Some(3)), Some(3));
        assert_eq!(to_record(1), None);
        assert_eq!(to_record(4), Some(4));

        let mut count = Count::default();
        assert_eq!(count.note(3, Some(3), true), CountChange::Matches);
        assert_eq!(
            count.note(3, Some(2), false),
            CountChange::Matches,
            "not leased"
        );
        assert_eq!(count.note(3, Some(2), true), CountChange::Began(2));
        assert!(count.mismatched());
        assert_eq!(count.note(3, Some(2), true), CountChange::Goes(2));
        assert_eq!(
            count.note(3, Some(4), true),
            CountChange::Began(4),
            "another count"
        );
        assert_eq!(count.note(3, None, true), CountChange::Ended(4));
        assert!(!count.mismatched());
        assert_eq!(count.note(3, Some(2), true), CountChange::Began(2));
        assert_eq!(
            count.note(3, Some(2), false),
            CountChange::Ended(2),
            "slot 0 free"
        );
    }

    #[test]
    fn the_record_ahead_is_listed_after_only_when_it_changed_or_died() {
        let mut w = AheadWatch::<&str, u32>::default();
        // The first read compares with the listing.
        assert_eq!(w.read(&"a", &1, Some(&1), true), Ahead::Same);
        assert_eq!(w.read(&"a", &2, Some(&1), true), Ahead::Changed);
        assert_eq!(
            w.read(&"a", &1, None, true),
            Ahead::Same,
            "not in the listing"
        );
        assert_eq!(w.read(&"a", &1, Some(&1), false), Ahead::Dead);
        w.saw("a", 1);
        // Then with what was seen, whatever the listing says.
        assert_eq!(w.read(&"a", &1, Some(&7), true), Ahead::Same);
        assert_eq!(w.read(&"a", &2, Some(&7), false), Ahead::Changed);
        // Another member ahead: the listing again.
        assert_eq!(w.read(&"b", &5, Some(&5), true), Ahead::Same);
        assert_eq!(w.read(&"b", &6, Some(&5), true), Ahead::Changed);
    }
}
