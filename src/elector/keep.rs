//! Keeping a term: the core's holder (`leasehold_core::holder`: renew every `R`, retry a failed
//! renew until the stop deadline, rule 3; a refusal loses the lease at once, rule 2) carried out
//! in a task of its own. The renew task publishes a [`Tenure`] on a watch channel; the term's body
//! enforces its deadlines with its own timers, so a stuck storage call can never delay a kill.

use super::instance::Elector;
use super::observe::{LeaseOp, Observer};
use super::request::timed;
use super::term::{Tenure, Term, term_span};
use crate::clock::{self, Clock};
use crate::fmt::human;
use crate::mutant::Mutant;
use crate::store::{LeaseId, LeaseStore};
use crate::timing::{Deadline, Timing};
use leasehold_core::exchange::Answer;
use leasehold_core::holder::{self, Holder, Note, Reply};
use std::sync::Arc;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

impl<S: LeaseStore> Elector<S> {
    /// Starts renewing `term`'s lease in a task of its own.
    pub(crate) fn keep(&self, term: &Term) -> Renewing {
        let (tx, rx) = watch::channel(Tenure::Held(term.deadline));
        let cancel = CancellationToken::new();
        let renewer = Renewer {
            store: self.store_of(term.slot).clone(),
            timing: self.timing,
            clock: self.clock,
            observer: self.observer.clone(),
            lease: term.lease,
            epoch: term.epoch,
            slot: term.slot,
            vanished: self.vanished.clone(),
            mutants: holder::Mutants {
                deadline_from_answer: self.mutant.on(Mutant::DeadlineFromAnswer),
            },
        };
        let task = crate::spawn::spawn(
            renewer
                .run(term.deadline, tx, cancel.clone())
                .instrument(term_span(&self.identity, term.epoch)),
        );
        Renewing { rx, cancel, task }
    }
}

/// The handle of a running renew loop.
pub(crate) struct Renewing {
    rx: watch::Receiver<Tenure>,
    cancel: CancellationToken,
    task: JoinHandle<Tenure>,
}

impl Renewing {
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
    /// The elector's clocks.
    clock: Clock,
    observer: Arc<dyn Observer>,
    lease: LeaseId,
    /// The term's epoch, for the logs.
    epoch: u64,
    /// The term's slot, and where a blob found gone is noted (docs/safety.md, "Recovery from
    /// anything").
    slot: u32,
    vanished: super::vanish::Vanished,
    /// The holder's rules broken on purpose (the simulator's; none otherwise).
    mutants: holder::Mutants,
}

impl<S: LeaseStore> Renewer<S> {
    /// Carries out the core's [`Holder`]: sends each renew it asks for, cut at its limit,
    /// reports the answer with the instant it was sent, sleeps until it asks again, and
    /// publishes every change of the tenure.
    async fn run(
        self,
        deadline: Deadline,
        tx: watch::Sender<Tenure>,
        cancel: CancellationToken,
    ) -> Tenure {
        let mut holder = Holder::new(&self.timing, deadline.sent, 1, self.mutants);
        loop {
            let now = self.clock.now();
            let Some(renew) = holder.poll_request(now) else {
                if let Tenure::Expired(_) = holder.tenure() {
                    tracing::warn!(
                        failures = holder.failures(),
                        "no renew succeeded before the stop deadline; stepping down"
                    );
                    let _ = tx.send(holder.tenure());
                    return holder.tenure();
                }
                let due = holder
                    .poll_timeout()
                    .expect("a held lease has its next renew due");
                tokio::select! {
                    biased;
                    () = cancel.cancelled() => return stopped(self.clock, &holder),
                    () = self.clock.sleep_until(due) => continue,
                }
            };
            let limit = renew.request.limit;
            let result = tokio::select! {
                biased;
                () = cancel.cancelled() => return stopped(self.clock, &holder),
                a = timed(self.clock, &*self.observer, LeaseOp::Renew, limit, self.store.renew(self.lease)) => a,
            };
            let answer = Answer {
                tag: renew.tag,
                sent: now,
                answer: reply_of(self.clock, &holder, result),
            };
            let note = holder.handle_answer(self.clock.now(), answer, fastrand::f64);
            match note {
                Some(Note::Renewed {
                    deadline,
                    took,
                    slow,
                    failures,
                }) => {
                    self.renewed(deadline, took, slow, failures);
                    // A send error only means nobody watches any more.
                    let _ = tx.send(holder.tenure());
                }
                Some(Note::Lost { missing }) => {
                    if missing {
                        self.vanished.led(self.slot);
                        self.vanished.missing(self.slot, &self.timing);
                    }
                    let _ = tx.send(holder.tenure());
                    return holder.tenure();
                }
                Some(Note::Expired { .. }) => {
                    let _ = tx.send(holder.tenure());
                    return holder.tenure();
                }
                Some(Note::Retrying { .. }) | None => {}
            }
        }
    }
}

