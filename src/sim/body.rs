//! The simulated body of a term, from its daemon's side: what the daemon's child supervisor
//! (or the library's task runner) does, holding the body to rule 1 by the same [`Phase`] as
//! the child supervisor and the library's task. The body's own life runs outside the member's
//! gate (src/sim/process.rs), with its guard for a daemon's child, so that freezing the daemon
//! does not freeze them. Its life is drawn from the seed (how long it takes to stop, whether
//! it ends by itself, fails its health checks, asks the daemon to exit, or fails at once while
//! its member's deploy is broken), and recorded: its start here, its stop and end where they
//! happen. A body that fails at once within the crash window makes its member stand aside for
//! the crash-loop backoff, counted by the production rule ([`CrashLoop`]).
//!
//! Its instants are tokio's: a history's lease clock is tokio's paused time
//! (`clock::Clock::Simulated`, which its electors read).

use super::dice::Dice;
use super::gate::Gate;
use super::process::{self, Life, Lifeline, Own, Process, Stage};
use super::trace::{MemberId, Recorder, What};
use crate::crash_loop::{CrashBackoff, CrashLoop};
use crate::elector::{Body, Phase, Tenure, Term, TermEnd};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How one body lives, drawn when it starts: its process's own life, and whether it fails its
/// health checks (the daemon's judgement, so the daemon's side).
#[derive(Debug, Clone, Copy)]
pub(super) struct Plan {
    pub(super) life: Life,
    /// It fails its health checks this long after its start: it is stopped, and the member
    /// stands by for the cooldown.
    pub(super) unhealthy: Option<(Duration, Duration)>,
}

/// A broken deploy: until then, a member's bodies fail at once (shared by the world, which
/// breaks and fixes it, and the member's bodies).
pub(crate) type Broken = Arc<Mutex<Option<Instant>>>;

/// How soon after its start a body of a broken deploy fails, at most (well within the crash
/// window: each failure counts).
const FAILS_WITHIN: Duration = Duration::from_secs(2);

/// How the bodies of a history live.
#[derive(Clone)]
pub(crate) enum Plans {
    /// Drawn from each member's stream of bodies: quick or slow to stop, ending by themselves
    /// now and then, surviving their kill now and then.
    Drawn,
    /// As a script says: each stops within `stops_in` of its stop signal, and ends by itself
    /// only when the script says so ([`Ends::end`]).
    Scripted { stops_in: Duration, ends: Ends },
}

/// One member's word to end its body: who, and the notice it waits on.
type EndWord = (MemberId, std::sync::Arc<tokio::sync::Notify>);

/// The script's word that a member's body ends by itself now.
#[derive(Clone, Default)]
pub(crate) struct Ends(std::sync::Arc<std::sync::Mutex<Vec<EndWord>>>);

impl Ends {
    fn of(&self, member: MemberId) -> std::sync::Arc<tokio::sync::Notify> {
        let mut ends = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match ends.iter().find(|(m, _)| *m == member) {
            Some((_, n)) => n.clone(),
            None => {
                let n = std::sync::Arc::new(tokio::sync::Notify::new());
                ends.push((member, n.clone()));
                n
            }
        }
    }

    /// The body `member` runs now ends by itself (`on_exit = "release"`).
    pub fn end(&self, member: MemberId) {
        self.of(member).notify_one();
    }
}

/// Where a member's bodies run, and who guards them.
#[derive(Clone)]
pub(crate) struct Host {
    /// The tasks of its bodies' processes: the member's machine for a daemon's child (a pause
    /// of the whole machine freezes it, a freeze of the daemon alone does not), the member's
    /// own process for the library's task.
    pub gate: Arc<Gate>,
    /// A daemon's child, with a guard; the library's task has none.
    pub guarded: bool,
    /// Its deploy, broken until an instant or not.
    pub broken: Broken,
    /// The rule its guards break on purpose, if any.
    pub mutant: crate::mutant::Switch,
}

/// The body of every term of one simulated member.
pub(crate) struct SimBody {
    member: MemberId,
    recorder: Recorder,
    /// `G`.
    grace: Duration,
    /// A body that survived its kill, until it is gone at last.
    stuck: Option<Lifeline>,
    plans: Plans,
    /// Where drawn plans come from.
    dice: Dice,
    host: Host,
    /// Quick failures in a row, over this process's terms (a restarted daemon counts anew).
    crash_loop: CrashLoop,
    /// `[child].crash_backoff`, `crash_backoff_max`, `crash_window`: the defaults.
    figures: CrashBackoff,
}

