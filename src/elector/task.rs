//! The library's body of a term: the user's task, started once per won term with a
//! [`Leadership`], and held to rule 1 as the daemon holds its child: cancelled at the stop
//! deadline `t_s + L - M - G`, at once on a definitive loss, or on shutdown; aborted `G` later,
//! and never later than the kill deadline `t_s + L - M`. The loop releases the lease only once
//! the task is gone.
//!
//! A task that blocks its thread (a long computation or blocking I/O without an `.await`) cannot
//! be aborted: tokio drops a task only at an `.await`. Then the term [overruns](TermEnd::Overran)
//! and the loop stops renewing; see [`Error::TaskDidNotStop`](super::Error::TaskDidNotStop).

use super::{Body, Phase, Tenure, Term, TermEnd};
use crate::clock::{Clock, SUSPEND_POLL};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

/// How long an aborted task gets to be dropped. Tokio drops it at its next `.await`, which for a
/// task that does not block its thread is at once; one that is still there after this blocks
/// its thread.
const ABORT_GRACE: Duration = Duration::from_millis(100);

/// One term of leadership, as the task run during it sees it.
///
/// The task should stop soon after [`Leadership::cancelled`] resolves: it then has `G`
/// (`[child].stop_timeout`, [`Timing::stop_timeout`](crate::Timing::stop_timeout)) before it is
/// aborted, and the lease is released only after it is gone. Pass [`Leadership::epoch`] along
/// with every write the task makes to other systems, and have them refuse writes with an epoch
/// smaller than the largest they have seen: that fences off a task that outlived its term.
#[derive(Debug, Clone)]
pub struct Leadership {
    epoch: u64,
    slot: u32,
    identity: Arc<str>,
    cancelled: CancellationToken,
}

impl Leadership {
    /// The fencing token of this term: larger than that of every earlier term on the lease
    /// blob, whoever led it.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The slot this term holds, 0 to N - 1 with `[lease].slots = N`
    /// ([`Elector::with_slots`](crate::Elector::with_slots)); always 0 with one slot. The
    /// epoch is that slot's: each slot counts its own.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// This instance's identity, as recorded in the blob's metadata.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Resolves when the task must stop: at the stop deadline (no renew succeeded in time), at
    /// once when the lease is lost, or on shutdown.
    pub async fn cancelled(&self) {
        self.cancelled.cancelled().await;
    }

    /// Whether the task must stop (see [`Leadership::cancelled`]).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.is_cancelled()
    }
}

/// The user's task as the body of each term.
pub(crate) struct TaskBody<F> {
    task: F,
    identity: Arc<str>,
    /// `G`: how long a cancelled task gets before it is aborted.
    grace: Duration,
    /// The elector's clocks: the term's deadlines are on its lease clock.
    clock: Clock,
    /// A task that was still there after it was aborted; the loop waits for it.
    overrun: Option<JoinHandle<()>>,
}

impl<F> TaskBody<F> {
    pub fn new(task: F, identity: &str, grace: Duration, clock: Clock) -> Self {
        Self {
            task,
            identity: identity.into(),
            grace,
            clock,
            overrun: None,
        }
    }

    /// The kill deadline came (rule 1): the task is aborted; one that is still there after
    /// [`ABORT_GRACE`] (it blocks its thread) is left for [`Body::gone`] to wait for.
    async fn abort(&mut self, mut task: JoinHandle<()>, phase: &Phase) -> TermEnd {
        task.abort();
        tracing::warn!("the task did not stop in time; aborting it");
        match tokio::time::timeout(ABORT_GRACE, &mut task).await {
            Ok(_) => phase.why().unwrap_or(TermEnd::Expired),
            Err(_) => {
                self.overrun = Some(task);
                TermEnd::Overran
            }
        }
    }
}

/// The task ended (`joined`): stopped by the term, or by itself (a panic is logged).
fn ended(joined: Result<(), tokio::task::JoinError>, phase: &Phase) -> TermEnd {
    if let Err(e) = joined
        && e.is_panic()
    {
        tracing::error!("the task panicked: {}", panic_message(e.into_panic()));
    }
    match phase.why() {
        Some(why) => {
            tracing::info!("task stopped");
            why
        }
        None => {
            tracing::info!("the task ended by itself");
            TermEnd::Released
        }
    }
}

