//! The protocol of [leasehold](https://crates.io/crates/leasehold) without I/O: what a member
//! of a group does and when, as plain data and state machines, driven by whoever carries out
//! their requests. The `leasehold` crate drives it on tokio against Azure Blob Storage; its
//! simulator drives it on virtual time. This crate sends nothing, keeps no clock, draws no
//! random numbers and spawns nothing, so a history replays exactly from its inputs.
//!
//! - [`timing`]: the user's five settings ([`Timing`]), their rules, and a term's deadlines.
//! - [`pace`]: the one timing table, every duration the protocol uses, each with its reason.
//! - [`campaign`]: a member's campaign as one machine, the candidate and the round it runs.
//! - [`candidate`]: a member that does not lead, polling or watching until it wins a term.
//! - [`watch`]: a candidate that does not poll, reading the lease blob every watch period.
//! - [`holder`]: a member that holds the lease, renewing it until it is lost or expires.
//! - [`leading`]: a leader's term as one machine, from the lease won to the lease given up.
//! - [`line`](mod@line): the line of succession as one member knows it, and its place in it.
//! - [`member`]: what a member knows of itself and its line, shared by its roles.
//! - [`record`]: a member's record keeper: when it renews its record, lists and tidies.
//! - [`preemption`]: a leader watching for a preferred member to hand the lease over to.
//! - [`choice`]: a holder handing over, choosing its successor and writing the notice.
//! - [`confirmation`]: a holder that handed the lease over, until its successor took it.
//! - [`handoff`]: the sends of one handoff in their order, from the body's death to its end.
//! - [`term`]: why a term ends, rule 1 for its body, and what rule 7 does once it is gone.
//! - [`slots`]: the group's count of slots, and a waiting member's watch of the record ahead.
//! - [`wake`]: which wake-ups a member accepts, and the epoch a handoff's wake-up reserves.
//! - [`attempt`]: one acquisition attempt, the acquire and the epoch written under it.
//! - [`late`]: an acquire that got no answer in time, what its late answer means.
//! - [`lock_delay`]: a blob found deleted, or created again, is a lock-delay, not a free lease.
//! - [`epoch`]: the fencing token of a term, computed in one place.
//! - [`quorum`]: a lease held on several storage accounts: which replicas count, the leader's
//!   kill deadline, the term's epoch, one replica set, split votes.
//! - [`backoff`]: the doubling pauses of whatever is retried.
//! - [`room`]: lists a machine keeps for their room between its steps.
//! - [`blob`]: what the protocol reads of a read of the lease blob, whatever the store.
//! - [`exchange`]: what a role and its shell say: requests under tags, answers, the timer.
//! - [`failure`]: the kinds of failure a store's errors are, by which the roles decide.
//! - [`store`]: the store's requests as plain data, and their answers, for a shell to carry out.
//!
//! The rules these keep are stated in the repository's docs/safety.md.

#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![warn(clippy::too_many_lines, clippy::cognitive_complexity)]

pub mod attempt;
pub mod backoff;
pub mod blob;
pub mod campaign;
pub mod candidate;
pub mod carry;
pub mod choice;
pub mod confirmation;
pub mod epoch;
pub mod exchange;
pub mod failure;
pub mod handoff;
pub mod holder;
pub mod late;
pub mod leading;
pub mod line;
pub mod lock_delay;
pub mod member;
pub mod pace;
pub mod preemption;
pub mod quorum;
pub mod record;
pub mod room;
pub mod slots;
pub mod store;
pub mod term;
#[cfg(test)]
mod testing;
pub mod timing;
pub mod wake;
pub mod watch;

pub use candidate::{Candidate, Place};
pub use confirmation::Confirmation;
pub use failure::{Failure, StoreFailure};
pub use holder::{Holder, Tenure};
pub use line::Line;
pub use pace::Pace;
pub use timing::{Deadline, Moment, Timing, TimingError};
