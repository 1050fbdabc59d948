//! The rules of a group's lease held on a majority of storage accounts (one lease per account,
//! a quorum of them the group's lease), written as a small model and explored exhaustively.
//!
//! Members (2 or 3) and replicas (3 accounts, and a fourth that only a member with a foreign
//! set lists) live on a discrete clock of ticks. Each step is one thing that can happen: a
//! member sends a request to one replica (answered, applied with its answer lost, or not
//! applied) and does what its new view allows (computes its epoch, writes it, starts its
//! body), or gives up; a replica is wiped or restored from an old copy; a member freezes or
//! thaws; a tick passes.
//! The search visits every state the rules allow within the bounds of a [`Config`] and checks
//! in each that at most one body runs and that every body's epoch is above every earlier
//! body's. [`Mutant`] breaks one rule at a time: the search must then find a violation.
//!
//! - [`rules`]: the configuration, the bounds and the broken rules.
//! - [`state`]: replicas, members, their holds and bodies; what a member counts.
//! - [`step`]: the actions and what each does to a state.
//! - [`mapping`]: the model's ticks and holds as `leasehold_core`'s instants and replicas, and
//!   the calls of the core's rules (`leasehold_core::quorum`) that decide what a member counts,
//!   its kill deadline, its epoch, where it writes, what it releases and who yields a split
//!   vote: the model explores the core's code, not a copy of it.
//! - [`search`]: the breadth-first search, the properties, the faults reached, the traces.
#![forbid(unsafe_code)]

pub mod mapping;
pub mod rules;
pub mod search;
pub mod state;
pub mod step;

pub use rules::{Config, Fault, Mixed, Mutant};
pub use search::{Outcome, Reached, Report, Step, Violation, explore};
