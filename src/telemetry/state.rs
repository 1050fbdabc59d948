//! The daemon's observable state, fed by the elector (as its [`Observer`]), the supervisor,
//! the health checks and the HTTP endpoint, and read by `/status`, `/readyz`, `/healthz` and
//! whoever watches this instance's [`Presence`]. Each event updates the state and its metrics.
//! The state sits behind a `std` mutex that is never held across an `.await`, so a slow HTTP
//! client can never delay the daemon's timers.

use super::metrics::{self, ExitReason, Metrics, WakeTaken};
use super::replicas::ReplicaMetrics;
use super::status::{
    ChildReport, ChildState, CrashLoopReport, HealthReport, HealthResult, Role, StatusReport,
    StuckGroupReport,
};
use crate::elector::members::LineView;
use crate::elector::wake::WakeSent;
use crate::elector::{Handoff, LeaseOp, Observer};
use crate::store::StoreError;
use crate::timing::{Deadline, Timing};
use prometheus_client::registry::Registry;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;

/// Where this instance stands, as those who act on it see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Presence {
    /// It is in the group: it reached storage and took its place in the line of members (or,
    /// when it cannot have a member record, campaigns without one), or it leads.
    pub joined: bool,
    pub role: Role,
    /// It leads and its child runs (not stopping, not between restarts): it serves.
    pub serving: bool,
}

#[derive(Debug, Clone)]
struct ChildInfo {
    pid: u32,
    state: ChildState,
    started_at: OffsetDateTime,
}

#[derive(Debug, Clone)]
struct State {
    role: Role,
    /// The slot of the current or last term (0 without slots).
    slot: u32,
    epoch: Option<u64>,
    leader_since: Option<OffsetDateTime>,
    /// The deadlines of the current term, from the last successful acquire or renew.
    deadline: Option<Deadline>,
    child: Option<ChildInfo>,
    /// Child restarts in the current term.
    restarts: u32,
    /// When the daemon last sent any storage request: proof that its loop is alive.
    last_attempt: Instant,
    /// The last health check of the current child, if any.
    health: Option<HealthReport>,
    /// While cooling down: when the daemon rejoins the election.
    rejoin_at: Option<Instant>,
    /// The line of members as this instance last knew it.
    line: LineView,
    /// Whether it is in the group yet ([`Presence::joined`]).
    joined: bool,
    /// A group of an earlier child that survives SIGKILL: (pgid, since when).
    stuck_group: Option<(u32, OffsetDateTime)>,
    /// While the child crash-loops.
    crash_loop: Option<CrashLoopReport>,
}

pub struct Telemetry {
    identity: String,
    container: String,
    blob: String,
    /// A loop that has sent no storage request for this long is stuck (`/healthz` fails).
    stall_after: Duration,
    /// Shared with the gauges that read the current term's deadlines at each scrape.
    state: Arc<Mutex<State>>,
    /// [`Presence`], published whenever it changes.
    presence: watch::Sender<Presence>,
    metrics: Metrics,
    /// With `[[storage.replica]]`, each replica's series ([`Telemetry::with_replicas`]).
    replicas: Option<ReplicaMetrics>,
    registry: Registry,
}

/// How a storage request ended, as a metric's `result` label: `ok`, the storage error code,
/// `timeout`, `unreachable`, or `error`.
fn result_of(error: Option<&StoreError>) -> String {
    match error {
        None => "ok".to_owned(),
        Some(StoreError::TimedOut(_)) => "timeout".to_owned(),
        Some(StoreError::Unreachable(_)) => "unreachable".to_owned(),
        Some(e) => e.code().unwrap_or("error").to_owned(),
    }
}

/// How long a live daemon loop can go without a storage request, three times over: a leader
/// renews every `R`, a follower polls at least every `1.2 × acquire_interval`, and retries
/// after storage errors wait at most 10 s. A cooldown is left out: `liveness` skips it.
pub(super) fn stall_limit(t: &Timing) -> Duration {
    (3 * t.renew_interval)
        .max(3 * t.longest_poll())
        .max(Duration::from_secs(30))
}

