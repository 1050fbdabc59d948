//! Why an elector cannot run: one typed variant per failure a program may want to tell apart.

use crate::config::ConfigError;
use crate::store::StoreError;

/// Why an [`Elector`](super::Elector) gave up. Storage that fails
/// while the elector runs is not an error: it loses leadership safely and keeps trying.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration breaks a rule (one line naming the key, the value and the rule).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Storage refused the credentials or their permissions before it ever accepted them.
    #[error("storage refused the credentials at start-up ({0}); {hint}", hint = .0.denied_hint())]
    Denied(#[source] StoreError),
    /// The container does not exist, and `[storage].create_if_missing = false`.
    #[error(
        "container {0:?} does not exist and [storage].create_if_missing = false; create it, or \
         set create_if_missing = true"
    )]
    ContainerMissing(String),
    /// The lease blob does not exist, and `[storage].create_if_missing = false`.
    #[error(
        "blob {0:?} does not exist and [storage].create_if_missing = false; create it, or set \
         create_if_missing = true"
    )]
    BlobMissing(String),
    /// Storage could not be reached to prepare the lease blob (connect tries once).
    #[error("cannot reach the lease blob: {0}")]
    Unreachable(#[source] StoreError),
    /// The storage client could not be set up (e.g. the `ca_file` certificates).
    #[error("{0}")]
    Client(#[source] StoreError),
    /// The storage client of a replica (`[[storage.replica]]`, counted from 1) could not be set
    /// up.
    #[error("[storage.replica {replica}]: {source}")]
    ReplicaClient {
        /// Which replica, in the set's order from 1.
        replica: usize,
        /// Why.
        #[source]
        source: StoreError,
    },
    /// The leader's task was still running when its lease had surely expired: it did not end
    /// when cancelled, and could not be aborted at the kill deadline because it blocks its
    /// thread. Another instance may lead now, beside it; the epoch is the defence (its
    /// downstream writes carry the smaller one). The process should exit.
    #[error(
        "the task of the term with epoch {epoch} did not stop by its kill deadline (it blocks its \
         thread, so it cannot be aborted), and its lease has expired since; another instance may \
         lead beside it now"
    )]
    TaskDidNotStop {
        /// The epoch of the term whose task did not stop.
        epoch: u64,
    },
}
