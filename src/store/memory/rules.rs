//! What the service does with each request when it arrives: one function per request, judging
//! it on the blob by Azure's rules at the instant `now` it arrived (and on the service's wall
//! clock `date` where an answer or a record carries a date), and answering as the service does.
//! The store's async requests (`requests.rs`, over a connection or a simulated network) and its
//! synchronous [`MemoryStore::apply`](super::MemoryStore::apply) both call these, so that the
//! two cannot judge a request differently.

use super::state::{
    Blob, BlobLease, Record, Shared, conflict, listed, listing, not_found, precondition, present,
    record, slot_record,
};
use crate::store::blob::SlotRecord;
use crate::store::blob::{BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, Notice};
use crate::store::error::StoreError;
use crate::store::member::{Member, MemberKey, MemberRecord};
use leasehold_core::quorum::{Fingerprint, ReplicaId, Stamp};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// Create Container and Put Blob if missing (`create`), else 404; the blob made at `date`.
pub(super) fn prepare(b: &mut Blob, create: bool, date: OffsetDateTime) -> Result<(), StoreError> {
    if b.missing {
        if !create {
            return Err(not_found());
        }
        b.missing = false;
        b.created = Some(date);
        b.etag += 1;
    }
    Ok(())
}

/// The marks of a replica of the set `fingerprint` created now: its id drawn from the thread's
/// source, which a simulated history seeds.
pub(super) fn stamp(fingerprint: Fingerprint) -> Stamp {
    Stamp {
        fingerprint: Some(fingerprint),
        id: Some(ReplicaId(fastrand::u128(..))),
    }
}

/// Put Blob if none has its name, stamped with a replica set's marks, at `date`.
pub(super) fn create_stamped(
    b: &mut Blob,
    stamp: Stamp,
    date: OffsetDateTime,
) -> Result<(), StoreError> {
    if b.missing {
        b.missing = false;
        b.created = Some(date);
        b.stamp = stamp;
        b.etag += 1;
    }
    Ok(())
}

/// Acquire Lease with a proposed id.
pub(super) fn acquire(
    b: &mut Blob,
    now: Instant,
    id: LeaseId,
    seconds: u8,
) -> Result<(), StoreError> {
    present(b)?;
    b.lease.acquire(id, seconds, b.clock, now)?;
    b.broken = false;
    Ok(())
}

/// Renew Lease: refused once the lease was broken.
pub(super) fn renew(b: &mut Blob, now: Instant, id: LeaseId) -> Result<(), StoreError> {
    present(b)?;
    if b.broken {
        return Err(conflict("LeaseIsBrokenAndCannotBeRenewed"));
    }
    b.lease.renew(id, b.clock, now)
}

/// Release Lease.
pub(super) fn release(b: &mut Blob, id: LeaseId) -> Result<(), StoreError> {
    match present(b).map(|()| b.lease.0)? {
        Some(l) if l.id == id => {
            b.lease = BlobLease::default();
            Ok(())
        }
        _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
    }
}

/// Break Lease, whatever the period asked: broken at once. The seconds until it can be
/// acquired again: none.
pub(super) fn break_lease(b: &mut Blob) -> u64 {
    b.broken = true;
    b.lease = BlobLease::default();
    0
}

/// Get Blob Properties: the lease at `now`, the metadata, the blob's age at `date`.
pub(super) fn read(b: &Blob, now: Instant, date: OffsetDateTime) -> Result<BlobState, StoreError> {
    present(b)?;
    if let Some((key, value)) = &b.garbage {
        return Err(StoreError::BadMetadata {
            key,
            value: value.clone(),
        });
    }
    Ok(BlobState {
        lease: b.lease.state(now),
        holder: b.holder.clone(),
        etag: ETag(b.etag.to_string()),
        successor: b.successor.clone(),
        passed_over: b.passed_over.clone(),
        reserved: b.reserved,
        recreated: b.recreated.clone().filter(|_| b.holder.is_none()),
        // A blob there from the start: older than anything a member saw.
        age: b
            .created
            .map_or(Duration::MAX, |c| (date - c).try_into().unwrap_or_default()),
    })
}

