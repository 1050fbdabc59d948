//! The synchronous engine (issue 42): a history's members as core [`Member`]s driven with no
//! runtime against the memory store's rules (`MemoryStore::apply`), on virtual instants, every
//! draw from the seed; traced into the same [`trace`](super::trace) the checker judges, with
//! the tokio engine's director, network, bodies and guards as events on one queue.
//! The store's data as a member handles it is the store's (`store::Shell`, as the shell's).
//! driver.rs: the queue, the members stepped and their store calls carried over their links
//! (`Sim`); lives.rs: their processes' lives and wake-ups; body.rs: their bodies and guards;
//! director.rs: the director's faults as events; prepare.rs: each process's start-up prepare,
//! as the daemon's; replicas.rs: a group on a replica set, its stores and their regions'
//! faults; script.rs: a scripted schedule's steps; play.rs: one history played
//! ([`play`]); tests.rs, replica_tests.rs.
//!
//! [`Member`]: leasehold_core::member::Member

mod bodies;
mod body;
mod director;
mod driver;
mod lives;
mod play;
mod prepare;
#[cfg(test)]
mod replica_tests;
mod replicas;
mod script;
mod state;
#[cfg(test)]
mod tests;

pub(super) use play::play;
