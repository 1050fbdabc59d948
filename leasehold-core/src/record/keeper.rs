//! The record keeper as a state machine: one round after another, it joins the line or renews
//! its record, settles and writes it, lists the line and, while it leads, tidies; then it sleeps
//! until the next thing is due. The driver asks [`Keeper::next`] what to do, with the line's
//! [`Facts`] read just then; carries out the [`Action`]; and reports each request's answer with
//! [`Keeper::answered`] (a join's or a renew's steps) or [`Keeper::done`] (a write, a listing, a
//! tidying, a settling, the begin of a join), and a sleep's end with [`Keeper::woke`].
//!
//! What is due when is [`Rounds`]'; what each answer means is [`after_delete`] and its kin. The
//! draws (uniform in `[0, 1)`) that stretch the listing periods are taken from the closure
//! handed to [`Keeper::next`], at the moment they are used: a simulated history depends on
//! their order.

use super::{
    Join, Kept, Outcome, Reply, Rounds, after_acquire, after_create, after_delete, after_renew,
};
use crate::pace::Pace;
use crate::timing::Moment;

/// What the keeper reads of the line before each step: the driver reads it fresh each time,
/// for the rest of the member changes the line between two steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<I> {
    /// This member is in line under its record lease.
    pub joined: bool,
    /// The record says what this member publishes now.
    pub written: bool,
    /// When the line was last listed (by anyone of this member).
    pub listed: Option<I>,
    /// This member leads.
    pub leading: bool,
    /// This member is in line and polls (first in line, not leading).
    pub polls: bool,
    /// How many terms this member has begun.
    pub terms_begun: u64,
    /// When the record is to say it is settled, while it does not.
    pub settle_at: Option<I>,
}

/// A request of a join or a renew ([`Action::Keep`]): its answer goes to
/// [`Keeper::answered`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Delete the old record of this identity; with our record lease id if `ours`.
    DeleteOld {
        /// With our record lease id.
        ours: bool,
    },
    /// Create the record anew.
    Create,
    /// Take the record's lease.
    TakeLease,
    /// Renew the record's lease.
    Renew,
}

/// A request that is done once it was made, whatever its answer ([`Action::Send`]): then
/// [`Keeper::done`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request {
    /// Write what the member publishes now.
    Write,
    /// List the line (and, as the driver's listing does, read the lease blob for its holder).
    List,
    /// Delete the records of members long dead, if this member leads.
    Tidy,
}

/// What the keeper does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action<I> {
    /// A join begins: the record is to be settled again only `preempt_after` from now, and the
    /// driver keeps what the member publishes now, which the join writes. Then
    /// [`Keeper::done`].
    BeginJoin,
    /// The record now says how long this member has been a member. Then [`Keeper::done`].
    Settle,
    /// Send this request of a join or a renew; then [`Keeper::answered`].
    Keep(Keep),
    /// Send this request; then [`Keeper::done`].
    Send(Request),
    /// Sleep until this instant (or a poke); then [`Keeper::woke`].
    Sleep(I),
}

/// Where the keeper is in its round: what it does next, or what it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase<I> {
    /// The round begins: join or renew, if due.
    Top,
    /// A join's or a renew's next request goes out (`joining`: a join's).
    Keep { request: Keep, joining: bool },
    /// After a join, a first look at the line, to know its place.
    FirstLook,
    /// The record kept (or not due): settle it, if due.
    Settle,
    /// Settled (or not due): write it, if it changed.
    Write,
    /// Written (or not due): list, tidy, or sleep.
    List,
    /// After a listing, the tidying (a leader deletes long-dead records).
    TidyAfterListing,
    /// After a leader's tidying: a sleep until the first thing due, the next listing at
    /// `next_list` among them.
    SleepAfterTidy { next_list: I },
    /// Waiting for the driver to report what it was asked.
    Waiting(Awaited<I>),
}

/// What the keeper waits for the driver to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaited<I> {
    BeginJoin,
    Keep { request: Keep, joining: bool },
    FirstLook,
    Settle,
    Write,
    List,
    TidyAfterListing,
    LeaderTidy { next_list: I },
    Sleep,
}

/// A member's record keeper ([`Keeper::next`]).
#[derive(Debug, Clone)]
pub struct Keeper<I> {
    rounds: Rounds<I>,
    phase: Phase<I>,
}

impl<I: Moment> Keeper<I> {
    /// A keeper starting at `now`: it joins at once; `draw` stretches the first listing period.
    pub fn new(now: I, draw: f64) -> Self {
        Self {
            rounds: Rounds::new(now, draw),
            phase: Phase::Top,
        }
    }

    /// What to do now, with the line as `facts` shows it just now.
    pub fn next(&mut self, now: I, facts: &Facts<I>, draw: &mut impl FnMut() -> f64) -> Action<I> {
        loop {
            let (action, waits) = match self.phase {
                Phase::Top if !self.rounds.keep_due(now) => {
                    self.phase = Phase::Settle;
                    continue;
                }
                Phase::Top if facts.joined => {
                    self.phase = Phase::Keep {
                        request: Keep::Renew,
                        joining: false,
                    };
                    continue;
                }
                Phase::Top => (Action::BeginJoin, Awaited::BeginJoin),
                Phase::Keep { request, joining } => {
                    (Action::Keep(request), Awaited::Keep { request, joining })
                }
                Phase::FirstLook => (Action::Send(Request::List), Awaited::FirstLook),
                Phase::Settle if facts.settle_at.is_some_and(|at| now >= at) => {
                    (Action::Settle, Awaited::Settle)
                }
                Phase::Settle => {
                    self.phase = Phase::Write;
                    continue;
                }
                Phase::Write if facts.joined && !facts.written => {
                    (Action::Send(Request::Write), Awaited::Write)
                }
                Phase::Write => {
                    self.phase = Phase::List;
                    continue;
                }
                Phase::List => self.list_tidy_or_sleep(now, facts, draw),
                Phase::TidyAfterListing => (Action::Send(Request::Tidy), Awaited::TidyAfterListing),
                Phase::SleepAfterTidy { next_list } => self.sleep(now, facts, next_list),
                Phase::Waiting(awaited) => {
                    unreachable!("the keeper was asked what next while it waited: {awaited:?}")
                }
            };
            self.phase = Phase::Waiting(waits);
            return action;
        }
    }

