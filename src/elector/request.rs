//! One storage request of the elector: sent with a hard limit (rule 4: never longer than the
//! time left before the deadline it serves), and its outcome logged and told to the observer.

use super::observe::{LeaseOp, Observer};
use crate::clock::Clock;
use crate::store::StoreError;
use std::future::Future;
use tokio::time::Instant;

/// Runs one store request with a hard limit (`limit` on `clock`), and records its outcome.
pub(super) async fn timed<T>(
    clock: Clock,
    observer: &dyn Observer,
    op: LeaseOp,
    limit: Instant,
    request: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let allowed = limit.saturating_duration_since(clock.now());
    let result = match tokio::time::timeout_at(clock.timer_instant(limit), request).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::TimedOut(allowed)),
    };
    let elapsed = started.elapsed();
    // Under the store's name: a request is the store's doing, and the elector's own target is
    // kept for the deadlines the fault tests read (`log_deadline`).
    match &result {
        Ok(_) => tracing::trace!(
            target: "leasehold::store",
            op = op.as_str(),
            ?elapsed,
            "lease operation succeeded"
        ),
        Err(e) => tracing::debug!(
            target: "leasehold::store",
            op = op.as_str(),
            ?elapsed,
            error = %e,
            "lease operation failed"
        ),
    }
    observer.lease_op(op, elapsed, result.as_ref().err());
    result
}
