//! The sends of one handoff, in their order (docs/succession.md, "The handoff"; docs/safety.md,
//! "Recovery from anything", rule 3), from the body's death to the lease handed, released or
//! lost. Without a line of members, or past the term's kill deadline, the lease is released at
//! once. Otherwise the choice prepared while the body stopped is taken (if it is younger than
//! `acquire_interval`), the line's successor read, and the handoff begins as
//! [`choice::Handing::begin`] says: unannounced, with the prepared choice, or choosing now
//! ([`choice::Choosing`], beside the record's standby for a member that stands aside). Then the
//! `change` of the term's lease to the successor's lease id, cut at the kill deadline (after it
//! the lease may be someone else's); when it got no answer, the release under the term's own id
//! (refused if the change landed, which frees the lease otherwise); once changed, the successor
//! woken, with the epoch reserved for it when the wake-up may carry one; then the
//! [`Confirmation`]'s reads, and its hand-on to the next member in line as two requests: the
//! notice naming that member, then the `change`, each conditional on the ETag the last write
//! left.
//!
//! [`Confirmation`] decides when the successor is passed over; [`choice`] how the successor is
//! chosen and what the `change`'s answer means. This machine owns what one handoff needs between
//! the requests: the member the lease goes to, the epoch its wake-up reserves and the ETag it is
//! reserved with, the kill deadline that cuts the requests sent under the term's lease, and
//! where the confirmation stands. Nothing here sends a request or keeps time: the shell carries
//! out each [`Action`] and reports what ended the last one as an [`Event`], with the instant it
//! came.
//!
//! What is prepared while the body stops, before this machine begins (the departure, and with
//! slots the choice), is [`Preparation`]'s.

use crate::choice::{self, Changed, Choice, Ending, Handover};
use crate::confirmation::{self, Confirmation, Confirmed, Read, Record, Wake};
use crate::epoch;
use crate::failure::StoreFailure;
use crate::pace::Pace;
use crate::timing::{Moment, Timing};
use crate::wake::Reserved;
use std::time::Duration;

pub mod preparation;
#[cfg(test)]
mod tests;

pub use preparation::Preparation;

/// How the handoff gave the lease up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Surrender<M> {
    /// Released (`true`: confirmed by storage).
    Released(bool),
    /// Handed to this member with Lease Blob `change`.
    HandedTo(M),
    /// Storage said it was no longer the term's.
    Lost,
}

/// How the handoff gave the lease up, as the observer counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Changed to the successor's lease id.
    HandedOver,
    /// No live member to hand it to: released.
    NoSuccessor,
    /// The change got no answer (it may or may not have landed): released with the term's id.
    Fallback,
    /// Storage said the lease was no longer the term's.
    Lost,
    /// The members could not be listed, or no time was left: released.
    Released,
}

/// A request on the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<M, T> {
    /// Change the lease to `to`'s lease id, from the term's own (`from` none) or from the lease
    /// id of `from`, the member it was changed to; with `etag`, only while the blob's ETag is
    /// that. Then [`Event::Changed`].
    Change {
        /// The member whose lease id the lease has now; none: the term's own.
        from: Option<M>,
        /// The member it goes to.
        to: M,
        /// The ETag the blob must have.
        etag: Option<T>,
    },
    /// Write the notice naming `to` and the members `passed_over` under `from`'s lease id,
    /// only while the blob's ETag is `etag` (the first half of a hand-on). Then
    /// [`Event::Noticed`].
    Notice {
        /// The member whose lease id the lease has now.
        from: M,
        /// The member the notice names.
        to: M,
        /// Every member passed over in this handoff.
        passed_over: Vec<M>,
        /// The ETag the blob must have.
        etag: T,
    },
    /// Release the lease under the term's own lease id. Then [`Event::Released`].
    Release,
    /// Release the lease under `from`'s lease id, only while the blob's ETag is `etag`. Then
    /// [`Event::Released`].
    ReleaseIf {
        /// The member whose lease id the lease has now.
        from: M,
        /// The ETag the blob must have.
        etag: T,
    },
    /// Read the blob and, with `record`, the record of `successor` beside it, both cut at one
    /// limit. Then [`Event::Read`].
    Read {
        /// The member the lease was changed to.
        successor: M,
        /// Whether its record is read too.
        record: bool,
    },
}

