//! The elector: winning the lease, writing the epoch, keeping the lease, and giving it back.
//!
//! It owns the timing rules of the safety model (design section 4). Everything is measured from
//! `t_s`, the instant on the lease clock ([`crate::clock`]: monotonic, plus any machine suspend) at
//! which the last successful acquire or renew request was *sent*:
//! the server cannot start its lease clock before that, so the lease cannot expire on the server
//! before `t_s + L`. From `t_s` follow the two instants in [`Deadline`]: the stop signal goes to
//! the child at `t_s + L - M - G` and its process group is killed at `t_s + L - M`.
//!
//! A term of leadership goes: [`Elector::campaign`] (follower: acquire every jittered
//! `acquire_interval`, then epoch + 1 written under the lease with `If-Match`, or
//! [`first_epoch`] on a blob without one; an acquire that got no answer in time is never resent,
//! and a late success is released) -> [`Keeper`]
//! (renew every `R`; transient failures retried quickly until the stop deadline; a definitive
//! failure reported at once) -> [`Elector::release`], called by the daemon only once the child is
//! dead. The keeper publishes a [`Tenure`] on a watch channel; the child supervisor enforces its
//! deadlines with its own timers, so a stuck storage call can never delay a kill.

use crate::clock;
use crate::config::Timing;
use crate::store::{Failure, Holder, LeaseId, LeaseStore, StoreError};
use crate::telemetry::{LeaseOp, Telemetry};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// The instants that bound a term, all derived from one send instant `t_s`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline {
    /// `t_s`: when the last successful acquire or renew was sent.
    pub sent: Instant,
    /// `t_s + L - M - G`: the child gets its stop signal no later than this.
    pub stop_at: Instant,
    /// `t_s + L - M`: the child's process group is SIGKILLed no later than this.
    pub kill_at: Instant,
}

impl Deadline {
    pub fn from_sent(sent: Instant, t: &Timing) -> Self {
        let kill_at = sent + t.duration - t.safety_margin;
        Self {
            sent,
            stop_at: kill_at - t.stop_timeout,
            kill_at,
        }
    }

    /// Logs, at debug level, the kill deadline of a lease just won or renewed, as
    /// CLOCK_MONOTONIC nanoseconds. This is for the fault tests (tests/faults.rs) and the chaos
    /// command: they compare it with the witness child's CLOCK_MONOTONIC history to check that
    /// no child outlived its daemon's deadline *exactly*. A bound guessed from the fault times
    /// cannot do that, because a late renew success moves the deadline by an amount only the
    /// daemon knows.
    fn log(&self, epoch: u64) {
        tracing::debug!(
            epoch,
            kill_at_mono_ns = monotonic_ns(self.kill_at),
            "lease deadline"
        );
    }
}

/// Lease-clock instant `at` on CLOCK_MONOTONIC, in nanoseconds. tokio's `Instant` is std's, which is CLOCK_MONOTONIC
/// on Linux but does not expose its value; the offset is taken from "now" on both clocks.
fn monotonic_ns(at: Instant) -> i128 {
    let at = clock::timer_instant(at);
    let now = Instant::now();
    let Ok(mono) = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) else {
        return 0;
    };
    let mono = mono.tv_sec() as i128 * 1_000_000_000 + mono.tv_nsec() as i128;
    if at >= now {
        mono + (at - now).as_nanos() as i128
    } else {
        mono - (now - at).as_nanos() as i128
    }
}

/// What the keeper knows about the lease, as the child supervisor sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tenure {
    /// We hold the lease; the child may run until the deadline's `stop_at`.
    Held(Deadline),
    /// Storage said the lease is not ours any more (rule 2): stop the child at once.
    Lost(Deadline),
    /// No renew succeeded before `stop_at` (rule 3): stop the child now, kill it by `kill_at`.
    Expired(Deadline),
}

impl Tenure {
    pub fn deadline(&self) -> Deadline {
        match *self {
            Self::Held(d) | Self::Lost(d) | Self::Expired(d) => d,
        }
    }

    pub fn is_held(&self) -> bool {
        matches!(self, Self::Held(_))
    }
}

/// One won leadership.
#[derive(Debug, Clone)]
pub struct Term {
    pub lease: LeaseId,
    /// The fencing token confirmed in the blob's metadata before the child starts.
    pub epoch: u64,
    /// The deadline of the acquire itself.
    pub deadline: Deadline,
    /// Wall-clock time of the acquisition, for people.
    pub acquired_at: OffsetDateTime,
}

