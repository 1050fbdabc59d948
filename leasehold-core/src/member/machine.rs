//! The member's machine ([`Member`]): its roles side by side (the record keeper from its
//! start to its leaving; the loop of terms: a campaign, a term, a rest, one at a time; a late
//! acquire's settling), one tag space for all their requests (each answer routed to the role
//! that sent it), the inputs of the shell routed to whichever role awaits them, and what was
//! said between the shell's tasks (a placement, a poke, a look at the line, a wake-up, a late
//! acquire sat out) said inside. The roles' steps and outputs are in roles.rs.

use super::kinds::Kinds;
use super::known::{Kept, Known};
use super::messages::{Awaits, Env, Input, Output, Settings};
use super::replies::{Asked, Taking};
use crate::campaign::{self, Campaign, Failed};
use crate::exchange::{Answer, ByTag, Tag, Tags, Waiting};
use crate::late::{self, Settled, Settling};
use crate::leading::{self, Leading};
use crate::line::Record;
use crate::record::{self, Keeper};
use crate::term::{Done, Terms};
use crate::timing::Moment;
use crate::wake::WakeAnswer;
use std::collections::{BTreeMap, VecDeque};

/// The campaign of a member of the store `K`.
pub(super) type Campaigner<I, K, E> =
    Campaign<I, <<K as Kinds>::Record as Record>::Key, <K as Kinds>::ETag, <K as Kinds>::ETag, E>;

/// An output of the campaign of a member of the store `K`.
pub(super) type CampaignOutput<I, K, E> =
    campaign::Output<I, <<K as Kinds>::Record as Record>::Key, E>;

/// The term of a member of the store `K`.
pub(super) type Term<I, K, E> =
    Leading<I, <K as Kinds>::Record, <K as Kinds>::Notice, <K as Kinds>::ETag, E>;

/// Which of the member's roles sent a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Who {
    Campaign,
    Keeper,
    Leading,
    /// The settling of a late acquire (its tags are the member's own).
    Late,
    /// An acquire on a replica awaited past its attempt (its tag is the member's own).
    LateReplica,
    /// One replica's part of a request sent to every replica ([`Fan`]), under the member's
    /// tag of the whole.
    Part(Tag),
}

/// A request on its way: the role that sent it, under which of its tags, what it asked, when.
#[derive(Debug)]
pub(super) struct Route<I, K: Kinds> {
    pub who: Who,
    pub tag: Tag,
    pub asked: Asked<I, K>,
    pub sent: I,
}

/// A request sent to every replica (a member on several keeps its record on each, and lists
/// the line from each: member/fan.rs), until each answered.
#[derive(Debug)]
pub(super) struct Fan<I, K: Kinds, E> {
    /// The request as its role sent it.
    pub route: Route<I, K>,
    /// How many replicas have not answered yet.
    pub left: usize,
    /// What the others answered, in the order they came, each with its replica's place.
    pub came: Vec<(usize, super::messages::Reply<K, E>)>,
}

/// Where the member's loop of terms stands.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per member
pub(super) enum Stage<I, K: Kinds, E> {
    /// Not started.
    Idle,
    /// Campaigning.
    Campaign(Box<Campaigner<I, K, E>>),
    /// Leading a term.
    Leading(Box<Term<I, K, E>>),
    /// Out of the election until `until`; a wake-up ends it if `wakeable`; with `back`, the
    /// record no longer says standby after it.
    Resting {
        until: I,
        wakeable: bool,
        back: bool,
    },
    /// The loop is over so: the record keeper leaves the line.
    Leaving(Option<Result<Done, E>>),
    /// Over.
    Over,
}

/// One step's work inside the member: an input for one of its roles, or the loop's next stage.
#[derive(Debug)]
pub(super) enum Work<I, K: Kinds, E> {
    Campaign(campaign::Input<I, K::ETag, E>),
    Keeper(record::Input<I, E>),
    Leading(leading::Input<I, K::Record, K::Notice, K::ETag, E>),
    Settling(late::Input<I, E>),
    /// The loop of terms takes its next stage.
    Loop,
}

