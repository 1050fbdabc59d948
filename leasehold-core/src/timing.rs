//! The lease timings and their rules (docs/safety.md, "The safety model"): `L`, `R`, `M`, `G`
//! and the follower's polling interval, what each may be, and the instants of a term derived
//! from them ([`Deadline`]).
//!
//! A [`Timing`] is plain data: the config builds one from `[lease]` and `[child].stop_timeout`,
//! and a library user may build one in code. [`Timing::check`] holds every rule, so both are
//! held to the same ones.

use std::fmt::Debug;
use std::ops::{Add, Sub};
use std::time::Duration;

/// An instant on the clock the deadlines are kept on. The core keeps no clock of its own: the
/// shell passes `now` in (the daemon's lease clock, which counts a suspend; the simulator's
/// virtual time), so any instant type with these operations will do: `std::time::Instant`,
/// tokio's, or a simulator's own.
pub trait Moment:
    Copy
    + Ord
    + Debug
    + Add<Duration, Output = Self>
    + Sub<Duration, Output = Self>
    + Sub<Self, Output = Duration>
{
}

impl<T> Moment for T where
    T: Copy
        + Ord
        + Debug
        + Add<Duration, Output = T>
        + Sub<Duration, Output = T>
        + Sub<T, Output = Duration>
{
}

/// The shortest finite lease Azure grants (Lease Blob REST API).
pub const MIN_LEASE: Duration = Duration::from_secs(15);
/// The longest finite lease Azure grants.
pub const MAX_LEASE: Duration = Duration::from_secs(60);

/// The smallest `safety_margin`. The margin absorbs the difference in rate between this host's
/// clock and the server's (an NTP-disciplined clock drifts by at most 500 ppm: 30 ms over a 60 s
/// lease) and the lateness of the kill itself: a timer that fires late on a loaded host, the
/// SIGKILL, the scheduler. Zero would leave nothing for either.
pub const MIN_SAFETY_MARGIN: Duration = Duration::from_millis(500);

/// The longest `acquire_interval` (and `[child.health].interval`): a follower that waits longer
/// has stopped being useful, and every deadline computed from it stays far from overflowing.
pub const MAX_INTERVAL: Duration = Duration::from_secs(3600);

/// Followers poll every `acquire_interval * (1 + POLL_JITTER * random())`.
pub const POLL_JITTER: f64 = 0.2;

/// The defaults of the design: `L` 15 s, `R` 4 s, `acquire_interval` 1 s, `M` 1 s, `G` 5 s.
pub const DEFAULT_DURATION: Duration = Duration::from_secs(15);
/// The default `R`.
pub const DEFAULT_RENEW_INTERVAL: Duration = Duration::from_secs(4);
/// The default polling interval.
pub const DEFAULT_ACQUIRE_INTERVAL: Duration = Duration::from_secs(1);
/// The default `M`.
pub const DEFAULT_SAFETY_MARGIN: Duration = Duration::from_secs(1);
/// The default `G`.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The lease timings, in the notation of the design: `L`, `R`, `M`, `G`.
///
/// [`Timing::default`] is the design's defaults; a `Timing` built in code is checked
/// ([`Timing::check`]) by whatever is given it.
///
/// ```
/// use leasehold_core::Timing;
/// use std::time::Duration;
///
/// let timing = Timing {
///     duration: Duration::from_secs(30),
///     renew_interval: Duration::from_secs(8),
///     ..Timing::default()
/// };
/// assert!(timing.check().is_ok());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// `L`: the lease duration asked of Azure, whole seconds from 15 s to 60 s.
    pub duration: Duration,
    /// `R`: how often the leader renews; also how long one storage request may take.
    pub renew_interval: Duration,
    /// How often a follower tries to acquire (stretched by up to 20 % at random).
    pub acquire_interval: Duration,
    /// `M`: slack for clock-rate drift between this host and storage, and for the kill itself.
    pub safety_margin: Duration,
    /// `G`: how long the leader's child or task gets to stop before it is killed or aborted
    /// (`[child].stop_timeout`).
    pub stop_timeout: Duration,
}

