//! The body of a term (what runs while the lease is held: the daemon's child, a library user's
//! task), how a term ends, and rule 1 for the body, once for both kinds.
//!
//! [`Phase`] is where a body stands: running, told to stop, killed. Its methods are the only
//! transitions, and they hold rule 1: a body is told to stop at the stop deadline `t_s + L - M -
//! G`, at once when the lease is lost, or on shutdown; it gets `G` to end; it is killed (a
//! child's group SIGKILLed, a task aborted) at `min(stop + G, t_s + L - M)`.

use crate::store::{ETag, LeaseId};
use crate::timing::Deadline;
use leasehold_core::choice::Ending;
use std::future::Future;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// One won leadership.
#[derive(Debug, Clone)]
pub(crate) struct Term {
    /// The slot it holds (0: the group's blob; docs/slots.md).
    pub slot: u32,
    pub lease: LeaseId,
    /// The fencing token confirmed in the blob's metadata before the child starts.
    pub epoch: u64,
    /// The deadline of the acquire itself.
    pub deadline: Deadline,
    /// Wall-clock time of the acquisition, for people.
    pub acquired_at: OffsetDateTime,
    /// Its epoch is the one a handoff reserved for it, written beside the acquire
    /// (docs/succession.md, "The handoff").
    pub reserved: bool,
    /// The blob's ETag after its epoch write, when known: nothing else writes the blob while the
    /// term holds the lease (lease operations leave the ETag as it is), so a handoff that writes no
    /// notice reserves the next epoch with it (docs/succession.md, "The handoff").
    pub etag: Option<ETag>,
}

/// What the holder knows about the lease, as the child supervisor sees it (the core's
/// [`Tenure`](leasehold_core::Tenure), on the lease clock).
pub(crate) type Tenure = leasehold_core::Tenure<Instant>;

/// The span of one term: every log line of its renew loop and of its child carries the identity
/// and the epoch.
pub(crate) fn term_span(identity: &str, epoch: u64) -> tracing::Span {
    tracing::info_span!("term", identity, epoch)
}

/// Why a term ended. The loop decides from it what becomes of the lease, how long this instance
/// stays out of the election, and whether it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TermEnd {
    /// The body ended by itself (a child with `on_exit = "release"`, or whose restarts ran out;
    /// a task that returned): release, wait a polling period, campaign again.
    Released,
    /// The child ended by itself with `on_exit = "exit"`: release, then end with its code.
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    Exit(i32),
    /// Storage said the lease is someone else's; the body was stopped at once.
    Lost,
    /// No renew succeeded before the stop deadline; the body was stopped.
    Expired,
    /// Shutdown was asked for; the body was stopped.
    Shutdown,
    /// The child's health checks failed; it was stopped, and this instance stays out of the
    /// election for `cooldown`.
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    Unhealthy { cooldown: Duration },
    /// The child failed soon after it started (a crash loop): the lease goes on as after
    /// [`TermEnd::Released`], and this instance stands aside for `backoff`, as after a health
    /// step-down (its record says standby meanwhile, so the line passes over it).
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    CrashLoop { backoff: Duration },
    /// A live member of strictly higher priority has been a member for `preempt_after`
    /// (docs/preferred.md): the body was stopped, and the lease goes to that member.
    Preempted,
    /// The body was still there after its kill: a task that blocks its thread cannot be
    /// aborted. The loop stops renewing and waits for it, at most until the lease has surely
    /// expired.
    Overran,
}

impl TermEnd {
    /// How a term that gives its lease up voluntarily ended, as its handoff decides by it
    /// (`leasehold_core::choice::Ending`); `None` for an involuntary end (the lease lost or
    /// expired, a body that overran its kill), which hands nothing over.
    pub(crate) fn voluntary(&self) -> Option<Ending> {
        match self {
            Self::Released | Self::Exit(_) => Some(Ending::ByItself),
            Self::Shutdown => Some(Ending::Stop),
            Self::Preempted => Some(Ending::Preempted),
            Self::Unhealthy { cooldown } | Self::CrashLoop { backoff: cooldown } => {
                Some(Ending::StandAside(*cooldown))
            }
            Self::Lost | Self::Expired | Self::Overran => None,
        }
    }
}

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

/// Where the body of a term stands, as rule 1 sees it (the phases of watchexec's supervisor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Running under a held lease.
    Running,
    /// Told to stop at `since` (on the lease clock), because of `why`: the child got its stop
    /// signal, the task's token was cancelled.
    Stopping { why: TermEnd, since: Instant },
    /// Killed at `at`, because of `why`: the child's group got SIGKILL, the task was aborted.
    /// Only its end is awaited now.
    Killed { why: TermEnd, at: Instant },
}

/// What one look at the lease and the clock calls for ([`Phase::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Step {
    /// The deadlines of the lease as last renewed.
    pub deadline: Deadline,
    /// Tell the body to stop now, for this reason; then log.
    pub stop: Option<TermEnd>,
    /// The instant by which the body must be dead.
    pub kill_at: Instant,
    /// Kill the body now.
    pub kill: bool,
}

impl Phase {
    /// Looks at the lease (`tenure`) and the clock (`now`, on the lease clock), moves the phase
    /// on, and says what to do: the one round of rule 1 that both bodies take each time they
    /// wake.
    pub fn step(&mut self, tenure: &Tenure, now: Instant, shutdown: bool, grace: Duration) -> Step {
        let deadline = tenure.deadline();
        let stop = self.stop(Self::stop_reason(tenure, now, shutdown), now);
        let kill_at = self.kill_at(&deadline, grace);
        let kill = self.kill_due(&deadline, grace, now);
        Step {
            deadline,
            stop,
            kill_at,
            kill,
        }
    }

