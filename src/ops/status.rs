//! `leasehold status`: who leads the group now, with which epoch and since when, the line of
//! members behind it, every slot, and the local daemon's own view; as text or JSON.

use super::held::{LeaseHolder, read_verified};
use super::majority::{Majority, ReplicaRow};
use super::request::within;
use crate::elector::members::{self, MemberRow, Part};
use crate::fmt::human;
use crate::store::target::StorageTarget;
use crate::store::{BlobState, LeaseState, LeaseStore, StoreError};
use crate::telemetry::StatusReport;
use serde::Serialize;
use std::time::Duration;
use time::OffsetDateTime;

/// What `status` reports. The JSON field names are part of the contract (README, "status").
#[derive(Debug, Clone, Serialize)]
pub struct LeaseReport {
    pub container: String,
    pub blob: String,
    /// `available`, `leased`, `expired`, `breaking` or `broken`.
    pub lease_state: LeaseState,
    /// Who leads now: the recorded holder while the lease is `leased` under its lease id (or
    /// could not be checked), else null.
    pub leader: Option<String>,
    /// The leader's wake-up URL (its `[election].advertise`) as its member record publishes
    /// it: where a follower reaches the leader's HTTP endpoint. Null without one, or when the
    /// members could not be listed.
    pub leader_advertise: Option<String>,
    /// While `leased`: whether the recorded holder is the one holding the lease.
    pub lease_holder: Option<LeaseHolder>,
    /// The last leader recorded in the blob's metadata (the current one while leased).
    pub last_holder: Option<String>,
    /// The epoch of the last leadership, the one the current leader's child received.
    pub epoch: Option<u64>,
    /// When that leadership began (RFC 3339, UTC).
    pub acquired_at: Option<String>,
    pub seconds_since_acquired: Option<f64>,
    /// The member the leader is handing the lease to (its handoff notice), while it does: the
    /// leader stays the recorded holder until that member has written its epoch.
    pub handing_to: Option<String>,
    /// Members the leader's handoff passed over (they were handed the lease and did not take it;
    /// docs/safety.md, "Recovery from anything"): no successor for a while.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub passed_over: Vec<String>,
    /// The members in succession order, each with its priority, role (`leader`, `successor`,
    /// `follower`, `standby`, `dead`), since when it is a member, and wake-up URL; null when
    /// they could not be listed (`members_error` says why).
    pub members: Option<Vec<MemberRow>>,
    pub members_error: Option<String>,
    /// The `/status` of the daemon on this host, when the config has `[http].listen` and it
    /// answers: its role, child and last health check.
    pub local: Option<StatusReport>,
    /// With `[lease].slots` > 1: every slot's holder, epoch and since when (docs/slots.md); slot 0
    /// is the blob the fields above describe.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<crate::elector::members::SlotRow>,
    /// With `[[storage.replica]]`: whether one holder has a majority of the replicas (then it is
    /// `leader`, and the fields above are read from its replica with the largest epoch; without
    /// one, from the replica with the largest epoch, and `leader` is null). Left out for one
    /// account.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub majority: Option<Majority>,
    /// With `[[storage.replica]]`: each replica as it answered, in the set's order. Left out for
    /// one account.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub replicas: Vec<ReplicaRow>,
    /// With `[[storage.replica]]`: why this report cannot tell whether the group has a leader
    /// (fewer than a majority of the replicas answered); the command then fails. Left out
    /// otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl LeaseReport {
    pub fn from_state(
        target: &StorageTarget,
        state: &BlobState,
        lease_holder: Option<LeaseHolder>,
    ) -> Self {
        let holder = state.holder.as_ref();
        let leads =
            state.lease == LeaseState::Leased && lease_holder != Some(LeaseHolder::Unrecorded);
        Self {
            container: target.container.clone(),
            blob: target.blob.clone(),
            lease_state: state.lease,
            leader: holder.filter(|_| leads).map(|h| h.identity.clone()),
            leader_advertise: None,
            lease_holder,
            last_holder: holder.map(|h| h.identity.clone()),
            epoch: holder.map(|h| h.epoch),
            acquired_at: holder.map(|h| crate::store::rfc3339(h.acquired_at)),
            seconds_since_acquired: holder.map(|h| {
                let ago = (OffsetDateTime::now_utc() - h.acquired_at)
                    .as_seconds_f64()
                    .max(0.0);
                (ago * 10.0).round() / 10.0
            }),
            handing_to: state
                .successor
                .clone()
                .filter(|_| state.lease == LeaseState::Leased),
            passed_over: match state.lease {
                LeaseState::Leased => state.passed_over.clone(),
                _ => Vec::new(),
            },
            members: None,
            members_error: None,
            local: None,
            slots: Vec::new(),
            majority: None,
            replicas: Vec::new(),
            error: None,
        }
    }

