//! The choice of a successor at the end of a term, and what the `change` to it came to
//! (docs/succession.md, "The handoff").
//!
//! A holder that hands over with a notice (with slots, for a preemption, or after a health
//! step-down or a crash-loop backoff) writes the notice naming the line's successor under its
//! lease and reads that member's record beside it: the member is the one when the notice was
//! written and its record shows it still the successor (alive, not in a cooldown, the same
//! record, priority and lease id: with slots a member may have won a slot since it was listed,
//! which only its record or a listing shows). If not, or the line knows nobody, the members are
//! listed, and a notice names the listing's successor unless the first one did. A notice that
//! cannot be written (for a reason other than the lease being lost) does not stop the handoff:
//! the successor learns of it from the `change`.
//!
//! Nothing here sends a request. [`Choosing`] is the choice's order: the shell carries out each
//! [`Action`] and reports its end as an [`Event`]. [`Chooser`] runs it over the member's
//! exchange ([`crate::exchange`]): its requests go out under tags, side by side where the order
//! allows, and it asks the member what only the line knows ([`Grounds`]: the line's successor,
//! whether a record still shows it, whether a notice names it). The member is the shell's
//! record `M`, the written notice its `N`, a store's error its `E`.

use crate::exchange::{Answer, Send, Tag, Tags};
use crate::failure::StoreFailure;
use std::time::Duration;

#[cfg(test)]
mod tests;

/// What the choice came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice<M, N, E> {
    /// Hand the lease to this member; the notice naming it, once written.
    To(M, Option<N>),
    /// No other live member: release.
    Nobody,
    /// The members could not be listed: release.
    Unlisted(E),
    /// Storage said the lease is no longer ours.
    Lost(E),
}

impl<M, N, E> Choice<M, N, E> {
    /// The same choice, its notice as `f` makes it of the one written.
    pub fn map_notice<U>(self, f: impl FnOnce(N) -> U) -> Choice<M, U, E> {
        match self {
            Self::To(next, notice) => Choice::To(next, notice.map(f)),
            Self::Nobody => Choice::Nobody,
            Self::Unlisted(e) => Choice::Unlisted(e),
            Self::Lost(e) => Choice::Lost(e),
        }
    }
}

/// What happens next; the shell carries it out and reports its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<M, N, E> {
    /// Log this.
    Say(Note<M, E>),
    /// Write the notice naming `guess` under the term's lease and, side by side, read its
    /// record: then [`Event::NoticedAndRead`].
    NoticeAndRead(M),
    /// The record read shows the member still the successor: take it into the line.
    Refresh(M),
    /// List the members: then [`Event::Listed`].
    List,
    /// Write the notice naming this member: then [`Event::Noticed`].
    Notice(M),
    /// The choice is made.
    Done(Choice<M, N, E>),
}

/// What ended what the choice waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<M, N, E> {
    /// The notice naming the guess, and the read of its record: the record when it shows the
    /// member still the successor (as the shell judges by the line), `None` otherwise (gone,
    /// changed, or no answer).
    NoticedAndRead {
        /// The notice written, or why not.
        notice: Result<N, E>,
        /// The member's fresh record, when it shows it still the successor.
        fresh: Option<M>,
    },
    /// The members were listed: the listing's successor (`None`: no other live member), and
    /// whether the notice already written names it; or why they were not.
    Listed(Result<Option<(M, bool)>, E>),
    /// The notice naming the listing's successor: written, or why not.
    Noticed(Result<N, E>),
}

/// A line of the log that a transition calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note<M, E> {
    /// The notice naming the guess could not be written (the lease still ours).
    NoticeFailed(E),
    /// The guess's record or its notice did not confirm it the successor: listing.
    NotConfirmed(M),
    /// The notice naming the listing's successor could not be written: handing over anyway.
    HandingOverWithoutNotice(E),
}

/// What the choice waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    NoticedAndRead,
    Listed,
    Noticed,
    Done,
}

/// The choice of one successor.
#[derive(Debug)]
pub struct Choosing<M, N> {
    waiting: Waiting,
    /// The member asked about, then the listing's successor.
    member: Option<M>,
    /// The last notice written.
    noticed: Option<N>,
}