    /// Lists when a listing is due (a term's, or the period's), else tidies when a leader's
    /// tidying is due, else sleeps.
    fn list_tidy_or_sleep(
        &mut self,
        now: I,
        facts: &Facts<I>,
        draw: &mut impl FnMut() -> f64,
    ) -> (Action<I>, Awaited<I>) {
        // A member that polls lists as often as the leader: nothing on the lease blob tells a
        // poller that a member joined ahead of it.
        let next_list = self
            .rounds
            .next_list(facts.listed, facts.leading || facts.polls);
        self.rounds.terms(now, facts.terms_begun, facts.leading);
        if self.rounds.term_listing_due(now) || now >= next_list {
            self.rounds.listing(now, draw());
            return (Action::Send(Request::List), Awaited::List);
        }
        if facts.leading && self.rounds.tidy_due(now, facts.listed) {
            self.rounds.tidied(now);
            return (
                Action::Send(Request::Tidy),
                Awaited::LeaderTidy { next_list },
            );
        }
        self.sleep(now, facts, next_list)
    }

    /// Sleeps until the first thing due: soon while the record is unwritten, else the record's
    /// renewal, the next listing, a term's listing or the record's settling.
    fn sleep(&mut self, now: I, facts: &Facts<I>, next_list: I) -> (Action<I>, Awaited<I>) {
        let unwritten = facts.joined && !facts.written;
        let until = match unwritten {
            true => now + Pace::RECORD_RETRY,
            false => self.rounds.next_round(next_list, facts.settle_at),
        };
        (Action::Sleep(until), Awaited::Sleep)
    }

    /// The answer to a join's or a renew's request, at `now`: `Some` when the attempt ended so
    /// (the driver sets the member's standing by it), `None` while it goes on.
    pub fn answered(&mut self, now: I, reply: Reply) -> Option<Outcome> {
        let Phase::Waiting(Awaited::Keep { request, joining }) = self.phase else {
            unreachable!("an answer came while the keeper was at {:?}", self.phase)
        };
        let next = |request| Phase::Keep { request, joining };
        let outcome = match request {
            Keep::DeleteOld { ours } => match after_delete(reply, ours) {
                Join::DeleteOurs => Err(next(Keep::DeleteOld { ours: true })),
                Join::End(outcome) => Ok(outcome),
                Join::Create | Join::Acquire => Err(next(Keep::Create)),
            },
            Keep::Create => match after_create(reply) {
                Join::End(outcome) => Ok(outcome),
                _ => Err(next(Keep::TakeLease)),
            },
            Keep::TakeLease => Ok(after_acquire(reply)),
            Keep::Renew => match after_renew(reply) {
                Outcome::TakeBack => Err(next(Keep::TakeLease)),
                outcome => Ok(outcome),
            },
        };
        match outcome {
            Ok(outcome) => {
                self.kept(now, outcome.kept(), joining);
                Some(outcome)
            }
            Err(phase) => {
                self.phase = phase;
                None
            }
        }
    }

    /// The join or renew ended at `now`: the next is due as `kept` says; a member that just
    /// joined takes a first look at the line, to know its place.
    fn kept(&mut self, now: I, kept: Kept, joining: bool) {
        self.rounds.kept(now, kept);
        self.phase = match joining && kept == Kept::Ok {
            true => {
                self.rounds.first_look(now);
                Phase::FirstLook
            }
            false => Phase::Settle,
        };
    }

    /// What the driver was asked, other than a join's or a renew's request, is done at `now`:
    /// a join begun, a settling, a write, a listing, a tidying.
    pub fn done(&mut self, now: I) {
        let Phase::Waiting(awaited) = self.phase else {
            unreachable!("nothing was asked at {:?}", self.phase)
        };
        self.phase = match awaited {
            Awaited::BeginJoin => Phase::Keep {
                request: Keep::DeleteOld { ours: false },
                joining: true,
            },
            Awaited::FirstLook => Phase::Settle,
            Awaited::Settle => Phase::Write,
            Awaited::Write => Phase::List,
            Awaited::List => {
                self.rounds.tidied(now);
                Phase::TidyAfterListing
            }
            Awaited::TidyAfterListing => Phase::Top,
            Awaited::LeaderTidy { next_list } => Phase::SleepAfterTidy { next_list },
            Awaited::Keep { .. } | Awaited::Sleep => {
                unreachable!("{awaited:?} is answered or woken, not done")
            }
        };
    }

    /// The sleep ended (its instant came, or a poke): the next round begins.
    pub fn woke(&mut self) {
        self.phase = Phase::Top;
    }
}

#[cfg(test)]
mod tests;
