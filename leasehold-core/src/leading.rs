//! A leader's term as one machine, from the lease won to the lease given up, over the member's
//! exchange ([`crate::exchange`]), in the order rule 7 of docs/safety.md asks of a term:
//!
//! 1. the lead: the [`Holder`](crate::Holder) renewing the lease and the preferred leader's
//!    [`Lookout`](crate::preemption::lookout::Lookout) side by side while the body runs, the
//!    body told to stop once (a shutdown, a member due by preemption);
//! 2. beside the stopping body, from a stop request (a shutdown: a preemption names its member
//!    to the handoff instead), the handoff's [`Preparation`](crate::handoff::Preparation):
//!    the departure on its timer, with slots the choice of a successor and its notice;
//! 3. once the body is gone, renewing stops, and a body that outlived its kill is waited for
//!    until the lease it was last renewed under has surely expired (then nothing is given up);
//! 4. the lease given up as [`give_up`](crate::term::give_up) says: nothing, a release, or
//!    the [`Handoff`](crate::handoff::Handoff), which takes what was prepared, waits for it
//!    until its limit, or calls it off, and ends with its confirmation; the term ends with
//!    what became of the lease ([`Surrender`](crate::handoff::Surrender)).
//!
//! The order of these stages is the member's loop of terms' ([`Terms`](crate::term::Terms)),
//! lent to the machine for the term. The body enforces its own deadlines from the
//! [`Tenure`](crate::Tenure) this machine publishes (rule 1: its timers, not this machine's
//! answers, stop and kill it), so that a stuck request can never delay a kill.
//!
//! Nothing here sends a request or keeps time: the shell carries out each [`Output`] (its
//! requests under their tags), reports what came back as an [`Input`] with the instant, the
//! wall clock and a uniform draw, answers [`Grounds`] at the moment asked, and waits for what
//! [`Leading::awaits`] names.
//!
//! Its parts: the machine ([`Leading`]: each input routed, the stages in their order) in
//! machine.rs; the lead while the body runs in lead.rs; the preparation over the exchange in
//! preparing.rs; the handoff over the exchange in handing.rs; a choice of a successor over
//! the exchange, the preparation's or the handoff's, in choosing.rs; what the machine and its
//! shell say to each other in messages.rs.

mod choosing;
mod handing;
mod lead;
mod machine;
mod messages;
mod preparing;
#[cfg(test)]
mod tests;
mod winning;

pub use machine::Leading;
pub use messages::{
    Awaits, Ended, Grounds, Input, Mutants, Output, Reply, Request, Say, Settings, Stop,
};
