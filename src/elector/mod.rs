//! The elector: one instance of a leadership group, the shell of the core's member
//! (`leasehold_core::member::Member`: its record, its line, its campaigns, its terms and their
//! handoffs, as one machine), which both `leasehold run` and [`Elector::run_while_leader`]
//! drive. They differ only in the body of a term (the daemon's child supervisor, a library
//! user's task; [`term::Body`]).
//!
//! `drive` is the one driver of the member: it carries out what the member says (store calls
//! cut at their limits, the body started, fed its [`Tenure`] and stopped, wake-ups and probes
//! sent, log lines, what the observer shows) and tells it what happened (returns with the
//! instant their request was sent, its one timer, wake-ups answered in the caller's step, the
//! body's end, shutdown). Every ordering invariant of the safety model lives in the core, once
//! (rule 7: `leasehold_core::term::Terms`); every instant is on the lease clock
//! ([`crate::clock`]: monotonic, plus any machine suspend). `instance` is the [`Elector`]
//! itself; `prepare` readies storage before the first campaign; `members` shows the line;
//! `wake` takes and sends wake-ups.

// The shell keeps its functions as short and as simple as the core's (too_many_lines' threshold
// is in clippy.toml; cognitive_complexity's is clippy's 25): each carries out one action or
// reads one answer. `cognitive_complexity` counts what tracing's macros expand to, twice as much
// once the Kubernetes client turns on tracing's `log` feature; so what a log line says is data,
// and a function calls one macro per level (the build with the `kubernetes` feature is the one
// that measures it).
#![warn(clippy::too_many_lines)]
#![warn(clippy::cognitive_complexity)]

mod drive;
mod error;
mod instance;
pub(crate) mod members;
mod observe;
mod prepare;
mod request;
mod role;
#[cfg(test)]
mod scenarios;
mod task;
mod term;
#[cfg(test)]
mod testing;
mod vanish;
pub(crate) mod wake;

#[cfg(any(feature = "daemon", test))]
pub(crate) use drive::Finish;
pub use error::Error;
pub use instance::Elector;
#[cfg(any(feature = "daemon", feature = "test-util", test))]
pub(crate) use observe::Handoff;
#[cfg(feature = "daemon")]
pub(crate) use observe::LeaseOp;
#[cfg(any(feature = "daemon", feature = "test-util", test))]
pub(crate) use observe::Observer;
#[cfg(any(feature = "test-util", test))]
pub(crate) use observe::Unobserved;
#[cfg(any(feature = "daemon", feature = "test-util", test))]
pub(crate) use prepare::prepare;
#[cfg(any(test, feature = "test-util"))]
pub(crate) use prepare::{Startup, StartupStep};
pub use role::Role;
pub use task::Leadership;
pub(crate) use term::{Body, Phase, Tenure, Term, TermEnd};
pub use wake::{HANDOFF_HEADER, PROBE_HEADER, WAKE_HEADER, WakeAnswer, Waker};
