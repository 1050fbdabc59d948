//! How often a member acts while it does not lead: the error backoff of a campaign, the
//! polling and watch periods, each the core's row ([`Pace`]) stretched by a draw of this
//! process's random source, so that members started together do not act in step.

use crate::timing::Timing;
use leasehold_core::Pace;
use std::time::Duration;

/// The longest pause of a campaign between two attempts that storage failed.
pub(crate) fn longest_error_backoff(timing: &Timing) -> Duration {
    Pace::new(timing).error_backoff_longest()
}

/// The watch period of a member that is not the successor, stretched at random.
pub(crate) fn watch_interval(timing: &Timing) -> Duration {
    Pace::new(timing).watch(fastrand::f64())
}

/// The longest watch period.
pub(crate) fn watch_max(timing: &Timing) -> Duration {
    Pace::new(timing).watch_longest()
}

/// The follower's polling period, stretched at random (never shorter than `acquire_interval`).
pub(crate) fn poll_interval(timing: &Timing) -> Duration {
    Pace::new(timing).poll(fastrand::f64())
}

/// How long a member that gave the lease up by choice waits before competing again.
pub(crate) fn yield_interval(timing: &Timing) -> Duration {
    Pace::new(timing).yield_for()
}

/// The pauses of a campaign after attempts that storage failed: from `acquire_interval`,
/// doubling up to [`longest_error_backoff`].
pub(crate) fn error_backoff(timing: &Timing) -> impl Iterator<Item = Duration> + use<> {
    crate::retry::backoff(timing.acquire_interval, longest_error_backoff(timing))
}
