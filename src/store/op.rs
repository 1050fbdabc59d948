//! The kinds of storage request: one name for each, as the elector reports them in logs and
//! metrics, and as the in-memory store scripts and counts them.

/// A kind of storage request. The elector times and reports each request under one of these;
/// `MemoryStore` (feature `test-util`) scripts faults and lists the requests it got by them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Op {
    /// Create the container and the blob if missing.
    Prepare,
    /// Acquire the lease.
    Acquire,
    /// Renew it.
    Renew,
    /// Release it.
    Release,
    /// Read the blob (lease state, metadata), or check a lease id.
    Read,
    /// Write the holder metadata (the epoch).
    WriteEpoch,
    /// Change the lease id (Lease Blob `change`: a handoff).
    Change,
    /// Write the handoff notice, before the change.
    Notice,
    /// List the member records (List Blobs).
    List,
    /// Create a member record.
    MemberCreate,
    /// Acquire a member record's lease.
    MemberAcquire,
    /// Renew a member record's lease.
    MemberRenew,
    /// Write a member record's metadata.
    MemberWrite,
    /// Delete a member record.
    MemberDelete,
    /// Read a member record's properties (Get Blob Properties: a watcher waiting for a slot).
    MemberRead,
}

impl Op {
    /// Its name in logs and metrics (the `op` label).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::Acquire => "acquire",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Read => "read",
            Self::WriteEpoch => "write_epoch",
            Self::Change => "change",
            Self::Notice => "write_notice",
            Self::List => "list_members",
            Self::MemberCreate => "member_create",
            Self::MemberAcquire => "member_acquire",
            Self::MemberRenew => "member_renew",
            Self::MemberWrite => "member_write",
            Self::MemberDelete => "member_delete",
            Self::MemberRead => "member_read",
        }
    }
}