    /// Takes a listing of the member records: the line, with each member's role given who
    /// leads now.
    pub fn with_members(
        mut self,
        listed: Result<Vec<crate::store::MemberRecord>, StoreError>,
    ) -> Self {
        match listed {
            Ok(mut records) => {
                members::order(&mut records);
                let rows = members::table(
                    &records,
                    self.leader.as_deref(),
                    OffsetDateTime::now_utc(),
                    &Default::default(),
                    &|identity| self.passed_over.iter().any(|p| p == identity),
                );
                self.leader_advertise = rows
                    .iter()
                    .find(|m| Some(&m.identity) == self.leader.as_ref())
                    .and_then(|m| m.advertise.clone());
                self.members = Some(rows);
            }
            Err(e) => self.members_error = Some(format!("cannot list the members: {e}")),
        }
        self
    }

    /// Every slot (`[lease].slots` > 1), and in the members table the slot each member holds.
    pub fn with_slots(&mut self, rows: Vec<crate::elector::members::SlotRow>) {
        if let Some(members) = &mut self.members {
            for m in members.iter_mut() {
                m.slot = rows
                    .iter()
                    .find(|r| r.holder.as_deref() == Some(m.identity.as_str()))
                    .map(|r| r.slot);
            }
        }
        self.slots = rows;
    }

    /// What `status --watch` compares to decide whether to redraw: everything but the clock.
    pub fn digest(&self) -> String {
        let local = self.local.as_ref().map(|l| {
            let child = l.child.as_ref().map(|c| (c.pid, json_name(&c.state)));
            (json_name(&l.role), child)
        });
        let mut stable = self.clone();
        stable.seconds_since_acquired = None;
        stable.local = None;
        for replica in &mut stable.replicas {
            replica.latency_ms = 0.0;
        }
        format!(
            "{}{local:?}",
            serde_json::to_string(&stable).unwrap_or_default()
        )
    }

    /// The `leader` line when no recorded holder leads.
    fn no_leader_line(&self) -> String {
        if let Some(m) = self.majority.as_ref().filter(|m| !m.reached) {
            format!("leader       none: {}\n", m.why_none())
        } else if self.lease_holder == Some(LeaseHolder::Unrecorded) {
            "leader       unknown: the lease is held by an instance that has not written its metadata (a new leader about to write its epoch, or one that cannot finish acquiring)\n".to_owned()
        } else {
            "leader       none\n".to_owned()
        }
    }