/// The defaults of `[lease]` and `[child].stop_timeout`: `L` 15 s, `R` 4 s, `acquire_interval`
/// 1 s, `M` 1 s, `G` 5 s.
impl Default for Timing {
    fn default() -> Self {
        Self {
            duration: DEFAULT_DURATION,
            renew_interval: DEFAULT_RENEW_INTERVAL,
            acquire_interval: DEFAULT_ACQUIRE_INTERVAL,
            safety_margin: DEFAULT_SAFETY_MARGIN,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
        }
    }
}

/// A timing that breaks a rule. `Display` is one line: the key, the value and the rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key} = {value}: {rule}")]
pub struct TimingError {
    key: &'static str,
    value: String,
    rule: String,
}

impl TimingError {
    fn new(key: &'static str, value: impl Into<String>, rule: impl Into<String>) -> Self {
        Self {
            key,
            value: value.into(),
            rule: rule.into(),
        }
    }

    /// The config key at fault, e.g. `[lease].renew_interval` (`[lease]` for the timing rule
    /// that ties them together).
    pub fn key(&self) -> &'static str {
        self.key
    }

    /// The value, as shown.
    pub fn value(&self) -> &str {
        &self.value
    }

    /// The rule it breaks.
    pub fn rule(&self) -> &str {
        &self.rule
    }
}

impl Timing {
    /// Checks Azure's limits and rule 5 of the safety model, `2R + G + M <= L`, which leaves room
    /// for two renew attempts before the stop deadline. Each part is checked on its own first,
    /// so that the error names the key (and the sum cannot overflow).
    pub fn check(&self) -> Result<(), TimingError> {
        let show = |d: Duration| format!("{:?}", humantime::format_duration(d).to_string());
        let plain = |d: Duration| humantime::format_duration(d).to_string();
        if self.duration.subsec_nanos() != 0 {
            return Err(TimingError::new(
                "[lease].duration",
                show(self.duration),
                "must be a whole number of seconds (Azure counts lease time in seconds)",
            ));
        }
        if self.duration < MIN_LEASE || self.duration > MAX_LEASE {
            return Err(TimingError::new(
                "[lease].duration",
                show(self.duration),
                "must be between 15s and 60s (Azure's limits; infinite leases are refused)",
            ));
        }
        let within_lease = format!("at most the lease duration ({})", plain(self.duration));
        if self.renew_interval < Duration::from_secs(1) || self.renew_interval > self.duration {
            return Err(TimingError::new(
                "[lease].renew_interval",
                show(self.renew_interval),
                format!("must be at least 1s and {within_lease}"),
            ));
        }
        if self.acquire_interval < Duration::from_millis(100)
            || self.acquire_interval > MAX_INTERVAL
        {
            return Err(TimingError::new(
                "[lease].acquire_interval",
                show(self.acquire_interval),
                "must be between 100ms and 1h",
            ));
        }
        if self.safety_margin < MIN_SAFETY_MARGIN || self.safety_margin > self.duration {
            return Err(TimingError::new(
                "[lease].safety_margin",
                show(self.safety_margin),
                format!(
                    "must be at least 500ms (slack for clock-rate drift between this host and \
                     storage, and for the kill itself) and {within_lease}"
                ),
            ));
        }
        if self.stop_timeout > self.duration {
            return Err(TimingError::new(
                "[child].stop_timeout",
                show(self.stop_timeout),
                format!("must be {within_lease}"),
            ));
        }
        let budget = 2 * self.renew_interval + self.stop_timeout + self.safety_margin;
        if budget > self.duration {
            return Err(TimingError::new(
                "[lease]",
                format!(
                    "duration {}, renew_interval {}, [child].stop_timeout {}, safety_margin {}",
                    plain(self.duration),
                    plain(self.renew_interval),
                    plain(self.stop_timeout),
                    plain(self.safety_margin),
                ),
                format!(
                    "timing rule 2*renew_interval + stop_timeout + safety_margin <= duration is broken \
                     (2*{} + {} + {} = {} > {}); lengthen the lease duration or shorten the others",
                    plain(self.renew_interval),
                    plain(self.stop_timeout),
                    plain(self.safety_margin),
                    plain(budget),
                    plain(self.duration),
                ),
            ));
        }
        Ok(())
    }