/// Get Blob Properties conditional on lease `id`.
pub(super) fn check_lease(b: &Blob, now: Instant, id: LeaseId) -> Result<LeaseCheck, StoreError> {
    present(b)?;
    Ok(match b.lease.active(now) {
        Some(l) if l.id == id => LeaseCheck::Active,
        Some(_) => LeaseCheck::HeldByAnother,
        None => LeaseCheck::NotLeased,
    })
}

/// Set Blob Metadata under lease `id`, if-match `etag`: the holder, and no notice.
pub(super) fn write_holder(
    b: &mut Blob,
    now: Instant,
    id: LeaseId,
    etag: &ETag,
    holder: Holder,
) -> Result<ETag, StoreError> {
    present(b)?;
    b.lease.admits_write(id, now)?;
    if etag.0 != b.etag.to_string() {
        return Err(precondition("ConditionNotMet"));
    }
    // A metadata write replaces every key: the replica's stamp is what the holder carries.
    b.stamp = holder.stamp;
    b.holder = Some(holder);
    b.garbage = None;
    b.successor = None;
    b.passed_over.clear();
    b.reserved = None;
    b.recreated = None;
    b.etag += 1;
    Ok(ETag(b.etag.to_string()))
}

/// Lease Blob `change`, if-match `if_match`.
pub(super) fn change(
    b: &mut Blob,
    now: Instant,
    id: LeaseId,
    proposed: LeaseId,
    if_match: Option<&ETag>,
) -> Result<(), StoreError> {
    present(b)?;
    if if_match.is_some_and(|e| e.0 != b.etag.to_string()) {
        return Err(precondition("ConditionNotMet"));
    }
    if b.broken {
        return Err(conflict("LeaseIsBrokenAndCannotBeChanged"));
    }
    match &mut b.lease.0 {
        // Neither the ETag nor the lease clock changes.
        Some(l) if l.expires > now && (l.id == id || l.id == proposed) => {
            l.id = proposed;
            Ok(())
        }
        Some(l) if l.expires > now => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
        _ => Err(conflict("LeaseNotPresentWithLeaseOperation")),
    }
}

/// Set Blob Metadata under lease `id`, if-match `if_match`: the holder and the notice.
pub(super) fn write_notice(
    b: &mut Blob,
    now: Instant,
    id: LeaseId,
    holder: Holder,
    notice: Notice,
    if_match: Option<&ETag>,
) -> Result<ETag, StoreError> {
    present(b)?;
    b.lease.admits_write(id, now)?;
    if if_match.is_some_and(|e| e.0 != b.etag.to_string()) {
        return Err(precondition("ConditionNotMet"));
    }
    b.stamp = holder.stamp;
    b.holder = Some(holder);
    b.garbage = None;
    b.recreated = None;
    b.passed_over = notice.passed_over;
    b.reserved = notice.reserved;
    b.successor = Some(notice.successor);
    b.etag += 1;
    Ok(ETag(b.etag.to_string()))
}

/// Release Lease, if-match `etag`.
pub(super) fn release_if(b: &mut Blob, id: LeaseId, etag: &ETag) -> Result<(), StoreError> {
    present(b)?;
    if etag.0 != b.etag.to_string() {
        return Err(precondition("ConditionNotMet"));
    }
    match b.lease.0 {
        Some(l) if l.id == id => {
            b.lease = BlobLease::default();
            Ok(())
        }
        _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
    }
}

/// Put Blob if none has its name, marked as created again `by`, at `date`.
pub(super) fn recreate(b: &mut Blob, by: String, date: OffsetDateTime) -> Result<(), StoreError> {
    if b.missing {
        b.missing = false;
        b.created = Some(date);
        b.recreated = Some(by);
        b.etag += 1;
    }
    Ok(())
}

/// Get Blob Properties of record `key`: its lease state and ETag.
pub(super) fn read_member(
    b: &Blob,
    now: Instant,
    date: OffsetDateTime,
    key: &MemberKey,
) -> Result<(LeaseState, ETag), StoreError> {
    let r = b.members.get(key).ok_or_else(not_found)?;
    let m = listed(key, r, now, date);
    Ok((m.lease, m.etag))
}

