//! The record keeper as one state machine ([`Keeper`]): one round after another, it joins the
//! line or renews its record, settles and writes it, lists the line and, while it leads,
//! tidies; then it sleeps until the next thing is due, a poke or a stop; on a stop it deletes
//! its record and is done.
//!
//! The shell calls [`Keeper::handle`] with each input as it comes (an answer by tag, the timer,
//! a poke, a stop) and carries the outputs out in order. The keeper reads the line through
//! [`Grounds`] before each step, fresh, for the rest of the member changes it between two
//! steps; and it changes the line through them at the moment it decides to, so that its next
//! step reads its own changes. What is due when is [`Rounds`]'; what each answer on the record
//! means is [`after_delete`] and its kin. The draws (uniform in `[0, 1)`) that stretch the
//! listing periods are taken through [`Grounds::draw`] at the moment they are used: a
//! simulated history depends on their order.

use super::messages::{Awaits, Facts, Grounds, Input, Keep, Output, Request, Say};
use super::{
    Join, Kept, Outcome, Reply, Rounds, after_acquire, after_create, after_delete, after_renew,
};
use crate::exchange::{Send, Tag, Tags, Waiting};
use crate::failure::{Failure, StoreFailure};
use crate::line::Standing;
use crate::pace::Pace;
use crate::timing::Moment;
use std::fmt::Display;

/// What the keeper does next in its round.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step<I> {
    /// A join begins: the record is to be settled again only `preempt_after` from now; what the
    /// member publishes now is what the join writes.
    BeginJoin,
    /// The record now says how long this member has been a member.
    Settle,
    /// A join's or a renew's request.
    Keep(Keep),
    /// Write what the member publishes now.
    Write,
    /// List the line (and read the lease blob after it).
    List,
    /// Delete the records of members long dead.
    Tidy,
    /// Sleep until this instant, a poke or a stop.
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
    /// Waiting for what it asked.
    Waiting(Awaited<I>),
    /// The record deleted (or not) on leaving: done.
    Over,
}

/// What the keeper waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Awaited<I> {
    Keep {
        request: Keep,
        joining: bool,
    },
    /// A listing's answer (`first`: a join's first look).
    Listing {
        first: bool,
    },
    /// The read of the lease blob after a listing.
    Reading {
        first: bool,
    },
    Write,
    TidyAfterListing,
    LeaderTidy {
        next_list: I,
    },
    /// A sleep until `until`, a poke or a stop.
    Sleep {
        until: I,
    },
    /// The record's delete on leaving.
    Leave,
}

/// A member's record keeper ([`Keeper::handle`]); `P` is what a member record says.
#[derive(Debug, Clone)]
pub struct Keeper<I, P> {
    rounds: Rounds<I>,
    phase: Phase<I>,
    tags: Tags,
    /// The request on its way, whose answer it awaits.
    asked: Option<Tag>,
    /// What the join (or the take back of the record's lease) publishes.
    joins: Option<P>,
    /// What the write on its way writes.
    writing: Option<P>,
    /// A stop came: the keeper leaves at its next sleep (it never cuts a request short).
    stopping: bool,
}

impl<I: Moment, P: Clone> Keeper<I, P> {
    /// A keeper starting at `now`: it joins at once; `draw` stretches the first listing period.
    pub fn new(now: I, draw: f64) -> Self {
        Self {
            rounds: Rounds::new(now, draw),
            phase: Phase::Top,
            tags: Tags::default(),
            asked: None,
            joins: None,
            writing: None,
            stopping: false,
        }
    }

    /// What ends its wait now.
    pub fn awaits(&self) -> Awaits<I> {
        let sleep = self.until();
        Awaits {
            waiting: Waiting {
                answers: self.asked.into_iter().collect(),
                until: sleep,
            },
            stop: sleep.is_some(),
            poked: sleep.is_some(),
        }
    }

    /// Its timer, as [`Keeper::awaits`] names it (without the answer awaited: asked at every
    /// step of a member); while it sleeps, a stop or a poke ends its wait too.
    pub fn until(&self) -> Option<I> {
        match self.phase {
            Phase::Waiting(Awaited::Sleep { until }) => Some(until),
            _ => None,
        }
    }

    /// Whether it is done.
    pub fn is_over(&self) -> bool {
        self.phase == Phase::Over
    }

    /// The one transition: `input` came at `now`. Returns what to do, in order.
    pub fn handle<E, G>(&mut self, now: I, input: Input<I, E>, g: &mut G) -> Vec<Output<P, E>>
    where
        E: StoreFailure + Display,
        G: Grounds<I, P>,
    {
        let mut out = Vec::new();
        self.handle_into(now, input, g, &mut out);
        out
    }

