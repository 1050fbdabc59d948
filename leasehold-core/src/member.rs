//! What one member of a group knows of itself and of its line, shared by its roles ([`Known`]:
//! the line of succession, this member's own record ([`Own`]: what it publishes, whether its
//! record says it, since when it is a member), the lock-delays, the group's count, the
//! wake-ups, an acquire without an answer, the credentials, a shutdown). The roles read and
//! change these through their `Grounds`; this module answers those questions once, at the
//! instant the member was stepped: [`OnTheLine`] for the record keeper, [`Campaigning`] for the
//! campaign and its rounds. [`Kinds`] names the store's data it handles.
//!
//! Nothing here keeps time or draws a number: the instant, the wall clock and the draws come
//! with each step, from the shell.

mod kinds;
mod known;
mod own;
#[cfg(test)]
mod tests;

pub use kinds::{Kinds, Publish};
pub use known::{Campaigning, Kept, Known, Note};
pub use own::{OnTheLine, Own};
