//! The bodies' side of the synchronous world ([`Sim`]): a body started when its member wins
//! a term, told the lease as its member sees it, told to stop; each look at it
//! ([`Sim::body_tick`]: its process, its guard, its supervisor, each unless frozen), and what
//! its end tells the member (as the child supervisor tells it, src/sim/body.rs).

use super::body::{Body, Found, Notes, Stage, supervise};
use super::driver::Sim;
use super::state::{Event, Who};
use crate::crash_loop::CrashBackoff;
use crate::guard::Deadlines;
use crate::sim::body::{draw_plan, scripted_plan};
use crate::sim::process::Own;
use crate::sim::trace::What;
use leasehold_core::holder::Tenure;
use leasehold_core::leading::Stop;
use leasehold_core::member::{Input, Term};
use leasehold_core::term::{Phase, TermEnd};
use tokio::time::Instant;

impl Sim {
    /// `who`'s member won a term: its body starts under it.
    pub(super) fn start_body(&mut self, who: Who, term: &Term<Instant, time::OffsetDateTime>) {
        let (now, t0, grace) = (self.now, self.t0, self.timing.stop_timeout);
        let cast = &self.cast[who.id];
        let guarded = cast.guarded;
        let broken = guarded
            && (*cast.broken.lock().unwrap_or_else(|e| e.into_inner())).is_some_and(|u| now < u);
        let switch = crate::mutant::Switch::of(self.mutant);
        // A script's word to end a body that came while none ran ends the next one at once.
        let told_to_end = self.scripted.is_some() && self.end_words.remove(&who.id);
        let scripted = self.scripted;
        let Some(p) = self.process(who) else { return };
        let mut plan = match scripted {
            Some(stops_in) => scripted_plan(stops_in, broken),
            None => draw_plan(&p.bodies, grace, broken),
        };
        if told_to_end {
            plan.life.ends = Some((std::time::Duration::ZERO, Own::Released));
        }
        let lease = (p.acquired.get(&term.slot).copied()).unwrap_or(*p.core.next_id());
        p.last_slot = term.slot;
        let kill_at = term.deadline.kill_at;
        p.body = Some(Body {
            slot: term.slot,
            epoch: term.epoch,
            guarded,
            stage: Stage::Running,
            started: now,
            ended: None,
            life: plan.life,
            unhealthy: plan
                .unhealthy
                .map(|(after, cooldown)| (now + after, cooldown)),
            phase: Phase::Running,
            tenure: Tenure::Held(term.deadline),
            guard: guarded.then(|| {
                let deadlines = Deadlines::new(grace.as_nanos() as u64, 0).with_mutant(switch);
                (deadlines, None)
            }),
        });
        if let Some(b) = &mut p.body {
            b.tell(t0, kill_at, None);
        }
        self.record(What::BodyStart {
            member: who.id,
            slot: term.slot,
            epoch: term.epoch,
            lease,
        });
        self.line();
        self.body_tick(who);
    }

    /// The lease as `who`'s member sees it changed: its body reads its deadlines from it.
    pub(super) fn tenure(&mut self, who: Who, tenure: Tenure<Instant>) {
        let Some(p) = self.process(who) else { return };
        if let Some(b) = &mut p.body {
            b.tenure = tenure;
            self.body_tick(who);
        }
    }

    /// `who`'s member tells its body to stop.
    pub(super) fn stop_body(&mut self, who: Who, stop: &Stop) {
        let now = self.now;
        let Some(p) = self.process(who) else { return };
        let Some(b) = &mut p.body else { return };
        let why = match stop {
            Stop::Shutdown => TermEnd::Shutdown,
            Stop::Preempted(_) => TermEnd::Preempted,
        };
        let mut notes = Notes::new();
        if b.phase.stop(Some(why), now).is_some() {
            b.stop(now, who.id, &mut notes);
        }
        self.notes(notes);
        self.body_tick(who);
    }