/// What happens next; the shell carries it out and reports its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<I, M, T, E> {
    /// Log this, or tell the observer.
    Say(Note<M, E>),
    /// Drop what was being prepared while the body stopped, unused: nothing more goes out
    /// under the term's lease on its behalf.
    DropPrepared,
    /// Take the choice prepared while the body stopped (none if nothing was), waiting for it
    /// until `limit`. Then [`Event::Prepared`].
    TakePrepared {
        /// How long to wait for it.
        limit: I,
    },
    /// Read the line's successor, if the line was listed since the term began (before that,
    /// the line is the one this member had as a poller, and the leader before it may still
    /// stand next). Then [`Event::Guessed`].
    Guess,
    /// Choose the successor and write the notice naming it ([`choice::Choosing`]), cut at
    /// `limit`; with `standby`, this member's record says its cooldown beside the choice,
    /// before anyone could hand the lease back to it. Then [`Event::Chosen`].
    Choose {
        /// The cooldown the record says, if any.
        standby: Option<Duration>,
        /// When the choice's requests count as failed.
        limit: I,
    },
    /// Send this request, cut at `limit`.
    Send {
        /// The request.
        request: Request<M, T>,
        /// When it counts as failed.
        limit: I,
    },
    /// The lease was changed to `to`'s lease id: the line says so, and `to` is woken (with
    /// `reserved`, the wake-up carries the epoch reserved for it). Then [`Event::Woke`].
    Wake {
        /// The member handed the lease.
        to: M,
        /// The epoch reserved for it, and the ETag its epoch write is conditional on.
        reserved: Option<Reserved<T>>,
    },
    /// This instance leaves the line now (the term ended it): members that list while the
    /// handoff is confirmed, the new leader first, do not count it in line.
    Depart,
    /// Sleep until this instant. Then [`Event::Slept`].
    Sleep(I),
    /// Pass `member` over in the line (none: it rejoined, and is not passed over), and say who
    /// is the line's successor now. Then [`Event::Successor`].
    PassOver(Option<M>),
    /// List the members afresh, cut at `limit`. Then [`Event::Relisted`].
    Relist {
        /// When the listing counts as failed.
        limit: I,
    },
    /// The line takes this record of the member the lease was moved to.
    Refresh(M),
    /// The handoff is over.
    Done(Surrender<M>),
}

/// What ended what the handoff waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<I, M, T, E> {
    /// The choice prepared while the body stopped, and when it was made; none if nothing was,
    /// or it was not ready in time.
    Prepared(Option<(I, Choice<M, T, E>)>),
    /// The line's successor, if the line was listed since the term began.
    Guessed(Option<M>),
    /// The choice of the successor, made now.
    Chosen(Choice<M, T, E>),
    /// The answer to a [`Request::Change`].
    Changed(Result<(), E>),
    /// The answer to a [`Request::Notice`]: the blob's ETag after it.
    Noticed(Result<T, E>),
    /// A release: confirmed by storage or not.
    Released(bool),
    /// What the wake-up found.
    Woke(Wake),
    /// A sleep ran out.
    Slept,
    /// The blob was read (and the successor's record, when asked), as the shell judges them.
    Read(Read<T>, Option<Record<M>>),
    /// The line's successor now.
    Successor(Option<M>),
    /// The successor of a fresh listing (`Some(None)`: no other live member); `None`: no
    /// listing.
    Relisted(Option<Option<M>>),
}

