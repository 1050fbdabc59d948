//! The Prometheus metrics of `/metrics`: every family declared once (name, help, labels),
//! every labelled counter shown at 0 from the start, the recording of each event, and what is
//! read at each scrape (the term's clock, the dropped log lines, the process).

use super::status::HealthResult;
use crate::elector::wake::WakeSent;
use crate::elector::{Handoff, LeaseOp};
use crate::process_metrics::ProcessMetrics;
use crate::timing::Deadline;
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
use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

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
    pub(super) fn as_str(self) -> &'static str {
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
    /// It was stopped because its guard process could no longer be told its deadlines (the
    /// guard died, or stopped reading).
    GuardLost,
}

impl ExitReason {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Exited => "exited",
            Self::LeaseLost => "lease_lost",
            Self::Deadline => "deadline",
            Self::Shutdown => "shutdown",
            Self::StartFailed => "start_failed",
            Self::Unhealthy => "unhealthy",
            Self::GuardLost => "guard_lost",
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

/// The slot a per-slot metric is about (docs/slots.md).
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
        pub(super) struct Metrics {
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
    child_backoffs: Counter = Counter::default()
        => "leasehold_child_backoffs", "Times this instance stood aside after its child failed within [child].crash_window of its start (the crash-loop backoff)";
    child_quick_failures: Gauge = Gauge::default()
        => "leasehold_child_quick_failures", "The child's failures in a row within [child].crash_window of its start (0 once a run lasted that long): from 1 on, this instance backs off";
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

/// The kinds of every labelled counter, each shown from the start at 0, so that an alert on
/// `increase(...)` sees the first event too.
pub(super) const EXIT_REASONS: [ExitReason; 7] = [
    ExitReason::Exited,
    ExitReason::LeaseLost,
    ExitReason::Deadline,
    ExitReason::Shutdown,
    ExitReason::StartFailed,
    ExitReason::Unhealthy,
    ExitReason::GuardLost,
];
pub(super) const HEALTH_RESULTS: [HealthResult; 3] = [
    HealthResult::Pass,
    HealthResult::Fail,
    HealthResult::Timeout,
];
pub(super) const HANDOFFS: [Handoff; 5] = [
    Handoff::HandedOver,
    Handoff::NoSuccessor,
    Handoff::Fallback,
    Handoff::Lost,
    Handoff::Released,
];
pub(super) const WAKES_SENT: [WakeSent; 3] = [WakeSent::Ok, WakeSent::Refused, WakeSent::Failed];
pub(super) const WAKES_TAKEN: [WakeTaken; 3] = [
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
        | ExitReason::Unhealthy
        | ExitReason::GuardLost => {}
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
        // Unreachable counts as `failed`: no answer.
        WakeSent::Ok
        | WakeSent::Later
        | WakeSent::Refused
        | WakeSent::Unreachable
        | WakeSent::Failed => {}
    };
    let _ = |taken: WakeTaken| match taken {
        WakeTaken::Accepted | WakeTaken::RateLimited | WakeTaken::Unauthorized => {}
    };
};

/// The current term's clock, read at each scrape: present only while this instance holds a
/// lease (a term has deadlines), absent otherwise, so that an alert on it concerns leaders.
struct TermClock {
    /// The current term's deadlines, if it has any.
    deadline: Arc<dyn Fn() -> Option<Deadline> + Send + Sync>,
    /// `true`: time until the kill deadline; `false`: time since `t_s` (the renew lag).
    to_kill: bool,
}

impl std::fmt::Debug for TermClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TermClock")
            .field("to_kill", &self.to_kill)
            .finish_non_exhaustive()
    }
}

impl EncodeMetric for TermClock {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let Some(d) = (self.deadline)() else {
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

/// The part of `registry` whose metrics carry the `lease` label of `container`/`blob`.
pub(super) fn lease_registry<'r>(
    registry: &'r mut Registry,
    container: &str,
    blob: &str,
) -> &'r mut Registry {
    registry.sub_registry_with_label((
        Cow::Borrowed("lease"),
        Cow::Owned(format!("{container}/{blob}")),
    ))
}

