//! The operator's commands, run once against the lease store: `status` (who leads, with which
//! epoch, since when), `check` (would `run` work here?) and `break` (force a failover).
//!
//! None of them needs to be the leader or holds the lease beyond `check`'s acquire-and-release
//! probe, and none writes the holder metadata: the epoch stays the leaders' alone.

use crate::config::{StorageTarget, Timing};
use crate::store::{BlobState, Failure, LeaseId, LeaseState, LeaseStore, StoreError};
use serde::Serialize;
use std::future::Future;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// No single request of an operator command waits longer than this.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

async fn within<T>(request: impl Future<Output = Result<T, StoreError>>) -> Result<T, StoreError> {
    tokio::time::timeout(REQUEST_TIMEOUT, request)
        .await
        .unwrap_or(Err(StoreError::TimedOut(REQUEST_TIMEOUT)))
}

/// What `status` reports. The JSON field names are part of the contract (README, "status").
#[derive(Debug, Clone, Serialize)]
pub struct LeaseReport {
    pub container: String,
    pub blob: String,
    /// `available`, `leased`, `expired`, `breaking` or `broken`.
    pub lease_state: LeaseState,
    /// Who leads now: the holder recorded in the metadata while the lease is `leased`, else null.
    pub leader: Option<String>,
    /// The last leader recorded in the blob's metadata (the current one while leased).
    pub last_holder: Option<String>,
    /// The epoch of the last leadership, the one the current leader's child received.
    pub epoch: Option<u64>,
    /// When that leadership began (RFC 3339, UTC).
    pub acquired_at: Option<String>,
    pub seconds_since_acquired: Option<f64>,
    /// The `/status` of the daemon on this host, when the config has `[http].listen` and it
    /// answers: its role, child and last health check.
    pub local: Option<serde_json::Value>,
}

impl LeaseReport {
    pub fn from_state(target: &StorageTarget, state: &BlobState) -> Self {
        let holder = state.holder.as_ref();
        let leased = state.lease == LeaseState::Leased;
        Self {
            container: target.container.clone(),
            blob: target.blob.clone(),
            lease_state: state.lease,
            leader: holder.filter(|_| leased).map(|h| h.identity.clone()),
            last_holder: holder.map(|h| h.identity.clone()),
            epoch: holder.map(|h| h.epoch),
            acquired_at: holder.map(|h| crate::store::rfc3339(h.acquired_at)),
            seconds_since_acquired: holder.map(|h| {
                let ago = (OffsetDateTime::now_utc() - h.acquired_at)
                    .as_seconds_f64()
                    .max(0.0);
                (ago * 10.0).round() / 10.0
            }),
            local: None,
        }
    }

    /// The human form: one line per fact.
    pub fn render(&self) -> String {
        let ago = self
            .seconds_since_acquired
            .map(|s| crate::human(Duration::from_secs(s as u64)))
            .unwrap_or_default();
        let mut out = String::new();
        match (&self.leader, &self.last_holder) {
            (Some(leader), _) => {
                out += &format!("leader       {leader}\n");
                out += &format!("epoch        {}\n", self.epoch.unwrap_or(0));
                if let Some(at) = &self.acquired_at {
                    out += &format!("since        {at} ({ago} ago)\n");
                }
            }
            (None, Some(last)) => {
                out += "leader       none\n";
                out += &format!(
                    "last leader  {last} (epoch {}, acquired {} ({ago} ago))\n",
                    self.epoch.unwrap_or(0),
                    self.acquired_at.as_deref().unwrap_or("?"),
                );
            }
            (None, None) => {
                out += "leader       none (no leasehold leader has written this blob yet)\n"
            }
        }
        out += &format!("lease        {}\n", self.lease_state);
        out += &format!("blob         {}/{}\n", self.container, self.blob);
        if let Some(local) = &self.local {
            let text = |key: &str| local[key].as_str().unwrap_or("?").to_owned();
            let mut line = format!("this host    {}: {}", text("identity"), text("role"));
            if let Some(pid) = local["child"]["pid"].as_u64() {
                line += &format!(
                    ", child {pid} {}",
                    local["child"]["state"].as_str().unwrap_or("")
                );
            }
            out += &line;
            out += "\n";
            if local["health"].is_object() {
                let h = &local["health"];
                out += &format!(
                    "health       last check {} at {}, {} consecutive failures{}\n",
                    h["last_result"].as_str().unwrap_or("?"),
                    h["last_check"].as_str().unwrap_or("?"),
                    h["consecutive_failures"].as_u64().unwrap_or(0),
                    match h["last_output"].as_str() {
                        Some(o) if !o.is_empty() && o != "ok" => format!(" ({o})"),
                        _ => String::new(),
                    }
                );
            }
        }
        out
    }
}