/// Why a campaign gave up instead of retrying.
#[derive(Debug, thiserror::Error)]
pub enum CampaignError {
    /// Storage refused the credentials before any request of ours was ever accepted.
    #[error("storage refused the credentials: {0}")]
    Denied(#[source] StoreError),
}

/// Followers poll every `acquire_interval * (1 + POLL_JITTER * random())`.
pub(crate) const POLL_JITTER: f64 = 0.2;

pub struct Elector<S> {
    store: Arc<S>,
    identity: String,
    timing: Timing,
    create_if_missing: bool,
    telemetry: Arc<Telemetry>,
    /// The id proposed in the next acquire. It is kept across attempts that were answered (a
    /// retry after a 5xx that in fact succeeded on the server still wins), and replaced after a
    /// won term and after an attempt that got no answer in time, which is never resent.
    next_id: LeaseId,
    /// An acquire that got no answer in time and may hold the lease on the server.
    late: Option<LateAcquire>,
    /// Whether storage has ever accepted our credentials; before that, a refusal is fatal.
    authorized: bool,
}

/// An acquire that got no answer within the request timeout. Its request may well have reached
/// the server and taken the lease there: answers can be slow while requests are not. Sending it
/// again would only renew that lease for another `L`, and an instance whose every answer comes
/// late would then hold the lease for ever without ever leading. So it is never resent: its
/// answer is awaited in the background ([`settle`]), a late success is released at once, and
/// the elector stays out of the election until what that request did is known, or until the
/// lease it may have taken has surely expired (`sent + L`).
struct LateAcquire {
    /// When the request was sent: a lease it took cannot outlive `sent + L` on the server
    /// (unless the request itself reached the server late, and then it expires unrenewed `L`
    /// after it arrived).
    sent: Instant,
    /// Ends with what became of that lease.
    settled: JoinHandle<Settled>,
}

/// What became of the lease a late acquire may have taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// The acquire was refused: it took nothing.
    NotTaken,
    /// It had taken the lease, and the release that followed was confirmed.
    Released,
    /// Unknown (no answer before `sent + L`, an answer that may or may not mean it was applied,
    /// or a release that got no answer): the lease may be held until `sent + L`.
    MayHold,
}

impl<S: LeaseStore> Elector<S> {
    pub fn new(
        store: Arc<S>,
        identity: String,
        timing: Timing,
        create_if_missing: bool,
        telemetry: Arc<Telemetry>,
    ) -> Self {
        Self {
            store,
            identity,
            timing,
            create_if_missing,
            telemetry,
            next_id: LeaseId::random(),
            late: None,
            authorized: false,
        }
    }

    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// Tries to acquire until it succeeds: at once, then every jittered `acquire_interval` while
    /// someone else leads, with exponential backoff while storage fails. Returns `None` when
    /// `stop` is cancelled. `stop` only cuts the pauses between attempts, never an attempt: an
    /// acquire cut mid-flight may have succeeded on the server and would leave the lease held
    /// by nobody for up to `L`. A won term is returned even if `stop` came meanwhile; the caller
    /// releases it. An attempt that gets no answer within the request timeout is no term: it is
    /// never resent, and the campaign pauses until its late answer says what it did (a late
    /// success is released at once) or until the lease it may have taken has surely expired
    /// (a `LateAcquire`); a `stop` during that pause still waits up to `2R` for the late answer
    /// and that release.
    pub async fn campaign(
        &mut self,
        stop: &CancellationToken,
    ) -> Result<Option<Term>, CampaignError> {
        let mut backoff = self.error_backoff();
        let mut following = false;
        let mut short_of_files = false;
        loop {
            if let Some(late) = self.late.take() {
                let Some(pause) = self.sit_out(late, stop).await else {
                    return Ok(None);
                };
                tokio::select! {
                    () = clock::sleep_until(clock::now() + pause) => {}
                    () = stop.cancelled() => return Ok(None),
                }
            }
            // Winning spends an epoch; a term whose child could not start would spend it for
            // nothing. Short of files, stay out until some are free.
            match crate::open_files::room_for_a_term() {
                Err(short) => {
                    if !short_of_files {
                        tracing::warn!(
                            in_use = short.in_use,
                            limit = short.limit,
                            "too few free file descriptors to start a child; not campaigning \
                             until some are free"
                        );
                        short_of_files = true;
                    }
                    tokio::select! {
                        () = sleep(self.poll_interval()) => continue,
                        () = stop.cancelled() => return Ok(None),
                    }
                }
                Ok(()) if short_of_files => {
                    tracing::info!("file descriptors are free again; campaigning");
                    short_of_files = false;
                }
                Ok(()) => {}
            }
            let pause = match self.try_acquire().await {
                Ok(Some(term)) => return Ok(Some(term)),
                Ok(None) => {
                    if !following {
                        tracing::info!(identity = %self.identity, "another instance holds the lease; following");
                        following = true;
                    }
                    backoff = self.error_backoff();
                    self.poll_interval()
                }
                Err(e) if self.late.is_some() => {
                    tracing::warn!(
                        error = %e,
                        "no answer to the acquire in time; not sending it again (it may have taken the lease on the server): waiting for its answer, or at most until that lease would have expired, in {}",
                        crate::human(self.timing.duration.saturating_sub(self.timing.request_timeout()))
                    );
                    continue;
                }
                Err(e) => {
                    let pause = backoff.next().unwrap_or(self.timing.acquire_interval);
                    match e.failure() {
                        Failure::Denied if !self.authorized => {
                            return Err(CampaignError::Denied(e));
                        }
                        Failure::Denied => tracing::error!(
                            error = %e,
                            "storage refused the credentials; retrying in {}",
                            crate::human(pause)
                        ),
                        _ => tracing::warn!(
                            error = %e,
                            "cannot acquire the lease; retrying in {}",
                            crate::human(pause)
                        ),
                    }
                    pause
                }
            };
            tokio::select! {
                () = sleep(pause) => {}
                () = stop.cancelled() => return Ok(None),
            }
        }
    }

