//! An acquire that got no answer in time ([`LateAcquire`]): never resent, its answer awaited in
//! the background ([`settle`]), a late success released at once; the campaign sits it out until
//! what that request did is known, or until the lease it may have taken has surely expired
//! (the core's campaign decides how long). The settling is a task of its own: it outlives a
//! campaign that a stop ended, and still releases a late success then.

use crate::clock::Clock;
use crate::elector::observe::{LeaseOp, Observer};
use crate::elector::request::timed;
use crate::fmt::human;
use crate::store::{Failure, LeaseId, LeaseStore, StoreError};
use crate::timing::Timing;
use leasehold_core::late::{self, AfterLate, LateAnswer, Settled};
use std::sync::Arc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// An acquire that got no answer within the request timeout. Its request may well have reached
/// the server and taken the lease there: answers can be slow while requests are not. Sending it
/// again would only renew that lease for another `L`, and an instance whose every answer comes
/// late would then hold the lease for ever without ever leading. So it is never resent: its
/// answer is awaited in the background ([`settle`]), a late success is released at once, and
/// the elector stays out of the election until what that request did is known, or until the
/// lease it may have taken has surely expired (`sent + L`).
pub(crate) struct LateAcquire {
    /// When the request was sent: a lease it took cannot outlive `sent + L` on the server
    /// (unless the request itself reached the server late, and then it expires unrenewed `L`
    /// after it arrived).
    pub(super) sent: Instant,
    /// Ends with what became of that lease.
    pub(super) settled: JoinHandle<Settled>,
}

/// Awaits the answer to an acquire that got none in time (`request`), at most until the lease it
/// may have taken would have expired (`sent + L`), and releases that lease at once if it was
/// taken: this instance could not have led anyway, since it learnt of its lease too late to
/// write the epoch before its own stop deadline.
pub(super) async fn settle<S: LeaseStore>(
    clock: Clock,
    store: Arc<S>,
    observer: Arc<dyn Observer>,
    timing: Timing,
    id: LeaseId,
    sent: Instant,
    mut request: JoinHandle<Result<(), StoreError>>,
) -> Settled {
    let Some(answer) = answer_within(clock, &mut request, sent + timing.duration).await else {
        tracing::debug!("no answer to the late acquire within the lease duration");
        return Settled::MayHold;
    };
    let late = human(clock.now().saturating_duration_since(sent));
    match (late::answered(meaning(&answer)), answer) {
        (AfterLate::Release, _) => {
            release_at_once(clock, &*store, &*observer, &timing, id, sent, &late).await
        }
        (AfterLate::Settled(settled), Err(e)) => {
            let what = match settled {
                Settled::NotTaken => "the late acquire was refused",
                _ => "the late acquire may have been applied",
            };
            tracing::debug!(late = %late, error = %e, "{what}");
            settled
        }
        (AfterLate::Settled(settled), Ok(())) => settled,
    }
}

/// The answer to `request` if it comes by `until`; else it is aborted (a lease it took has
/// expired by then).
async fn answer_within(
    clock: Clock,
    request: &mut JoinHandle<Result<(), StoreError>>,
    until: Instant,
) -> Option<Result<(), StoreError>> {
    tokio::select! {
        biased;
        joined = &mut *request => {
            Some(joined.unwrap_or_else(|e| Err(StoreError::Client(e.to_string()))))
        }
        () = clock.sleep_until(until) => {
            request.abort();
            None
        }
    }
}

/// What a late answer means: an error status other than a transient one says the request was
/// refused, not applied.
fn meaning(answer: &Result<(), StoreError>) -> LateAnswer {
    match answer {
        Ok(()) => LateAnswer::Taken,
        Err(e @ StoreError::Status { .. }) if e.failure() != Failure::Transient => {
            LateAnswer::Refused
        }
        Err(_) => LateAnswer::Unknown,
    }
}

/// Releases the lease a late acquire (sent at `sent`, answered `late` after) took: what became
/// of it.
async fn release_at_once<S: LeaseStore>(
    clock: Clock,
    store: &S,
    observer: &dyn Observer,
    timing: &Timing,
    id: LeaseId,
    sent: Instant,
    late: &str,
) -> Settled {
    tracing::warn!(
        late,
        "the acquire that got no answer in time had taken the lease; releasing it at once (storage answers this instance too late for it to lead)"
    );
    let limit = clock.now() + timing.request_timeout();
    let released = timed(clock, observer, LeaseOp::Release, limit, store.release(id)).await;
    if let Err(e) = &released {
        tracing::warn!(
            error = %e,
            "no answer to that release either; if it did not reach storage, the lease expires unrenewed within {}",
            human((sent + timing.duration).saturating_duration_since(clock.now()))
        );
    }
    late::released(released.is_ok())
}
