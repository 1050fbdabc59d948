//! An in-memory [`LeaseStore`] for unit tests: Azure's lease rules on tokio time, plus scripted
//! faults (delay, failure, hang) per operation. Integration tests use a real Azurite instead.
//!
//! For the simulator it also models what a storage account goes through: a blob deleted (and
//! created again by `prepare`), metadata no leader wrote, a service clock that runs faster than
//! its clients' ([`ServiceClock`]), and, per client, a network ([`Network`]) that says how
//! long each request travels each way and what becomes of it. On such a network a request is
//! applied by a task of the store's own, once it has arrived, whatever became of its sender
//! meanwhile (a crashed client's request still lands); its answer may be late or lost.
//!
//! A synchronous simulator, with no runtime, hands it the store's calls as plain data instead
//! ([`MemoryStore::apply`]): each judged at the instant it is given, by the same rules
//! (`rules.rs`), with no network and no scripted fault.

mod apply;
mod network;
mod requests;
mod rules;
mod state;
mod store;

#[cfg(test)]
pub(crate) use super::Op;
#[cfg(any(test, feature = "test-util"))]
pub(crate) use apply::op_of;
pub(crate) use network::{Applied, Fate, Network, ServiceClock, Trip};
pub use state::Behaviour;
#[cfg(any(test, feature = "test-util"))]
pub(crate) use store::BlobCopy;
pub use store::MemoryStore;
