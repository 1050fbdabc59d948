//! A member's requests carried out as store calls: [`carry`] turns one
//! [`member::Request`](crate::member::Request), with what the member knows ([`View`]), into the
//! [`store::Call`](crate::store::Call)s it is made of, one after the other ([`Carrying`]), and
//! their [`Return`](crate::store::Return)s into the member's
//! [`Reply`](crate::member::Reply). Most requests are one call; a blob created again lists the
//! members first unless this member saw it led (docs/safety.md, "Recovery from anything"); the
//! keeper's tidying deletes each long-dead record, each conditional on its ETag as listed; a
//! listing covers the slot blobs only when the group has slots.
//!
//! The store's types and the member's are tied by [`Carry`]: the member's
//! [`Kinds`](crate::member::Kinds) and the store's [`Types`](crate::store::Types) stay two
//! traits (a member handles a notice as its choice wrote it, the store the notice it writes;
//! the store has types a member never sees: the holder metadata, a lease state), and
//! `Carry::Store` says which of them are the same type, and how a member's data becomes the
//! store's (the holder metadata).
//!
//! Each call has a limit ([`Carrying::limit`]): a driver that has no answer by then answers
//! with the call's timeout ([`Call::failed`](crate::store::Call::failed) with
//! [`Failed::timed_out`](crate::campaign::Failed::timed_out)) and goes on, as the shell cuts
//! each request at its limit (docs/safety.md, rule 4). What is not a store call (a probe, a
//! wake-up: the HTTP client's) or not translated yet (the handoff's own requests, a standby)
//! the translation says so ([`Start::Http`], [`Start::NotCarried`]).
//!
//! Its parts: the ties of a member's data to the store's and what a request is carried out
//! with in view.rs; a request on its way, each return into the next call or the reply, in
//! carrying.rs; where each request starts in start.rs; a campaign's requests in campaign.rs;
//! the record keeper's in keeper.rs; the leader's in lead.rs.

mod campaign;
mod carrying;
mod keeper;
mod lead;
mod start;
#[cfg(test)]
mod tests;
mod view;

pub use carrying::{Carrying, Start, Step};
pub use start::carry;
pub use view::{CallOf, Carry, Fail, ReturnOf, View};
