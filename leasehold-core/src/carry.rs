//! A member's requests carried out as store calls: [`carry`] turns one
//! [`member::Request`](crate::member::Request), with what the member knows ([`View`]), into the
//! [`store::Call`](crate::store::Call)s it is made of, one after the other ([`Carrying`]), and
//! their [`Return`](crate::store::Return)s into the member's
//! [`Reply`](crate::member::Reply). Most requests are one call; a blob created again lists the
//! members first unless this member saw it led (docs/safety.md, "Recovery from anything"); the
//! keeper's tidying deletes each long-dead record, each conditional on its ETag as listed; a
//! listing covers the slot blobs only when the group has slots; the confirmation of a handoff
//! reads the successor's record when it asks to, then the blob, within one limit, and the
//! member judges both (docs/succession.md, "The handoff").
//!
//! The store's types and the member's are tied by [`Carry`]: the member's
//! [`Kinds`](crate::member::Kinds) and the store's [`Types`](crate::store::Types) stay two
//! traits (a member handles a notice as its choice wrote it, the store the notice it writes;
//! the store has types a member never sees: the holder metadata, a lease state), and
//! `Carry::Store` says which of them are the same type, and how a member's data becomes the
//! store's (the holder metadata, a notice, a record's lease id).
//!
//! Each call has a limit ([`Carrying::limit`]): a driver that has no answer by then answers
//! with the call's timeout ([`Call::failed`](crate::store::Call::failed) with
//! [`Failed::timed_out`](crate::campaign::Failed::timed_out)) and goes on, as the shell cuts
//! each request at its limit (docs/safety.md, rule 4). What is not a store call (a probe, a
//! wake-up: the HTTP client's) or not translated (the renew of a replica other than the
//! first) the translation says so ([`Start::Http`], [`Start::NotCarried`]).
//!
//! Its parts: the ties of a member's data to the store's and what a request is carried out
//! with in view.rs; a request on its way, each return into the next call or the reply, in
//! carrying.rs; where each request starts in start.rs; a campaign's requests in campaign.rs;
//! the record keeper's in keeper.rs; the leader's in lead.rs, its handoff's in handoff.rs.

mod campaign;
mod carrying;
mod handoff;
mod keeper;
mod lead;
mod start;
#[cfg(test)]
mod tests;
mod view;

pub use carrying::{Carrying, Start, Step};
pub use start::carry;
pub use view::{CallOf, Carry, Fail, ReturnOf, View};
