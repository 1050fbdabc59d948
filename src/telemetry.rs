//! What the daemon knows about itself, in one place: the state shown by `/status`, `/readyz` and
//! `/healthz`, and the Prometheus metrics of `/metrics`.
//!
//! The elector, the supervisor and the daemon loop report events here (a lease operation, an
//! acquisition, a renew, a child start or exit); the HTTP handlers only read. The state sits behind
//! a `std` mutex that is never held across an `.await`, so a slow HTTP client can never delay
//! the daemon's timers.

use crate::elector::members::LineView;
use crate::elector::wake::WakeSent;
use crate::elector::{Handoff, LeaseOp, Observer};
use crate::process_metrics::ProcessMetrics;
use crate::store::StoreError;
use crate::timing::{Deadline, Timing};
use prometheus_client::encoding::{
    EncodeLabelSet, EncodeLabelValue, EncodeMetric, LabelValueEncoder, MetricEncoder, NoLabelSet,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::metrics::info::Info;
use prometheus_client::registry::Registry;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;

/// Label values are the names `as_str` gives.
macro_rules! label_values {
    ($($kind:ty),*) => {$(
        impl EncodeLabelValue for $kind {
            fn encode(&self, encoder: &mut LabelValueEncoder) -> std::fmt::Result {
                std::fmt::Write::write_str(encoder, self.as_str())
            }
        }
    )*};
}

label_values!(
    LeaseOp,
    ExitReason,
    HealthResult,
    Handoff,
    WakeSent,
    WakeTaken
);

/// How a wake-up that came in was taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WakeTaken {
    /// The elector tries its acquire now.
    Accepted,
    /// Another came less than a second before: nothing done.
    RateLimited,
    /// Without the member's wake token: refused, nothing done.
    Unauthorized,
}

impl WakeTaken {
    fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::RateLimited => "rate_limited",
            Self::Unauthorized => "unauthorized",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HandoffLabel {
    result: Handoff,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WakeSentLabel {
    result: WakeSent,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct WakeTakenLabel {
    result: WakeTaken,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct LivenessLabel {
    state: &'static str,
}

/// How a lease operation ended, as a metric label: `ok`, or the storage error code
/// (`LeaseAlreadyPresent`, `ServerBusy`...), or `timeout` / `unreachable` / `error`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OpResult {
    op: LeaseOp,
    result: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct OpLabel {
    op: LeaseOp,
}

/// Why a child stopped running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExitReason {
    /// It ended by itself.
    Exited,
    /// It was stopped because storage said the lease is someone else's.
    LeaseLost,
    /// It was stopped at the stop deadline: no renew succeeded in time.
    Deadline,
    /// It was stopped because the daemon was asked to stop.
    Shutdown,
    /// It could not be started at all.
    StartFailed,
    /// It was stopped because its health checks failed.
    Unhealthy,
}

impl ExitReason {
    fn as_str(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::LeaseLost => "lease_lost",
            Self::Deadline => "deadline",
            Self::Shutdown => "shutdown",
            Self::StartFailed => "start_failed",
            Self::Unhealthy => "unhealthy",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ExitLabel {
    reason: ExitReason,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct HealthLabel {
    result: HealthResult,
}

/// How one health check of the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthResult {
    Pass,
    Fail,
    Timeout,
}

impl HealthResult {
    fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Timeout => "timeout",
        }
    }
}

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

/// The daemon's part in the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Checking storage before the first campaign.
    Starting,
    /// Trying to acquire while someone else (or nobody reachable) leads.
    Follower,
    /// Holding the lease; the child may run.
    Leader,
    /// Still holding the lease, but stopping the child before giving it up.
    SteppingDown,
    /// Out of the election for a while after stepping down with an unhealthy child.
    CoolingDown,
}

/// The child as the daemon sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    Running,
    /// The stop signal was sent; waiting for the group to be gone.
    Stopping,
    /// Between two runs (`on_exit = "restart"`).
    Restarting,
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
}

/// `leasehold_log_lines_dropped_total`: read from the log queue ([`crate::logging`]) when
/// scraped, so that counting a drop costs the logging path nothing more.
#[derive(Debug)]
struct DroppedLogLines;

impl EncodeMetric for DroppedLogLines {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&crate::logging::dropped_lines(), None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// The slot a per-slot metric is about (design section 12).
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct SlotLabel {
    slot: u32,
}

/// A metric kept per slot: with one slot it is encoded exactly as before slots existed (no
/// label: existing dashboards, alerts and tests keep working); with more, one series per slot,
/// labelled `slot`.
#[derive(Debug)]
struct BySlot<M> {
    labelled: bool,
    family: Family<SlotLabel, M>,
}

impl<M: Default> BySlot<M> {
    fn new(slots: u32) -> Self {
        Self {
            labelled: slots > 1,
            family: Family::default(),
        }
    }

