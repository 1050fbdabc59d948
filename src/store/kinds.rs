//! The store's data as a core member handles it ([`Shell`]: its `Kinds`), and as the core's
//! translation carries it to the store (`Carry`, on the store's `Blobs`): one for the shell's
//! driver and the simulator's synchronous engine alike.

use super::blob::{BlobState, ETag, Holder, LeaseId, LeaseState, Notice, Reservation, SlotRecord};
use super::call::Blobs;
use super::member::{Member, MemberKey, MemberRecord};
use leasehold_core::carry::Carry;
use leasehold_core::member::Kinds;
use leasehold_core::quorum::Stamp;
use std::time::Duration;
use time::OffsetDateTime;

/// The shell's store data, for a core member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shell {}

/// A handoff notice as a leader's choice wrote it: whom it names, the epoch it reserved, the
/// blob's ETag after it.
#[derive(Debug, Clone)]
pub(crate) struct Noticed {
    /// The member it names.
    pub(crate) to: String,
    /// The epoch it reserved, for the lease id that member acquires with.
    pub(crate) reserved: Option<Reservation>,
    /// The blob's ETag after the notice.
    pub(crate) etag: ETag,
}

impl Kinds for Shell {
    type Wall = OffsetDateTime;
    type Record = MemberRecord;
    type Slot = SlotRecord;
    type Published = Member;
    type Blob = BlobState;
    type ETag = ETag;
    type LeaseId = LeaseId;
    type Notice = Noticed;

    fn key_of(identity: &str) -> MemberKey {
        MemberKey::of(identity)
    }
    fn record_etag(record: &MemberRecord) -> &ETag {
        &record.etag
    }
    fn names(notice: &Noticed, next: &MemberRecord) -> bool {
        notice.to == next.identity()
            && (notice.reserved).is_some_and(|r| r.lease == next.member.acquires_with)
    }
    fn notice_etag(notice: Noticed) -> ETag {
        notice.etag
    }
    fn acquire_with(published: &mut Member, id: &LeaseId) -> bool {
        let changed = published.acquires_with != *id;
        published.acquires_with = *id;
        changed
    }
    fn back_in_line(published: &mut Member) -> bool {
        published.standby_until.take().is_some()
    }
    fn stand_by(published: &mut Member, wall: OffsetDateTime, cooldown: Duration) {
        published.standby_until = Some(wall + cooldown);
    }
}

impl Carry for Shell {
    type Store = Blobs;

    fn holder(
        me: &str,
        epoch: u64,
        wall: OffsetDateTime,
        id: &LeaseId,
        slots: Option<u32>,
    ) -> Holder {
        Holder {
            identity: me.to_owned(),
            epoch,
            acquired_at: wall,
            lease: Some(*id),
            slots,
            stamp: Stamp::default(),
        }
    }

    fn stamp(holder: &mut Holder, stamp: Stamp) {
        holder.stamp = stamp;
    }

    fn leased(state: &LeaseState) -> bool {
        *state == LeaseState::Leased
    }

    fn notice(to: &MemberRecord, passed_over: Vec<String>, reserved: Option<u64>) -> Notice {
        Notice {
            successor: to.identity().to_owned(),
            passed_over,
            reserved: reserved.map(|epoch| Reservation {
                epoch,
                lease: to.member.acquires_with,
            }),
        }
    }

    fn noticed(to: &MemberRecord, reserved: Option<u64>, etag: ETag) -> Noticed {
        Noticed {
            to: to.identity().to_owned(),
            reserved: reserved.map(|epoch| Reservation {
                epoch,
                lease: to.member.acquires_with,
            }),
            etag,
        }
    }

    fn lease_of(record: &MemberRecord) -> LeaseId {
        record.member.acquires_with
    }
}
