//! The operator's commands, run once against the lease store: `status` (who leads, with which
//! epoch, since when, and the line of members behind it; `--watch` redraws it as it changes),
//! `check` (would `run` work here?) and `break` (force a failover).
//!
//! None of them needs to be the leader or holds the lease beyond `check`'s acquire-and-release
//! probe, and none writes the holder metadata: the epoch stays the leaders' alone.

use crate::config::{Config, ConfigError, Group, Overrides, find_program};
use crate::elector::members::{self, MemberRow, Part};
use crate::fmt::human;
use crate::store::target::StorageTarget;
use crate::store::{BlobState, Failure, LeaseCheck, LeaseId, LeaseState, LeaseStore, StoreError};
use crate::telemetry::StatusReport;
use crate::timing::Timing;
use serde::Serialize;
use std::ffi::OsStr;
use std::future::Future;
use std::path::Path;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// No single request of an operator command waits longer than this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What to look at when storage does not answer: `check`'s hint, and the error line of every
/// other command.
pub const UNREACHABLE_HINT: &str = "check [storage].endpoint (or the connection string's \
    BlobEndpoint / account name), DNS, proxies and firewalls, and that the service is running";

/// A failed request as an operator command says it in one line: where storage was looked for
/// and what to check when it did not answer; the error itself otherwise.
pub fn storage_error_line(e: &StoreError, target: &StorageTarget) -> String {
    match e {
        StoreError::Unreachable(_) | StoreError::TimedOut(_) => format!(
            "cannot reach storage at {}: {e}; {UNREACHABLE_HINT}",
            crate::secret::redact_urls(&target.endpoint)
        ),
        _ => e.to_string(),
    }
}

async fn within<T>(request: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    tokio::time::timeout(REQUEST_TIMEOUT, request)
        .await
        .unwrap_or(Err(StoreError::TimedOut(REQUEST_TIMEOUT)))
}