impl<M: Clone, N: Clone> Choosing<M, N> {
    /// The choice, with `guess` the line's successor as last listed (none: the line knows
    /// nobody). Returns it and its first actions.
    pub fn begin<E: StoreFailure>(guess: Option<M>) -> (Self, Vec<Action<M, N, E>>) {
        let mut c = Self {
            waiting: Waiting::Listed,
            member: None,
            noticed: None,
        };
        let action = match guess {
            Some(guess) => {
                c.waiting = Waiting::NoticedAndRead;
                c.member = Some(guess.clone());
                Action::NoticeAndRead(guess)
            }
            None => Action::List,
        };
        (c, vec![action])
    }

    /// The notice last written, for the shell to judge whom it names.
    pub fn noticed(&self) -> Option<&N> {
        self.noticed.as_ref()
    }

    /// The one transition: `event` ended what the choice waited for. Returns what to do, the
    /// last action being the one whose end is the next event (or [`Action::Done`]).
    ///
    /// # Panics
    /// On an event that does not answer the action last returned: a fault of the shell.
    pub fn step<E: StoreFailure>(&mut self, event: Event<M, N, E>) -> Vec<Action<M, N, E>> {
        let mut actions = Vec::new();
        let next = match (self.waiting, event) {
            (Waiting::NoticedAndRead, Event::NoticedAndRead { notice, fresh }) => {
                match notice {
                    Ok(notice) => self.noticed = Some(notice),
                    Err(e) if e.loses_lease() => return self.done(Choice::Lost(e), actions),
                    Err(e) => actions.push(Action::Say(Note::NoticeFailed(e))),
                }
                if let (Some(fresh), Some(notice)) = (fresh, &self.noticed) {
                    actions.push(Action::Refresh(fresh.clone()));
                    let choice = Choice::To(fresh, Some(notice.clone()));
                    return self.done(choice, actions);
                }
                let guess = self.member.take().expect("a guess was asked about");
                actions.push(Action::Say(Note::NotConfirmed(guess)));
                self.waiting = Waiting::Listed;
                Action::List
            }
            (Waiting::Listed, Event::Listed(listed)) => match listed {
                Err(e) => return self.done(Choice::Unlisted(e), actions),
                Ok(None) => return self.done(Choice::Nobody, actions),
                Ok(Some((next, true))) => {
                    let choice = Choice::To(next, self.noticed.take());
                    return self.done(choice, actions);
                }
                Ok(Some((next, false))) => {
                    self.member = Some(next.clone());
                    self.waiting = Waiting::Noticed;
                    Action::Notice(next)
                }
            },
            (Waiting::Noticed, Event::Noticed(notice)) => {
                let next = self.member.take().expect("the listing's successor");
                let choice = match notice {
                    Ok(notice) => Choice::To(next, Some(notice)),
                    Err(e) if e.loses_lease() => Choice::Lost(e),
                    Err(e) => {
                        actions.push(Action::Say(Note::HandingOverWithoutNotice(e)));
                        Choice::To(next, None)
                    }
                };
                return self.done(choice, actions);
            }
            (waiting, event) => panic!(
                "the choice waits for {waiting:?}, not {}",
                std::any::type_name_of_val(&event)
            ),
        };
        actions.push(next);
        actions
    }

    fn done<E>(
        &mut self,
        choice: Choice<M, N, E>,
        mut actions: Vec<Action<M, N, E>>,
    ) -> Vec<Action<M, N, E>> {
        self.waiting = Waiting::Done;
        actions.push(Action::Done(choice));
        actions
    }
}

/// A request of a [`Chooser`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<M> {
    /// Write the notice naming this member under the term's lease: then [`Reply::Noticed`].
    Notice(M),
    /// Read this member's record: then [`Reply::Read`].
    Read(M),
    /// List the members: then [`Reply::Listed`].
    List,
}

/// What came back of a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<M, N, E> {
    /// The notice written, or why not.
    Noticed(Result<N, E>),
    /// The member's record as read (`None`: gone, or no answer).
    Read(Option<M>),
    /// The members were listed into the line, or why not.
    Listed(Result<(), E>),
}

/// What a [`Chooser`] asks of the member it chooses for, answered at the moment asked, by the
/// line.
pub trait Grounds<M, N> {
    /// The line's successor now (a preemption's member first, while it is a candidate).
    fn successor(&mut self) -> Option<M>;
    /// Whether `fresh`, a read of the record of `listed`, shows that member still the
    /// successor.
    fn still_successor(&mut self, listed: &M, fresh: &M) -> bool;
    /// Whether `notice` names `next` and reserves the epoch for the lease id it acquires with.
    fn names(&mut self, notice: &N, next: &M) -> bool;
}