impl Telemetry {
    /// The telemetry of an instance counting `slots` slots (`[lease].slots`).
    pub fn new(identity: &str, container: &str, blob: &str, timing: &Timing, slots: u32) -> Self {
        let state = Arc::new(Mutex::new(State {
            role: Role::Starting,
            slot: 0,
            epoch: None,
            leader_since: None,
            deadline: None,
            child: None,
            restarts: 0,
            last_attempt: Instant::now(),
            health: None,
            rejoin_at: None,
            line: LineView::default(),
            joined: false,
            stuck_group: None,
            crash_loop: None,
        }));
        let reader = state.clone();
        let (metrics, registry) = metrics::registry(container, blob, slots, move || {
            reader.lock().unwrap_or_else(|e| e.into_inner()).deadline
        });
        Self {
            identity: identity.to_owned(),
            container: container.to_owned(),
            blob: blob.to_owned(),
            stall_after: stall_limit(timing),
            state,
            presence: watch::Sender::new(Presence {
                joined: false,
                role: Role::Starting,
                serving: false,
            }),
            metrics,
            replicas: None,
            registry,
        }
    }

    /// The telemetry of a group on `n` replicas (`[[storage.replica]]`, docs/quorum.md): the
    /// metrics of each one too.
    pub fn with_replicas(mut self, n: usize) -> Self {
        if n < 2 {
            return self;
        }
        let lease = super::metrics::lease_registry(&mut self.registry, &self.container, &self.blob);
        self.replicas = Some(ReplicaMetrics::new(n, lease));
        self
    }

    /// For unit tests of other modules.
    #[cfg(test)]
    pub fn for_tests() -> Self {
        Self::new("test", "c", "b", &Timing::default(), 1)
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        // A poisoned lock only means a panic elsewhere; the state itself is always consistent.
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let out = f(&mut state);
        let now = Presence {
            joined: state.joined,
            role: state.role,
            serving: state.role == Role::Leader
                && state
                    .child
                    .as_ref()
                    .is_some_and(|c| c.state == ChildState::Running),
        };
        drop(state);
        self.presence.send_if_modified(|p| {
            let changed = *p != now;
            *p = now;
            changed
        });
        out
    }

    /// This instance's part, as it changes: for those who act on it (the service manager's
    /// notifications, the Kubernetes label), without polling.
    pub fn presence(&self) -> watch::Receiver<Presence> {
        self.presence.subscribe()
    }

    /// Records one storage request and how it ended.
    pub fn lease_op(&self, op: LeaseOp, elapsed: Duration, error: Option<&StoreError>) {
        self.metrics.lease_op(op, result_of(error), elapsed);
        self.with(|s| s.last_attempt = Instant::now());
    }

    /// A request to replica `replica` (from 0) ended: the replica's series.
    pub fn replica_op(&self, replica: usize, elapsed: Duration, error: Option<&StoreError>) {
        if let Some(metrics) = &self.replicas {
            let answered = !matches!(
                error,
                Some(StoreError::TimedOut(_) | StoreError::Unreachable(_))
            );
            metrics.request(replica, elapsed, result_of(error), answered);
        }
    }

    pub fn following(&self) {
        self.with(|s| {
            s.role = Role::Follower;
            s.deadline = None;
            s.child = None;
            s.rejoin_at = None;
        });
    }

    /// Out of the election until `until` (the child was unhealthy).
    pub fn cooling_down(&self, until: Instant) {
        self.with(|s| {
            s.role = Role::CoolingDown;
            s.rejoin_at = Some(until);
        });
    }

    /// One health check of the child ended.
    pub fn health_checked(&self, result: HealthResult, consecutive_failures: u32, said: &str) {
        self.metrics.health_checked(result);
        self.with(|s| {
            s.health = Some(HealthReport {
                last_check: crate::store::rfc3339(OffsetDateTime::now_utc()),
                last_result: result,
                consecutive_failures,
                last_output: said.to_owned(),
            })
        });
    }

