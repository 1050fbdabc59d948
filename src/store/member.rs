//! Member records (docs/succession.md): one blob per instance of a group, beside the lease blob,
//! under `<blob>.members/` (not `<blob>/`: on an account with a hierarchical namespace a name
//! cannot be both a file and a folder). Each is held under a lease of its own, its liveness: a
//! member whose record lease is not `leased` is dead. Its metadata says who it is, where it stands
//! in line and how to hand it the group's lease; its creation time, assigned by the service, is
//! when it joined.
//!
//! This file owns the record's name and metadata; the store implementations store them, and
//! the elector's `members` module decides what to do with them.

use super::blob::{ETag, LeaseId, LeaseState};
use super::error::StoreError;
use super::metadata::{META_SLOTS, rfc3339};
use crate::secret::Secret;
use time::OffsetDateTime;

/// What follows the lease blob's name to make the prefix of its member records.
pub const MEMBERS_SUFFIX: &str = ".members/";

/// Metadata keys of a member record.
/// The member's identity (as the record's name encodes it, but readable).
pub const META_MEMBER: &str = "leasehold_member";
/// `[election].priority`: higher leads first.
pub const META_PRIORITY: &str = "leasehold_priority";
/// The lease id the member will acquire the group's lease with: a leader hands the lease to
/// it by changing the lease id to this.
pub const META_ACQUIRES_WITH: &str = "leasehold_acquires_with";
/// `[election].advertise`: where the member takes `POST /wake`.
pub const META_ADVERTISE: &str = "leasehold_advertise";
/// The member's wake token (docs/succession.md, "The handoff"): what a `POST /wake` to it must
/// carry in `X-Leasehold-Wake`. A secret of the group: readable only by those with access to the
/// storage account, never shown in logs or `status`.
pub const META_WAKE_TOKEN: &str = "leasehold_wake_token";
/// Until when (RFC 3339, UTC) the member stays out of the election (a health cooldown): no
/// leader hands it the lease meanwhile.
pub const META_STANDBY_UNTIL: &str = "leasehold_standby_until";

/// How long (in milliseconds, by the member's own monotonic clock) the member had been a member
/// when it wrote this: written once, `[election].preempt_after` after the record was created, so
/// that a leader preempts only for a member that was alive then (a member killed sooner leaves a
/// record that looks alive until its lease expires, but never this mark).
pub const META_SETTLED: &str = "leasehold_settled_ms";

/// The name of a member's record below the members prefix: its identity, with every character
/// but ASCII letters, digits, `-` and `_` written as `~XX` (hex). Every identity (1-256
/// printable ASCII characters) so gives a name segment that the storage client sends as written
/// and that storage keeps as written (no `/`, `\`, `.` or `%`, nothing that ends in `.`), and
/// two identities never share a name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MemberKey(String);

impl MemberKey {
    /// The key of the member named `identity`.
    pub fn of(identity: &str) -> Self {
        let mut key = String::with_capacity(identity.len());
        for b in identity.bytes() {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                key.push(b as char);
            } else {
                key.push_str(&format!("~{b:02X}"));
            }
        }
        Self(key)
    }

    /// The key as it appears in the record's name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The record's blob name beside the lease blob `blob`.
    pub fn blob_name(&self, blob: &str) -> String {
        format!("{blob}{MEMBERS_SUFFIX}{}", self.0)
    }
}

impl std::fmt::Display for MemberKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why storage would not take the name of `identity`'s record beside `blob` (too long, too many
/// segments), if it would not. The lease blob's own name rules hold for the rest of it.
pub(crate) fn member_name_problem(blob: &str, identity: &str) -> Option<String> {
    let name = MemberKey::of(identity).blob_name(blob);
    let chars = name.chars().count();
    if chars > 1024 {
        return Some(format!(
            "the member record of this instance, {blob}{MEMBERS_SUFFIX}<identity>, would be \
             {chars} characters long (storage allows 1024); shorten [storage].blob or identity"
        ));
    }
    if name.split('/').count() > 254 {
        return Some(format!(
            "the member record of this instance, {blob}{MEMBERS_SUFFIX}<identity>, would have \
             more than 254 path segments (Azure's limit); use fewer '/' in [storage].blob"
        ));
    }
    None
}

/// What a member publishes in its record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// Its identity.
    pub identity: String,
    /// `[election].priority`: higher leads first.
    pub priority: i64,
    /// The lease id it will acquire the group's lease with.
    pub acquires_with: LeaseId,
    /// `[election].advertise`, where it takes `POST /wake`.
    pub advertise: Option<String>,
    /// What a wake-up must carry to be taken (published with `advertise`); `Debug` hides it.
    pub wake_token: Option<Secret>,
    /// Until when it stays out of the election (a health cooldown).
    pub standby_until: Option<OffsetDateTime>,
    /// Its `[lease].slots` (`leasehold_slots`, written only when not 1), so that the others see a
    /// member configured for another count (docs/slots.md).
    pub slots: u32,
    /// How long it had been a member, by its own clock, when it said so (once, at its
    /// `preempt_after`): the proof of life a preempting leader asks for.
    pub settled: Option<std::time::Duration>,
}

impl Member {
    /// Whether it stays out of the election at `now`.
    pub fn in_standby(&self, now: OffsetDateTime) -> bool {
        self.standby_until.is_some_and(|until| until > now)
    }

