//! A member's body in the synchronous world ([`Body`]), as the tokio engine's bodies live
//! (src/sim/body.rs, src/sim/process.rs), on one clock and no tasks: its process's own life
//! (drawn by the same `draw_plan` from the member's stream of bodies: quick or slow to stop,
//! ending by itself, failing its health checks, surviving its kill), its guard for a daemon's
//! child (the real rules of [`Deadlines`]: stop signal at `deadline - G`, SIGKILL at the
//! deadline, at once when the daemon dies; docs/safety.md, "The guard"), and the daemon's
//! supervisor holding it to rule 1 by the core's [`Phase`] from the lease the member reports.
//!
//! Each look at the clock ([`Sim::body_tick`]) takes the three in turn, each only if what it
//! runs on is not frozen: the process on its host (the member's machine for a daemon's child,
//! the member's own process for the library's task), the guard on the machine, the supervisor
//! in the daemon. Whatever is frozen acts at the thaw, on what it finds then.

use crate::guard::{Deadlines, Order};
use crate::sim::process::{Life, Own};
use crate::sim::trace::What;
use leasehold_core::holder::Tenure;
use leasehold_core::term::{Phase, TermEnd};
use std::time::Duration;
use tokio::time::Instant;

/// Where a body's process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stage {
    Running,
    /// Its stop signal came then.
    Stopping(Instant),
    /// It survived its kill; it is gone at last then.
    Stuck(Instant),
    Gone(&'static str),
}

/// One body of a term: its process, its guard, and the daemon's supervisor of it.
pub(super) struct Body {
    pub(super) slot: u32,
    pub(super) epoch: u64,
    pub(super) guarded: bool,
    pub(super) stage: Stage,
    pub(super) started: Instant,
    pub(super) ended: Option<Instant>,
    pub(super) life: Life,
    /// It fails its health checks then, and its member stands by this long.
    pub(super) unhealthy: Option<(Instant, Duration)>,
    pub(super) phase: Phase<Instant>,
    pub(super) tenure: Tenure<Instant>,
    /// The guard's rules, and the last order the daemon told it.
    pub(super) guard: Option<(Deadlines, Option<Order>)>,
}

/// What a look at a body changed, to record: each with the line after it, or not.
pub(super) type Notes = Vec<(What, bool)>;

impl Body {
    fn note(&self, notes: &mut Notes, member: usize, what: fn(usize, u32, u64) -> What) {
        notes.push((what(member, self.slot, self.epoch), true));
    }

    fn gone(&mut self, now: Instant, how: &'static str, member: usize, notes: &mut Notes) {
        self.ended = Some(now);
        self.stage = Stage::Gone(how);
        let (slot, epoch) = (self.slot, self.epoch);
        notes.push((
            What::BodyGone {
                member,
                slot,
                epoch,
                how,
            },
            true,
        ));
    }

    /// Its stop signal (only the first does anything).
    pub(super) fn stop(&mut self, now: Instant, member: usize, notes: &mut Notes) {
        if self.stage == Stage::Running {
            self.stage = Stage::Stopping(now);
            self.note(notes, member, |member, slot, epoch| What::BodyStopping {
                member,
                slot,
                epoch,
            });
        }
    }

    /// SIGKILL: gone at once, unless it is stuck in the kernel.
    pub(super) fn kill(&mut self, now: Instant, member: usize, notes: &mut Notes) {
        if !matches!(self.stage, Stage::Running | Stage::Stopping(_)) {
            return;
        }
        match self.life.stuck {
            Some(stuck) => {
                self.stage = Stage::Stuck(now + stuck);
                let (slot, epoch) = (self.slot, self.epoch);
                notes.push((
                    What::BodyStuck {
                        member,
                        slot,
                        epoch,
                    },
                    false,
                ));
            }
            None => self.gone(now, "killed", member, notes),
        }
    }

    /// Its member died: gone at once, stuck or not.
    pub(super) fn crash(&mut self, now: Instant, member: usize, notes: &mut Notes) {
        match self.stage {
            Stage::Gone(_) => {}
            Stage::Stuck(_) => {
                self.gone(now, "gone at last after surviving its kill", member, notes);
            }
            _ => self.gone(now, "crashed with its member", member, notes),
        }
    }

