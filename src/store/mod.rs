//! The lease store: the only way the rest of leasehold talks to storage.
//!
//! The store is the handful of blob operations leader election needs (`lease`): the lease
//! blob's lease and metadata (`blob`, `metadata`), the member records beside it (`member`), and
//! with slots the slot blobs `<blob>.slots/<i>`, each a lease blob of its own. Of those, the
//! public [`LeaseStore`] has the lease's own requests; the rest is crate-private. [`AzureStore`]
//! implements it over the Azure SDK (all SDK types stay in its file and in `identity`, its Entra
//! ID tokens), for the [`StorageTarget`] it is given; `MemoryStore` (feature `test-util`) keeps
//! the blob in memory for tests. The store does no retries and no timeouts of its own: the
//! elector owns time, because only it knows how long a request may take before the stop
//! deadline (design rule 4). The same requests as the core's plain data (`call`: a call
//! carried out on a store, or judged synchronously by the memory store) are for a role that says
//! what to send and a shell that sends it.

mod azure;
#[cfg(test)]
mod azurite_tests;
mod blob;
mod call;
mod error;
mod identity;
mod kinds;
mod lanes;
mod lease;
mod member;
#[cfg(any(test, feature = "test-util"))]
pub(crate) mod memory;
mod metadata;
mod op;
pub(crate) mod target;
mod transport;

pub use crate::secret::Secret;
pub use azure::AzureStore;
#[cfg(feature = "daemon")]
pub(crate) use blob::LeaseCheck;
pub use blob::LeaseId;
pub(crate) use blob::{BlobState, ETag, Holder, LeaseState, SlotRecord};
pub(crate) use call::{Call, Return, carry_out};
pub use error::{Failure, StoreError};
pub(crate) use kinds::Shell;
#[cfg(any(test, feature = "test-util"))]
pub(crate) use lease::GroupStore;
pub use lease::LeaseStore;
pub(crate) use member::{Member, MemberKey, MemberRecord, member_name_problem};
#[cfg(feature = "test-util")]
pub use memory::{Behaviour, MemoryStore};
#[cfg(any(test, feature = "test-util"))]
pub(crate) use metadata::META_EPOCH;
pub(crate) use metadata::rfc3339;
#[cfg(any(test, feature = "test-util"))]
pub(crate) use metadata::{META_ACQUIRED_AT, META_SLOTS};
#[cfg(feature = "test-util")]
pub use op::Op;
#[cfg(not(feature = "test-util"))]
pub(crate) use op::Op;
pub use target::{
    Credential, EntraKind, IdentityEndpoint, InvalidTarget, StorageTarget, TokenSource,
};