    /// The human form: one line per fact.
    pub fn render(&self) -> String {
        let ago = self
            .seconds_since_acquired
            .map(|s| human(Duration::from_secs(s as u64)))
            .unwrap_or_default();
        let mut out = String::new();
        match (&self.leader, &self.last_holder) {
            (Some(leader), _) => {
                if self.lease_holder == Some(LeaseHolder::Unverified) {
                    out += &format!(
                        "leader       {leader} (as recorded; whether it still holds the lease could not be checked)\n"
                    );
                } else {
                    out += &format!("leader       {leader}\n");
                }
                out += &format!("epoch        {}\n", self.epoch.unwrap_or(0));
                if let Some(at) = &self.acquired_at {
                    out += &format!("since        {at} ({ago} ago)\n");
                }
            }
            (None, Some(last)) => {
                out += &self.no_leader_line();
                out += &format!(
                    "last leader  {last} (epoch {}, acquired {} ({ago} ago))\n",
                    self.epoch.unwrap_or(0),
                    self.acquired_at.as_deref().unwrap_or("?"),
                );
            }
            (None, None) if self.majority.is_some() => out += &self.no_leader_line(),
            (None, None) if self.lease_holder == Some(LeaseHolder::Unrecorded) => {
                out += &self.no_leader_line();
                out += "last leader  none (no leasehold leader has written this blob yet)\n";
            }
            (None, None) => {
                out += "leader       none (no leasehold leader has written this blob yet)\n"
            }
        }
        if let Some(to) = &self.handing_to {
            out += &format!(
                "handing to   {to} (the leader handed it the lease; it leads once it has written its epoch)\n"
            );
        }
        match self.majority.as_ref().and_then(|m| m.read_from) {
            Some(n) => out += &format!("lease        {} (replica {n})\n", self.lease_state),
            None => out += &format!("lease        {}\n", self.lease_state),
        }
        out += &format!("blob         {}/{}\n", self.container, self.blob);
        if let Some(m) = &self.majority {
            out += &super::majority::render(m, &self.replicas);
        }
        if !self.slots.is_empty() {
            out += &crate::elector::members::render_slots(&self.slots);
        }
        match (&self.members, &self.members_error) {
            (Some(rows), _) if rows.is_empty() => out += "members      none\n",
            (Some(rows), _) => out += &render_members(rows),
            (None, Some(e)) => out += &format!("members      unknown ({e})\n"),
            (None, None) => {}
        }
        if let Some(local) = &self.local {
            out += &format!(
                "this host    {}: {}",
                local.identity,
                json_name(&local.role)
            );
            if let Some(child) = &local.child {
                out += &format!(", child {} {}", child.pid, json_name(&child.state));
            }
            out += "\n";
            if let Some(stuck) = &local.stuck_group {
                out += &format!(
                    "stuck group  {} survives SIGKILL since {}: the lease is not handed on, and \
                     no child starts, until it is gone\n",
                    stuck.pgid, stuck.since
                );
            }
            if let Some(c) = &local.crash_loop {
                out += &format!(
                    "crash loop   {} quick failure(s) in a row, the last: {}; backs off {}\n",
                    c.quick_failures,
                    c.last_failure,
                    human(Duration::from_secs_f64(c.backoff_seconds))
                );
            }
            if let Some(h) = &local.health {
                out += &format!(
                    "health       last check {} at {}, {} consecutive failures{}\n",
                    json_name(&h.last_result),
                    h.last_check,
                    h.consecutive_failures,
                    match h.last_output.as_str() {
                        o if !o.is_empty() && o != "ok" => format!(" ({o})"),
                        _ => String::new(),
                    }
                );
            }
        }
        out
    }
}

/// The members as a table, in succession order: place among the live ones, identity,
/// priority, role, since when, wake-up URL.
fn render_members(rows: &[MemberRow]) -> String {
    let mut table = vec![[
        "#".to_owned(),
        "member".to_owned(),
        "priority".to_owned(),
        "role".to_owned(),
        "since".to_owned(),
        "advertise".to_owned(),
    ]];
    let mut place = 0;
    for row in rows {
        let alive = row.part != Part::Dead;
        place += usize::from(alive);
        let role = match (&row.part, &row.standby_until) {
            (Part::Standby, Some(until)) => format!("standby until {until}"),
            (part, _) => json_name(part),
        };
        let role = match row.slot {
            Some(slot) => format!("{role}, holds slot {slot}"),
            None => role,
        };
        table.push([
            if alive {
                place.to_string()
            } else {
                "-".to_owned()
            },
            row.identity.clone(),
            row.priority.to_string(),
            role,
            row.since.clone().unwrap_or_else(|| "-".to_owned()),
            row.advertise.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
    }
    format!(
        "members      {}\n{}",
        line_label(rows, place),
        crate::fmt::columns(&table)
    )
}

/// The members line's label: how many are alive, and who leads next. The line is in order of
/// succession, in which the leader has its own place (first, or behind a member of higher
/// priority), so the member that leads next is the successor, named, not "the first".
fn line_label(rows: &[MemberRow], live: usize) -> String {
    let named = |part: Part| rows.iter().find(|r| r.part == part).map(|r| &r.identity);
    match (named(Part::Successor), named(Part::Leader)) {
        (Some(next), _) => {
            format!("{live} live, in order of succession; {next} (the successor) leads next")
        }
        (None, Some(_)) => format!("{live} live; none but the leader can lead next"),
        (None, None) => format!("{live} live, in order of succession"),
    }
}

/// `leasehold status`: the blob and the line of members (read and listed in parallel), and the
/// local daemon's own view when `local` names its HTTP endpoint (asked in parallel too; it does
/// not slow the answer by more than half a second).
pub async fn status<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    local: Option<std::net::SocketAddr>,
) -> Result<LeaseReport, StoreError> {
    let (state, listed, local) =
        tokio::join!(read_verified(store), within(store.list_members()), async {
            match local {
                Some(addr) => local_status(addr).await,
                None => None,
            }
        });
    let (state, holder) = state?;
    let mut report = LeaseReport::from_state(target, &state, holder).with_members(listed);
    report.local = local;
    Ok(report)
}

/// Every slot of a group of `slots` (> 1): one listing of the group's blobs.
pub async fn slots<S: LeaseStore>(
    store: &S,
    slots: u32,
) -> Result<Vec<crate::elector::members::SlotRow>, StoreError> {
    let (_, states) = within(store.list_group()).await?;
    Ok(crate::elector::members::slot_rows(&states, slots))
}

/// A unit variant's name as `/status` writes it (`leader`, `stepping_down`, `pass`).
fn json_name(value: &impl Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "?".to_owned(),
    }
}

