//! What a handoff prepares while the body stops (docs/succession.md, "The handoff"), in its
//! order: from the stop request to what the [`Handoff`](super::Handoff) takes once the body is
//! gone.
//!
//! With one slot nothing is chosen ahead: the handoff after the body's death is the `change` to
//! the line's successor alone, as after a body that ended by itself. The stopping leader's record
//! is deleted [`Pace::DEPART_AFTER`] into the stop, so that members listing from the handoff on
//! (the new leader, members that see it lead) do not count it in line; a body gone sooner calls
//! that off (the confirmation departs then, with its first read, so that the deletion does not
//! queue before the successor's acquire). That departure is a timer beside the preparation's
//! requests ([`Preparation::depart_at`], [`Preparation::departure_due`]): the shell waits for it
//! apart, as the mutant's `change` may still be on its way when it is due.
//!
//! With slots, the successor is chosen and the notice naming it written
//! ([`choice::Choosing`](crate::choice::Choosing)) while the renew task still holds the lease,
//! cut at the term's kill deadline (nothing goes out under the lease after it, when it may be
//! someone else's), and the record deleted once the notice is written, so that it is not in the
//! line the new holder lists as it begins. No stop requested, nothing was sent under the lease:
//! the preparation is dropped.
//!
//! The simulator's mutant `change-before-gone` ([`Mutants`]) hands the lease on at once, with
//! the body still running: to the line's successor with one slot, to the member chosen with
//! slots.
//!
//! Nothing here sends a request or keeps time: the shell carries out each [`Action`], reports
//! what ended the last one as an [`Event`] with the instant it came, answers [`Grounds`] at the
//! moment asked, and asks [`Preparation::take`] once the body is gone.

use crate::choice::Choice;
use crate::pace::Pace;
use crate::timing::{Moment, Timing};

#[cfg(test)]
mod tests;

/// The simulator's mutants that break the preparation (docs/testing.md, "The simulator"); all
/// off outside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// `change-before-gone`: the lease handed on while the body still stops.
    pub change_before_gone: bool,
}

/// What happens next; the shell carries it out and reports its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<I, M, N, E> {
    /// Wait for a stop request. Then [`Event::Stopped`].
    AwaitStop,
    /// Choose the successor and write the notice naming it, cut at `limit`. Then
    /// [`Event::Chosen`].
    Choose {
        /// When the choice's requests count as failed.
        limit: I,
    },
    /// This instance leaves the line now: its record is deleted.
    Depart,
    /// The mutant: change the lease to this member's lease id under the term's own, the body
    /// still running. Then [`Event::Changed`], whatever the answer.
    Change(M),
    /// Nothing more to do: what was prepared (the choice, and when it was made), if anything.
    Done(Option<(I, Choice<M, N, E>)>),
}

/// What ended what the preparation waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<M, N, E> {
    /// A stop was requested.
    Stopped,
    /// The choice of the successor.
    Chosen(Choice<M, N, E>),
    /// The mutant's `change` was answered.
    Changed,
}

/// What the preparation asks of the member it runs in, answered at the moment asked.
pub trait Grounds<I, M> {
    /// The term's kill deadline while the renew task still holds the lease; none once it does
    /// not.
    fn held_until(&mut self) -> Option<I>;
    /// The line's successor as last listed (the mutant's `change` with one slot).
    fn successor(&mut self) -> Option<M>;
}

/// What the shell does with the preparation once the body is gone ([`Preparation::take`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Take {
    /// Stop carrying it out: no stop was requested, nothing was prepared for the handoff.
    CallOff,
    /// Wait for its [`Action::Done`], until the handoff's limit.
    Await,
}

/// Where the preparation stands.
#[derive(Debug)]
enum Phase<M, N, E> {
    /// Waiting for the stop request.
    Unstopped,
    /// Waiting for the choice.
    Choosing,
    /// Waiting for the mutant's `change`; with slots, after `choice`.
    Changing(Option<Choice<M, N, E>>),
    /// Nothing more to do.
    Over,
}

/// The preparation of one handoff, from the term's start to the body's death.
#[derive(Debug)]
pub struct Preparation<M, N, E> {
    slots: u32,
    mutants: Mutants,
    pace: Pace,
    phase: Phase<M, N, E>,
    /// The body is gone: the handoff took (or waits for) what was prepared, and a departure
    /// still to come is called off.
    taken: bool,
}

