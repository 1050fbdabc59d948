//! An acquire that got no answer in time ([`LateAcquire`]): never resent, its answer awaited in
//! the background ([`settle`]), a late success released at once; the campaign sits it out until
//! what that request did is known, or until the lease it may have taken has surely expired
//! (the core's campaign decides how long). The settling is a task of its own: it outlives a
//! campaign that a stop ended, and still releases a late success then.

use crate::clock::Clock;
use crate::elector::observe::{LeaseOp, Observer};
use crate::elector::request::timed;
use crate::fmt::human;
use crate::store::{LeaseId, LeaseStore, StoreError};
use crate::timing::Timing;
use leasehold_core::exchange::{Answer, Tags};
use leasehold_core::late::{Input, Output, Said, Settled, Settling};
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
/// write the epoch before its own stop deadline. The core's [`Settling`] decides; this carries
/// out its release and logs what it says.
pub(super) async fn settle<S: LeaseStore>(
    clock: Clock,
    store: Arc<S>,
    observer: Arc<dyn Observer>,
    timing: Timing,
    id: LeaseId,
    sent: Instant,
    mut request: JoinHandle<Result<(), StoreError>>,
) -> Settled {
    let mut tags = Tags::default();
    let acquire = tags.fresh();
    let mut settling = Settling::begin(acquire, sent, &timing);
    let mut input = match answer_within(clock, &mut request, sent + timing.duration).await {
        Some(answer) => Input::Answer(Answer {
            tag: acquire,
            sent,
            answer,
        }),
        None => Input::Timer,
    };
    loop {
        let mut next = None;
        for output in settling.handle(clock.now(), input, &mut tags) {
            match output {
                Output::Send(release) => {
                    let (limit, sent) = (release.request.limit, clock.now());
                    let released = store.release(id);
                    let answer = timed(clock, &*observer, LeaseOp::Release, limit, released).await;
                    next = Some(Input::Answer(Answer {
                        tag: release.tag,
                        sent,
                        answer,
                    }));
                }
                // (`answer_within` dropped it.)
                Output::Forget(_) => {}
                Output::Say(said) => say(said),
                Output::Settled(settled) => return settled,
            }
        }
        input = next.expect("the settling awaits only its release's answer");
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

/// The log line of what the settling says.
fn say(said: Said<StoreError>) {
    match said {
        Said::NoAnswer => {
            tracing::debug!("no answer to the late acquire within the lease duration");
        }
        Said::Failed {
            refused,
            late,
            error,
        } => say_failed(refused, late, &error),
        Said::Releasing { late } => tracing::warn!(
            late = %human(late),
            "the acquire that got no answer in time had taken the lease; releasing it at once (storage answers this instance too late for it to lead)"
        ),
        Said::Unreleased { error, left } => say_unreleased(error, left),
    }
}

/// The late acquire failed so (`refused`: the service refused it), `late` after its send.
fn say_failed(refused: bool, late: std::time::Duration, error: &StoreError) {
    let what = match refused {
        true => "the late acquire was refused",
        false => "the late acquire may have been applied",
    };
    tracing::debug!(late = %human(late), error = %error, "{what}");
}

/// The release of a late success got no confirmation (`error`: its answer, if any).
fn say_unreleased(error: Option<StoreError>, left: std::time::Duration) {
    let error = error.map(|e| e.to_string()).unwrap_or_default();
    tracing::warn!(
        error = %error,
        "no answer to that release either; if it did not reach storage, the lease expires unrenewed within {}",
        human(left)
    );
}
