//! The campaign's machine ([`Campaign`]): the candidate, the round running and its sub-machines
//! composed, each request under a tag of its own, each answer routed to what awaits it.

use super::messages::{
    Awaits, End, Failed, Grounds, Input, Output, Reply, Request, Say, Settings, Won,
};
use crate::attempt::{self, Attempt, Awaited, Beside, Delay, GaveBack, Why};
use crate::candidate::{self, Candidate, Outcome, Rest, Round};
use crate::epoch;
use crate::exchange::{Answer, Inbox, Send, Tag, Tags, Waiting};
use crate::late::Settled;
use crate::slots::{
    AheadWatch, PollAction, PollEvent, PollRequest, PollRound, WaitAction, WaitEvent, WaitRound,
};
use crate::timing::{Deadline, Moment};
use crate::watch::{self, BlobWatch};

/// An attempt on its way, with the tags of its requests.
#[derive(Debug)]
struct Trying<I, E> {
    attempt: Attempt<I, E>,
    /// When its acquire was sent.
    sent: I,
    acquire: Option<Tag>,
    beside: Option<Tag>,
    last: Option<Tag>,
    awaited: Option<Awaited<I>>,
}

impl<I: Moment, E> Trying<I, E> {
    fn sent(&mut self, request: &attempt::Request<I>, tag: Tag) {
        let into = match request {
            attempt::Request::Acquire => &mut self.acquire,
            attempt::Request::ReadBeside { .. } | attempt::Request::WriteReserved { .. } => {
                &mut self.beside
            }
            _ => &mut self.last,
        };
        *into = Some(tag);
    }

    fn awaited_tag(&self) -> Option<Tag> {
        match self.awaited? {
            Awaited::Acquire(_) => self.acquire,
            Awaited::Beside => self.beside,
            Awaited::Sent => self.last,
        }
    }
}

/// What the candidate asked of the store itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Recreate,
    Look,
    Count,
}

/// What the campaign waits for.
#[derive(Debug)]
enum Stage<I, K, V, E> {
    /// An event of the candidate's own: a pause, the body, listening, a late acquire.
    Candidate,
    /// A pause: it ends at `until`, at `stop`, and (`woken`) at a wake-up, or (`placed`) a
    /// placement.
    Pause { until: I, woken: bool, placed: bool },
    /// The candidate's own request.
    Asked(Tag, Asked),
    /// An attempt, in a poller's round or not.
    Attempt(Trying<I, E>, Option<PollRound>),
    /// A poller's round, between its attempts.
    Poll(PollRound, Tag),
    /// A watcher's round.
    Watch(watch::Round, Tag),
    /// A waiting member's round.
    Wait(WaitRound<K, V>, Tag),
    /// The mutant `trust-the-notice`'s read.
    Notice(Tag),
    /// Sitting a late acquire out, sent at `sent`: until it settled, or until the lease it may
    /// have taken has surely expired (`sent + L`).
    SittingOut { sent: I },
    /// `stop` came while sitting it out: a grace until `until` for its settling (a late
    /// success is released then, rule 7 of docs/safety.md).
    Grace { expired: I, until: I },
    /// Over.
    Over,
}

/// A member's campaign: the candidate, the round running, and what the rounds remember.
#[derive(Debug)]
pub struct Campaign<I, K, V, T, E> {
    settings: Settings,
    candidate: Candidate<I>,
    /// One round only, without the candidate ([`Campaign::one_round`]).
    one_round: Option<Round>,
    stage: Stage<I, K, V, E>,
    tags: Tags,
    inbox: Inbox<I, Reply<V, E>>,
    /// The lease blob's reads so far.
    blob: BlobWatch<I, T>,
    /// With slots: the record of the member ahead.
    ahead: AheadWatch<K, V>,
    /// When the acquire that got no answer in time was sent, until the candidate sits it out.
    late: Option<I>,
    /// `stop` came: the next pause ends at once.
    stopping: bool,
    /// The term a round won.
    won: Option<Won<I>>,
}

