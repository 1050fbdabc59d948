//! A group's lease held on several storage accounts: one lease per account (a *replica*), the
//! group's lease a majority of them, so that a leader survives one account (one region) down.
//! This module owns the rules that decide, from what a member knows of each replica, which
//! replicas count, whether the member leads and until when its body may run, which epoch its
//! term takes and where that epoch must still be written, and how a split vote ends. They are the
//! rules that `models/quorum` explores exhaustively, by calling these functions (docs/testing.md,
//! "The quorum model", which also lists what the model showed about them).
//!
//! Everything here is a plain value or a pure function: the shell hands in every instant (its
//! lease clock's `now`, the instant each request was sent, the instant its answer was heard),
//! every random draw, its wall clock in milliseconds and what each replica answered; nothing is
//! sent, kept or drawn here.
//!
//! # The rules
//!
//! Each function's docs name the rule it keeps.
//!
//! - **Counting.** A replica counts for a member while its lease there was won or renewed by a
//!   request whose success the member heard, that lease's deadline `t_s + L - M` has not passed,
//!   no later request on it was refused, and it is out of its lock-delay; a request whose
//!   outcome is unknown never counts (a member that gives up releases every replica one
//!   reached). The member leads while a majority `k = n/2 + 1` counts; its kill deadline is the
//!   k-th latest deadline of the replicas that count; a body starts only while that deadline is
//!   at least `G` away.
//! - **Lock-delay per replica.** A replica whose blob is missing (and so created again), carries
//!   no epoch or is younger than `L + M` by its own service clock counts for nobody until it is
//!   `L + M` old. A group is brand-new (no lock-delay) only if every replica's blob is missing
//!   and no replica holds member records.
//! - **Epochs.** A replica's epoch counts only if read at or after this member's acquire there.
//!   The new epoch is the largest of the counted replicas' largest + 1, the largest this member
//!   has seen + 1 and the wall clock in ms; it is written to every replica held, and to one won
//!   later before that one counts; the body starts once a majority confirmed the write.
//! - **One replica set.** Each replica's blob carries the set's fingerprint and an id of its
//!   own; only replicas with the member's fingerprint and distinct ids count (one account
//!   listed twice counts once).
//! - **No split vote that lasts.** Of the members that won a minority in a round, the one that
//!   holds the first replica in the set's order among those that answered retries the others
//!   once; every other one releases at once (as soon as a replica earlier than every one it won
//!   refused it) and waits a random pause growing with each split round. Nobody waits out a
//!   replica that does not answer where what it may answer decides nothing: the member that
//!   retries does so as long again as its round took after the refusal, and an attempt that
//!   cannot win a majority gives up as long again after.
//!
//! # What is here
//!
//! - [`ReplicaSet`]: the accounts in their fixed order, `n` of 1, 3 or 5, the majority
//!   `k = n/2 + 1`, and the set's [`Fingerprint`].
//! - [`Replica`]: what a member knows of one replica: the lease it holds there ([`Lease`], with
//!   the epoch it read there, [`Read`]), whether a request of unknown outcome reached it, the
//!   [`Stamp`] its blob carries and its lock-delay.
//! - [`count`] gives a [`Count`]: the replicas that count at an instant, whether the member
//!   leads, whether a majority confirmed the term's epoch, its kill deadline (the k-th latest,
//!   [`kth_latest`]) and whether a body may start.
//! - [`new_epoch`] and [`to_write`]: the term's epoch, and the replicas it must still be written
//!   to before they count.
//! - [`split_vote`], [`before_settled`] ([`yields_early`]) and [`split_pause`]: who retries a
//!   split vote, who yields (before its round settled, too), and how long it waits; [`to_release`]: what a member that gives up releases; [`brand_new`]: when a group
//!   may lead on blobs it has just created, without a lock-delay.
//!
//! A set of one is today's single account: one lease, `k = 1`, a blob without a stamp counts,
//! and the epoch is [`epoch::next`](crate::epoch::next) of what the blob carries, as for the
//! single lease; its lock-delay is the single lease's
//! ([`LockDelays`](crate::lock_delay::LockDelays)), handed in as [`Replica::young_until`].
//!
//! The broken rules a checker must catch ([`Mutants`]) are plain switches passed in, all off in
//! production; the others are broken around these calls by whoever checks them.

mod attempt;
mod messages;
mod rules;

pub use attempt::Attempt;
pub use messages::{Failed, Grounds, Input, Output, Reply, Request, Settings, Unheld, Why, Won};
pub use rules::{
    Count, Counted, Early, Fingerprint, Lease, Looked, Mutants, Outcome, ParseError, Read, Replica,
    ReplicaId, ReplicaSet, SIZES, SetError, Split, Stamp, before_settled, brand_new, count,
    kth_latest, new_epoch, split_pause, split_vote, to_release, to_write, yields_early,
};

#[cfg(test)]
mod tests;