impl<F, Fut> Body for TaskBody<F>
where
    F: FnMut(Leadership) -> Fut + Send,
    Fut: Future<Output = ()> + Send + 'static,
{
    const BODY: &'static str = "the task";
    const ENDED: &'static str = "the task ended";

    async fn run(
        &mut self,
        term: &Term,
        mut tenure: watch::Receiver<Tenure>,
        shutdown: &CancellationToken,
    ) -> TermEnd {
        let cancelled = CancellationToken::new();
        let leadership = Leadership {
            epoch: term.epoch,
            slot: term.slot,
            identity: self.identity.clone(),
            cancelled: cancelled.clone(),
        };
        // A task of its own, so that it can be aborted, and so that a task that blocks its
        // thread does not hold up the deadlines (on a runtime with another worker). It logs in
        // the term's span.
        let mut task = tokio::spawn((self.task)(leadership).in_current_span());
        let mut phase = Phase::Running;
        let mut keeper_alive = true;
        loop {
            // On the lease clock, which counts a machine suspend.
            let tenure_now = *tenure.borrow();
            let step = phase.step(
                &tenure_now,
                self.clock.now(),
                shutdown.is_cancelled(),
                self.grace,
            );
            let (deadline, kill_at) = (step.deadline, step.kill_at);
            if let Some(why) = step.stop {
                cancelled.cancel();
                tracing::info!(reason = ?why, "stopping the task");
            }
            if step.kill {
                return self.abort(task, &phase).await;
            }
            tokio::select! {
                biased;
                joined = &mut task => return ended(joined, &phase),
                () = self.clock.sleep_until(deadline.stop_at), if phase.is_running() => {}
                () = self.clock.sleep_until(kill_at), if phase.is_stopping() => {}
                // Timers run on CLOCK_MONOTONIC, which stands still while the machine sleeps;
                // this re-reads the lease clock so that a stale task is stopped soon after a
                // resume.
                () = sleep(SUSPEND_POLL) => {}
                changed = tenure.changed(), if keeper_alive => keeper_alive = changed.is_ok(),
                () = shutdown.cancelled(), if phase.is_running() => {}
            }
        }
    }

    async fn gone(&mut self) {
        if let Some(task) = self.overrun.take() {
            // Cancelled or finished: either way, gone.
            let _ = task.await;
        }
    }
}

