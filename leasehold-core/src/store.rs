//! The store's requests as plain data: [`Call`], one variant per request a member sends to
//! storage, each naming the blob it goes to, and [`Return`], the matching answers. A role says
//! "send this call"; a shell carries it out (the daemon's on its real store, a simulator on the
//! memory store's rules at an instant it chooses) and hands back what it returned.
//!
//! The calls are generic over the store's own data ([`Types`]: its lease ids, ETags, reads,
//! records, errors), so that the core names no type of Azure's or of a shell's, and looks into
//! none of them: what a role reads of them is the traits it asks for elsewhere
//! ([`StoreFailure`](crate::StoreFailure), [`line::Record`](crate::line::Record)...).
//!
//! The group's blobs: slot 0 is the lease blob, slot `n >= 1` is its slot blob `n`
//! (docs/slots.md); the member records are blobs beside the lease blob, each named by its key;
//! a listing covers the whole group. A call carries everything it sends, so that it can be
//! sent again, logged or compared as it is.

use crate::quorum::{Fingerprint, Stamp};
use std::time::Duration;

/// The store's data types, which the calls carry and return without looking into them.
pub trait Types {
    /// A lease id (leasehold proposes its own).
    type LeaseId;
    /// An entity tag, for conditional writes.
    type ETag;
    /// One read of a lease blob: its lease state, holder, notice and ETag.
    type Read;
    /// The holder metadata a leader writes on the lease blob: who, its epoch, since when.
    type Holder;
    /// What a leader writes when it hands the lease over: the successor, the passed over, the
    /// reserved epoch.
    type Notice;
    /// A lease's state as the service reports it (leased, available...).
    type LeaseState;
    /// Whether a lease id is a blob's active lease, as a read conditional on it says.
    type Check;
    /// The name of a member record below the members prefix.
    type Key;
    /// A member record as a listing shows it.
    type Record;
    /// What a member publishes in its record.
    type Publish;
    /// A slot blob as a listing shows it.
    type Slot;
    /// A failed request.
    type Error;
}

