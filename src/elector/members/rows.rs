//! What `status`, `/status` and `/metrics` show of the line: each member's part and row
//! ([`table`]), the leader as last read, the slots ([`slot_rows`]), and the whole view
//! ([`view`]). The daemon's telemetry and the one-shot `status` read these types back.

use super::line::Succession;
use super::line::{Standing, successor};
use crate::store::{Holder, LeaseState, MemberKey, MemberRecord, SlotRecord};
use serde::Serialize;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use tokio::time::Instant;

/// A member's part, as the table of `status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Part {
    /// Holds the lease.
    Leader,
    /// First in line: the leader hands its lease to it; it polls the lease.
    Successor,
    /// Alive, in line behind the successor: watches.
    Follower,
    /// Alive, out of the election for a while (a health cooldown).
    Standby,
    /// Its record lease is not held.
    Dead,
}

/// One member as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct MemberRow {
    pub identity: String,
    pub priority: i64,
    /// Its part: leader, successor, follower, standby or dead.
    #[serde(rename = "role")]
    pub part: Part,
    /// Whether its record lease is held.
    pub alive: bool,
    /// Alive: since it joined; dead: since this instance first saw it dead (unknown to a
    /// one-shot `status`).
    pub since: Option<String>,
    pub advertise: Option<String>,
    /// While in standby: until when.
    pub standby_until: Option<String>,
    /// With `[lease].slots` > 1: the slot it holds, as the listing of slots shows (docs/slots.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
}

/// The line: the members in order with each one's part, given who leads. A member passed over
/// (docs/safety.md, "Recovery from anything") is no successor: `passed_over` says who is.
pub(crate) fn table(
    line: &[MemberRecord],
    leader: Option<&str>,
    now: OffsetDateTime,
    dead_since: &BTreeMap<MemberKey, OffsetDateTime>,
    passed_over: &dyn Fn(&str) -> bool,
) -> Vec<MemberRow> {
    let next = successor(line, leader, now, |r| passed_over(r.identity()))
        .map(|r| r.identity().to_owned());
    line.iter()
        .map(|r| {
            let part = if !r.is_alive() {
                Part::Dead
            } else if Some(r.identity()) == leader {
                Part::Leader
            } else if r.member.in_standby(now) {
                Part::Standby
            } else if next.as_deref() == Some(r.identity()) {
                Part::Successor
            } else {
                Part::Follower
            };
            let since = if r.is_alive() {
                Some(r.joined)
            } else {
                dead_since.get(&r.key).copied()
            };
            MemberRow {
                identity: r.identity().to_owned(),
                priority: r.member.priority,
                part,
                alive: r.is_alive(),
                since: since.map(crate::store::rfc3339),
                advertise: r.member.advertise.clone(),
                standby_until: r
                    .member
                    .standby_until
                    .filter(|_| part == Part::Standby)
                    .map(crate::store::rfc3339),
                slot: None,
            }
        })
        .collect()
}

/// The leader as a member knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct LeaderRow {
    pub identity: String,
    pub epoch: u64,
    /// When its leadership began (RFC 3339).
    pub since: String,
    /// When this instance last read that from the lease blob (RFC 3339).
    pub seen_at: String,
}

/// What `status` and `/metrics` show of the line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct LineView {
    /// The leader, as last read.
    pub leader: Option<LeaderRow>,
    /// The member the leader is handing the lease to (the handoff notice), while it does.
    pub handing_to: Option<String>,
    /// The members in order with their parts.
    pub members: Vec<MemberRow>,
    /// This instance's place in line, from 1 (`None`: not in line).
    pub position: Option<usize>,
    /// Why this instance has no place, when it has none.
    pub standing: Option<String>,
    /// When the line was last listed (RFC 3339).
    pub listed_at: Option<String>,
    /// With `[lease].slots` > 1: every slot, as last listed (docs/slots.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<SlotRow>,
    /// The group's slot count while it differs from this instance's (it does not lead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_mismatch: Option<u32>,
    /// On the leader: a preemption it has armed (docs/preferred.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempting: Option<PendingPreemption>,
}

/// A preemption the leader has armed: to whom, and from when (RFC 3339) at the earliest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct PendingPreemption {
    pub identity: String,
    pub at: String,
}

