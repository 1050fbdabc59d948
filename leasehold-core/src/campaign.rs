//! A member's campaign as one state machine: the candidate ([`Candidate`](crate::Candidate))
//! and whichever of its rounds is running (an acquisition
//! [`Attempt`](crate::attempt::Attempt), a poller's [`PollRound`](crate::slots::PollRound) of
//! slots and its attempts, a watcher's [`Round`](crate::watch::Round), a waiting member's
//! [`WaitRound`](crate::slots::WaitRound)), composed into one stream of outputs over the
//! [`exchange`](crate::exchange): store requests under their tags, what ends the wait
//! ([`Awaits`]: the answers awaited, the one instant to be woken at, a stop, a wake-up, a
//! placement), and what only the shell can do (ask the body, listen for a placement, sit a late
//! acquire out, log, show the line). It owns what the campaign remembers between rounds: the
//! watch of the lease blob and of the record ahead.
//!
//! The shell calls [`Campaign::handle`] with each input as it comes (an answer by tag with
//! the instant its request was sent, the timer, a stop, a wake-up, a placement, the body's
//! answer) and carries the outputs out in order. What the rounds ask of the member (its line,
//! its lock-delays, its lease id, a shutdown, the wall clock, a random draw) it answers through
//! [`Grounds`] at the moment asked, so that the order of those questions, and of the draws,
//! is this module's: a simulated history depends on it.
//!
//! A stop cuts only the pauses between attempts, never an attempt (rule 7 of docs/safety.md:
//! an acquire cut mid-flight may have taken the lease on the server).
//!
//! Its parts: the machine ([`Campaign`]: the candidate, what it waits for, the routing of each
//! input) in machine.rs; the rounds run (how each starts, steps and ends, and what they
//! remember) in round.rs; an attempt on its way with its requests' tags in trying.rs; the
//! requests in flight under their tags in flight.rs; what the campaign and its shell say to
//! each other in messages.rs.

mod flight;
mod machine;
mod majority;
mod messages;
mod round;
#[cfg(test)]
mod tests;
mod trying;

pub use machine::Campaign;
pub use messages::{
    Awaits, End, Failed, Grounds, Input, Mutants, Output, Reply, Request, Say, Settings, Won,
};