    /// [`Keeper::handle`], its outputs pushed onto `out` (a member keeps one list's room for
    /// its keeper's every step).
    pub fn handle_into<E, G>(
        &mut self,
        now: I,
        input: Input<I, E>,
        g: &mut G,
        out: &mut Vec<Output<P, E>>,
    ) where
        E: StoreFailure + Display,
        G: Grounds<I, P>,
    {
        let sleeping = matches!(self.phase, Phase::Waiting(Awaited::Sleep { .. }));
        match input {
            Input::Start => self.step(now, g, out),
            Input::Answer(answer) if self.asked == Some(answer.tag) => {
                self.asked = None;
                self.answered(now, answer.answer, g, out);
            }
            // (An answer to nothing asked: dropped.)
            Input::Answer(_) => {}
            Input::Timer | Input::Poked if sleeping => {
                self.phase = Phase::Top;
                self.step(now, g, out);
            }
            Input::Timer | Input::Poked => {}
            Input::Stop => {
                self.stopping = true;
                if sleeping {
                    self.leave(g, out);
                }
            }
        }
    }

    /// Sends `request` under a new tag, and waits for its answer as `awaited`.
    fn send<E>(&mut self, request: Request<P>, awaited: Awaited<I>, out: &mut Vec<Output<P, E>>) {
        let tag = self.tags.fresh();
        self.asked = Some(tag);
        self.phase = Phase::Waiting(awaited);
        out.push(Output::Send(Send { tag, request }));
    }

    /// Steps through the round until it sends a request or sleeps.
    fn step<E, G: Grounds<I, P>>(&mut self, now: I, g: &mut G, out: &mut Vec<Output<P, E>>) {
        loop {
            let facts = g.facts();
            match self.next(now, &facts, &mut || g.draw()) {
                Step::BeginJoin => {
                    self.joins = Some(g.joining());
                    self.done(now);
                }
                Step::Settle => {
                    g.settle(now);
                    self.done(now);
                }
                Step::Keep(keep) => {
                    let request = match keep {
                        Keep::DeleteOld { ours } => Request::DeleteOld { ours },
                        // (A join begins with BeginJoin, which keeps what it publishes.)
                        Keep::Create => Request::Create(Box::new(match &self.joins {
                            Some(record) => record.clone(),
                            None => g.published(),
                        })),
                        Keep::TakeLease => Request::TakeLease,
                        Keep::Renew => Request::Renew,
                    };
                    let Phase::Waiting(awaited) = self.phase else {
                        unreachable!("a request is awaited once sent")
                    };
                    return self.send(request, awaited, out);
                }
                Step::Write => {
                    let record = g.published();
                    self.writing = Some(record.clone());
                    return self.send(Request::Write(Box::new(record)), Awaited::Write, out);
                }
                Step::List | Step::Tidy => {
                    let Phase::Waiting(awaited) = self.phase else {
                        unreachable!("a request is awaited once sent")
                    };
                    let request = match awaited {
                        Awaited::Listing { .. } => Request::List,
                        _ => Request::Tidy,
                    };
                    return self.send(request, awaited, out);
                }
                // A stop that came meanwhile is taken at the sleep, first.
                Step::Sleep(_) if self.stopping => return self.leave(g, out),
                Step::Sleep(_) => return,
            }
        }
    }

    /// What to do now, with the line as `facts` shows it just now.
    fn next(&mut self, now: I, facts: &Facts<I>, draw: &mut impl FnMut() -> f64) -> Step<I> {
        loop {
            let (step, waits) = match self.phase {
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
                Phase::Top => {
                    self.phase = Phase::Keep {
                        request: Keep::DeleteOld { ours: false },
                        joining: true,
                    };
                    return Step::BeginJoin;
                }
                Phase::Keep { request, joining } => {
                    (Step::Keep(request), Awaited::Keep { request, joining })
                }
                Phase::FirstLook => (Step::List, Awaited::Listing { first: true }),
                Phase::Settle if facts.settle_at.is_some_and(|at| now >= at) => {
                    self.phase = Phase::Write;
                    return Step::Settle;
                }
                Phase::Settle => {
                    self.phase = Phase::Write;
                    continue;
                }
                Phase::Write if facts.joined && !facts.written => (Step::Write, Awaited::Write),
                Phase::Write => {
                    self.phase = Phase::List;
                    continue;
                }
                Phase::List => self.list_tidy_or_sleep(now, facts, draw),
                // Only a leader deletes records of the dead.
                Phase::TidyAfterListing if facts.leading => (Step::Tidy, Awaited::TidyAfterListing),
                Phase::TidyAfterListing => {
                    self.phase = Phase::Top;
                    continue;
                }
                Phase::SleepAfterTidy { next_list } => self.sleep(now, facts, next_list),
                Phase::Waiting(_) | Phase::Over => {
                    unreachable!("the keeper was asked what next at {:?}", self.phase)
                }
            };
            self.phase = Phase::Waiting(waits);
            return step;
        }
    }

