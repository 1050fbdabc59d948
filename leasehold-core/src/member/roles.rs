//! Each of a member's roles stepped with its questions answered from what the member knows,
//! and its outputs carried out inside the member or handed to the shell: the campaign (a term
//! won begins it), the record keeper (its placement told to the campaign), the term (its look
//! at the line answered at once, its end given back to the loop of terms), a late acquire's
//! settling (its end told to the campaign that sits it out), and the loop of terms itself
//! (campaign, term, rest, until it is done, then the member leaves the line).

use super::kinds::Kinds;
use super::known::Campaigning;
use super::leader::Leader;
use super::machine::{Member, Stage, Who, Work};
use super::messages::{Output, Request, Role, Say, Term};
use super::own::OnTheLine;
use super::replies::Asked;
use crate::campaign::{self, Campaign, Failed};
use crate::exchange::Send;
use crate::late::{self, Settling};
use crate::leading::{self, Leading};
use crate::line::SlotBlob;
use crate::preemption::candidates;
use crate::record;
use crate::term::{Done, Rest, Stage as Next};
use crate::timing::Moment;
use crate::watch;
use std::collections::VecDeque;

type Queue<I, K, E> = VecDeque<Work<I, K, E>>;

impl<I, K, E> Member<I, K, E>
where
    I: Moment,
    K: Kinds,
    E: Failed + std::fmt::Display,
{
    /// One step of the campaign, its questions answered from what the member knows.
    pub(super) fn campaign(
        &mut self,
        now: I,
        wall: K::Wall,
        input: campaign::Input<I, K::ETag, E>,
        env: &mut impl super::messages::Env<K>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Stage::Campaign(c) = &mut self.stage else {
            return;
        };
        let mut notes = Vec::new();
        let wall_ms = env.wall_ms();
        let mut draw = || env.draw();
        let mut g = Campaigning {
            facts: &mut self.known,
            kept: &mut self.kept,
            next_id: &self.next_id,
            now,
            wall,
            wall_ms,
            draw: &mut draw,
            notes: &mut notes,
            refill_late: self.settings.mutants.refill_late,
        };
        let mut outputs = std::mem::take(&mut self.campaign_out);
        c.handle_into(now, input, &mut g, &mut outputs);
        if !notes.is_empty() {
            out.extend(notes.into_iter().map(Output::Note));
        }
        for output in outputs.drain(..) {
            self.campaigned(now, wall, output, env, work, out);
        }
        crate::room::put_back(&mut self.campaign_out, outputs);
    }

    fn campaigned(
        &mut self,
        now: I,
        wall: K::Wall,
        output: campaign::Output<I, <K::Record as crate::line::Record>::Key, E>,
        env: &mut impl super::messages::Env<K>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        use campaign::Output as C;
        match output {
            C::Send(Send { tag, request }) => {
                // A watcher's read or probe of the member ahead is of the one its round just
                // found.
                let reads_ahead = matches!(
                    request,
                    campaign::Request::Watch(
                        watch::Request::ReadAhead { .. } | watch::Request::ProbeAhead
                    )
                );
                let ahead = (reads_ahead.then(|| self.kept.ahead.clone().map(Box::new))).flatten();
                // A reserved epoch is written at the wall clock of its send: the term's start.
                if let campaign::Request::Attempt {
                    request: crate::attempt::Request::WriteReserved { .. },
                    ..
                } = &request
                {
                    self.kept.wall = Some(wall);
                }
                let asked = Asked::Campaign(request.clone(), ahead);
                let tag = self.route(Who::Campaign, tag, asked, now);
                let request = Request::Campaign(request);
                out.push(Output::Send(Send { tag, request }));
            }
            C::Forget(tag) => self.unroute(Who::Campaign, tag, out),
            C::SpendId => self.spend_id(env),
            C::Late(tag) => self.late(tag),
            // The settling's end is told to the campaign once it sits the acquire out.
            C::SitOut => {}
            // A placement of the record keeper is told to the campaign while it listens.
            C::Listen => work.push_back(Work::Campaign(campaign::Input::Listening)),
            C::AskBody => {
                self.asked_body = true;
                out.push(Output::AskBody);
            }
            C::ShowLine => out.push(Output::ShowLine),
            C::Say(say) => out.push(Output::Say(Say::Campaign(say))),
            C::Rounded(failed) => out.push(Output::Rounded(failed)),
            C::End(end) => {
                self.forget_all(Who::Campaign, out);
                self.stage = Stage::Idle;
                match end {
                    campaign::End::Won(won) => self.begin_term(now, wall, won, work, out),
                    campaign::End::Denied(e) => self.finish(Err(e), work, out),
                    campaign::End::Stopped | campaign::End::Round(_) => {
                        if let Some(terms) = &mut self.terms {
                            terms.not_won(self.known.shutdown);
                        }
                        if self.known.shutdown {
                            out.push(Output::Say(Say::StoppedFollowing));
                        }
                        work.push_back(Work::Loop);
                    }
                }
            }
        }
    }

    /// The lease id is spent: the next acquire goes out with a new one, which the record
    /// publishes at once.
    fn spend_id(&mut self, env: &mut impl super::messages::Env<K>) {
        self.next_id = env.lease_id();
        if K::acquire_with(&mut self.known.own.published, &self.next_id) {
            self.known.own.written = false;
        }
        self.poked = true;
    }

    /// The acquire the campaign sent under `tag` got no answer in time: its answer is the
    /// settling's from now on.
    fn late(&mut self, tag: crate::exchange::Tag) {
        let Some(mine) = self.mine(Who::Campaign, tag) else {
            return;
        };
        let Some(route) = self.routes.get_mut(&mine) else {
            return;
        };
        if let Asked::Campaign(campaign::Request::Replica(acquire), _) = &route.asked {
            // An acquire on one replica of several: awaited until the lease it may have taken
            // has surely expired, a success released with its attempt's lease id (the rule
            // *Counting*); nobody sits it out, as no one blob names the leader.
            let (replica, id) = (acquire.replica(), self.kept.id.clone());
            (route.who, route.tag) = (Who::LateReplica, mine);
            route.asked = Asked::LateReplica { replica, id };
            let until = route.sent + self.settings.timing.duration;
            self.late_replicas.push((mine, until));
            self.unsure(replica);
            return;
        }
        (route.who, route.tag, route.asked) = (Who::Late, mine, Asked::Late);
        let sent = route.sent;
        self.known.late = Some(sent);
        self.late_of = (self.kept.slot, self.kept.id.clone());
        self.settled = None;
        self.settling = Some(Settling::begin(mine, sent, &self.settings.timing));
    }

    /// One step of the late acquire's settling.
    pub(super) fn settle(
        &mut self,
        now: I,
        input: late::Input<I, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Some(settling) = &mut self.settling else {
            return;
        };
        for output in settling.handle(now, input, &mut self.tags) {
            match output {
                late::Output::Send(Send { tag, request }) => {
                    let route = super::machine::Route {
                        who: Who::Late,
                        tag,
                        asked: Asked::Release,
                        sent: now,
                    };
                    self.routes.insert(tag, route);
                    let (slot, id) = self.late_of.clone();
                    let limit = request.limit;
                    let replica = 0;
                    let request = Request::Release {
                        slot,
                        replica,
                        id,
                        limit,
                    };
                    out.push(Output::Send(Send { tag, request }));
                }
                late::Output::Forget(tag) => {
                    self.routes.remove(&tag);
                    out.push(Output::Forget(tag));
                }
                late::Output::Say(said) => out.push(Output::Say(Say::Late(said))),
                late::Output::Settled(settled) => {
                    self.known.late = None;
                    self.settled = Some(settled);
                    out.push(Output::Say(Say::Settled(settled)));
                }
            }
        }
        if self.known.late.is_none() {
            self.settling = None;
        }
    }

    /// One step of the record keeper, its questions answered from the line and the record.
    pub(super) fn keep(
        &mut self,
        now: I,
        wall: K::Wall,
        input: record::Input<I, E>,
        env: &mut impl super::messages::Env<K>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Some(keeper) = &mut self.keeper else {
            return;
        };
        let mut draw = || env.draw();
        let mut g = OnTheLine {
            line: &mut self.known.line,
            own: &mut self.known.own,
            now,
            wall,
            settle_after: self.settings.preempt_after,
            draw: &mut draw,
        };
        let mut outputs = std::mem::take(&mut self.keeper_out);
        keeper.handle_into(now, input, &mut g, &mut outputs);
        for output in outputs.drain(..) {
            match output {
                record::Output::Send(Send { tag, request }) => {
                    let asked = Asked::Keeper(request.clone());
                    let request = Request::Keeper(request);
                    self.send((Who::Keeper, tag), request, asked, now, out);
                }
                record::Output::ShowLine => out.push(Output::ShowLine),
                record::Output::Placed => {
                    if let Stage::Campaign(c) = &self.stage
                        && c.awaits().placed
                    {
                        work.push_back(Work::Campaign(campaign::Input::Placed));
                    }
                }
                record::Output::Say(say) => out.push(Output::Say(Say::Keeper(say))),
                record::Output::End => {
                    self.forget_all(Who::Keeper, out);
                    if let Stage::Leaving(end) = &mut self.stage {
                        out.extend(end.take().map(Output::End));
                        self.stage = Stage::Over;
                    }
                }
            }
        }
        crate::room::put_back(&mut self.keeper_out, outputs);
        if self.keeper.as_ref().is_some_and(|k| k.is_over()) {
            self.keeper = None;
        }
    }

    /// A term was won: the line says this member leads and holds its slot, the record keeper
    /// looks again, and the term begins with the loop of terms lent to it.
    fn begin_term(
        &mut self,
        now: I,
        wall: K::Wall,
        won: campaign::Won<I>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Some(terms) = self.terms.take() else {
            return;
        };
        let me = self.settings.me.clone();
        let line = &mut self.known.line;
        line.leading = true;
        line.terms_begun += 1;
        line.leader = Some(me.clone());
        line.notice = None;
        line.set_slot_holder(won.slot, Some(&me), wall);
        line.holding = Some(won.slot);
        self.poked = true;
        // The term's own leases are its to renew, win back and release (strays.rs).
        let id = self.kept.id.as_ref();
        self.strays.retain(|s| Some(&s.id) != id);
        let term = Term {
            slot: won.slot,
            epoch: won.epoch,
            deadline: won.deadline,
            reserved: won.reserved,
            acquired: self.kept.wall,
        };
        self.term = Some(term.clone());
        out.push(Output::Say(Say::Won(term)));
        out.push(Output::ShowLine);
        (self.kept.anchor, self.anchored) = (
            super::anchor::anchor(&won.leases, &self.kept.replica_etags),
            false,
        );
        let s = &self.settings;
        let settings = leading::Settings {
            timing: s.timing,
            preempt_after: s.preempt_after,
            priority: s.priority,
            me,
            slot: won.slot,
            slots: s.slots,
            epoch: won.epoch,
            // On several replicas, the handoff's replica's after this term's write (the
            // handoff's notice goes there).
            etag: match s.set.len() {
                1 => self.etag.take(),
                _ => self
                    .kept
                    .replica_etags
                    .get(self.kept.anchor)
                    .cloned()
                    .flatten(),
            },
            lined: true,
            set: s.set,
            mutants: s.mutants.leading,
        };
        let (sent, unheld) = (won.deadline.sent, &won.unheld);
        let leading = Leading::with_leases(settings, sent, &won.leases, unheld, terms);
        self.stage = Stage::Leading(Box::new(leading));
        let begin = leading::Input::Start {
            line: candidates(&self.known.line, now),
            listed: self.known.line.listed,
            shutdown: self.known.shutdown,
        };
        work.push_back(Work::Leading(begin));
    }

    /// One step of the term, its questions answered from what the member knows.
    pub(super) fn lead(
        &mut self,
        now: I,
        wall: K::Wall,
        input: leading::Input<I, K::Record, K::Notice, K::ETag, E>,
        env: &mut impl super::messages::Env<K>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Stage::Leading(l) = &mut self.stage else {
            return;
        };
        let mut draw = || env.draw();
        let mut g = Leader {
            known: &mut self.known,
            now,
            wall,
        };
        for output in l.handle(now, wall, input, &mut draw, &mut g) {
            self.led(now, wall, output, work, out);
        }
    }

    fn led(
        &mut self,
        now: I,
        wall: K::Wall,
        output: leading::Output<I, K::Record, K::ETag, E>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        use leading::Output as L;
        match output {
            L::Send(Send { tag, request }) => {
                // The record is to say the standby before anyone could hand the lease back:
                // the request writes it so at once; the record keeper if that fails.
                if let leading::Request::Standby { cooldown, .. } = &request {
                    K::stand_by(&mut self.known.own.published, wall, *cooldown);
                    self.known.own.written = false;
                }
                // Fixed before the first of them goes out: a release beyond the handoff's
                // goes out first.
                if on_the_blob(&request)
                    || matches!(request, leading::Request::ReleaseReplica { .. })
                {
                    self.anchor_now();
                }
                self.send_leading(tag, request, now, out);
            }
            L::Forget(tag) => self.unroute(Who::Leading, tag, out),
            L::StartBody => {
                if let Some(term) = self.term.clone() {
                    let (epoch, slot) = (term.epoch, term.slot);
                    out.push(Output::Role(Role::Leader { epoch, slot }));
                    out.push(Output::StartBody(term));
                }
            }
            // The line as the record keeper last listed it: the member's own (copied only for
            // a listing the lookout has not seen: it drops the line of one it has).
            L::Look => {
                let listed = self.known.line.listed;
                let unread = matches!(&self.stage, Stage::Leading(l) if !l.takes_line(listed));
                let line = (!unread).then(|| candidates(&self.known.line, now));
                let line = line.unwrap_or_default();
                work.push_back(Work::Leading(leading::Input::Looked { line, listed }));
            }
            L::Tenure(tenure) => out.push(Output::Tenure(tenure)),
            L::Renewal(note) => out.push(Output::Say(Say::Renewal(note))),
            L::PassOver(member) => {
                self.known.line.pass_over(&member, now);
                out.push(Output::Say(Say::PassedOver(member)));
                out.push(Output::ShowLine);
            }
            L::Pending(pending) => out.push(Output::Say(Say::Pending(pending))),
            L::StopBody(stop) => out.push(Output::StopBody(stop)),
            L::SteppedDown { end, last } => {
                // A wake-up that came while leading is stale; one from here on is not: the
                // member this one hands the lease to may hand it back before the handover is
                // confirmed (rule (g) of docs/safety.md), and the rest after the term ends at it.
                self.known.wakes.take_reserved();
                self.woke = false;
                out.push(Output::Role(Role::Follower));
                out.push(Output::SteppedDown { end, last });
            }
            L::Outlasting { kill_at, expiry } => {
                out.push(Output::Say(Say::Outlasting { kill_at, expiry }));
            }
            // The record is deleted now: the record keeper leaves.
            L::Depart => work.push_back(Work::Keeper(record::Input::Stop)),
            L::Refresh(record) => self.known.line.refresh(*record),
            L::Say(say) => out.push(Output::Say(Say::Leading(say))),
            L::End(ended) => {
                self.forget_all(Who::Leading, out);
                let Stage::Leading(l) = std::mem::replace(&mut self.stage, Stage::Idle) else {
                    return;
                };
                self.terms = Some(l.into_terms());
                self.term = None;
                if ended.end == crate::term::TermEnd::Expired {
                    self.term_expired();
                }
                self.end_term(wall);
                out.push(Output::Say(Say::TermEnded(ended)));
                out.push(Output::ShowLine);
                work.push_back(Work::Loop);
            }
        }
    }

    /// The term is over: the line no longer says this member leads nor holds its slot
    /// (unless the handoff named the slot's next holder already), and whoever leads now is
    /// learnt from the blob (docs/safety.md, "Recovery from anything").
    fn end_term(&mut self, wall: K::Wall) {
        let me = self.settings.me.clone();
        let line = &mut self.known.line;
        line.leading = false;
        if line.leader.as_deref() == Some(me.as_str()) {
            line.leader = None;
        }
        if let Some(slot) = line.holding {
            let mine = |s: &K::Slot| s.slot() == slot && s.held_by() == Some(me.as_str());
            if line.slot_states.iter().any(mine) {
                line.set_slot_holder(slot, None, wall);
            }
        }
        line.holding = None;
        self.poked = true;
    }

    /// The loop of terms takes its next stage: a campaign, a rest, or its end.
    pub(super) fn next_stage(
        &mut self,
        now: I,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Some(terms) = &self.terms else {
            return;
        };
        match terms.step(self.known.shutdown) {
            Next::Campaign => {
                let s = &self.settings;
                let settings = campaign::Settings {
                    timing: s.timing,
                    slots: s.slots,
                    create_if_missing: s.create_if_missing,
                    set: s.set,
                    mutants: s.mutants.campaign,
                };
                self.stage = Stage::Campaign(Box::new(Campaign::new(settings)));
                work.push_back(Work::Campaign(campaign::Input::Start));
                if self.known.shutdown || self.gave_up {
                    work.push_back(Work::Campaign(campaign::Input::Stop));
                }
            }
            Next::Rest(rest) => self.rest(now, rest, work, out),
            Next::Done(done) => self.finish(Ok(done), work, out),
            // The term has the loop while it runs.
            Next::Lead { .. } | Next::StopRenewing | Next::Outlast | Next::GiveUp(_) => {}
        }
    }

    /// The rest a term's end calls for: over at once after a shutdown.
    fn rest(
        &mut self,
        now: I,
        rest: Rest<I>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let (until, wakeable, back) = match rest {
            Rest::Done(None) => return self.rested(Some(Done::Shutdown), work),
            Rest::Done(Some(code)) => return self.rested(Some(Done::Exit(code)), work),
            Rest::Now => return self.rested(None, work),
            Rest::Yield(pause) => (now + pause, true, false),
            Rest::Until {
                until,
                wakeable,
                why,
            } => {
                out.push(Output::Say(Say::Resting { why, until }));
                (until, wakeable, true)
            }
        };
        if self.known.shutdown {
            return self.rested(Some(Done::Shutdown), work);
        }
        self.stage = Stage::Resting {
            until,
            wakeable,
            back,
        };
    }

    /// The rest is over (its instant came, or a wake-up it listens for): back in line (the
    /// record no longer says standby, the shell says it follows), campaign again.
    pub(super) fn rest_over(&mut self, work: &mut Queue<I, K, E>, out: &mut Vec<Output<I, K, E>>) {
        let Stage::Resting { back, .. } = self.stage else {
            return;
        };
        if back {
            if K::back_in_line(&mut self.known.own.published) {
                self.known.own.written = false;
                self.poked = true;
            }
            out.push(Output::Rested);
        }
        self.rested(None, work);
    }

    /// The rest is over: campaign again, or (`done`) the loop is over so.
    pub(super) fn rested(&mut self, done: Option<Done>, work: &mut Queue<I, K, E>) {
        self.stage = Stage::Idle;
        if let Some(terms) = &mut self.terms {
            terms.rested(done);
        }
        work.push_back(Work::Loop);
    }

    /// The loop is over so: the record keeper leaves the line, and then the member ends.
    fn finish(
        &mut self,
        end: Result<Done, E>,
        work: &mut Queue<I, K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        match &self.keeper {
            Some(_) => {
                self.stage = Stage::Leaving(Some(end));
                work.push_back(Work::Keeper(record::Input::Stop));
            }
            // It left already (a departure while the term's body stopped).
            None => {
                self.stage = Stage::Over;
                out.push(Output::End(end));
            }
        }
    }
}

/// Whether a term's `request` goes to the lease blob: the handoff's requests, the
/// confirmation's reads, a choice's notice.
fn on_the_blob<I, R, T>(request: &leading::Request<I, R, T>) -> bool {
    match request {
        leading::Request::Store { .. } => true,
        leading::Request::Choice { request, .. } => {
            matches!(**request, crate::choice::Request::Notice(_))
        }
        _ => false,
    }
}