/// A line of the log, or an outcome for the observer, that a transition calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note<M, E> {
    /// How the handoff gave the lease up, for the observer.
    Gave(Outcome),
    /// No other live member to hand the lease to: it is released.
    Nobody,
    /// The members could not be listed to choose the successor: the lease is released.
    Unlisted(E),
    /// Storage said the lease is no longer the term's: nothing to hand over.
    Lost(E),
    /// The `change` to this member got no answer: the lease is released under the term's id.
    Unanswered(E, M),
    /// The lease could not be moved to the successor's new lease id.
    NotRekeyed(E),
    /// The lease was not handed on (its notice or its `change` failed).
    NotHandedOn(E),
    /// What the confirmation says.
    Confirmation(confirmation::Note<M>),
}

/// What the handoff waits for.
#[derive(Debug)]
enum Phase<M, T, E> {
    /// What was prepared while the body stopped, of a term that ended so.
    Prepared { ending: Ending, named: bool },
    /// The line's successor; `prepared`, the choice made while the body stopped, if fresh.
    Guess {
        ending: Ending,
        named: bool,
        prepared: Option<Choice<M, T, E>>,
    },
    /// The choice of the successor, made now.
    Choosing,
    /// The answer to the `change` to `to`; with `unannounced`, no notice named it.
    Change { to: M, unannounced: bool },
    /// The release under the term's own lease id.
    Release,
    /// The wake-up of `to`, the member handed the lease.
    Wake { to: M, unannounced: bool },
    /// What the confirmation's last action asked for.
    Confirming(Step<M>),
    /// Nothing: the handoff is over.
    Done,
}

/// What a confirmation's action is carried out as, while it is.
#[derive(Debug)]
enum Step<M> {
    /// A sleep, a read, a wake-up, a look at the line or a listing: its end is the
    /// confirmation's event as it is.
    Plain,
    /// The `change` to the same member's new lease id; then the line takes its record.
    Rekey { to: M },
    /// The notice of a hand-on, from `from` to `to`; then its `change`.
    HandOnNotice { from: M, to: M },
    /// The `change` of a hand-on.
    HandOnChange,
    /// The release with nobody left in line.
    Release,
}

impl<M, T, E> Phase<M, T, E> {
    fn name(&self) -> &'static str {
        match self {
            Self::Prepared { .. } => "what was prepared",
            Self::Guess { .. } => "the line's successor",
            Self::Choosing => "the choice",
            Self::Change { .. } => "the change",
            Self::Release => "the release",
            Self::Wake { .. } => "the wake-up",
            Self::Confirming(_) => "the confirmation",
            Self::Done => "nothing",
        }
    }
}

impl<M> Step<M> {
    fn name(&self) -> &'static str {
        match self {
            Self::Plain => "action",
            Self::Rekey { .. } => "rekey",
            Self::HandOnNotice { .. } => "hand-on's notice",
            Self::HandOnChange => "hand-on's change",
            Self::Release => "release",
        }
    }
}

/// What a handoff starts from: the handing term and this member.
#[derive(Debug, Clone)]
pub struct Term<I, T> {
    /// The term's kill deadline: nothing goes out under its lease id after it.
    pub kill_at: I,
    /// Its epoch; its successor's is the next ([`epoch::after`]).
    pub epoch: u64,
    /// The blob's ETag after the term's own epoch write, when known.
    pub etag: Option<T>,
    /// `[lease].slots` (a woken member with slots polls them all: no reserved epoch).
    pub slots: u32,
    /// The term ended this instance (a stop, or `on_exit = "exit"`): it departs with the
    /// confirmation's first read.
    pub departs: bool,
}

/// The simulator's mutants that break a handoff (docs/testing.md, "The simulator"); all off
/// outside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// `hop-waits-out-refusal`: a wake-up refused, or that nothing listened for, is taken for
    /// one merely missed: the member is not read at once nor passed over, and the handoff
    /// waits out the confirmation's window.
    pub hop_waits_out_refusal: bool,
}