    /// Lists when a listing is due (a term's, or the period's), else tidies when a leader's
    /// tidying is due, else sleeps.
    fn list_tidy_or_sleep(
        &mut self,
        now: I,
        facts: &Facts<I>,
        draw: &mut impl FnMut() -> f64,
    ) -> (Step<I>, Awaited<I>) {
        // A member that polls lists as often as the leader: nothing on the lease blob tells a
        // poller that a member joined ahead of it.
        let next_list = self
            .rounds
            .next_list(facts.listed, facts.leading || facts.polls);
        self.rounds.terms(now, facts.terms_begun, facts.leading);
        if self.rounds.term_listing_due(now) || now >= next_list {
            self.rounds.listing(now, draw());
            return (Step::List, Awaited::Listing { first: false });
        }
        if facts.leading && self.rounds.tidy_due(now, facts.listed) {
            self.rounds.tidied(now);
            return (Step::Tidy, Awaited::LeaderTidy { next_list });
        }
        self.sleep(now, facts, next_list)
    }

    /// Sleeps until the first thing due: soon while the record is unwritten, else the record's
    /// renewal, the next listing, a term's listing or the record's settling.
    fn sleep(&mut self, now: I, facts: &Facts<I>, next_list: I) -> (Step<I>, Awaited<I>) {
        let unwritten = facts.joined && !facts.written;
        let until = match unwritten {
            true => now + Pace::RECORD_RETRY,
            false => self.rounds.next_round(next_list, facts.settle_at),
        };
        (Step::Sleep(until), Awaited::Sleep { until })
    }

    /// The answer to what it asked came at `now`.
    fn answered<E, G>(
        &mut self,
        now: I,
        answer: Result<(), E>,
        g: &mut G,
        out: &mut Vec<Output<P, E>>,
    ) where
        E: StoreFailure + Display,
        G: Grounds<I, P>,
    {
        let Phase::Waiting(awaited) = self.phase else {
            unreachable!("an answer came while the keeper was at {:?}", self.phase)
        };
        match awaited {
            Awaited::Keep { request, joining } => {
                return self.kept_answer(now, request, joining, answer, g, out);
            }
            // With one slot, a member that does not lead learns who does from the lease blob
            // (with slots, the listing showed it).
            Awaited::Listing { first } => {
                let facts = g.facts();
                if answer.is_ok() && !facts.slotted && !facts.leading {
                    return self.send(Request::Read, Awaited::Reading { first }, out);
                }
                self.listed(g, out);
            }
            Awaited::Reading { .. } => self.listed(g, out),
            Awaited::Write => self.written(answer, g, out),
            Awaited::Leave => {
                self.phase = Phase::Over;
                out.push(Output::Say(Say::Left(answer)));
                out.push(Output::End);
                return;
            }
            Awaited::TidyAfterListing | Awaited::LeaderTidy { .. } => {}
            Awaited::Sleep { .. } => unreachable!("a sleep is not answered"),
        }
        self.done(now);
        self.step(now, g, out);
    }

    /// A listing (and its read) is over: a member it placed to poll tells its campaign.
    fn listed<E, G: Grounds<I, P>>(&mut self, g: &mut G, out: &mut Vec<Output<P, E>>) {
        let facts = g.facts();
        if facts.polls && !facts.leading {
            out.push(Output::Placed);
        }
    }

    /// The write's answer: written, or what became of the record the renew sorts out, or
    /// again soon.
    fn written<E, G>(&mut self, answer: Result<(), E>, g: &mut G, out: &mut Vec<Output<P, E>>)
    where
        E: StoreFailure,
        G: Grounds<I, P>,
    {
        let record = self.writing.take();
        match answer {
            Ok(()) => {
                if let Some(record) = &record {
                    g.wrote(record);
                }
            }
            Err(e) if matches!(e.failure(), Failure::Missing | Failure::LeaseLost) => {
                out.push(Output::Say(Say::WriteLost(e)));
            }
            Err(e) => out.push(Output::Say(Say::WriteFailed(e))),
        }
    }

