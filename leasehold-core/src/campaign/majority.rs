//! An attempt to win the lease on a majority of several replicas, on its way in a campaign
//! ([`Majority`]): the core's [`quorum::Attempt`] (docs/quorum.md, its rules in quorum.rs's
//! top doc), its requests sent under the campaign's tags, and what it came to
//! ([`Tried`](super::trying::Tried)), as [`Trying`](super::trying::Trying) is for the one
//! account. What a campaign keeps of the replicas between its attempts (each one's lock-delay,
//! the split votes yielded in a row) is [`Replicas`].
//!
//! A term won waits for the epoch's writes still on their way (each cut at its limit, never
//! past its replica's stop deadline), so that every replica confirmed in time is the holder's
//! to renew: a term that renewed only the majority that confirmed first would lose its lead
//! with one of them down. The attempt then ends for the campaign; its requests still on their
//! way go on alone: a release's answer changes nothing, and an acquire heard only after its
//! limit counts for nobody, its answer the member's to await (`Output::Late`): a lease it says
//! was won is released at once, with the attempt's lease id (the rule *Counting*: a member
//! that gives up releases every replica such a request reached).

use super::flight::InFlight;
use super::messages::{Failed, Grounds, Output, Request, Say, Settings, Won};
use super::trying::Tried;
use crate::attempt;
use crate::exchange::{Answer, Tag};
use crate::quorum::{self, Attempt, Why};
use crate::timing::Moment;
use std::time::Duration;

/// What a campaign keeps of the replicas between its attempts.
#[derive(Debug, Clone)]
pub(super) struct Replicas<I> {
    /// Each replica's lock-delay, one a place (`None`: none running): a blob found missing or
    /// young in one attempt stays young in the next.
    young_until: Vec<Option<I>>,
    /// The split votes yielded in a row.
    split_round: u32,
    /// The replicas last said to be another set's ([`Say::Foreign`]): said again only when
    /// that changes.
    foreign: u8,
    /// The replicas last said to be missing ([`Say::Missing`]), as `foreign`.
    missing: u8,
}

impl<I> Default for Replicas<I> {
    fn default() -> Self {
        Self {
            young_until: Vec::new(),
            split_round: 0,
            foreign: 0,
            missing: 0,
        }
    }
}

/// An attempt on the replicas, with the campaign's tags of its requests.
#[derive(Debug)]
pub(super) struct Majority<I> {
    attempt: Attempt<I>,
    /// A request's timeout: what an epoch confirmed too late reports.
    timeout: Duration,
    /// Each request on its way: the campaign's tag, and the attempt's own.
    tags: Vec<(Tag, Tag)>,
    /// The term won, while the epoch's writes still on their way may join it.
    won: Option<quorum::Won<I>>,
}

/// Where an attempt on the replicas is after a step.
#[derive(Debug)]
pub(super) enum Step<I, E> {
    /// On its way: it awaits [`Majority::awaits`]. (Boxed: the attempt keeps a replica's
    /// state a place, and moves with each step.)
    Awaits(Box<Majority<I>>),
    /// Over.
    Done(Tried<I, E>),
}

/// How the attempt ended.
enum Ended<I> {
    Won(quorum::Won<I>),
    Failed(quorum::Failed),
}

impl<I: Moment> Majority<I> {
    /// An attempt begins: its acquires go out with the member's lease id, one for every
    /// replica.
    pub(super) fn begin<K, V, T>(
        settings: &Settings,
        kept: &Replicas<I>,
        g: &mut impl Grounds<I, K, V, T>,
    ) -> Box<Self> {
        g.begin(0);
        let n = settings.set.len();
        let young_until = match kept.young_until.len() == n {
            true => kept.young_until.clone(),
            false => vec![None; n],
        };
        let attempt = Attempt::new(quorum::Settings {
            set: settings.set,
            timing: settings.timing,
            seen: g.epoch_seen(),
            young_until,
            brand_new: false,
            split_round: kept.split_round,
            create_if_missing: settings.create_if_missing,
            split_draw: g.draw(),
            mutants: settings.mutants.quorum,
        });
        Box::new(Self {
            attempt,
            timeout: settings.timing.request_timeout(),
            tags: Vec::new(),
            won: None,
        })
    }

    /// What it awaits: the answers to its requests on their way (added to `answers`), and the
    /// instant the earliest of them is cut.
    pub(super) fn awaits(&self, answers: &mut Vec<Tag>) -> Option<I> {
        answers.extend(self.tags.iter().map(|(ours, _)| *ours));
        self.attempt.awaits().until
    }

    /// The answer under the campaign's `tag`, as the attempt's input.
    pub(super) fn answer(&mut self, answer: Answer<I, quorum::Reply>) -> Option<quorum::Input<I>> {
        let at = self.tags.iter().position(|(ours, _)| *ours == answer.tag)?;
        let (_, theirs) = self.tags.remove(at);
        Some(quorum::Input::Answer(Answer {
            tag: theirs,
            sent: answer.sent,
            answer: answer.answer,
        }))
    }

