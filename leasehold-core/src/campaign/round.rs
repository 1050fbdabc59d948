//! The round the candidate calls for, run ([`Runner`]): how each round starts (an acquisition
//! attempt, a poller's round of slots and its attempts, a watcher's round, a waiting member's
//! round, the mutant `trust-the-notice`'s read), how each answer steps it, and what it came to
//! ([`Next`]). Beside them, what the rounds remember between rounds (the watch of the lease
//! blob, and with slots of the record ahead) and what they leave the candidate: the term won,
//! the acquire left late.

use super::flight::InFlight;
use super::majority::{self, Majority, Replicas};
use super::messages::{Failed, Grounds, Output, Reply, Request, Say, Settings, Won};
use super::trying::{Step, Tried, Trying};
use crate::attempt::{self, Beside, Delay};
use crate::candidate::{Outcome, Round};
use crate::epoch;
use crate::exchange::{Answer, Tag};
use crate::quorum;
use crate::slots::{
    AheadWatch, PollAction, PollEvent, PollRequest, PollRound, WaitAction, WaitEvent, WaitRound,
};
use crate::timing::{Deadline, Moment};
use crate::watch::{self, BlobWatch};

/// The round running, and the answer it awaits.
#[derive(Debug)]
pub(super) enum Running<I, K, V, E> {
    /// An attempt, in a poller's round or not.
    Attempt(Box<Trying<I, E>>),
    /// An attempt on a majority of several replicas.
    Majority(Box<Majority<I>>),
    /// A poller's round, between its attempts.
    Poll(PollRound, Tag),
    /// A watcher's round.
    Watch(watch::Round, Tag),
    /// A waiting member's round.
    Wait(WaitRound<K, V>, Tag),
    /// The mutant `trust-the-notice`'s read.
    Notice(Tag),
}

impl<I: Moment, K, V, E: Failed> Running<I, K, V, E> {
    /// The instant it is woken at, as [`Running::awaits`] names it, without the answers.
    pub(super) fn until(&self) -> Option<I> {
        match self {
            Running::Attempt(trying) => trying.awaits().0,
            // (Several replicas: the simulator's drawn histories have one.)
            Running::Majority(majority) => majority.awaits(&mut Vec::new()),
            Running::Poll(..) | Running::Watch(..) | Running::Wait(..) | Running::Notice(_) => None,
        }
    }

    /// Whether it awaits the answer under `tag`, as [`Running::awaits`] names them, without
    /// building their list (asked at every answer of a round).
    pub(super) fn awaits_answer(&self, tag: Tag) -> bool {
        match self {
            Running::Attempt(trying) => trying.awaits().1 == Some(tag),
            // (Several replicas: the simulator's drawn histories have one.)
            Running::Majority(majority) => {
                let mut answers = Vec::new();
                majority.awaits(&mut answers);
                answers.contains(&tag)
            }
            Running::Poll(_, awaited)
            | Running::Watch(_, awaited)
            | Running::Wait(_, awaited)
            | Running::Notice(awaited) => *awaited == tag,
        }
    }

    /// What it awaits: the answers under their tags (added to `answers`), and the instant it
    /// is woken at (an acquire late, a replica's request cut).
    pub(super) fn awaits(&self, answers: &mut Vec<Tag>) -> Option<I> {
        let (until, tag) = match self {
            Running::Attempt(trying) => trying.awaits(),
            Running::Majority(majority) => return majority.awaits(answers),
            Running::Poll(_, tag)
            | Running::Watch(_, tag)
            | Running::Wait(_, tag)
            | Running::Notice(tag) => (None, Some(*tag)),
        };
        answers.extend(tag);
        until
    }
}

/// Where a round is after a step.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // returned once per step: boxing would allocate per step
pub(super) enum Next<I, K, V, E> {
    /// Still running.
    Runs(Running<I, K, V, E>),
    /// Over: what it came to, for the candidate.
    Over(Result<Outcome, E>),
}