/// The registry of an instance of group `container/blob` counting `slots` slots: the build, the
/// process, and every `leasehold_` metric labelled with its lease; `deadline` reads the current
/// term's deadlines at each scrape. Every labelled counter starts at 0.
pub(super) fn registry(
    container: &str,
    blob: &str,
    slots: u32,
    deadline: impl Fn() -> Option<Deadline> + Send + Sync + 'static,
) -> (Metrics, Registry) {
    let mut registry = Registry::default();
    registry.register(
        "leasehold_build",
        "The leasehold build this daemon runs: its version",
        Info::new(vec![("version", env!("CARGO_PKG_VERSION"))]),
    );
    registry.register_collector(Box::new(ProcessMetrics));
    // Every leasehold_ metric names the lease it is about, as client-go's
    // leader_election_master_status{name} does: one Prometheus can watch many groups.
    let lease = lease_registry(&mut registry, container, blob);
    let metrics = Metrics::new(slots, lease);
    lease.register(
        "leasehold_log_lines_dropped",
        "Log lines dropped because stderr did not take them in time (its reader stalled): the daemon never waits on its log",
        DroppedLogLines,
    );
    let deadline: Arc<dyn Fn() -> Option<Deadline> + Send + Sync> = Arc::new(deadline);
    lease.register(
        "leasehold_renew_lag_seconds",
        "While this instance leads: seconds since its last successful acquire or renew was sent (t_s); it renews every renew_interval, and its child is stopped at duration - safety_margin - stop_timeout",
        TermClock {
            deadline: deadline.clone(),
            to_kill: false,
        },
    );
    lease.register(
        "leasehold_seconds_to_kill_deadline",
        "While this instance leads: seconds until its child's process group is SIGKILLed unless a renew succeeds first (t_s + duration - safety_margin)",
        TermClock {
            deadline,
            to_kill: true,
        },
    );
    metrics.start_at_zero(slots);
    (metrics, registry)
}

/// What the daemon's events count: each records its series.
impl Metrics {
    /// One storage request, and how it ended (`ok`, or what went wrong).
    pub(super) fn lease_op(&self, op: LeaseOp, result: String, elapsed: Duration) {
        self.lease_operations
            .get_or_create(&OpResult { op, result })
            .inc();
        self.lease_operation_seconds
            .get_or_create(&OpLabel { op })
            .observe(elapsed.as_secs_f64());
    }

    pub(super) fn health_checked(&self, result: HealthResult) {
        self.health_checks
            .get_or_create(&HealthLabel { result })
            .inc();
    }

    /// A term of `slot` began under `epoch`.
    pub(super) fn acquired(&self, slot: u32, epoch: u64) {
        self.is_leader.at(slot).set(1);
        self.epoch.at(slot).set(epoch as i64);
        self.leadership_changes.at(slot).inc();
    }

    /// The term of `slot` ended.
    pub(super) fn term_ended(&self, slot: u32) {
        self.is_leader.at(slot).set(0);
        self.leadership_changes.at(slot).inc();
    }

    pub(super) fn child_exited(&self, reason: ExitReason) {
        self.child_exits.get_or_create(&ExitLabel { reason }).inc();
    }

    /// The child failed soon after its start, `in_a_row` times: a backoff began.
    pub(super) fn child_backed_off(&self, in_a_row: u32) {
        self.child_backoffs.inc();
        self.child_quick_failures.set(i64::from(in_a_row));
    }

    /// A run lasted the crash window: the count of quick failures starts over.
    pub(super) fn child_crash_loop_over(&self) {
        self.child_quick_failures.set(0);
    }

    pub(super) fn child_group_stuck(&self, stuck: bool) {
        self.child_group_stuck.set(i64::from(stuck));
    }

    pub(super) fn http_connection_limit(&self, limit: usize) {
        self.http_connection_limit.set(limit as i64);
    }

    pub(super) fn http_connections(&self, open: usize, evicted: u64) {
        self.http_connections.set(open as i64);
        self.http_connections_evicted.inc_by(evicted);
    }

    /// The line as last listed: `live` and `dead` members, this instance's place (0: none).
    pub(super) fn line(&self, live: usize, dead: usize, place: usize) {
        self.members
            .get_or_create(&LivenessLabel { state: "live" })
            .set(live as i64);
        self.members
            .get_or_create(&LivenessLabel { state: "dead" })
            .set(dead as i64);
        self.place_in_line.set(place as i64);
    }

    pub(super) fn wake_received(&self, taken: WakeTaken) {
        self.wakeups_received
            .get_or_create(&WakeTakenLabel { result: taken })
            .inc();
    }

    /// A voluntary end of a term of `slot`, by how the lease was given up.
    pub(super) fn handed_over(&self, slot: u32, how: Handoff) {
        self.handoffs
            .get_or_create(&Slotted {
                slot: self.is_leader.labelled.then_some(slot),
                labels: HandoffLabel { result: how },
            })
            .inc();
    }

    pub(super) fn wake_sent(&self, how: WakeSent) {
        self.wakeups_sent
            .get_or_create(&WakeSentLabel { result: how })
            .inc();
    }

    pub(super) fn preempted(&self) {
        self.preemptions.inc();
    }

    pub(super) fn slot_mismatch(&self, recorded: Option<u32>) {
        self.slot_mismatch.set(recorded.map_or(0, i64::from));
    }
}