    /// Why a body must stop now under `tenure`, if it must: the lease was lost (rule 2), the stop
    /// deadline passed without a renew (rules 1 and 3), or shutdown was asked (rule 7).
    pub fn stop_reason(tenure: &Tenure, now: Instant, shutdown: bool) -> Option<TermEnd> {
        match *tenure {
            Tenure::Lost(_) => Some(TermEnd::Lost),
            Tenure::Expired(_) => Some(TermEnd::Expired),
            Tenure::Held(d) if now >= d.stop_at => Some(TermEnd::Expired),
            Tenure::Held(_) if shutdown => Some(TermEnd::Shutdown),
            Tenure::Held(_) => None,
        }
    }

    /// A running body is told to stop for `why` (if there is one). Returns the reason when this
    /// is the moment to send the stop: the caller stops the body, and only then logs.
    pub fn stop(&mut self, why: Option<TermEnd>, now: Instant) -> Option<TermEnd> {
        match (*self, why) {
            (Self::Running, Some(why)) => {
                *self = Self::Stopping { why, since: now };
                Some(why)
            }
            _ => None,
        }
    }

    /// When the stop began, for the guard: `None` while the body runs.
    #[cfg_attr(
        not(any(feature = "daemon", test, feature = "test-util")),
        allow(dead_code)
    )]
    pub fn stop_began(&self) -> Option<Instant> {
        match *self {
            Self::Running => None,
            Self::Stopping { since, .. } => Some(since),
            Self::Killed { at, .. } => Some(at),
        }
    }

    /// The instant by which the body must be dead: the kill deadline `t_s + L - M`, or `G` after
    /// the stop began if that comes first.
    pub fn kill_at(&self, deadline: &Deadline, grace: Duration) -> Instant {
        match *self {
            Self::Running => deadline.kill_at,
            Self::Stopping { since, .. } => (since + grace).min(deadline.kill_at),
            Self::Killed { at, .. } => at,
        }
    }

    /// Whether the body must be killed now: a stop has begun, and its kill instant has come.
    /// (A running body past its kill deadline was told to stop first, by [`Phase::stop`] with
    /// [`Phase::stop_reason`]: the stop deadline comes earlier.)
    pub fn kill_due(&mut self, deadline: &Deadline, grace: Duration, now: Instant) -> bool {
        match *self {
            Self::Stopping { why, .. } if now >= self.kill_at(deadline, grace) => {
                *self = Self::Killed { why, at: now };
                true
            }
            _ => false,
        }
    }

    /// Killed now whatever the phase (a second stop request): `why` if it was still running.
    /// False when it had been killed already.
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn kill_now(&mut self, why: TermEnd, now: Instant) -> bool {
        let why = match *self {
            Self::Running => why,
            Self::Stopping { why, .. } => why,
            Self::Killed { .. } => return false,
        };
        *self = Self::Killed { why, at: now };
        true
    }

    /// Why the body is being stopped; `None` while it runs.
    pub fn why(&self) -> Option<TermEnd> {
        match *self {
            Self::Running => None,
            Self::Stopping { why, .. } | Self::Killed { why, .. } => Some(why),
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running)
    }

    pub fn is_stopping(&self) -> bool {
        matches!(self, Self::Stopping { .. })
    }

    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn is_killed(&self) -> bool {
        matches!(self, Self::Killed { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::Timing;

    #[test]
    fn rule_one_in_one_place() {
        let t = Timing::default(); // L 15 s, M 1 s, G 5 s
        let sent = Instant::now();
        let d = Deadline::from_sent(sent, &t);
        let at = |s: u64| sent + Duration::from_secs(s);
        let g = t.stop_timeout;
        let mut phase = Phase::Running;
        // Held, before the stop deadline: nothing.
        let why = Phase::stop_reason(&Tenure::Held(d), at(8), false);
        assert_eq!(phase.stop(why, at(8)), None);
        assert!(!phase.kill_due(&d, g, at(8)));
        // The stop deadline passes without a renew: stop, then kill G later or at the kill
        // deadline, whichever comes first.
        let why = Phase::stop_reason(&Tenure::Held(d), at(9), false);
        assert_eq!(phase.stop(why, at(9)), Some(TermEnd::Expired));
        assert_eq!(phase.stop(Some(TermEnd::Lost), at(9)), None, "stopped once");
        assert_eq!(phase.kill_at(&d, g), at(14));
        assert!(!phase.kill_due(&d, g, at(13)));
        assert!(phase.kill_due(&d, g, at(14)));
        assert_eq!(
            phase,
            Phase::Killed {
                why: TermEnd::Expired,
                at: at(14)
            }
        );
        assert!(!phase.kill_now(TermEnd::Shutdown, at(14)), "killed once");

        // A loss stops at once, and the kill comes G after it.
        let mut phase = Phase::Running;
        let why = Phase::stop_reason(&Tenure::Lost(d), at(4), false);
        assert_eq!(phase.stop(why, at(4)), Some(TermEnd::Lost));
        assert_eq!(phase.kill_at(&d, g), at(9));

        // Shutdown while held; a second request kills at once and keeps the first reason.
        let mut phase = Phase::Running;
        let why = Phase::stop_reason(&Tenure::Held(d), at(1), true);
        assert_eq!(phase.stop(why, at(1)), Some(TermEnd::Shutdown));
        assert!(phase.kill_now(TermEnd::Lost, at(2)));
        assert_eq!(phase.why(), Some(TermEnd::Shutdown));
    }
}