/// How a handoff begins: how the term ended, and what this member has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Begin {
    /// How the term ended.
    pub ending: Ending,
    /// Whether a member was named to hand the lease to (a preemption under way).
    pub named: bool,
    /// Whether this instance has a line of members to hand the lease to.
    pub lined: bool,
    /// The simulator's mutants.
    pub mutants: Mutants,
}

/// One handoff, from the body's death to its end.
#[derive(Debug)]
pub struct Handoff<I, M, T, E> {
    pace: Pace,
    term: Term<I, T>,
    phase: Phase<M, T, E>,
    /// The epoch reserved for the member the lease is changed to, and the ETag it is reserved
    /// with, when its wake-up carries one.
    reserved: Option<Reserved<T>>,
    /// The confirmation, once the member handed the lease was woken.
    confirmation: Option<Confirmation<I, M, T>>,
    mutants: Mutants,
}

impl<I: Moment, M: Clone, T: Clone, E: StoreFailure> Handoff<I, M, T, E> {
    /// The handoff of `term`, once its body is gone, at `now`: released at once when this
    /// instance has no line of members or the kill deadline has passed; otherwise what was
    /// prepared while the body stopped is taken, and the handoff begins as
    /// [`choice::Handing::begin`] says. Returns it and its first actions.
    pub fn begin(
        timing: &Timing,
        now: I,
        term: Term<I, T>,
        begin: Begin,
    ) -> (Self, Vec<Action<I, M, T, E>>) {
        let mut h = Self::new(timing, term);
        h.mutants = begin.mutants;
        let mut actions = Vec::new();
        if !begin.lined || now >= h.term.kill_at {
            actions.push(Action::DropPrepared);
            h.release(now, Outcome::Released, &mut actions);
        } else {
            let limit = h.term_limit(now);
            actions.push(Action::TakePrepared { limit });
            h.phase = Phase::Prepared {
                ending: begin.ending,
                named: begin.named,
            };
        }
        (h, actions)
    }

    /// What was prepared came, at `now`: a choice older than `acquire_interval` is made again.
    /// Then the line's successor is read.
    fn prepared(
        &mut self,
        now: I,
        ending: Ending,
        named: bool,
        prepared: Option<(I, Choice<M, T, E>)>,
        actions: &mut Vec<Action<I, M, T, E>>,
    ) {
        let fresh_for = self.pace.timing().acquire_interval;
        let prepared = prepared
            .filter(|(at, _)| now <= *at || now - *at < fresh_for)
            .map(|(_, choice)| choice);
        actions.push(Action::Guess);
        self.phase = Phase::Guess {
            ending,
            named,
            prepared,
        };
    }

    /// How the handoff begins, with `guess` the line's successor: unannounced, with the choice
    /// prepared, or choosing now.
    fn guessed(
        &mut self,
        now: I,
        handing: choice::Handing<M>,
        prepared: Option<Choice<M, T, E>>,
        actions: &mut Vec<Action<I, M, T, E>>,
    ) {
        match (handing.begin(), prepared) {
            (Handover::Unannounced(guess), _) => self.unannounced(now, guess, actions),
            (Handover::Prepared, Some(choice)) => self.chose(now, choice, actions),
            (handover, _) => {
                let standby = match handover {
                    Handover::Choose { standby } => standby,
                    _ => None,
                };
                let limit = self.term_limit(now);
                actions.push(Action::Choose { standby, limit });
                self.phase = Phase::Choosing;
            }
        }
    }

    /// The handoff as `choice` came to, at `now`: the `change` to the member it names (the
    /// wake-up then carries the epoch its notice reserved), or the release, or nothing when
    /// the lease was lost.
    fn chose(&mut self, now: I, choice: Choice<M, T, E>, actions: &mut Vec<Action<I, M, T, E>>) {
        match choice {
            Choice::To(next, notice) => {
                self.reserved = notice.and_then(|etag| self.reservation(etag));
                self.change(now, next, false, actions);
            }
            Choice::Nobody => {
                actions.push(Action::Say(Note::Nobody));
                self.release(now, Outcome::NoSuccessor, actions);
            }
            Choice::Unlisted(e) => {
                actions.push(Action::Say(Note::Unlisted(e)));
                self.release(now, Outcome::Released, actions);
            }
            Choice::Lost(e) => self.lost(e, actions),
        }
    }

