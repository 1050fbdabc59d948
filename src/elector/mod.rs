//! The elector: the one loop of leadership, which both `leasehold run` and
//! [`Elector::run_while_leader`] drive. They differ only in the body of a term (the daemon's
//! child supervisor, a library user's task; [`term::Body`]).
//!
//! A round of the loop (`lead`): campaign (`campaign`: the successor acquires every
//! jittered `acquire_interval`, the other members watch the lease blob; then epoch + 1 under the
//! lease) -> keep (`keep`: renew every `R` in a task of its own) -> run the term's body, which
//! holds itself to rule 1 from the renew task's [`Tenure`] -> the body is gone -> stop renewing ->
//! end of term (a voluntary end hands the lease to the successor with Lease Blob `change`, else
//! it is released) -> the pause its end calls for -> campaign again, until shutdown. Around it,
//! `members` keeps this instance's member record and the line of succession, and `wake` takes
//! and sends wake-ups. With `[lease].slots` > 1 a term holds one of N slot leases, each kept
//! and given up by this same loop. This file only names the parts; `instance` is the
//! [`Elector`] itself.
//!
//! Every ordering invariant of the safety model lives in `lead`, once: the lease is never given up
//! while the body may run (rule 7); a new term's body starts only after the old one is gone, and
//! only under a held lease with time left before its stop deadline; a stop never cuts an acquire
//! in flight; every instant is on the lease clock ([`crate::clock`]: monotonic, plus any
//! machine suspend). Everything is measured from `t_s`, the instant at which the last successful
//! acquire or renew request was *sent*: the server cannot start its lease clock before that, so
//! the lease cannot expire on the server before `t_s + L`.

// The shell keeps its functions as short and as simple as the core's (too_many_lines' threshold
// is in clippy.toml; cognitive_complexity's is clippy's 25): each carries out one action or
// reads one answer. `cognitive_complexity` counts what tracing's macros expand to, twice as much
// once the Kubernetes client turns on tracing's `log` feature; so what a log line says is data,
// and a function calls one macro per level (the build with the `kubernetes` feature is the one
// that measures it).
#![warn(clippy::too_many_lines)]
#![warn(clippy::cognitive_complexity)]

mod campaign;
mod confirm;
mod drive;
mod error;
mod handoff;
mod instance;
mod keep;
pub(crate) mod members;
mod observe;
mod preempt;
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
pub(crate) use observe::Observer;
#[cfg(any(feature = "test-util", test))]
pub(crate) use observe::Unobserved;
#[cfg(any(feature = "daemon", feature = "test-util", test))]
pub(crate) use prepare::prepare;
pub use role::Role;
pub use task::Leadership;
pub(crate) use term::{Body, Phase, Tenure, Term, TermEnd};
pub use wake::{HANDOFF_HEADER, PROBE_HEADER, WAKE_HEADER, WakeAnswer, Waker};