    /// A new term: the lease is ours under `epoch`.
    pub fn acquired(&self, epoch: u64, slot: u32, acquired_at: OffsetDateTime, deadline: Deadline) {
        self.with(|s| {
            s.joined = true;
            s.role = Role::Leader;
            s.slot = slot;
            s.epoch = Some(epoch);
            s.leader_since = Some(acquired_at);
            s.deadline = Some(deadline);
            s.restarts = 0;
        });
        self.metrics.acquired(slot, epoch);
    }

    pub fn renewed(&self, deadline: Deadline) {
        self.with(|s| s.deadline = Some(deadline));
    }

    /// The term is over: the child is gone and the lease released (or lost).
    pub fn term_ended(&self) {
        let slot = self.with(|s| {
            s.role = Role::Follower;
            s.deadline = None;
            s.child = None;
            s.leader_since = None;
            s.slot
        });
        self.metrics.term_ended(slot);
    }

    pub fn child_started(&self, pid: u32) {
        self.with(|s| {
            s.health = None;
            s.child = Some(ChildInfo {
                pid,
                state: ChildState::Running,
                started_at: OffsetDateTime::now_utc(),
            })
        });
    }

    /// The stop signal went out: from now on this instance is no longer ready.
    pub fn child_stopping(&self) {
        self.with(|s| {
            s.role = Role::SteppingDown;
            if let Some(c) = &mut s.child {
                c.state = ChildState::Stopping;
            }
        });
    }

    pub fn child_exited(&self, reason: ExitReason) {
        self.metrics.child_exited(reason);
    }

    pub fn child_restarting(&self) {
        self.with(|s| {
            s.restarts += 1;
            if let Some(c) = &mut s.child {
                c.state = ChildState::Restarting;
            }
        });
    }

    /// The child failed soon after its start, `in_a_row` times (`last`: how); this instance
    /// stands aside for `backoff`.
    pub fn child_crash_looping(&self, in_a_row: u32, backoff: Duration, last: String) {
        self.metrics.child_backed_off(in_a_row);
        self.with(|s| {
            s.crash_loop = Some(CrashLoopReport {
                quick_failures: in_a_row,
                backoff_seconds: secs(backoff),
                last_failure: last,
            })
        });
    }

    /// A run lasted the crash window: no crash loop any more.
    pub fn child_crash_loop_over(&self) {
        self.metrics.child_crash_loop_over();
        self.with(|s| s.crash_loop = None);
    }

    /// A group of an ended child survives SIGKILL (`Some(pgid)`), or is gone at last (`None`).
    pub fn child_group_stuck(&self, pgid: Option<u32>) {
        self.with(|s| s.stuck_group = pgid.map(|p| (p, OffsetDateTime::now_utc())));
        self.metrics.child_group_stuck(pgid.is_some());
    }

    /// The daemon is stepping down without a child to stop (the lease was lost or expired
    /// between runs).
    pub fn stepping_down(&self) {
        self.with(|s| s.role = Role::SteppingDown);
    }

    /// The HTTP endpoint keeps at most `limit` connections open.
    pub fn http_connection_limit(&self, limit: usize) {
        self.metrics.http_connection_limit(limit);
    }

    /// The HTTP endpoint has `open` connections now, after closing `evicted` early.
    pub fn http_connections(&self, open: usize, evicted: u64) {
        self.metrics.http_connections(open, evicted);
    }

    /// The line of members as the elector now knows it.
    pub fn line(&self, view: &LineView) {
        let live = view
            .members
            .iter()
            .filter(|m| m.part != crate::elector::members::Part::Dead)
            .count();
        let dead = view.members.len() - live;
        self.metrics.line(live, dead, view.position.unwrap_or(0));
        self.with(|s| {
            s.line = view.clone();
            // Joined, or out of line for a reason that joining again will not fix soon
            // (refused listing, another instance with this identity): either way it campaigns.
            s.joined |= view.standing.as_deref() != Some("joining");
        });
    }

    /// A wake-up came in on `POST /wake`.
    pub fn wake_received(&self, taken: WakeTaken) {
        self.metrics.wake_received(taken);
    }

