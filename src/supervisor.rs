//! One term of leadership, seen from the child's side: start the child, hold it to the lease's
//! deadlines, forward signals, and apply `on_exit`.
//!
//! The supervisor enforces the deadlines with its own timers, from the [`Tenure`] the keeper
//! publishes: stop signal at `stop_at` (or at once when the lease is lost), SIGKILL of the group
//! at `min(stop signal + G, kill_at)`, an instant it also hands to the backstop thread
//! ([`crate::backstop`]), which kills at that instant even if this task cannot run. On the stop
//! and kill paths the signal goes out before anything is logged. It returns only when the child
//! and its group are gone, which is what lets the daemon release the lease afterwards (rule 7).

use crate::child::{Child, ChildSpec, Launcher, StuckGroup, exit_code};
use crate::clock::{self, SUSPEND_POLL};
use crate::config::{HealthSettings, OnExit, QUICK_EXIT};
use crate::elector::{Phase, Tenure, TermEnd};
use crate::fmt::human;
use crate::health;
use crate::telemetry::{ExitReason, Telemetry};
use nix::sys::signal::Signal;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

/// What the daemon asks of a running term from outside: stop, hurry, forward a signal.
pub struct Controls {
    /// SIGTERM/SIGINT: stop the child, release, exit 0.
    pub shutdown: CancellationToken,
    /// A second SIGTERM/SIGINT: SIGKILL the child's group now.
    pub hurry: CancellationToken,
    /// SIGHUP, SIGUSR1, SIGUSR2 for the child's group.
    pub forward: mpsc::Receiver<Signal>,
    /// The signal that asked for the shutdown, once one did: a one-shot run exits with
    /// 128 + its number, as a shell reports a command it killed.
    pub stopped_by: Arc<OnceLock<Signal>>,
}

/// How one run of the child ended.
enum Run {
    /// It ended by itself, with this code.
    Exited { code: i32, ran: Duration },
    /// We stopped it, for this reason.
    Stopped(TermEnd),
}

pub struct Supervisor<'a> {
    pub launcher: &'a Launcher,
    pub telemetry: &'a Telemetry,
    pub stop_signal: Signal,
    pub stop_timeout: Duration,
    pub on_exit: OnExit,
    pub restart_limit: u32,
    pub health: Option<HealthSettings>,
    /// The group of the last run, if some process of it survived SIGKILL: the term ended
    /// [`TermEnd::Overran`], and no other run starts until it is gone.
    pub stuck: std::sync::Mutex<Option<StuckGroup>>,
}