    /// The metadata pairs of its record.
    pub fn to_metadata(&self) -> Vec<(&'static str, String)> {
        let mut pairs = vec![
            (META_MEMBER, self.identity.clone()),
            (META_PRIORITY, self.priority.to_string()),
            (META_ACQUIRES_WITH, self.acquires_with.to_string()),
        ];
        if let Some(url) = &self.advertise {
            pairs.push((META_ADVERTISE, url.clone()));
        }
        if let Some(token) = &self.wake_token {
            pairs.push((META_WAKE_TOKEN, token.expose().to_owned()));
        }
        if let Some(until) = self.standby_until {
            pairs.push((META_STANDBY_UNTIL, rfc3339(until)));
        }
        if self.slots != 1 {
            pairs.push((META_SLOTS, self.slots.to_string()));
        }
        if let Some(settled) = self.settled {
            pairs.push((META_SETTLED, settled.as_millis().to_string()));
        }
        pairs
    }

    /// Reads a record's metadata. A record whose metadata is not what a member writes is no
    /// member: it has no place in line (nobody could hand it the lease).
    pub fn from_metadata<'a>(
        mut get: impl FnMut(&str) -> Option<&'a str>,
    ) -> Result<Self, StoreError> {
        let bad = |key: &'static str, value: &str| StoreError::BadMetadata {
            key,
            value: value.to_owned(),
        };
        let identity = get(META_MEMBER).ok_or_else(|| bad(META_MEMBER, ""))?;
        let priority = match get(META_PRIORITY) {
            Some(p) => p.trim().parse().map_err(|_| bad(META_PRIORITY, p))?,
            None => 0,
        };
        let lease = get(META_ACQUIRES_WITH).ok_or_else(|| bad(META_ACQUIRES_WITH, ""))?;
        let acquires_with = LeaseId::parse(lease).ok_or_else(|| bad(META_ACQUIRES_WITH, lease))?;
        let standby_until = match get(META_STANDBY_UNTIL) {
            Some(t) => Some(
                OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                    .map_err(|_| bad(META_STANDBY_UNTIL, t))?,
            ),
            None => None,
        };
        let slots = match get(META_SLOTS) {
            Some(n) => n.trim().parse().map_err(|_| bad(META_SLOTS, n))?,
            None => 1,
        };
        let settled = match get(META_SETTLED) {
            Some(ms) => Some(std::time::Duration::from_millis(
                ms.trim().parse().map_err(|_| bad(META_SETTLED, ms))?,
            )),
            None => None,
        };
        Ok(Self {
            identity: identity.to_owned(),
            priority,
            acquires_with,
            advertise: get(META_ADVERTISE).map(str::to_owned),
            wake_token: get(META_WAKE_TOKEN).map(|t| Secret::new(t.to_owned())),
            standby_until,
            slots,
            settled,
        })
    }
}

/// One member record as a listing shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRecord {
    /// Its name below the members prefix.
    pub key: MemberKey,
    /// What the member published.
    pub member: Member,
    /// When the record was created, by the service's clock: when the member joined. Members'
    /// clocks do not enter the order.
    pub joined: OffsetDateTime,
    /// The record's lease: `leased` while the member lives.
    pub lease: LeaseState,
    /// For a delete conditional on nothing having changed since.
    pub etag: ETag,
    /// How long the record had existed when it was listed, by the service's clock (the listing's
    /// `Date` minus the record's creation time; whole seconds, as the service reports both).
    pub age: std::time::Duration,
}

impl MemberRecord {
    /// Whether the member lives: its record lease is held.
    pub fn is_alive(&self) -> bool {
        self.lease == LeaseState::Leased
    }

    /// The member's identity.
    pub fn identity(&self) -> &str {
        &self.member.identity
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_identity_gets_a_name_storage_keeps() {
        assert_eq!(MemberKey::of("worker-1").as_str(), "worker-1");
        assert_eq!(MemberKey::of("a.b").as_str(), "a~2Eb");
        assert_eq!(MemberKey::of("x/../y z~").as_str(), "x~2F~2E~2E~2Fy~20z~7E");
        // Distinct identities, distinct keys (the escape character is escaped too).
        assert_ne!(MemberKey::of("~2E"), MemberKey::of("."));
        // Every printable ASCII character: nothing the blob-name rules refuse.
        let all: String = (0x20u8..0x7f).map(char::from).collect();
        let name = MemberKey::of(all.trim()).blob_name("svc");
        crate::store::target::check_blob(&name).unwrap();
        assert_eq!(name.matches('/').count(), 1);
        let longest = ".".repeat(256);
        assert_eq!(MemberKey::of(&longest).as_str().len(), 768);
        assert_eq!(member_name_problem("svc", &longest), None);
        let err = member_name_problem(&"b".repeat(300), &longest).unwrap();
        assert!(err.contains("1024"), "{err}");
    }

    #[test]
    fn metadata_round_trip() {
        let m = Member {
            identity: "w 1".into(),
            priority: -3,
            acquires_with: LeaseId::random(),
            advertise: Some("http://10.0.0.5:9464".into()),
            wake_token: Some(Secret::new("0123456789abcdef0123456789abcdef".into())),
            standby_until: Some(OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap()),
            slots: 4,
            settled: Some(std::time::Duration::from_millis(30_000)),
        };
        assert!(!format!("{m:?}").contains("0123456789abcdef"), "{m:?}");
        let pairs = m.to_metadata();
        let back =
            Member::from_metadata(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.as_str()))
                .unwrap();
        assert_eq!(back, m);
        assert!(Member::from_metadata(|_| None).is_err(), "not a member");
        let err = Member::from_metadata(|k| match k {
            META_MEMBER => Some("w"),
            META_ACQUIRES_WITH => Some("nope"),
            _ => None,
        })
        .unwrap_err();
        assert!(err.to_string().contains(META_ACQUIRES_WITH), "{err}");
    }
}
