//! An acquisition attempt on its way in a campaign ([`Trying`]): the core's
//! [`Attempt`], the tags of its requests, the answer it awaits, the
//! poller's round it runs in, and what it came to ([`Tried`]): the term it won, or the acquire
//! it left without an answer in time (never sent again: its late answer settles in the
//! background, [`crate::late`]).

use super::flight::InFlight;
use super::messages::{Failed, Grounds, Output, Reply, Request, Say, Settings, Won};
use crate::attempt::{self, Attempt, Awaited, Beside, GaveBack, Why};
use crate::exchange::Tag;
use crate::slots::PollRound;
use crate::timing::Moment;

/// An attempt on its way, with the tags of its requests.
#[derive(Debug)]
pub(super) struct Trying<I, E> {
    attempt: Attempt<I, E>,
    /// When its acquire was sent.
    sent: I,
    acquire: Option<Tag>,
    beside: Option<Tag>,
    last: Option<Tag>,
    awaited: Option<Awaited<I>>,
    /// The poller's round it is one attempt of, if any: what it came to goes there.
    poll: Option<PollRound>,
}

/// What an attempt came to.
#[derive(Debug)]
pub(super) struct Tried<I, E> {
    /// The term won (`Some`), none (held, or given back), or the failure.
    pub(super) result: Result<Option<Won<I>>, E>,
    /// When the acquire that got no answer in time was sent: the candidate sits it out.
    pub(super) late: Option<I>,
    /// The poller's round it was one attempt of.
    pub(super) poll: Option<PollRound>,
}

/// Where an attempt is after a step.
#[derive(Debug)]
pub(super) enum Step<I, E> {
    /// On its way: it awaits [`Trying::awaits`].
    Awaits(Box<Trying<I, E>>),
    /// Over.
    Done(Tried<I, E>),
}

impl<I: Moment, E: Failed> Trying<I, E> {
    /// An attempt on `slot` begins at `now`, with `beside` going out beside its acquire (in
    /// the poller's round `poll`, if any); its acquire goes out with the member's lease id now.
    /// Boxed: the round's stage moves it at every step, and it is the largest thing a round
    /// holds (one allocation an attempt, instead of copies at each step).
    pub(super) fn begin<K, V, T>(
        now: I,
        slot: u32,
        beside: Beside,
        poll: Option<PollRound>,
        settings: &Settings,
        g: &mut impl Grounds<I, K, V, T>,
    ) -> Box<Self> {
        g.begin(slot);
        let attempt = Attempt::new(
            slot,
            now,
            settings.timing,
            beside,
            settings.create_if_missing,
            settings.mutants.attempt,
        );
        Box::new(Self {
            attempt,
            sent: now,
            acquire: None,
            beside: None,
            last: None,
            awaited: None,
            poll,
        })
    }

    /// What it awaits: the answer under a tag, and for the acquire's, the instant it is late.
    pub(super) fn awaits(&self) -> (Option<I>, Option<Tag>) {
        let until = match self.awaited {
            Some(Awaited::Acquire(until)) => Some(until),
            _ => None,
        };
        (until, self.awaited_tag())
    }

    /// Whether it awaits its acquire's answer, which the timer makes late.
    pub(super) fn awaits_acquire(&self) -> bool {
        matches!(self.awaited, Some(Awaited::Acquire(_)))
    }

    /// Steps of the attempt from `event` at `now`: an answer it awaits that came already goes
    /// in at once.
    pub(super) fn step<K, V, T>(
        mut self: Box<Self>,
        now: I,
        mut event: attempt::Event<E>,
        actions: &mut Vec<attempt::Action<I, E>>,
        flight: &mut InFlight<I, V, E>,
        g: &mut impl Grounds<I, K, V, T>,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Step<I, E>
    where
        V: std::fmt::Debug,
    {
        let slot = self.attempt.slot();
        loop {
            self.attempt.step_into(now, event, g, actions);
            let mut done = None;
            for action in actions.drain(..) {
                match action {
                    attempt::Action::Send(request) => {
                        let tag = flight.send(Request::Attempt { slot, request }, out);
                        self.sent(&request, tag);
                    }
                    attempt::Action::Await(awaited) => self.awaited = Some(awaited),
                    attempt::Action::SpendId => out.push(Output::SpendId),
                    attempt::Action::Delay(delay) => g.delay(slot, delay),
                    attempt::Action::Done(outcome) => {
                        done = Some(outcome);
                        break;
                    }
                }
            }
            if let Some(outcome) = done {
                return Step::Done(self.done(outcome, flight, out));
            }
            let kept = self.awaited_tag().and_then(|tag| flight.take(tag));
            event = match kept.map(|kept| kept.answer) {
                None => return Step::Awaits(self),
                Some(Reply::Attempt(event)) => event,
                Some(reply) => {
                    debug_assert!(false, "an attempt got {reply:?}");
                    return Step::Awaits(self);
                }
            };
        }
    }

    /// The attempt is over: what it came to, and the requests it leaves go on alone.
    fn done<K, V>(
        &mut self,
        outcome: attempt::Outcome<I, E>,
        flight: &mut InFlight<I, V, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Tried<I, E> {
        let slot = self.attempt.slot();
        let mut late = None;
        let result = match outcome {
            attempt::Outcome::Won {
                deadline,
                epoch,
                reserved,
            } => Ok(Some(Won {
                slot,
                deadline,
                epoch,
                reserved,
                leases: Vec::new(),
                unheld: crate::quorum::Unheld::default(),
            })),
            attempt::Outcome::Held | attempt::Outcome::GaveBack(GaveBack::OtherCount) => Ok(None),
            attempt::Outcome::GaveBack(GaveBack::LockDelay) => Ok(None),
            attempt::Outcome::GaveBack(GaveBack::ShuttingDown) => {
                out.push(Output::Say(Say::ShuttingDown));
                Ok(None)
            }
            attempt::Outcome::NoAnswer => {
                if let Some(tag) = self.acquire {
                    flight.forget(tag);
                    late = Some(self.sent);
                    out.push(Output::Late(tag));
                }
                Err(E::timed_out(self.attempt.timing().request_timeout()))
            }
            attempt::Outcome::Failed(Why::Store(e)) => Err(e),
            attempt::Outcome::Failed(Why::PastStopDeadline(span)) => Err(E::timed_out(span)),
            attempt::Outcome::Failed(Why::LastEpoch(last)) => Err(E::last_epoch(last)),
        };
        flight.forget_all(out);
        Tried {
            result,
            late,
            poll: self.poll.take(),
        }
    }

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