/// One request to the store, on the blob it names. What each does, and what the service
/// answers, is the store's (the `leasehold` crate's `LeaseStore` and `GroupStore`); the
/// answer comes back as the [`Return`] variant of the same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call<T: Types> {
    /// Create the container and an empty lease blob if missing (`create`), or report that they
    /// are missing. Never overwrites a blob.
    Prepare {
        /// The blob.
        slot: u32,
        /// Whether to create what is missing.
        create: bool,
    },
    /// Acquire the blob's lease for `seconds` with the proposed id `id`.
    Acquire {
        /// The blob.
        slot: u32,
        /// The proposed id.
        id: T::LeaseId,
        /// The lease duration (15..=60).
        seconds: u8,
    },
    /// Renew the lease `id`.
    Renew {
        /// The blob.
        slot: u32,
        /// The lease.
        id: T::LeaseId,
    },
    /// Release the lease `id`.
    Release {
        /// The blob.
        slot: u32,
        /// The lease.
        id: T::LeaseId,
    },
    /// Break whatever lease is on the blob, with a break period of `period`.
    BreakLease {
        /// The blob.
        slot: u32,
        /// How long nobody may acquire it.
        period: Duration,
    },
    /// Read the blob: lease state, holder metadata, notice, ETag.
    Read {
        /// The blob.
        slot: u32,
    },
    /// Read the blob, and the replica set's marks on it, in one request.
    ReadStamped {
        /// The blob.
        slot: u32,
    },
    /// Whether `id` is the blob's active lease (a read conditional on it; changes nothing).
    CheckLease {
        /// The blob.
        slot: u32,
        /// The lease.
        id: T::LeaseId,
    },
    /// Write the holder metadata under lease `id`, only while the blob has ETag `etag`.
    WriteHolder {
        /// The blob.
        slot: u32,
        /// The lease written under.
        id: T::LeaseId,
        /// The ETag it must still have.
        etag: T::ETag,
        /// What is written.
        holder: T::Holder,
    },
    /// Change the id of the lease `id` to `proposed` (the handoff), with `if_match` only while
    /// the blob has that ETag.
    Change {
        /// The blob.
        slot: u32,
        /// The lease.
        id: T::LeaseId,
        /// Its new id.
        proposed: T::LeaseId,
        /// The ETag it must still have, if any.
        if_match: Option<T::ETag>,
    },
    /// Write the holder metadata once more under lease `id`, with the handoff notice, with
    /// `if_match` only while the blob has that ETag.
    WriteNotice {
        /// The blob.
        slot: u32,
        /// The lease written under.
        id: T::LeaseId,
        /// The holder metadata written again.
        holder: T::Holder,
        /// The notice.
        notice: T::Notice,
        /// The ETag it must still have, if any.
        if_match: Option<T::ETag>,
    },
    /// Release the lease `id` only while the blob has ETag `etag`.
    ReleaseIf {
        /// The blob.
        slot: u32,
        /// The lease.
        id: T::LeaseId,
        /// The ETag it must still have.
        etag: T::ETag,
    },
    /// Create the blob again after it was found deleted, marked as created again `by` this
    /// member, only if no blob has its name.
    Recreate {
        /// The blob.
        slot: u32,
        /// Who creates it again.
        by: String,
    },
    /// Create a replica's missing blob stamped with the replica set's `fingerprint` and a fresh
    /// random id of its own (the store's draw), only if no blob has its name (docs/quorum.md,
    /// *One replica set*).
    CreateStamped {
        /// The blob.
        slot: u32,
        /// The set's fingerprint.
        fingerprint: Fingerprint,
    },
    /// The lease state and ETag of the record `key`.
    ReadMember {
        /// The record.
        key: T::Key,
    },
    /// The record `key` as a listing shows it.
    ReadRecord {
        /// The record.
        key: T::Key,
    },
    /// The group in one listing: the member records and the slot blobs.
    ListGroup,
    /// The member records in one listing.
    ListMembers,
    /// Create the record `key` saying `member`, only if no blob has its name.
    CreateMember {
        /// The record.
        key: T::Key,
        /// What it says.
        member: T::Publish,
    },
    /// Acquire the lease of record `key` for `seconds` with id `id`.
    AcquireMember {
        /// The record.
        key: T::Key,
        /// The proposed id.
        id: T::LeaseId,
        /// The lease duration (15..=60).
        seconds: u8,
    },
    /// Renew the lease `id` of record `key`.
    RenewMember {
        /// The record.
        key: T::Key,
        /// The lease.
        id: T::LeaseId,
    },
    /// Replace what record `key` says with `member`, under its lease `id`.
    WriteMember {
        /// The record.
        key: T::Key,
        /// The lease written under.
        id: T::LeaseId,
        /// What it says now.
        member: T::Publish,
    },
    /// Delete record `key`: under its lease `lease`, or only while its ETag is `etag`.
    DeleteMember {
        /// The record.
        key: T::Key,
        /// The record's lease, when its holder deletes it.
        lease: Option<T::LeaseId>,
        /// The ETag it must still have, if any.
        etag: Option<T::ETag>,
    },
}

/// One listing of the group ([`Call::ListGroup`]): its member records `R` and slot blobs `S`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<R, S> {
    /// The member records.
    pub records: Vec<R>,
    /// The slot blobs, slot 0 among them.
    pub slots: Vec<S>,
}

/// What a [`Call`] returned: the variant of the call's name, with the store's answer to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Return<T: Types> {
    /// To [`Call::Prepare`].
    Prepare(Result<(), T::Error>),
    /// To [`Call::Acquire`].
    Acquire(Result<(), T::Error>),
    /// To [`Call::Renew`].
    Renew(Result<(), T::Error>),
    /// To [`Call::Release`].
    Release(Result<(), T::Error>),
    /// To [`Call::BreakLease`]: the seconds until the lease can be acquired again.
    BreakLease(Result<u64, T::Error>),
    /// To [`Call::Read`].
    Read(Result<T::Read, T::Error>),
    /// To [`Call::ReadStamped`]: the read and the replica set's marks.
    ReadStamped(Result<(T::Read, Stamp), T::Error>),
    /// To [`Call::CheckLease`].
    CheckLease(Result<T::Check, T::Error>),
    /// To [`Call::WriteHolder`]: the blob's new ETag.
    WriteHolder(Result<T::ETag, T::Error>),
    /// To [`Call::Change`].
    Change(Result<(), T::Error>),
    /// To [`Call::WriteNotice`]: the blob's new ETag.
    WriteNotice(Result<T::ETag, T::Error>),
    /// To [`Call::ReleaseIf`].
    ReleaseIf(Result<(), T::Error>),
    /// To [`Call::Recreate`].
    Recreate(Result<(), T::Error>),
    /// To [`Call::CreateStamped`].
    CreateStamped(Result<(), T::Error>),
    /// To [`Call::ReadMember`]: the record's lease state and ETag.
    ReadMember(Result<(T::LeaseState, T::ETag), T::Error>),
    /// To [`Call::ReadRecord`]: `None` when its metadata is not a member's own.
    ReadRecord(Result<Option<T::Record>, T::Error>),
    /// To [`Call::ListGroup`].
    ListGroup(Result<Listing<T::Record, T::Slot>, T::Error>),
    /// To [`Call::ListMembers`].
    ListMembers(Result<Vec<T::Record>, T::Error>),
    /// To [`Call::CreateMember`].
    CreateMember(Result<(), T::Error>),
    /// To [`Call::AcquireMember`].
    AcquireMember(Result<(), T::Error>),
    /// To [`Call::RenewMember`].
    RenewMember(Result<(), T::Error>),
    /// To [`Call::WriteMember`].
    WriteMember(Result<(), T::Error>),
    /// To [`Call::DeleteMember`].
    DeleteMember(Result<(), T::Error>),
}

