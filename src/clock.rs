//! The clock the lease deadlines are kept on.
//!
//! The storage server's lease clock keeps running while this machine sleeps (a suspended laptop,
//! a hibernated VM). CLOCK_MONOTONIC, on which std's and tokio's `Instant` and every tokio timer
//! run, stops during a suspend. A deadline kept on it alone would, after a resume, let the child
//! run for up to `L - M` more seconds beside the leader that took over meanwhile.
//!
//! So every lease instant (`t_s`, the stop and kill deadlines, the moment a stop began) is kept on
//! [`now`]: tokio's `Instant` plus the time the machine has spent suspended since the daemon
//! started (CLOCK_BOOTTIME minus CLOCK_MONOTONIC, the only thing that separates them). Timers
//! still run on CLOCK_MONOTONIC, so [`sleep_until`] converts; a suspend that begins *during* a
//! sleep is noticed by whoever polls: the child supervisor re-reads this clock every
//! [`SUSPEND_POLL`] while a child runs, which kills a stale child that soon after a resume.
//!
//! An elector reads these clocks through the [`Clock`] it was built with: the host's, or (feature
//! `test-util`) a simulated history's, which never reads the host's clocks.

use std::sync::OnceLock;
use std::time::Duration;
use tokio::time::Instant;

/// How often the child supervisor re-reads [`now`] while a child runs, to notice a resume.
pub const SUSPEND_POLL: Duration = Duration::from_millis(500);

/// Suspends shorter than this in total are ignored. Reading two clocks one after the other
/// differs by nanoseconds from one reading to the next; this keeps [`now`] exactly tokio's time
/// on a machine that never sleeps (and in tests on paused time). It is far below any safety
/// margin (at least 1 s).
const NOISE: Duration = Duration::from_millis(10);

/// Now, on the lease clock: tokio's `Instant` plus the time spent suspended since start-up.
pub fn now() -> Instant {
    Instant::now() + suspended()
}

/// Now on the host's wall clock, for what is shown to people and written for other instances to
/// read (when a term began, until when a member stands by, the first epoch of a blob).
pub fn wall() -> time::OffsetDateTime {
    time::OffsetDateTime::now_utc()
}

/// How long the machine has been suspended since the daemon first asked (zero below `NOISE`).
pub fn suspended() -> Duration {
    static BASELINE: OnceLock<Duration> = OnceLock::new();
    let gap = boot_minus_monotonic();
    let real = gap.saturating_sub(*BASELINE.get_or_init(|| gap));
    let real = if real < NOISE { Duration::ZERO } else { real };
    real + fake::suspended()
}

/// The timer instant (CLOCK_MONOTONIC) at which the lease clock reads `at`, as far as known now.
pub fn timer_instant(at: Instant) -> Instant {
    let suspended = suspended();
    at.checked_sub(suspended).unwrap_or_else(Instant::now)
}

/// Sleeps until the lease clock reads `at`, unless the machine is suspended meanwhile (then the
/// sleep ends later; see the module doc). (The child supervisor's, which reads the host's
/// clocks directly; an elector sleeps on its [`Clock`].)
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
pub async fn sleep_until(at: Instant) {
    tokio::time::sleep_until(timer_instant(at)).await;
}

/// CLOCK_BOOTTIME - CLOCK_MONOTONIC: the total time this machine has been suspended since boot.
fn boot_minus_monotonic() -> Duration {
    use nix::time::{ClockId, clock_gettime};
    let read = |id| clock_gettime(id).map(Duration::from);
    match (
        read(ClockId::CLOCK_BOOTTIME),
        read(ClockId::CLOCK_MONOTONIC),
    ) {
        (Ok(boot), Ok(mono)) => boot.saturating_sub(mono),
        // Both clocks exist on every Linux since 2.6.39; without them we keep monotonic time.
        _ => Duration::ZERO,
    }
}