impl SimBody {
    pub fn new(
        member: MemberId,
        recorder: Recorder,
        grace: Duration,
        plans: Plans,
        dice: Dice,
        host: Host,
    ) -> Self {
        Self {
            member,
            recorder,
            grace,
            stuck: None,
            plans,
            dice,
            host,
            crash_loop: CrashLoop::default(),
            figures: CrashBackoff::default(),
        }
    }

    fn plan(&self) -> Plan {
        // A daemon's child while its deploy is broken fails soon after its start (the
        // library's task has no crash loop: it is code of the program itself).
        let broken = self.host.guarded
            && (*self.host.broken.lock().unwrap_or_else(|e| e.into_inner()))
                .is_some_and(|until| Instant::now() < until);
        if let Plans::Scripted { stops_in, .. } = &self.plans {
            return scripted_plan(*stops_in, broken);
        }
        draw_plan(&self.dice, self.grace, broken)
    }
    /// Why the term ended, now that its body is gone `how` after running `ran`: as the child
    /// supervisor tells it.
    fn ended(&mut self, how: &str, phase: &Phase, tenure: &Tenure, ran: Duration) -> TermEnd {
        // A run that lasted the crash window starts the count again, however it ended.
        self.crash_loop.ran_for(ran, &self.figures);
        if let Some(why) = phase.why() {
            if let TermEnd::Unhealthy { cooldown } = why {
                // The elector counts a step-down's standby from the body's end (src/elector/lead.rs).
                self.recorder.record(What::StandbyMoved {
                    member: self.member,
                    until: self.recorder.now() + cooldown,
                });
            }
            return why;
        }
        match how {
            "ended by itself" => TermEnd::Released,
            "ended by itself, asking to exit" => TermEnd::Exit(0),
            "failed at once" if ran < self.figures.window => {
                let backoff = self.crash_loop.failed(&self.figures);
                self.recorder.record(What::Standby {
                    member: self.member,
                    until: self.recorder.now() + backoff,
                });
                self.recorder.line();
                TermEnd::CrashLoop { backoff }
            }
            "failed at once" => TermEnd::Released,
            // Stopped or killed by its guard while this daemon could not act: for the lease's
            // sake, as the supervisor counts it.
            _ => match tenure {
                Tenure::Lost(_) => TermEnd::Lost,
                _ => TermEnd::Expired,
            },
        }
    }
}

/// How one body of a script lives: it stops within `stops_in` of its stop signal, and ends by
/// itself only when the script says so; with `broken`, its deploy is broken and it fails at
/// once (shared by both engines).
pub(super) fn scripted_plan(stops_in: Duration, broken: bool) -> Plan {
    Plan {
        life: Life {
            stops_in: Some(stops_in),
            ends: broken.then_some((FAILS_WITHIN / 20, Own::Fails)),
            stuck: None,
        },
        unhealthy: None,
    }
}

/// How one body lives, drawn from its member's stream of bodies: `grace` is `G`; with
/// `broken`, its deploy is broken and it fails at once (shared by both engines).
pub(super) fn draw_plan(dice: &Dice, grace: Duration, broken: bool) -> Plan {
    let stops_in = match dice.below(100) {
        0..80 => Some(Duration::from_millis(dice.u64(0, 500))),
        80..95 => Some(Duration::from_millis(
            dice.u64(500, grace.as_millis() as u64),
        )),
        _ => None,
    };
    let after = Duration::from_millis(dice.u64(500, 60_000));
    let (mut ends, unhealthy) = match dice.below(100) {
        0..70 => (None, None),
        70..88 => (Some((after, Own::Released)), None),
        88..96 => (None, Some((after, Duration::from_secs(dice.u64(5, 30))))),
        _ => (Some((after, Own::Exit)), None),
    };
    // If it comes to a kill: stuck for up to 40 s, gone before its lease expires or long
    // after.
    let stuck = (dice.below(100) < 30).then(|| Duration::from_millis(dice.u64(100, 40_000)));
    if broken {
        ends = Some((
            dice.between(Duration::from_millis(10), FAILS_WITHIN),
            Own::Fails,
        ));
    }
    Plan {
        life: Life {
            stops_in,
            ends,
            stuck,
        },
        unhealthy: unhealthy.filter(|_| !broken),
    }
}

