//! The lease store: the only way the rest of leasehold talks to storage.
//!
//! [`LeaseStore`] is the handful of blob operations leader election needs: the lease blob's
//! lease and metadata, the member records beside it (`member`), and with slots the slot blobs
//! `<blob>.slots/<i>` ([`LeaseStore::slot`]), each a lease blob of its own. [`AzureStore`]
//! implements it over the Azure SDK (all SDK types stay in its file and in `identity`, its Entra
//! ID tokens), for the [`StorageTarget`] it is given; `MemoryStore` (feature `test-util`) keeps
//! the blob in memory for tests. The store does no retries and no timeouts of its own: the
//! elector owns time, because only it knows how long a request may take before the stop
//! deadline (design rule 4).

mod azure;
mod identity;
mod member;
#[cfg(any(test, feature = "test-util"))]
pub(crate) mod memory;
mod op;
pub(crate) mod target;

pub use crate::secret::Secret;
pub use azure::AzureStore;
pub(crate) use member::member_name_problem;
pub use member::{
    MEMBERS_SUFFIX, META_ACQUIRES_WITH, META_ADVERTISE, META_MEMBER, META_PRIORITY,
    META_STANDBY_UNTIL, META_WAKE_TOKEN, Member, MemberKey, MemberRecord,
};
#[cfg(feature = "test-util")]
pub use memory::{Behaviour, MemoryStore};
#[cfg(feature = "test-util")]
pub use op::Op;
#[cfg(not(feature = "test-util"))]
pub(crate) use op::Op;
pub use target::{
    Credential, EntraKind, IdentityEndpoint, InvalidTarget, StorageTarget, TokenSource,
};

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;

/// Metadata keys written under the lease (design section 3).
/// The leader's identity.
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
/// Members a leader handed the lease to that did not take it (design section 16), comma
/// separated, written with the notice that hands it on: every member that reads the notice
/// passes them over for a while.
pub const META_PASSED_OVER: &str = "leasehold_passed_over";
/// The epoch a leader handing the lease over reserved for its successor (design section 17),
/// written with the handoff notice: the last epoch + 1. The successor makes it its own by
/// writing it, under its own lease id and only while the blob is as the notice left it.
pub const META_RESERVED_EPOCH: &str = "leasehold_reserved_epoch";
/// The lease id the epoch of [`META_RESERVED_EPOCH`] is reserved for: the successor's.
pub const META_RESERVED_FOR: &str = "leasehold_reserved_for";
/// On a blob that a member created again after finding it deleted while its group had members
/// (design section 16): that member's identity. Until a leader writes an epoch on it, the blob
/// is under a lock-delay: no body starts on it before `L + M` after a member first saw it gone
/// (or first saw this mark).
pub const META_RECREATED: &str = "leasehold_recreated";
/// `[lease].slots` of the leader that wrote the epoch (design section 12), written only when it
/// is not 1: a group's count is what slot 0 (the group's blob) records, absent meaning 1.
pub const META_SLOTS: &str = "leasehold_slots";
/// What follows the group's blob name to make the names of slots 1 to N - 1:
/// `<blob>.slots/<i>` (slot 0 is the group's blob itself).
pub const SLOTS_SUFFIX: &str = ".slots/";

/// A lease id. leasehold proposes its own, so that it knows which lease a request that timed
/// out on our side may have taken on the server (and can give it back).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LeaseId(pub uuid::Uuid);

impl LeaseId {
    /// A new random (version 4) id. (In a simulated history, drawn from the history's seed.)
    pub fn random() -> Self {
        #[cfg(any(test, feature = "test-util"))]
        if crate::sim::active() {
            let bytes = fastrand::u128(..).to_le_bytes();
            return Self(uuid::Builder::from_random_bytes(bytes).into_uuid());
        }
        Self(uuid::Uuid::new_v4())
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
    /// `[lease].slots` of that leader ([`META_SLOTS`]); `None` when not recorded (1).
    pub slots: Option<u32>,
}

/// One slot blob as a listing shows it (design section 12).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotRecord {
    /// The slot: 0 is the group's blob, i > 0 is `<blob>.slots/<i>`.
    pub slot: u32,
    /// Its lease: who holds the slot is the holder of a `leased` slot blob.
    pub lease: LeaseState,
    /// Its last holder's metadata.
    pub holder: Option<Holder>,
    /// The handoff notice on it ([`META_SUCCESSOR`]): the member its holder is handing it to.
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
    /// The handoff notice ([`META_SUCCESSOR`]): the member the holder is handing the lease to.
    pub successor: Option<String>,
    /// Members passed over by that handoff ([`META_PASSED_OVER`]).
    pub passed_over: Vec<String>,
    /// The epoch that handoff reserved for the successor ([`META_RESERVED_EPOCH`]).
    pub reserved: Option<Reservation>,
    /// Who created the blob again after finding it deleted ([`META_RECREATED`]), while no
    /// leader has written an epoch on it since.
    pub recreated: Option<String>,
    /// How long ago the blob was created, by the service's clock (its answer's date minus the
    /// blob's creation time; whole seconds; zero when unknown).
    pub age: Duration,
}