    /// The handoff to `guess`, the line's successor as last listed, at `now`, with no notice
    /// and no read first: the wake-up reserves the next epoch with the ETag of the term's own
    /// epoch write, and `guess`'s record is read with the confirmation's first read.
    fn unannounced(&mut self, now: I, guess: M, actions: &mut Vec<Action<I, M, T, E>>) {
        self.reserved = self
            .term
            .etag
            .clone()
            .and_then(|etag| self.reservation(etag));
        self.change(now, guess, true, actions);
    }

    fn new(timing: &Timing, term: Term<I, T>) -> Self {
        Self {
            pace: Pace::new(timing),
            term,
            phase: Phase::Done,
            reserved: None,
            confirmation: None,
            mutants: Mutants::default(),
        }
    }

    /// The epoch after the term's, reserved with `etag`, when a wake-up carries it: with one
    /// slot only (a woken member with slots polls them all).
    fn reservation(&self, etag: T) -> Option<Reserved<T>> {
        (self.term.slots == 1).then_some(())?;
        Some(Reserved {
            epoch: epoch::after(self.term.epoch)?,
            etag,
        })
    }

    /// When a request sent now under the term's lease counts as failed: a request's time, and
    /// never past the kill deadline.
    fn term_limit(&self, now: I) -> I {
        (now + self.pace.request_timeout()).min(self.term.kill_at)
    }

    /// When a request sent now after the `change` counts as failed (the term's lease id is
    /// dead: nothing is sent with it any more).
    fn limit(&self, now: I) -> I {
        now + self.pace.request_timeout()
    }

    fn change(&mut self, now: I, to: M, unannounced: bool, actions: &mut Vec<Action<I, M, T, E>>) {
        let request = Request::Change {
            from: None,
            to: to.clone(),
            etag: None,
        };
        let limit = self.term_limit(now);
        actions.push(Action::Send { request, limit });
        self.phase = Phase::Change { to, unannounced };
    }

    /// The release under the term's own lease id, counted as `outcome`.
    fn release(&mut self, now: I, outcome: Outcome, actions: &mut Vec<Action<I, M, T, E>>) {
        actions.push(Action::Say(Note::Gave(outcome)));
        let limit = self.limit(now);
        actions.push(Action::Send {
            request: Request::Release,
            limit,
        });
        self.phase = Phase::Release;
    }

    fn lost(&mut self, e: E, actions: &mut Vec<Action<I, M, T, E>>) {
        actions.push(Action::Say(Note::Lost(e)));
        actions.push(Action::Say(Note::Gave(Outcome::Lost)));
        self.done(Surrender::Lost, actions);
    }

    fn done(&mut self, surrender: Surrender<M>, actions: &mut Vec<Action<I, M, T, E>>) {
        self.phase = Phase::Done;
        actions.push(Action::Done(surrender));
    }

