//! A simulated body's own life, and its guard: what runs on when the daemon that started them
//! is frozen (docs/safety.md, "The guard").
//!
//! A body's process ([`Process`]) lives in tasks of its host: for a daemon's child, the
//! member's machine (a gate apart from the daemon's, which only a pause of the whole machine
//! freezes); for the library's task, the member's own process (frozen with it). It ends by
//! itself when its plan says (released, asking to exit, or failing at once: a broken deploy),
//! stops within its drawn time once it got its stop signal (or ignores it), dies at SIGKILL
//! unless it is stuck in the kernel (then it is gone at last a drawn while later). Whoever
//! sends its stop signal first (the daemon or its guard) sends the only one: a second is a
//! no-op, as the stop token makes it (src/guard.rs). Every change is recorded at the instant it
//! happens, whoever caused it. Its instants are tokio's, a history's lease clock.
//!
//! A daemon's child also has a guard ([`guard`]): the real rules of [`Deadlines`] on virtual-time
//! timers, told each new kill deadline by the daemon's body loop over a channel (the pipe). At
//! `deadline - G` it sends the stop signal, at the deadline SIGKILL; when the channel closes
//! (the daemon died) it kills at once. A library member has none.

use super::trace::{MemberId, Recorder, What};
use crate::guard::{Deadlines, Order};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, mpsc, watch};
use tokio::time::Instant;

/// How a body ends by itself, if it does (drawn when it starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Own {
    /// It exits 0 (`on_exit = "release"`).
    Released,
    /// It exits, asking the daemon to exit with its code (`on_exit = "exit"`).
    Exit,
    /// It exits non-zero soon after its start: a broken deploy (the crash-loop backoff).
    Fails,
}

/// How one body's process lives, drawn when it starts.
#[derive(Debug, Clone, Copy)]
pub(super) struct Life {
    /// How long it takes to stop once told to (`None`: it ignores the stop and is killed).
    pub stops_in: Option<Duration>,
    /// It ends by itself this long after its start, this way.
    pub ends: Option<(Duration, Own)>,
    /// It survives its kill, for this long (a process stuck in the kernel).
    pub stuck: Option<Duration>,
}

/// Where a body's process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    /// Before its stop signal.
    Running,
    /// Its stop signal came at `since`.
    Stopping { since: Instant },
    /// It survived its kill; it is gone at last at `until`.
    Stuck { until: Instant },
    /// It is gone, so.
    Gone(&'static str),
}

struct State {
    stage: Stage,
    started: Instant,
    /// When it was gone.
    ended: Option<Instant>,
    life: Life,
}

/// One body's process, shared by the daemon's body loop, the process's own task and its guard.
#[derive(Clone)]
pub(super) struct Process {
    state: Arc<Mutex<State>>,
    /// Bumped at every change of stage: the daemon's loop and the guard wait on it.
    changed: Arc<watch::Sender<()>>,
    recorder: Recorder,
    member: MemberId,
    slot: u32,
    epoch: u64,
}

