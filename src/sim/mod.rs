//! The simulator (docs/testing.md, "The simulator"): the real elector (campaign, keep, handoff,
//! wake-ups, preemption, slots, member records) of K members, driven on virtual time in one thread,
//! with every random choice drawn from one seed, so that a seed replays its history exactly.
//!
//! Each member is a real [`Elector`](crate::Elector) running its loop with a simulated body
//! (`body`), as one simulated process (`gate`: its tasks are frozen and killed together); the
//! body's own life and, for a daemon, its guard (`process`, with the real rules of the guard)
//! run outside that process, on the member's machine, so that a daemon frozen alone leaves
//! them running and only a pause of the whole machine freezes them too; all
//! of them reach one [`MemoryStore`](crate::store::MemoryStore), which keeps Azure's lease
//! rules on tokio's paused clock, over a simulated network that delays, loses and refuses
//! requests (`world`). A director draws from the seed what happens to them. Everything is
//! recorded in one trace (`trace`), and the checker (`check`) judges the history from the trace
//! alone: [`Violation`]s of rules (a) to (h).
//!
//! What it cannot see: the real child process and its process group (the fault suite and the
//! chaos command test those), the real HTTP stack (wake-ups are delivered in memory), and real
//! Azure (the store is a model of its lease rules, checked against Azurite by the integration
//! tests).
//!
//! ```
//! use leasehold::sim::{Config, run};
//!
//! let history = run(&Config::new(7).minutes(1));
//! assert!(history.violations.is_empty(), "{}", history.report());
//! assert_eq!(history.hash, run(&Config::new(7).minutes(1)).hash, "a seed replays exactly");
//! ```

mod body;
mod bounds;
mod check;
mod dice;
mod director;
pub(crate) mod gate;
mod history;
mod network;
mod process;
mod schedule;
mod sync;
mod trace;
mod warnings;
mod world;

pub use crate::crash_loop::CrashBackoff;
pub use crate::mutant::Mutant;
pub use bounds::{handoff_bound, liveness_bound};
pub use check::{Rules, TIMER_SLACK, Violation};
pub use history::{Config, Engine, History, Shape, combine_hashes, run};
pub use schedule::{Cast, Schedule, Step, Target, When, open_faults, regressions};
pub use trace::{Event, InLine, MemberId, What};

#[cfg(test)]
mod tests;
