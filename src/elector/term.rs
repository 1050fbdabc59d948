//! The body of a term (what runs while the lease is held: the daemon's child, a library user's
//! task), how a term ends, and rule 1 for the body, once for both kinds.
//!
//! [`Phase`] (the core's `leasehold_core::term`) is where a body stands: running, told to stop,
//! killed; its methods are the only transitions, and they hold rule 1.

use crate::store::LeaseId;
use crate::timing::Deadline;
use std::future::Future;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One won leadership.
#[derive(Debug, Clone)]
pub(crate) struct Term {
    /// The slot it holds (0: the group's blob; docs/slots.md).
    pub slot: u32,
    /// The lease id it was won with (the simulator's trace reads it).
    #[cfg_attr(not(any(test, feature = "test-util")), allow(dead_code))]
    pub lease: LeaseId,
    /// The fencing token confirmed in the blob's metadata before the child starts.
    pub epoch: u64,
    /// The deadline of the acquire itself.
    pub deadline: Deadline,
    /// Wall-clock time of the acquisition, for people.
    pub acquired_at: OffsetDateTime,
}

/// What the holder knows about the lease, as the child supervisor sees it (the core's
/// [`Tenure`](leasehold_core::Tenure), on the lease clock).
pub(crate) type Tenure = leasehold_core::Tenure<Instant>;

/// The span of one term: every log line of its renew loop and of its child carries the identity
/// and the epoch.
pub(crate) fn term_span(identity: &str, epoch: u64) -> tracing::Span {
    tracing::info_span!("term", identity, epoch)
}

/// Why a term ended (the core's [`TermEnd`](leasehold_core::term::TermEnd)).
pub(crate) use leasehold_core::term::TermEnd;

/// What runs while a term is held. The loop starts it only under a held lease with time left
/// before the stop deadline and no shutdown asked, and goes on only once it is gone.
pub(crate) trait Body: Send {
    /// What it is, in the log ("the child").
    const BODY: &'static str;
    /// How a body that ended by itself is told of in the log ("the child exited").
    const ENDED: &'static str;

    /// Whether a term could start its body now. Winning spends an epoch; a body that could not
    /// start would spend it for nothing, so the elector does not campaign meanwhile.
    fn may_campaign(&mut self) -> bool {
        true
    }

    /// What the loop does when the body outlasts the lease it was last renewed under
    /// ([`TermEnd::Overran`] and still there at the lease's surest expiry): false, give up
    /// ([`Error::TaskDidNotStop`](super::Error::TaskDidNotStop)); true, stay (following, and
    /// saying so) and keep out of the election through [`Body::may_campaign`] until it is gone.
    const WAITS_PAST_ITS_LEASE: bool = false;

    /// Runs the body of `term` under the lease that `tenure` tells of, holding it to rule 1
    /// (with a [`Phase`]), until it is gone; returns why it ended. [`TermEnd::Overran`] when it
    /// could not be made to end.
    fn run(
        &mut self,
        term: &Term,
        tenure: watch::Receiver<Tenure>,
        shutdown: &CancellationToken,
    ) -> impl Future<Output = TermEnd> + Send;

    /// After [`TermEnd::Overran`]: resolves once the body is gone at last.
    fn gone(&mut self) -> impl Future<Output = ()> + Send;
}

/// Where the body of a term stands, as rule 1 sees it: the core's
/// [`Phase`](leasehold_core::term::Phase), on the lease clock.
pub(crate) type Phase = leasehold_core::term::Phase<Instant>;