    /// What it asked, other than a join's or a renew's request, is done at `now`: a settling,
    /// a write, a listing, a tidying.
    fn done(&mut self, now: I) {
        self.phase = match self.phase {
            Phase::Waiting(Awaited::Listing { first } | Awaited::Reading { first }) => {
                match first {
                    true => Phase::Settle,
                    false => {
                        self.rounds.tidied(now);
                        Phase::TidyAfterListing
                    }
                }
            }
            Phase::Waiting(Awaited::Write) => Phase::List,
            Phase::Waiting(Awaited::TidyAfterListing) => Phase::Top,
            Phase::Waiting(Awaited::LeaderTidy { next_list }) => {
                Phase::SleepAfterTidy { next_list }
            }
            // A join begun or a settling: the phase after it is set already.
            phase => phase,
        };
    }

    /// The member leaves: its record goes first, if it has one.
    fn leave<E, G: Grounds<I, P>>(&mut self, g: &mut G, out: &mut Vec<Output<P, E>>) {
        if g.facts().joined {
            return self.send(Request::Leave, Awaited::Leave, out);
        }
        self.phase = Phase::Over;
        out.push(Output::End);
    }
}

impl<I: Moment, P: Clone> Keeper<I, P> {
    /// The answer to a join's or a renew's `request` came at `now`: the next request, or how
    /// the attempt ended, which sets the member's standing.
    fn kept_answer<E, G>(
        &mut self,
        now: I,
        request: Keep,
        joining: bool,
        answer: Result<(), E>,
        g: &mut G,
        out: &mut Vec<Output<P, E>>,
    ) where
        E: StoreFailure + Display,
        G: Grounds<I, P>,
    {
        let outcome = self.keep_step(now, request, joining, Reply::of(&answer));
        match (request, outcome) {
            // Created: its lease next; it settles from now.
            (Keep::Create, None) => g.created(now),
            // Our record lease lapsed and was taken: taken back with what we publish now.
            (Keep::Renew, None) => self.joins = Some(g.published()),
            (Keep::TakeLease, Some(Outcome::Joined)) => {
                if let Some(record) = &self.joins {
                    g.wrote(record);
                }
                g.held();
            }
            // (A renew of a lapsed lease that nobody took succeeds too.)
            (Keep::Renew, Some(Outcome::Joined)) => {
                g.held();
                return self.step(now, g, out);
            }
            (Keep::Renew, Some(Outcome::Rejoin)) => {
                out.push(Output::Say(Say::RecordGone));
                self.ended(Outcome::Rejoin, request, None, g, out);
                return self.step(now, g, out);
            }
            _ => {}
        }
        if let Some(outcome) = outcome {
            self.ended(outcome, request, answer.err(), g, out);
        }
        self.step(now, g, out);
    }

    /// One step of a join or a renew, after `request`'s answer `reply` at `now`: `Some` when
    /// the attempt ended so, `None` while it goes on.
    fn keep_step(&mut self, now: I, request: Keep, joining: bool, reply: Reply) -> Option<Outcome> {
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

    /// Where an attempt that came to `outcome` leaves the member's standing; `error` (the
    /// request's, if it failed) for the log.
    fn ended<E, G>(
        &mut self,
        outcome: Outcome,
        request: Keep,
        error: Option<E>,
        g: &mut G,
        out: &mut Vec<Output<P, E>>,
    ) where
        E: Display,
        G: Grounds<I, P>,
    {
        let standing = match outcome {
            Outcome::Joined => Standing::Joined,
            Outcome::Duplicate => Standing::Duplicate,
            Outcome::Rejoin => Standing::Joining,
            Outcome::Refused => {
                let e = error.map_or_else(String::new, |e| e.to_string());
                Standing::Refused(format!(
                    "storage refused this instance's member record ({e}): member records need \
                     the credentials to list, create, write and delete blobs in the container \
                     (a SAS with sp=rwdlc on the container)"
                ))
            }
            Outcome::TakeBack | Outcome::Retry => {
                if let Some(e) = error {
                    out.push(Output::Say(Say::Failed(request, e)));
                }
                return;
            }
        };
        if g.stand(standing.clone()) {
            out.push(Output::Say(Say::Standing(standing)));
            out.push(Output::ShowLine);
        }
    }
}

#[cfg(test)]
mod tests;