/// The local daemon's `/status`, or None if it does not answer within 500 ms (or answers
/// something else).
pub(super) async fn local_status(mut addr: std::net::SocketAddr) -> Option<StatusReport> {
    if addr.ip().is_unspecified() {
        addr.set_ip(if addr.is_ipv4() {
            std::net::Ipv4Addr::LOCALHOST.into()
        } else {
            std::net::Ipv6Addr::LOCALHOST.into()
        });
    }
    let client = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .ok()?;
    let response = client
        .get(format!("http://{addr}/status"))
        .send()
        .await
        .ok()?;
    serde_json::from_slice(&response.bytes().await.ok()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;
    use crate::store::{Holder, LeaseId};

    fn holder(lease: Option<LeaseId>) -> Holder {
        Holder {
            identity: "w1".into(),
            epoch: 1_700_000_000_000,
            acquired_at: OffsetDateTime::now_utc(),
            lease,
            slots: None,
            stamp: Default::default(),
        }
    }

    fn row(identity: &str, part: Part) -> MemberRow {
        MemberRow {
            identity: identity.to_owned(),
            priority: 0,
            part,
            alive: part != Part::Dead,
            since: None,
            advertise: None,
            standby_until: None,
            slot: None,
        }
    }

    /// The label says who leads next: the successor, wherever the leader stands in the line
    /// (it said "first leads next" when the first was the leader itself).
    #[test]
    fn the_line_is_labelled_with_who_leads_next() {
        let led = [
            row("a", Part::Leader),
            row("c", Part::Successor),
            row("b", Part::Follower),
        ];
        let text = render_members(&led);
        let label = text.lines().next().unwrap();
        assert_eq!(
            label,
            "members      3 live, in order of succession; c (the successor) leads next"
        );
        let alone = render_members(&[row("a", Part::Leader), row("x", Part::Dead)]);
        assert!(
            alone.starts_with("members      1 live; none but the leader can lead next\n"),
            "{alone}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn status_tells_whether_the_recorded_holder_holds_the_lease() {
        let store = MemoryStore::default();
        let (state, check) = read_verified(&store).await.unwrap();
        assert_eq!((state.lease, check), (LeaseState::Available, None));

        // Leased, and nobody ever wrote metadata.
        let id = LeaseId::random();
        store.acquire(id, 15).await.unwrap();
        let (_, check) = read_verified(&store).await.unwrap();
        assert_eq!(check, Some(LeaseHolder::Unrecorded));

        // The holder recorded its lease id.
        store.set_holder(Some(holder(Some(id))));
        let (state, check) = read_verified(&store).await.unwrap();
        assert_eq!(check, Some(LeaseHolder::Recorded));
        let target = StorageTarget {
            account: "devstoreaccount1".into(),
            endpoint: "http://127.0.0.1:10000/devstoreaccount1".into(),
            credential: crate::store::target::Credential::AccessKey(crate::secret::Secret::new(
                "k".into(),
            )),
            ca_certificates: None,
            container: "c".into(),
            blob: "b".into(),
            create_if_missing: true,
        };
        let report = LeaseReport::from_state(&target, &state, check);
        assert_eq!(report.leader.as_deref(), Some("w1"));

        // Its lease expired and another instance took it, but has not written yet.
        store.steal(15);
        let (state, check) = read_verified(&store).await.unwrap();
        assert_eq!(check, Some(LeaseHolder::Unrecorded));
        let report = LeaseReport::from_state(&target, &state, check);
        assert_eq!(report.leader, None);
        assert_eq!(report.last_holder.as_deref(), Some("w1"));
        assert!(
            report.render().contains("has not written its metadata"),
            "{}",
            report.render()
        );

        // Metadata from before the lease id was recorded: the recorded holder, unverified.
        store.set_holder(Some(holder(None)));
        let (state, check) = read_verified(&store).await.unwrap();
        assert_eq!(check, Some(LeaseHolder::Unverified));
        let report = LeaseReport::from_state(&target, &state, check);
        assert_eq!(report.leader.as_deref(), Some("w1"));
        assert!(report.render().contains("could not be checked"));
    }
}
