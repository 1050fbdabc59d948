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
//! `acquire_interval`, then epoch + 1 written under the lease with `If-Match`) -> [`Keeper`]
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
    /// The id proposed in the next acquire. It changes only after a term is won, so a retry
    /// after a timed-out acquire (which may have succeeded on the server) still wins.
    next_id: LeaseId,
    /// Whether storage has ever accepted our credentials; before that, a refusal is fatal.
    authorized: bool,
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
    /// releases it.
    pub async fn campaign(
        &mut self,
        stop: &CancellationToken,
    ) -> Result<Option<Term>, CampaignError> {
        let mut backoff = self.error_backoff();
        let mut following = false;
        let mut short_of_files = false;
        loop {
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

    /// One acquisition attempt. `Ok(None)`: someone else holds the lease.
    pub async fn try_acquire(&mut self) -> Result<Option<Term>, StoreError> {
        let id = self.next_id;
        let sent = clock::now();
        let limit = sent + self.timing.request_timeout();
        let seconds = self.timing.lease_seconds();
        let acquired = self
            .call(LeaseOp::Acquire, limit, self.store.acquire(id, seconds))
            .await;
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
        let last = state.holder.as_ref().map_or(0, |h| h.epoch);
        let holder = Holder {
            identity: self.identity.clone(),
            epoch: last.checked_add(1).ok_or(StoreError::BadMetadata {
                key: crate::store::META_EPOCH,
                value: last.to_string(),
            })?,
            acquired_at: OffsetDateTime::now_utc(),
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
    use crate::store::memory::{Behaviour, MemoryStore, Op};
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

    #[tokio::test(start_paused = true)]
    async fn epochs_increase_per_term() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let first = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.epoch, 1);
        assert!(e.release(first.lease).await);
        let second = e
            .campaign(&CancellationToken::new())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.epoch, 2);
        assert_ne!(first.lease, second.lease, "each term has its own lease id");
        assert_eq!(store.holder().unwrap().identity, "me");
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
        assert_eq!(term.epoch, 1);
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
        assert_eq!(term.epoch, 1);
        // Between attempts, a stop ends the campaign at once.
        store.steal(15);
        store.set(Op::Acquire, Behaviour::Normal);
        let began = Instant::now();
        assert!(e.campaign(&stop).await.unwrap().is_none());
        assert!(Instant::now() - began < Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_timed_out_acquire_is_retried_with_the_same_id_and_wins() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        // The first acquire lands on the server but its answer never comes back.
        store.set(
            Op::Acquire,
            Behaviour::SlowAnswer(Duration::from_secs(3600)),
        );
        assert!(matches!(
            e.try_acquire().await,
            Err(StoreError::TimedOut(_))
        ));
        assert!(store.is_leased());
        store.set(Op::Acquire, Behaviour::Normal);
        let term = e.try_acquire().await.unwrap().expect("our own lease");
        assert_eq!(term.epoch, 1);
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
        assert_eq!(e.try_acquire().await.unwrap().unwrap().epoch, 1);
    }
}