    /// The lease duration in whole seconds, as sent to Azure.
    pub fn lease_seconds(&self) -> u8 {
        // Checked to 15..=60, so the cast cannot wrap (unlike the SDK's `From<Duration>`).
        self.duration.as_secs() as u8
    }

    /// How long one storage request may take before it counts as failed. A renew that takes
    /// longer than a renew interval is retried on a fresh request; callers also cap it by the
    /// time left before the stop deadline (rule 4).
    pub fn request_timeout(&self) -> Duration {
        self.renew_interval
    }

    /// The longest a follower waits between two acquire attempts: `acquire_interval` stretched
    /// by the whole jitter. A daemon that released the lease by choice waits this long before
    /// competing again, so that every follower polls at least once meanwhile.
    pub fn longest_poll(&self) -> Duration {
        self.acquire_interval.mul_f64(1.0 + POLL_JITTER)
    }

    /// The break period that hands over without overlap: the old leader notices at its next
    /// renew (`R`), its child gets `G` to stop, plus `M`; rounded up to whole seconds (Azure
    /// counts the break period in seconds) and at most Azure's 60 s.
    pub fn safe_break_period(&self) -> Duration {
        let max = Duration::from_secs(60);
        let safe = (self.renew_interval + self.stop_timeout + self.safety_margin).min(max);
        Duration::from_secs(safe.as_secs() + u64::from(safe.subsec_nanos() > 0)).min(max)
    }
}

/// The instants that bound a term, all derived from one send instant `t_s`, on the lease clock
/// (the shell's: see [`Moment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline<I> {
    /// `t_s`: when the last successful acquire or renew was sent.
    pub sent: I,
    /// `t_s + L - M - G`: the child gets its stop signal (the task its cancellation) no later
    /// than this.
    pub stop_at: I,
    /// `t_s + L - M`: the child's process group is SIGKILLed (the task aborted) no later than
    /// this.
    pub kill_at: I,
}

impl<I: Moment> Deadline<I> {
    /// The deadlines of a lease won or renewed by a request sent at `sent`.
    pub fn from_sent(sent: I, t: &Timing) -> Self {
        let kill_at = sent + t.duration - t.safety_margin;
        Self {
            sent,
            stop_at: kill_at - t.stop_timeout,
            kill_at,
        }
    }

    /// When the lease this deadline comes from has surely expired on the server: `t_s + L`.
    pub fn expiry(&self, t: &Timing) -> I {
        self.sent + t.duration
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_defaults_follow_the_design_and_keep_the_rule() {
        let t = Timing::default();
        assert_eq!(
            2 * t.renew_interval + t.stop_timeout + t.safety_margin,
            14 * t.safety_margin
        );
        assert_eq!(t.check(), Ok(()));
        assert_eq!(t.safe_break_period(), Duration::from_secs(10));
        let d = Deadline::from_sent(Instant::now(), &t);
        assert_eq!(d.kill_at - d.sent, Duration::from_secs(14));
        assert_eq!(d.stop_at - d.sent, Duration::from_secs(9));
    }

    #[test]
    fn a_timing_built_in_code_is_held_to_the_same_rules() {
        let t = Timing {
            renew_interval: Duration::from_secs(6),
            ..Timing::default()
        };
        let err = t.check().unwrap_err();
        assert_eq!(err.key(), "[lease]");
        assert!(err.rule().contains("2*renew_interval"), "{err}");
        let t = Timing {
            safety_margin: Duration::ZERO,
            ..Timing::default()
        };
        assert_eq!(t.check().unwrap_err().key(), "[lease].safety_margin");
        let t = Timing {
            duration: Duration::from_millis(15_500),
            ..Timing::default()
        };
        assert!(t.check().unwrap_err().rule().contains("whole number"));
        // Rounded up to whole seconds, at most 60 s.
        let t = Timing {
            duration: Duration::from_secs(60),
            renew_interval: Duration::from_millis(20_500),
            stop_timeout: Duration::from_secs(10),
            ..Timing::default()
        };
        assert_eq!(t.check(), Ok(()));
        assert_eq!(t.safe_break_period(), Duration::from_secs(32));
    }
}