impl<I, K, V, T, E> Campaign<I, K, V, T, E>
where
    I: Moment,
    K: Clone + PartialEq + std::fmt::Debug,
    V: Clone + PartialEq + std::fmt::Debug,
    T: Clone + PartialEq,
    E: Failed,
{
    /// A campaign with `settings`, until a term is won, `stop` comes or the credentials are
    /// refused.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            candidate: Candidate::new(settings.timing, settings.slots),
            one_round: None,
            stage: Stage::Candidate,
            tags: Tags::default(),
            inbox: Inbox::default(),
            blob: BlobWatch::default(),
            ahead: AheadWatch::default(),
            late: None,
            stopping: false,
            won: None,
        }
    }

    /// A campaign of `round` alone: it ends with the round ([`End::Won`] or [`End::Round`]).
    pub fn one_round(settings: Settings, round: Round) -> Self {
        Self {
            one_round: Some(round),
            ..Self::new(settings)
        }
    }

    /// What ends its wait now.
    pub fn awaits(&self) -> Awaits<I> {
        let (until, answer, pause) = match &self.stage {
            Stage::Pause {
                until,
                woken,
                placed,
            } => (Some(*until), None, Some((*woken, *placed))),
            Stage::Attempt(trying, _) => {
                let until = match trying.awaited {
                    Some(Awaited::Acquire(until)) => Some(until),
                    _ => None,
                };
                (until, trying.awaited_tag(), None)
            }
            Stage::Asked(tag, _)
            | Stage::Poll(_, tag)
            | Stage::Watch(_, tag)
            | Stage::Wait(_, tag)
            | Stage::Notice(tag) => (None, Some(*tag), None),
            Stage::SittingOut { sent } => {
                let expired = *sent + self.settings.timing.duration;
                (Some(expired), None, Some((false, false)))
            }
            Stage::Grace { until, .. } => (Some(*until), None, None),
            Stage::Candidate | Stage::Over => (None, None, None),
        };
        let settled = matches!(self.stage, Stage::SittingOut { .. } | Stage::Grace { .. });
        Awaits {
            waiting: Waiting {
                answers: answer.into_iter().collect(),
                until,
            },
            stop: pause.is_some(),
            woken: pause.is_some_and(|(woken, _)| woken),
            placed: pause.is_some_and(|(_, placed)| placed),
            settled,
        }
    }

    /// Whether it is over.
    pub fn is_over(&self) -> bool {
        matches!(self.stage, Stage::Over)
    }

    /// The one transition: `input` came at `now`. Returns what to do, in order.
    pub fn handle<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        input: Input<I, V, E>,
        g: &mut G,
    ) -> Vec<Output<I, K, E>> {
        let mut out = Vec::new();
        match input {
            Input::Start => match self.one_round {
                Some(round) => self.round(now, round, g, &mut out),
                None => self.step(now, candidate::Event::Start, g, &mut out),
            },
            Input::Answer(answer) => {
                let Some(answer) = self.inbox.came(answer) else {
                    return out;
                };
                match self.awaits().waiting.answers.contains(&answer.tag) {
                    true => self.answered(now, answer, g, &mut out),
                    false => self.inbox.keep(answer),
                }
            }
            Input::Timer => self.timer(now, g, &mut out),
            Input::Stop => {
                self.stopping = true;
                match self.stage {
                    Stage::SittingOut { .. } => self.sit_out_stopped(now, g, &mut out),
                    _ => self.paused(now, candidate::Event::Stopped, g, &mut out),
                }
            }
            Input::Woken => self.paused(now, candidate::Event::Woken, g, &mut out),
            Input::Placed => self.paused(now, candidate::Event::Placed, g, &mut out),
            Input::Listening => self.step(now, candidate::Event::Listening, g, &mut out),
            Input::MayLead(may) => self.step(now, candidate::Event::MayLead(may), g, &mut out),
            Input::Settled(settled) => self.settled(now, settled, g, &mut out),
        }
        out
    }

    /// An event that ends a pause, if the campaign pauses (else it is for later, or nothing).
    fn paused<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        event: candidate::Event<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let wanted = match (&self.stage, &event) {
            (Stage::Pause { .. }, candidate::Event::Stopped | candidate::Event::Rested) => true,
            (Stage::Pause { woken, .. }, candidate::Event::Woken) => *woken,
            (Stage::Pause { placed, .. }, candidate::Event::Placed) => *placed,
            _ => false,
        };
        if wanted {
            self.step(now, event, g, out);
        }
    }

    /// The timer came: a pause is over, or an acquire got no answer in time.
    fn timer<G: Grounds<I, K, V, T>>(&mut self, now: I, g: &mut G, out: &mut Vec<Output<I, K, E>>) {
        match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Attempt(trying, poll) if matches!(trying.awaited, Some(Awaited::Acquire(_))) => {
                self.attempt_step(now, trying, poll, attempt::Event::NoAnswer, g, out)
            }
            stage @ Stage::Pause { .. } => {
                self.stage = stage;
                self.paused(now, candidate::Event::Rested, g, out);
            }
            // The lease it may have taken has surely expired.
            stage @ Stage::SittingOut { .. } => {
                self.stage = stage;
                self.settled(now, Settled::MayHold, g, out);
            }
            Stage::Grace { expired, .. } => {
                out.push(Output::Say(Say::Unsettled(expired)));
                self.step(now, candidate::Event::SatOut(None), g, out);
            }
            stage => self.stage = stage,
        }
    }

    /// Sends `request` under a new tag.
    fn send(&mut self, request: Request<I, K>, out: &mut Vec<Output<I, K, E>>) -> Tag {
        let tag = self.tags.fresh();
        self.inbox.sent(tag);
        out.push(Output::Send(Send { tag, request }));
        tag
    }

    /// One step of the candidate, and what its actions call for.
    fn step<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        event: candidate::Event<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let mut seen = g.seen();
        // (The shell learns of a late acquire only from this step's outputs.)
        seen.late |= self.late.is_some();
        self.stage = Stage::Candidate;
        let actions = self.candidate.step(event, &seen, &mut || g.draw());
        for action in actions {
            self.act(now, action, g, out);
        }
    }

    fn act<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        action: candidate::Action<I, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        use candidate::Action;
        match action {
            Action::Say(note) => out.push(Output::Say(Say::Candidate(note))),
            Action::SitOut => {
                let sent = self.late.take().or_else(|| g.late_sent()).unwrap_or(now);
                self.stage = Stage::SittingOut { sent };
                out.push(Output::SitOut);
            }
            Action::Recreate => self.ask(Request::Recreate { slot: 0 }, Asked::Recreate, out),
            Action::Missing => g.delay(0, Delay::Missing),
            Action::Look => self.ask(Request::Look { slot: 0 }, Asked::Look, out),
            Action::AskBody => out.push(Output::AskBody),
            Action::CheckCount => self.ask(Request::CheckCount, Asked::Count, out),
            Action::Round(round) => self.round(now, round, g, out),
            Action::Listen => out.push(Output::Listen),
            Action::Rest(how) => {
                let until = match how {
                    Rest::For(pause) | Rest::LeaseClock(pause) => now + pause,
                    Rest::UntilAtMost(at, most) => at.min(now + most),
                };
                self.pause(now, until, false, false, g, out);
            }
            Action::Follow { pause, listening } => {
                self.pause(now, now + pause, true, listening, g, out)
            }
            Action::End(end) => {
                self.stage = Stage::Over;
                let end = match end {
                    candidate::End::Won => match self.won.take() {
                        Some(won) => End::Won(won),
                        None => unreachable!("a round won a term"),
                    },
                    candidate::End::Stopped => End::Stopped,
                    candidate::End::Denied(e) => End::Denied(e),
                };
                out.push(Output::End(end));
            }
        }
    }

    /// The late acquire sat out settled so (or the lease it may have taken has surely expired):
    /// the pause before the next attempt, from what it learnt; after a stop, none.
    fn settled<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        settled: Settled,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let timing = self.settings.timing;
        match self.stage {
            Stage::SittingOut { sent } => {
                let pause = settled.pause(sent, now, &timing, || g.draw());
                self.step(now, candidate::Event::SatOut(Some(pause)), g, out);
            }
            Stage::Grace { .. } => self.step(now, candidate::Event::SatOut(None), g, out),
            _ => {}
        }
    }

    /// `stop` while sitting a late acquire out: exiting now would leave a late success held by
    /// nobody; its answer usually comes soon after the timeout, and the release then takes one
    /// request, so it is given `2R`. (Come at the expiry itself, the expiry is first: the
    /// pause it calls for ends at once.)
    fn sit_out_stopped<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Stage::SittingOut { sent } = self.stage else {
            return;
        };
        let timing = self.settings.timing;
        let expired = sent + timing.duration;
        if now >= expired {
            return self.settled(now, Settled::MayHold, g, out);
        }
        let until = now + 2 * timing.request_timeout();
        self.stage = Stage::Grace { expired, until };
    }

    fn ask(&mut self, request: Request<I, K>, asked: Asked, out: &mut Vec<Output<I, K, E>>) {
        let tag = self.send(request, out);
        self.stage = Stage::Asked(tag, asked);
    }

    /// A pause until `until`: over at once if `stop` came already.
    fn pause<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        until: I,
        woken: bool,
        placed: bool,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        self.stage = Stage::Pause {
            until,
            woken,
            placed,
        };
        if self.stopping {
            self.step(now, candidate::Event::Stopped, g, out);
        }
    }

    /// The round the candidate calls for.
    fn round<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        round: Round,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let member = g.seen().member;
        match round {
            Round::Acquire => self.attempt(now, 0, Beside::Nothing, None, g, out),
            Round::Handed => {
                let reserved = g.reserved();
                if self.settings.mutants.trust_the_notice {
                    g.begin(0);
                    let tag = self.send(Request::Notice, out);
                    self.stage = Stage::Notice(tag);
                    return;
                }
                let beside = match reserved {
                    Some(epoch) if self.settings.slots == 1 => Beside::ReservedEpoch(epoch),
                    _ => Beside::Read,
                };
                self.attempt(now, 0, beside, None, g, out)
            }
            Round::Slots => {
                let timing = self.settings.timing;
                let poll = PollRound::new(&timing, self.settings.slots, member);
                self.poll(now, poll, PollEvent::Start, g, out)
            }
            Round::WatchSlots if !member => self.rounded(now, Ok(Outcome::Look), g, out),
            Round::WatchSlots => {
                let wait = WaitRound::new(&self.settings.timing);
                self.wait(now, wait, WaitEvent::Start, g, out)
            }
            Round::Watch if !member => self.rounded(now, Ok(Outcome::Acquire), g, out),
            Round::Watch => {
                let stays = self.settings.mutants.watcher_stays;
                let watch = watch::Round::new(&self.settings.timing, stays);
                self.watch(now, watch, watch::Event::Start, g, out)
            }
        }
    }

    /// A round is over: the candidate takes what it came to (a campaign of one round ends).
    fn rounded<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        result: Result<Outcome, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        out.push(Output::Rounded(result.as_ref().err().cloned()));
        if self.one_round.is_none() {
            return self.step(now, candidate::Event::Round(result), g, out);
        }
        self.stage = Stage::Over;
        let end = match (result, self.won.take()) {
            (Ok(Outcome::Won), Some(won)) => End::Won(won),
            (result, _) => End::Round(result),
        };
        out.push(Output::End(end));
    }

    /// An answer awaited came.
    fn answered<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        answer: Answer<I, Reply<V, E>>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        use candidate::Event as C;
        match (
            std::mem::replace(&mut self.stage, Stage::Over),
            answer.answer,
        ) {
            (Stage::Asked(_, Asked::Recreate), Reply::Recreated) => {
                self.step(now, C::Recreated, g, out)
            }
            (Stage::Asked(_, Asked::Look), Reply::Looked) => self.step(now, C::Looked, g, out),
            (Stage::Asked(_, Asked::Count), Reply::Counted(c)) => {
                self.step(now, C::Counted(c), g, out)
            }
            (Stage::Attempt(trying, poll), Reply::Attempt(event)) => {
                self.attempt_step(now, trying, poll, event, g, out)
            }
            (Stage::Poll(poll, _), Reply::Listed(listed)) => {
                self.poll(now, poll, PollEvent::Listed(listed), g, out)
            }
            (Stage::Poll(poll, _), Reply::Recreated) => {
                self.poll(now, poll, PollEvent::Recreated, g, out)
            }
            (Stage::Poll(poll, _), Reply::Looked) => {
                self.poll(now, poll, PollEvent::Looked, g, out)
            }
            (Stage::Watch(round, _), Reply::Watch(event)) => self.watch(now, round, event, g, out),
            (Stage::Wait(round, _), Reply::Wait(event)) => self.wait(now, round, event, g, out),
            (Stage::Notice(_), Reply::Notice(read)) => self.noticed(now, answer.sent, read, g, out),
            (stage, reply) => {
                debug_assert!(false, "a campaign at {stage:?} got {reply:?}");
                self.stage = stage;
            }
        }
    }
}