    fn at(&self, slot: u32) -> impl std::ops::Deref<Target = M> + '_ {
        self.family.get_or_create(&SlotLabel { slot })
    }
}

impl<M: Clone> Clone for BySlot<M> {
    fn clone(&self) -> Self {
        Self {
            labelled: self.labelled,
            family: self.family.clone(),
        }
    }
}

impl<M: EncodeMetric + prometheus_client::metrics::TypedMetric + Default> EncodeMetric
    for BySlot<M>
{
    fn encode(&self, encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        match self.labelled {
            true => self.family.encode(encoder),
            false => self.at(0).encode(encoder),
        }
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

/// A label set with the slot in front, only with more than one slot.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Slotted<L> {
    slot: Option<u32>,
    labels: L,
}

impl<L: EncodeLabelSet> EncodeLabelSet for Slotted<L> {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelSetEncoder,
    ) -> Result<(), std::fmt::Error> {
        if let Some(slot) = self.slot {
            SlotLabel { slot }.encode(encoder)?;
        }
        self.labels.encode(encoder)
    }
}

/// Declares the metrics once: each one's field, type, how it is made, and its name and help as
/// `/metrics` shows them (a counter's name gets `_total`).
macro_rules! metrics {
    (|$slots:ident| $($field:ident: $ty:ty = $make:expr => $name:literal, $help:literal;)*) => {
        struct Metrics {
            $($field: $ty,)*
        }

        impl Metrics {
            /// The metrics of an instance counting `slots` slots, registered in `registry`.
            fn new($slots: u32, registry: &mut Registry) -> Self {
                let metrics = Metrics {
                    $($field: $make,)*
                };
                $(registry.register($name, $help, metrics.$field.clone());)*
                metrics
            }
        }
    };
}

metrics! {
    |slots|
    is_leader: BySlot<Gauge> = BySlot::new(slots)
        => "leasehold_is_leader", "1 while this instance holds the lease (with [lease].slots > 1: per slot, label slot)";
    epoch: BySlot<Gauge> = BySlot::new(slots)
        => "leasehold_epoch", "The epoch (fencing token) of the current or last leadership of this instance (with slots: of each slot it held, label slot)";
    leadership_changes: BySlot<Counter> = BySlot::new(slots)
        => "leasehold_leadership_changes", "Times this instance became leader or stopped being leader (with slots: per slot, label slot)";
    lease_operations: Family<OpResult, Counter> = Family::default()
        => "leasehold_lease_operations", "Storage requests by operation and result (ok or the storage error code)";
    lease_operation_seconds: Family<OpLabel, Histogram> = Family::new_with_constructor(|| {
        // 1 ms .. ~16 s.
        Histogram::new(exponential_buckets(0.001, 2.0, 15))
    }) => "leasehold_lease_operation_seconds", "Storage request latency by operation";
    child_exits: Family<ExitLabel, Counter> = Family::default()
        => "leasehold_child_exits", "Child runs that ended, by reason";
    health_checks: Family<HealthLabel, Counter> = Family::default()
        => "leasehold_health_checks", "Health checks of the child, by result (pass, fail, timeout)";
    http_connections: Gauge = Gauge::default()
        => "leasehold_http_connections", "Connections to the HTTP endpoint open now";
    http_connection_limit: Gauge = Gauge::default()
        => "leasehold_http_connection_limit", "Connections the HTTP endpoint keeps open at most; a new one beyond it closes the oldest";
    http_connections_evicted: Counter = Counter::default()
        => "leasehold_http_connections_evicted", "Connections to the HTTP endpoint closed early to make room for a newer one";
    handoffs: Family<Slotted<HandoffLabel>, Counter> = Family::default()
        => "leasehold_handoffs", "Voluntary ends of term of this instance, by how the lease was given up (handed_over, no_successor, fallback_release, lost, released; with slots: and by slot)";
    wakeups_sent: Family<WakeSentLabel, Counter> = Family::default()
        => "leasehold_wakeups_sent", "Wake-ups sent to the member the lease was handed to, by result (ok, refused, failed)";
    wakeups_received: Family<WakeTakenLabel, Counter> = Family::default()
        => "leasehold_wakeups_received", "Wake-ups that came in on POST /wake, by result (accepted, rate_limited, unauthorized: without this member's wake token)";
    members: Family<LivenessLabel, Gauge> = Family::default()
        => "leasehold_members", "Members of the group in the line as last listed, by state (live, dead)";
    place_in_line: Gauge = Gauge::default()
        => "leasehold_place_in_line", "This instance's place in the line of live members (1 = first; 0 = not in line)";
    preemptions: Counter = Counter::default()
        => "leasehold_preemptions", "Times this instance, leading, stepped down for a member of higher priority ([election].preempt_after)";
    child_group_stuck: Gauge = Gauge::default()
        => "leasehold_child_group_stuck", "1 while a process of an ended child's group survives SIGKILL (stuck in the kernel): the lease is neither handed on nor released, and no child starts, until it is gone";
    slot_mismatch: Gauge = Gauge::default()
        => "leasehold_slot_mismatch", "The group's slot count while it differs from this instance's [lease].slots (this instance does not lead), else 0";
}

impl Metrics {
    /// Every labelled counter's series, and the members gauge, at 0: an alert on
    /// `increase(...)` or a sum over a group then counts the first event as well.
    fn start_at_zero(&self, slots: u32) {
        let labelled = self.is_leader.labelled;
        for slot in 0..slots {
            // Every slot's series from the start, so that sums over a group count holders.
            if labelled {
                self.is_leader.at(slot).set(0);
            }
            self.leadership_changes.at(slot).inc_by(0);
            for how in HANDOFFS {
                self.handoffs
                    .get_or_create(&Slotted {
                        slot: labelled.then_some(slot),
                        labels: HandoffLabel { result: how },
                    })
                    .inc_by(0);
            }
        }
        for op in LeaseOp::ALL {
            self.lease_operations
                .get_or_create(&OpResult {
                    op,
                    result: "ok".to_owned(),
                })
                .inc_by(0);
        }
        for reason in EXIT_REASONS {
            self.child_exits
                .get_or_create(&ExitLabel { reason })
                .inc_by(0);
        }
        for result in HEALTH_RESULTS {
            self.health_checks
                .get_or_create(&HealthLabel { result })
                .inc_by(0);
        }
        for result in WAKES_SENT {
            self.wakeups_sent
                .get_or_create(&WakeSentLabel { result })
                .inc_by(0);
        }
        for result in WAKES_TAKEN {
            self.wakeups_received
                .get_or_create(&WakeTakenLabel { result })
                .inc_by(0);
        }
        for state in ["live", "dead"] {
            self.members.get_or_create(&LivenessLabel { state }).set(0);
        }
    }
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
    registry: Registry,
}

/// The kinds of every labelled counter, each shown from the start at 0, so that an alert on
/// `increase(...)` sees the first event too.
const EXIT_REASONS: [ExitReason; 6] = [
    ExitReason::Exited,
    ExitReason::LeaseLost,
    ExitReason::Deadline,
    ExitReason::Shutdown,
    ExitReason::StartFailed,
    ExitReason::Unhealthy,
];
const HEALTH_RESULTS: [HealthResult; 3] = [
    HealthResult::Pass,
    HealthResult::Fail,
    HealthResult::Timeout,
];
const HANDOFFS: [Handoff; 5] = [
    Handoff::HandedOver,
    Handoff::NoSuccessor,
    Handoff::Fallback,
    Handoff::Lost,
    Handoff::Released,
];
const WAKES_SENT: [WakeSent; 3] = [WakeSent::Ok, WakeSent::Refused, WakeSent::Failed];
const WAKES_TAKEN: [WakeTaken; 3] = [
    WakeTaken::Accepted,
    WakeTaken::RateLimited,
    WakeTaken::Unauthorized,
];

/// Fails to compile when one of the kinds above gets a new variant: add it to its list too
/// (those enums belong to the elector; the lists of what `/metrics` shows are kept here).
const _: () = {
    let _ = |reason: ExitReason| match reason {
        ExitReason::Exited
        | ExitReason::LeaseLost
        | ExitReason::Deadline
        | ExitReason::Shutdown
        | ExitReason::StartFailed
        | ExitReason::Unhealthy => {}
    };
    let _ = |result: HealthResult| match result {
        HealthResult::Pass | HealthResult::Fail | HealthResult::Timeout => {}
    };
    let _ = |how: Handoff| match how {
        Handoff::HandedOver
        | Handoff::NoSuccessor
        | Handoff::Fallback
        | Handoff::Lost
        | Handoff::Released => {}
    };
    let _ = |how: WakeSent| match how {
        // Later (answered 429) counts as `ok`: the member is awake.
        WakeSent::Ok | WakeSent::Later | WakeSent::Refused | WakeSent::Failed => {}
    };
    let _ = |taken: WakeTaken| match taken {
        WakeTaken::Accepted | WakeTaken::RateLimited | WakeTaken::Unauthorized => {}
    };
};

/// The current term's clock, read at each scrape: present only while this instance holds a
/// lease (a term has deadlines), absent otherwise, so that an alert on it concerns leaders.
#[derive(Debug)]
struct TermClock {
    state: Arc<Mutex<State>>,
    /// `true`: time until the kill deadline; `false`: time since `t_s` (the renew lag).
    to_kill: bool,
}

impl EncodeMetric for TermClock {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let deadline = self
            .state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .deadline;
        let Some(d) = deadline else {
            return Ok(());
        };
        let now = crate::clock::now();
        let seconds = if self.to_kill {
            d.kill_at.saturating_duration_since(now)
        } else {
            now.saturating_duration_since(d.sent)
        };
        encoder.encode_gauge(&seconds.as_secs_f64())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Gauge
    }
}