/// One member from its start to its end: its record keeper, its loop of terms (campaign,
/// term, rest), a late acquire's settling, over one exchange.
#[derive(Debug)]
pub struct Member<I, K: Kinds, E> {
    pub(super) settings: Settings,
    pub(super) known: Known<I, K>,
    pub(super) kept: Kept<K>,
    /// The lease id the next acquire goes out with.
    pub(super) next_id: K::LeaseId,
    /// The blob's ETag after the epoch write of the term won.
    pub(super) etag: Option<K::ETag>,
    /// Whether the term's replica for the handoff (`kept.anchor`) is fixed: at its end's first
    /// request on the lease blob.
    pub(super) anchored: bool,
    /// The member's tags: every request goes out under one.
    pub(super) tags: Tags,
    pub(super) routes: ByTag<Route<I, K>>,
    pub(super) keeper: Option<Keeper<I, K::Published>>,
    pub(super) stage: Stage<I, K, E>,
    /// The loop of terms, while no term has it.
    pub(super) terms: Option<Terms<I>>,
    pub(super) settling: Option<Settling<I>>,
    /// The acquires on replicas awaited past their attempt, by the member's tag, each until
    /// the lease it may have taken has surely expired.
    pub(super) late_replicas: Vec<(Tag, I)>,
    /// The ids of acquires on replicas whose outcome is unknown (strays.rs keeps them).
    pub(super) strays: Vec<Stray<K::LeaseId>>,
    /// On several replicas, the requests sent to every replica, by the member's tag of each,
    /// until every replica answered.
    pub(super) fans: BTreeMap<Tag, Fan<I, K, E>>,
    /// The slot and lease id of the late acquire being settled, for its release.
    pub(super) late_of: (u32, Option<K::LeaseId>),
    /// How the late acquire settled, until the campaign sitting it out takes it.
    pub(super) settled: Option<Settled>,
    /// A wake-up accepted and not yet taken (by a pause of the campaign, or a rest).
    pub(super) woke: bool,
    /// The record keeper is to look again (a term began or ended, the record changed).
    pub(super) poked: bool,
    /// The body was asked whether it may campaign.
    pub(super) asked_body: bool,
    /// The term won, while it runs.
    pub(super) term: Option<super::messages::Term<I, K::Wall>>,
    /// A one-term member gave up campaigning ([`Input::GiveUp`]).
    pub(super) gave_up: bool,
    /// The work of a transition, empty between them: kept for its room, which a simulator
    /// running thousands of members a second would otherwise allocate at every input.
    pub(super) work: VecDeque<Work<I, K, E>>,
    /// The campaign's outputs of one of its steps, empty between them: kept for its room.
    pub(super) campaign_out: Vec<CampaignOutput<I, K, E>>,
    /// The record keeper's outputs of one of its steps, likewise.
    pub(super) keeper_out: Vec<record::Output<K::Published, E>>,
}

