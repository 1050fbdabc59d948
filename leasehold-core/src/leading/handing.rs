//! The [`Handoff`] carried over the leader's exchange, once the body is gone and renewing
//! stopped: its requests on the store and its wake-up go out under the leader's tags, its
//! choice as a [`Choosing`] (beside the record's standby when it asks for one), its pauses on
//! the leader's one timer; what was prepared while the body stopped is taken from the
//! [`Preparing`] as [`Preparation::take`](crate::handoff::Preparation::take) says; what it asks
//! of the line (its guess, a pass-over, a listing's successor) is asked of the leader's
//! [`Grounds`].

use super::choosing::Choosing;
use super::messages::{Grounds, Outbox, Output, Reply, Request, Say};
use super::preparing::Preparing;
use crate::choice::Choice;
use crate::exchange::{Answer, Tag};
use crate::failure::StoreFailure;
use crate::handoff::preparation::Take;
use crate::handoff::{Action, Begin, Event, Handoff, Surrender, Term};
use crate::timing::{Moment, Timing};

/// What the handoff waits for.
#[derive(Debug)]
enum At<I, R, N, E> {
    /// What was prepared while the body stopped, until `limit`.
    Taking { limit: I },
    /// The choice made now, and the record's standby beside it (its tag while on its way).
    Choosing {
        choosing: Choosing<I, R, N, E>,
        standby: Option<Tag>,
        chosen: Option<Choice<R, N, E>>,
    },
    /// The answer to its request under this tag.
    Asked(Tag),
    /// A pause, until this instant.
    Sleeping(I),
    /// Nothing: it is over.
    Done,
}

/// The preparation, beside what the handoff works with while it steps.
pub(super) struct Beside<'a, I, R, N, E> {
    /// What was prepared while the body stopped, until taken.
    pub prep: &'a mut Option<Preparing<I, R, N, E>>,
    /// A stop was requested (shutdown).
    pub stopped: bool,
}

/// One handoff on its way.
#[derive(Debug)]
pub(super) struct Handing<I, R, N, T, E> {
    handoff: Handoff<I, R, T, E>,
    /// The member a preemption named, chosen first.
    named: Option<String>,
    at: At<I, R, N, E>,
}

impl<I: Moment, R: Clone, N: Clone, T: Clone, E: StoreFailure> Handing<I, R, N, T, E> {
    /// The handoff of `term`, begun at `now` as `begin` says, `named` the member a
    /// preemption named: returns it, and its first actions ([`Self::carry`] carries them out).
    pub(super) fn begin(
        timing: &Timing,
        now: I,
        term: Term<I, T>,
        begin: Begin,
        named: Option<String>,
    ) -> (Self, Vec<Action<I, R, T, E>>) {
        let (handoff, actions) = Handoff::begin(timing, now, term, begin);
        let h = Self {
            handoff,
            named,
            at: At::Done,
        };
        (h, actions)
    }

    /// Whether the request under `tag` is the handoff's, on its way.
    pub(super) fn owns(&self, tag: Tag) -> bool {
        match &self.at {
            At::Choosing {
                choosing, standby, ..
            } => choosing.owns(tag) || *standby == Some(tag),
            At::Asked(t) => *t == tag,
            _ => false,
        }
    }

    /// The answers it awaits.
    pub(super) fn awaits(&self) -> Vec<Tag> {
        match &self.at {
            At::Choosing {
                choosing, standby, ..
            } => choosing.awaits().into_iter().chain(*standby).collect(),
            At::Asked(t) => vec![*t],
            _ => Vec::new(),
        }
    }

    /// The instant it is woken at: the end of a pause, or of the wait for what was prepared.
    pub(super) fn until(&self) -> Option<I> {
        match self.at {
            At::Taking { limit } => Some(limit),
            At::Sleeping(at) => Some(at),
            _ => None,
        }
    }

    /// Whether it waits for what was prepared.
    pub(super) fn taking(&self) -> bool {
        matches!(self.at, At::Taking { .. })
    }

    /// The instant named came, at `now`: a pause is over, or the wait for what was prepared
    /// (it is dropped unfinished). Its surrender, when it is over.
    pub(super) fn timer(
        &mut self,
        now: I,
        beside: Beside<'_, I, R, N, E>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Surrender<R>> {
        let event = match self.at {
            At::Sleeping(at) if now >= at => Event::Slept,
            At::Taking { limit } if now >= limit => {
                if let Some(prep) = beside.prep.take() {
                    prep.drop_all(out);
                }
                Event::Prepared(None)
            }
            _ => return None,
        };
        self.step(now, event, beside, grounds, out)
    }

    /// What was prepared is ready while the handoff waits for it: it takes it, at `now`.
    pub(super) fn prepared(
        &mut self,
        now: I,
        beside: Beside<'_, I, R, N, E>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Surrender<R>> {
        if !self.taking() || !beside.prep.as_ref().is_some_and(Preparing::ready) {
            return None;
        }
        let prepared = beside.prep.take().and_then(|mut p| p.prepared());
        let prepared = prepared.map(|(at, c)| (at, c.map_notice(|n| grounds.etag(n))));
        self.step(now, Event::Prepared(prepared), beside, grounds, out)
    }