/// What `status` shows of the line `s`, beside the last leader as read (`holder`), the group's
/// other count (`mismatch`) and a preemption armed, at `now` on the lease clock and the wall
/// clock.
pub(crate) fn view_at(
    s: &Succession,
    holder: Option<&(Holder, OffsetDateTime)>,
    mismatch: Option<u32>,
    preempting: Option<&(String, OffsetDateTime)>,
    (now, wall): (Instant, OffsetDateTime),
) -> LineView {
    LineView {
        leader: holder.map(|(h, seen)| LeaderRow {
            identity: h.identity.clone(),
            epoch: h.epoch,
            since: crate::store::rfc3339(h.acquired_at),
            seen_at: crate::store::rfc3339(*seen),
        }),
        handing_to: s.notice.clone(),
        members: table(
            &s.members,
            s.leader.as_deref(),
            wall,
            &s.dead_since,
            &|identity| s.is_passed_over(identity, now),
        ),
        position: (s.standing == Standing::Joined)
            .then(|| s.position())
            .flatten(),
        standing: match &s.standing {
            Standing::Joined => None,
            Standing::Joining => Some("joining".to_owned()),
            Standing::Duplicate => {
                Some("another live instance holds the member record of this identity".to_owned())
            }
            Standing::Refused(why) => Some(why.clone()),
        },
        slots: match s.slots {
            1 => Vec::new(),
            n => slot_rows(&s.slot_states, n),
        },
        slot_mismatch: mismatch,
        listed_at: s.listed.map(|at| {
            let ago = now.saturating_duration_since(at);
            crate::store::rfc3339(wall - time::Duration::seconds(ago.as_secs() as i64))
        }),
        preempting: preempting
            .filter(|_| s.leading)
            .map(|(identity, at)| PendingPreemption {
                identity: identity.clone(),
                at: crate::store::rfc3339(*at),
            }),
    }
}

/// One slot as `status` and `/status` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SlotRow {
    pub slot: u32,
    /// `available`, `leased`, `expired`, `breaking` or `broken`.
    pub lease: String,
    /// Who holds it: the recorded holder while leased.
    pub holder: Option<String>,
    /// The epoch of its last term (the holder's while leased).
    pub epoch: Option<u64>,
    /// When that term began (RFC 3339).
    pub since: Option<String>,
    /// The member its holder is handing it to, while it does.
    pub handing_to: Option<String>,
}

/// The rows of slots 0..`n` from a listing (a slot whose blob does not exist yet is
/// `available`, never held).
pub(crate) fn slot_rows(states: &[SlotRecord], n: u32) -> Vec<SlotRow> {
    (0..n)
        .map(|i| {
            let state = states.iter().find(|s| s.slot == i);
            let lease = state.map_or(LeaseState::Available, |s| s.lease);
            let holder = state.and_then(|s| s.holder.as_ref());
            SlotRow {
                slot: i,
                lease: lease.to_string(),
                holder: holder
                    .filter(|_| lease == LeaseState::Leased)
                    .map(|h| h.identity.clone()),
                epoch: holder.map(|h| h.epoch).filter(|e| *e > 0),
                since: holder
                    .filter(|h| h.epoch > 0)
                    .map(|h| crate::store::rfc3339(h.acquired_at)),
                handing_to: state.and_then(|s| s.successor.clone()),
            }
        })
        .collect()
}

/// The text table of `rows`.
#[cfg(feature = "daemon")]
pub(crate) fn render_slots(rows: &[SlotRow]) -> String {
    let mut out = format!(
        "slots        {}
",
        rows.len()
    );
    for r in rows {
        let who = match (&r.holder, &r.handing_to) {
            (Some(h), Some(to)) => format!("{h} (handing it to {to})"),
            (Some(h), None) => h.clone(),
            (None, _) => format!("none ({})", r.lease),
        };
        out += &format!(
            "  slot {:<3} {who}{}{}\n",
            r.slot,
            r.epoch.map(|e| format!(", epoch {e}")).unwrap_or_default(),
            r.since
                .as_deref()
                .map(|s| format!(", since {s}"))
                .unwrap_or_default()
        );
    }
    out
}