/// Get Blob Properties of record `key`, as a listing shows it.
pub(super) fn read_record(
    b: &Blob,
    now: Instant,
    date: OffsetDateTime,
    key: &MemberKey,
) -> Result<Option<MemberRecord>, StoreError> {
    let r = b.members.get(key).ok_or_else(not_found)?;
    Ok(Some(listed(key, r, now, date)))
}

/// List Blobs of the group: the records beside `b`, and `b` and the slot blobs `slots`.
pub(super) fn list_group(
    b: &Blob,
    slots: &Mutex<BTreeMap<u32, Arc<Shared>>>,
    now: Instant,
    date: OffsetDateTime,
) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
    // A deleted slot blob is not listed.
    let mut listed: Vec<SlotRecord> = (!b.missing)
        .then(|| slot_record(0, b, now))
        .into_iter()
        .collect();
    let others = slots.lock().unwrap();
    listed.extend(others.iter().filter_map(|(i, s)| s.slot_record(*i, now)));
    Ok((listing(b, now, date), listed))
}

/// List Blobs of the members prefix.
pub(super) fn list_members(
    b: &Blob,
    now: Instant,
    date: OffsetDateTime,
) -> Result<Vec<MemberRecord>, StoreError> {
    Ok(listing(b, now, date))
}

/// Put Blob `key` saying `member`, if none has its name, created at `created`.
pub(super) fn create_member(
    b: &mut Blob,
    key: MemberKey,
    member: Member,
    created: OffsetDateTime,
) -> Result<(), StoreError> {
    if b.members.contains_key(&key) {
        return Err(conflict("BlobAlreadyExists"));
    }
    b.members.insert(
        key,
        Record {
            member,
            lease: BlobLease::default(),
            created,
            etag: {
                b.record_writes += 1;
                b.record_writes
            },
        },
    );
    Ok(())
}

/// Acquire Lease on record `key`.
pub(super) fn acquire_member(
    b: &mut Blob,
    now: Instant,
    key: &MemberKey,
    id: LeaseId,
    seconds: u8,
) -> Result<(), StoreError> {
    let clock = b.clock;
    record(b, key)?.lease.acquire(id, seconds, clock, now)
}

/// Renew Lease on record `key`.
pub(super) fn renew_member(
    b: &mut Blob,
    now: Instant,
    key: &MemberKey,
    id: LeaseId,
) -> Result<(), StoreError> {
    let clock = b.clock;
    record(b, key)?.lease.renew(id, clock, now)
}

/// Set Blob Metadata of record `key` under its lease `id`.
pub(super) fn write_member(
    b: &mut Blob,
    now: Instant,
    key: &MemberKey,
    id: LeaseId,
    member: Member,
) -> Result<(), StoreError> {
    let r = record(b, key)?;
    r.lease.admits_write(id, now)?;
    r.member = member;
    b.record_writes += 1;
    let etag = b.record_writes;
    let r = record(b, key)?;
    r.etag = etag;
    Ok(())
}

/// Delete Blob `key`: under its lease `lease`, or if-match `etag`.
pub(super) fn delete_member(
    b: &mut Blob,
    now: Instant,
    key: &MemberKey,
    lease: Option<LeaseId>,
    etag: Option<&ETag>,
) -> Result<(), StoreError> {
    let r = record(b, key)?;
    match (r.lease.active(now), lease) {
        (Some(_), None) => return Err(precondition("LeaseIdMissing")),
        (Some(l), Some(id)) if l.id != id => {
            return Err(precondition("LeaseIdMismatchWithBlobOperation"));
        }
        (None, Some(_)) => return Err(precondition("LeaseNotPresentWithBlobOperation")),
        _ => {}
    }
    if etag.is_some_and(|e| e.0 != r.etag.to_string()) {
        return Err(precondition("ConditionNotMet"));
    }
    b.members.remove(key);
    Ok(())
}