/// What a panic said, when it said it with a string.
fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(s) => *s,
        Err(payload) => payload
            .downcast_ref::<&str>()
            .map_or_else(|| "(no message)".to_owned(), |s| (*s).to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Elector;
    use crate::elector::testing::{timing, transient};
    use crate::store::StoreError;
    use crate::store::memory::{Behaviour, MemoryStore, Op};
    use std::pin::Pin;
    use std::sync::Mutex;
    use tokio::time::Instant;

    /// One thing that happened to the task of the term with this epoch, and when.
    type Event = (u64, &'static str, Instant);

    /// What happened to the tasks, and when (tokio's paused time).
    #[derive(Clone, Default)]
    struct Events(Arc<Mutex<Vec<Event>>>);

    impl Events {
        fn push(&self, epoch: u64, what: &'static str) {
            self.0.lock().unwrap().push((epoch, what, Instant::now()));
        }

        fn at(&self, what: &str) -> Vec<Instant> {
            let events = self.0.lock().unwrap();
            events.iter().filter(|e| e.1 == what).map(|e| e.2).collect()
        }

        fn epochs(&self) -> Vec<u64> {
            let events = self.0.lock().unwrap();
            events
                .iter()
                .filter(|e| e.1 == "start")
                .map(|e| e.0)
                .collect()
        }

        /// Waits (on paused time) until `what` has happened `n` times.
        async fn wait(&self, what: &str, n: usize) -> Instant {
            loop {
                if let Some(at) = self.at(what).get(n - 1) {
                    return *at;
                }
                sleep(Duration::from_millis(10)).await;
            }
        }
    }

    /// Records "gone" when the task's future is dropped: at its end, or when it is aborted.
    struct Gone(Events, u64);

    impl Drop for Gone {
        fn drop(&mut self) {
            self.0.push(self.1, "gone");
        }
    }

    type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

    /// A task that records its start, waits until it is cancelled ("cancelled"), then takes
    /// `linger` to finish; `None`: it never finishes by itself (it ignores the cancellation).
    /// `runs`: it ends by itself after this long instead of waiting to be cancelled.
    fn task(
        events: &Events,
        linger: Option<Duration>,
        runs: Option<Duration>,
    ) -> impl FnMut(Leadership) -> Task + Send + 'static {
        let events = events.clone();
        move |leadership| {
            let events = events.clone();
            Box::pin(async move {
                let epoch = leadership.epoch();
                events.push(epoch, "start");
                let _gone = Gone(events.clone(), epoch);
                if let Some(runs) = runs {
                    return sleep(runs).await;
                }
                leadership.cancelled().await;
                events.push(epoch, "cancelled");
                match linger {
                    Some(linger) => sleep(linger).await,
                    None => std::future::pending().await,
                }
            })
        }
    }

    /// An elector "me" on a store, leading by itself and running `task`.
    struct Run {
        stop: CancellationToken,
        running: JoinHandle<Result<(), crate::Error>>,
    }

    impl Run {
        /// On a store of its own; the task as [`task`] makes it. Returns the run, its store and
        /// what its tasks recorded.
        fn start(
            linger: Option<Duration>,
            runs: Option<Duration>,
        ) -> (Self, Arc<MemoryStore>, Events) {
            let store = Arc::new(MemoryStore::default());
            let (run, events) = Self::on(store.clone(), linger, runs);
            (run, store, events)
        }

        /// On `store`: the run, and what its tasks recorded.
        fn on(
            store: Arc<MemoryStore>,
            linger: Option<Duration>,
            runs: Option<Duration>,
        ) -> (Self, Events) {
            let events = Events::default();
            let stop = CancellationToken::new();
            let elector = Elector::with_store(store, "me", timing()).unwrap();
            let (task, shutdown) = (task(&events, linger, runs), stop.clone());
            let running = tokio::spawn(async move {
                elector
                    .run_while_leader(async move { shutdown.cancelled().await }, task)
                    .await
            });
            (Self { stop, running }, events)
        }

        /// Shutdown; what `run_while_leader` returned, once it did.
        async fn shutdown(self) -> Result<(), crate::Error> {
            self.stop.cancel();
            self.running.await.unwrap()
        }
    }

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_at_the_stop_deadline_aborted_at_the_kill_deadline_then_released() {
        let store = Arc::new(MemoryStore::default());
        store.set(Op::Renew, Behaviour::Fail(transient()));
        // It ignores its cancellation.
        let (run, events) = Run::on(store.clone(), None, None);
        let started = events.wait("start", 1).await;
        // L 15 s, M 1 s, G 5 s: stop deadline t_s + 9, kill deadline t_s + 14.
        let cancelled = events.wait("cancelled", 1).await;
        assert_eq!(cancelled - started, secs(9), "cancelled at t_s + L - M - G");
        let gone = events.wait("gone", 1).await;
        assert_eq!(gone - started, secs(14), "aborted at t_s + L - M");
        let released = store.calls(Op::Release)[0];
        assert!(released >= gone, "released {released:?}, gone {gone:?}");
        assert!(!store.is_leased() || store.calls(Op::Acquire).len() > 1);
        run.shutdown().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_definitive_loss_cancels_at_once_and_nothing_is_released() {
        let (run, store, events) = Run::start(Some(secs(1)), None);
        let started = events.wait("start", 1).await;
        let first = store.lease_id().unwrap();
        // An admin breaks the lease; the next renew (R = 4 s) is refused for good.
        sleep(secs(1)).await;
        store.break_now();
        let cancelled = events.wait("cancelled", 1).await;
        assert_eq!(
            cancelled - started,
            secs(4),
            "cancelled at the refused renew"
        );
        let gone = events.wait("gone", 1).await;
        assert_eq!(gone - cancelled, secs(1));
        assert!(
            !store.ids(Op::Release).contains(&first),
            "a lost lease is not released"
        );
        // The next term, on the lease now free, starts only after the last task is gone.
        let next = events.wait("start", 2).await;
        assert!(next >= gone);
        run.shutdown().await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_cancels_waits_for_the_task_then_releases_and_returns() {
        let (run, store, events) = Run::start(Some(secs(2)), None);
        let started = events.wait("start", 1).await;
        sleep(secs(6)).await; // past a renew
        let asked = Instant::now();
        run.shutdown().await.unwrap();
        let returned = Instant::now();
        assert_eq!(events.at("cancelled"), vec![asked], "cancelled at once");
        let gone = events.at("gone")[0];
        assert_eq!(gone - asked, secs(2), "the task took its time");
        let released = *store.calls(Op::Release).last().unwrap();
        assert!(released >= gone && returned >= released);
        assert!(!store.is_leased(), "released");
        assert!(started < asked);

        // One that ignores its cancellation is aborted G after it.
        let (run, store, events) = Run::start(None, None);
        events.wait("start", 1).await;
        let asked = Instant::now();
        run.shutdown().await.unwrap();
        assert_eq!(events.at("gone")[0] - asked, timing().stop_timeout);
        assert!(!store.is_leased(), "released");
    }

    #[tokio::test(start_paused = true)]
    async fn each_term_runs_one_task_with_its_own_epoch() {
        // Each task ends by itself after 1 s: that ends the term.
        let (run, store, events) = Run::start(None, Some(secs(1)));
        events.wait("start", 3).await;
        run.shutdown().await.unwrap();
        let epochs = events.epochs();
        assert!(
            epochs.windows(2).all(|w| w[1] == w[0] + 1),
            "one more per term: {epochs:?}"
        );
        let (starts, gone) = (events.at("start"), events.at("gone"));
        for (i, start) in starts.iter().enumerate().skip(1) {
            // The lease was released, and this instance waited a polling period first.
            assert!(
                *start >= gone[i - 1] + timing().acquire_interval,
                "{starts:?} {gone:?}"
            );
        }
        assert_eq!(store.calls(Op::Release).len(), epochs.len());
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_won_after_shutdown_runs_no_task_and_is_released() {
        let store = Arc::new(MemoryStore::default());
        store.set(Op::Acquire, Behaviour::SlowAnswer(secs(2)));
        let (run, events) = Run::on(store.clone(), Some(secs(1)), None);
        sleep(secs(1)).await;
        run.shutdown().await.unwrap();
        assert!(events.epochs().is_empty(), "no task");
        assert_eq!(
            store.ids(Op::Release),
            store.ids(Op::Acquire),
            "the won lease was released"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn refused_credentials_are_an_error_only_before_storage_ever_accepted_them() {
        let store = Arc::new(MemoryStore::default());
        store.set(
            Op::Acquire,
            Behaviour::Fail(StoreError::Status {
                status: 403,
                code: Some("AuthorizationFailure".into()),
            }),
        );
        let (run, _) = Run::on(store, None, None);
        let refused = run.running.await.unwrap();
        assert!(
            matches!(refused, Err(crate::Error::Denied(_))),
            "{refused:?}"
        );
    }

    /// A task that blocks its thread cannot be aborted: the elector stops renewing at the kill
    /// deadline, never releases while the task may run, and gives up once the lease has surely
    /// expired. Real time (a blocked worker stops paused time too), on two workers.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_that_blocks_its_thread_is_not_renewed_for_and_not_released() {
        let store = Arc::new(MemoryStore::default());
        let timing = crate::Timing {
            stop_timeout: Duration::from_millis(500),
            ..timing()
        };
        let elector = Elector::with_store(store.clone(), "me", timing).unwrap();
        let stop = CancellationToken::new();
        let shutdown = stop.clone();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let mut started_tx = Some(started_tx);
        let running = tokio::spawn(elector.run_while_leader(
            async move { shutdown.cancelled().await },
            move |leadership: Leadership| {
                let started = started_tx.take();
                async move {
                    if let Some(tx) = started {
                        let _ = tx.send((leadership.epoch(), Instant::now()));
                    }
                    leadership.cancelled().await;
                    // Blocks its worker thread well past its lease.
                    std::thread::sleep(Duration::from_secs(16));
                }
            },
        ));
        let (epoch, started) = started_rx.await.unwrap();
        stop.cancel();
        let result = running.await.unwrap();
        let took = started.elapsed();
        // The elector gives up at t_s + L, and t_s (the acquire's send) came before the task
        // started by the acquire's and the epoch write's answers: a few milliseconds here.
        println!(
            "gave up on the blocked task {took:?} after its term began (bound: L = 15s after \
             the acquire was sent, which came up to 100ms before the task started)"
        );
        assert!(
            matches!(result, Err(crate::Error::TaskDidNotStop { epoch: e }) if e == epoch),
            "{result:?}"
        );
        assert!(
            took >= Duration::from_millis(14_900) && took < Duration::from_secs(16),
            "{took:?}"
        );
        assert!(
            store.calls(Op::Release).is_empty(),
            "never released while it may run"
        );
        let renews = store.calls(Op::Renew);
        assert!(
            renews.iter().all(|r| *r < started + Duration::from_secs(1)),
            "no renew after the kill: {renews:?}"
        );
    }

    /// A candidate for one term (the daemon's `--try`, `--timeout`, one-liner): leads with
    /// the task [`task`] makes on `store`, its campaign giving up when `give_up` is cancelled;
    /// what `lead` returned, and when (paused time).
    async fn lead_one_term(
        store: &Arc<MemoryStore>,
        give_up: CancellationToken,
        events: &Events,
        runs: Option<Duration>,
    ) -> (Result<crate::elector::Finish, crate::Error>, Instant) {
        let mut elector = Elector::with_store(store.clone(), "me", timing())
            .unwrap()
            .for_one_term(give_up);
        let mut body = TaskBody::new(
            task(events, Some(secs(1)), runs),
            "me",
            secs(5),
            Clock::Host,
        );
        let shutdown = CancellationToken::new();
        let lead = elector.lead(&mut body, &shutdown);
        let finished = tokio::time::timeout(secs(60), lead)
            .await
            .expect("lead returned within a minute");
        (finished, Instant::now())
    }

    fn cancelled() -> CancellationToken {
        let token = CancellationToken::new();
        token.cancel();
        token
    }

    #[tokio::test(start_paused = true)]
    async fn one_attempt_when_the_campaign_has_given_up_already() {
        use crate::elector::Finish;
        // Held by another instance: one acquire, then "not elected" at once, no task.
        let store = Arc::new(MemoryStore::default());
        store.steal(15);
        let (events, began) = (Events::default(), Instant::now());
        let (finished, at) = lead_one_term(&store, cancelled(), &events, None).await;
        assert!(
            matches!(finished, Ok(Finish::NotElected(None))),
            "{finished:?}"
        );
        assert_eq!(at, began, "at once");
        assert_eq!(store.calls(Op::Acquire).len(), 1);
        assert!(events.epochs().is_empty());

        // Storage failing: one acquire, and its failure is what is reported.
        let store = Arc::new(MemoryStore::default());
        store.set(Op::Acquire, Behaviour::Fail(transient()));
        let (finished, _) = lead_one_term(&store, cancelled(), &events, None).await;
        assert!(
            matches!(&finished, Ok(Finish::NotElected(Some(e))) if e.to_string().contains("503")),
            "{finished:?}"
        );
        assert_eq!(store.calls(Op::Acquire).len(), 1);

        // Free: the term is led, once, and the candidate does not stand again.
        let store = Arc::new(MemoryStore::default());
        let (finished, _) = lead_one_term(&store, cancelled(), &events, Some(secs(1))).await;
        assert!(
            matches!(finished, Ok(Finish::CutShort(TermEnd::Released))),
            "{finished:?}"
        );
        assert_eq!(events.epochs().len(), 1);
        assert_eq!(store.calls(Op::Acquire).len(), 1);
        assert!(!store.is_leased(), "released");
    }

    #[tokio::test(start_paused = true)]
    async fn the_campaign_gives_up_between_attempts_when_its_patience_runs_out() {
        use crate::elector::Finish;
        let store = Arc::new(MemoryStore::default());
        store.steal(15);
        let give_up = CancellationToken::new();
        let timer = give_up.clone();
        let began = Instant::now();
        tokio::spawn(async move {
            sleep(Duration::from_millis(2500)).await;
            timer.cancel();
        });
        let (finished, at) = lead_one_term(&store, give_up, &Events::default(), None).await;
        assert!(
            matches!(finished, Ok(Finish::NotElected(None))),
            "{finished:?}"
        );
        assert_eq!(at - began, Duration::from_millis(2500), "gave up on time");
        // Polled every 1-1.2 s meanwhile: at 0 s, about 1.1 s and about 2.2 s.
        let attempts = store.calls(Op::Acquire);
        assert!((2..=3).contains(&attempts.len()), "{attempts:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_in_flight_when_the_campaign_gives_up_still_leads_its_term() {
        use crate::elector::Finish;
        let store = Arc::new(MemoryStore::default());
        store.set(Op::Acquire, Behaviour::SlowAnswer(secs(2)));
        let give_up = CancellationToken::new();
        let timer = give_up.clone();
        tokio::spawn(async move {
            sleep(secs(1)).await;
            timer.cancel();
        });
        let events = Events::default();
        let (finished, _) = lead_one_term(&store, give_up, &events, Some(secs(1))).await;
        assert!(
            matches!(finished, Ok(Finish::CutShort(TermEnd::Released))),
            "{finished:?}"
        );
        assert_eq!(events.at("start"), vec![Instant::now() - secs(1)]);
        assert_eq!(events.epochs().len(), 1, "the won term ran its task");
    }

    #[tokio::test(start_paused = true)]
    async fn a_term_lost_is_not_campaigned_for_again() {
        use crate::elector::Finish;
        let store = Arc::new(MemoryStore::default());
        let events = Events::default();
        let breaker = (store.clone(), events.clone());
        tokio::spawn(async move {
            breaker.1.wait("start", 1).await;
            breaker.0.break_now();
        });
        // Never gives up campaigning (the one-liner without --try or --timeout).
        let (finished, _) = lead_one_term(&store, CancellationToken::new(), &events, None).await;
        assert!(
            matches!(finished, Ok(Finish::CutShort(TermEnd::Lost))),
            "{finished:?}"
        );
        assert_eq!(events.at("gone").len(), 1, "the task was stopped");
        assert_eq!(store.calls(Op::Acquire).len(), 1, "no second campaign");
    }

    /// `--try` whose one acquire gets no answer in time: the candidate waits for the late
    /// answer (as a stop does) and releases the lease it took before giving up.
    #[tokio::test(start_paused = true)]
    async fn a_late_answer_to_the_one_attempt_is_awaited_and_its_lease_released() {
        use crate::elector::Finish;
        let store = Arc::new(MemoryStore::default());
        let late = timing().request_timeout() + Duration::from_millis(500);
        store.set(Op::Acquire, Behaviour::SlowAnswer(late));
        let began = Instant::now();
        let (finished, at) = lead_one_term(&store, cancelled(), &Events::default(), None).await;
        assert!(
            matches!(
                &finished,
                Ok(Finish::NotElected(Some(StoreError::TimedOut(_))))
            ),
            "{finished:?}"
        );
        assert_eq!(at - began, late, "returned once the late answer came");
        assert!(!store.is_leased(), "its lease was released");
        assert_eq!(store.ids(Op::Release), store.ids(Op::Acquire));
    }
}
