//! The store's requests on the in-memory blob, each sent over the client's connection (or its
//! simulated network) and judged on arrival by its rule in `rules.rs`.

use super::rules;
use super::store::MemoryStore;
use crate::store::blob::{
    BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, Notice, SlotRecord,
};
use crate::store::error::StoreError;
use crate::store::lease::{GroupStore, LeaseStore};
use crate::store::member::{Member, MemberKey, MemberRecord};
use crate::store::op::Op;
use leasehold_core::quorum::{Fingerprint, Stamp};
use std::sync::Arc;
use std::time::Duration;

impl LeaseStore for MemoryStore {
    async fn prepare(&self, create: bool) -> Result<(), StoreError> {
        let date = self.wall_now();
        self.run(Op::Prepare, None, move |b, _| {
            rules::prepare(b, create, date)
        })
        .await
    }

    async fn acquire(&self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        self.run(Op::Acquire, Some(id), move |b, now| {
            rules::acquire(b, now, id, seconds)
        })
        .await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Renew, Some(id), move |b, now| rules::renew(b, now, id))
            .await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Release, Some(id), move |b, _| rules::release(b, id))
            .await
    }

    async fn break_lease(&self, _period: Duration) -> Result<u64, StoreError> {
        Ok(rules::break_lease(&mut self.blob()))
    }
}

impl GroupStore for MemoryStore {
    async fn read(&self) -> Result<BlobState, StoreError> {
        let date = self.wall_now();
        self.run(Op::Read, None, move |b, now| rules::read(b, now, date))
            .await
    }

    async fn read_stamped(&self) -> Result<(BlobState, Stamp), StoreError> {
        let date = self.wall_now();
        self.run(Op::Read, None, move |b, now| {
            rules::read(b, now, date).map(|read| (read, b.stamp))
        })
        .await
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        self.run(Op::Read, None, move |b, now| rules::check_lease(b, now, id))
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
            rules::write_holder(b, now, id, &etag, holder)
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
            rules::change(b, now, id, proposed, if_match.as_ref())
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
            rules::write_notice(b, now, id, holder, notice, if_match.as_ref())
        })
        .await
    }

    async fn release_if(&self, id: LeaseId, etag: &ETag) -> Result<(), StoreError> {
        let etag = etag.clone();
        self.run(Op::Release, Some(id), move |b, _| {
            rules::release_if(b, id, &etag)
        })
        .await
    }

    async fn recreate(&self, by: &str) -> Result<(), StoreError> {
        let (by, date) = (by.to_owned(), self.wall_now());
        self.run(Op::Prepare, None, move |b, _| rules::recreate(b, by, date))
            .await
    }

    async fn create_stamped(&self, fingerprint: Fingerprint) -> Result<(), StoreError> {
        let stamp = rules::stamp(fingerprint);
        let date = self.wall_now();
        self.run(Op::Prepare, None, move |b, _| {
            rules::create_stamped(b, stamp, date)
        })
        .await
    }

    fn slot(&self, slot: u32) -> Arc<Self> {
        Arc::new(Self {
            shared: self.slot_shared(slot),
            connection: self.connection.clone(),
        })
    }

    async fn read_member(&self, key: &MemberKey) -> Result<(LeaseState, ETag), StoreError> {
        let date = self.wall_now();
        let key = key.clone();
        self.run(Op::MemberRead, None, move |b, now| {
            rules::read_member(b, now, date, &key)
        })
        .await
    }

    async fn read_record(&self, key: &MemberKey) -> Result<Option<MemberRecord>, StoreError> {
        let date = self.wall_now();
        let key = key.clone();
        self.run(Op::MemberRead, None, move |b, now| {
            rules::read_record(b, now, date, &key)
        })
        .await
    }

    async fn list_group(&self) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        // One request, counted (and scripted) as a listing.
        let date = self.wall_now();
        let shared = self.shared.clone();
        self.run(Op::List, None, move |b, now| {
            rules::list_group(b, &shared.slots, now, date)
        })
        .await
    }

    async fn list_members(&self) -> Result<Vec<MemberRecord>, StoreError> {
        let date = self.wall_now();
        self.run(Op::List, None, move |b, now| {
            rules::list_members(b, now, date)
        })
        .await
    }

    async fn create_member(&self, key: &MemberKey, member: &Member) -> Result<(), StoreError> {
        let created = self.wall_now();
        let (key, member) = (key.clone(), member.clone());
        self.run(Op::MemberCreate, None, move |b, _| {
            rules::create_member(b, key, member, created)
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
            rules::acquire_member(b, now, &key, id, seconds)
        })
        .await
    }

    async fn renew_member(&self, key: &MemberKey, id: LeaseId) -> Result<(), StoreError> {
        let key = key.clone();
        self.run(Op::MemberRenew, Some(id), move |b, now| {
            rules::renew_member(b, now, &key, id)
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
            rules::write_member(b, now, &key, id, member)
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
            rules::delete_member(b, now, &key, lease, etag.as_ref())
        })
        .await
    }
}