/// What a leader writes on the blob when it hands the lease over (design sections 10, 16).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Notice {
    /// The member the lease is being handed to ([`META_SUCCESSOR`]).
    pub successor: String,
    /// Members handed the lease before that did not take it ([`META_PASSED_OVER`]).
    pub passed_over: Vec<String>,
    /// The next epoch, reserved for the successor's lease id (design section 17).
    pub reserved: Option<Reservation>,
}

/// The epoch a handoff reserves for the successor ([`META_RESERVED_EPOCH`],
/// [`META_RESERVED_FOR`]).
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

/// The blob operations leader election needs. Implementations add no retries or timeouts.
///
/// The member records ([`MemberRecord`]) are blobs beside the lease blob, named by
/// [`MemberKey::blob_name`], each with a lease of its own.
pub trait LeaseStore: Send + Sync + 'static {
    /// The store for the member records' background traffic (record renews, writes, listings),
    /// which must neither make the lease's renews queue behind it nor leave them a connection
    /// the server is about to close. By default the store itself: [`AzureStore`] shares its
    /// pool, which opens a second connection rather than queue and never hands out one past
    /// the server's announced keep-alive, so the records' requests ride on the connection the
    /// lease's own requests keep open.
    fn with_own_connections(self: &Arc<Self>) -> Arc<Self>
    where
        Self: Sized,
    {
        self.clone()
    }

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

    /// Reads lease state, holder metadata and ETag.
    fn read(&self) -> impl Future<Output = Result<BlobState, StoreError>> + Send;

    /// Whether `id` is the blob's active lease: a read conditional on that lease id (Get Blob
    /// Properties with `x-ms-lease-id`), which changes nothing, not even the lease's clock.
    fn check_lease(
        &self,
        id: LeaseId,
    ) -> impl Future<Output = Result<LeaseCheck, StoreError>> + Send;

    /// Writes the holder metadata under lease `id`, only if the blob still has ETag `etag`.
    fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

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

    /// Creates the blob again after it was found deleted while its group had members (design
    /// section 16), marked as such ([`META_RECREATED`] = `by`), only if no blob has its name
    /// (a blob created meanwhile is left as it is). Creates no container.
    fn recreate(&self, by: &str) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// The store of slot `slot` (>= 1) of this group: the blob `<blob>.slots/<slot>` in the
    /// same container, over the same connection (design section 12; slot 0 is this store).
    fn slot(&self, slot: u32) -> std::sync::Arc<Self>;

    /// The lease state and ETag of record `key` (Get Blob Properties: a read).
    fn read_member(
        &self,
        key: &MemberKey,
    ) -> impl Future<Output = Result<(LeaseState, ETag), StoreError>> + Send;

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

/// A failed store operation. Messages never contain credentials or request URLs.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The service answered with an error status.
    #[error("storage answered {status} {}", code.as_deref().unwrap_or("(no error code)"))]
    Status {
        /// The HTTP status.
        status: u16,
        /// The storage error code (`LeaseAlreadyPresent`, ...), when it sent one.
        code: Option<String>,
    },
    /// No answer: connection refused or reset, DNS, TLS.
    #[error("storage unreachable: {0}")]
    Unreachable(String),
    /// No answer in time (the caller's per-request timeout).
    #[error("storage did not answer within {0:?}")]
    TimedOut(Duration),
    /// No Entra ID token could be had: the identity is not available here, or was refused.
    /// (A token endpoint that cannot be reached is [`StoreError::Unreachable`].)
    #[error("no Entra ID token: {0}")]
    Token(String),
    /// The blob's leasehold metadata is not what a leader writes; refusing to guess an epoch.
    #[error("blob metadata {key} = {value:?} is not valid; fix or delete that metadata key")]
    BadMetadata {
        /// The metadata key.
        key: &'static str,
        /// Its value.
        value: String,
    },
    /// Anything else the client library reported (already redacted).
    #[error("storage client error: {0}")]
    Client(String),
}

