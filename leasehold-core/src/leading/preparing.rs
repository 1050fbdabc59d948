//! The [`Preparation`] of a handoff carried over the leader's exchange, beside the body as it
//! stops: from the stop request, the departure on its timer (with one slot) and the choice of a
//! successor with its notice (with slots), until the handoff takes what was prepared, waits for
//! it, or calls it off ([`Preparation::take`]).

use super::choosing::Choosing;
use super::messages::{Grounds, Outbox, Output, Request};
use crate::choice::{self, Choice};
use crate::exchange::{Answer, Tag};
use crate::failure::StoreFailure;
use crate::handoff::Preparation;
use crate::handoff::preparation::{self, Action, Event, Mutants, Take};
use crate::timing::{Moment, Timing};
use std::marker::PhantomData;

/// What a choice prepared while the body stopped came to, and when it was made.
pub(super) type Prepared<I, R, N, E> = (I, Choice<R, N, E>);

/// Where the preparation stands.
#[derive(Debug)]
enum At<I, R, N, E> {
    /// Waiting for the stop request.
    Unstopped,
    /// The choice on its way.
    Choosing(Choosing<I, R, N, E>),
    /// The mutant's `change` on its way, under this tag.
    Changing(Tag),
    /// Done: what was prepared, if anything.
    Done(Option<Prepared<I, R, N, E>>),
}

/// The preparation of one term's handoff, while its body stops.
#[derive(Debug)]
pub(super) struct Preparing<I, R, N, E> {
    machine: Preparation<R, N, E>,
    at: At<I, R, N, E>,
    /// With one slot, once the stop came: when the record goes.
    depart_at: Option<I>,
}

/// What the preparation asks of the member: the term's kill deadline while the lease is held
/// (the holder's, which the leader knows), the line's successor (the leader's grounds).
struct Asked<'a, I, G, N, T> {
    held_until: Option<I>,
    grounds: &'a mut G,
    /// The grounds' notices and ETags.
    kinds: PhantomData<fn() -> (N, T)>,
}

impl<I: Copy, R, N, T, G: Grounds<R, N, T>> preparation::Grounds<I, R> for Asked<'_, I, G, N, T> {
    fn held_until(&mut self) -> Option<I> {
        self.held_until
    }

    fn successor(&mut self) -> Option<R> {
        self.grounds.successor(None)
    }
}

impl<I: Moment, R: Clone, N: Clone, E: StoreFailure> Preparing<I, R, N, E> {
    /// The preparation of the handoff of a term with `slots` slots: it waits for a stop.
    pub(super) fn begin(timing: &Timing, slots: u32, mutants: Mutants) -> Self {
        // Its first action is the wait for a stop.
        let (machine, _) = Preparation::begin::<I>(timing, slots, mutants);
        Self {
            machine,
            at: At::Unstopped,
            depart_at: None,
        }
    }

    /// A stop was requested at `now`, while the lease is held until `held_until` (none: it is
    /// not held). Nothing if it was requested already.
    pub(super) fn stop<T>(
        &mut self,
        now: I,
        held_until: Option<I>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        if !matches!(self.at, At::Unstopped) {
            return;
        }
        // The record leaves early only under a held lease: a body that still runs with its
        // lease lost has only its record to show it lives (docs/safety.md, "Recovery from
        // anything": a group with no blob and no live record is brand-new).
        if held_until.is_some() && self.machine.departs_on_a_timer() {
            self.depart_at = Some(self.machine.depart_at(now));
        }
        self.stepped(now, Event::Stopped, held_until, grounds, out);
    }

    /// Whether what was prepared is ready.
    pub(super) fn ready(&self) -> bool {
        matches!(self.at, At::Done(_))
    }

    /// Whether the request under `tag` is the preparation's, on its way.
    pub(super) fn owns(&self, tag: Tag) -> bool {
        match &self.at {
            At::Choosing(c) => c.owns(tag),
            At::Changing(t) => *t == tag,
            _ => false,
        }
    }

