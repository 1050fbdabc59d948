//! A leader's lookout for a preferred member, as a state machine: when it lists the line, what
//! each listing (or, for a leader that borrows its listings, each new look at the line) means,
//! and the probe of a due member before the leader stops its body for it (docs/preferred.md).
//!
//! The rules it keeps: the leader lists at the [`cadence`] and every [`Pace::PROBE`] around a
//! member's moment ([`PreemptionWatch::next_list`]); the holder of any slot but slot 0 lists
//! nothing and reads the line as its record keeper lists it ([`Listing::Borrowed`], every
//! [`Pace::BORROWED_LISTING_LOOK`]); and preemption counts only members confirmed alive
//! (docs/safety.md, "Recovery from anything"): a due member that advertises a URL must answer a
//! probe there, or it is passed over and the leader stays. A listing that failed is skipped
//! until the next one. Wake-ups never make it list: `POST /wake` carries no authority.
//!
//! The shell carries out each [`Action`] and reports what came of it with [`Lookout::step`],
//! with the instant, the wall clock and a uniform draw, taken only when the cadence needs one.

use super::{Preemption, PreemptionWatch, cadence};
use crate::line::Record;
use crate::pace::Pace;
use crate::timing::{Moment, Timing};
use std::time::Duration;

/// Who lists for preemption: with slots, only the holder of slot 0 (the group's blob) lists at
/// the preemption [`cadence`]; holders of the other slots look at the line as their record
/// keeper lists it anyway while they lead (every [`Pace::LEADER_LIST_EVERY`]), so that the
/// group's listings do not grow with N. Those preempt up to one such period after the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// This leader lists at the cadence, and probes around a member's moment.
    Own,
    /// This leader lists nothing for preemption; it reads the line as others list it.
    Borrowed,
}

impl Listing {
    /// The listing a holder of `slot` does.
    pub fn for_slot(slot: u32) -> Self {
        match slot {
            0 => Self::Own,
            _ => Self::Borrowed,
        }
    }
}

/// What the shell reports.
#[derive(Debug, Clone)]
pub enum Event<I, R> {
    /// The term's lookout begins: the line's members a leader may hand over to
    /// ([`super::candidates`]), and when the line was last listed.
    Start {
        /// The candidates, as the line knows them now.
        line: Vec<R>,
        /// When that listing was sent, if the line was listed.
        listed: Option<I>,
    },
    /// The pause of the last [`Action::Sleep`] is over.
    Woke,
    /// The line was listed (`Some`: the candidates after it), or the listing failed (`None`).
    Listed(Option<Vec<R>>),
    /// A look at the line ([`Action::Look`]): the candidates, and when it was last listed.
    Looked {
        /// The candidates.
        line: Vec<R>,
        /// When the listing they come from was sent.
        listed: Option<I>,
    },
    /// Whether the member probed answered at its advertised URL (any answer: a process that
    /// listens).
    Probed(bool),
}

/// What the shell does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<I> {
    /// List the line (one request on the store), cut at `limit`; report [`Event::Listed`].
    List {
        /// No answer by then is a failure.
        limit: I,
    },
    /// Look at the line as the record keeper last listed it; report [`Event::Looked`].
    Look,
    /// Probe the member this names at `url` (a `POST /wake` without its token); report
    /// [`Event::Probed`].
    Probe {
        /// The member.
        to: String,
        /// Its advertised URL.
        url: String,
    },
    /// The member did not answer its probe: pass it over (the line says so), and say why.
    PassOver(String),
    /// The member of higher priority that will be eligible first, and how long until then
    /// (`None`: none); the line shows it.
    Pending(Option<(String, Duration)>),
    /// Wait until this instant (`None`: for ever, preemption is off), then report
    /// [`Event::Woke`].
    Sleep(Option<I>),
    /// Step down and hand the lease over to this member.
    Preempt(Preemption),
}

/// Where the lookout is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage<I> {
    /// Not started.
    Start,
    /// Asleep until the next listing (own) or look (borrowed).
    Asleep,
    /// A listing sent at this instant is on its way.
    Listing(I),
    /// A look at the line is asked for.
    Looking,
    /// The member due is probed.
    Probing(Preemption),
    /// Stepped down, or preemption is off.
    Over,
}

/// One term's lookout for a preferred member.
#[derive(Debug, Clone)]
pub struct Lookout<I, R: Record> {
    /// `None`: preemption is off (`preempt_after = "off"`).
    watch: Option<PreemptionWatch<I, R>>,
    after: Duration,
    listing: Listing,
    timeout: Duration,
    stage: Stage<I>,
    /// The line as last listed or looked at: where a probed member's URL and pending
    /// members are read.
    line: Vec<R>,
    /// The listing a borrowed look last took.
    seen: Option<I>,
}

impl<I: Moment, R: Record + Clone> Lookout<I, R> {
    /// The lookout of leader `me` of priority `ours`, preempted after `after` (`None`: off),
    /// listing as `listing` says.
    pub fn new(
        timing: &Timing,
        after: Option<Duration>,
        ours: i64,
        me: &str,
        listing: Listing,
    ) -> Self {
        Self {
            watch: after.map(|after| PreemptionWatch::new(after, ours, me)),
            after: after.unwrap_or_default(),
            listing,
            timeout: timing.request_timeout(),
            stage: Stage::Start,
            line: Vec::new(),
            seen: None,
        }
    }