    /// Its own life at `now`.
    pub(super) fn live(&mut self, now: Instant, member: usize, notes: &mut Notes) {
        let due = match self.stage {
            Stage::Gone(_) => return,
            Stage::Running => self
                .life
                .ends
                .map(|(after, own)| (self.started + after, own)),
            Stage::Stopping(since) => (self.life.stops_in).map(|d| (since + d, Own::Released)),
            Stage::Stuck(until) => Some((until, Own::Released)),
        };
        let Some((at, own)) = due else { return };
        if now < at {
            return;
        }
        let how = match (self.stage, own) {
            (Stage::Running, Own::Released) => "ended by itself",
            (Stage::Running, Own::Exit) => "ended by itself, asking to exit",
            (Stage::Running, Own::Fails) => "failed at once",
            (Stage::Stopping(_), _) => "stopped",
            _ => "gone at last after surviving its kill",
        };
        self.gone(now, how, member, notes);
    }

    /// When its own life next changes it (its end by itself, its stop, its end at last).
    pub(super) fn own_due(&self) -> Option<Instant> {
        match self.stage {
            Stage::Gone(_) => None,
            Stage::Running => self.life.ends.map(|(after, _)| self.started + after),
            Stage::Stopping(since) => self.life.stops_in.map(|d| since + d),
            Stage::Stuck(until) => Some(until),
        }
    }

    /// The guard at `now` (the history's clock counted from `base`).
    pub(super) fn guard(&mut self, now: Instant, base: Instant, member: usize, notes: &mut Notes) {
        let Some((deadlines, _)) = self.guard.as_mut() else {
            return;
        };
        if matches!(self.stage, Stage::Gone(_)) {
            return;
        }
        let due = deadlines.due(nanos(base, now));
        if due.stop {
            self.stop(now, member, notes);
        }
        if due.kill {
            self.kill(now, member, notes);
        }
    }

    /// When the guard looks next.
    pub(super) fn guard_due(&self, base: Instant) -> Option<Instant> {
        if matches!(self.stage, Stage::Gone(_)) {
            return None;
        }
        let (deadlines, _) = self.guard.as_ref()?;
        deadlines.next().map(|n| base + Duration::from_nanos(n))
    }

    /// Tells the guard the body must be dead by `kill_at`, and when the stop began.
    pub(super) fn tell(&mut self, base: Instant, kill_at: Instant, stop_begun: Option<Instant>) {
        let Some((deadlines, told)) = &mut self.guard else {
            return;
        };
        let order = Order {
            kill_at: nanos(base, kill_at),
            stop_begun: stop_begun.map_or(0, |s| nanos(base, s).max(1)),
        };
        if *told != Some(order) {
            *told = Some(order);
            deadlines.order(order);
        }
    }

    /// How long it ran, from its start to its end (or now).
    pub(super) fn ran(&self, now: Instant) -> Duration {
        self.ended.unwrap_or(now) - self.started
    }
}

/// `at` as nanoseconds since `base`: the guard's clock.
fn nanos(base: Instant, at: Instant) -> u64 {
    at.saturating_duration_since(base).as_nanos() as u64
}

/// What the supervisor's look found.
pub(super) enum Found {
    /// The body runs on; look again then.
    Runs(Option<Instant>),
    /// It is gone, so.
    Gone(&'static str),
    /// It survived its kill.
    Stuck,
}

/// The daemon's supervisor looks at the body: the one round of rule 1 (the core's [`Phase`]),
/// its health, the guard told first, then its stop or kill.
pub(super) fn supervise(
    b: &mut Body,
    now: Instant,
    base: Instant,
    grace: Duration,
    member: usize,
    notes: &mut Notes,
) -> Found {
    loop {
        match b.stage {
            Stage::Gone(how) => return Found::Gone(how),
            Stage::Stuck(_) => return Found::Stuck,
            _ => {}
        }
        let mut step = b.phase.step(&b.tenure, now, false, grace);
        if b.phase.is_running()
            && let Some((_, cooldown)) = b.unhealthy.filter(|(at, _)| now >= *at)
        {
            step.stop = b.phase.stop(Some(TermEnd::Unhealthy { cooldown }), now);
            let until = now - base + cooldown;
            notes.push((What::Standby { member, until }, true));
        }
        // Rule 1: the guard is told first (before any signal, as the supervisor does).
        b.tell(
            base,
            b.phase.kill_at(&step.deadline, grace),
            b.phase.stop_began(),
        );
        if step.stop.is_some() {
            b.stop(now, member, notes);
        }
        if step.kill {
            b.kill(now, member, notes);
            continue;
        }
        let mut next = match b.phase {
            Phase::Running => step.deadline.stop_at,
            _ => b.phase.kill_at(&step.deadline, grace),
        };
        if let (true, Some((at, _))) = (b.phase.is_running(), b.unhealthy) {
            next = next.min(at);
        }
        return Found::Runs(Some(next));
    }
}
