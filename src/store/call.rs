//! The store's requests as the core's plain data ([`leasehold_core::store`]) on this crate's
//! store types ([`Blobs`]), and [`carry_out`]: one call sent on a [`LeaseStore`] (Azure's, or
//! the memory store's over its connection), its answer as the core's `Return`. The memory
//! store judges the same calls synchronously too (`MemoryStore::apply`, feature `test-util`).
//!
//! Which connection a call goes over is the caller's to choose, by the store it hands over
//! (the member records' background traffic on the store `with_own_connections` gives): a call
//! is what is sent, not how.

use super::blob::{BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, Notice, SlotRecord};
use super::error::StoreError;
use super::lease::LeaseStore;
use super::member::{Member, MemberKey, MemberRecord};
use std::sync::Arc;

/// This crate's store types, as the core's calls carry them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blobs {}

impl leasehold_core::store::Types for Blobs {
    type LeaseId = LeaseId;
    type ETag = ETag;
    type Read = BlobState;
    type Holder = Holder;
    type Notice = Notice;
    type LeaseState = LeaseState;
    type Check = LeaseCheck;
    type Key = MemberKey;
    type Record = MemberRecord;
    type Publish = Member;
    type Slot = SlotRecord;
    type Error = StoreError;
}

/// What a campaign makes of a request cut at its limit, and of an epoch that cannot be drawn
/// above the last.
impl leasehold_core::campaign::Failed for StoreError {
    fn timed_out(span: std::time::Duration) -> Self {
        Self::TimedOut(span)
    }

    fn last_epoch(last: u64) -> Self {
        Self::BadMetadata {
            key: super::metadata::META_EPOCH,
            value: last.to_string(),
        }
    }
}

/// A store call on this crate's types.
pub(crate) type Call = leasehold_core::store::Call<Blobs>;
/// What a [`Call`] returned.
pub(crate) type Return = leasehold_core::store::Return<Blobs>;
/// A listing of the group, as [`Return::ListGroup`] carries it.
pub(crate) type Listing = leasehold_core::store::Listing<MemberRecord, SlotRecord>;

/// A listing of the group as the core's calls return it.
pub(crate) fn listing((records, slots): (Vec<MemberRecord>, Vec<SlotRecord>)) -> Listing {
    leasehold_core::store::Listing { records, slots }
}

/// Sends `call` on `store` (a call on slot `n >= 1` on its slot blob's store, `store.slot(n)`)
/// and returns its answer. Sent once, waited for as long as the caller waits: the store adds
/// no retries and no timeouts, for the caller cuts each request at its own limit (docs/safety.md,
/// rule 4).
pub(crate) async fn carry_out<S: LeaseStore>(store: &S, call: &Call) -> Return {
    let slot_store: Option<Arc<S>> = match call.slot() {
        Some(n) if n > 0 => Some(store.slot(n)),
        _ => None,
    };
    let blob = slot_store.as_deref().unwrap_or(store);
    match call {
        Call::Prepare { create, .. } => Return::Prepare(blob.prepare(*create).await),
        Call::Acquire { id, seconds, .. } => Return::Acquire(blob.acquire(*id, *seconds).await),
        Call::Renew { id, .. } => Return::Renew(blob.renew(*id).await),
        Call::Release { id, .. } => Return::Release(blob.release(*id).await),
        Call::BreakLease { period, .. } => Return::BreakLease(blob.break_lease(*period).await),
        Call::Read { .. } => Return::Read(blob.read().await),
        Call::ReadStamped { .. } => Return::ReadStamped(blob.read_stamped().await),
        Call::CheckLease { id, .. } => Return::CheckLease(blob.check_lease(*id).await),
        Call::WriteHolder {
            id, etag, holder, ..
        } => Return::WriteHolder(blob.write_holder(*id, etag, holder).await),
        Call::Change {
            id,
            proposed,
            if_match,
            ..
        } => Return::Change(blob.change(*id, *proposed, if_match.as_ref()).await),
        Call::WriteNotice {
            id,
            holder,
            notice,
            if_match,
            ..
        } => Return::WriteNotice(
            blob.write_notice(*id, holder, notice, if_match.as_ref())
                .await,
        ),
        Call::ReleaseIf { id, etag, .. } => Return::ReleaseIf(blob.release_if(*id, etag).await),
        Call::Recreate { by, .. } => Return::Recreate(blob.recreate(by).await),
        Call::CreateStamped { fingerprint, .. } => {
            Return::CreateStamped(blob.create_stamped(*fingerprint).await)
        }
        Call::ReadMember { key } => Return::ReadMember(blob.read_member(key).await),
        Call::ReadRecord { key } => Return::ReadRecord(blob.read_record(key).await),
        Call::ListGroup => Return::ListGroup(blob.list_group().await.map(listing)),
        Call::ListMembers => Return::ListMembers(blob.list_members().await),
        Call::CreateMember { key, member } => {
            Return::CreateMember(blob.create_member(key, member).await)
        }
        Call::AcquireMember { key, id, seconds } => {
            Return::AcquireMember(blob.acquire_member(key, *id, *seconds).await)
        }
        Call::RenewMember { key, id } => Return::RenewMember(blob.renew_member(key, *id).await),
        Call::WriteMember { key, id, member } => {
            Return::WriteMember(blob.write_member(key, *id, member).await)
        }
        Call::DeleteMember { key, lease, etag } => {
            Return::DeleteMember(blob.delete_member(key, *lease, etag.as_ref()).await)
        }
    }
}