    /// The one transition: `event` ended what the handoff waited for, at `now`. Returns what to
    /// do, the last action being the one whose end is the next event (or [`Action::Done`]).
    ///
    /// # Panics
    /// On an event that does not answer the action last returned: a fault of the shell.
    pub fn step(&mut self, now: I, event: Event<I, M, T, E>) -> Vec<Action<I, M, T, E>> {
        let event = match event {
            Event::Woke(Wake::Refused | Wake::Unreachable)
                if self.mutants.hop_waits_out_refusal =>
            {
                Event::Woke(Wake::Missed)
            }
            event => event,
        };
        let mut actions = Vec::new();
        match (std::mem::replace(&mut self.phase, Phase::Done), event) {
            (Phase::Prepared { ending, named }, Event::Prepared(prepared)) => {
                self.prepared(now, ending, named, prepared, &mut actions);
            }
            (
                Phase::Guess {
                    ending,
                    named,
                    prepared,
                },
                Event::Guessed(guess),
            ) => {
                let handing = choice::Handing {
                    ending,
                    named,
                    slots: self.term.slots,
                    prepared: prepared.is_some(),
                    guess,
                };
                self.guessed(now, handing, prepared, &mut actions);
            }
            (Phase::Choosing, Event::Chosen(choice)) => self.chose(now, choice, &mut actions),
            (Phase::Change { to, unannounced }, Event::Changed(answer)) => {
                self.changed(now, to, unannounced, answer, &mut actions);
            }
            (Phase::Release, Event::Released(confirmed)) => {
                self.done(Surrender::Released(confirmed), &mut actions);
            }
            (Phase::Wake { to, unannounced }, Event::Woke(wake)) => {
                // Not woken, its record is read with the first read: one gone since it was
                // chosen is passed over at once (rule (g) of docs/safety.md). Unannounced, it
                // was not read since it was listed.
                let check = unannounced || !wake.accepted();
                let (c, first) = Confirmation::begin(self.pace.timing(), now, to, wake, check);
                self.confirmation = Some(c);
                self.confirming(now, first, &mut actions);
            }
            (Phase::Confirming(step), event) => self.confirm(now, step, event, &mut actions),
            (phase, event) => panic!(
                "the handoff waits for {}, not {}",
                phase.name(),
                std::any::type_name_of_val(&event)
            ),
        }
        actions
    }

    /// What the answer to the `change` to `to` says: the lease is `to`'s, and `to` is woken;
    /// or it was lost; or, with no answer, it is released under the term's own id (refused if
    /// the change landed, which frees the lease otherwise).
    fn changed(
        &mut self,
        now: I,
        to: M,
        unannounced: bool,
        answer: Result<(), E>,
        actions: &mut Vec<Action<I, M, T, E>>,
    ) {
        match Changed::of(answer) {
            Changed::Handed => {
                actions.push(Action::Say(Note::Gave(Outcome::HandedOver)));
                actions.push(Action::Wake {
                    to: to.clone(),
                    reserved: self.reserved.clone(),
                });
                self.phase = Phase::Wake { to, unannounced };
            }
            Changed::Lost(e) => self.lost(e, actions),
            Changed::Unanswered(e) => {
                actions.push(Action::Say(Note::Unanswered(e, to)));
                self.release(now, Outcome::Fallback, actions);
            }
        }
    }

    fn confirmation(&mut self) -> &mut Confirmation<I, M, T> {
        self.confirmation
            .as_mut()
            .expect("the confirmation began with the wake-up")
    }

    /// Sends `request` at `now`, after the `change`.
    fn send(&self, now: I, request: Request<M, T>, actions: &mut Vec<Action<I, M, T, E>>) {
        let limit = self.limit(now);
        actions.push(Action::Send { request, limit });
    }