    /// One step of the attempt on `input` at `now`; what the campaign keeps of the replicas is
    /// updated once it ends.
    pub(super) fn step<K, V, T, E: Failed>(
        mut self: Box<Self>,
        now: I,
        input: quorum::Input<I>,
        kept: &mut Replicas<I>,
        flight: &mut InFlight<I, V, E>,
        g: &mut impl Grounds<I, K, V, T>,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Step<I, E> {
        let mut ended = None;
        for output in self.attempt.handle(now, input, &mut Asked(&mut *g)) {
            match output {
                quorum::Output::Send(send) => {
                    let ours = flight.send(Request::Replica(send.request), out);
                    self.tags.push((ours, send.tag));
                }
                quorum::Output::Won(won) => self.won = Some(won),
                quorum::Output::Joined { replica, deadline } => {
                    if let Some(won) = self.won.as_mut()
                        && let Some(lease) = won.leases.get_mut(replica)
                    {
                        *lease = Some(deadline);
                        won.unheld.from[replica] = None;
                    }
                }
                quorum::Output::Failed(failed) => ended = Some(Ended::Failed(failed)),
            }
        }
        // Won once no write is on its way (what is left awaited then is late acquires).
        if ended.is_none() && self.attempt.awaits().until.is_none() {
            ended = self.won.take().map(Ended::Won);
        }
        match ended {
            None => Step::Awaits(self),
            Some(ended) => Step::Done(self.done(ended, kept, flight, out)),
        }
    }

    /// The attempt is over: what it came to, and what the campaign keeps of it.
    fn done<K, V, E: Failed>(
        self,
        ended: Ended<I>,
        kept: &mut Replicas<I>,
        flight: &mut InFlight<I, V, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) -> Tried<I, E> {
        kept.young_until = self
            .attempt
            .replicas()
            .iter()
            .map(|r| r.young_until)
            .collect();
        // An attempt's lease id is spent once a replica was won or perhaps won with it. One
        // refused on every replica holds it nowhere, and keeps it, as one account's refused
        // acquire does: a handoff changes the lease to the id the member's record publishes,
        // which its next acquire must still send (docs/quorum.md, Handover).
        let refused = (self.attempt.outcomes().iter()).all(|o| *o == quorum::Outcome::Refused);
        if !refused {
            out.push(Output::SpendId);
        }
        let result = match ended {
            Ended::Won(won) => {
                kept.split_round = 0;
                Ok(Some(Won {
                    slot: 0,
                    deadline: won.kill,
                    epoch: won.epoch,
                    reserved: false,
                    leases: won.leases,
                    unheld: won.unheld,
                }))
            }
            Ended::Failed(failed) => {
                kept.split_round = failed.split_round;
                if failed.foreign != kept.foreign {
                    kept.foreign = failed.foreign;
                    let places: Vec<usize> = failed.foreign_places().collect();
                    if !places.is_empty() {
                        out.push(Output::Say(Say::Foreign(places)));
                    }
                }
                if failed.missing != kept.missing {
                    kept.missing = failed.missing;
                    let places: Vec<usize> = failed.missing_places().collect();
                    if !places.is_empty() {
                        out.push(Output::Say(Say::Missing(places)));
                    }
                }
                match failed.why {
                    Why::NoneWon | Why::Split | Why::TooFew => Ok(None),
                    Why::ShuttingDown => {
                        out.push(Output::Say(Say::ShuttingDown));
                        Ok(None)
                    }
                    Why::PastStopDeadline => Err(E::timed_out(self.timeout)),
                    Why::LastEpoch => Err(E::last_epoch(u64::MAX)),
                }
            }
        };
        // An acquire still unanswered is the member's to await (`Output::Late`): a lease it
        // says was won is released then, with this attempt's lease id (the rule *Counting*).
        for theirs in self.attempt.late() {
            if let Some((ours, _)) = self.tags.iter().find(|(_, t)| *t == theirs) {
                flight.forget(*ours);
                out.push(Output::Late(*ours));
            }
        }
        flight.forget_all(out);
        Tried {
            result,
            late: None,
            poll: None,
        }
    }
}

/// What the attempt on the replicas asks of the member: the same as the single attempt's.
struct Asked<'g, G>(&'g mut G);

impl<I, G: attempt::Grounds> quorum::Grounds<I> for Asked<'_, G> {
    fn wall_ms(&mut self) -> u64 {
        self.0.wall_ms()
    }

    fn shutting_down(&self) -> bool {
        self.0.shutting_down()
    }

    fn single_lock_delay(&mut self, _: Option<u64>, _: Duration, _: I) -> Option<I> {
        // Asked of a set of one only, which the single attempt runs instead.
        None
    }
}
