//! The preferred leader (docs/preferred.md): while a member leads, it watches the line for a
//! live member of strictly higher priority that has been a member for `preempt_after`, and hands
//! the lease over to the first such one ([`PreemptionWatch::due`]).
//!
//! "A member for `preempt_after`" is measured from its record's creation, by the service's
//! clock: the leader turns the record's age in a listing into an instant of its own when it
//! first sees it ([`PreemptionWatch::listed`]), so that neither its own restart nor the members'
//! clocks change it. Both times are whole seconds, and a member killed after it joined leaves a
//! record that looks alive until its record lease expires; so the member itself marks its record
//! once it has been a member for its own `preempt_after` by its own clock (`settled`), and the
//! leader preempts only for a marked record. The leader lists at the [`cadence`] to learn of
//! members before they are eligible, and every [`Pace::PROBE`](crate::pace::Pace::PROBE) around the moment a member it
//! knows of should mark its record ([`PreemptionWatch::next_list`]).
//!
//! `watch.rs` holds what the leader knows and its rules; [`lookout`] sequences one term's
//! listings, looks and probes as a state machine.

pub mod lookout;
#[cfg(test)]
mod tests;
mod watch;

pub use watch::{Preemption, PreemptionWatch, cadence, candidates};