    /// Carries the confirmation's actions, decided at `now`, over into the handoff's: its
    /// requests with their limits, its pauses as instants, its hand-on as a notice and then a
    /// `change`, its wake-ups with the epoch they reserve.
    fn confirming(
        &mut self,
        now: I,
        decided: Vec<confirmation::Action<M, T>>,
        actions: &mut Vec<Action<I, M, T, E>>,
    ) {
        use confirmation::Action as Decided;
        for action in decided {
            let step = match action {
                Decided::Say(note) => {
                    actions.push(Action::Say(Note::Confirmation(note)));
                    continue;
                }
                Decided::Done(Confirmed::HandedTo(to)) => {
                    return self.done(Surrender::HandedTo(to), actions);
                }
                Decided::Done(Confirmed::Released(confirmed)) => {
                    return self.done(Surrender::Released(confirmed), actions);
                }
                Decided::Sleep(pause) => {
                    actions.push(Action::Sleep(now + pause));
                    Step::Plain
                }
                Decided::Read { record } => {
                    // A term that ended this instance departs with the first read, so that the
                    // deletion of its record does not queue before the successor's acquire.
                    if std::mem::take(&mut self.term.departs) {
                        actions.push(Action::Depart);
                    }
                    let successor = self.confirmation().successor().clone();
                    self.send(now, Request::Read { successor, record }, actions);
                    Step::Plain
                }
                Decided::Rekey { from, to } => {
                    let (from, etag) = (Some(from), None);
                    let request = Request::Change {
                        from,
                        to: to.clone(),
                        etag,
                    };
                    self.send(now, request, actions);
                    Step::Rekey { to }
                }
                Decided::Wake { to, reserve } => {
                    // The same member under its new lease id: the term's epoch write is still
                    // the blob's last write, unless something wrote it since.
                    let etag = self.term.etag.clone().filter(|_| reserve);
                    let reserved = etag.and_then(|etag| self.reservation(etag));
                    actions.push(Action::Wake { to, reserved });
                    Step::Plain
                }
                Decided::PassOver { member } => {
                    actions.push(Action::PassOver(member));
                    Step::Plain
                }
                Decided::Relist => {
                    let limit = self.limit(now);
                    actions.push(Action::Relist { limit });
                    Step::Plain
                }
                Decided::HandOn {
                    from,
                    to,
                    passed_over,
                    etag,
                } => {
                    let request = Request::Notice {
                        from: from.clone(),
                        to: to.clone(),
                        passed_over,
                        etag,
                    };
                    self.send(now, request, actions);
                    Step::HandOnNotice { from, to }
                }
                Decided::Release { from, etag } => {
                    actions.push(Action::Say(Note::Gave(Outcome::NoSuccessor)));
                    self.send(now, Request::ReleaseIf { from, etag }, actions);
                    Step::Release
                }
            };
            self.phase = Phase::Confirming(step);
        }
    }

    /// `event` ended the confirmation's `step`, at `now`: the confirmation is told, once the
    /// requests of its action are all answered.
    fn confirm(
        &mut self,
        now: I,
        step: Step<M>,
        event: Event<I, M, T, E>,
        actions: &mut Vec<Action<I, M, T, E>>,
    ) {
        use confirmation::Event as Ended;
        let ended = match (step, event) {
            (Step::Plain, Event::Slept) => Ended::Slept,
            (Step::Plain, Event::Read(read, record)) => Ended::Read(read, record),
            (Step::Plain, Event::Woke(wake)) => Ended::Woke(wake),
            (Step::Plain, Event::Successor(next)) => Ended::Successor(next),
            (Step::Plain, Event::Relisted(listed)) => Ended::Relisted(listed),
            (Step::Rekey { to }, Event::Changed(Ok(()))) => {
                actions.push(Action::Refresh(to));
                Ended::Rekeyed(true)
            }
            (Step::Rekey { .. }, Event::Changed(Err(e))) => {
                actions.push(Action::Say(Note::NotRekeyed(e)));
                Ended::Rekeyed(false)
            }
            (Step::HandOnNotice { from, to }, Event::Noticed(Ok(etag))) => {
                // Under `from`'s lease id, only while the blob is as the notice left it.
                let (from, etag) = (Some(from), Some(etag));
                self.send(now, Request::Change { from, to, etag }, actions);
                self.phase = Phase::Confirming(Step::HandOnChange);
                return;
            }
            (Step::HandOnNotice { .. }, Event::Noticed(Err(e)))
            | (Step::HandOnChange, Event::Changed(Err(e))) => {
                actions.push(Action::Say(Note::NotHandedOn(e)));
                Ended::HandedOn(false)
            }
            (Step::HandOnChange, Event::Changed(Ok(()))) => Ended::HandedOn(true),
            (Step::Release, Event::Released(confirmed)) => Ended::Released(confirmed),
            (step, event) => panic!(
                "the confirmation's {} is not ended by {}",
                step.name(),
                std::any::type_name_of_val(&event)
            ),
        };
        let decided = self.confirmation().step(now, ended);
        self.confirming(now, decided, actions);
    }
}