    /// Waits until what `late` did to the lease is known or no longer matters; returns the pause
    /// before the next attempt: a polling period after a refusal, a full one (as after any
    /// release) after a late success was released, and otherwise what is left until the lease
    /// it may hold has expired. `None` when `stop` came.
    async fn sit_out(&self, late: LateAcquire, stop: &CancellationToken) -> Option<Duration> {
        let LateAcquire { sent, mut settled } = late;
        let expired = sent + self.timing.duration;
        let outcome = tokio::select! {
            joined = &mut settled => joined.unwrap_or(Settled::MayHold),
            // The background task ends by itself soon after (it stops waiting at this same
            // instant, or is releasing a success that came just now).
            () = clock::sleep_until(expired) => Settled::MayHold,
            () = stop.cancelled() => {
                // Exiting now would leave a late success held by nobody; its answer usually
                // comes soon after the timeout, and the release then takes one request.
                let grace = 2 * self.timing.request_timeout();
                if tokio::time::timeout(grace, &mut settled).await.is_err() {
                    tracing::warn!(
                        "stopping without the answer to an earlier acquire; if it took the lease, the lease expires unrenewed within {}",
                        crate::human(expired.saturating_duration_since(clock::now()))
                    );
                }
                return None;
            }
        };
        Some(match outcome {
            Settled::NotTaken => self.poll_interval(),
            Settled::Released => self.yield_interval(),
            Settled::MayHold => expired.saturating_duration_since(clock::now()),
        })
    }

    /// The follower's polling period: `acquire_interval`, stretched by up to 20 % at random so
    /// that followers started together do not poll in lock-step (and never poll faster than
    /// once per `acquire_interval`).
    pub fn poll_interval(&self) -> Duration {
        self.timing
            .acquire_interval
            .mul_f64(1.0 + POLL_JITTER * fastrand::f64())
    }

    /// How long a daemon that released the lease by choice waits before competing again: one
    /// full follower polling period, so that every follower polls at least once meanwhile.
    pub fn yield_interval(&self) -> Duration {
        self.timing.acquire_interval.mul_f64(1.0 + POLL_JITTER)
    }

    fn error_backoff(&self) -> impl Iterator<Item = Duration> + use<S> {
        let interval = self.timing.acquire_interval;
        crate::backoff(interval, interval.max(Duration::from_secs(10)))
    }

    /// One acquisition attempt. `Ok(None)`: someone else holds the lease. An attempt that gets
    /// no answer within the request timeout returns [`StoreError::TimedOut`] and is left to
    /// settle in the background (a `LateAcquire`); [`Elector::campaign`] waits for that
    /// before its next attempt.
    pub async fn try_acquire(&mut self) -> Result<Option<Term>, StoreError> {
        let id = self.next_id;
        let sent = clock::now();
        let limit = sent + self.timing.request_timeout();
        let seconds = self.timing.lease_seconds();
        let store = self.store.clone();
        // A task of its own, so that the request goes on when we stop waiting for it.
        let mut request = tokio::spawn(async move { store.acquire(id, seconds).await });
        let started = Instant::now();
        let acquired =
            match tokio::time::timeout_at(clock::timer_instant(limit), &mut request).await {
                Ok(joined) => joined.unwrap_or_else(|e| {
                    Err(StoreError::Client(format!(
                        "the acquire request failed: {e}"
                    )))
                }),
                Err(_) => {
                    let e = StoreError::TimedOut(limit - sent);
                    self.telemetry
                        .lease_op(LeaseOp::Acquire, started.elapsed(), Some(&e));
                    self.next_id = LeaseId::random();
                    self.late = Some(LateAcquire {
                        sent,
                        settled: tokio::spawn(settle(
                            self.store.clone(),
                            self.telemetry.clone(),
                            self.timing,
                            id,
                            sent,
                            request,
                        )),
                    });
                    return Err(e);
                }
            };
        self.telemetry
            .lease_op(LeaseOp::Acquire, started.elapsed(), acquired.as_ref().err());
        // Any answer but a refusal proves the credentials; no answer proves nothing.
        match &acquired {
            Err(StoreError::Unreachable(_) | StoreError::TimedOut(_)) => {}
            Err(e) if e.failure() == Failure::Denied => {}
            _ => self.authorized = true,
        }
        match acquired {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Held => return Ok(None),
            Err(e) if e.failure() == Failure::Missing && self.create_if_missing => {
                tracing::warn!(error = %e, "the lease blob is missing; creating it");
                let limit = clock::now() + self.timing.request_timeout();
                self.call(LeaseOp::Prepare, limit, self.store.prepare(true))
                    .await?;
                return Err(e);
            }
            Err(e) => return Err(e),
        }

        // We hold the lease since `sent`. The epoch must be confirmed before the stop deadline
        // of this very lease, or the child would have no time to run.
        let deadline = Deadline::from_sent(sent, &self.timing);
        self.next_id = LeaseId::random();
        match self.write_epoch(id, deadline).await {
            Ok(holder) => {
                deadline.log(holder.epoch);
                Ok(Some(Term {
                    lease: id,
                    epoch: holder.epoch,
                    deadline,
                    acquired_at: holder.acquired_at,
                }))
            }
            Err(e) => {
                self.release(id).await;
                Err(e)
            }
        }
    }

