//! The store's requests on the in-memory blob, each with the service's rules and answers.

use super::state::{
    BlobLease, Record, Shared, conflict, listed, listing, not_found, precondition, present, record,
    slot_record,
};
use super::store::MemoryStore;
use crate::store::blob::{
    BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, Notice, SlotRecord,
};
use crate::store::error::StoreError;
use crate::store::lease::{GroupStore, LeaseStore};
use crate::store::member::{Member, MemberKey, MemberRecord};
use crate::store::op::Op;
use leasehold_core::quorum::Stamp;
use std::sync::Arc;
use std::time::Duration;

impl LeaseStore for MemoryStore {
    async fn prepare(&self, create: bool) -> Result<(), StoreError> {
        let date = self.wall_now();
        self.run(Op::Prepare, None, move |b, _| {
            if b.missing {
                if !create {
                    return Err(not_found());
                }
                b.missing = false;
                b.created = Some(date);
                b.etag += 1;
            }
            Ok(())
        })
        .await
    }

    async fn acquire(&self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        self.run(Op::Acquire, Some(id), move |b, now| {
            present(b)?;
            b.lease.acquire(id, seconds, b.clock, now)?;
            b.broken = false;
            Ok(())
        })
        .await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Renew, Some(id), move |b, now| {
            present(b)?;
            if b.broken {
                return Err(conflict("LeaseIsBrokenAndCannotBeRenewed"));
            }
            b.lease.renew(id, b.clock, now)
        })
        .await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Release, Some(id), move |b, _| {
            match present(b).map(|()| b.lease.0)? {
                Some(l) if l.id == id => {
                    b.lease = BlobLease::default();
                    Ok(())
                }
                _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
            }
        })
        .await
    }

    async fn break_lease(&self, _period: Duration) -> Result<u64, StoreError> {
        self.break_now();
        Ok(0)
    }
}

impl GroupStore for MemoryStore {
    async fn read(&self) -> Result<BlobState, StoreError> {
        let date = self.wall_now();
        self.run(Op::Read, None, move |b, now| {
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
        })
        .await
    }

    /// The memory store's blob carries no replica marks.
    async fn read_stamped(&self) -> Result<(BlobState, Stamp), StoreError> {
        Ok((self.read().await?, Stamp::default()))
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        self.run(Op::Read, None, move |b, now| {
            present(b)?;
            Ok(match b.lease.active(now) {
                Some(l) if l.id == id => LeaseCheck::Active,
                Some(_) => LeaseCheck::HeldByAnother,
                None => LeaseCheck::NotLeased,
            })
        })
        .await
    }

    async fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> Result<ETag, StoreError> {
        let (holder, etag) = (holder.clone(), etag.clone());
        self.run(Op::WriteEpoch, Some(id), move |b, now| {
            present(b)?;
            b.lease.admits_write(id, now)?;
            if etag.0 != b.etag.to_string() {
                return Err(precondition("ConditionNotMet"));
            }
            b.holder = Some(holder);
            b.garbage = None;
            b.successor = None;
            b.passed_over.clear();
            b.reserved = None;
            b.recreated = None;
            b.etag += 1;
            Ok(ETag(b.etag.to_string()))
        })
        .await
    }

    async fn change(
        &self,
        id: LeaseId,
        proposed: LeaseId,
        if_match: Option<&ETag>,
    ) -> Result<(), StoreError> {
        let if_match = if_match.cloned();
        self.run(Op::Change, Some(id), move |b, now| {
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
        })
        .await
    }

    async fn write_notice(
        &self,
        id: LeaseId,
        holder: &Holder,
        notice: &Notice,
        if_match: Option<&ETag>,
    ) -> Result<ETag, StoreError> {
        let (holder, notice, if_match) = (holder.clone(), notice.clone(), if_match.cloned());
        self.run(Op::Notice, Some(id), move |b, now| {
            present(b)?;
            b.lease.admits_write(id, now)?;
            if if_match.is_some_and(|e| e.0 != b.etag.to_string()) {
                return Err(precondition("ConditionNotMet"));
            }
            b.holder = Some(holder);
            b.garbage = None;
            b.recreated = None;
            b.passed_over = notice.passed_over;
            b.reserved = notice.reserved;
            b.successor = Some(notice.successor);
            b.etag += 1;
            Ok(ETag(b.etag.to_string()))
        })
        .await
    }