impl Supervisor<'_> {
    /// Runs the child for as long as `tenure` allows. Returns once no process of the child's
    /// group is alive.
    pub async fn run_term(
        &self,
        spec: &ChildSpec,
        epoch: u64,
        mut tenure: watch::Receiver<Tenure>,
        controls: &mut Controls,
    ) -> TermEnd {
        let mut quick_exits = 0u32;
        let mut backoff = restart_backoff();
        loop {
            if let Some(end) = self.check_tenure(&tenure, controls) {
                return end;
            }
            // Signals that came while no child ran were meant for a child that is gone; the new
            // one must not get them at birth.
            while let Ok(signal) = controls.forward.try_recv() {
                tracing::info!(%signal, "dropping a signal received while no child was running");
            }
            let kill_at = tenure.borrow().deadline().kill_at;
            let run = match self.launcher.start_child(spec, kill_at).await {
                Ok(mut child) => {
                    tracing::info!(pid = child.pid(), epoch, "child started");
                    self.telemetry.child_started(child.pid());
                    let run = self.watch(&mut child, spec, &mut tenure, controls).await;
                    let cleared = child.clear().await;
                    self.telemetry.child_exited(match run {
                        Run::Exited { .. } => ExitReason::Exited,
                        Run::Stopped(TermEnd::Lost) => ExitReason::LeaseLost,
                        Run::Stopped(TermEnd::Expired) => ExitReason::Deadline,
                        Run::Stopped(TermEnd::Unhealthy { .. }) => ExitReason::Unhealthy,
                        Run::Stopped(_) => ExitReason::Shutdown,
                    });
                    if let Err(stuck) = cleared {
                        // Rule 7: the lease may move only once the body is gone.
                        tracing::error!(
                            pgid = stuck.pgid(),
                            epoch,
                            "the child's group survives SIGKILL: the lease is neither handed on \
                             nor released, and no child starts, until it is gone"
                        );
                        self.telemetry.child_group_stuck(Some(stuck.pgid()));
                        *self.stuck.lock().unwrap_or_else(|e| e.into_inner()) = Some(stuck);
                        return TermEnd::Overran;
                    }
                    run
                }
                Err(e) => {
                    self.telemetry.child_exited(ExitReason::StartFailed);
                    // Like a shell: 127 for a missing program, 126 for one that cannot run.
                    let code = if e.kind() == std::io::ErrorKind::NotFound {
                        127
                    } else {
                        126
                    };
                    tracing::error!(command = ?spec.command, error = %e, "cannot start the child");
                    Run::Exited {
                        code,
                        ran: Duration::ZERO,
                    }
                }
            };
            let (code, ran) = match run {
                Run::Stopped(end) => return end,
                Run::Exited { code, ran } => (code, ran),
            };
            tracing::info!(code, ran = %human(ran), "child exited by itself");
            match self.on_exit {
                OnExit::Release => return TermEnd::Released,
                OnExit::Exit => return TermEnd::Exit(code),
                OnExit::Restart => {}
            }
            if ran < QUICK_EXIT {
                quick_exits += 1;
            } else {
                quick_exits = 0;
                backoff = restart_backoff();
            }
            if quick_exits > self.restart_limit {
                tracing::warn!(
                    quick_exits,
                    "the child keeps exiting quickly; releasing the lease instead of restarting"
                );
                return TermEnd::Released;
            }
            let pause = backoff.next().unwrap_or(Duration::from_secs(30));
            tracing::info!(epoch, "restarting the child in {}", human(pause));
            self.telemetry.child_restarting();
            let until = Instant::now() + pause;
            while Instant::now() < until {
                if let Some(end) = self.check_tenure(&tenure, controls) {
                    return end;
                }
                let stop_at = tenure.borrow().deadline().stop_at;
                tokio::select! {
                    () = sleep_until(until) => {}
                    () = clock::sleep_until(stop_at) => {}
                    _ = tenure.changed() => {}
                    () = controls.shutdown.cancelled() => {}
                }
            }
        }
    }

    /// Whether a new run of the child may start: only under a held lease with time left before
    /// the stop deadline, and not while shutting down.
    fn check_tenure(
        &self,
        tenure: &watch::Receiver<Tenure>,
        controls: &Controls,
    ) -> Option<TermEnd> {
        let end = if controls.shutdown.is_cancelled() {
            TermEnd::Shutdown
        } else {
            match *tenure.borrow() {
                Tenure::Held(d) if clock::now() < d.stop_at => return None,
                Tenure::Lost(_) => TermEnd::Lost,
                _ => TermEnd::Expired,
            }
        };
        self.telemetry.stepping_down();
        Some(end)
    }

    /// Watches one run, holding it to rule 1 with a [`Phase`]: returns when the group leader
    /// has exited.
    async fn watch(
        &self,
        child: &mut Child,
        spec: &ChildSpec,
        tenure: &mut watch::Receiver<Tenure>,
        controls: &mut Controls,
    ) -> Run {
        // Checks run only while this child runs under a held lease: the future lives in this
        // function and is polled only until the stop begins.
        let started = child.started();
        let health = async {
            match &self.health {
                Some(h) => health::until_unhealthy(h, spec, self.telemetry, started).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(health);
        let mut phase = Phase::Running;
        let mut keeper_alive = true;
        loop {
            // Deadlines and the phase are on the lease clock, which counts a machine suspend.
            let tenure_now = *tenure.borrow();
            let shutdown = controls.shutdown.is_cancelled();
            let step = phase.step(&tenure_now, clock::now(), shutdown, self.stop_timeout);
            let (deadline, kill_at) = (step.deadline, step.kill_at);
            if let Some(why) = step.stop {
                self.stop(child, why);
            }
            // Rule 1: the group is dead by kill_at whatever happens; after a stop signal it gets
            // at most G. The backstop thread kills at the same instant, should this task be
            // held up.
            child.kill_by(kill_at);
            if step.kill {
                child.signal(Signal::SIGKILL);
                tracing::warn!(
                    pid = child.pid(),
                    "the child did not stop in time; SIGKILL to its group"
                );
            }
            tokio::select! {
                status = child.wait() => {
                    let code = match status {
                        Ok(s) => exit_code(s),
                        Err(e) => {
                            child.signal(Signal::SIGKILL);
                            tracing::error!(error = %e, "lost track of the child");
                            -1
                        }
                    };
                    // The backstop's SIGKILL, at the same instant as ours, usually lands first;
                    // when this task was held up (the daemon paused, the machine suspended), it
                    // may be the first this task hears of a passed deadline.
                    let by_backstop = !phase.is_killed()
                        && code == 128 + Signal::SIGKILL as i32
                        && clock::now() >= kill_at;
                    let stopped = match phase.why() {
                        Some(why) => {
                            if by_backstop {
                                tracing::warn!(
                                    pid = child.pid(),
                                    "the child did not stop in time; SIGKILL to its group"
                                );
                            }
                            Some(why)
                        }
                        // Killed for the lease's sake, not an exit of its own: on_exit must not
                        // apply.
                        None if by_backstop => {
                            self.telemetry.child_stopping();
                            tracing::warn!(
                                pid = child.pid(),
                                "the kill deadline passed before the child could be stopped; \
                                 SIGKILL to its group"
                            );
                            Some(match *tenure.borrow() {
                                Tenure::Lost(_) => TermEnd::Lost,
                                _ => TermEnd::Expired,
                            })
                        }
                        None => None,
                    };
                    return match stopped {
                        Some(why) => {
                            tracing::info!(code, "child stopped");
                            Run::Stopped(why)
                        }
                        None => Run::Exited { code, ran: child.started().elapsed() },
                    };
                }
                () = clock::sleep_until(deadline.stop_at), if phase.is_running() => {}
                () = clock::sleep_until(kill_at), if phase.is_stopping() => {}
                // Timers run on CLOCK_MONOTONIC, which stands still while the machine sleeps; this
                // re-reads the lease clock so that a stale child dies soon after a resume.
                () = sleep(SUSPEND_POLL), if !phase.is_killed() => {}
                changed = tenure.changed(), if keeper_alive => keeper_alive = changed.is_ok(),
                () = controls.shutdown.cancelled(), if phase.is_running() => {}
                () = controls.hurry.cancelled(), if !phase.is_killed() => {
                    phase.kill_now(TermEnd::Shutdown, clock::now());
                    child.signal(Signal::SIGKILL);
                    tracing::warn!(pid = child.pid(), "second stop request; SIGKILL to the child's group");
                }
                verdict = &mut health, if phase.is_running() => {
                    let why = TermEnd::Unhealthy { cooldown: self.cooldown() };
                    if let Some(why) = phase.stop(Some(why), clock::now()) {
                        self.stop(child, why);
                    }
                    tracing::warn!(
                        pid = child.pid(),
                        failures = verdict.failures,
                        "the child is unhealthy; last check: {}",
                        verdict.last
                    );
                }
                Some(signal) = controls.forward.recv() => {
                    child.signal(signal);
                    tracing::info!(%signal, pid = child.pid(), "forwarded a signal to the child");
                }
            }
        }
    }

    /// Sends the stop signal to the child's group, for `why`. The signal first: nothing, not
    /// even a log line, comes before it.
    fn stop(&self, child: &Child, why: TermEnd) {
        child.signal(self.stop_signal);
        self.telemetry.child_stopping();
        tracing::info!(pid = child.pid(), signal = %self.stop_signal, reason = ?why, "stopping the child");
    }

    /// The group of an earlier run that survived SIGKILL, while it lives; forgets it (and says
    /// so) once it is gone.
    pub fn stuck_group(&self) -> Option<StuckGroup> {
        let mut stuck = self.stuck.lock().unwrap_or_else(|e| e.into_inner());
        if stuck.as_ref().is_some_and(StuckGroup::is_gone) {
            let group = stuck.take().expect("checked");
            tracing::warn!(
                pgid = group.pgid(),
                "the child's stuck group is gone at last"
            );
            self.telemetry.child_group_stuck(None);
        }
        stuck.clone()
    }

    /// How long this instance stays out of the election after stepping down unhealthy.
    fn cooldown(&self) -> Duration {
        self.health.as_ref().map_or(Duration::ZERO, |h| h.cooldown)
    }
}

fn restart_backoff() -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(30))
        .without_max_times()
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timing::{Deadline, Timing};

    /// What a supervisor under test needs: a launcher of its own, and telemetry.
    struct Rig {
        launcher: Launcher,
        telemetry: Telemetry,
    }

    impl Rig {
        fn new() -> Self {
            Self {
                launcher: Launcher::start().unwrap(),
                telemetry: Telemetry::for_tests(),
            }
        }

        /// A supervisor of this rig's children with stop timeout `G` and `on_exit`.
        fn supervisor(&self, stop_timeout: Duration, on_exit: OnExit) -> Supervisor<'_> {
            Supervisor {
                launcher: &self.launcher,
                telemetry: &self.telemetry,
                stop_signal: Signal::SIGTERM,
                stop_timeout,
                on_exit,
                restart_limit: 0,
                health: None,
                stuck: Default::default(),
            }
        }
    }

    /// The child `sh -c SCRIPT`.
    fn shell(script: &str) -> ChildSpec {
        ChildSpec {
            command: vec!["sh".into(), "-c".into(), script.into()],
            env: vec![],
            remove_env: vec![],
            working_dir: None,
            pass_stdin: false,
        }
    }

    /// Controls nobody uses: no shutdown, no signals.
    fn quiet() -> Controls {
        let (_forward, forward) = mpsc::channel(1);
        Controls {
            shutdown: CancellationToken::new(),
            hurry: CancellationToken::new(),
            forward,
            stopped_by: Arc::default(),
        }
    }

    /// A child that ignores the stop signal: it ends only by a SIGKILL.
    const STUBBORN: &str = "trap '' TERM; sleep 60 & wait";

    /// A machine suspend cannot be made in a test; the lease clock is told of one instead
    /// (`clock::fake`), exactly as CLOCK_BOOTTIME would report it after a resume.
    #[tokio::test]
    async fn a_resume_past_the_deadline_stops_the_child_within_the_poll() {
        let rig = Rig::new();
        let supervisor = rig.supervisor(Duration::from_secs(5), OnExit::Release);
        // It ends only by the SIGKILL at kill_at.
        let spec = shell(STUBBORN);
        let timing = Timing::default(); // L = 15 s, R = 4 s, M = 1 s, G = 5 s
        // Stop deadline 9 s away, kill deadline 14 s away; no renew will come.
        let (_keeper, tenure) =
            watch::channel(Tenure::Held(Deadline::from_sent(clock::now(), &timing)));
        let mut controls = quiet();
        let term = supervisor.run_term(&spec, 1, tenure, &mut controls);
        let sleep_then_resume = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            // The machine slept 20 s: on the server the lease has expired, and the kill
            // deadline (14 s after t_s) has passed too.
            clock::fake::suspend(Duration::from_secs(20));
            Instant::now()
        };
        let (end, resumed) = tokio::join!(term, sleep_then_resume);
        let took = resumed.elapsed();
        println!(
            "child killed {} after the resume (bound: the {} poll plus 100 ms)",
            human(took),
            human(SUSPEND_POLL)
        );
        assert_eq!(end, TermEnd::Expired);
        assert!(
            took <= SUSPEND_POLL + Duration::from_millis(100),
            "{took:?}"
        );
    }

    /// Rule 7 with a group that survives SIGKILL (a process stuck in the kernel, which no test
    /// can make at will: the launcher's process table pins the group alive instead). The term
    /// ends Overran, the group is kept, `status` and the metric say so, and once the group is
    /// gone all of that clears.
    #[tokio::test]
    async fn a_group_that_survives_sigkill_ends_the_term_overran_and_is_reported() {
        let rig = Rig::new();
        let supervisor = rig.supervisor(Duration::from_millis(100), OnExit::Release);
        let deadline = Deadline::from_sent(clock::now(), &Timing::default());
        let (keeper, tenure) = watch::channel(Tenure::Held(deadline));
        let mut controls = quiet();
        let spec = shell("sleep 60");
        let term = supervisor.run_term(&spec, 7, tenure, &mut controls);
        let lose = async {
            // Started (the status shows a child), then pinned, then the lease is lost.
            let until = Instant::now() + Duration::from_secs(5);
            while rig.telemetry.status().child.is_none() {
                assert!(Instant::now() < until, "the child never started");
                sleep(Duration::from_millis(5)).await;
            }
            rig.launcher.table().pin(true);
            keeper.send(Tenure::Lost(deadline)).unwrap();
            Instant::now()
        };
        let (end, lost) = tokio::join!(term, lose);
        let took = lost.elapsed();
        println!(
            "term ended {} after the lease was lost, its group counted alive",
            human(took)
        );
        assert_eq!(end, TermEnd::Overran);
        // clear() gives a group 2 s to go.
        assert!(took >= Duration::from_secs(2), "{took:?}");
        let stuck = supervisor.stuck_group().expect("the stuck group is kept");
        let report = rig.telemetry.status();
        assert_eq!(
            report.stuck_group.as_ref().map(|g| g.pgid),
            Some(stuck.pgid())
        );
        let gauge = |text: String| {
            text.lines()
                .find(|l| l.starts_with("leasehold_child_group_stuck"))
                .map(|l| l.rsplit(' ').next().unwrap().to_owned())
        };
        assert_eq!(gauge(rig.telemetry.metrics_text()).as_deref(), Some("1"));
        // Still pinned: it does not resolve.
        assert!(
            tokio::time::timeout(Duration::from_millis(200), stuck.gone())
                .await
                .is_err()
        );

        rig.launcher.table().pin(false);
        tokio::time::timeout(Duration::from_secs(1), stuck.gone())
            .await
            .expect("gone once unpinned");
        assert!(supervisor.stuck_group().is_none());
        assert!(rig.telemetry.status().stuck_group.is_none());
        assert_eq!(gauge(rig.telemetry.metrics_text()).as_deref(), Some("0"));
    }

    /// Log lines of the current thread, for assertions.
    #[derive(Clone, Default)]
    struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    /// A child that ignores the stop signal is SIGKILLed G later, by the backstop thread or by
    /// the supervisor, whichever comes first; either way the log says it did not stop in time.
    #[tokio::test]
    async fn a_child_that_ignores_the_stop_signal_is_killed_after_g_and_that_is_logged() {
        let captured = Captured::default();
        let _logs = tracing::subscriber::set_default(
            tracing_subscriber::fmt()
                .with_writer(captured.clone())
                .with_ansi(false)
                .finish(),
        );
        // tracing caches each callsite's interest for all threads. While a single scoped
        // subscriber is registered, it asks only the subscriber of the thread that hits the
        // callsite first, and another test's thread (without one) would have this thread's
        // events dropped. With a second one registered, every registered subscriber is asked.
        let _second = tracing::Dispatch::new(tracing_subscriber::registry());
        let rig = Rig::new();
        let stop_timeout = Duration::from_millis(300);
        let supervisor = rig.supervisor(stop_timeout, OnExit::Release);
        let spec = shell(STUBBORN);
        let deadline = Deadline::from_sent(clock::now(), &Timing::default());
        let (keeper, tenure) = watch::channel(Tenure::Held(deadline));
        let mut controls = quiet();
        let term = supervisor.run_term(&spec, 1, tenure, &mut controls);
        let lose = async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            keeper.send(Tenure::Lost(deadline)).unwrap();
            Instant::now()
        };
        let (end, lost) = tokio::join!(term, lose);
        let took = lost.elapsed();
        let log = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        println!("stubborn child gone {took:?} after the lease was lost (G = {stop_timeout:?})");
        assert_eq!(end, TermEnd::Lost);
        assert!(log.contains("stopping the child"), "{log}");
        assert!(log.contains("did not stop in time"), "{log}");
        assert!(log.contains("child stopped code=137"), "{log}");
        // Well before the kill deadline (14 s away): G after the stop signal.
        assert!(took >= stop_timeout && took < stop_timeout + Duration::from_secs(1));
    }

    /// The runtime is held up (like a paused daemon) past both deadlines: the backstop kills the
    /// child at its kill instant, and when the runtime runs again the supervisor may hear of the
    /// child's end before it notices the deadline. That is a stop for the lease's sake, never an
    /// exit of the child's own: with `on_exit = "exit"` the daemon would otherwise exit with 137.
    /// Which the supervisor sees first is up to `select!`, hence a few rounds.
    #[tokio::test]
    async fn a_child_killed_by_the_backstop_while_the_runtime_was_held_up_was_stopped() {
        let rig = Rig::new();
        let supervisor = rig.supervisor(Duration::from_millis(200), OnExit::Exit);
        let spec = shell("exec sleep 60");
        for round in 0..5 {
            let now = clock::now();
            let deadline = Deadline {
                sent: now,
                stop_at: now + Duration::from_millis(200),
                kill_at: now + Duration::from_millis(400),
            };
            let (_keeper, tenure) = watch::channel(Tenure::Held(deadline));
            let mut controls = quiet();
            let term = supervisor.run_term(&spec, 1, tenure, &mut controls);
            let hold_up = async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                // Blocks this current-thread runtime's only worker across both deadlines.
                std::thread::sleep(Duration::from_millis(600));
            };
            let (end, ()) = tokio::join!(term, hold_up);
            assert_eq!(end, TermEnd::Expired, "round {round}");
        }
    }
}