impl<T: Types> Call<T> {
    /// The blob the call goes to when it is the lease blob (0) or a slot blob (`n >= 1`);
    /// `None` for a member record (named by its key) or a listing of the group.
    pub fn slot(&self) -> Option<u32> {
        match self {
            Self::Prepare { slot, .. }
            | Self::Acquire { slot, .. }
            | Self::Renew { slot, .. }
            | Self::Release { slot, .. }
            | Self::BreakLease { slot, .. }
            | Self::Read { slot }
            | Self::ReadStamped { slot }
            | Self::CheckLease { slot, .. }
            | Self::WriteHolder { slot, .. }
            | Self::Change { slot, .. }
            | Self::WriteNotice { slot, .. }
            | Self::ReleaseIf { slot, .. }
            | Self::Recreate { slot, .. }
            | Self::CreateStamped { slot, .. } => Some(*slot),
            Self::ReadMember { .. }
            | Self::ReadRecord { .. }
            | Self::ListGroup
            | Self::ListMembers
            | Self::CreateMember { .. }
            | Self::AcquireMember { .. }
            | Self::RenewMember { .. }
            | Self::WriteMember { .. }
            | Self::DeleteMember { .. } => None,
        }
    }
}

impl<T: Types> Call<T> {
    /// What the call returns when it failed with `e` (no answer by its limit: a timeout).
    pub fn failed(&self, e: T::Error) -> Return<T> {
        match self {
            Self::Prepare { .. } => Return::Prepare(Err(e)),
            Self::Acquire { .. } => Return::Acquire(Err(e)),
            Self::Renew { .. } => Return::Renew(Err(e)),
            Self::Release { .. } => Return::Release(Err(e)),
            Self::BreakLease { .. } => Return::BreakLease(Err(e)),
            Self::Read { .. } => Return::Read(Err(e)),
            Self::ReadStamped { .. } => Return::ReadStamped(Err(e)),
            Self::CheckLease { .. } => Return::CheckLease(Err(e)),
            Self::WriteHolder { .. } => Return::WriteHolder(Err(e)),
            Self::Change { .. } => Return::Change(Err(e)),
            Self::WriteNotice { .. } => Return::WriteNotice(Err(e)),
            Self::ReleaseIf { .. } => Return::ReleaseIf(Err(e)),
            Self::Recreate { .. } => Return::Recreate(Err(e)),
            Self::CreateStamped { .. } => Return::CreateStamped(Err(e)),
            Self::ReadMember { .. } => Return::ReadMember(Err(e)),
            Self::ReadRecord { .. } => Return::ReadRecord(Err(e)),
            Self::ListGroup => Return::ListGroup(Err(e)),
            Self::ListMembers => Return::ListMembers(Err(e)),
            Self::CreateMember { .. } => Return::CreateMember(Err(e)),
            Self::AcquireMember { .. } => Return::AcquireMember(Err(e)),
            Self::RenewMember { .. } => Return::RenewMember(Err(e)),
            Self::WriteMember { .. } => Return::WriteMember(Err(e)),
            Self::DeleteMember { .. } => Return::DeleteMember(Err(e)),
        }
    }
}

impl<T: Types> Return<T> {
    /// Whether the call succeeded.
    pub fn is_ok(&self) -> bool {
        self.error().is_none()
    }

