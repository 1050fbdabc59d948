//! The lease blob as leasehold sees it: its lease and lease ids, its ETag, the holder its metadata
//! records (docs/safety.md, "How it works"), a read of all that, and what a leader writes when it
//! hands the lease over. How these are written as metadata is `metadata`'s.

use leasehold_core::quorum::Stamp;
use std::time::Duration;
use time::OffsetDateTime;

/// A lease id. leasehold proposes its own, so that it knows which lease a request that timed
/// out on our side may have taken on the server (and can give it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub(super) uuid::Uuid);

impl LeaseId {
    /// A new random (version 4) id, from the operating system.
    pub fn random() -> Self {
        Self::drawn(crate::random::Source::Os)
    }

    /// A new random (version 4) id, drawn from `source`.
    pub(crate) fn drawn(source: crate::random::Source) -> Self {
        Self(source.uuid())
    }

    /// The (version 4) id of the random `bits` (a synchronous simulator draws them from its
    /// own seeded generator).
    #[cfg(any(test, feature = "test-util"))]
    #[cfg_attr(
        not(test),
        allow(dead_code, reason = "the synchronous simulator's only")
    )]
    pub(crate) fn of_bits(bits: u128) -> Self {
        Self(uuid::Builder::from_random_bytes(bits.to_le_bytes()).into_uuid())
    }
}

impl LeaseId {
    /// The lease id `text` names (a UUID, as leasehold writes them), if it is one.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        uuid::Uuid::parse_str(text.trim()).ok().map(Self)
    }
}

impl std::fmt::Display for LeaseId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

/// An entity tag, for conditional writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ETag(
    /// As the service sent it.
    pub String,
);

impl From<&str> for ETag {
    fn from(etag: &str) -> Self {
        Self(etag.to_owned())
    }
}

impl AsRef<str> for ETag {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

/// The lease state as the service reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseState {
    /// Nobody holds it.
    Available,
    /// Somebody holds it.
    Leased,
    /// It ran out without a renew; anyone may acquire it.
    Expired,
    /// Being broken: nobody may acquire it until the break period is over.
    Breaking,
    /// Broken; anyone may acquire it.
    Broken,
}

impl std::fmt::Display for LeaseState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Available => "available",
            Self::Leased => "leased",
            Self::Expired => "expired",
            Self::Breaking => "breaking",
            Self::Broken => "broken",
        })
    }
}

/// Who led last, as written in the blob's metadata by the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The leader's identity.
    pub identity: String,
    /// The fencing token: strictly increasing over all leaderships of the blob.
    pub epoch: u64,
    /// When its leadership began.
    pub acquired_at: OffsetDateTime,
    /// The lease id it acquired with; `None` in metadata written before leasehold recorded it.
    pub lease: Option<LeaseId>,
    /// `[lease].slots` of that leader (`leasehold_slots`); `None` when not recorded (1).
    pub slots: Option<u32>,
    /// With `[[storage.replica]]`: the replica's stamp (its set's fingerprint and its own id,
    /// docs/quorum.md), written again with the holder, since a metadata write replaces every
    /// key and a replica without its stamp counts for nobody. Empty on one account.
    pub stamp: Stamp,
}

/// One slot blob as a listing shows it (docs/slots.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRecord {
    /// The slot: 0 is the group's blob, i > 0 is `<blob>.slots/<i>`.
    pub slot: u32,
    /// Its lease: who holds the slot is the holder of a `leased` slot blob.
    pub lease: LeaseState,
    /// Its last holder's metadata.
    pub holder: Option<Holder>,
    /// The handoff notice on it (`leasehold_successor`): the member its holder is handing it to.
    pub successor: Option<String>,
}

/// Whether a given lease id is the blob's active lease, as a read conditional on it says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseCheck {
    /// It is: the read succeeded.
    Active,
    /// Another lease id holds the blob (412 `LeaseIdMismatchWithBlobOperation`).
    HeldByAnother,
    /// No lease is active (412 `LeaseNotPresentWithBlobOperation`).
    NotLeased,
}

/// One read of the blob: its lease state, the last holder, and the ETag for a conditional write.
#[derive(Debug, Clone)]
pub struct BlobState {
    /// The lease, as the service reports it.
    pub lease: LeaseState,
    /// `None` while no leasehold leader has ever written the blob.
    pub holder: Option<Holder>,
    /// For a write conditional on nothing having changed since.
    pub etag: ETag,
    /// The handoff notice (`leasehold_successor`): the member the holder is handing the lease to.
    pub successor: Option<String>,
    /// Members passed over by that handoff (`leasehold_passed_over`).
    pub passed_over: Vec<String>,
    /// The epoch that handoff reserved for the successor (`leasehold_reserved_epoch`).
    pub reserved: Option<Reservation>,
    /// Who created the blob again after finding it deleted (`leasehold_recreated`), while no
    /// leader has written an epoch on it since.
    pub recreated: Option<String>,
    /// How long ago the blob was created, by the service's clock (its answer's date minus the
    /// blob's creation time; whole seconds; zero when unknown).
    pub age: Duration,
}

/// What a leader writes on the blob when it hands the lease over (docs/succession.md;
/// docs/safety.md, "Recovery from anything").
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Notice {
    /// The member the lease is being handed to (`leasehold_successor`).
    pub successor: String,
    /// Members handed the lease before that did not take it (`leasehold_passed_over`).
    pub passed_over: Vec<String>,
    /// The next epoch, reserved for the successor's lease id (docs/succession.md, "The handoff").
    pub reserved: Option<Reservation>,
}

/// The epoch a handoff reserves for the successor (`leasehold_reserved_epoch`,
/// `leasehold_reserved_for`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// The holder's epoch + 1.
    pub epoch: u64,
    /// The successor's lease id: the one the lease is changed to.
    pub lease: LeaseId,
}

impl Notice {
    /// A notice naming `successor`, passing nobody over, reserving nothing.
    pub fn to(successor: &str) -> Self {
        Self {
            successor: successor.to_owned(),
            passed_over: Vec::new(),
            reserved: None,
        }
    }
}

/// A read of the lease blob as the protocol reads it.
impl leasehold_core::blob::LeaseBlob for BlobState {
    type ETag = ETag;
    fn leased(&self) -> bool {
        self.lease == LeaseState::Leased
    }
    fn etag(&self) -> &ETag {
        &self.etag
    }
    fn named(&self) -> Option<&str> {
        self.holder.as_ref().map(|h| h.identity.as_str())
    }
    fn epoch(&self) -> Option<u64> {
        self.holder.as_ref().map(|h| h.epoch)
    }
    fn slots_recorded(&self) -> Option<u32> {
        self.holder.as_ref().and_then(|h| h.slots)
    }
    fn notice(&self) -> Option<&str> {
        self.successor.as_deref()
    }
    fn passed_over(&self) -> &[String] {
        &self.passed_over
    }
    fn recreated(&self) -> bool {
        self.recreated.is_some()
    }
    fn age(&self) -> Duration {
        self.age
    }
}