/// What the shell does for a [`Chooser`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<M, N, E> {
    /// Send this request (requests given together go out side by side).
    Send(Send<Request<M>>),
    /// Log this.
    Say(Note<M, E>),
    /// The record read shows the member still the successor: the line takes it.
    Refresh(M),
    /// The choice is made.
    Done(Choice<M, N, E>),
}

/// The notice naming the guess and the read of its record, side by side: their tags and
/// what came back of each so far.
#[derive(Debug)]
struct Pair<M, N, E> {
    guess: M,
    notice: (Tag, Option<Result<N, E>>),
    read: (Tag, Option<Option<M>>),
}

/// A [`Choosing`] over the member's exchange.
#[derive(Debug)]
pub struct Chooser<M, N, E> {
    choosing: Choosing<M, N>,
    tags: Tags,
    /// The notice and the read on their way together.
    pair: Option<Pair<M, N, E>>,
    /// The one other request on its way (a listing, a notice).
    single: Option<Tag>,
}

impl<M: Clone, N: Clone, E: StoreFailure> Chooser<M, N, E> {
    /// The choice, with `guess` the line's successor as last listed; returns it and its first
    /// outputs.
    pub fn begin(guess: Option<M>) -> (Self, Vec<Output<M, N, E>>) {
        let (choosing, actions) = Choosing::begin(guess);
        let mut c = Self {
            choosing,
            tags: Tags::default(),
            pair: None,
            single: None,
        };
        let mut out = Vec::new();
        c.carry(actions, &mut out);
        (c, out)
    }

    /// The requests whose answers it awaits.
    pub fn awaits(&self) -> Vec<Tag> {
        let pair = self.pair.iter().flat_map(|p| {
            let notice = p.notice.1.is_none().then_some(p.notice.0);
            let read = p.read.1.is_none().then_some(p.read.0);
            notice.into_iter().chain(read)
        });
        pair.chain(self.single).collect()
    }

    /// An answer came; `grounds` answers what only the line knows.
    pub fn handle<I>(
        &mut self,
        answer: Answer<I, Reply<M, N, E>>,
        grounds: &mut impl Grounds<M, N>,
    ) -> Vec<Output<M, N, E>> {
        let mut out = Vec::new();
        let event = match (answer.answer, &mut self.pair) {
            (Reply::Noticed(n), Some(p)) if p.notice.0 == answer.tag => {
                p.notice.1 = Some(n);
                self.pair_done(grounds)
            }
            (Reply::Read(r), Some(p)) if p.read.0 == answer.tag => {
                p.read.1 = Some(r);
                self.pair_done(grounds)
            }
            (reply, _) if self.single == Some(answer.tag) => {
                self.single = None;
                self.single_done(reply, grounds)
            }
            _ => None,
        };
        if let Some(event) = event {
            let actions = self.choosing.step(event);
            self.carry(actions, &mut out);
        }
        out
    }

    /// Both halves of the pair came: the notice, and the record when it shows the guess still
    /// the successor.
    fn pair_done(&mut self, grounds: &mut impl Grounds<M, N>) -> Option<Event<M, N, E>> {
        let p = self
            .pair
            .take_if(|p| p.notice.1.is_some() && p.read.1.is_some())?;
        let notice = p.notice.1.expect("came");
        let fresh = p.read.1.expect("came");
        let fresh = fresh.filter(|fresh| grounds.still_successor(&p.guess, fresh));
        Some(Event::NoticedAndRead { notice, fresh })
    }

    /// A listing's or a lone notice's answer, as the choice takes it.
    fn single_done(
        &mut self,
        reply: Reply<M, N, E>,
        grounds: &mut impl Grounds<M, N>,
    ) -> Option<Event<M, N, E>> {
        match reply {
            Reply::Listed(listed) => Some(Event::Listed(listed.map(|()| {
                grounds.successor().map(|next| {
                    let noticed = self.choosing.noticed();
                    let named = noticed.is_some_and(|n| grounds.names(n, &next));
                    (next, named)
                })
            }))),
            Reply::Noticed(notice) => Some(Event::Noticed(notice)),
            Reply::Read(_) => None,
        }
    }