    /// Reads the last epoch and writes epoch + 1 under our lease, conditional on the ETag read.
    async fn write_epoch(&self, id: LeaseId, deadline: Deadline) -> Result<Holder, StoreError> {
        let limit = || (clock::now() + self.timing.request_timeout()).min(deadline.stop_at);
        let state = self.call(LeaseOp::Read, limit(), self.store.read()).await?;
        let now = OffsetDateTime::now_utc();
        let epoch = match &state.holder {
            Some(last) => last
                .epoch
                .checked_add(1)
                .ok_or_else(|| StoreError::BadMetadata {
                    key: crate::store::META_EPOCH,
                    value: last.epoch.to_string(),
                })?,
            None => first_epoch(now),
        };
        let holder = Holder {
            identity: self.identity.clone(),
            epoch,
            acquired_at: now,
            lease: Some(id),
        };
        self.call(
            LeaseOp::WriteEpoch,
            limit(),
            self.store.write_holder(id, &state.etag, &holder),
        )
        .await?;
        if clock::now() >= deadline.stop_at {
            return Err(StoreError::TimedOut(deadline.stop_at - deadline.sent));
        }
        Ok(holder)
    }

    /// Starts renewing `term`'s lease in a task of its own.
    pub fn keep(&self, term: &Term) -> Keeper {
        let (tx, rx) = watch::channel(Tenure::Held(term.deadline));
        let cancel = CancellationToken::new();
        let renewer = Renewer {
            store: self.store.clone(),
            timing: self.timing,
            telemetry: self.telemetry.clone(),
            lease: term.lease,
            epoch: term.epoch,
        };
        let task = tokio::spawn(
            renewer
                .run(term.deadline, tx, cancel.clone())
                .instrument(term_span(&self.identity, term.epoch)),
        );
        Keeper { rx, cancel, task }
    }

    /// Gives the lease back so that a follower can take it at once. Best effort: when it fails,
    /// the lease simply expires on the server within `L`.
    pub async fn release(&self, id: LeaseId) -> bool {
        let limit = clock::now() + self.timing.request_timeout();
        match self
            .call(LeaseOp::Release, limit, self.store.release(id))
            .await
        {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    "could not release the lease; it expires on its own within {}",
                    humantime::format_duration(self.timing.duration)
                );
                false
            }
        }
    }

    async fn call<T>(
        &self,
        op: LeaseOp,
        limit: Instant,
        request: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        timed(&self.telemetry, op, limit, request).await
    }
}

/// The epoch of the first leadership of a blob that has none (new, re-created after a deletion,
/// or with its metadata removed): the wall clock in milliseconds since 1970. Every later
/// leadership adds 1, and a blob sees far fewer than 1000 leaderships a second (each takes at
/// least three requests in a row), so this is above every epoch handed out before on that name
/// as long as the clock of the instance writing it is not behind, by more than the blob's
/// lifetime, the clock of the one that wrote the previous first epoch (design section 13).
pub fn first_epoch(now: OffsetDateTime) -> u64 {
    let ms = now.unix_timestamp_nanos() / 1_000_000;
    u64::try_from(ms).unwrap_or(0).max(1)
}

/// Awaits the answer to an acquire that got none in time (`request`), at most until the lease it
/// may have taken would have expired (`sent + L`), and releases that lease at once if it was
/// taken: this instance could not have led anyway, since it learnt of its lease too late to
/// write the epoch before its own stop deadline.
async fn settle<S: LeaseStore>(
    store: Arc<S>,
    telemetry: Arc<Telemetry>,
    timing: Timing,
    id: LeaseId,
    sent: Instant,
    mut request: JoinHandle<Result<(), StoreError>>,
) -> Settled {
    let answer = tokio::select! {
        joined = &mut request => joined.unwrap_or_else(|e| Err(StoreError::Client(e.to_string()))),
        () = clock::sleep_until(sent + timing.duration) => {
            request.abort();
            tracing::debug!("no answer to the late acquire within the lease duration");
            return Settled::MayHold;
        }
    };
    let late = crate::human(clock::now().saturating_duration_since(sent));
    match answer {
        Ok(()) => {
            tracing::warn!(
                late = %late,
                "the acquire that got no answer in time had taken the lease; releasing it at once (storage answers this instance too late for it to lead)"
            );
            let limit = clock::now() + timing.request_timeout();
            match timed(&telemetry, LeaseOp::Release, limit, store.release(id)).await {
                Ok(()) => Settled::Released,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "no answer to that release either; if it did not reach storage, the lease expires unrenewed within {}",
                        crate::human((sent + timing.duration).saturating_duration_since(clock::now()))
                    );
                    Settled::MayHold
                }
            }
        }
        // An error status other than a transient one means the request was refused, not applied.
        Err(e @ StoreError::Status { .. }) if e.failure() != Failure::Transient => {
            tracing::debug!(late = %late, error = %e, "the late acquire was refused");
            Settled::NotTaken
        }
        Err(e) => {
            tracing::debug!(late = %late, error = %e, "the late acquire may have been applied");
            Settled::MayHold
        }
    }
}

/// The span of one term: every log line of its renew loop and of its child carries the identity
/// and the epoch.
pub fn term_span(identity: &str, epoch: u64) -> tracing::Span {
    tracing::info_span!("term", identity, epoch)
}