impl Process {
    /// The process of the body of `epoch` in `slot`, started now with `life`: recorded, and its
    /// own life run as a task of `host`.
    pub fn start(
        recorder: &Recorder,
        (member, slot, epoch): (MemberId, u32, u64),
        life: Life,
        host: &Arc<super::gate::Gate>,
        told_to_end: Option<Arc<Notify>>,
    ) -> Self {
        let process = Self {
            state: Arc::new(Mutex::new(State {
                stage: Stage::Running,
                started: Instant::now(),
                ended: None,
                life,
            })),
            changed: Arc::new(watch::channel(()).0),
            recorder: recorder.clone(),
            member,
            slot,
            epoch,
        };
        host.spawn(process.clone().live(told_to_end));
        process
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    pub fn stage(&self) -> Stage {
        self.with(|s| s.stage)
    }

    /// How long it ran, from its start to its end (or now): the child's own run, as the
    /// trace shows it (rule (h) reads the same).
    pub fn ran(&self) -> Duration {
        let (started, ended) = self.with(|s| (s.started, s.ended));
        ended
            .unwrap_or_else(Instant::now)
            .saturating_duration_since(started)
    }

    /// A receiver that sees each change of stage from now on.
    pub fn watch(&self) -> watch::Receiver<()> {
        self.changed.subscribe()
    }

    fn set(&self, stage: Stage) {
        self.with(|s| s.stage = stage);
        self.changed.send_replace(());
    }

    fn gone(&self, how: &'static str) {
        self.with(|s| s.ended = Some(Instant::now()));
        self.set(Stage::Gone(how));
        self.recorder.record(What::BodyGone {
            member: self.member,
            slot: self.slot,
            epoch: self.epoch,
            how,
        });
        self.recorder.line();
    }

    /// Its stop signal. Returns whether this one sent it (only the first does).
    pub fn stop(&self) -> bool {
        if self.stage() != Stage::Running {
            return false;
        }
        self.set(Stage::Stopping {
            since: Instant::now(),
        });
        self.recorder.record(What::BodyStopping {
            member: self.member,
            slot: self.slot,
            epoch: self.epoch,
        });
        self.recorder.line();
        true
    }

    /// SIGKILL: gone at once, unless it is stuck in the kernel.
    pub fn kill(&self) {
        if !matches!(self.stage(), Stage::Running | Stage::Stopping { .. }) {
            return;
        }
        match self.with(|s| s.life.stuck) {
            Some(stuck) => {
                self.set(Stage::Stuck {
                    until: Instant::now() + stuck,
                });
                self.recorder.record(What::BodyStuck {
                    member: self.member,
                    slot: self.slot,
                    epoch: self.epoch,
                });
            }
            None => self.gone("killed"),
        }
    }

    /// Its member died (SIGKILL of the daemon, whose guard kills the group at once; or of the
    /// program whose task it is): gone at once, stuck or not.
    pub fn crash(&self) {
        match self.stage() {
            Stage::Gone(_) => {}
            Stage::Stuck { .. } => self.gone("gone at last after surviving its kill"),
            _ => self.gone("crashed with its member"),
        }
    }

    /// Its own life: it ends by itself, stops, or is gone at last after surviving its kill,
    /// each when its time comes.
    async fn live(self, told_to_end: Option<Arc<Notify>>) {
        let mut changed = self.watch();
        loop {
            let (stage, started, life) = self.with(|s| (s.stage, s.started, s.life));
            let now = Instant::now();
            let next = match stage {
                Stage::Gone(_) => return,
                Stage::Running => match life.ends {
                    Some((after, own)) if now >= started + after => {
                        self.gone(match own {
                            Own::Released => "ended by itself",
                            Own::Exit => "ended by itself, asking to exit",
                            Own::Fails => "failed at once",
                        });
                        return;
                    }
                    Some((after, _)) => Some(started + after),
                    None => None,
                },
                Stage::Stopping { since } => match life.stops_in {
                    Some(d) if now >= since + d => {
                        self.gone("stopped");
                        return;
                    }
                    Some(d) => Some(since + d),
                    None => None,
                },
                Stage::Stuck { until } if now >= until => {
                    self.gone("gone at last after surviving its kill");
                    return;
                }
                Stage::Stuck { until } => Some(until),
            };
            let told = async {
                match (&told_to_end, stage) {
                    (Some(end), Stage::Running) => end.notified().await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                _ = changed.changed() => {}
                () = told => {
                    let now = Instant::now();
                    self.with(|s| {
                        s.life.ends = Some((now.saturating_duration_since(s.started), Own::Released));
                    });
                }
                () = sleep_or_never(next) => {}
            }
        }
    }
}

async fn sleep_or_never(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The daemon's end of a guard: it tells the guard each new kill deadline, and closes the
/// channel when it dies (dropped with the daemon's task).
pub(super) struct GuardLink {
    orders: mpsc::UnboundedSender<Order>,
    /// The last order told (the real daemon writes only a new one, src/guard.rs `GuardLink`).
    told: Option<Order>,
    /// The instant the guard's clock counts from.
    base: Instant,
}

impl GuardLink {
    /// Tells the guard the group must be dead by `kill_at`, and when the stop began (if it
    /// has), unless that is what it was told last.
    pub fn tell(&mut self, kill_at: Instant, stop_begun: Option<Instant>) {
        let order = Order {
            kill_at: nanos(self.base, kill_at),
            stop_begun: stop_begun.map_or(0, |s| nanos(self.base, s).max(1)),
        };
        if self.told != Some(order) {
            self.told = Some(order);
            let _ = self.orders.send(order);
        }
    }
}

/// `at` as nanoseconds since `base`: the guard's clock.
fn nanos(base: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(base).as_nanos() as u64
}

/// Starts the guard of `process` on `machine`: stop signal at `kill_at - G`, SIGKILL at
/// `kill_at`, as the daemon's latest order moves them; SIGKILL at once when the daemon is gone.
pub(super) fn guard(
    process: &Process,
    machine: &Arc<super::gate::Gate>,
    grace: Duration,
    kill_at: Instant,
    mutant: crate::mutant::Switch,
) -> GuardLink {
    let base = process.recorder.start();
    let (orders, mut told) = mpsc::unbounded_channel();
    let process = process.clone();
    let mut watch =
        Deadlines::new(grace.as_nanos() as u64, nanos(base, kill_at)).with_mutant(mutant);
    machine.spawn(async move {
        let mut changed = process.watch();
        loop {
            // Every order already on the pipe first, as the real guard reads them.
            loop {
                match told.try_recv() {
                    Ok(order) => watch.order(order),
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        process.crash();
                        return;
                    }
                }
            }
            let due = watch.due(nanos(base, Instant::now()));
            if due.stop {
                process.stop();
            }
            if due.kill {
                process.kill();
            }
            if matches!(process.stage(), Stage::Gone(_)) {
                return;
            }
            let next = watch.next().map(|n| base + Duration::from_nanos(n));
            tokio::select! {
                biased;
                order = told.recv() => match order {
                    Some(order) => watch.order(order),
                    None => {
                        process.crash();
                        return;
                    }
                },
                _ = changed.changed() => {}
                () = sleep_or_never(next) => {}
            }
        }
    });
    GuardLink {
        orders,
        told: None,
        base,
    }
}

/// A body's process as its daemon holds it, with its guard's link if it has one. Dropped with
/// the daemon's body loop (its member killed): a daemon's child is killed by its guard, which
/// sees its pipe close; the library's task dies with its program at once.
pub(super) struct Lifeline {
    pub process: Process,
    pub guard: Option<GuardLink>,
}

impl Drop for Lifeline {
    fn drop(&mut self) {
        if self.guard.is_none() {
            self.process.crash();
        }
    }
}
