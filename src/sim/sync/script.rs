//! A scripted schedule played in the synchronous world, as the tokio engine's world plays it
//! (`World::play_script`, src/sim/schedule.rs): its members started in the order of the cast a
//! moment apart, then each step when it says, carried out by the director's [`Stage`] where the
//! director has the act, and by the world's own lives and bodies otherwise.

use super::body::Stage as BodyStage;
use super::driver::Sim;
use super::state::Later;
use crate::sim::director::Stage;
use crate::sim::network::ms;
use crate::sim::process::Own;
use crate::sim::schedule::{Schedule, Step, Target, When};
use crate::sim::trace::MemberId;
use std::time::Duration;

impl Sim {
    /// Plays `script` to its end.
    pub(super) fn play_script(&mut self, script: &Schedule) {
        let end = script.length;
        for id in 0..self.cast.len() {
            if id > 0 {
                // In the order of the cast, a moment apart (each joins the line in turn).
                self.run_until(self.since() + ms(50));
            }
            self.start_member(id);
        }
        // (A first step waiting for a slot to be led counts a body started with the cast.)
        let mut last_at = Duration::ZERO;
        let mut last: Option<MemberId> = None;
        for (when, step) in &script.steps {
            let at = match *when {
                When::At(d) => d,
                When::After(d) => last_at + d,
                When::Led(slot, then) => loop {
                    if let Some((_, started)) = self.recorder.holder(slot)
                        && started >= last_at
                    {
                        break started + then;
                    }
                    if self.since() >= end {
                        return;
                    }
                    self.run_until(self.since() + ms(10));
                },
            };
            self.run_until(at.min(end));
            if self.since() >= end {
                return;
            }
            last = self.carry_out_step(*step, last);
            last_at = self.since();
        }
        self.run_until(end);
    }

    /// The member `target` names now.
    fn target(&self, target: Target, last: Option<MemberId>) -> Option<MemberId> {
        match target {
            Target::Member(i) => Some(i),
            Target::Holder(slot) => self.recorder.holder(slot).map(|(m, _)| m),
            Target::Last => last,
            Target::Successor => {
                let leader = (self.recorder.holder(0)).map(|(m, _)| self.cast[m].identity.clone());
                (self.look().into_iter())
                    .filter(|r| Some(&r.identity) != leader.as_ref())
                    .find_map(|r| r.owner)
            }
        }
    }

    /// Does `step`; returns the member it was done to (or the last one, for a step to none).
    fn carry_out_step(&mut self, step: Step, last: Option<MemberId>) -> Option<MemberId> {
        let now = self.now;
        match step {
            Step::Start(t) | Step::StartElsewhere(t) | Step::StartOnAnotherPort(t) => {
                let id = self.target(t, last)?;
                if self.who(id).is_none() {
                    let m = &mut self.cast[id];
                    m.restart_at = None;
                    if matches!(step, Step::StartOnAnotherPort(_)) {
                        m.port += 1;
                    }
                    if m.incarnation > 0 && matches!(step, Step::StartElsewhere(_)) {
                        let base = m.identity.split('.').next().unwrap_or("m").to_owned();
                        m.identity = format!("{base}.{}", m.incarnation);
                    }
                    self.start_member(id);
                }
                Some(id)
            }
            Step::Stop(t) => {
                let id = self.target(t, last)?;
                self.stop_member(id, None);
                Some(id)
            }
            Step::Crash(t) => {
                let id = self.target(t, last)?;
                self.crash_member(id, None);
                Some(id)
            }
            Step::Freeze(t, long) | Step::Pause(t, long) => {
                let id = self.target(t, last)?;
                self.freeze_member(id, long, matches!(step, Step::Pause(..)));
                Some(id)
            }
            Step::Break(t, long) => {
                let id = self.target(t, last)?;
                self.later(Later::Break(id, long));
                Some(id)
            }
            Step::CutOff(t, long) => {
                let id = self.target(t, last)?;
                Stage::link(self, id, |l| l.cut_until = Some(now + long));
                let detail = format!("m{id} cannot reach storage");
                self.fault("cut off", detail, Some(now + long));
                Some(id)
            }
            Step::Outage(long) => {
                Stage::outage(self, now + long);
                let detail = "storage answers 503 to all".into();
                self.fault("outage", detail, Some(now + long));
                last
            }
            Step::DeleteBlob(slot) => {
                self.delete_blob(slot);
                last
            }
            Step::DeleteRecords | Step::Wipe => {
                if matches!(step, Step::Wipe) {
                    for slot in 0..self.slots {
                        self.delete_blob(slot);
                    }
                }
                let all: Vec<String> = self.cast.iter().map(|m| m.identity.clone()).collect();
                self.delete_records(&all);
                last
            }
            Step::EndBody(t) => {
                let id = self.target(t, last)?;
                self.end_body(id);
                Some(id)
            }
        }
    }

    /// The body member `id` runs now ends by itself (`on_exit = "release"`); told while none
    /// runs, its next one ends at once (as a word waits for the body that takes it).
    fn end_body(&mut self, id: MemberId) {
        let now = self.now;
        let who = self.who(id);
        let running = who
            .and_then(|who| self.process(who))
            .and_then(|p| (p.body.as_mut()).filter(|b| b.stage == BodyStage::Running));
        match (who, running) {
            (Some(who), Some(b)) => {
                b.life.ends = Some((now - b.started, Own::Released));
                self.body_tick(who);
            }
            _ => {
                self.end_words.insert(id);
            }
        }
    }
}
