//! A choice of a successor ([`Chooser`]) carried over the leader's exchange: its requests go
//! out under the leader's tags, cut at the choice's limit, and what it asks of the line is
//! asked of the leader's [`Grounds`], with the member a preemption named first.

use super::messages::{Grounds, Outbox, Output, Request, Say};
use crate::choice::{self, Choice, Chooser};
use crate::exchange::{Answer, Tag};
use crate::failure::StoreFailure;
use std::marker::PhantomData;

/// One choice on its way.
#[derive(Debug)]
pub(super) struct Choosing<I, R, N, E> {
    chooser: Chooser<R, N, E>,
    /// When its requests count as failed.
    limit: I,
    /// The member a preemption named, chosen first while it is a candidate.
    named: Option<String>,
    /// Its requests on their way: the leader's tag, and the chooser's.
    flight: Vec<(Tag, Tag)>,
}

/// What the chooser asks of the line, asked of the leader's grounds (of the blob's ETags `T`).
struct Asked<'a, G, T> {
    grounds: &'a mut G,
    named: Option<&'a str>,
    etag: PhantomData<fn() -> T>,
}

impl<R, N, T, G: Grounds<R, N, T>> choice::Grounds<R, N> for Asked<'_, G, T> {
    fn successor(&mut self) -> Option<R> {
        self.grounds.successor(self.named)
    }

    fn still_successor(&mut self, listed: &R, fresh: &R) -> bool {
        self.grounds.still_successor(listed, fresh)
    }

    fn names(&mut self, notice: &N, next: &R) -> bool {
        self.grounds.names(notice, next)
    }
}

impl<I: Copy, R: Clone, N: Clone, E: StoreFailure> Choosing<I, R, N, E> {
    /// The choice of the line's successor now (`named` first), its requests cut at `limit`.
    pub(super) fn begin<T>(
        limit: I,
        named: Option<String>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> (Self, Option<Choice<R, N, E>>) {
        let guess = grounds.successor(named.as_deref());
        let (chooser, first) = Chooser::begin(guess);
        let mut c = Self {
            chooser,
            limit,
            named,
            flight: Vec::new(),
        };
        let done = c.carry(first, out);
        (c, done)
    }

    /// Whether the request under `tag` is this choice's, on its way.
    pub(super) fn owns(&self, tag: Tag) -> bool {
        self.flight.iter().any(|(ours, _)| *ours == tag)
    }

    /// The answers it awaits.
    pub(super) fn awaits(&self) -> Vec<Tag> {
        let theirs = self.chooser.awaits();
        (self.flight.iter())
            .filter(|(_, t)| theirs.contains(t))
            .map(|(ours, _)| *ours)
            .collect()
    }

    /// The answer to one of its requests came: the choice, once made.
    pub(super) fn handle<T>(
        &mut self,
        answer: Answer<I, choice::Reply<R, N, E>>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Choice<R, N, E>> {
        let at = self
            .flight
            .iter()
            .position(|(ours, _)| *ours == answer.tag)?;
        let (_, theirs) = self.flight.remove(at);
        let answer = Answer {
            tag: theirs,
            sent: answer.sent,
            answer: answer.answer,
        };
        let mut asked = Asked {
            grounds,
            named: self.named.as_deref(),
            etag: PhantomData,
        };
        let outputs = self.chooser.handle(answer, &mut asked);
        self.carry(outputs, out)
    }

    /// Its requests still on their way are no longer wanted.
    pub(super) fn forget<T>(&mut self, out: &mut Outbox<I, R, T, E>) {
        out.extend(self.flight.drain(..).map(|(ours, _)| Output::Forget(ours)));
    }

    /// The chooser's outputs as the leader's: its requests under fresh tags of the leader's.
    fn carry<T>(
        &mut self,
        outputs: Vec<choice::Output<R, N, E>>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Option<Choice<R, N, E>> {
        for output in outputs {
            match output {
                choice::Output::Send(send) => {
                    let request = Request::Choice {
                        request: Box::new(send.request),
                        limit: self.limit,
                    };
                    self.flight.push((out.send(request), send.tag));
                }
                choice::Output::Say(note) => out.push(Output::Say(Box::new(Say::Choice(note)))),
                choice::Output::Refresh(fresh) => out.push(Output::Refresh(Box::new(fresh))),
                choice::Output::Done(choice) => return Some(choice),
            }
        }
        None
    }
}