impl<S> Renewer<S> {
    /// A renew succeeded: the log and the observer say so (slow, or late after failures).
    fn renewed(&self, deadline: Deadline, took: std::time::Duration, slow: bool, failures: u32) {
        log_deadline(&deadline, self.epoch);
        self.observer.renewed(deadline);
        if slow {
            tracing::warn!(
                took = %human(took),
                left = %human(deadline.stop_at.saturating_duration_since(self.clock.now())),
                "slow renew; the lease is kept"
            );
        }
        if failures > 0 {
            tracing::info!(
                failures,
                left = %human(deadline.stop_at.saturating_duration_since(self.clock.now())),
                "renewed late; lease kept"
            );
        }
    }
}

/// What a renew's `result` says, for the holder; a failure is logged with the time left.
fn reply_of(
    clock: Clock,
    holder: &Holder<Instant>,
    result: Result<(), crate::store::StoreError>,
) -> Reply {
    match result {
        Ok(()) => Reply::Renewed,
        Err(e) if e.loses_lease() => {
            tracing::warn!(error = %e, "the lease was lost");
            Reply::Refused {
                missing: e.failure() == crate::store::Failure::Missing,
            }
        }
        Err(e) => {
            let left = holder
                .tenure()
                .deadline()
                .stop_at
                .saturating_duration_since(clock.now());
            match left.is_zero() {
                true => tracing::warn!(
                    error = %e,
                    failures = holder.failures() + 1,
                    "no renew succeeded before the stop deadline; stepping down"
                ),
                false => tracing::warn!(
                    error = %e,
                    left = %human(left),
                    "renew failed; retrying until the stop deadline"
                ),
            }
            Reply::Failed
        }
    }
}

/// The tenure when renewing stops from outside (the term ended). The body's own timer fires at
/// the stop deadline too, and its term may end before the attempt cut at that deadline is
/// heard of: the step-down is said all the same.
fn stopped(clock: Clock, holder: &Holder<Instant>) -> Tenure {
    let tenure = holder.tenure();
    if tenure.is_held() && clock.now() >= tenure.deadline().stop_at {
        tracing::warn!(
            failures = holder.failures(),
            "no renew succeeded before the stop deadline; stepping down"
        );
    }
    tenure
}

/// Logs, at debug level, the kill deadline of a lease just won or renewed, as CLOCK_MONOTONIC
/// nanoseconds. This is for the fault tests (tests/it/faults.rs) and the chaos command: they compare
/// it with the witness child's CLOCK_MONOTONIC history to check that no child outlived its
/// daemon's deadline *exactly*. A bound guessed from the fault times cannot do that, because a
/// late renew success moves the deadline by an amount only the daemon knows. (The target is this
/// module's, which the tests' `RUST_LOG=leasehold::elector=debug` names.)
pub(super) fn log_deadline(deadline: &Deadline, epoch: u64) {
    tracing::debug!(
        epoch,
        kill_at_mono_ns = monotonic_ns(deadline.kill_at),
        "lease deadline"
    );
}

