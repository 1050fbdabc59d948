//! The lease blob's metadata (docs/safety.md, "How it works"): the keys leasehold writes under the
//! lease, and how a holder, a handoff notice, a reservation and a re-creation are read from them
//! and written to them. Values that no leader wrote are refused, not guessed.

use super::blob::{Holder, LeaseId, Notice, Reservation};
use super::error::StoreError;
use leasehold_core::quorum::Stamp;
use time::OffsetDateTime;

/// Metadata keys written under the lease (docs/safety.md, "How it works"). The leader's identity.
pub const META_HOLDER: &str = "leasehold_holder";
/// The fencing token: the epoch of the last leadership.
pub const META_EPOCH: &str = "leasehold_epoch";
/// When that leadership began (RFC 3339, UTC).
pub const META_ACQUIRED_AT: &str = "leasehold_acquired_at";
/// The lease id the holder acquired with, so that `status` can test, with a read conditional on
/// it, whether the recorded holder still holds the lease (a reader cannot use it: every lease
/// operation and every write needs write permission, which can break the lease anyway).
pub const META_LEASE_ID: &str = "leasehold_lease_id";
/// The handoff notice: the member a leader is handing the lease to, written by that leader just
/// before it changes the lease id to the member's, so that the ETag changes and members that
/// watch the blob learn of it (a lease `change` leaves the ETag as it was). The next leader's
/// epoch write removes it.
pub const META_SUCCESSOR: &str = "leasehold_successor";
/// Members a leader handed the lease to that did not take it (docs/safety.md, "Recovery from
/// anything"), comma separated, written with the notice that hands it on: every member that reads
/// the notice passes them over for a while.
pub const META_PASSED_OVER: &str = "leasehold_passed_over";
/// The epoch a leader handing the lease over reserved for its successor (docs/succession.md, "The
/// handoff"), written with the handoff notice: the last epoch + 1. The successor makes it its own
/// by writing it, under its own lease id and only while the blob is as the notice left it.
pub const META_RESERVED_EPOCH: &str = "leasehold_reserved_epoch";
/// The lease id the epoch of [`META_RESERVED_EPOCH`] is reserved for: the successor's.
pub const META_RESERVED_FOR: &str = "leasehold_reserved_for";
/// On a blob that a member created again after finding it deleted while its group had members
/// (docs/safety.md, "Recovery from anything"): that member's identity. Until a leader writes an
/// epoch on it, the blob is under a lock-delay: no body starts on it before `L + M` after a member
/// first saw it gone (or first saw this mark).
pub const META_RECREATED: &str = "leasehold_recreated";
/// `[lease].slots` of the leader that wrote the epoch (docs/slots.md), written only when it is not
/// 1: a group's count is what slot 0 (the group's blob) records, absent meaning 1.
pub const META_SLOTS: &str = "leasehold_slots";
/// With `[[storage.replica]]` (docs/quorum.md): the fingerprint of the replica set whose member
/// created this replica's blob (`leasehold_core::quorum::Fingerprint`, 16 lowercase hex digits).
/// Only replicas stamped with a member's own set count for it.
pub const META_REPLICA_SET: &str = "leasehold_replica_set";
/// With `[[storage.replica]]`: this replica's own id, drawn when its blob was created
/// (`leasehold_core::quorum::ReplicaId`, 32 lowercase hex digits). One account listed twice shows
/// one id twice, and counts once.
pub const META_REPLICA_ID: &str = "leasehold_replica_id";
/// What follows the group's blob name to make the names of slots 1 to N - 1:
/// `<blob>.slots/<i>` (slot 0 is the group's blob itself).
pub const SLOTS_SUFFIX: &str = ".slots/";

impl Notice {
    /// The metadata pairs of the notice, beside the holder's.
    pub(crate) fn to_metadata(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![(META_SUCCESSOR, self.successor.clone())];
        if !self.passed_over.is_empty() {
            pairs.push((META_PASSED_OVER, self.passed_over.join(",")));
        }
        if let Some(r) = self.reserved {
            pairs.push((META_RESERVED_EPOCH, r.epoch.to_string()));
            pairs.push((META_RESERVED_FOR, r.lease.to_string()));
        }
        pairs
    }
}

/// Parses the holder metadata; `None` when the blob has never had a leasehold leader.
pub(crate) fn holder_from_metadata<'a>(
    mut get: impl FnMut(&str) -> Option<&'a str>,
) -> Result<Option<Holder>, StoreError> {
    let Some(epoch) = get(META_EPOCH) else {
        return Ok(None);
    };
    let epoch: u64 = epoch.trim().parse().map_err(|_| StoreError::BadMetadata {
        key: META_EPOCH,
        value: epoch.to_owned(),
    })?;
    let identity = get(META_HOLDER).unwrap_or("").to_owned();
    let acquired_at = match get(META_ACQUIRED_AT) {
        Some(t) => OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
            .map_err(|_| StoreError::BadMetadata {
                key: META_ACQUIRED_AT,
                value: t.to_owned(),
            })?,
        None => OffsetDateTime::UNIX_EPOCH,
    };
    // Only `status` reads it, to tell whether the recorded holder still holds the lease; a value
    // that is not a lease id leaves that unverified rather than keeping anyone from leading.
    let lease = get(META_LEASE_ID).and_then(LeaseId::parse);
    let slots = match get(META_SLOTS) {
        Some(n) => Some(n.trim().parse().map_err(|_| StoreError::BadMetadata {
            key: META_SLOTS,
            value: n.to_owned(),
        })?),
        None => None,
    };
    let stamp = stamp_from_metadata(get);
    Ok(Some(Holder {
        identity,
        epoch,
        acquired_at,
        lease,
        slots,
        stamp,
    }))
}