    /// An answer to one of its requests came, at `now`: its surrender, when it is over.
    pub(super) fn answered(
        &mut self,
        now: I,
        answer: Answer<I, Reply<R, N, T, E>>,
        beside: Beside<'_, I, R, N, E>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Surrender<R>> {
        let (tag, sent) = (answer.tag, answer.sent);
        let event = match (&mut self.at, answer.answer) {
            (
                At::Choosing {
                    choosing,
                    standby,
                    chosen,
                },
                reply,
            ) => {
                match reply {
                    Reply::StoodBy if *standby == Some(tag) => *standby = None,
                    Reply::Choice(answer) => {
                        let answer = Answer {
                            tag,
                            sent,
                            answer: *answer,
                        };
                        if let Some(choice) = choosing.handle(answer, grounds, out) {
                            *chosen = Some(choice);
                        }
                    }
                    _ => return None,
                }
                if standby.is_some() {
                    return None;
                }
                let choice = chosen.take()?;
                Event::Chosen(choice.map_notice(|n| grounds.etag(n)))
            }
            (At::Asked(t), reply) if *t == tag => match reply {
                Reply::Changed(answer) => Event::Changed(answer),
                Reply::Noticed(answer) => Event::Noticed(answer),
                Reply::Released(released) => Event::Released(released.is_ok()),
                Reply::Read(read, record) => Event::Read(read, record.map(|r| *r)),
                Reply::Woke(wake) => Event::Woke(wake),
                Reply::Relisted(listed) => Event::Relisted(listed.then(|| grounds.successor(None))),
                _ => return None,
            },
            _ => return None,
        };
        self.step(now, event, beside, grounds, out)
    }

    /// Steps the handoff with `event`, at `now`, and carries out what it says.
    fn step(
        &mut self,
        now: I,
        event: Event<I, R, T, E>,
        beside: Beside<'_, I, R, N, E>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Surrender<R>> {
        let actions = self.handoff.step(now, event);
        self.carry(now, actions, beside, grounds, out)
    }

    /// Carries the handoff's actions into outputs, at `now`; an action whose end is known at
    /// once (what was prepared when it is ready or called off, the guess, a pass-over) steps it
    /// again. Its surrender, when it is over.
    pub(super) fn carry(
        &mut self,
        now: I,
        mut actions: Vec<Action<I, R, T, E>>,
        beside: Beside<'_, I, R, N, E>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Surrender<R>> {
        loop {
            let mut next = None;
            for action in actions {
                next = match action {
                    Action::Done(surrender) => {
                        self.at = At::Done;
                        return Some(surrender);
                    }
                    Action::TakePrepared { limit } => {
                        self.take(limit, &mut *beside.prep, beside.stopped, grounds, out)
                    }
                    Action::Guess => Some(Event::Guessed(grounds.guess())),
                    Action::PassOver(member) => {
                        Some(Event::Successor(grounds.pass_over(member.as_ref())))
                    }
                    Action::Choose { standby, limit } => self.choose(standby, limit, grounds, out),
                    action => {
                        self.carry_one(action, &mut *beside.prep, out);
                        None
                    }
                };
            }
            match next {
                Some(event) => actions = self.handoff.step(now, event),
                None => return None,
            }
        }
    }

    /// What was prepared, waited for until `limit` when the preparation says so: the event,
    /// when it is known now.
    fn take(
        &mut self,
        limit: I,
        prep: &mut Option<Preparing<I, R, N, E>>,
        stopped: bool,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Event<I, R, T, E>> {
        let Some(p) = prep else {
            return Some(Event::Prepared(None));
        };
        match p.take(stopped) {
            Take::CallOff => {}
            Take::Await if p.ready() => {
                let prepared = p.prepared();
                let prepared = prepared.map(|(at, c)| (at, c.map_notice(|n| grounds.etag(n))));
                prep.take();
                return Some(Event::Prepared(prepared));
            }
            Take::Await => {
                self.at = At::Taking { limit };
                return None;
            }
        }
        if let Some(p) = prep.take() {
            p.drop_all(out);
        }
        Some(Event::Prepared(None))
    }

    /// The choice made now, and beside it, with `standby`, this member's record says its
    /// cooldown, before anyone could hand it the lease back; its requests cut at `limit`. The
    /// event, when it is known now.
    fn choose(
        &mut self,
        standby: Option<std::time::Duration>,
        limit: I,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Event<I, R, T, E>> {
        let named = self.named.clone();
        let (choosing, chosen) = Choosing::begin(limit, named, grounds, out);
        let standby = standby.map(|cooldown| {
            let request = Request::Standby { cooldown, limit };
            out.send(request)
        });
        match (standby, chosen) {
            (None, Some(choice)) => Some(Event::Chosen(choice.map_notice(|n| grounds.etag(n)))),
            (standby, chosen) => {
                self.at = At::Choosing {
                    choosing,
                    standby,
                    chosen,
                };
                None
            }
        }
    }

    /// Carries out one action that waits, or says something.
    fn carry_one(
        &mut self,
        action: Action<I, R, T, E>,
        prep: &mut Option<Preparing<I, R, N, E>>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        match action {
            Action::Say(note) => out.push(Output::Say(Box::new(Say::Handoff(note)))),
            Action::DropPrepared => {
                if let Some(p) = prep.take() {
                    p.drop_all(out);
                }
            }
            Action::Depart => out.push(Output::Depart),
            Action::Refresh(fresh) => out.push(Output::Refresh(Box::new(fresh))),
            Action::Sleep(at) => self.at = At::Sleeping(at),
            Action::Send { request, limit } => {
                let tag = out.send(Request::Store {
                    request: Box::new(request),
                    limit,
                });
                self.at = At::Asked(tag);
            }
            Action::Wake { to, reserved } => {
                let tag = out.send(Request::Wake {
                    to: Box::new(to),
                    reserved,
                });
                self.at = At::Asked(tag);
            }
            Action::Relist { limit } => {
                let tag = out.send(Request::Relist { limit });
                self.at = At::Asked(tag);
            }
            Action::Done(_)
            | Action::TakePrepared { .. }
            | Action::Guess
            | Action::PassOver(_)
            | Action::Choose { .. } => unreachable!("carried by `carry`"),
        }
    }
}