    async fn release_if(&self, id: LeaseId, etag: &ETag) -> Result<(), StoreError> {
        let etag = etag.clone();
        self.run(Op::Release, Some(id), move |b, _| {
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
        })
        .await
    }

    async fn recreate(&self, by: &str) -> Result<(), StoreError> {
        let (by, date) = (by.to_owned(), self.wall_now());
        self.run(Op::Prepare, None, move |b, _| {
            if b.missing {
                b.missing = false;
                b.created = Some(date);
                b.recreated = Some(by);
                b.etag += 1;
            }
            Ok(())
        })
        .await
    }

    fn slot(&self, slot: u32) -> Arc<Self> {
        let mut slots = self.shared.slots.lock().unwrap();
        Arc::new(Self {
            shared: slots
                .entry(slot)
                .or_insert_with(|| Arc::new(Shared::on(self.shared.clock())))
                .clone(),
            connection: self.connection.clone(),
        })
    }

    async fn read_member(&self, key: &MemberKey) -> Result<(LeaseState, ETag), StoreError> {
        let date = self.wall_now();
        let key = key.clone();
        self.run(Op::MemberRead, None, move |b, now| {
            let r = b.members.get(&key).ok_or_else(not_found)?;
            let m = listed(&key, r, now, date);
            Ok((m.lease, m.etag))
        })
        .await
    }

    async fn read_record(&self, key: &MemberKey) -> Result<Option<MemberRecord>, StoreError> {
        let date = self.wall_now();
        let key = key.clone();
        self.run(Op::MemberRead, None, move |b, now| {
            let r = b.members.get(&key).ok_or_else(not_found)?;
            Ok(Some(listed(&key, r, now, date)))
        })
        .await
    }

    async fn list_group(&self) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        // One request, counted (and scripted) as a listing.
        let date = self.wall_now();
        let shared = self.shared.clone();
        self.run(Op::List, None, move |b, now| {
            // A deleted slot blob is not listed.
            let mut slots: Vec<SlotRecord> = (!b.missing)
                .then(|| slot_record(0, b, now))
                .into_iter()
                .collect();
            let others = shared.slots.lock().unwrap();
            slots.extend(others.iter().filter_map(|(i, s)| s.slot_record(*i, now)));
            Ok((listing(b, now, date), slots))
        })
        .await
    }

    async fn list_members(&self) -> Result<Vec<MemberRecord>, StoreError> {
        let date = self.wall_now();
        self.run(Op::List, None, move |b, now| Ok(listing(b, now, date)))
            .await
    }

    async fn create_member(&self, key: &MemberKey, member: &Member) -> Result<(), StoreError> {
        let created = self.wall_now();
        let (key, member) = (key.clone(), member.clone());
        self.run(Op::MemberCreate, None, move |b, _| {
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
        })
        .await
    }

    async fn acquire_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        seconds: u8,
    ) -> Result<(), StoreError> {
        let key = key.clone();
        self.run(Op::MemberAcquire, Some(id), move |b, now| {
            let clock = b.clock;
            record(b, &key)?.lease.acquire(id, seconds, clock, now)
        })
        .await
    }

    async fn renew_member(&self, key: &MemberKey, id: LeaseId) -> Result<(), StoreError> {
        let key = key.clone();
        self.run(Op::MemberRenew, Some(id), move |b, now| {
            let clock = b.clock;
            record(b, &key)?.lease.renew(id, clock, now)
        })
        .await
    }

    async fn write_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        member: &Member,
    ) -> Result<(), StoreError> {
        let (key, member) = (key.clone(), member.clone());
        self.run(Op::MemberWrite, Some(id), move |b, now| {
            let r = record(b, &key)?;
            r.lease.admits_write(id, now)?;
            r.member = member;
            b.record_writes += 1;
            let etag = b.record_writes;
            let r = record(b, &key)?;
            r.etag = etag;
            Ok(())
        })
        .await
    }

    async fn delete_member(
        &self,
        key: &MemberKey,
        lease: Option<LeaseId>,
        etag: Option<&ETag>,
    ) -> Result<(), StoreError> {
        let (key, etag) = (key.clone(), etag.cloned());
        self.run(Op::MemberDelete, lease, move |b, now| {
            let r = record(b, &key)?;
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
            b.members.remove(&key);
            Ok(())
        })
        .await
    }
}
