//! What the protocol reads of a read of the lease blob (or of a slot's blob), whatever the store
//! that answered it: [`LeaseBlob`]. A member record is [`Record`](crate::line::Record), a slot
//! seen in a listing [`SlotBlob`](crate::line::SlotBlob); this is the blob the lease is on, as
//! one read of its properties shows it. The views the roles take of it ([`BlobSeen`] for the
//! line, [`Look`] for the lock-delay, [`BlobRead`] for a watcher, the group's recorded count
//! of slots) are made here, once.

use crate::line::BlobSeen;
use crate::lock_delay::Look;
use crate::slots;
use crate::watch::BlobRead;
use std::time::Duration;

/// One read of a lease blob: its lease, the holder metadata a leader wrote on it, its handoff
/// notice and its marks, as docs/succession.md and docs/safety.md name them.
pub trait LeaseBlob {
    /// The blob's ETag: a write conditional on it lands only if nothing wrote the blob since.
    type ETag;

    /// Whether its lease is held now.
    fn leased(&self) -> bool;
    /// Its ETag.
    fn etag(&self) -> &Self::ETag;
    /// Whom its holder metadata names (held or not); `None` while no leader ever wrote it.
    fn named(&self) -> Option<&str>;
    /// The epoch its holder metadata carries; `None` while no leader ever wrote it.
    fn epoch(&self) -> Option<u64>;
    /// The count of slots its holder recorded (`leasehold_slots`), if it recorded one.
    fn slots_recorded(&self) -> Option<u32>;
    /// The handoff notice: the member the holder is handing the lease to.
    fn notice(&self) -> Option<&str>;
    /// The members that handoff passed over.
    fn passed_over(&self) -> &[String];
    /// Whether it carries the mark of a blob created again after a deletion, with no epoch
    /// written since.
    fn recreated(&self) -> bool;
    /// How old it is by the service's clock.
    fn age(&self) -> Duration;

    /// What it says of its holder and notice, as the line takes it: the leader only while the
    /// lease is held.
    fn seen(&self) -> BlobSeen<'_> {
        let named = self.named();
        BlobSeen {
            leader: named.filter(|_| self.leased()),
            named,
            notice: self.notice(),
            passed_over: self.passed_over(),
        }
    }

    /// What the lock-delay reads of it ([`crate::lock_delay::LockDelays`]).
    fn look(&self) -> Look {
        Look {
            marked: self.recreated(),
            has_epoch: self.named().is_some(),
            age: self.age(),
        }
    }

    /// The read as a watcher takes it ([`crate::watch::BlobWatch::read`]).
    fn watch_read(&self) -> BlobRead<'_, Self::ETag> {
        BlobRead {
            leased: self.leased(),
            recreated: self.recreated(),
            etag: self.etag(),
            seen: self.seen(),
        }
    }

    /// The group's count of slots as its holder recorded it ([`slots::recorded`]): `None` on a
    /// blob no leader ever wrote.
    fn count_recorded(&self) -> Option<u32> {
        slots::recorded(self.named().is_some(), self.slots_recorded())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A read of a blob `holder` wrote (`None`: no leader ever did), leased or not.
    struct Read {
        leased: bool,
        holder: Option<(&'static str, Option<u32>)>,
    }

    impl LeaseBlob for Read {
        type ETag = u32;
        fn leased(&self) -> bool {
            self.leased
        }
        fn etag(&self) -> &u32 {
            &7
        }
        fn named(&self) -> Option<&str> {
            self.holder.map(|(who, _)| who)
        }
        fn epoch(&self) -> Option<u64> {
            self.holder.map(|_| 3)
        }
        fn slots_recorded(&self) -> Option<u32> {
            self.holder.and_then(|(_, slots)| slots)
        }
        fn notice(&self) -> Option<&str> {
            None
        }
        fn passed_over(&self) -> &[String] {
            &[]
        }
        fn recreated(&self) -> bool {
            false
        }
        fn age(&self) -> Duration {
            Duration::ZERO
        }
    }

    /// The metadata names its last holder whether or not the lease is held; only a held lease
    /// names a leader. A blob a leader wrote without a count records one slot; one no leader
    /// wrote records nothing, and has no epoch for the lock-delay.
    #[test]
    fn a_read_names_a_leader_only_while_leased_and_counts_one_slot_by_default() {
        let held = Read {
            leased: true,
            holder: Some(("a", None)),
        };
        let free = Read {
            leased: false,
            holder: Some(("a", Some(3))),
        };
        let blank = Read {
            leased: false,
            holder: None,
        };
        assert_eq!(held.seen().leader, Some("a"));
        assert_eq!((free.seen().leader, free.seen().named), (None, Some("a")));
        assert_eq!(held.count_recorded(), Some(1));
        assert_eq!(free.count_recorded(), Some(3));
        assert_eq!(blank.count_recorded(), None);
        assert!(held.look().has_epoch && !blank.look().has_epoch);
        assert!(held.watch_read().leased && !free.watch_read().leased);
    }
}