/// Runs one store request with a hard limit, and records its outcome.
async fn timed<T>(
    telemetry: &Telemetry,
    op: LeaseOp,
    limit: Instant,
    request: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let started = Instant::now();
    let allowed = limit.saturating_duration_since(clock::now());
    let result = match tokio::time::timeout_at(clock::timer_instant(limit), request).await {
        Ok(r) => r,
        Err(_) => Err(StoreError::TimedOut(allowed)),
    };
    telemetry.lease_op(op, started.elapsed(), result.as_ref().err());
    result
}

/// The handle of a running renew loop.
pub struct Keeper {
    rx: watch::Receiver<Tenure>,
    cancel: CancellationToken,
    task: JoinHandle<Tenure>,
}

impl Keeper {
    /// The lease as the renew loop sees it; changes on every renew and on loss.
    pub fn tenure(&self) -> watch::Receiver<Tenure> {
        self.rx.clone()
    }

    /// Stops renewing. Returns the last tenure: `Held` means the lease is probably still ours
    /// and should be released.
    pub async fn stop(self) -> Tenure {
        self.cancel.cancel();
        let last = *self.rx.borrow();
        self.task.await.unwrap_or(last)
    }
}

/// The renew loop of one term.
struct Renewer<S> {
    store: Arc<S>,
    timing: Timing,
    telemetry: Arc<Telemetry>,
    lease: LeaseId,
    /// The term's epoch, for the logs.
    epoch: u64,
}

impl<S: LeaseStore> Renewer<S> {
    async fn run(
        self,
        mut deadline: Deadline,
        tx: watch::Sender<Tenure>,
        cancel: CancellationToken,
    ) -> Tenure {
        loop {
            let due = deadline.sent + self.timing.renew_interval;
            tokio::select! {
                () = clock::sleep_until(due) => {}
                () = cancel.cancelled() => return Tenure::Held(deadline),
            }
            let outcome = tokio::select! {
                t = self.renew_until(deadline) => t,
                () = cancel.cancelled() => return Tenure::Held(deadline),
            };
            // A send error only means nobody watches any more; the result is returned anyway.
            let _ = tx.send(outcome);
            match outcome {
                Tenure::Held(d) => deadline = d,
                lost_or_expired => return lost_or_expired,
            }
        }
    }

