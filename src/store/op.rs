//! The kinds of storage request: one name for each, as the elector reports them in logs and
//! metrics, and as the in-memory store scripts and counts them.

/// A kind of storage request. The elector times and reports each request under one of these;
/// `MemoryStore` (feature `test-util`) scripts faults and lists the requests it got by them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
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
    /// Every kind: `/metrics` shows each from the start (at 0), and docs/operations.md names
    /// each.
    pub const ALL: [Op; 15] = [
        Self::Prepare,
        Self::Acquire,
        Self::Renew,
        Self::Release,
        Self::Read,
        Self::WriteEpoch,
        Self::Change,
        Self::Notice,
        Self::List,
        Self::MemberCreate,
        Self::MemberAcquire,
        Self::MemberRenew,
        Self::MemberWrite,
        Self::MemberDelete,
        Self::MemberRead,
    ];

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

/// Fails to compile when a kind is added without a place in [`Op::ALL`] below: the match must
/// list every kind, and each arm names its place.
const _: () = {
    const fn place(op: Op) -> usize {
        match op {
            Op::Prepare => 0,
            Op::Acquire => 1,
            Op::Renew => 2,
            Op::Release => 3,
            Op::Read => 4,
            Op::WriteEpoch => 5,
            Op::Change => 6,
            Op::Notice => 7,
            Op::List => 8,
            Op::MemberCreate => 9,
            Op::MemberAcquire => 10,
            Op::MemberRenew => 11,
            Op::MemberWrite => 12,
            Op::MemberDelete => 13,
            Op::MemberRead => 14,
        }
    }
    let mut i = 0;
    while i < Op::ALL.len() {
        assert!(
            place(Op::ALL[i]) == i,
            "Op::ALL lists every kind once, in order"
        );
        i += 1;
    }
};