    /// `/readyz`: leading, with the lease held and nothing being stopped.
    pub fn is_ready(&self) -> bool {
        self.with(|s| s.role == Role::Leader)
    }

    /// `/healthz`: `Err(how long since the last storage request)` when the loop looks stuck.
    pub fn liveness(&self) -> Result<(), Duration> {
        // Cooling down is idle by choice: the loop is due again only at the rejoin.
        let since = self.with(|s| {
            s.rejoin_at
                .map_or(s.last_attempt, |at| at.max(s.last_attempt))
        });
        let idle = Instant::now().saturating_duration_since(since);
        if idle <= self.stall_after {
            Ok(())
        } else {
            Err(idle)
        }
    }

    /// `/status`.
    pub fn status(&self) -> StatusReport {
        let now = Instant::now();
        // Lease deadlines are kept on the lease clock (monotonic plus any machine suspend).
        let lease_now = crate::clock::now();
        let s = self.with(|s| s.clone());
        let leading = matches!(s.role, Role::Leader | Role::SteppingDown);
        StatusReport {
            identity: self.identity.clone(),
            container: self.container.clone(),
            blob: self.blob.clone(),
            role: s.role,
            epoch: s.epoch,
            leader_since: s
                .leader_since
                .filter(|_| leading)
                .map(crate::store::rfc3339),
            seconds_since_renew: s
                .deadline
                .map(|d| secs(lease_now.saturating_duration_since(d.sent))),
            seconds_to_stop_deadline: s
                .deadline
                .map(|d| secs(d.stop_at.saturating_duration_since(lease_now))),
            seconds_to_kill_deadline: s
                .deadline
                .map(|d| secs(d.kill_at.saturating_duration_since(lease_now))),
            child: s.child.map(|c| ChildReport {
                pid: c.pid,
                state: c.state,
                started_at: crate::store::rfc3339(c.started_at),
            }),
            restarts: s.restarts,
            health: s.health,
            seconds_to_rejoin: s.rejoin_at.map(|t| secs(t.saturating_duration_since(now))),
            crash_loop: s.crash_loop,
            stuck_group: s.stuck_group.map(|(pgid, since)| StuckGroupReport {
                pgid,
                since: crate::store::rfc3339(since),
            }),
            line: s.line,
        }
    }

    /// `/metrics`, in the OpenMetrics text format.
    pub fn metrics_text(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}

/// The elector's events, as `/status` and `/metrics` show them.
impl Observer for Telemetry {
    fn lease_op(&self, op: LeaseOp, elapsed: Duration, error: Option<&StoreError>) {
        Telemetry::lease_op(self, op, elapsed, error);
    }

    fn replica_op(&self, replica: usize, elapsed: Duration, error: Option<&StoreError>) {
        Telemetry::replica_op(self, replica, elapsed, error);
    }

    fn following(&self) {
        Telemetry::following(self);
    }

    fn acquired(&self, epoch: u64, slot: u32, acquired_at: OffsetDateTime, deadline: Deadline) {
        Telemetry::acquired(self, epoch, slot, acquired_at, deadline);
    }

    fn renewed(&self, deadline: Deadline) {
        Telemetry::renewed(self, deadline);
    }

    fn stepping_down(&self) {
        Telemetry::stepping_down(self);
    }

    fn term_ended(&self) {
        Telemetry::term_ended(self);
    }

    fn cooling_down(&self, until: Instant) {
        Telemetry::cooling_down(self, until);
    }

    fn line(&self, view: &LineView) {
        Telemetry::line(self, view);
    }

    fn handed_over(&self, how: Handoff) {
        let slot = self.with(|s| s.slot);
        self.metrics.handed_over(slot, how);
    }

    fn wake_sent(&self, how: WakeSent) {
        self.metrics.wake_sent(how);
    }

    fn preempted(&self) {
        self.metrics.preempted();
    }

    fn slot_mismatch(&self, recorded: Option<u32>) {
        self.metrics.slot_mismatch(recorded);
    }
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}