    /// Renews, retrying transient failures quickly, until a success, a definitive failure, or
    /// the stop deadline.
    async fn renew_until(&self, deadline: Deadline) -> Tenure {
        let mut retry = crate::backoff(Duration::from_millis(200), Duration::from_secs(1));
        let mut failures = 0u32;
        loop {
            let sent = clock::now();
            if sent >= deadline.stop_at {
                tracing::warn!(
                    failures,
                    "no renew succeeded before the stop deadline; stepping down"
                );
                return Tenure::Expired(deadline);
            }
            // Rule 4: never wait on a request past the stop deadline.
            let limit = (sent + self.timing.request_timeout()).min(deadline.stop_at);
            match timed(
                &self.telemetry,
                LeaseOp::Renew,
                limit,
                self.store.renew(self.lease),
            )
            .await
            {
                Ok(()) => {
                    let renewed = Deadline::from_sent(sent, &self.timing);
                    renewed.log(self.epoch);
                    self.telemetry.renewed(renewed);
                    let took = clock::now().saturating_duration_since(sent);
                    if took > self.timing.renew_interval / 4 {
                        tracing::warn!(
                            took = %crate::human(took),
                            left = %crate::human(renewed.stop_at.saturating_duration_since(clock::now())),
                            "slow renew; the lease is kept"
                        );
                    }
                    if failures > 0 {
                        tracing::info!(
                            failures,
                            left = %crate::human(deadline.stop_at.saturating_duration_since(clock::now())),
                            "renewed late; lease kept"
                        );
                    }
                    return Tenure::Held(renewed);
                }
                Err(e) if e.loses_lease() => {
                    tracing::warn!(error = %e, "the lease was lost");
                    return Tenure::Lost(deadline);
                }
                Err(e) => {
                    failures += 1;
                    let left = deadline.stop_at.saturating_duration_since(clock::now());
                    tracing::warn!(
                        error = %e,
                        left = %crate::human(left),
                        "renew failed; retrying until the stop deadline"
                    );
                    let pause = retry.next().unwrap_or(Duration::from_secs(1)).min(left);
                    sleep(pause).await;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::{Behaviour, MemoryStore, Op, SlowClient};
    use tokio::time::sleep_until;

    /// The defaults: L = 15 s, R = 4 s, acquire_interval = 1 s, M = 1 s, G = 5 s.
    fn timing() -> Timing {
        Timing::default()
    }

    fn elector(store: &Arc<MemoryStore>) -> Elector<MemoryStore> {
        Elector::new(
            store.clone(),
            "me".into(),
            timing(),
            true,
            Arc::new(Telemetry::for_tests()),
        )
    }

    fn transient() -> StoreError {
        StoreError::Status {
            status: 503,
            code: Some("ServerBusy".into()),
        }
    }

    /// The fault tests compare logged deadlines with the witness's CLOCK_MONOTONIC stamps.
    #[test]
    fn deadlines_are_logged_on_clock_monotonic() {
        let mono = || {
            let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).unwrap();
            t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128
        };
        let ahead = Duration::from_secs(14);
        let before = mono();
        let logged = monotonic_ns(Instant::now() + ahead);
        let after = mono();
        let ahead = ahead.as_nanos() as i128;
        assert!(before + ahead <= logged && logged <= after + ahead);
        let past = monotonic_ns(Instant::now() - Duration::from_secs(1));
        assert!(past < mono() - 999_000_000);
    }

    /// The first epoch on a blob without one: the wall clock in milliseconds, read around `f`.
    async fn floor_around<T>(f: impl Future<Output = T>) -> (u64, T, u64) {
        let before = first_epoch(OffsetDateTime::now_utc());
        let t = f.await;
        (before, t, first_epoch(OffsetDateTime::now_utc()))
    }

    #[tokio::test(start_paused = true)]
    async fn epochs_increase_per_term() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let (before, first, after) = floor_around(e.campaign(&CancellationToken::new())).await;
        let first = first.unwrap().unwrap();
        assert!(
            (before..=after).contains(&first.epoch),
            "the first epoch of a blob is the wall clock in ms: {before} <= {} <= {after}",
            first.epoch
        );
        assert!(e.release(first.lease).await);
        let second = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.epoch, first.epoch + 1);
        assert_ne!(first.lease, second.lease, "each term has its own lease id");
        let holder = store.holder().unwrap();
        assert_eq!(holder.identity, "me");
        assert_eq!(holder.lease, Some(second.lease), "the lease id is recorded");
    }

    /// Issue 15: a blob deleted and created again (no metadata) must not hand out an epoch that
    /// was handed out before, nor a smaller one.
    #[tokio::test(start_paused = true)]
    async fn epochs_keep_growing_when_the_blob_loses_its_metadata() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let mut epochs = Vec::new();
        for _ in 0..3 {
            let term = e.try_acquire().await.unwrap().unwrap();
            epochs.push(term.epoch);
            assert!(e.release(term.lease).await);
        }
        store.recreate();
        // Real time must pass for the wall clock to move: 3 leaderships took no paused time.
        std::thread::sleep(Duration::from_millis(5));
        let term = e.try_acquire().await.unwrap().unwrap();
        assert!(
            epochs.iter().all(|earlier| term.epoch > *earlier),
            "{epochs:?} then {} after the blob was re-created",
            term.epoch
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tampered_epochs_keep_the_instance_from_leading() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let holder = |epoch| Holder {
            identity: "someone".into(),
            epoch,
            acquired_at: OffsetDateTime::UNIX_EPOCH,
            lease: None,
        };
        // An epoch that cannot grow: refused, naming the key, and the lease is given back.
        store.set_holder(Some(holder(u64::MAX)));
        let err = e.try_acquire().await.unwrap_err();
        assert!(err.to_string().contains(crate::store::META_EPOCH), "{err}");
        assert!(!store.is_leased(), "released");
        // A large but growable one carries on.
        store.set_holder(Some(holder(u64::MAX - 1)));
        assert_eq!(e.try_acquire().await.unwrap().unwrap().epoch, u64::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn deadline_counts_from_the_send_instant_not_the_answer() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        // The answer takes 2 s; the lease started on the server when the request arrived.
        store.set(Op::Acquire, Behaviour::SlowAnswer(Duration::from_secs(2)));
        let before = Instant::now();
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(term.deadline.sent, before);
        assert_eq!(term.deadline.kill_at, before + Duration::from_secs(14));
        assert_eq!(term.deadline.stop_at, before + Duration::from_secs(9));

        store.set(Op::Renew, Behaviour::SlowAnswer(Duration::from_secs(3)));
        let keeper = e.keep(&term);
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        let renew_sent = store.calls(Op::Renew)[0];
        assert_eq!(
            renew_sent,
            before + Duration::from_secs(4),
            "renewed R after t_s"
        );
        assert_eq!(
            *tenure.borrow(),
            Tenure::Held(Deadline::from_sent(renew_sent, &timing()))
        );
        assert_eq!(
            Instant::now(),
            renew_sent + Duration::from_secs(3),
            "published on the answer"
        );
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_until_the_stop_deadline() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        store.set(Op::Renew, Behaviour::Fail(transient()));
        let keeper = e.keep(&term);
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        assert_eq!(*tenure.borrow(), Tenure::Expired(term.deadline));
        assert_eq!(
            Instant::now(),
            term.deadline.stop_at,
            "gave up exactly at the stop deadline"
        );
        let attempts = store.calls(Op::Renew);
        assert!(
            attempts.len() >= 5,
            "retried quickly: {} attempts",
            attempts.len()
        );
        assert!(attempts.iter().all(|t| *t < term.deadline.stop_at));
        assert_eq!(keeper.stop().await, Tenure::Expired(term.deadline));
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_success_keeps_the_lease_with_a_deadline_from_its_own_send() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        store.set(Op::Renew, Behaviour::Fail(transient()));
        let keeper = e.keep(&term);
        sleep_until(term.deadline.sent + Duration::from_secs(6)).await;
        store.set(Op::Renew, Behaviour::Normal);
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        let Tenure::Held(d) = *tenure.borrow() else {
            panic!("lost the lease")
        };
        let last = *store.calls(Op::Renew).last().unwrap();
        assert_eq!(d, Deadline::from_sent(last, &timing()));
        assert!(last < term.deadline.stop_at);
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_suspend_past_the_stop_deadline_ends_the_term_without_a_renew() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        let keeper = e.keep(&term);
        // The machine sleeps 20 s right after winning: CLOCK_MONOTONIC (tokio's time) stands
        // still, the server's lease clock does not.
        clock::fake::suspend(Duration::from_secs(20));
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        assert_eq!(*tenure.borrow(), Tenure::Expired(term.deadline));
        assert!(
            store.calls(Op::Renew).is_empty(),
            "no renew past the deadline"
        );
        assert_eq!(
            Instant::now(),
            term.deadline.sent,
            "noticed at once: no monotonic time passed"
        );
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_suspend_brings_the_renew_forward() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        let keeper = e.keep(&term);
        let start = Instant::now();
        clock::fake::suspend(Duration::from_secs(3));
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        // Due R = 4 s after t_s on the lease clock, which the suspend moved 3 s ahead.
        assert_eq!(store.calls(Op::Renew), vec![start + Duration::from_secs(1)]);
        let Tenure::Held(d) = *tenure.borrow() else {
            panic!("lost the lease")
        };
        assert_eq!(d.sent, term.deadline.sent + Duration::from_secs(4));
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_renew_is_cut_at_the_request_timeout_and_never_past_the_stop_deadline() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        store.set(Op::Renew, Behaviour::Hang);
        let keeper = e.keep(&term);
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        assert_eq!(*tenure.borrow(), Tenure::Expired(term.deadline));
        assert_eq!(Instant::now(), term.deadline.stop_at);
        // Sent at t+4 (cut at t+8 by R = 4 s) and again at t+8 (cut at the stop deadline, t+9).
        let attempts = store.calls(Op::Renew);
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn definitive_failures_are_reported_at_once() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        let keeper = e.keep(&term);
        store.break_now();
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        assert_eq!(*tenure.borrow(), Tenure::Lost(term.deadline));
        assert_eq!(
            store.calls(Op::Renew).len(),
            1,
            "no retry after a definitive failure"
        );
        assert_eq!(Instant::now(), term.deadline.sent + Duration::from_secs(4));
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn another_holder_is_lost_not_retried() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        let keeper = e.keep(&term);
        store.steal(15);
        let mut tenure = keeper.tenure();
        tenure.changed().await.unwrap();
        assert!(matches!(*tenure.borrow(), Tenure::Lost(_)));
        keeper.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_polls_at_the_jittered_interval() {
        let store = Arc::new(MemoryStore::default());
        store.steal(15);
        let mut e = elector(&store);
        let start = Instant::now();
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        let attempts = store.calls(Op::Acquire);
        let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter()
                .all(|g| *g >= Duration::from_secs(1) && *g <= Duration::from_millis(1200)),
            "{gaps:?}"
        );
        assert!(
            Instant::now() - start >= Duration::from_secs(15),
            "waited for the expiry"
        );
        assert!(term.epoch > 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_request_never_cuts_an_acquire_in_flight() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Acquire, Behaviour::SlowAnswer(Duration::from_secs(2)));
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        tokio::spawn(async move {
            sleep(Duration::from_secs(1)).await;
            stopper.cancel();
        });
        // The stop came while the (successful) acquire was in flight: the term is returned, so
        // that the caller can release it instead of leaving the lease held by nobody.
        let term = e.campaign(&stop).await.unwrap().expect("the won term");
        assert_eq!(store.lease_id(), Some(term.lease));
        // Between attempts, a stop ends the campaign at once.
        store.steal(15);
        store.set(Op::Acquire, Behaviour::Normal);
        let began = Instant::now();
        assert!(e.campaign(&stop).await.unwrap().is_none());
        assert!(Instant::now() - began < Duration::from_secs(1));
    }

    /// Issue 12, item 2. A crashed leader's lease expires at t0 + 15. A slow instance, whose
    /// answers all come R + 0.5 s late, takes it with its next acquire (the request lands at
    /// once). A healthy instance, started then, must lead within the slow one's answer delay +
    /// one poll, and keep leading: the slow instance must never send an acquire id twice (a
    /// resend renews the lease it took), and must release the lease its late success took.
    #[tokio::test(start_paused = true)]
    async fn an_instance_whose_answers_come_too_late_gives_the_lease_up_at_once() {
        let store = Arc::new(MemoryStore::default());
        store.steal(15);
        let crashed_lease_ends = Instant::now() + Duration::from_secs(15);
        let answer_delay = timing().request_timeout() + Duration::from_millis(500);
        let slow_client = Arc::new(SlowClient {
            store: store.clone(),
            delay: answer_delay,
        });
        let mut slow = Elector::new(
            slow_client,
            "slow".into(),
            timing(),
            true,
            Arc::new(Telemetry::for_tests()),
        );
        let slow_campaign = tokio::spawn(async move {
            let term = slow.campaign(&CancellationToken::new()).await;
            (slow, term)
        });
        // The slow instance's first acquire after the expiry takes the lease.
        while Instant::now() <= crashed_lease_ends || !store.is_leased() {
            sleep(Duration::from_millis(10)).await;
            assert!(
                Instant::now() < crashed_lease_ends + Duration::from_secs(30),
                "the slow instance never took the expired lease"
            );
        }
        let taken = Instant::now();
        let slow_lease = store.lease_id().unwrap();
        assert!(store.ids(Op::Acquire).contains(&slow_lease));

        let mut healthy = elector(&store);
        let won = tokio::time::timeout(
            Duration::from_secs(60),
            healthy.campaign(&CancellationToken::new()),
        )
        .await
        .expect("the healthy instance leads (the slow one keeps renewing with late acquires)")
        .unwrap()
        .unwrap();
        let bound = answer_delay + timing().acquire_interval.mul_f64(1.0 + POLL_JITTER);
        assert!(
            Instant::now() - taken <= bound,
            "healthy led {:?} after the slow instance took the lease (bound {bound:?})",
            Instant::now() - taken
        );
        assert!(
            store.ids(Op::Release).contains(&slow_lease),
            "the slow instance released the lease its late acquire took"
        );

        // Two lease durations later the healthy instance still leads, and the slow one has
        // kept trying with a new id each time.
        let keeper = healthy.keep(&won);
        sleep(Duration::from_secs(30)).await;
        assert!(keeper.tenure().borrow().is_held());
        assert_eq!(store.lease_id(), Some(won.lease));
        assert!(
            !slow_campaign.is_finished(),
            "the slow instance never leads"
        );
        let slow_ids: Vec<LeaseId> = store
            .ids(Op::Acquire)
            .into_iter()
            .filter(|id| *id != won.lease)
            .collect();
        let distinct: std::collections::HashSet<_> = slow_ids.iter().collect();
        assert!(slow_ids.len() >= 4, "{slow_ids:?}");
        assert_eq!(
            distinct.len(),
            slow_ids.len(),
            "an acquire id was sent twice"
        );
        keeper.stop().await;
        slow_campaign.abort();
    }

    /// An acquire that never gets an answer (nor, as far as we know, reached the server) keeps
    /// the instance out until the lease it may have taken has expired: `sent + L`.
    #[tokio::test(start_paused = true)]
    async fn an_unanswered_acquire_keeps_the_instance_out_until_its_lease_would_have_expired() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Acquire, Behaviour::Hang);
        let healer = store.clone();
        tokio::spawn(async move {
            sleep(Duration::from_secs(5)).await;
            healer.set(Op::Acquire, Behaviour::Normal);
        });
        let start = Instant::now();
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        let attempts = store.calls(Op::Acquire);
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        assert_eq!(
            attempts[1],
            start + timing().duration,
            "not before sent + L"
        );
        let ids = store.ids(Op::Acquire);
        assert_ne!(ids[0], ids[1], "a new id");
        assert_eq!(term.lease, ids[1]);
    }

