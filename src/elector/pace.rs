//! How often a member acts while it does not lead: the error backoff of a campaign, the
//! polling and watch periods, each stretched at random so that members started together do
//! not act in step.

use crate::timing::Timing;
use std::time::Duration;

/// The longest pause of a campaign between two attempts that storage failed: the backoff of
/// the attempts doubles from `acquire_interval` up to this.
pub(crate) fn longest_error_backoff(timing: &Timing) -> Duration {
    timing.acquire_interval.max(Duration::from_secs(10))
}
