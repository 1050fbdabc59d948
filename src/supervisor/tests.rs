//! The supervisor with real children: a resume past the deadline, a group that survives
//! SIGKILL, a child that ignores the stop signal, one the backstop killed.

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
            crash_backoff: None,
            crash_loop: Default::default(),
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
        pause: watch::channel(Pauses::default()).1,
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

/// The crash-loop backoff, one term per run of the child under a far deadline: a quick failure
/// (exit 1, or death by a signal leasehold did not send) ends the term `CrashLoop` with a
/// backoff that doubles up to the maximum; a quick exit 0 and a death by a forwarded signal are
/// no failures; a run as long as the crash window starts the count again.
#[tokio::test]
async fn a_child_that_fails_soon_after_its_start_backs_off_doubling_until_a_long_run() {
    let rig = Rig::new();
    let mut supervisor = rig.supervisor(Duration::from_millis(200), OnExit::Release);
    supervisor.crash_backoff = Some(crate::crash_loop::CrashBackoff {
        first: Duration::from_secs(1),
        max: Duration::from_secs(4),
        window: Duration::from_millis(500),
    });
    let (forward, receiver) = mpsc::channel(1);
    let mut controls = Controls {
        forward: receiver,
        ..quiet()
    };
    let mut term = async |script: &str, forwarding: Option<Signal>| {
        let deadline = Deadline::from_sent(clock::now(), &Timing::default());
        let (_keeper, tenure) = watch::channel(Tenure::Held(deadline));
        let spec = shell(script);
        let run = supervisor.run_term(&spec, 1, tenure, &mut controls);
        let forward = async {
            if let Some(signal) = forwarding {
                tokio::time::sleep(Duration::from_millis(100)).await;
                forward.send(signal).await.unwrap();
            }
        };
        tokio::join!(run, forward).0
    };
    let backoff = |s: u64| TermEnd::CrashLoop {
        backoff: Duration::from_secs(s),
    };
    assert_eq!(term("exit 1", None).await, backoff(1));
    assert_eq!(term("exit 0", None).await, TermEnd::Released, "no failure");
    assert_eq!(term("kill -SEGV $$", None).await, backoff(2), "not ours");
    assert_eq!(term("exit 3", None).await, backoff(4));
    assert_eq!(term("exit 1", None).await, backoff(4), "the maximum");
    assert_eq!(
        term("exec sleep 5", Some(Signal::SIGUSR1)).await,
        TermEnd::Released,
        "killed by a signal leasehold forwarded"
    );
    let status = rig.telemetry.status();
    let crash = status.crash_loop.expect("shown in /status");
    assert_eq!((crash.quick_failures, crash.backoff_seconds), (4, 4.0));
    assert!(
        crash.last_failure.starts_with("exit code 1 after "),
        "{}",
        crash.last_failure
    );
    assert_eq!(
        term("sleep 0.6; exit 1", None).await,
        TermEnd::Released,
        "a failure after the window is no crash, and the count starts again"
    );
    assert!(rig.telemetry.status().crash_loop.is_none());
    assert_eq!(term("exit 1", None).await, backoff(1));
    let metrics = rig.telemetry.metrics_text();
    assert!(
        metrics.contains("leasehold_child_backoffs_total{lease=\"c/b\"} 5"),
        "{metrics}"
    );
    assert!(
        metrics.contains("leasehold_child_quick_failures{lease=\"c/b\"} 1"),
        "{metrics}"
    );
}