/// The clocks an elector reads, chosen when it is built and carried to where it reads them:
/// the host's (the lease clock [`now`], the wall clock [`wall`]), or a simulated history's. The
/// daemon's parts that never run in a simulated history (the child supervisor, the guard,
/// telemetry) read the host's directly.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Clock {
    /// The host's.
    Host,
    /// A simulated history's (feature `test-util`): the lease clock is tokio's paused time and
    /// never counts a suspend (which would read the host's clocks: a history must not depend
    /// on the machine it runs on); the wall clock reads [`SIMULATED_START`] at `since` and runs
    /// with tokio's time from there.
    #[cfg(any(test, feature = "test-util"))]
    Simulated {
        /// The tokio instant the wall clock read [`SIMULATED_START`] at.
        since: Instant,
    },
}

/// A simulated wall clock's reading at its start: 2026-01-01T00:00:00Z (a date worked out at
/// compile time: the elector reads this clock at nearly every step).
#[cfg(any(test, feature = "test-util"))]
const SIMULATED_START: time::OffsetDateTime =
    match time::OffsetDateTime::from_unix_timestamp(1_767_225_600) {
        Ok(start) => start,
        Err(_) => time::OffsetDateTime::UNIX_EPOCH,
    };

impl Clock {
    /// A simulated history's clocks, their wall clock starting now.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn simulated() -> Self {
        Self::Simulated {
            since: Instant::now(),
        }
    }

    /// Now, on the lease clock.
    pub(crate) fn now(self) -> Instant {
        match self {
            Self::Host => now(),
            #[cfg(any(test, feature = "test-util"))]
            Self::Simulated { .. } => Instant::now(),
        }
    }

    /// Now, on the wall clock.
    pub(crate) fn wall(self) -> time::OffsetDateTime {
        match self {
            Self::Host => wall(),
            #[cfg(any(test, feature = "test-util"))]
            Self::Simulated { since } => {
                SIMULATED_START + Instant::now().saturating_duration_since(since)
            }
        }
    }

    /// The timer instant at which this lease clock reads `at`, as far as known now.
    pub(crate) fn timer_instant(self, at: Instant) -> Instant {
        match self {
            Self::Host => timer_instant(at),
            #[cfg(any(test, feature = "test-util"))]
            Self::Simulated { .. } => at,
        }
    }

    /// Sleeps until this lease clock reads `at` (on the host's, later if the machine is
    /// suspended meanwhile; see the module doc).
    pub(crate) async fn sleep_until(self, at: Instant) {
        tokio::time::sleep_until(self.timer_instant(at)).await;
    }
}

#[cfg(not(test))]
mod fake {
    pub fn suspended() -> std::time::Duration {
        std::time::Duration::ZERO
    }
}

/// Unit tests cannot suspend the machine; they add a pretend suspend to the clock instead. It is
/// per thread, and paused-time tests run on one thread, so tests do not see each other's.
#[cfg(test)]
pub(crate) mod fake {
    use std::cell::Cell;
    use std::time::Duration;

    thread_local! {
        static SUSPENDED: Cell<Duration> = const { Cell::new(Duration::ZERO) };
    }

    pub fn suspended() -> Duration {
        SUSPENDED.with(Cell::get)
    }

    /// Pretends the machine has just been suspended for `d`, on this thread.
    pub fn suspend(d: Duration) {
        SUSPENDED.with(|s| s.set(s.get() + d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_suspend_the_lease_clock_is_tokio_time() {
        // The machine running the tests may have slept before, but not in the last few ms.
        assert_eq!(suspended(), Duration::ZERO);
        let at = Instant::now() + Duration::from_secs(3);
        assert_eq!(timer_instant(at), at);
    }

    #[test]
    fn a_suspend_moves_the_lease_clock_and_brings_timers_forward() {
        let at = Instant::now() + Duration::from_secs(30);
        fake::suspend(Duration::from_secs(20));
        assert_eq!(suspended(), Duration::from_secs(20));
        let (before, lease_now, after) = (Instant::now(), now(), Instant::now());
        assert!(lease_now >= before + Duration::from_secs(20));
        assert!(lease_now <= after + Duration::from_secs(20));
        assert_eq!(timer_instant(at), at - Duration::from_secs(20));
    }
}
