//! The bounds the checker holds a history to (docs/safety.md, "The bounds the simulator
//! holds"), from the elector's own timings: rule (d)'s liveness bound and rule (e)'s handoff
//! bound.

use crate::timing::{POLL_JITTER, Timing};
use leasehold_core::Pace;
use std::time::Duration;

/// The liveness bound of rule (d) for `timing` (docs/safety.md, "Recovery from anything"): how long
/// a group with a member able to lead may run without a leader after the last fault. A member that
/// storage failed retries within the longest error backoff, its request may take up to `R` to time
/// out; then the lease it finds may be held by nobody alive until it expires (`L`), or the blob
/// deleted and under its lock-delay (`L + M`); the member that takes it over polls within
/// `1.2 x acquire_interval`; 1 s for the requests on the way. With `slots` above 1, the members
/// waiting for a slot move on only when the one ahead of them leads or its record dies: a poller
/// that died keeps them waiting until its record's lease expires (30 s), and the next one sees
/// that at its next watch of that record (a watch period).
pub fn liveness_bound(timing: &Timing, slots: u32) -> Duration {
    let single = leasehold_core::Pace::new(timing).error_backoff_longest()
        + timing.renew_interval
        + timing.duration
        + timing.safety_margin
        + timing.longest_poll()
        + Duration::from_secs(1);
    match slots {
        1 => single,
        _ => {
            let watch = timing.acquire_interval * leasehold_core::pace::WATCH_PERIODS;
            single + Pace::RECORD_LEASE + watch.mul_f64(1.0 + POLL_JITTER) + Duration::from_secs(1)
        }
    }
}

/// The handoff bound of rule (e) for `timing` (docs/safety.md): a term handed to a member
/// that was already gone is taken over, or handed on to the next member, within this long: the
/// leader waits for the successor's epoch for its confirm window (the longest: a member that
/// was handed the lease on and only watches the blob reads the notice naming it within a watch
/// period, and then polls), then hands the lease on (or, when the lease expired meanwhile, a
/// member that polls takes it within a polling period); 2 s for the requests on the way.
pub fn handoff_bound(timing: &Timing) -> Duration {
    leasehold_core::Pace::new(timing).confirm_window(false, false)
        + timing.longest_poll()
        + Duration::from_secs(2)
}
