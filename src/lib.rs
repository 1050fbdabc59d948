//! leasehold: one leader among several instances, by an Azure Blob Storage lease, and a child
//! command that runs only while that lease is held.
//!
//! # Layout
//!
//! * `config`: the TOML schema, defaults, command-line overrides and every validation rule.
//! * [`store`]: the [`store::LeaseStore`] trait; `AzureStore` implements it over the Azure SDK.
//! * `clock`: the lease clock: monotonic time that also counts a machine suspend.
//! * `elector`: acquiring, the epoch (fencing token), renewing, releasing; the timing rules.
//! * `child`: process groups, parent-death protection, the guard, stop/kill, reaping.
//! * `backstop`: a thread that SIGKILLs a child's group at its kill instant even if the
//!   runtime were stuck.
//! * `health`: `[child.health]` checks; a stalled child makes its leader step down.
//! * `supervisor`: one term of leadership from the child's side; deadlines and `on_exit`.
//! * `ops`: the one-shot operator commands `status`, `check` and `break`.
//! * `daemon`: `leasehold run`; wires the above with the signals, and owns the shutdown order.
//! * `telemetry`: the daemon's observable state and metrics, fed by the modules above.
//! * `http`: `/healthz`, `/readyz`, `/status`, `/metrics` over `telemetry`, with bounded
//!   connections.
//! * `open_files`: the open-file limit: raised at start-up, the HTTP endpoint's share, the
//!   reserve for storage and the child, and the limit the programs leasehold starts inherit.
//! * `logging`: the tracing subscriber (text or JSON), with secret-bearing crates capped; the
//!   daemon's lines go through a bounded queue that drops rather than block.
//! * `secret`: a string type that never prints its value.

mod backstop;
mod child;
#[doc(hidden)]
pub mod cli;
mod clock;
mod config;
mod daemon;
mod elector;
mod health;
mod http;
mod logging;
mod open_files;
mod ops;
mod secret;
pub mod store;
mod supervisor;
mod telemetry;
mod timing;

pub use config::{Config, ConfigError, Overrides};
pub use elector::{Elector, Error, Leadership};
pub use timing::{Timing, TimingError};

use std::time::Duration;

/// Exponential backoff: a delay from `min` doubling up to `max`, of which each pause takes a
/// random half to whole, so that instances do not retry in step and no pause exceeds `max`.
pub(crate) fn backoff(min: Duration, max: Duration) -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .without_max_times()
        .build()
        .map(|delay| delay.mul_f64(0.5 + 0.5 * fastrand::f64()))
}

/// A duration for people: millisecond precision, humantime format ("4s 120ms").
pub(crate) fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_millis(d.as_millis() as u64)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_stays_within_its_bounds() {
        let pauses: Vec<Duration> = backoff(Duration::from_millis(200), Duration::from_secs(1))
            .take(200)
            .collect();
        assert!(pauses[0] >= Duration::from_millis(100) && pauses[0] <= Duration::from_millis(200));
        assert!(
            pauses.iter().all(|p| *p <= Duration::from_secs(1)),
            "{pauses:?}"
        );
        assert!(
            pauses[10..].iter().any(|p| *p < Duration::from_secs(1)),
            "still jittered"
        );
    }
}