impl<I, K, V, T, E> Campaign<I, K, V, T, E>
where
    I: Moment,
    K: Clone + PartialEq + std::fmt::Debug,
    V: Clone + PartialEq + std::fmt::Debug,
    T: Clone + PartialEq,
    E: Failed,
{
    /// An attempt on `slot` begins (in the poller's round `poll`, if any).
    fn attempt<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        slot: u32,
        beside: Beside,
        poll: Option<PollRound>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        g.begin(slot);
        let s = &self.settings;
        let attempt = Attempt::new(
            slot,
            now,
            s.timing,
            beside,
            s.create_if_missing,
            s.mutants.attempt,
        );
        let trying = Trying {
            attempt,
            sent: now,
            acquire: None,
            beside: None,
            last: None,
            awaited: None,
        };
        self.attempt_step(now, trying, poll, attempt::Event::Start, g, out)
    }

    /// One step of an attempt; an answer it awaits that came already goes in at once.
    fn attempt_step<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut trying: Trying<I, E>,
        poll: Option<PollRound>,
        event: attempt::Event<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let slot = trying.attempt.slot();
        for action in trying.attempt.step(now, event, g) {
            match action {
                attempt::Action::Send(request) => {
                    let tag = self.send(Request::Attempt { slot, request }, out);
                    trying.sent(&request, tag);
                }
                attempt::Action::Await(awaited) => trying.awaited = Some(awaited),
                attempt::Action::SpendId => out.push(Output::SpendId),
                attempt::Action::Delay(delay) => g.delay(slot, delay),
                attempt::Action::Done(outcome) => {
                    return self.attempt_done(now, trying, poll, outcome, g, out);
                }
            }
        }
        let kept = trying.awaited_tag().and_then(|tag| self.inbox.take(tag));
        self.stage = Stage::Attempt(trying, poll);
        if let Some(kept) = kept {
            self.answered(now, kept, g, out);
        }
    }

    /// An attempt is over: what it came to goes to its round.
    fn attempt_done<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        trying: Trying<I, E>,
        poll: Option<PollRound>,
        outcome: attempt::Outcome<I, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let slot = trying.attempt.slot();
        let timing = self.settings.timing;
        let won: Result<bool, E> = match outcome {
            attempt::Outcome::Won {
                deadline,
                epoch,
                reserved,
            } => {
                self.won = Some(Won {
                    slot,
                    deadline,
                    epoch,
                    reserved,
                });
                Ok(true)
            }
            attempt::Outcome::Held | attempt::Outcome::GaveBack(GaveBack::OtherCount) => Ok(false),
            attempt::Outcome::GaveBack(GaveBack::LockDelay) => Ok(false),
            attempt::Outcome::GaveBack(GaveBack::ShuttingDown) => {
                out.push(Output::Say(Say::ShuttingDown));
                Ok(false)
            }
            attempt::Outcome::NoAnswer => {
                if let Some(tag) = trying.acquire {
                    self.inbox.forget(tag);
                    self.late = Some(trying.sent);
                    out.push(Output::Late(tag));
                }
                Err(E::timed_out(timing.request_timeout()))
            }
            attempt::Outcome::Failed(Why::Store(e)) => Err(e),
            attempt::Outcome::Failed(Why::PastStopDeadline(span)) => Err(E::timed_out(span)),
            attempt::Outcome::Failed(Why::LastEpoch(last)) => Err(E::last_epoch(last)),
        };
        // What went beside the acquire, or was sent without being waited for, goes on alone.
        for tag in self.inbox.forget_all() {
            out.push(Output::Forget(tag));
        }
        match poll {
            Some(poll) => self.poll(now, poll, PollEvent::Tried(won), g, out),
            None => {
                let outcome = won.map(|won| match won {
                    true => Outcome::Won,
                    false => Outcome::Held,
                });
                self.rounded(now, outcome, g, out)
            }
        }
    }

    /// One step of a poller's round.
    fn poll<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut poll: PollRound,
        event: PollEvent<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let request = match poll.step(now, event, g) {
            PollAction::Send(PollRequest::Try(slot)) => {
                return self.attempt(now, slot, Beside::Nothing, Some(poll), g, out);
            }
            PollAction::Send(PollRequest::List { until }) => Request::List { until },
            PollAction::Send(PollRequest::Recreate(slot)) => Request::Recreate { slot },
            PollAction::Send(PollRequest::Look(slot)) => Request::Look { slot },
            PollAction::Done(end) => {
                let end = end.map(|won| match won {
                    true => Outcome::Won,
                    false => Outcome::Held,
                });
                return self.rounded(now, end, g, out);
            }
        };
        let tag = self.send(request, out);
        self.stage = Stage::Poll(poll, tag);
    }

    /// One step of a watcher's round.
    fn watch<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut round: watch::Round,
        event: watch::Event<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        for action in round.step(now, event, &mut self.blob, g) {
            match action {
                watch::Action::Send(request) => {
                    let tag = self.send(Request::Watch(request), out);
                    self.stage = Stage::Watch(round, tag);
                    return;
                }
                watch::Action::Authorized => g.authorized(),
                watch::Action::Missing => {
                    g.delay(0, Delay::Missing);
                    out.push(Output::Say(Say::BlobGone));
                }
                watch::Action::ShowLine => out.push(Output::ShowLine),
                watch::Action::Acquiring(why) => out.push(Output::Say(Say::Acquiring(why))),
                watch::Action::Done(end) => return self.rounded(now, end, g, out),
            }
        }
    }

    /// One step of a waiting member's round.
    fn wait<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut round: WaitRound<K, V>,
        event: WaitEvent<V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        for action in round.step(now, event, &mut self.ahead, g) {
            match action {
                WaitAction::Send(request) => {
                    let tag = self.send(Request::Wait(request), out);
                    self.stage = Stage::Wait(round, tag);
                    return;
                }
                WaitAction::Authorized => g.authorized(),
                WaitAction::ShowLine => out.push(Output::ShowLine),
                // (The place it names is the one the candidate sees next.)
                WaitAction::Done(place) => {
                    return self.rounded(now, place.map(|_| Outcome::Look), g, out);
                }
            }
        }
    }

    /// The mutant `trust-the-notice`: a notice naming this member is a term at once, with
    /// the next epoch; else the attempt after a wake-up.
    fn noticed<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        sent: I,
        read: Result<Option<Option<u64>>, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        match read {
            Err(e) => self.rounded(now, Err(e), g, out),
            Ok(None) => self.attempt(now, 0, Beside::Read, None, g, out),
            Ok(Some(last)) => {
                out.push(Output::SpendId);
                self.won = Some(Won {
                    slot: 0,
                    deadline: Deadline::from_sent(sent, &self.settings.timing),
                    epoch: last.map_or(1, |last| epoch::after(last).unwrap_or(u64::MAX)),
                    reserved: false,
                });
                self.rounded(now, Ok(Outcome::Won), g, out)
            }
        }
    }
}
