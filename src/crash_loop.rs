//! The crash-loop backoff's rule, without I/O: how long a member stands aside after its child
//! failed soon after its start (`[child].crash_backoff`, docs/configuration.md). The child
//! supervisor (`crate::supervisor`) counts its children's failures with it, and the simulator's
//! bodies count theirs with the same type, so that the simulator runs the production rule.

use std::time::Duration;

/// The crash-loop figures (validated `[child].crash_backoff`, `crash_backoff_max` and
/// `crash_window`): a child that fails (a non-zero exit, or death by a signal leasehold did not
/// send) within `window` of its start makes its member stand aside for `first`, doubling with
/// each such failure in a row up to `max`; a run of at least `window` starts the count again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrashBackoff {
    /// The backoff after the first quick failure.
    pub first: Duration,
    /// The longest backoff.
    pub max: Duration,
    /// A failure sooner than this after the start counts; a run this long resets the count.
    pub window: Duration,
}

impl Default for CrashBackoff {
    /// The defaults of `[child]`.
    fn default() -> Self {
        Self {
            first: crate::config::DEFAULT_CRASH_BACKOFF,
            max: crate::config::DEFAULT_CRASH_BACKOFF_MAX,
            window: crate::config::DEFAULT_CRASH_WINDOW,
        }
    }
}

/// The count of quick failures in a row, kept across the terms of one daemon (a restarted
/// daemon starts again from the first step).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct CrashLoop {
    /// Quick failures in a row.
    failures: u32,
    /// The backoff after the next one; `None`: the first.
    next: Option<Duration>,
}

impl CrashLoop {
    /// A child failed within the crash window: counts it, and returns how long its member
    /// stands aside before the next attempt (doubling for the failure after it).
    pub fn failed(&mut self, figures: &CrashBackoff) -> Duration {
        self.failures += 1;
        let backoff = self.next.unwrap_or(figures.first);
        self.next = Some(backoff.saturating_mul(2).min(figures.max));
        backoff
    }

    /// A run of the child lasted `ran`, however it ended: one that lasted the crash window
    /// starts the count again. Returns whether that ended a crash loop (failures were counted).
    pub fn ran_for(&mut self, ran: Duration, figures: &CrashBackoff) -> bool {
        if ran < figures.window {
            return false;
        }
        let was_looping = self.failures > 0;
        *self = Self::default();
        was_looping
    }

    /// Quick failures in a row so far (the supervisor's WARN line and metric).
    #[cfg_attr(not(feature = "daemon"), allow(dead_code))]
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    /// 1, 2, 4 ... up to the cap; a run of the window starts again from the first step.
    #[test]
    fn the_backoff_doubles_to_its_cap_and_a_long_run_resets_it() {
        let figures = CrashBackoff {
            first: secs(1),
            max: secs(60),
            window: secs(60),
        };
        let mut count = CrashLoop::default();
        let backoffs: Vec<u64> = (0..8).map(|_| count.failed(&figures).as_secs()).collect();
        assert_eq!(backoffs, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(count.failures(), 8);
        assert!(
            !count.ran_for(secs(59), &figures),
            "a short run changes nothing"
        );
        assert_eq!(count.failed(&figures), secs(60));
        assert!(
            count.ran_for(secs(60), &figures),
            "the window ends the loop"
        );
        assert_eq!(count.failures(), 0);
        assert_eq!(count.failed(&figures), secs(1));
        let mut quiet = CrashLoop::default();
        assert!(!quiet.ran_for(secs(600), &figures), "no loop to end");
    }
}
