//! The kill deadline of a lease just won or renewed, logged on CLOCK_MONOTONIC for the fault
//! tests and the chaos command.

use crate::clock;
use crate::timing::Deadline;
use tokio::time::Instant;

/// Logs, at debug level, the kill deadline of a lease just won or renewed, as CLOCK_MONOTONIC
/// nanoseconds. This is for the fault tests (tests/it/faults.rs) and the chaos command: they compare
/// it with the witness child's CLOCK_MONOTONIC history to check that no child outlived its
/// daemon's deadline *exactly*. A bound guessed from the fault times cannot do that, because a
/// late renew success moves the deadline by an amount only the daemon knows. (The target is this
/// module's, which the tests' `RUST_LOG=leasehold::elector=debug` names.)
pub(super) fn log_deadline(deadline: &Deadline, epoch: u64) {
    tracing::debug!(
        epoch,
        kill_at_mono_ns = monotonic_ns(deadline.kill_at),
        "lease deadline"
    );
}

/// Lease-clock instant `at` on CLOCK_MONOTONIC, in nanoseconds, on the host's lease clock: what
/// the fault tests read (in a simulated history, only a number in a debug line). tokio's `Instant` is std's, which is CLOCK_MONOTONIC
/// on Linux but does not expose its value; the offset is taken from "now" on both clocks.
fn monotonic_ns(at: Instant) -> i128 {
    let at = clock::timer_instant(at);
    let now = Instant::now();
    let Ok(mono) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) else {
        return 0;
    };
    let mono = mono.tv_sec() as i128 * 1_000_000_000 + mono.tv_nsec() as i128;
    if at >= now {
        mono + (at - now).as_nanos() as i128
    } else {
        mono - (now - at).as_nanos() as i128
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// The fault tests compare logged deadlines with the witness's CLOCK_MONOTONIC stamps.
    #[test]
    fn deadlines_are_logged_on_clock_monotonic() {
        let mono = || {
            let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
            t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128
        };
        let ahead = Duration::from_secs(14);
        let before = mono();
        let logged = monotonic_ns(Instant::now() + ahead);
        let after = mono();
        let ahead = ahead.as_nanos() as i128;
        assert!(before + ahead <= logged && logged <= after + ahead);
        let past = monotonic_ns(Instant::now() - Duration::from_secs(1));
        assert!(past < mono() - 999_000_000);
    }
}
