//! What one member of a group knows of itself and of its line, shared by its roles ([`Known`]:
//! the line of succession, this member's own record ([`Own`]: what it publishes, whether its
//! record says it, since when it is a member), the lock-delays, the group's count, the
//! wake-ups, an acquire without an answer, the credentials, a shutdown). The roles read and
//! change these through their `Grounds`; this module answers those questions once, at the
//! instant the member was stepped: [`OnTheLine`] for the record keeper, [`Campaigning`] for the
//! campaign and its rounds. [`Kinds`] names the store's data it handles.
//!
//! [`Member`] runs one member from its start to its end as one machine over one exchange: its
//! record keeper from its start until it leaves the line, its loop of terms (a campaign, a
//! term, a rest, until it is done), and a late acquire's settling; each role's requests under
//! the member's own tags, each answer routed to the role that sent it after the member took in
//! what it tells it ([`Reply`]: the store's data, not the role's reading of it).
//!
//! Nothing here keeps time or draws a number: the instant, the wall clock and the draws come
//! with each step, from the shell ([`Env`]).
//!
//! Its parts: what the member knows and the campaign's questions in known.rs; its own record
//! and the keeper's questions in own.rs; a term's questions in leader.rs; the store's data
//! types in kinds.rs; the machine ([`Member`]: its roles side by side, the routing of each
//! input and answer, what waits to be taken) in machine.rs; each role stepped and its outputs
//! carried out in roles.rs; what each store answer changes of the member in replies.rs; on
//! several replicas, its record requests and listings sent to every replica and their answers
//! made one in fan.rs; what the member and its shell say to each other in messages.rs.

mod anchor;
mod fan;
mod kinds;
mod known;
mod leader;
mod machine;
mod messages;
mod own;
mod replies;
mod roles;
mod strays;
#[cfg(test)]
mod tests;

pub use kinds::{Kinds, Publish};
pub use known::{Campaigning, Kept, Known, Note};
pub use machine::Member;
pub use messages::{
    Awaits, Confirming, Env, Input, Key, Listing, Mutants, Output, Reply, Request, Role, Say,
    Settings, Term,
};
pub use own::{OnTheLine, Own};