/// How the elector treats a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// Somebody else holds the lease (acquire only).
    Held,
    /// Our lease is gone for good: someone else may lead already (rule 2).
    LeaseLost,
    /// The credentials or their permissions were refused.
    Denied,
    /// The container or blob does not exist.
    Missing,
    /// Worth retrying: timeouts, throttling, 5xx, no connection.
    Transient,
    /// A request the service will keep refusing (bad input, unsupported).
    Permanent,
}

impl StoreError {
    /// The storage error code, when the service sent one.
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Status { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// How the elector treats it.
    pub fn failure(&self) -> Failure {
        match self {
            Self::Status { status, code } => match (*status, code.as_deref().unwrap_or("")) {
                (409, "LeaseAlreadyPresent" | "LeaseIsBreakingAndCannotBeAcquired") => {
                    Failure::Held
                }
                (404, _) => Failure::Missing,
                (409 | 412, _) => Failure::LeaseLost,
                (401 | 403, _) => Failure::Denied,
                (408 | 429 | 500..=599, _) => Failure::Transient,
                _ => Failure::Permanent,
            },
            Self::Token(_) => Failure::Denied,
            Self::Unreachable(_) | Self::TimedOut(_) => Failure::Transient,
            Self::BadMetadata { .. } | Self::Client(_) => Failure::Permanent,
        }
    }

    /// How to fix a refusal, for people.
    pub fn denied_hint(&self) -> &'static str {
        if let StoreError::Token(_) = self {
            return "check that this identity exists here and is set up for leasehold (README, \
                    \"Microsoft Entra ID\")";
        }
        match self.code() {
            Some("AuthorizationPermissionMismatch" | "AuthorizationResourceTypeMismatch") => {
                "the credential is valid but lacks a permission: acquiring the lease and writing \
                 its metadata need write, so a SAS needs sp=rw (and creating a missing container \
                 an account SAS with srt=co), and an Entra ID identity needs the Storage Blob Data \
                 Contributor role"
            }
            Some("AuthenticationFailed" | "AuthorizationFailure") => {
                "check the account key or SAS token (and that the SAS has not expired), or that \
                 the Entra ID token is for this tenant and for https://storage.azure.com"
            }
            Some("AuthorizationSourceIPMismatch" | "AuthorizationProtocolMismatch") => {
                "the storage account's network rules or the SAS's IP/protocol limits refuse this host"
            }
            _ => "check the credential, its permissions and the storage account's settings",
        }
    }

    /// For a renew: does this failure mean someone else may lead already (rule 2)? 404 (the blob
    /// is gone), 409 (another lease id, or broken) and 412 count; everything else is retried until
    /// the stop deadline (rule 3).
    pub fn loses_lease(&self) -> bool {
        matches!(
            self.failure(),
            Failure::LeaseLost | Failure::Missing | Failure::Held
        )
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
    let lease = get(META_LEASE_ID)
        .and_then(|v| uuid::Uuid::parse_str(v.trim()).ok())
        .map(LeaseId);
    let slots = match get(META_SLOTS) {
        Some(n) => Some(n.trim().parse().map_err(|_| StoreError::BadMetadata {
            key: META_SLOTS,
            value: n.to_owned(),
        })?),
        None => None,
    };
    Ok(Some(Holder {
        identity,
        epoch,
        acquired_at,
        lease,
        slots,
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
    let lease = uuid::Uuid::parse_str(get(META_RESERVED_FOR)?.trim()).ok()?;
    Some(Reservation {
        epoch,
        lease: LeaseId(lease),
    })
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

    fn status(s: u16, c: &str) -> StoreError {
        StoreError::Status {
            status: s,
            code: Some(c.to_owned()),
        }
    }

    #[test]
    fn renew_failures_that_lose_the_lease() {
        assert!(status(409, "LeaseIdMismatchWithLeaseOperation").loses_lease());
        assert!(status(409, "LeaseIsBrokenAndCannotBeRenewed").loses_lease());
        assert!(status(404, "BlobNotFound").loses_lease());
        assert!(status(412, "LeaseIdMismatchWithBlobOperation").loses_lease());
        assert!(!status(500, "InternalError").loses_lease());
        assert!(!status(503, "ServerBusy").loses_lease());
        assert!(!status(403, "AuthorizationFailure").loses_lease());
        assert!(!StoreError::TimedOut(Duration::from_secs(1)).loses_lease());
        assert!(!StoreError::Unreachable("refused".into()).loses_lease());
    }

    #[test]
    fn metadata_round_trip_and_refusal() {
        let h = Holder {
            identity: "w1".into(),
            epoch: 7,
            acquired_at: OffsetDateTime::from_unix_timestamp(1_700_000_000).unwrap(),
            lease: Some(LeaseId::random()),
            slots: Some(3),
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
}
