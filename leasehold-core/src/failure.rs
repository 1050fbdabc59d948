//! How the protocol treats a request that storage failed: the store's own errors say which
//! kind of failure each is ([`StoreFailure`]), and the roles decide by that kind alone.

/// How the protocol treats a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Failure {
    /// Somebody else holds the lease (acquire only).
    Held,
    /// Our lease is gone for good: someone else may lead already (rule 2).
    LeaseLost,
    /// The credentials or their permissions were refused.
    Denied,
    /// The container or blob does not exist.
    Missing,
    /// Worth retrying: timeouts, throttling, 5xx, no connection.
    Transient,
    /// A request the service will keep refusing (bad input, unsupported).
    Permanent,
}

/// An error of a store, as the protocol sees it: the kind of failure it is. The error itself
/// travels with the roles' events and actions untouched, for the shell to log.
pub trait StoreFailure: Clone + std::fmt::Debug {
    /// The kind of failure this is.
    fn failure(&self) -> Failure;

    /// Whether a conditional write was refused because the blob changed since the ETag it was
    /// conditional on (412 `ConditionNotMet`).
    fn condition_failed(&self) -> bool {
        false
    }

    /// Whether the service itself answered with this error (an HTTP status), rather than the
    /// request failing on its way or in the client: only such an answer says for sure that a
    /// request was not applied.
    fn service_answered(&self) -> bool {
        false
    }

    /// Whether a delete without a lease id was refused because the blob is leased (412
    /// `LeaseIdMissing`).
    fn lease_id_missing(&self) -> bool {
        false
    }

    /// Whether a request under our lease failed because someone else may lead already (rule 2
    /// of docs/safety.md): the blob is gone (404), another lease id holds it or it was broken
    /// (409), or its condition failed (412). Any other failure is retried until the stop
    /// deadline (rule 3).
    fn loses_lease(&self) -> bool {
        matches!(
            self.failure(),
            Failure::LeaseLost | Failure::Missing | Failure::Held
        )
    }
}