    /// The call's error, when it failed.
    pub fn error(&self) -> Option<&T::Error> {
        match self {
            Self::Prepare(r)
            | Self::Acquire(r)
            | Self::Renew(r)
            | Self::Release(r)
            | Self::Change(r)
            | Self::ReleaseIf(r)
            | Self::Recreate(r)
            | Self::CreateStamped(r)
            | Self::CreateMember(r)
            | Self::AcquireMember(r)
            | Self::RenewMember(r)
            | Self::WriteMember(r)
            | Self::DeleteMember(r) => r.as_ref().err(),
            Self::BreakLease(r) => r.as_ref().err(),
            Self::Read(r) => r.as_ref().err(),
            Self::ReadStamped(r) => r.as_ref().err(),
            Self::CheckLease(r) => r.as_ref().err(),
            Self::WriteHolder(r) | Self::WriteNotice(r) => r.as_ref().err(),
            Self::ReadMember(r) => r.as_ref().err(),
            Self::ReadRecord(r) => r.as_ref().err(),
            Self::ListGroup(r) => r.as_ref().err(),
            Self::ListMembers(r) => r.as_ref().err(),
        }
    }

    /// The name of the call it returns to, for a log or a failed check.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Prepare(_) => "Prepare",
            Self::Acquire(_) => "Acquire",
            Self::Renew(_) => "Renew",
            Self::Release(_) => "Release",
            Self::BreakLease(_) => "BreakLease",
            Self::Read(_) => "Read",
            Self::ReadStamped(_) => "ReadStamped",
            Self::CheckLease(_) => "CheckLease",
            Self::WriteHolder(_) => "WriteHolder",
            Self::Change(_) => "Change",
            Self::WriteNotice(_) => "WriteNotice",
            Self::ReleaseIf(_) => "ReleaseIf",
            Self::Recreate(_) => "Recreate",
            Self::CreateStamped(_) => "CreateStamped",
            Self::ReadMember(_) => "ReadMember",
            Self::ReadRecord(_) => "ReadRecord",
            Self::ListGroup(_) => "ListGroup",
            Self::ListMembers(_) => "ListMembers",
            Self::CreateMember(_) => "CreateMember",
            Self::AcquireMember(_) => "AcquireMember",
            Self::RenewMember(_) => "RenewMember",
            Self::WriteMember(_) => "WriteMember",
            Self::DeleteMember(_) => "DeleteMember",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Call, Types};
    use std::time::Duration;

    /// Store types of plain numbers and strings.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Plain {}

    impl Types for Plain {
        type LeaseId = u64;
        type ETag = String;
        type Read = String;
        type Holder = String;
        type Notice = String;
        type LeaseState = bool;
        type Check = bool;
        type Key = String;
        type Record = String;
        type Publish = String;
        type Slot = u32;
        type Error = String;
    }

    #[test]
    fn a_call_names_the_slot_blob_it_goes_to_and_a_record_call_none() {
        let slot = 2;
        let key = || "a".to_owned();
        let on_slot: Vec<Call<Plain>> = vec![
            Call::Prepare { slot, create: true },
            Call::Acquire {
                slot,
                id: 1,
                seconds: 15,
            },
            Call::Renew { slot, id: 1 },
            Call::Release { slot, id: 1 },
            Call::BreakLease {
                slot,
                period: Duration::ZERO,
            },
            Call::Read { slot },
            Call::ReadStamped { slot },
            Call::CheckLease { slot, id: 1 },
            Call::WriteHolder {
                slot,
                id: 1,
                etag: "e".into(),
                holder: "h".into(),
            },
            Call::Change {
                slot,
                id: 1,
                proposed: 2,
                if_match: None,
            },
            Call::WriteNotice {
                slot,
                id: 1,
                holder: "h".into(),
                notice: "n".into(),
                if_match: None,
            },
            Call::ReleaseIf {
                slot,
                id: 1,
                etag: "e".into(),
            },
            Call::Recreate {
                slot,
                by: "a".into(),
            },
        ];
        for call in &on_slot {
            assert_eq!(call.slot(), Some(slot), "{call:?}");
        }
        let on_the_group: Vec<Call<Plain>> = vec![
            Call::ReadMember { key: key() },
            Call::ReadRecord { key: key() },
            Call::ListGroup,
            Call::ListMembers,
            Call::CreateMember {
                key: key(),
                member: "m".into(),
            },
            Call::AcquireMember {
                key: key(),
                id: 1,
                seconds: 15,
            },
            Call::RenewMember { key: key(), id: 1 },
            Call::WriteMember {
                key: key(),
                id: 1,
                member: "m".into(),
            },
            Call::DeleteMember {
                key: key(),
                lease: Some(1),
                etag: None,
            },
        ];
        for call in &on_the_group {
            assert_eq!(call.slot(), None, "{call:?}");
        }
    }
}