impl<M: Clone, N, E> Preparation<M, N, E> {
    /// The preparation of the handoff of a term with `slots` slots; returns it and its first
    /// action, the wait for a stop request.
    pub fn begin<I>(
        timing: &Timing,
        slots: u32,
        mutants: Mutants,
    ) -> (Self, Vec<Action<I, M, N, E>>) {
        let p = Self {
            slots,
            mutants,
            pace: Pace::new(timing),
            phase: Phase::Unstopped,
            taken: false,
        };
        (p, vec![Action::AwaitStop])
    }

    /// The one transition: `event` ended what the preparation waited for, at `now`. Returns what
    /// to do, the last action being the one whose end is the next event (or [`Action::Done`]).
    ///
    /// # Panics
    /// On an event that does not answer the action last returned: a fault of the shell.
    pub fn step<I: Moment>(
        &mut self,
        now: I,
        event: Event<M, N, E>,
        grounds: &mut impl Grounds<I, M>,
    ) -> Vec<Action<I, M, N, E>> {
        let mut actions = Vec::new();
        match (std::mem::replace(&mut self.phase, Phase::Over), event) {
            (Phase::Unstopped, Event::Stopped) if self.slots == 1 => {
                self.stopped_alone(grounds, &mut actions)
            }
            (Phase::Unstopped, Event::Stopped) => match grounds.held_until() {
                Some(kill_at) => {
                    let limit = (now + self.pace.request_timeout()).min(kill_at);
                    actions.push(Action::Choose { limit });
                    self.phase = Phase::Choosing;
                }
                // The lease is no longer held: nothing goes out under it.
                None => actions.push(Action::Done(None)),
            },
            (Phase::Choosing, Event::Chosen(choice)) => {
                actions.push(Action::Depart);
                match &choice {
                    Choice::To(next, _) if self.mutants.change_before_gone => {
                        actions.push(Action::Change(next.clone()));
                        self.phase = Phase::Changing(Some(choice));
                    }
                    _ => actions.push(Action::Done(Some((now, choice)))),
                }
            }
            (Phase::Changing(choice), Event::Changed) => {
                actions.push(Action::Done(choice.map(|choice| (now, choice))));
            }
            (phase, event) => panic!(
                "the preparation waits for {}, not {}",
                phase.name(),
                std::any::type_name_of_val(&event)
            ),
        }
        actions
    }

    /// With one slot, the stop came: nothing is chosen (the mutant hands the lease to the line's
    /// successor at once).
    fn stopped_alone<I>(
        &mut self,
        grounds: &mut impl Grounds<I, M>,
        actions: &mut Vec<Action<I, M, N, E>>,
    ) {
        let next = self
            .mutants
            .change_before_gone
            .then(|| grounds.successor())
            .flatten();
        match next {
            Some(next) => {
                actions.push(Action::Change(next));
                self.phase = Phase::Changing(None);
            }
            None => actions.push(Action::Done(None)),
        }
    }

    /// Whether the record goes on a timer of its own, beside the preparation's requests: with
    /// one slot. The shell then waits for the stop apart, and asks [`Self::depart_at`].
    pub fn departs_on_a_timer(&self) -> bool {
        self.slots == 1
    }

    /// With one slot, the stop came at `now`: when the record goes, [`Pace::DEPART_AFTER`]
    /// into it (a body that stops at once would find the deletion in flight, and the lease's
    /// `change` queued behind it). Then the shell asks [`Self::departure_due`].
    pub fn depart_at<I: Moment>(&self, now: I) -> I {
        now + Pace::DEPART_AFTER
    }

    /// The departure's instant came: whether this instance leaves the line now ([`Action::Depart`]):
    /// not when the body went meanwhile (the confirmation departs then).
    pub fn departure_due(&self) -> bool {
        !self.taken
    }

    /// The body is gone (`stopped`: a stop was requested): what the shell does with the
    /// preparation. Called off when no stop was requested (nothing went out under the lease on
    /// its behalf but its reads); otherwise the handoff waits for what it prepares. A departure
    /// still to come is called off either way ([`Self::departure_due`]).
    pub fn take(&mut self, stopped: bool) -> Take {
        self.taken = true;
        if stopped { Take::Await } else { Take::CallOff }
    }
}

impl<M, N, E> Phase<M, N, E> {
    fn name(&self) -> &'static str {
        match self {
            Self::Unstopped => "the stop",
            Self::Choosing => "the choice",
            Self::Changing(_) => "the change",
            Self::Over => "nothing",
        }
    }
}