/// Whether a leased blob is held by the holder its metadata records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseHolder {
    /// Held under the lease id the last leader recorded: that leader leads.
    Recorded,
    /// Held by an instance that has not written its metadata: a new leader between its acquire
    /// and its epoch write (a few milliseconds), or one that cannot finish acquiring.
    Unrecorded,
    /// Not known: the metadata records no lease id (written before leasehold recorded it), or
    /// the check got no answer.
    Unverified,
}

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
    /// Members the leader's handoff passed over (they were handed the lease and did not take
    /// it; design section 16): no successor for a while.
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
    /// With `[lease].slots` > 1: every slot's holder, epoch and since when (design section
    /// 12); slot 0 is the blob the fields above describe.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<crate::elector::slots::SlotRow>,
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
    pub fn with_slots(&mut self, rows: Vec<crate::elector::slots::SlotRow>) {
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
        format!(
            "{}{local:?}",
            serde_json::to_string(&stable).unwrap_or_default()
        )
    }

    /// The `leader` line when no recorded holder leads.
    fn no_leader_line(&self) -> String {
        if self.lease_holder == Some(LeaseHolder::Unrecorded) {
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
        out += &format!("lease        {}\n", self.lease_state);
        out += &format!("blob         {}/{}\n", self.container, self.blob);
        if !self.slots.is_empty() {
            out += &crate::elector::slots::render_slots(&self.slots);
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
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            table
                .iter()
                .map(|r| r[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = format!("members      {} live, in line (first leads next)\n", place);
    for row in &table {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out += &format!("  {}\n", cells.join("  ").trim_end());
    }
    out
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
) -> Result<Vec<crate::elector::slots::SlotRow>, StoreError> {
    let (_, states) = within(store.list_group()).await?;
    Ok(crate::elector::slots::slot_rows(&states, slots))
}

/// Reads the blob and, while it is leased, whether the holder its metadata records still holds
/// the lease: Get Blob Properties does not show the lease id, so a second read conditional on
/// the recorded lease id tells (it changes nothing). A lease that ends between the two reads
/// is read once more.
pub async fn read_verified<S: LeaseStore>(
    store: &S,
) -> Result<(BlobState, Option<LeaseHolder>), StoreError> {
    let mut state = within(store.read()).await?;
    for _ in 0..2 {
        match verify(store, &state).await {
            Some(LeaseCheck::Active) => return Ok((state, Some(LeaseHolder::Recorded))),
            Some(LeaseCheck::HeldByAnother) => return Ok((state, Some(LeaseHolder::Unrecorded))),
            Some(LeaseCheck::NotLeased) => state = within(store.read()).await?,
            None if state.lease == LeaseState::Leased => {
                return Ok((state, Some(LeaseHolder::Unverified)));
            }
            None => return Ok((state, None)),
        }
    }
    let leased = state.lease == LeaseState::Leased;
    Ok((state, leased.then_some(LeaseHolder::Unverified)))
}

/// For a leased blob: whether its recorded holder's lease is the active one. `None` when the
/// blob is not leased, or it cannot be told (no recorded lease id, no answer).
async fn verify<S: LeaseStore>(store: &S, state: &BlobState) -> Option<LeaseCheck> {
    if state.lease != LeaseState::Leased {
        return None;
    }
    let Some(holder) = &state.holder else {
        // Leased, and nobody has ever written the metadata.
        return Some(LeaseCheck::HeldByAnother);
    };
    within(store.check_lease(holder.lease?)).await.ok()
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
async fn local_status(mut addr: std::net::SocketAddr) -> Option<StatusReport> {
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

/// What `break` did.
#[derive(Debug, Clone)]
pub enum BreakOutcome {
    /// There was no lease to break.
    NotLeased(LeaseReport),
    /// The lease was broken; it can be acquired again after `seconds`. `holder` names who held
    /// it.
    Broken {
        before: LeaseReport,
        holder: String,
        seconds: u64,
    },
}

impl BreakOutcome {
    pub fn render(&self) -> String {
        match self {
            Self::NotLeased(r) => format!(
                "nothing to break: the lease on {}/{} is {}{}\n",
                r.container,
                r.blob,
                r.lease_state,
                r.last_holder
                    .as_ref()
                    .map(|h| format!(" (last leader {h}, epoch {})", r.epoch.unwrap_or(0)))
                    .unwrap_or_default()
            ),
            Self::Broken {
                before,
                holder,
                seconds,
            } => format!(
                "broke the lease on {}/{} held by {holder}{}; {}\n",
                before.container,
                before.blob,
                if before.lease_state == LeaseState::Breaking {
                    " (it was already being broken)"
                } else {
                    ""
                },
                if *seconds == 0 {
                    "it can be acquired again now".to_owned()
                } else {
                    format!("it can be acquired again in {seconds}s")
                }
            ),
        }
    }
}

/// `leasehold break`: breaks whatever lease is on the blob. The holder notices at its next renew
/// (`LeaseIsBrokenAndCannotBeRenewed`) and stops its child at once.
pub async fn break_lease<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    period: Duration,
) -> Result<BreakOutcome, StoreError> {
    let (state, holder) = read_verified(store).await?;
    let before = LeaseReport::from_state(target, &state, holder);
    if !matches!(
        before.lease_state,
        LeaseState::Leased | LeaseState::Breaking
    ) {
        return Ok(BreakOutcome::NotLeased(before));
    }
    let holder = holder_of(store, &state, &before).await;
    match within(store.break_lease(period)).await {
        Ok(seconds) => Ok(BreakOutcome::Broken {
            before,
            holder,
            seconds,
        }),
        // It expired or was released between the read and the break.
        Err(e) if e.code() == Some("LeaseNotPresentWithLeaseOperation") => {
            Ok(BreakOutcome::NotLeased(before))
        }
        Err(e) => Err(e),
    }
}

/// Who holds a leased or breaking lease, as `break` names it. A breaking lease is still held
/// under its lease id until the break period ends, so the recorded holder is checked the same
/// way as for a leased one.
async fn holder_of<S: LeaseStore>(store: &S, state: &BlobState, before: &LeaseReport) -> String {
    let recorded = |h: &crate::store::Holder| format!("{} (epoch {})", h.identity, h.epoch);
    let unrecorded = |last: Option<&crate::store::Holder>| match last {
        Some(h) => format!(
            "an instance that had not written its metadata (last leader {})",
            recorded(h)
        ),
        None => "an instance that had not written its metadata".to_owned(),
    };
    let holder = state.holder.as_ref();
    let check = match (state.lease, holder.and_then(|h| h.lease)) {
        (LeaseState::Leased, _) => before.lease_holder,
        (LeaseState::Breaking, Some(id)) => match within(store.check_lease(id)).await {
            Ok(LeaseCheck::Active) => Some(LeaseHolder::Recorded),
            Ok(LeaseCheck::HeldByAnother) => Some(LeaseHolder::Unrecorded),
            _ => Some(LeaseHolder::Unverified),
        },
        (LeaseState::Breaking, None) if holder.is_none() => Some(LeaseHolder::Unrecorded),
        _ => Some(LeaseHolder::Unverified),
    };
    match (check, holder) {
        (Some(LeaseHolder::Recorded), Some(h)) => recorded(h),
        (Some(LeaseHolder::Unverified), Some(h)) => format!(
            "{} (as recorded; whether it still held the lease could not be checked)",
            recorded(h)
        ),
        (_, last) => unrecorded(last),
    }
}

/// How a step of `check` went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    Ok,
    /// Passed, but something deserves attention (a secret file readable by others).
    Warn,
    Fail,
}

/// One line of `check`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub mark: Mark,
    pub step: &'static str,
    pub detail: String,
    /// How to fix it, on failure.
    pub hint: Option<String>,
}

impl CheckLine {
    pub fn passed(&self) -> bool {
        self.mark != Mark::Fail
    }

    fn new(
        mark: Mark,
        step: &'static str,
        detail: impl Into<String>,
        hint: Option<String>,
    ) -> Self {
        Self {
            mark,
            step,
            detail: detail.into(),
            hint,
        }
    }

    pub fn warn(step: &'static str, detail: impl Into<String>) -> Self {
        Self::new(Mark::Warn, step, detail, None)
    }

    pub fn ok(step: &'static str, detail: impl Into<String>) -> Self {
        Self::new(Mark::Ok, step, detail, None)
    }

    pub fn fail(step: &'static str, detail: impl Into<String>, hint: impl Into<String>) -> Self {
        Self::new(Mark::Fail, step, detail, Some(hint.into()))
    }

    pub fn render(&self) -> String {
        let mut out = format!(
            "{:<5} {:<12} {}\n",
            match self.mark {
                Mark::Ok => "ok",
                Mark::Warn => "warn",
                Mark::Fail => "FAIL",
            },
            self.step,
            self.detail
        );
        if let Some(hint) = &self.hint {
            out += &format!("{:<5} {:<12} hint: {hint}\n", "", "");
        }
        out
    }
}

/// `leasehold check`'s first lines: the config as `run` would load it (one FAIL line and no group
/// when it would refuse it), its warnings, and the child's program found as `exec` would find
/// it. A missing `[child].command` passes: it may come after `--` at run time.
pub fn check_config(
    path: Option<&Path>,
    overrides: &Overrides,
    env: &dyn Fn(&str) -> Option<String>,
) -> (Vec<CheckLine>, Option<Group>) {
    let refused = |e: ConfigError| (vec![config_line(&e)], None);
    let config = match Config::load_or_defaults(path, overrides) {
        Ok(c) => c,
        Err(e) => return refused(e),
    };
    let group = match config.validate_group(env) {
        Ok(g) => g,
        Err(e) => return refused(e),
    };
    let child = match config.child_settings() {
        Ok(child) => Some(child),
        Err(ConfigError::Missing { key, .. }) if key == "[child].command" => None,
        Err(e) => return refused(config.origins.locate(e)),
    };
    let pod_label = match config.pod_label(env) {
        Ok(label) => label,
        Err(e) => return refused(e),
    };
    let source = path.map_or("the command line".into(), |p| p.display().to_string());
    let t = &group.timing;
    // This instance's own settings, each of which may come from the file, a variable or a flag.
    let mut own = vec![format!("priority {}", group.election.priority)];
    own.extend(match (&group.election.advertise, group.advertise_auto) {
        (Some(url), _) => Some(format!("advertise {url}")),
        (None, true) => Some("advertise auto".to_owned()),
        (None, false) => None,
    });
    own.extend(group.http_listen.map(|l| format!("http {l}")));
    own.extend(pod_label.map(|l| format!("pod label {} on {}", l.key, l.pod)));
    let mut lines = vec![CheckLine::ok(
        "config",
        format!(
            "{source}: {} ({}) in group {}/{}; lease {}, renew {}, stop timeout {}, margin {}",
            group.identity,
            own.join(", "),
            group.storage.container,
            group.storage.blob,
            human(t.duration),
            human(t.renew_interval),
            human(t.stop_timeout),
            human(t.safety_margin),
        ),
    )];
    lines.extend(
        group
            .warnings
            .iter()
            .map(|w| CheckLine::warn("config", w.clone())),
    );
    lines.push(match child {
        Some(child) => {
            let path = env("PATH");
            let program = &child.command[0];
            match find_program(
                &config.origins.name("[child].command"),
                program,
                child.working_dir.as_deref(),
                path.as_deref().map(OsStr::new),
            ) {
                Ok(found) => CheckLine::ok("child", format!("{program} is {}", found.display())),
                Err(e) => {
                    CheckLine::fail("child", e, "install the program, or fix [child].command")
                }
            }
        }
        None => CheckLine::ok(
            "child",
            "no [child].command; give it after `--` to leasehold run",
        ),
    });
    (lines, Some(group))
}

/// A config that `check` could not load, as `run` would refuse it.
fn config_line(e: &ConfigError) -> CheckLine {
    CheckLine::fail("config", e.to_string(), "fix the config file or the flags")
}

/// `leasehold check`, after the config passed: reach the endpoint, have the credentials
/// accepted, find (or create) the container and blob, and prove the lease operations are
/// permitted. Stops at the first failure, since every step needs the previous one.
pub async fn check<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    timing: &Timing,
) -> Vec<CheckLine> {
    let mut lines = Vec::new();
    let unreadable =
        |e: &StoreError| CheckLine::fail("blob", format!("cannot read it: {e}"), e.denied_hint());
    let endpoint = crate::secret::redact_urls(&target.endpoint);
    let started = Instant::now();
    let read = within(store.read()).await;
    if let Err(e @ (StoreError::Unreachable(_) | StoreError::TimedOut(_))) = &read {
        lines.push(CheckLine::fail(
            "endpoint",
            format!("{endpoint}: {e}"),
            UNREACHABLE_HINT,
        ));
        return lines;
    }
    lines.push(CheckLine::ok(
        "endpoint",
        format!("{endpoint} answered in {}", human(started.elapsed())),
    ));
    if let Err(e) = &read
        && e.failure() == Failure::Denied
    {
        lines.push(CheckLine::fail(
            "credentials",
            format!("refused: {e}"),
            e.denied_hint(),
        ));
        return lines;
    }
    lines.push(CheckLine::ok(
        "credentials",
        format!(
            "accepted ({} for account {})",
            target.credential.describe(),
            target.account
        ),
    ));

    let state = match read {
        Ok(state) => {
            lines.push(CheckLine::ok(
                "container",
                format!("{} exists", target.container),
            ));
            lines.push(CheckLine::ok("blob", format!("{} exists", target.blob)));
            state
        }
        Err(e) if e.failure() == Failure::Missing => {
            let container_missing = e.code() == Some("ContainerNotFound");
            if !target.create_if_missing {
                let (step, name) = if container_missing {
                    ("container", &target.container)
                } else {
                    ("blob", &target.blob)
                };
                lines.push(CheckLine::fail(
                    step,
                    format!("{name} does not exist"),
                    "create it, or set [storage].create_if_missing = true",
                ));
                return lines;
            }
            if let Err(e) = within(store.prepare(true)).await {
                lines.push(CheckLine::fail(
                    if container_missing {
                        "container"
                    } else {
                        "blob"
                    },
                    format!("cannot create it: {e}"),
                    e.denied_hint(),
                ));
                return lines;
            }
            if container_missing {
                lines.push(CheckLine::ok(
                    "container",
                    format!("{} created (create_if_missing)", target.container),
                ));
            } else {
                lines.push(CheckLine::ok(
                    "container",
                    format!("{} exists", target.container),
                ));
            }
            lines.push(CheckLine::ok(
                "blob",
                format!("{} created (create_if_missing)", target.blob),
            ));
            match within(store.read()).await {
                Ok(state) => state,
                Err(e) => {
                    lines.push(unreadable(&e));
                    return lines;
                }
            }
        }
        Err(e) => {
            lines.push(unreadable(&e));
            return lines;
        }
    };

    let holder = |state: &BlobState| {
        state
            .holder
            .as_ref()
            .map(|h| format!("{} (epoch {})", h.identity, h.epoch))
            .unwrap_or_else(|| "an instance that wrote no metadata yet".to_owned())
    };
    match state.lease {
        LeaseState::Leased if verify(store, &state).await == Some(LeaseCheck::HeldByAnother) => {
            lines.push(CheckLine::ok(
                "lease",
                "held by an instance that has not written its metadata yet; acquire not attempted",
            ))
        }
        LeaseState::Leased => lines.push(CheckLine::ok(
            "lease",
            format!("held by {}; acquire not attempted", holder(&state)),
        )),
        LeaseState::Breaking => lines.push(CheckLine::ok(
            "lease",
            "being broken; acquire not attempted",
        )),
        _ => {
            let probe = LeaseId::random();
            match within(store.acquire(probe, timing.lease_seconds())).await {
                Ok(()) => match within(store.release(probe)).await {
                    Ok(()) => lines.push(CheckLine::ok("lease", "acquire and release permitted (the lease was free)")),
                    Err(e) => lines.push(CheckLine::fail(
                        "lease",
                        format!("acquired, but the release failed: {e}; the probe lease expires within {}", human(timing.duration)),
                        e.denied_hint(),
                    )),
                },
                Err(e) if e.failure() == Failure::Held => lines.push(CheckLine::ok(
                    "lease",
                    "taken by another instance meanwhile; acquire not attempted",
                )),
                Err(e) => lines.push(CheckLine::fail("lease", format!("acquire refused: {e}"), e.denied_hint())),
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Holder;
    use crate::store::memory::MemoryStore;

    fn holder(lease: Option<LeaseId>) -> Holder {
        Holder {
            identity: "w1".into(),
            epoch: 1_700_000_000_000,
            acquired_at: OffsetDateTime::now_utc(),
            lease,
            slots: None,
        }
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