    /// The choice's actions as outputs; requests go out under fresh tags.
    fn carry(&mut self, actions: Vec<Action<M, N, E>>, out: &mut Vec<Output<M, N, E>>) {
        for action in actions {
            match action {
                Action::Say(note) => out.push(Output::Say(note)),
                Action::Refresh(fresh) => out.push(Output::Refresh(fresh)),
                Action::Done(choice) => out.push(Output::Done(choice)),
                Action::NoticeAndRead(guess) => {
                    let (notice, read) = (self.tags.fresh(), self.tags.fresh());
                    out.push(Output::Send(Send {
                        tag: notice,
                        request: Request::Notice(guess.clone()),
                    }));
                    out.push(Output::Send(Send {
                        tag: read,
                        request: Request::Read(guess.clone()),
                    }));
                    let (notice, read) = ((notice, None), (read, None));
                    self.pair = Some(Pair {
                        guess,
                        notice,
                        read,
                    });
                }
                Action::List => self.send(Request::List, out),
                Action::Notice(next) => self.send(Request::Notice(next), out),
            }
        }
    }

    fn send(&mut self, request: Request<M>, out: &mut Vec<Output<M, N, E>>) {
        let tag = self.tags.fresh();
        self.single = Some(tag);
        out.push(Output::Send(Send { tag, request }));
    }
}

/// What the `change` to the chosen successor came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Changed<E> {
    /// The lease is the successor's: wake it, and confirm.
    Handed,
    /// Storage said the lease is no longer ours: nothing to hand over.
    Lost(E),
    /// No answer, or one that does not say: release the lease under our own id (refused if
    /// the change landed, which frees it otherwise).
    Unanswered(E),
}

impl<E: StoreFailure> Changed<E> {
    /// What the answer to the `change` says.
    pub fn of(answer: Result<(), E>) -> Self {
        match answer {
            Ok(()) => Self::Handed,
            Err(e) if e.loses_lease() => Self::Lost(e),
            Err(e) => Self::Unanswered(e),
        }
    }
}

/// How a term that gives its lease up voluntarily ended, as its handoff decides by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The body ended by itself (it exited, or its restarts ran out): nothing warned of it, so
    /// nothing was prepared.
    ByItself,
    /// A stop was asked for.
    Stop,
    /// A preemption: the lease goes to the member that preempts, while it lives.
    Preempted,
    /// A health step-down or a crash-loop backoff: this member stands aside for this long, and
    /// its record says so before anyone could hand the lease back to it.
    StandAside(Duration),
}

/// How a handoff begins, once the body is gone and while the lease is still ours.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handover<M> {
    /// The `change` to this member, the line's successor, at once: no notice and no read
    /// first; its record is read after, by the confirmation (docs/succession.md, "The handoff").
    Unannounced(M),
    /// The choice made while the body stopped serves.
    Prepared,
    /// Choose now ([`Choosing`]); with `standby`, this member's record says its cooldown
    /// beside the choice.
    Choose {
        /// The cooldown the record says first, if any.
        standby: Option<Duration>,
    },
}

/// What a handoff begins from.
#[derive(Debug, Clone)]
pub struct Handing<M> {
    /// How the term ended.
    pub ending: Ending,
    /// Whether a member was named to hand the lease to (a preemption under way).
    pub named: bool,
    /// `[lease].slots`.
    pub slots: u32,
    /// Whether a choice made while the body stopped is at hand, and fresh.
    pub prepared: bool,
    /// The line's successor, when the line was listed since the term began (before that, the
    /// line is the one this member had as a poller, and the leader before it may still stand
    /// next).
    pub guess: Option<M>,
}

impl<M> Handing<M> {
    /// How the handoff begins. With one slot, a stop and a body that ended by itself hand the
    /// lease to the line's successor at once, unannounced (a stop prepares nothing with one
    /// slot): a notice would queue before the `change` on a store that serves one request at a
    /// time. With slots (a member may have won a slot since it was listed, which only its
    /// record or a listing shows), a preemption (it names its member) or a cooldown (which the
    /// record must say first), the successor is chosen with a notice, ahead of time when a stop
    /// gave time to.
    pub fn begin(self) -> Handover<M> {
        let unannounced = !self.prepared
            && !self.named
            && match self.ending {
                Ending::ByItself => true,
                Ending::Stop => self.slots == 1,
                Ending::Preempted | Ending::StandAside(_) => false,
            };
        if unannounced && let Some(guess) = self.guess {
            return Handover::Unannounced(guess);
        }
        let standby = match self.ending {
            Ending::StandAside(cooldown) => Some(cooldown),
            _ => None,
        };
        match self.prepared && standby.is_none() {
            true => Handover::Prepared,
            false => Handover::Choose { standby },
        }
    }
}
