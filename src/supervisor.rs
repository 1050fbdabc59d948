//! One term of leadership, seen from the child's side: start the child, hold it to the lease's
//! deadlines, forward signals, and apply `on_exit`, with the crash-loop backoff: a child that
//! fails soon after its start (a non-zero exit, or death by a signal leasehold did not send; a
//! stop for the lease's sake never counts) ends the term [`TermEnd::CrashLoop`], and this
//! member stands aside for a backoff that doubles with each such failure in a row
//! (`[child].crash_backoff`, docs/configuration.md).
//!
//! The supervisor enforces the deadlines with its own timers, from the [`Tenure`] the keeper
//! publishes: stop signal at `stop_at` (or at once when the lease is lost), SIGKILL of the group
//! at `min(stop signal + G, kill_at)`, an instant it also hands to the child's guard process
//! ([`crate::guard`]), which stops and kills the group on time even if the daemon is frozen,
//! and to the backstop thread ([`crate::backstop`]), which kills at that instant even if this
//! task cannot run. The guard is told before any signal goes out, and whoever sends the stop
//! signal first takes the stop token, so the child gets one. A guard that can no longer be told
//! (dead, or deaf) stops the child. On the stop and kill paths the signal goes out before
//! anything is logged. It returns only when the child and its group are gone, which is what
//! lets the daemon release the lease afterwards (rule 7).

use crate::child::{Child, ChildSpec, Launcher, StopWith, StuckGroup, exit_code};
use crate::clock::{self, SUSPEND_POLL};
use crate::config::{HealthSettings, OnExit, QUICK_EXIT};
use crate::crash_loop::{CrashBackoff, CrashLoop};
use crate::elector::{Phase, Tenure, TermEnd};
use crate::fmt::human;
use crate::health;
use crate::telemetry::{ExitReason, Telemetry};
use nix::sys::signal::{SigSet, Signal};
use std::os::unix::process::ExitStatusExt;
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
    /// SIGTSTP (Ctrl-Z) and SIGCONT so far: each SIGTSTP asks the daemon to step down, then
    /// stop until SIGCONT.
    pub pause: watch::Receiver<Pauses>,
}

/// SIGTSTP and SIGCONT as the daemon received them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pauses {
    /// SIGTSTPs so far.
    pub asked: u64,
    /// SIGCONTs so far.
    pub continued: u64,
    /// `continued` when the last SIGTSTP came: more since, and the stop it asked for was
    /// called off before it began.
    pub continued_at_ask: u64,
}

