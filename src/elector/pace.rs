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