/// The handoff notice in the metadata, when there is one.
pub(crate) fn successor_from_metadata<'a>(
    mut get: impl FnMut(&str) -> Option<&'a str>,
) -> Option<String> {
    get(META_SUCCESSOR)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

/// The members a notice passes over.
pub(crate) fn passed_over_from_metadata<'a>(
    mut get: impl FnMut(&str) -> Option<&'a str>,
) -> Vec<String> {
    get(META_PASSED_OVER)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// The epoch a handoff notice reserved, and for which lease id. Only shown and checked against
/// the wake-up that names it: a value that does not parse is no reservation (it keeps nobody
/// from leading; the successor then reads and writes its epoch as without one).
pub(crate) fn reserved_from_metadata<'a>(
    mut get: impl FnMut(&str) -> Option<&'a str>,
) -> Option<Reservation> {
    let epoch = get(META_RESERVED_EPOCH)?.trim().parse().ok()?;
    let lease = LeaseId::parse(get(META_RESERVED_FOR)?)?;
    Some(Reservation { epoch, lease })
}

/// Who created a deleted blob again, while no leader has written an epoch on it since.
pub(crate) fn recreated_from_metadata<'a>(
    mut get: impl FnMut(&str) -> Option<&'a str>,
) -> Option<String> {
    if get(META_EPOCH).is_some() {
        return None;
    }
    get(META_RECREATED).map(|v| v.trim().to_owned())
}

/// The replica set's marks on a blob ([`META_REPLICA_SET`], [`META_REPLICA_ID`]). A value that
/// does not parse is no mark: a blob so marked counts for no set, as one without a mark.
pub(crate) fn stamp_from_metadata<'a>(mut get: impl FnMut(&str) -> Option<&'a str>) -> Stamp {
    Stamp {
        fingerprint: get(META_REPLICA_SET).and_then(|v| v.trim().parse().ok()),
        id: get(META_REPLICA_ID).and_then(|v| v.trim().parse().ok()),
    }
}

/// The metadata pairs for `holder`, in the form the service stores.
pub(crate) fn holder_to_metadata(holder: &Holder) -> Vec<(&'static str, String)> {
    let mut pairs = vec![
        (META_HOLDER, holder.identity.clone()),
        (META_EPOCH, holder.epoch.to_string()),
        (META_ACQUIRED_AT, rfc3339(holder.acquired_at)),
    ];
    if let Some(lease) = holder.lease {
        pairs.push((META_LEASE_ID, lease.to_string()));
    }
    if let Some(n) = holder.slots.filter(|n| *n != 1) {
        pairs.push((META_SLOTS, n.to_string()));
    }
    if let Some(fingerprint) = holder.stamp.fingerprint {
        pairs.push((META_REPLICA_SET, fingerprint.to_string()));
    }
    if let Some(id) = holder.stamp.id {
        pairs.push((META_REPLICA_ID, id.to_string()));
    }
    pairs
}

/// RFC 3339 in UTC with second precision, as shown to people.
pub(crate) fn rfc3339(t: OffsetDateTime) -> String {
    let t = t
        .to_offset(time::UtcOffset::UTC)
        .replace_nanosecond(0)
        .unwrap_or(t);
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_round_trip_and_refusal() {
        let h = Holder {
            identity: "w1".into(),
            epoch: 7,
            acquired_at: OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
            lease: Some(LeaseId::random()),
            slots: Some(3),
            stamp: Default::default(),
        };
        let pairs = holder_to_metadata(&h);
        let back =
            holder_from_metadata(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str()))
                .unwrap()
                .unwrap();
        assert_eq!(back, h);
        assert!(holder_from_metadata(|_| None).unwrap().is_none());
        let err = holder_from_metadata(|k| (k == META_EPOCH).then_some("seven")).unwrap_err();
        assert!(matches!(
            err,
            StoreError::BadMetadata {
                key: META_EPOCH,
                ..
            }
        ));
    }

    /// A replica's marks read back as the core shows them; a value that is not one is none.
    #[test]
    fn a_replica_stamp_is_read_or_left_out() {
        let pairs = [
            (META_REPLICA_SET, "00000000000000ff"),
            (META_REPLICA_ID, "0123456789abcdef0123456789abcdef"),
        ];
        let stamp = stamp_from_metadata(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| *v));
        assert_eq!(stamp.fingerprint.unwrap().to_string(), pairs[0].1);
        assert_eq!(stamp.id.unwrap().to_string(), pairs[1].1);
        let garbled = stamp_from_metadata(|k| (k == META_REPLICA_SET).then_some("FF"));
        assert_eq!(garbled, Stamp::default());
    }
}