/// Runs the candidate's rounds, and keeps what they remember and what they leave.
#[derive(Debug)]
pub(super) struct Runner<I, K, V, T, E> {
    settings: Settings,
    /// The lease blob's reads so far.
    blob: BlobWatch<I, T>,
    /// With slots: the record of the member ahead.
    ahead: AheadWatch<K, V>,
    /// The term a round won, until the campaign ends with it.
    won: Option<Won<I>>,
    /// When the acquire that got no answer in time was sent, until the candidate sits it out.
    late: Option<I>,
    /// On several replicas, what the attempts keep of them between attempts.
    replicas: Replicas<I>,
    /// An attempt's actions of one of its steps, and a watcher's round's, empty between them:
    /// kept for their room (a campaign steps its rounds thousands of times).
    attempt_actions: Vec<attempt::Action<I, E>>,
    watch_actions: Vec<watch::Action<I, E>>,
}

impl<I, K, V, T, E> Runner<I, K, V, T, E>
where
    I: Moment,
    E: Failed,
    K: Clone + PartialEq + std::fmt::Debug,
    V: Clone + PartialEq + std::fmt::Debug,
    T: Clone + PartialEq,
{
    /// The rounds of a campaign with `settings`.
    pub(super) fn new(settings: Settings) -> Self {
        Self {
            settings,
            blob: BlobWatch::default(),
            ahead: AheadWatch::default(),
            won: None,
            late: None,
            replicas: Replicas::default(),
            attempt_actions: Vec::new(),
            watch_actions: Vec::new(),
        }
    }

    /// The term a round won, taken.
    pub(super) fn take_won(&mut self) -> Option<Won<I>> {
        self.won.take()
    }

    /// Whether an acquire got no answer in time, which the candidate has not sat out yet.
    pub(super) fn is_late(&self) -> bool {
        self.late.is_some()
    }

    /// When the acquire that got no answer in time was sent, taken.
    pub(super) fn take_late(&mut self) -> Option<I> {
        self.late.take()
    }

    /// The round the candidate calls for begins.
    pub(super) fn start<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        round: Round,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        let member = g.member();
        let settings = self.settings;
        if settings.set.len() > 1 {
            return self.start_on_replicas(now, flight, g, out);
        }
        match round {
            Round::Acquire => {
                let trying = Trying::begin(now, 0, Beside::Nothing, None, &settings, g);
                self.attempt(now, trying, attempt::Event::Start, flight, g, out)
            }
            Round::Handed => {
                let reserved = g.reserved();
                if settings.mutants.trust_the_notice {
                    g.begin(0);
                    return Next::Runs(Running::Notice(flight.send(Request::Notice, out)));
                }
                let beside = match reserved {
                    Some(epoch) if settings.slots == 1 => Beside::ReservedEpoch(epoch),
                    _ => Beside::Read,
                };
                let trying = Trying::begin(now, 0, beside, None, &settings, g);
                self.attempt(now, trying, attempt::Event::Start, flight, g, out)
            }
            Round::Slots => {
                let poll = PollRound::new(&settings.timing, settings.slots, member);
                self.poll(now, poll, PollEvent::Start, flight, g, out)
            }
            Round::WatchSlots if !member => Next::Over(Ok(Outcome::Look)),
            Round::WatchSlots => {
                let wait = WaitRound::new(&settings.timing);
                self.wait(now, wait, WaitEvent::Start, flight, g, out)
            }
            Round::Watch if !member => Next::Over(Ok(Outcome::Acquire)),
            Round::Watch => {
                let watch = watch::Round::new(&settings.timing, settings.mutants.watcher_stays);
                self.watch(now, watch, watch::Event::Start, flight, g, out)
            }
        }
    }

    /// An answer the round awaits came.
    pub(super) fn answered<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        running: Running<I, K, V, E>,
        answer: Answer<I, Reply<V, E>>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        match (running, answer.answer) {
            (Running::Attempt(trying), Reply::Attempt(event)) => {
                self.attempt(now, trying, event, flight, g, out)
            }
            (Running::Majority(mut majority), Reply::Replica(reply)) => {
                let answer = Answer {
                    tag: answer.tag,
                    sent: answer.sent,
                    answer: reply,
                };
                match majority.answer(answer) {
                    Some(input) => self.majority(now, majority, input, flight, g, out),
                    None => Next::Runs(Running::Majority(majority)),
                }
            }
            (Running::Poll(poll, _), Reply::Listed(listed)) => {
                self.poll(now, poll, PollEvent::Listed(listed), flight, g, out)
            }
            (Running::Poll(poll, _), Reply::Recreated) => {
                self.poll(now, poll, PollEvent::Recreated, flight, g, out)
            }
            (Running::Poll(poll, _), Reply::Looked) => {
                self.poll(now, poll, PollEvent::Looked, flight, g, out)
            }
            (Running::Watch(round, _), Reply::Watch(event)) => {
                self.watch(now, round, event, flight, g, out)
            }
            (Running::Wait(round, _), Reply::Wait(event)) => {
                self.wait(now, round, event, flight, g, out)
            }
            (Running::Notice(_), Reply::Notice(read)) => {
                self.noticed(now, answer.sent, read, flight, g, out)
            }
            (running, reply) => {
                debug_assert!(false, "a campaign at {running:?} got {reply:?}");
                Next::Runs(running)
            }
        }
    }

    /// The timer came: an acquire got no answer in time (else the round waits on).
    pub(super) fn timer<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        running: Running<I, K, V, E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        match running {
            Running::Attempt(trying) if trying.awaits_acquire() => {
                self.attempt(now, trying, attempt::Event::NoAnswer, flight, g, out)
            }
            Running::Majority(majority) => {
                self.majority(now, majority, quorum::Input::Timer, flight, g, out)
            }
            running => Next::Runs(running),
        }
    }

    /// One step of an attempt.
    fn attempt<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        trying: Box<Trying<I, E>>,
        event: attempt::Event<E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        let actions = &mut self.attempt_actions;
        match trying.step(now, event, actions, flight, g, out) {
            Step::Awaits(trying) => Next::Runs(Running::Attempt(trying)),
            Step::Done(tried) => self.tried(now, tried, flight, g, out),
        }
    }

    /// On several replicas, the round the candidate calls for begins: every round is an
    /// attempt on a majority of them (a watcher's round watches one blob, and a handoff's
    /// wake-up reserves an epoch on one: neither is a majority's yet), so that a member in
    /// line campaigns as a poller does, once a pause. Slots with replicas are refused by
    /// `check`.
    fn start_on_replicas<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        debug_assert!(
            self.settings.slots == 1,
            "slots with replicas: refused by check"
        );
        // A wake-up's reserved epoch is the single lease's (one ETag).
        let _ = g.reserved();
        let majority = Majority::begin(&self.settings, &self.replicas, g);
        self.majority(now, majority, quorum::Input::Start, flight, g, out)
    }

    /// One step of an attempt on the replicas.
    fn majority<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        majority: Box<Majority<I>>,
        input: quorum::Input<I>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        let kept = &mut self.replicas;
        match majority.step(now, input, kept, flight, g, out) {
            majority::Step::Awaits(majority) => Next::Runs(Running::Majority(majority)),
            majority::Step::Done(tried) => self.tried(now, tried, flight, g, out),
        }
    }

    /// An attempt is over: what it came to goes to its round (and a term won, or an acquire
    /// left late, to the candidate).
    fn tried<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        tried: Tried<I, E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        if let Some(sent) = tried.late {
            self.late = Some(sent);
        }
        let won = tried.result.map(|won| match won {
            Some(won) => {
                self.won = Some(won);
                true
            }
            None => false,
        });
        match tried.poll {
            Some(poll) => self.poll(now, poll, PollEvent::Tried(won), flight, g, out),
            None => Next::Over(won.map(|won| match won {
                true => Outcome::Won,
                false => Outcome::Held,
            })),
        }
    }

    /// One step of a poller's round.
    fn poll<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut poll: PollRound,
        event: PollEvent<E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        let request = match poll.step(now, event, g) {
            PollAction::Send(PollRequest::Try(slot)) => {
                let settings = self.settings;
                let trying = Trying::begin(now, slot, Beside::Nothing, Some(poll), &settings, g);
                return self.attempt(now, trying, attempt::Event::Start, flight, g, out);
            }
            PollAction::Send(PollRequest::List { until }) => Request::List { until },
            PollAction::Send(PollRequest::Recreate(slot)) => Request::Recreate { slot },
            PollAction::Send(PollRequest::Look(slot)) => Request::Look { slot },
            PollAction::Done(end) => {
                return Next::Over(end.map(|won| match won {
                    true => Outcome::Won,
                    false => Outcome::Held,
                }));
            }
        };
        let tag = flight.send(request, out);
        Next::Runs(Running::Poll(poll, tag))
    }

    /// One step of a watcher's round.
    fn watch<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut round: watch::Round,
        event: watch::Event<E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        let mut actions = std::mem::take(&mut self.watch_actions);
        round.step_into(now, event, &mut self.blob, g, &mut actions);
        let mut next = None;
        for action in actions.drain(..) {
            match action {
                watch::Action::Send(request) => {
                    let tag = flight.send(Request::Watch(request), out);
                    next = Some(Next::Runs(Running::Watch(round, tag)));
                    break;
                }
                watch::Action::Authorized => g.authorized(),
                watch::Action::Missing => {
                    g.delay(0, Delay::Missing);
                    out.push(Output::Say(Say::BlobGone));
                }
                watch::Action::ShowLine => out.push(Output::ShowLine),
                watch::Action::Acquiring(why) => out.push(Output::Say(Say::Acquiring(why))),
                watch::Action::Done(end) => {
                    next = Some(Next::Over(end));
                    break;
                }
            }
        }
        crate::room::put_back(&mut self.watch_actions, actions);
        next.expect("a watcher's step ends with a request or the round's end")
    }

    /// One step of a waiting member's round.
    fn wait<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        mut round: WaitRound<K, V>,
        event: WaitEvent<V, E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        for action in round.step(now, event, &mut self.ahead, g) {
            match action {
                WaitAction::Send(request) => {
                    let tag = flight.send(Request::Wait(request), out);
                    return Next::Runs(Running::Wait(round, tag));
                }
                WaitAction::Authorized => g.authorized(),
                WaitAction::ShowLine => out.push(Output::ShowLine),
                // (The place it names is the one the candidate sees next.)
                WaitAction::Done(place) => return Next::Over(place.map(|_| Outcome::Look)),
            }
        }
        unreachable!("a waiting member's step ends with a request or the round's end")
    }

    /// The mutant `trust-the-notice`: a notice naming this member is a term at once, with
    /// the next epoch; else the attempt after a wake-up.
    fn noticed<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        sent: I,
        read: Result<Option<Option<u64>>, E>,
        flight: &mut InFlight<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Next<I, K, V, E> {
        match read {
            Err(e) => Next::Over(Err(e)),
            Ok(None) => {
                let settings = self.settings;
                let trying = Trying::begin(now, 0, Beside::Read, None, &settings, g);
                self.attempt(now, trying, attempt::Event::Start, flight, g, out)
            }
            Ok(Some(last)) => {
                out.push(Output::SpendId);
                self.won = Some(Won {
                    slot: 0,
                    deadline: Deadline::from_sent(sent, &self.settings.timing),
                    epoch: last.map_or(1, |last| epoch::after(last).unwrap_or(u64::MAX)),
                    reserved: false,
                    leases: Vec::new(),
                    unheld: crate::quorum::Unheld::default(),
                });
                Next::Over(Ok(Outcome::Won))
            }
        }
    }
}