/// Lease-clock instant `at` on CLOCK_MONOTONIC, in nanoseconds, on the host's lease clock: what
/// the fault tests read (in a simulated history, only a number in a debug line). tokio's `Instant` is std's, which is CLOCK_MONOTONIC
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::testing::{elector, leading, timing, transient};
    use crate::store::memory::{Behaviour, MemoryStore, Op};
    use std::time::Duration;
    use tokio::time::sleep_until;

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
    async fn deadline_counts_from_the_send_instant_not_the_answer() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        // The answer takes 2 s; the lease started on the server when the request arrived.
        store.set(Op::Acquire, Behaviour::SlowAnswer(Duration::from_secs(2)));
        let before = Instant::now();
        let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
        assert_eq!(term.deadline.sent, before);
        assert_eq!(term.deadline.kill_at, before + Duration::from_secs(14));
        assert_eq!(term.deadline.stop_at, before + Duration::from_secs(9));

        store.set(Op::Renew, Behaviour::SlowAnswer(Duration::from_secs(3)));
        let renewing = e.keep(&term);
        let mut tenure = renewing.tenure();
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
        renewing.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_until_the_stop_deadline() {
        let (store, e, term) = leading().await;
        store.set(Op::Renew, Behaviour::Fail(transient()));
        let renewing = e.keep(&term);
        let mut tenure = renewing.tenure();
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
        assert_eq!(renewing.stop().await, Tenure::Expired(term.deadline));
    }

    #[tokio::test(start_paused = true)]
    async fn a_late_success_keeps_the_lease_with_a_deadline_from_its_own_send() {
        let (store, e, term) = leading().await;
        store.set(Op::Renew, Behaviour::Fail(transient()));
        let renewing = e.keep(&term);
        sleep_until(term.deadline.sent + Duration::from_secs(6)).await;
        store.set(Op::Renew, Behaviour::Normal);
        let mut tenure = renewing.tenure();
        tenure.changed().await.unwrap();
        let Tenure::Held(d) = *tenure.borrow() else {
            panic!("lost the lease")
        };
        let last = *store.calls(Op::Renew).last().unwrap();
        assert_eq!(d, Deadline::from_sent(last, &timing()));
        assert!(last < term.deadline.stop_at);
        renewing.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_suspend_past_the_stop_deadline_ends_the_term_without_a_renew() {
        let (store, e, term) = leading().await;
        let renewing = e.keep(&term);
        // The machine sleeps 20 s right after winning: CLOCK_MONOTONIC (tokio's time) stands
        // still, the server's lease clock does not.
        clock::fake::suspend(Duration::from_secs(20));
        let mut tenure = renewing.tenure();
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
        renewing.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_short_suspend_brings_the_renew_forward() {
        let (store, e, term) = leading().await;
        let renewing = e.keep(&term);
        let start = Instant::now();
        clock::fake::suspend(Duration::from_secs(3));
        let mut tenure = renewing.tenure();
        tenure.changed().await.unwrap();
        // Due R = 4 s after t_s on the lease clock, which the suspend moved 3 s ahead.
        assert_eq!(store.calls(Op::Renew), vec![start + Duration::from_secs(1)]);
        let Tenure::Held(d) = *tenure.borrow() else {
            panic!("lost the lease")
        };
        assert_eq!(d.sent, term.deadline.sent + Duration::from_secs(4));
        renewing.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_hung_renew_is_cut_at_the_request_timeout_and_never_past_the_stop_deadline() {
        let (store, e, term) = leading().await;
        store.set(Op::Renew, Behaviour::Hang);
        let renewing = e.keep(&term);
        let mut tenure = renewing.tenure();
        tenure.changed().await.unwrap();
        assert_eq!(*tenure.borrow(), Tenure::Expired(term.deadline));
        assert_eq!(Instant::now(), term.deadline.stop_at);
        // Sent at t+4 (cut at t+8 by R = 4 s) and again at t+8 (cut at the stop deadline, t+9).
        let attempts = store.calls(Op::Renew);
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        renewing.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn definitive_failures_are_reported_at_once() {
        let (store, e, term) = leading().await;
        let renewing = e.keep(&term);
        store.break_now();
        let mut tenure = renewing.tenure();
        tenure.changed().await.unwrap();
        assert_eq!(*tenure.borrow(), Tenure::Lost(term.deadline));
        assert_eq!(
            store.calls(Op::Renew).len(),
            1,
            "no retry after a definitive failure"
        );
        assert_eq!(Instant::now(), term.deadline.sent + Duration::from_secs(4));
        renewing.stop().await;
    }

    #[tokio::test(start_paused = true)]
    async fn another_holder_is_lost_not_retried() {
        let (store, e, term) = leading().await;
        let renewing = e.keep(&term);
        store.steal(15);
        let mut tenure = renewing.tenure();
        tenure.changed().await.unwrap();
        assert!(matches!(*tenure.borrow(), Tenure::Lost(_)));
        renewing.stop().await;
    }
}
