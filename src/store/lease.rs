//! The store's traits: [`LeaseStore`], the lease's own requests, public; and `GroupStore`,
//! everything else leader election does with the group's blobs (the holder metadata, handoffs,
//! slots, member records), crate-private. `LeaseStore` requires `GroupStore`, so only this
//! crate's stores implement it (it is sealed): [`AzureStore`](super::AzureStore), and
//! `MemoryStore` (feature `test-util`).

use super::blob::{BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, Notice, SlotRecord};
use super::error::StoreError;
use super::member::{Member, MemberKey, MemberRecord};
use leasehold_core::quorum::{Fingerprint, Stamp};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// A store an [`Elector`](crate::Elector) can run on: [`AzureStore`](super::AzureStore) over
/// Azure Blob Storage, or `MemoryStore` (feature `test-util`) in memory. Sealed: leasehold's
/// own stores are the only ones.
///
/// Its methods are the lease's own requests. The elector sends them itself; they are public
/// for programs and tests that handle the lease by hand (a competing holder in a test, say).
/// Implementations add no retries or timeouts: every request is sent once, and waits as long
/// as the caller lets it.
pub trait LeaseStore: GroupStore + Send + Sync + 'static {
    /// Creates the container and an empty blob if they are missing (`create = true`), or reports
    /// that they are missing. Never overwrites an existing blob: its metadata holds the epoch.
    fn prepare(&self, create: bool) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Acquires the lease for `seconds` (15..=60) with our proposed id. Succeeds again when we
    /// already hold it with that id.
    fn acquire(
        &self,
        id: LeaseId,
        seconds: u8,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Renews the lease `id` for another lease duration.
    fn renew(&self, id: LeaseId) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Releases the lease `id`: anyone may acquire it at once.
    fn release(&self, id: LeaseId) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Breaks whatever lease is on the blob; returns the seconds until it can be acquired again.
    fn break_lease(&self, period: Duration)
    -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// What leader election does with the group's blobs beyond the lease's own requests: the
/// holder metadata, handoffs, slots and member records. Crate-private (the module is), and
/// the supertrait of [`LeaseStore`], which it seals.
///
/// The member records ([`MemberRecord`]) are blobs beside the lease blob, named by
/// [`MemberKey::blob_name`], each with a lease of its own.
pub trait GroupStore {
    /// The store for the member records' background traffic (record renews, writes, listings),
    /// which must neither make the lease's renews queue behind it nor leave them a connection
    /// the server is about to close. By default the store itself: `AzureStore` shares its
    /// pool, which opens a second connection rather than queue and never hands out one past
    /// the server's announced keep-alive, so the records' requests ride on the connection the
    /// lease's own requests keep open.
    fn with_own_connections(self: &Arc<Self>) -> Arc<Self>
    where
        Self: Sized,
    {
        self.clone()
    }

    /// Reads lease state, holder metadata and ETag.
    fn read(&self) -> impl Future<Output = Result<BlobState, StoreError>> + Send;

    /// [`GroupStore::read`], and the replica set's marks on the blob (`leasehold_replica_set`,
    /// `leasehold_replica_id`) from the same answer: one request.
    fn read_stamped(&self) -> impl Future<Output = Result<(BlobState, Stamp), StoreError>> + Send;

    /// Whether `id` is the blob's active lease: a read conditional on that lease id (Get Blob
    /// Properties with `x-ms-lease-id`), which changes nothing, not even the lease's clock.
    fn check_lease(
        &self,
        id: LeaseId,
    ) -> impl Future<Output = Result<LeaseCheck, StoreError>> + Send;

    /// Writes the holder metadata under lease `id`, only if the blob still has ETag `etag`.
    /// Returns the blob's new ETag.
    fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> impl Future<Output = Result<ETag, StoreError>> + Send;

    /// Changes the id of our lease `id` to `proposed` (Lease Blob, action `change`): the handoff.
    /// Neither the ETag nor the lease's clock change; the holder of `proposed` acquires with it.
    /// With `if_match`, only while the blob still has that ETag (412 `ConditionNotMet`
    /// otherwise): a handoff handed on only if its successor wrote nothing meanwhile.
    fn change(
        &self,
        id: LeaseId,
        proposed: LeaseId,
        if_match: Option<&ETag>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Writes the holder metadata once more under lease `id`, with the handoff `notice`. The
    /// point is to change the ETag (a `change` leaves it as it was), so that members watching
    /// the blob learn of the handoff. With `if_match`, only while the blob still has that ETag.
    /// Returns the blob's new ETag.
    fn write_notice(
        &self,
        id: LeaseId,
        holder: &Holder,
        notice: &Notice,
        if_match: Option<&ETag>,
    ) -> impl Future<Output = Result<ETag, StoreError>> + Send;

    /// Releases the lease `id` only while the blob still has ETag `etag`: the handoff of a
    /// successor that never took it given up.
    fn release_if(
        &self,
        id: LeaseId,
        etag: &ETag,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Creates the blob again after it was found deleted while its group had members
    /// (docs/safety.md, "Recovery from anything"), marked as such ([`META_RECREATED`] = `by`), only
    /// if no blob has its name (a blob created meanwhile is left as it is). Creates no container.
    fn recreate(&self, by: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Creates a replica's missing blob stamped with its set's `fingerprint` and a fresh random
    /// id of its own (`leasehold_replica_set`, `leasehold_replica_id`: docs/quorum.md, *One
    /// replica set*), only if no blob has its name (a blob created meanwhile is left as it is),
    /// and the container first if it is missing.
    fn create_stamped(
        &self,
        fingerprint: Fingerprint,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The store of slot `slot` (>= 1) of this group: the blob `<blob>.slots/<slot>` in the same
    /// container, over the same connection (docs/slots.md; slot 0 is this store).
    fn slot(&self, slot: u32) -> std::sync::Arc<Self>;

    /// The lease state and ETag of record `key` (Get Blob Properties: a read).
    fn read_member(
        &self,
        key: &MemberKey,
    ) -> impl Future<Output = Result<(LeaseState, ETag), StoreError>> + Send;

    /// Record `key` as a listing shows it (Get Blob Properties: a read, which carries the
    /// metadata): `None` when its metadata is not a member's own, as a listing leaves it out.
    fn read_record(
        &self,
        key: &MemberKey,
    ) -> impl Future<Output = Result<Option<MemberRecord>, StoreError>> + Send;

    /// Everything of the group in one listing (List Blobs with the blob's name as prefix, with
    /// metadata; all pages): the member records, as [`LeaseStore::list_members`], and the slot
    /// blobs (slot 0 included) with their lease state and holder. Blobs of other groups whose
    /// names merely start with this one's are left out.
    fn list_group(
        &self,
    ) -> impl Future<Output = Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError>> + Send;

    /// Every member record, with its metadata, creation time and lease state (List Blobs with
    /// the members prefix; all pages). Records whose metadata a member did not write are left
    /// out.
    fn list_members(&self) -> impl Future<Output = Result<Vec<MemberRecord>, StoreError>> + Send;

    /// Creates the record `key` with `member`'s metadata, only if no blob has that name (409
    /// `BlobAlreadyExists` or 412 otherwise).
    fn create_member(
        &self,
        key: &MemberKey,
        member: &Member,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Acquires the lease of record `key` for `seconds` (15..=60) with id `id`.
    fn acquire_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        seconds: u8,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Renews the lease `id` of record `key`.
    fn renew_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Replaces the metadata of record `key` with `member`'s, under its lease `id`.
    fn write_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        member: &Member,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Deletes record `key`: under its lease `lease` (a member leaving), or only if its ETag
    /// is still `etag` (a leader removing a dead member's record; refused while it is leased).
    fn delete_member(
        &self,
        key: &MemberKey,
        lease: Option<LeaseId>,
        etag: Option<&ETag>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;
}