/// How long a live daemon loop can go without a storage request, three times over: a leader
/// renews every `R`, a follower polls at least every `1.2 × acquire_interval`, and retries
/// after storage errors wait at most 10 s. A cooldown is left out: `liveness` skips it.
fn stall_limit(t: &Timing) -> Duration {
    (3 * t.renew_interval)
        .max(3 * t.longest_poll())
        .max(Duration::from_secs(30))
}

impl Telemetry {
    /// The telemetry of an instance counting `slots` slots (`[lease].slots`).
    pub fn new(identity: &str, container: &str, blob: &str, timing: &Timing, slots: u32) -> Self {
        let mut registry = Registry::default();
        registry.register(
            "leasehold_build",
            "The leasehold build this daemon runs: its version",
            Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
        );
        registry.register_collector(Box::new(ProcessMetrics));
        // Every leasehold_ metric names the lease it is about, as client-go's
        // leader_election_master_status{name} does: one Prometheus can watch many groups.
        let lease = registry.sub_registry_with_label((
            Cow::Borrowed("lease"),
            Cow::Owned(format!("{container}/{blob}")),
        ));
        let metrics = Metrics::new(slots, lease);
        lease.register(
            "leasehold_log_lines_dropped",
            "Log lines dropped because stderr did not take them in time (its reader stalled): the daemon never waits on its log",
            DroppedLogLines,
        );
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
        }));
        lease.register(
            "leasehold_renew_lag_seconds",
            "While this instance leads: seconds since its last successful acquire or renew was sent (t_s); it renews every renew_interval, and its child is stopped at duration - safety_margin - stop_timeout",
            TermClock {
                state: state.clone(),
                to_kill: false,
            },
        );
        lease.register(
            "leasehold_seconds_to_kill_deadline",
            "While this instance leads: seconds until its child's process group is SIGKILLed unless a renew succeeds first (t_s + duration - safety_margin)",
            TermClock {
                state: state.clone(),
                to_kill: true,
            },
        );
        metrics.start_at_zero(slots);
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
            registry,
        }
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
        let result = match error {
            None => "ok".to_owned(),
            Some(StoreError::TimedOut(_)) => "timeout".to_owned(),
            Some(StoreError::Unreachable(_)) => "unreachable".to_owned(),
            Some(e) => e.code().unwrap_or("error").to_owned(),
        };
        self.metrics
            .lease_operations
            .get_or_create(&OpResult { op, result })
            .inc();
        self.metrics
            .lease_operation_seconds
            .get_or_create(&OpLabel { op })
            .observe(elapsed.as_secs_f64());
        self.with(|s| s.last_attempt = Instant::now());
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
        self.metrics
            .health_checks
            .get_or_create(&HealthLabel { result })
            .inc();
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
        self.metrics.is_leader.at(slot).set(1);
        self.metrics.epoch.at(slot).set(epoch as i64);
        self.metrics.leadership_changes.at(slot).inc();
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
        self.metrics.is_leader.at(slot).set(0);
        self.metrics.leadership_changes.at(slot).inc();
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
        self.metrics
            .child_exits
            .get_or_create(&ExitLabel { reason })
            .inc();
    }

    pub fn child_restarting(&self) {
        self.with(|s| {
            s.restarts += 1;
            if let Some(c) = &mut s.child {
                c.state = ChildState::Restarting;
            }
        });
    }

    /// A group of an ended child survives SIGKILL (`Some(pgid)`), or is gone at last (`None`).
    pub fn child_group_stuck(&self, pgid: Option<u32>) {
        self.with(|s| s.stuck_group = pgid.map(|p| (p, OffsetDateTime::now_utc())));
        self.metrics
            .child_group_stuck
            .set(i64::from(pgid.is_some()));
    }

    /// The daemon is stepping down without a child to stop (the lease was lost or expired
    /// between runs).
    pub fn stepping_down(&self) {
        self.with(|s| s.role = Role::SteppingDown);
    }

    /// The HTTP endpoint keeps at most `limit` connections open.
    pub fn http_connection_limit(&self, limit: usize) {
        self.metrics.http_connection_limit.set(limit as i64);
    }

    /// The HTTP endpoint has `open` connections now, after closing `evicted` early.
    pub fn http_connections(&self, open: usize, evicted: u64) {
        self.metrics.http_connections.set(open as i64);
        self.metrics.http_connections_evicted.inc_by(evicted);
    }

    /// The line of members as the elector now knows it.
    pub fn line(&self, view: &LineView) {
        let live = view
            .members
            .iter()
            .filter(|m| m.part != crate::elector::members::Part::Dead)
            .count();
        let dead = view.members.len() - live;
        self.metrics
            .members
            .get_or_create(&LivenessLabel { state: "live" })
            .set(live as i64);
        self.metrics
            .members
            .get_or_create(&LivenessLabel { state: "dead" })
            .set(dead as i64);
        self.metrics
            .place_in_line
            .set(view.position.unwrap_or(0) as i64);
        self.with(|s| {
            s.line = view.clone();
            // Joined, or out of line for a reason that joining again will not fix soon
            // (refused listing, another instance with this identity): either way it campaigns.
            s.joined |= view.standing.as_deref() != Some("joining");
        });
    }

    /// A wake-up came in on `POST /wake`.
    pub fn wake_received(&self, taken: WakeTaken) {
        self.metrics
            .wakeups_received
            .get_or_create(&WakeTakenLabel { result: taken })
            .inc();
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
        self.metrics
            .handoffs
            .get_or_create(&Slotted {
                slot: self.metrics.is_leader.labelled.then_some(slot),
                labels: HandoffLabel { result: how },
            })
            .inc();
    }

    fn wake_sent(&self, how: WakeSent) {
        self.metrics
            .wakeups_sent
            .get_or_create(&WakeSentLabel { result: how })
            .inc();
    }

    fn preempted(&self) {
        self.metrics.preemptions.inc();
    }

    fn slot_mismatch(&self, recorded: Option<u32>) {
        self.metrics
            .slot_mismatch
            .set(recorded.map_or(0, i64::from));
    }
}

