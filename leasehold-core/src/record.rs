//! A member's record keeper: when it renews its member record, lists the line and, while it
//! leads, deletes the records of members long dead (docs/succession.md). [`Keeper`] is one
//! state machine over the [`exchange`](crate::exchange): each store request it asks for goes
//! out under a tag of its own, its answer comes back by tag; [`Rounds`] says when each is due,
//! from the instants and the draws the shell hands in; what it reads and changes of the
//! member's line goes through [`Grounds`]. Its vocabulary (requests, inputs, outputs, what
//! ends its wait) is in record/messages.rs.
//!
//! The cadence, by rule: the record is renewed every [`Pace::RECORD_RENEW`](crate::Pace::RECORD_RENEW) (its lease is
//! [`Pace::RECORD_LEASE`](crate::Pace::RECORD_LEASE): two renews may fail before the member counts as dead); the line is
//! listed every [`Pace::LIST_EVERY`](crate::Pace::LIST_EVERY), by the leader and a member that polls every
//! [`Pace::LEADER_LIST_EVERY`](crate::Pace::LEADER_LIST_EVERY) (nothing on the lease blob tells them that a member joined ahead
//! of them); each period is stretched by up to `POLL_JITTER` so that members do not list in
//! step; and a member that began a term lists once [`Pace::TERM_START_QUIET`](crate::Pace::TERM_START_QUIET) into it.
//!
//! What each answer to a request on the record means is here too ([`after_delete`],
//! [`after_create`], [`after_acquire`], [`after_renew`]): a record is created anew at each join,
//! so that its creation time is when the member joined; a record held by a live instance of the
//! same identity makes this one a duplicate, out of line; a record gone is joined again; a
//! record lease that lapsed is taken back, keeping the place in line.

mod answer;
mod keeper;
mod messages;
mod rounds;

pub use answer::{Join, Outcome, Reply, after_acquire, after_create, after_delete, after_renew};
pub use keeper::Keeper;
pub use messages::{Awaits, Facts, Grounds, Input, Keep, Output, Request, Say};
pub use rounds::{Kept, Rounds};