impl<I, K, E> Member<I, K, E>
where
    I: Moment,
    K: Kinds,
    E: Failed + std::fmt::Display,
{
    /// A member with `settings`, that has not started, to publish `published`, acquiring
    /// with `id` first.
    pub fn new(settings: Settings, published: K::Published, id: K::LeaseId) -> Self {
        let (timing, slots) = (settings.timing, settings.slots);
        let terms = Terms::new(timing, settings.one_term, settings.mutants.terms);
        let mut known = Known::new(timing, slots, settings.me.clone(), published);
        known.authorized = settings.authorized;
        known.delays.create_unmarked = settings.mutants.create_unmarked;
        known.delays.any_slot_led = settings.mutants.brand_new_slot_delayed;
        Self {
            known,
            settings,
            kept: Kept::default(),
            next_id: id,
            etag: None,
            anchored: false,
            tags: Tags::default(),
            routes: ByTag::default(),
            keeper: None,
            stage: Stage::Idle,
            terms: Some(terms),
            settling: None,
            late_replicas: Vec::new(),
            strays: Vec::new(),
            fans: BTreeMap::new(),
            late_of: (0, None),
            settled: None,
            woke: false,
            poked: false,
            asked_body: false,
            term: None,
            gave_up: false,
            work: VecDeque::new(),
            campaign_out: Vec::new(),
            keeper_out: Vec::new(),
        }
    }

    /// What the member knows (the line, its record, the lock-delays...): what a shell reads
    /// to carry a request out, and to show.
    pub fn known(&self) -> &Known<I, K> {
        &self.known
    }

    /// What the store's answers left for the campaign (the lease id of the attempt, the blob
    /// it read last, the record ahead).
    pub fn kept(&self) -> &Kept<K> {
        &self.kept
    }

    /// The lease id the next acquire goes out with.
    pub fn next_id(&self) -> &K::LeaseId {
        &self.next_id
    }

    /// The ETag of the blob after the last epoch write.
    pub fn etag(&self) -> Option<&K::ETag> {
        self.etag.as_ref()
    }

    /// Whether it is over ([`Output::End`]).
    pub fn is_over(&self) -> bool {
        matches!(self.stage, Stage::Over)
    }

    /// What ends its wait now: the answer to any request on its way (each is routed to its
    /// role; one no longer wanted is dropped), the earliest instant one of its roles is woken
    /// at, the body's answers.
    pub fn awaits(&self) -> Awaits<I> {
        let (body, stuck) = match &self.stage {
            Stage::Leading(l) => {
                let awaits = l.awaits();
                (awaits.body, awaits.stuck)
            }
            _ => (false, false),
        };
        Awaits {
            waiting: Waiting {
                answers: self.routes.keys().copied().collect(),
                until: self.timer(),
            },
            may_campaign: self.asked_body,
            body,
            stuck,
            over: self.is_over(),
        }
    }

    /// The earliest instant one of its roles is woken at: [`Member::awaits`]'s timer, without
    /// the rest (a shell that keeps its answers' routes itself asks it after every step).
    pub fn timer(&self) -> Option<I> {
        let mut until: Option<I> = None;
        let mut also = |at: Option<I>| {
            until = match (until, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        if let Some(keeper) = &self.keeper {
            also(keeper.until());
        }
        if let Some(settling) = &self.settling {
            also(settling.until());
        }
        also(self.late_replicas.iter().map(|(_, until)| *until).min());
        match &self.stage {
            Stage::Campaign(c) => also(c.until()),
            Stage::Leading(l) => also(l.until()),
            Stage::Resting { until, .. } => also(Some(*until)),
            Stage::Idle | Stage::Leaving(_) | Stage::Over => {}
        }
        until
    }

    /// The one transition: `input` came at `now` (`wall` on the wall clock). Returns what to
    /// do, in order; `env` draws, hands out lease ids and reads the wall clock in milliseconds
    /// when a rule needs it, at the moment it does.
    pub fn handle(
        &mut self,
        now: I,
        wall: K::Wall,
        input: Input<I, K, E>,
        env: &mut impl Env<K>,
    ) -> Vec<Output<I, K, E>> {
        let mut out = Vec::new();
        self.handle_into(now, wall, input, env, &mut out);
        out
    }

    /// [`Member::handle`], its outputs pushed onto `out` (a caller that handles many inputs
    /// keeps one list's room).
    pub fn handle_into(
        &mut self,
        now: I,
        wall: K::Wall,
        input: Input<I, K, E>,
        env: &mut impl Env<K>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let mut work = std::mem::take(&mut self.work);
        match input {
            Input::Start => {
                if matches!(self.stage, Stage::Idle) {
                    self.keeper = Some(Keeper::new(now, env.draw()));
                    work.push_back(Work::Keeper(record::Input::Start));
                    work.push_back(Work::Loop);
                }
            }
            Input::Answer(answer) => self.answered(now, wall, answer, &mut work, out),
            Input::Timer => self.timers(now, &mut work, out),
            Input::Shutdown => {
                self.known.shutdown = true;
                match &self.stage {
                    Stage::Campaign(_) => work.push_back(Work::Campaign(campaign::Input::Stop)),
                    Stage::Leading(_) => work.push_back(Work::Leading(leading::Input::Shutdown)),
                    Stage::Resting { .. } => self.rested(Some(Done::Shutdown), &mut work),
                    Stage::Idle | Stage::Leaving(_) | Stage::Over => {}
                }
            }
            Input::GiveUp if self.settings.one_term && !self.gave_up => {
                self.gave_up = true;
                if matches!(self.stage, Stage::Campaign(_)) {
                    work.push_back(Work::Campaign(campaign::Input::Stop));
                }
            }
            Input::GiveUp => {}
            Input::Wake {
                token_matches,
                handoff,
            } => {
                let answer = (self.known.wakes).wake(token_matches, now, handoff.as_deref());
                self.woke |= matches!(answer, WakeAnswer::Accepted);
                out.push(Output::Woken(answer));
            }
            Input::MayCampaign(may) => {
                if std::mem::take(&mut self.asked_body) {
                    work.push_back(Work::Campaign(campaign::Input::MayLead(may)));
                }
            }
            Input::BodyGone(end) => work.push_back(Work::Leading(leading::Input::BodyGone(end))),
            Input::StuckGone => work.push_back(Work::Leading(leading::Input::StuckGone)),
        }
        self.run(now, wall, &mut work, env, out);
        crate::room::put_back(&mut self.work, work);
    }

    /// Does `work` in order, and what it calls for, until nothing is left: each time the
    /// work runs out, what waits to be taken (a wake-up, a poke, a late acquire settled) goes
    /// to the role that listens for it now.
    fn run(
        &mut self,
        now: I,
        wall: K::Wall,
        work: &mut VecDeque<Work<I, K, E>>,
        env: &mut impl Env<K>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        loop {
            while let Some(next) = work.pop_front() {
                match next {
                    Work::Campaign(input) => self.campaign(now, wall, input, env, work, out),
                    Work::Keeper(input) => self.keep(now, wall, input, env, work, out),
                    Work::Leading(input) => self.lead(now, wall, input, env, work, out),
                    Work::Settling(input) => self.settle(now, input, out),
                    Work::Loop => self.next_stage(now, work, out),
                }
            }
            self.taken(work, out);
            if work.is_empty() {
                return;
            }
        }
    }

    /// What waits to be taken, to the role that listens for it now (as a wake-up, a poke or a
    /// settling waits for whoever listens next between the shell's tasks).
    fn taken(&mut self, work: &mut VecDeque<Work<I, K, E>>, out: &mut Vec<Output<I, K, E>>) {
        if let Stage::Campaign(c) = &self.stage {
            let (woken, settled) = c.takes();
            if self.woke && woken {
                self.woke = false;
                work.push_back(Work::Campaign(campaign::Input::Woken));
            }
            if settled && let Some(settled) = self.settled.take() {
                work.push_back(Work::Campaign(campaign::Input::Settled(settled)));
            }
        }
        if let Stage::Resting { wakeable: true, .. } = self.stage
            && std::mem::take(&mut self.woke)
        {
            self.rest_over(work, out);
        }
        // A sleeping keeper takes a poke (its `awaits().poked`).
        if self.poked && self.keeper.as_ref().is_some_and(|k| k.until().is_some()) {
            self.poked = false;
            work.push_back(Work::Keeper(record::Input::Poked));
        }
    }

    /// The timer came: each role whose instant came is woken.
    fn timers(
        &mut self,
        now: I,
        work: &mut VecDeque<Work<I, K, E>>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let due = |until: Option<I>| until.is_some_and(|at| at <= now);
        if self.keeper.as_ref().is_some_and(|k| due(k.until())) {
            work.push_back(Work::Keeper(record::Input::Timer));
        }
        if self.settling.as_ref().is_some_and(|s| due(s.until())) {
            work.push_back(Work::Settling(late::Input::Timer));
        }
        self.late_replicas_expired(now, out);
        match &self.stage {
            Stage::Campaign(c) if due(c.until()) => {
                work.push_back(Work::Campaign(campaign::Input::Timer));
            }
            Stage::Leading(l) if due(l.until()) => {
                work.push_back(Work::Leading(leading::Input::Timer));
            }
            Stage::Resting { until, .. } if *until <= now => self.rest_over(work, out),
            _ => {}
        }
    }

    /// An answer came: what it tells the member is taken in, and the role that sent its
    /// request gets it (an answer no longer wanted is dropped).
    fn answered(
        &mut self,
        now: I,
        wall: K::Wall,
        answer: Answer<I, super::messages::Reply<K, E>>,
        work: &mut VecDeque<Work<I, K, E>>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Some(route) = self.routes.remove(&answer.tag) else {
            return;
        };
        self.strays_on_refusal(now, &route.asked, &answer.answer, out);
        if route.who == Who::LateReplica {
            return self.late_replica(now, answer.tag, route.asked, &answer.answer, out);
        }
        if let (Who::Part(whole), Asked::Part(replica)) = (route.who, &route.asked) {
            if let Some((route, answer)) = self.part(whole, *replica, answer) {
                self.take_answer(now, wall, route, answer, work, out);
            }
            return;
        }
        if self.reanchor_notice(now, &route, &answer.answer, out) {
            return;
        }
        self.take_answer(now, wall, route, answer, work, out);
    }

    /// The answer to the request `route` says, to the role that asked (the answer moved once:
    /// it is one of the largest things a member handles).
    fn take_answer(
        &mut self,
        now: I,
        wall: K::Wall,
        route: Route<I, K>,
        answer: Answer<I, super::messages::Reply<K, E>>,
        work: &mut VecDeque<Work<I, K, E>>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let mut notes = Vec::new();
        let mut taking = Taking {
            known: &mut self.known,
            kept: &mut self.kept,
            etag: &mut self.etag,
            now,
            wall,
            notes: &mut notes,
            show: false,
            ghost: None,
            poke: false,
        };
        let (tag, sent, came) = (route.tag, answer.sent, answer.answer);
        out.extend(super::replies::said(&route.asked, &came).map(Output::Say));
        let next = match route.asked {
            Asked::Campaign(asked, ahead) => {
                let answer = taking.campaign(asked, ahead.map(|a| *a), came);
                Some(Work::Campaign(campaign::Input::Answer(Answer {
                    tag,
                    sent,
                    answer,
                })))
            }
            Asked::Keeper(asked) => {
                let answer = taking.keeper(&asked, came);
                Some(Work::Keeper(record::Input::Answer(Answer {
                    tag,
                    sent,
                    answer,
                })))
            }
            Asked::Leading(asked) => taking
                .leading(&asked, came)
                .map(|answer| Work::Leading(leading::Input::Answer(Answer { tag, sent, answer }))),
            Asked::Late | Asked::Release | Asked::LateReplica { .. } | Asked::Part(_) => {
                let answer = taking.settling(came);
                Some(Work::Settling(late::Input::Answer(Answer {
                    tag,
                    sent,
                    answer,
                })))
            }
        };
        let (show, ghost) = (taking.show, taking.ghost.take());
        self.poked |= taking.poke;
        if !notes.is_empty() {
            out.extend(notes.into_iter().map(Output::Note));
        }
        if let Some(ghost) = ghost {
            out.push(Output::Say(super::messages::Say::Ghost(ghost)));
        }
        if show {
            out.push(Output::ShowLine);
        }
        if let Some(next) = next {
            work.push_back(next);
        }
    }

    /// `request` of `who` goes out under its tag `tag`: under a fresh tag of the member's,
    /// which is returned.
    pub(super) fn route(&mut self, who: Who, tag: Tag, asked: Asked<I, K>, now: I) -> Tag {
        let mine = self.tags.fresh();
        let route = Route {
            who,
            tag,
            asked,
            sent: now,
        };
        self.routes.insert(mine, route);
        mine
    }

    /// The request `who` sent under `tag` is no longer wanted: forgotten under the member's
    /// tag (each replica's, when it went to every replica).
    pub(super) fn unroute(&mut self, who: Who, tag: Tag, out: &mut Vec<Output<I, K, E>>) {
        match self.mine(who, tag) {
            Some(mine) => {
                self.routes.remove(&mine);
                out.push(Output::Forget(mine));
            }
            None => {
                let parts = self.unfan(|r| r.who == who && r.tag == tag);
                out.extend(parts.into_iter().map(Output::Forget));
            }
        }
    }

    /// The member's tag of the request `who` sent under `tag`.
    pub(super) fn mine(&self, who: Who, tag: Tag) -> Option<Tag> {
        let found = self
            .routes
            .iter()
            .find(|(_, r)| r.who == who && r.tag == tag);
        found.map(|(mine, _)| *mine)
    }

    /// Every request of `who` still on its way is forgotten (the role is over).
    pub(super) fn forget_all(&mut self, who: Who, out: &mut Vec<Output<I, K, E>>) {
        let gone: Vec<Tag> = (self.routes.iter())
            .filter(|(_, r)| r.who == who)
            .map(|(mine, _)| *mine)
            .collect();
        for mine in gone {
            self.routes.remove(&mine);
            out.push(Output::Forget(mine));
        }
        let parts = self.unfan(|r| r.who == who);
        out.extend(parts.into_iter().map(Output::Forget));
    }
}

/// An acquire sent to `replica` under `id`, whose outcome is unknown.
#[derive(Debug, Clone)]
pub(super) struct Stray<Id> {
    pub replica: usize,
    pub id: Id,
}