/// How one run of the child ended.
enum Run {
    /// It ended by itself, with this code (killed by `signal`, if one), after running `ran`;
    /// `failed`: a non-zero code, not from a signal leasehold sent (a forwarded one).
    Exited {
        code: i32,
        ran: Duration,
        signal: Option<Signal>,
        failed: bool,
    },
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
    /// `[child].crash_backoff` and the rest; `None`: off.
    pub crash_backoff: Option<CrashBackoff>,
    pub crash_loop: std::sync::Mutex<CrashLoop>,
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
            let stop = StopWith {
                signal: self.stop_signal,
                grace: self.stop_timeout,
            };
            let run = match self.launcher.start_child(spec, kill_at, stop).await {
                Ok(mut child) => {
                    tracing::info!(pid = child.pid(), epoch, "child started");
                    self.telemetry.child_started(child.pid());
                    let run = self.watch(&mut child, spec, &mut tenure, controls).await;
                    self.ran_for(child.started().elapsed());
                    let cleared = child.clear().await;
                    self.telemetry.child_exited(match run {
                        Run::Exited { .. } => ExitReason::Exited,
                        Run::Stopped(TermEnd::Lost) => ExitReason::LeaseLost,
                        Run::Stopped(TermEnd::Expired) => ExitReason::Deadline,
                        Run::Stopped(TermEnd::Unhealthy { .. }) => ExitReason::Unhealthy,
                        // The guard could no longer be told the deadlines.
                        Run::Stopped(TermEnd::Released) => ExitReason::GuardLost,
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
                        signal: None,
                        failed: true,
                    }
                }
            };
            let (code, ran, signal, failed) = match run {
                Run::Stopped(end) => return end,
                Run::Exited {
                    code,
                    ran,
                    signal,
                    failed,
                } => (code, ran, signal, failed),
            };
            tracing::info!(code, ran = %human(ran), "child exited by itself");
            let crashed = failed && self.crash_backoff.is_some_and(|b| ran < b.window);
            let released = || match crashed {
                true => self.back_off(code, signal, ran),
                false => TermEnd::Released,
            };
            match self.on_exit {
                OnExit::Release => return released(),
                // A one-shot, or a daemon that ends with its child: no campaign to stay out of.
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
                return released();
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

    /// The child failed `ran` after its start, within the crash window: a crash loop. Counts
    /// it, says so (WARN, `/metrics`, `/status`), and returns the end of term that makes this
    /// member stand aside for the backoff, which doubles for the next one.
    fn back_off(&self, code: i32, signal: Option<Signal>, ran: Duration) -> TermEnd {
        let figures = self
            .crash_backoff
            .expect("a crash counts only with a backoff");
        let mut crash = self.crash_loop.lock().unwrap_or_else(|e| e.into_inner());
        let backoff = crash.failed(&figures);
        let how = match signal {
            Some(signal) => format!("killed by {signal}"),
            None => format!("exit code {code}"),
        };
        let last = format!("{how} after {}", human(ran));
        tracing::warn!(
            quick_failures = crash.failures(),
            "the child failed soon after its start ({last}); the next attempt in {} \
             (crash-loop backoff; the line passes over this member meanwhile)",
            human(backoff)
        );
        self.telemetry
            .child_crash_looping(crash.failures(), backoff, last);
        TermEnd::CrashLoop { backoff }
    }

    /// A run that lasted the crash window, however it ended, starts the count of quick
    /// failures again.
    fn ran_for(&self, ran: Duration) {
        let Some(figures) = self.crash_backoff else {
            return;
        };
        let mut crash = self.crash_loop.lock().unwrap_or_else(|e| e.into_inner());
        if crash.ran_for(ran, &figures) {
            tracing::info!(
                "the child ran {}: no crash loop any more, the backoff starts again from its \
                 first step",
                human(ran)
            );
            self.telemetry.child_crash_loop_over();
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
        let mut guarded = true;
        // The guard sent the stop signal (this task was held up past the stop deadline).
        let mut guard_stopped = false;
        // The signals forwarded to the child's group: a death by one of them is no failure.
        let mut forwarded = SigSet::empty();
        loop {
            // Deadlines and the phase are on the lease clock, which counts a machine suspend.
            let tenure_now = *tenure.borrow();
            let shutdown = controls.shutdown.is_cancelled();
            let now = clock::now();
            let step = phase.step(&tenure_now, now, shutdown, self.stop_timeout);
            let mut stop = step.stop;
            // Rule 1: the group is dead by kill_at whatever happens; after a stop signal it gets
            // at most G. The guard is told first (before any signal: it must not send the stop
            // the daemon is sending), then the backstop thread, which kills at the same instant
            // should this task be held up.
            let kill_at = phase.kill_at(&step.deadline, self.stop_timeout);
            if let Err(lost) = child.kill_by(kill_at, phase.stop_began()) {
                // Its deadlines are no longer kept outside the daemon: a failed safety path.
                // The lease is fine, so the term ends as if the child had ended: the lease
                // goes on to the next member.
                if guarded {
                    guarded = false;
                    tracing::error!(pid = child.pid(), "{lost}; stopping the child");
                }
                if let Some(why) = phase.stop(Some(TermEnd::Released), now) {
                    stop = Some(why);
                    let kill_at = phase.kill_at(&step.deadline, self.stop_timeout);
                    let _ = child.kill_by(kill_at, phase.stop_began());
                }
            }
            let kill_at = phase.kill_at(&step.deadline, self.stop_timeout);
            let deadline = step.deadline;
            if let Some(why) = stop {
                guard_stopped = !self.stop(child, why);
            }
            if step.kill {
                child.signal(Signal::SIGKILL);
                if guard_stopped {
                    tracing::info!(
                        pid = child.pid(),
                        "past the kill deadline: SIGKILL to the child's group (its guard sent \
                         one at the deadline)"
                    );
                } else {
                    tracing::warn!(
                        pid = child.pid(),
                        "the child did not stop in time; SIGKILL to its group"
                    );
                }
            }
            tokio::select! {
                status = child.wait() => {
                    let signal = status
                        .as_ref()
                        .ok()
                        .and_then(ExitStatusExt::signal)
                        .and_then(|s| Signal::try_from(s).ok());
                    let code = match status {
                        Ok(s) => exit_code(s),
                        Err(e) => {
                            child.signal(Signal::SIGKILL);
                            tracing::error!(error = %e, "lost track of the child");
                            -1
                        }
                    };
                    // The backstop's or the guard's SIGKILL, at the same instant as ours,
                    // usually lands first; when this task was held up (the daemon paused, the
                    // machine suspended), it may be the first this task hears of a passed
                    // deadline. A guard that sent the stop signal took the stop token.
                    let by_backstop = !phase.is_killed()
                        && code == 128 + Signal::SIGKILL as i32
                        && clock::now() >= kill_at;
                    let by_guard = phase.is_running() && !child.take_stop();
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
                        None if by_backstop || by_guard => {
                            self.telemetry.child_stopping();
                            let late = clock::now().saturating_duration_since(deadline.stop_at);
                            if !by_guard {
                                tracing::warn!(
                                    pid = child.pid(),
                                    "the kill deadline passed before the child could be stopped; \
                                     SIGKILL to its group"
                                );
                            } else if late <= HELD_UP {
                                // The guard's timer fired first, as it does within a few
                                // milliseconds of this daemon's at the same deadline.
                                tracing::info!(
                                    pid = child.pid(),
                                    "the child stopped on its guard's stop signal, sent at the \
                                     stop deadline"
                                );
                            } else {
                                tracing::warn!(
                                    pid = child.pid(),
                                    "this daemon was held up {} past the stop deadline; the \
                                     child's guard stopped it on time",
                                    human(late)
                                );
                            }
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
                        None => Run::Exited {
                            code,
                            ran: child.started().elapsed(),
                            signal,
                            failed: code != 0 && !signal.is_some_and(|s| forwarded.contains(s)),
                        },
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
                    guard_stopped = false;
                    phase.kill_now(TermEnd::Shutdown, clock::now());
                    child.signal(Signal::SIGKILL);
                    tracing::warn!(pid = child.pid(), "second stop request; SIGKILL to the child's group");
                }
                verdict = &mut health, if phase.is_running() => {
                    let why = TermEnd::Unhealthy { cooldown: self.cooldown() };
                    if let Some(why) = phase.stop(Some(why), clock::now()) {
                        let kill_at = phase.kill_at(&deadline, self.stop_timeout);
                        let _ = child.kill_by(kill_at, phase.stop_began());
                        guard_stopped = !self.stop(child, why);
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
                    forwarded.add(signal);
                    tracing::info!(%signal, pid = child.pid(), "forwarded a signal to the child");
                }
            }
        }
    }

    /// Sends the stop signal to the child's group, for `why`, unless its guard sent it already
    /// (the stop deadline came while this daemon was held up). The signal first: nothing, not
    /// even a log line, comes before it.
    /// Returns whether this daemon sent it (false: the guard had).
    fn stop(&self, child: &Child, why: TermEnd) -> bool {
        let ours = child.take_stop();
        if ours {
            child.signal(self.stop_signal);
        }
        self.telemetry.child_stopping();
        if ours {
            tracing::info!(pid = child.pid(), signal = %self.stop_signal, reason = ?why, "stopping the child");
        } else {
            tracing::info!(
                pid = child.pid(),
                signal = %self.stop_signal,
                reason = ?why,
                "stopping the child: its guard had sent the stop signal at the stop deadline"
            );
        }
        ours
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

/// Later than this past the stop deadline, this daemon was held up (frozen, its runtime
/// stalled); sooner, the guard's timer merely fired first at the same deadline.
const HELD_UP: Duration = Duration::from_millis(100);

/// The pauses before restarting a child (`on_exit = "restart"`) that exited quickly: from 1 s
/// doubling up to 30 s, whole (a restart is this daemon's own, nobody's to fall in step with).
fn restart_backoff() -> impl Iterator<Item = Duration> {
    let mut pauses =
        leasehold_core::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(30));
    std::iter::repeat_with(move || pauses.next_pause(1.0))
}

#[cfg(test)]
mod tests;