impl Body for SimBody {
    const BODY: &'static str = "the simulated body";
    const ENDED: &'static str = "the simulated body ended";

    async fn run(
        &mut self,
        term: &Term,
        mut tenure: watch::Receiver<Tenure>,
        shutdown: &CancellationToken,
    ) -> TermEnd {
        let plan = self.plan();
        self.recorder.record(What::BodyStart {
            member: self.member,
            slot: term.slot,
            epoch: term.epoch,
            lease: term.lease,
        });
        self.recorder.line();
        let told_to_end = match &self.plans {
            Plans::Scripted { ends, .. } => Some(ends.of(self.member)),
            Plans::Drawn => None,
        };
        let process = Process::start(
            &self.recorder,
            (self.member, term.slot, term.epoch),
            plan.life,
            &self.host.gate,
            told_to_end,
        );
        let kill_at = tenure.borrow().deadline().kill_at;
        let guard = self.host.guarded.then(|| {
            process::guard(
                &process,
                &self.host.gate,
                self.grace,
                kill_at,
                self.host.mutant,
            )
        });
        let mut life = Lifeline {
            process: process.clone(),
            guard,
        };
        let mut changed = process.watch();
        let unhealthy = plan
            .unhealthy
            .map(|(after, cooldown)| (Instant::now() + after, cooldown));
        let mut phase = Phase::Running;
        let mut keeper_alive = true;
        loop {
            // Its end first: what it did while this daemon could not look (frozen) is what it
            // did, whatever the clock says now.
            match process.stage() {
                Stage::Gone(how) => {
                    let held = *tenure.borrow();
                    return self.ended(how, &phase, &held, process.ran());
                }
                Stage::Stuck { .. } => {
                    self.stuck = Some(life);
                    return TermEnd::Overran;
                }
                _ => {}
            }
            let now = Instant::now();
            let held = *tenure.borrow();
            let mut step = phase.step(&held, now, shutdown.is_cancelled(), self.grace);
            if phase.is_running()
                && let Some((_, cooldown)) = unhealthy.filter(|(at, _)| now >= *at)
            {
                // Stopped for failing its checks, as the supervisor stops it.
                step.stop = phase.stop(Some(TermEnd::Unhealthy { cooldown }), now);
                self.recorder.record(What::Standby {
                    member: self.member,
                    until: self.recorder.now() + cooldown,
                });
                self.recorder.line();
            }
            // Rule 1: the guard is told first (before any signal, as the supervisor does).
            if let Some(guard) = &mut life.guard {
                guard.tell(
                    phase.kill_at(&step.deadline, self.grace),
                    phase.stop_began(),
                );
            }
            if step.stop.is_some() {
                process.stop();
            }
            if step.kill {
                process.kill();
                continue;
            }
            // The next instant anything is due.
            let mut next = match phase {
                Phase::Running => step.deadline.stop_at,
                _ => phase.kill_at(&step.deadline, self.grace),
            };
            if let (true, Some((at, _))) = (phase.is_running(), unhealthy) {
                next = next.min(at);
            }
            tokio::select! {
                biased;
                _ = changed.changed() => {}
                changed = tenure.changed(), if keeper_alive => keeper_alive = changed.is_ok(),
                () = shutdown.cancelled(), if phase.is_running() => {}
                () = tokio::time::sleep_until(next) => {}
            }
        }
    }

    const WAITS_PAST_ITS_LEASE: bool = true;

    /// Not while a body that survived its kill lives: as the daemon with a stuck group.
    fn may_campaign(&mut self) -> bool {
        if self
            .stuck
            .as_ref()
            .is_some_and(|l| matches!(l.process.stage(), Stage::Gone(_)))
        {
            self.stuck = None;
        }
        self.stuck.is_none()
    }

    async fn gone(&mut self) {
        if let Some(stuck) = &self.stuck {
            let mut changed = stuck.process.watch();
            while !matches!(stuck.process.stage(), Stage::Gone(_)) {
                let _ = changed.changed().await;
            }
            self.stuck = None;
        }
    }
}