    /// The answers it awaits.
    pub(super) fn awaits(&self) -> Vec<Tag> {
        match &self.at {
            At::Choosing(c) => c.awaits(),
            At::Changing(t) => vec![*t],
            _ => Vec::new(),
        }
    }

    /// The departure's instant, while it is still to come.
    pub(super) fn until(&self) -> Option<I> {
        self.depart_at
    }

    /// The instant named came, at `now`: with one slot, the record goes, unless the body went
    /// meanwhile ([`Preparation::departure_due`]) or the lease is no longer `held` (the record
    /// then stays until the body is gone, as at a stop without the lease).
    pub(super) fn timer<T>(&mut self, now: I, held: bool, out: &mut Outbox<I, R, T, E>) {
        if self.depart_at.is_some_and(|at| now >= at) {
            self.depart_at = None;
            if held && self.machine.departure_due() {
                out.push(Output::Depart);
            }
        }
    }

    /// The answer to one of its choice's requests came, at `now`. False if it was not its
    /// own.
    pub(super) fn chose<T>(
        &mut self,
        now: I,
        held_until: Option<I>,
        answer: Answer<I, choice::Reply<R, N, E>>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> bool {
        let At::Choosing(c) = &mut self.at else {
            return false;
        };
        if !c.owns(answer.tag) {
            return false;
        }
        if let Some(choice) = c.handle(answer, grounds, out) {
            self.stepped(now, Event::Chosen(choice), held_until, grounds, out);
        }
        true
    }

    /// The mutant's `change` under `tag` was answered, at `now`. False if it was not its own.
    pub(super) fn changed<T>(
        &mut self,
        now: I,
        tag: Tag,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> bool {
        if !matches!(self.at, At::Changing(t) if t == tag) {
            return false;
        }
        self.stepped(now, Event::Changed, None, grounds, out);
        true
    }

    /// Steps the preparation with `event`, at `now`, and carries out what it says.
    fn stepped<T>(
        &mut self,
        now: I,
        event: Event<R, N, E>,
        held_until: Option<I>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let mut asked = Asked {
            held_until,
            grounds,
            kinds: PhantomData,
        };
        let actions = self.machine.step(now, event, &mut asked);
        self.carry(now, actions, held_until, asked.grounds, out);
    }

    /// The body is gone (`stopped`: a stop was requested): what the handoff does with the
    /// preparation ([`Preparation::take`]). A departure still to come is called off.
    pub(super) fn take(&mut self, stopped: bool) -> Take {
        self.depart_at = None;
        self.machine.take(stopped)
    }

    /// What was prepared, once [`Self::ready`].
    pub(super) fn prepared(&mut self) -> Option<Prepared<I, R, N, E>> {
        match std::mem::replace(&mut self.at, At::Done(None)) {
            At::Done(prepared) => prepared,
            at => {
                self.at = at;
                None
            }
        }
    }

    /// Dropped: its requests on their way are no longer wanted.
    pub(super) fn drop_all<T>(mut self, out: &mut Outbox<I, R, T, E>) {
        match &mut self.at {
            At::Choosing(c) => c.forget(out),
            At::Changing(t) => out.push(Output::Forget(*t)),
            _ => {}
        }
    }

    /// Carries the preparation's actions into outputs; its last one is what it waits for.
    fn carry<T>(
        &mut self,
        now: I,
        actions: Vec<Action<I, R, N, E>>,
        held_until: Option<I>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        for action in actions {
            match action {
                Action::AwaitStop => self.at = At::Unstopped,
                Action::Choose { limit } => {
                    let (c, done) = Choosing::begin(limit, None, grounds, out);
                    self.at = At::Choosing(c);
                    if let Some(choice) = done {
                        let chosen = Event::Chosen(choice);
                        return self.stepped(now, chosen, held_until, grounds, out);
                    }
                }
                Action::Depart => out.push(Output::Depart),
                Action::Change(to) => {
                    self.at = At::Changing(out.send(Request::ChangeBeforeGone(Box::new(to))));
                }
                Action::Done(prepared) => self.at = At::Done(prepared),
            }
        }
    }
}