    /// Records what a look at a body changed.
    pub(super) fn notes(&self, notes: Notes) {
        for (what, line) in notes {
            self.record(what);
            if line {
                self.line();
            }
        }
    }

    /// Looks at `who`'s body (and at a body of its that outlived its kill): what is due now
    /// of each part that is not frozen; tells the member what ended; looks again when next due.
    pub(super) fn body_tick(&mut self, who: Who) {
        let (now, base, grace) = (self.now, self.t0, self.timing.stop_timeout);
        let Some(p) = self.process(who) else { return };
        let frozen = p.frozen;
        let host_frozen = |guarded: bool| frozen == Some(true) || (!guarded && frozen.is_some());
        let mut notes = Notes::new();
        let mut next: Vec<Instant> = Vec::new();
        let mut input = None;
        if let Some(mut stuck) = p.stuck.take() {
            if !host_frozen(stuck.guarded) {
                stuck.live(now, who.id, &mut notes);
                next.extend(stuck.own_due());
            }
            match (stuck.stage, frozen) {
                (Stage::Gone(_), None) => input = Some(Input::StuckGone),
                _ => p.stuck = Some(stuck),
            }
        }
        let mut ended = None;
        if let Some(mut b) = p.body.take() {
            if !host_frozen(b.guarded) {
                b.live(now, who.id, &mut notes);
            }
            if frozen != Some(true) {
                b.guard(now, base, who.id, &mut notes);
            }
            let found = match frozen {
                Some(_) => Found::Runs(None),
                None => supervise(&mut b, now, base, grace, who.id, &mut notes),
            };
            if !host_frozen(b.guarded) {
                next.extend(b.own_due());
            }
            if frozen != Some(true) {
                next.extend(b.guard_due(base));
            }
            match found {
                Found::Runs(at) => {
                    next.extend(at);
                    p.body = Some(b);
                }
                Found::Stuck => {
                    p.stuck = Some(b);
                    input = Some(Input::BodyGone(TermEnd::Overran));
                }
                Found::Gone(how) => ended = Some((how, b)),
            }
        }
        p.body_round += 1;
        let round = p.body_round;
        if let Some((how, b)) = ended {
            let end = self.ended(who, how, &b, &mut notes);
            input = Some(Input::BodyGone(end));
        }
        self.notes(notes);
        if let Some(at) = next.into_iter().min() {
            self.at(at, Event::Body { who, round });
        }
        if let Some(input) = input {
            self.step(who, input);
        }
    }

    /// Why the term ended, now that its body is gone `how`: as the child supervisor tells it
    /// (src/sim/body.rs, `SimBody::ended`).
    fn ended(&mut self, who: Who, how: &str, b: &Body, notes: &mut Notes) -> TermEnd {
        let (now, since) = (self.now, self.since());
        let figures = CrashBackoff::default();
        let Some(p) = self.process(who) else {
            return TermEnd::Lost;
        };
        p.crash_loop.ran_for(b.ran(now), &figures);
        if let Some(why) = b.phase.why() {
            if let TermEnd::Unhealthy { cooldown } = why {
                let until = since + cooldown;
                notes.push((
                    What::StandbyMoved {
                        member: who.id,
                        until,
                    },
                    false,
                ));
            }
            return why;
        }
        match how {
            "ended by itself" => TermEnd::Released,
            "ended by itself, asking to exit" => TermEnd::Exit(0),
            "failed at once" if b.ran(now) < figures.window => {
                let backoff = p.crash_loop.failed(&figures);
                notes.push((
                    What::Standby {
                        member: who.id,
                        until: since + backoff,
                    },
                    true,
                ));
                TermEnd::CrashLoop { backoff }
            }
            "failed at once" => TermEnd::Released,
            _ => match b.tenure {
                Tenure::Lost(_) => TermEnd::Lost,
                _ => TermEnd::Expired,
            },
        }
    }
}