/// `leasehold status`: the blob, and the local daemon's own view when `local` names its HTTP
/// endpoint (asked in parallel; it does not slow the answer by more than half a second).
pub async fn status<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    local: Option<std::net::SocketAddr>,
) -> Result<LeaseReport, StoreError> {
    let (state, local) = tokio::join!(within(store.read()), async {
        match local {
            Some(addr) => local_status(addr).await,
            None => None,
        }
    });
    let mut report = LeaseReport::from_state(target, &state?);
    report.local = local;
    Ok(report)
}

/// The local daemon's `/status`, or None if it does not answer within 500 ms.
async fn local_status(mut addr: std::net::SocketAddr) -> Option<serde_json::Value> {
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
    /// The lease was broken; it can be acquired again after `seconds`.
    Broken { before: LeaseReport, seconds: u64 },
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
            Self::Broken { before, seconds } => format!(
                "broke the lease on {}/{} held by {} (epoch {}); {}\n",
                before.container,
                before.blob,
                before
                    .leader
                    .as_deref()
                    .or(before.last_holder.as_deref())
                    .unwrap_or("an unknown holder"),
                before.epoch.unwrap_or(0),
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
    let before = LeaseReport::from_state(target, &within(store.read()).await?);
    if !matches!(
        before.lease_state,
        LeaseState::Leased | LeaseState::Breaking
    ) {
        return Ok(BreakOutcome::NotLeased(before));
    }
    match within(store.break_lease(period)).await {
        Ok(seconds) => Ok(BreakOutcome::Broken { before, seconds }),
        // It expired or was released between the read and the break.
        Err(e) if e.code() == Some("LeaseNotPresentWithLeaseOperation") => {
            Ok(BreakOutcome::NotLeased(before))
        }
        Err(e) => Err(e),
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

    pub fn warn(step: &'static str, detail: impl Into<String>) -> Self {
        Self {
            mark: Mark::Warn,
            step,
            detail: detail.into(),
            hint: None,
        }
    }

    pub fn ok(step: &'static str, detail: impl Into<String>) -> Self {
        Self {
            mark: Mark::Ok,
            step,
            detail: detail.into(),
            hint: None,
        }
    }

    pub fn fail(step: &'static str, detail: impl Into<String>, hint: impl Into<String>) -> Self {
        Self {
            mark: Mark::Fail,
            step,
            detail: detail.into(),
            hint: Some(hint.into()),
        }
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

/// `leasehold check`, after the config passed: reach the endpoint, have the credentials
/// accepted, find (or create) the container and blob, and prove the lease operations are
/// permitted. Stops at the first failure, since every step needs the previous one.
pub async fn check<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    timing: &Timing,
) -> Vec<CheckLine> {
    let mut lines = Vec::new();
    let endpoint = crate::secret::redact_urls(&target.endpoint);
    let started = Instant::now();
    let read = within(store.read()).await;
    if let Err(e @ (StoreError::Unreachable(_) | StoreError::TimedOut(_))) = &read {
        lines.push(CheckLine::fail(
            "endpoint",
            format!("{endpoint}: {e}"),
            "check [storage].endpoint (or the connection string's BlobEndpoint / account name), \
             DNS, proxies and firewalls, and that the service is running",
        ));
        return lines;
    }
    lines.push(CheckLine::ok(
        "endpoint",
        format!("{endpoint} answered in {}", crate::human(started.elapsed())),
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
                    lines.push(CheckLine::fail(
                        "blob",
                        format!("cannot read it: {e}"),
                        e.denied_hint(),
                    ));
                    return lines;
                }
            }
        }
        Err(e) => {
            lines.push(CheckLine::fail(
                "blob",
                format!("cannot read it: {e}"),
                e.denied_hint(),
            ));
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
                        format!("acquired, but the release failed: {e}; the probe lease expires within {}", crate::human(timing.duration)),
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