    /// What `event`, reported at `now` (`wall` on the wall clock), calls for. `draw` is the
    /// shell's uniform draw in `[0, 1)`, taken once for each listing's cadence.
    pub fn step(
        &mut self,
        now: I,
        wall: R::Wall,
        event: Event<I, R>,
        draw: &mut impl FnMut() -> f64,
    ) -> Vec<Action<I>> {
        let Some(watch) = self.watch.as_mut() else {
            self.stage = Stage::Over;
            return vec![Action::Sleep(None)];
        };
        match (std::mem::replace(&mut self.stage, Stage::Over), event) {
            (Stage::Start, Event::Start { line, listed }) => match self.listing {
                Listing::Own => match listed {
                    // The line as last listed tells of members already known: the first
                    // listing of the term comes at the cadence (or when one of them is about
                    // to be eligible), not at once.
                    Some(at) => {
                        watch.listed(&line, at);
                        self.line = line;
                        self.sleep_until_next_list(now, draw)
                    }
                    None => self.list(now),
                },
                Listing::Borrowed => self.looked(now, wall, line, listed),
            },
            (Stage::Asleep, Event::Woke) => match self.listing {
                Listing::Own => self.list(now),
                Listing::Borrowed => {
                    self.stage = Stage::Looking;
                    vec![Action::Look]
                }
            },
            (Stage::Listing(sent), Event::Listed(Some(line))) => {
                watch.listed(&line, sent);
                self.line = line;
                self.judge(now, wall, draw)
            }
            (Stage::Listing(_), Event::Listed(None)) => self.sleep_until_next_list(now, draw),
            (Stage::Looking, Event::Looked { line, listed }) => {
                self.looked(now, wall, line, listed)
            }
            (Stage::Probing(p), Event::Probed(true)) => vec![Action::Preempt(p)],
            (Stage::Probing(p), Event::Probed(false)) => {
                let pass = Action::PassOver(p.to);
                let mut actions = match self.listing {
                    Listing::Own => self.pending_and_sleep(now, draw),
                    Listing::Borrowed => self.sleep_to_look(now),
                };
                actions.insert(0, pass);
                actions
            }
            (stage, _) => unreachable!("the lookout at {stage:?} got an event of another stage"),
        }
    }

    /// Sends a listing now.
    fn list(&mut self, now: I) -> Vec<Action<I>> {
        self.stage = Stage::Listing(now);
        vec![Action::List {
            limit: now + self.timeout,
        }]
    }

    /// Whether a look at the line as listed at `listed` reads the line it is given: a listing
    /// not seen before (else the look drops it unread).
    pub fn takes_line(&self, listed: Option<I>) -> bool {
        listed.is_some_and(|at| self.seen != Some(at))
    }

    /// The line as the record keeper last listed it: a listing not seen before is judged.
    fn looked(&mut self, now: I, wall: R::Wall, line: Vec<R>, listed: Option<I>) -> Vec<Action<I>> {
        let watch = self.watch.as_mut().expect("a lookout that is on");
        if let Some(at) = listed.filter(|at| self.seen != Some(*at)) {
            self.seen = Some(at);
            watch.listed(&line, at);
            self.line = line;
            if let Some(probe) = self.probe_due(now, wall) {
                return probe;
            }
        }
        self.sleep_to_look(now)
    }

    /// After a fresh listing: the member due is probed (or stepped down for at once, without
    /// an advertised URL); else the line shows who is pending, and the next listing is set.
    fn judge(&mut self, now: I, wall: R::Wall, draw: &mut impl FnMut() -> f64) -> Vec<Action<I>> {
        if let Some(probe) = self.probe_due(now, wall) {
            return probe;
        }
        self.pending_and_sleep(now, draw)
    }

    /// The member due now, probed at its advertised URL, or handed over to at once without
    /// one (its settled record is all there is); `None` when nobody is due.
    fn probe_due(&mut self, now: I, wall: R::Wall) -> Option<Vec<Action<I>>> {
        let watch = self.watch.as_ref().expect("a lookout that is on");
        let due = watch.due(&self.line, now, wall)?;
        let url = (self.line.iter())
            .find(|r| r.identity() == due.to)
            .and_then(|r| r.advertise().map(str::to_owned));
        Some(match url {
            Some(url) => {
                let to = due.to.clone();
                self.stage = Stage::Probing(due);
                vec![Action::Probe { to, url }]
            }
            None => vec![Action::Preempt(due)],
        })
    }

    /// The member pending first, for the line; then a pause until the next listing.
    fn pending_and_sleep(&mut self, now: I, draw: &mut impl FnMut() -> f64) -> Vec<Action<I>> {
        let watch = self.watch.as_ref().expect("a lookout that is on");
        let pending = watch.first(now).and_then(|(key, at)| {
            let r = self.line.iter().find(|r| r.key() == key)?;
            let ahead = if at > now { at - now } else { Duration::ZERO };
            Some((r.identity().to_owned(), ahead))
        });
        let mut actions = vec![Action::Pending(pending)];
        actions.extend(self.sleep_until_next_list(now, draw));
        actions
    }

    /// A pause until the next listing: at the cadence, drawn anew, or sooner around a
    /// member's moment.
    fn sleep_until_next_list(&mut self, now: I, draw: &mut impl FnMut() -> f64) -> Vec<Action<I>> {
        let watch = self.watch.as_ref().expect("a lookout that is on");
        let next = watch.next_list(now, cadence(self.after, draw()));
        self.stage = Stage::Asleep;
        vec![Action::Sleep(Some(next))]
    }

    /// A pause until the next look at the line a borrowing leader takes.
    fn sleep_to_look(&mut self, now: I) -> Vec<Action<I>> {
        self.stage = Stage::Asleep;
        vec![Action::Sleep(Some(now + Pace::BORROWED_LISTING_LOOK))]
    }
}

#[cfg(test)]
mod tests;