fn secs(d: Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// The JSON of `/status`. Field names are part of the contract (README, "HTTP endpoints");
/// `status` reads it back from the local daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    pub identity: String,
    pub container: String,
    pub blob: String,
    pub role: Role,
    /// The epoch of the current leadership, or of this instance's last one.
    pub epoch: Option<u64>,
    pub leader_since: Option<String>,
    /// Since the last successful acquire or renew was sent (`t_s`).
    pub seconds_since_renew: Option<f64>,
    /// Until the child gets its stop signal unless a renew succeeds first.
    pub seconds_to_stop_deadline: Option<f64>,
    /// Until the child's group is SIGKILLed unless a renew succeeds first.
    pub seconds_to_kill_deadline: Option<f64>,
    pub child: Option<ChildReport>,
    pub restarts: u32,
    /// The last health check of the current child (`[child.health]`), if any ran.
    pub health: Option<HealthReport>,
    /// While cooling down after an unhealthy child: until this instance competes again.
    pub seconds_to_rejoin: Option<f64>,
    /// A group of an ended child that survives SIGKILL: this instance neither hands the lease
    /// on nor releases it, nor campaigns, until it is gone (design section 16).
    #[serde(default)]
    pub stuck_group: Option<StuckGroupReport>,
    /// The line of members as this instance last knew it: the leader, the members in order
    /// with their parts, this instance's place.
    #[serde(default)]
    pub line: LineView,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HealthReport {
    pub last_check: String,
    pub last_result: HealthResult,
    pub consecutive_failures: u32,
    /// What the last check printed or answered (one line, at most 300 characters).
    pub last_output: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StuckGroupReport {
    pub pgid: u32,
    /// When its SIGKILL was found not to have ended it.
    pub since: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildReport {
    pub pid: u32,
    pub state: ChildState,
    pub started_at: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::time::advance;

    #[tokio::test(start_paused = true)]
    async fn liveness_allows_the_slowest_polling_and_a_cooldown() {
        // A follower polling every 20-24 s is alive until 3 × 24 s = 72 s without a request.
        let slow = Timing {
            acquire_interval: Duration::from_secs(20),
            ..Timing::default()
        };
        let t = Telemetry::new("t", "c", "b", &slow, 1);
        advance(Duration::from_secs(72)).await;
        assert_eq!(t.liveness(), Ok(()));
        advance(Duration::from_secs(1)).await;
        assert_eq!(t.liveness(), Err(Duration::from_secs(73)));

        // A daemon cooling down for 120 s sends nothing on purpose; the clock starts at rejoin.
        let t = Telemetry::for_tests();
        t.cooling_down(Instant::now() + Duration::from_secs(120));
        advance(Duration::from_secs(150)).await;
        assert_eq!(t.liveness(), Ok(()), "30 s after the rejoin");
        advance(Duration::from_secs(1)).await;
        assert_eq!(t.liveness(), Err(Duration::from_secs(31)));
    }

    /// The lines of `text` that are samples of `name` (its `_total` too), sorted.
    /// Without the `lease` label every one carries, and without the counters still at 0.
    fn samples(text: &str, name: &str) -> Vec<String> {
        let mut lines: Vec<String> = all_samples(text, name)
            .into_iter()
            .filter(|l| !(l.contains("_total") && l.ends_with(" 0")))
            .map(|l| {
                l.replace("lease=\"c/b\",", "")
                    .replace("{lease=\"c/b\"}", "")
            })
            .collect();
        lines.sort();
        lines
    }

    /// The lines of `text` that are samples of `name` (its `_total` too), as they are.
    fn all_samples(text: &str, name: &str) -> Vec<String> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                l.strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with([' ', '{']) || rest.starts_with("_total"))
            })
            .map(str::to_owned)
            .collect()
    }

    /// Every labelled counter is there at 0 before its first event (an alert on
    /// `increase(...)` counts the first one), every leasehold_ metric names its lease, the
    /// build and the process are described, and the term's clock is there only while leading.
    #[tokio::test(start_paused = true)]
    async fn every_counter_starts_at_zero_and_names_its_lease() {
        let t = Timing::default();
        let telemetry = Telemetry::new("a", "c", "b", &t, 1);
        let text = telemetry.metrics_text();
        for op in LeaseOp::ALL {
            let line = format!(
                "leasehold_lease_operations_total{{lease=\"c/b\",op=\"{}\",result=\"ok\"}} 0",
                op.as_str()
            );
            assert!(text.contains(&line), "{line} in\n{text}");
        }
        for (name, label, values) in [
            (
                "leasehold_child_exits",
                "reason",
                &EXIT_REASONS.map(ExitReason::as_str)[..],
            ),
            (
                "leasehold_health_checks",
                "result",
                &HEALTH_RESULTS.map(HealthResult::as_str)[..],
            ),
            (
                "leasehold_handoffs",
                "result",
                &HANDOFFS.map(Handoff::as_str)[..],
            ),
            (
                "leasehold_wakeups_sent",
                "result",
                &WAKES_SENT.map(WakeSent::as_str)[..],
            ),
            (
                "leasehold_wakeups_received",
                "result",
                &WAKES_TAKEN.map(WakeTaken::as_str)[..],
            ),
        ] {
            for value in values {
                let line = format!("{name}_total{{lease=\"c/b\",{label}=\"{value}\"}} 0");
                assert!(text.contains(&line), "{line} in\n{text}");
            }
        }
        for line in [
            "leasehold_leadership_changes_total{lease=\"c/b\"} 0",
            "leasehold_members{lease=\"c/b\",state=\"live\"} 0",
            "leasehold_is_leader{lease=\"c/b\"} 0",
            concat!(
                "leasehold_build_info{version=\"",
                env!("CARGO_PKG_VERSION"),
                "\"} 1"
            ),
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
        assert!(!all_samples(&text, "process_resident_memory_bytes").is_empty());
        for line in text.lines().filter(|l| l.starts_with("leasehold_")) {
            assert!(
                line.starts_with("leasehold_build_info") || line.contains("lease=\"c/b\""),
                "{line}"
            );
        }
        // The term's clock: none while following; while leading, lag + time to the kill
        // deadline = L - M.
        assert!(all_samples(&text, "leasehold_renew_lag_seconds").is_empty());
        assert!(all_samples(&text, "leasehold_seconds_to_kill_deadline").is_empty());
        let deadline = Deadline::from_sent(crate::clock::now(), &t);
        telemetry.acquired(3, 0, OffsetDateTime::now_utc(), deadline);
        tokio::time::advance(Duration::from_secs(3)).await;
        let text = telemetry.metrics_text();
        let value = |name: &str| -> f64 {
            let lines = all_samples(&text, name);
            assert_eq!(lines.len(), 1, "{name}: {lines:?}");
            lines[0].rsplit_once(' ').unwrap().1.parse().unwrap()
        };
        let lag = value("leasehold_renew_lag_seconds");
        let to_kill = value("leasehold_seconds_to_kill_deadline");
        assert!((2.9..=3.1).contains(&lag), "{lag}");
        assert!((lag + to_kill - 14.0).abs() < 0.01, "{lag} + {to_kill}");
        telemetry.term_ended();
        let text = telemetry.metrics_text();
        assert!(all_samples(&text, "leasehold_renew_lag_seconds").is_empty());
    }

    /// With one slot the leader metrics read as before slots existed (no label); with three,
    /// each is labelled by slot, and every slot's leader gauge is there from the start.
    #[tokio::test(start_paused = true)]
    async fn leader_metrics_are_labelled_by_slot_only_with_slots() {
        let t = Timing::default();
        let deadline = Deadline::from_sent(crate::clock::now(), &t);
        let now = OffsetDateTime::now_utc();
        let one = Telemetry::new("a", "c", "b", &t, 1);
        one.acquired(7, 0, now, deadline);
        Observer::handed_over(&one, Handoff::HandedOver);
        one.term_ended();
        let text = one.metrics_text();
        assert_eq!(
            samples(&text, "leasehold_is_leader"),
            ["leasehold_is_leader 0"]
        );
        assert_eq!(samples(&text, "leasehold_epoch"), ["leasehold_epoch 7"]);
        assert_eq!(
            samples(&text, "leasehold_leadership_changes"),
            ["leasehold_leadership_changes_total 2"]
        );
        assert_eq!(
            samples(&text, "leasehold_handoffs"),
            ["leasehold_handoffs_total{result=\"handed_over\"} 1"]
        );

        let three = Telemetry::new("a", "c", "b", &t, 3);
        assert_eq!(
            samples(&three.metrics_text(), "leasehold_is_leader"),
            [
                "leasehold_is_leader{slot=\"0\"} 0",
                "leasehold_is_leader{slot=\"1\"} 0",
                "leasehold_is_leader{slot=\"2\"} 0"
            ]
        );
        three.acquired(9, 2, now, deadline);
        let text = three.metrics_text();
        assert_eq!(
            samples(&text, "leasehold_is_leader"),
            [
                "leasehold_is_leader{slot=\"0\"} 0",
                "leasehold_is_leader{slot=\"1\"} 0",
                "leasehold_is_leader{slot=\"2\"} 1"
            ]
        );
        assert_eq!(
            samples(&text, "leasehold_epoch"),
            ["leasehold_epoch{slot=\"2\"} 9"]
        );
        Observer::handed_over(&three, Handoff::NoSuccessor);
        three.term_ended();
        let text = three.metrics_text();
        assert_eq!(
            samples(&text, "leasehold_handoffs"),
            ["leasehold_handoffs_total{slot=\"2\",result=\"no_successor\"} 1"]
        );
        assert_eq!(
            samples(&text, "leasehold_leadership_changes"),
            ["leasehold_leadership_changes_total{slot=\"2\"} 2"]
        );
        Observer::slot_mismatch(&three, Some(2));
        assert_eq!(
            samples(&three.metrics_text(), "leasehold_slot_mismatch"),
            ["leasehold_slot_mismatch 2"]
        );
    }
}
