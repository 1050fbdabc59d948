//! What the elector tells whoever watches it: each storage request and how it ended, and each
//! change of its part in the election. The daemon's telemetry ([`crate::telemetry`]) turns that
//! into `/status` and `/metrics`; a library user's elector tells nobody ([`Unobserved`]). The
//! elector never reads anything back.

use super::members::LineView;
use super::wake::WakeSent;
use crate::store::StoreError;
use crate::timing::Deadline;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// The storage operations the elector performs, as named in logs and metrics: the store's
/// [`Op`](crate::store::Op), under the name the elector's code knows it by.
pub(crate) use crate::store::Op as LeaseOp;

/// How a voluntary end of term gave the lease up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Handoff {
    /// Changed to the successor's lease id.
    HandedOver,
    /// No live member to hand it to: released.
    NoSuccessor,
    /// The change got no answer (it may or may not have landed): released with our own id.
    Fallback,
    /// Storage said the lease was no longer ours.
    Lost,
    /// Listing the members failed, or no time was left: released.
    Released,
}

impl Handoff {
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::HandedOver => "handed_over",
            Self::NoSuccessor => "no_successor",
            Self::Fallback => "fallback_release",
            Self::Lost => "lost",
            Self::Released => "released",
        }
    }
}

/// Told of everything the elector does, as it happens. Every method does nothing by default.
/// Implementations must not block: the elector calls them on its way to a deadline.
pub(crate) trait Observer: Send + Sync {
    /// One storage request ended after `elapsed`, with `error` or not.
    fn lease_op(&self, _op: LeaseOp, _elapsed: Duration, _error: Option<&StoreError>) {}
    /// With replicas (docs/quorum.md), the same request as one to replica `replica` (from 0,
    /// in the set's order).
    fn replica_op(&self, _replica: usize, _elapsed: Duration, _error: Option<&StoreError>) {}
    /// A follower now: campaigning.
    fn following(&self) {}
    /// A new term: the lease of `slot` (0 without slots) is ours under `epoch` since
    /// `acquired_at`, until `deadline`.
    fn acquired(&self, _epoch: u64, _slot: u32, _acquired_at: OffsetDateTime, _deadline: Deadline) {
    }
    /// This instance's `[lease].slots` differs from its group's `recorded` count (`None`: no
    /// longer).
    fn slot_mismatch(&self, _recorded: Option<u32>) {}
    /// A renew succeeded; the term's deadlines moved.
    fn renewed(&self, _deadline: Deadline) {}
    /// The term is ending: the body is being stopped, the lease not yet given up.
    fn stepping_down(&self) {}
    /// The term is over: the body is gone and the lease released (or lost).
    fn term_ended(&self) {}
    /// Out of the election until `until`.
    fn cooling_down(&self, _until: Instant) {}
    /// The line of members as this instance now knows it.
    fn line(&self, _view: &LineView) {}
    /// A voluntary end of term gave the lease up this way.
    fn handed_over(&self, _how: Handoff) {}
    /// The lease of `slot` was changed to the lease id of member `to` (the handoff landed).
    fn handed_to(&self, _to: &str, _slot: u32) {}
    /// A wake-up sent to the member the lease was handed to ended this way.
    fn wake_sent(&self, _how: WakeSent) {}
    /// This leader is stepping down for a member of higher priority (docs/preferred.md).
    fn preempted(&self) {}
}

/// The observer of an elector nobody watches.
pub(crate) struct Unobserved;

impl Observer for Unobserved {}