    /// A stop that comes while a timed-out acquire's answer is still awaited waits for it, and
    /// for the release of the lease it took, so that the lease is not left held by nobody.
    #[tokio::test(start_paused = true)]
    async fn a_stop_waits_for_a_late_acquire_and_releases_what_it_took() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(
            Op::Acquire,
            Behaviour::SlowAnswer(timing().request_timeout() + Duration::from_millis(500)),
        );
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        tokio::spawn(async move {
            sleep(Duration::from_millis(4200)).await;
            stopper.cancel();
        });
        let start = Instant::now();
        assert!(e.campaign(&stop).await.unwrap().is_none());
        assert_eq!(
            Instant::now(),
            start + Duration::from_millis(4500),
            "returned when the late answer came and its lease was released"
        );
        assert!(
            !store.is_leased(),
            "the lease the late acquire took was released"
        );
        assert_eq!(store.ids(Op::Release), store.ids(Op::Acquire));
    }

    /// A retry after an answered failure (a 5xx that may have been applied) keeps its id, so
    /// that it still wins if the first attempt did take the lease.
    #[tokio::test(start_paused = true)]
    async fn an_answered_failure_is_retried_with_the_same_id() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Acquire, Behaviour::Fail(transient()));
        assert!(e.try_acquire().await.is_err());
        store.set(Op::Acquire, Behaviour::Normal);
        let term = e.try_acquire().await.unwrap().unwrap();
        let ids = store.ids(Op::Acquire);
        assert_eq!(ids, vec![term.lease, term.lease]);
    }

    #[tokio::test(start_paused = true)]
    async fn refused_credentials_stop_the_campaign_only_before_the_first_accepted_request() {
        let store = Arc::new(MemoryStore::default());
        let denied = StoreError::Status {
            status: 403,
            code: Some("AuthorizationFailure".into()),
        };
        store.set(Op::Acquire, Behaviour::Fail(denied.clone()));
        let mut e = elector(&store);
        assert!(matches!(
            e.campaign(&CancellationToken::new()).await,
            Err(CampaignError::Denied(_))
        ));

        // Once storage has accepted us, a refusal is retried (a rotated key, an expired SAS).
        store.set(Op::Acquire, Behaviour::Normal);
        let term = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        e.release(term.lease).await;
        store.set(Op::Acquire, Behaviour::Fail(denied));
        let never = CancellationToken::new();
        let campaign = tokio::time::timeout(Duration::from_secs(60), e.campaign(&never)).await;
        assert!(campaign.is_err(), "kept trying");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_epoch_write_releases_and_does_not_lead() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Write, Behaviour::Fail(transient()));
        assert!(e.try_acquire().await.is_err());
        assert!(!store.is_leased(), "released after the failed write");
        store.set(Op::Write, Behaviour::Normal);
        assert!(e.try_acquire().await.unwrap().unwrap().epoch > 1);
        assert_eq!(store.calls(Op::Write).len(), 2);
    }
}
