//! How often a member acts while it does not lead: the error backoff of a campaign, the
//! polling and watch periods, each stretched at random so that members started together do
//! not act in step.

use crate::timing::{POLL_JITTER, Timing};
use std::time::Duration;

/// The longest pause of a campaign between two attempts that storage failed: the backoff of
/// the attempts doubles from `acquire_interval` up to this.
pub(crate) fn longest_error_backoff(timing: &Timing) -> Duration {
    timing.acquire_interval.max(Duration::from_secs(10))
}

/// How many watch periods (of `acquire_interval` each) a member that is not the successor
/// waits between two reads of the lease blob.
pub(crate) const WATCH_PERIODS: u32 = 5;

/// `period`, stretched by up to 20 % at random.
pub(crate) fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + POLL_JITTER * fastrand::f64())
}

/// The watch period of a member that is not the successor: `5 x acquire_interval`, stretched
/// by up to 20 % at random.
pub(crate) fn watch_interval(timing: &Timing) -> Duration {
    jittered(timing.acquire_interval * WATCH_PERIODS)
}

/// The longest watch period: `5 x acquire_interval` stretched by the whole jitter.
pub(crate) fn watch_max(timing: &Timing) -> Duration {
    (timing.acquire_interval * WATCH_PERIODS).mul_f64(1.0 + POLL_JITTER)
}

/// The follower's polling period: `acquire_interval`, stretched by up to 20 % at random so
/// that followers started together do not poll in lock-step (and never poll faster than once
/// per `acquire_interval`).
pub(crate) fn poll_interval(timing: &Timing) -> Duration {
    timing
        .acquire_interval
        .mul_f64(1.0 + POLL_JITTER * fastrand::f64())
}

/// How long a member that gave the lease up by choice waits before competing again: one full
/// follower polling period, so that every follower polls at least once meanwhile.
pub(crate) fn yield_interval(timing: &Timing) -> Duration {
    timing.longest_poll()
}

/// The pauses of a campaign after attempts that storage failed: from `acquire_interval`,
/// doubling up to [`longest_error_backoff`].
pub(crate) fn error_backoff(timing: &Timing) -> impl Iterator<Item = Duration> + use<> {
    crate::retry::backoff(timing.acquire_interval, longest_error_backoff(timing))
}
