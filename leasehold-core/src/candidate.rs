//! The candidate: a member that does not lead, trying to win a term. Where it stands
//! ([`State`]), what it remembers between rounds ([`Candidate`]), and one transition
//! ([`Candidate::step`]): the event that ended what it waited for and what the shell sees now
//! ([`Seen`]) in, the state moved on and the actions out. The [`campaign`](crate::campaign)
//! runs the rounds the actions call for and hands the rest to the shell (store requests,
//! timers, wake-ups), which reports what came of it; nothing there decides.
//!
//! A candidate goes round by round. Before each round, what stands in its way: an acquire that
//! got no answer in time is sat out; a deleted blob's lock-delay is waited out; a body that
//! could not start now keeps it out for a polling period; with slots, the group's count is
//! read first, and an instance that counts otherwise does not campaign. Then the round: the
//! member first in line (or one told to acquire: the first round, a free or handed lease, a
//! wake-up) acquires; the others watch the lease blob (with slots: the record of the member
//! ahead). Between rounds it follows: a pause that a wake-up, a listing that places it first
//! in line, or `stop` cuts short (docs/succession.md, rule (f) of docs/safety.md).
//!
//! Its random draws (the jitter of the polling and watch periods, the error backoff) are the
//! shell's, passed in to each step in `[0, 1)` and taken in a fixed order: a simulated history
//! depends on that order.

use crate::backoff::Backoff;
use crate::failure::{Failure, StoreFailure};
use crate::pace::Pace;
use crate::timing::{Moment, Timing};
use std::time::Duration;

/// Where a member stands in line, and so how it looks at the lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// Poll the lease with acquire every `acquire_interval`: the member first in line, or one
    /// without a line to place itself in (no records, or none listed yet).
    Poll,
    /// Watch the lease blob with a read every watch period.
    Watch,
}

/// Where a candidate stands: what it waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State<I> {
    /// Not begun.
    Start,
    /// An acquire got no answer in time: waiting to learn what it did (its late success is
    /// released), or until the lease it may have taken has surely expired.
    SittingOut,
    /// Out for the pause after that.
    SatOut,
    /// The lease blob was found deleted: creating it again (once), its lock-delay running.
    Recreating {
        /// The end of the lock-delay.
        until: I,
    },
    /// Waiting out the blob's lock-delay (docs/safety.md "Recovery from anything"), looking at the blob every watch
    /// period meanwhile: deleted again, its lock-delay begins again from then, where it would
    /// otherwise be seen only once this one is over, and the group wait two in a row.
    LockDelay,
    /// Asking the body whether it could start now (winning spends an epoch).
    Asking,
    /// The body could not start: looking again after a polling period.
    Barred,
    /// Reading slot 0 for the group's count of slots.
    Counting,
    /// This instance counts other slots than its group: looking again after
    /// [`Pace::MISMATCH_RECHECK`].
    Mismatched,
    /// Storage failed that read: reading again after a backoff.
    Unread,
    /// A round of acquires on its way: the successor's poll, a free or handed lease, a poller
    /// of slots.
    Polling,
    /// A round of reads on its way: a member that is not next in line.
    Watching,
    /// Listening for a listing of the record keeper that places this instance next in line,
    /// before the pause between rounds.
    Listening {
        /// The pause between rounds to come after.
        pause: Duration,
    },
    /// Between rounds: someone else leads, or storage failed.
    Following,
    /// Over ([`Action::End`]).
    Done,
}

/// What the next round is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// An acquire, whatever this instance's place: the first round (a free lease is taken at
    /// once), the lease found free or handed to this instance, a lock-delay waited out, or a
    /// wake-up (`woken`, with one slot: the lease was most likely handed to us, and what the
    /// epoch write needs goes out beside the acquire).
    Acquire {
        /// After a wake-up.
        woken: bool,
    },
    /// A read of the lease blob at once: a member that was refused by a holder it does not
    /// know cannot tell whether it is the successor (who polls) until it knows the leader, and
    /// a joiner next in line would otherwise wait a whole poll and a read.
    Read,
    /// As this instance's place in line says: the successor polls, the others watch.
    Placed,
}

/// A round of the campaign ([`Action::Round`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Round {
    /// One acquire of the group's lease.
    Acquire,
    /// One acquire after a wake-up, with what the epoch write needs beside it.
    Handed,
    /// A poller's round of slots: each in turn until one is won.
    Slots,
    /// One read of the lease blob.
    Watch,
    /// One read of the record of the member ahead among those waiting for a slot.
    WatchSlots,
}

/// What a round came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A term: its epoch is confirmed.
    Won,
    /// Someone else holds the lease (or every slot).
    Held,
    /// Acquire now: the lease is free, or was handed to this instance.
    Acquire,
    /// Look again after this long.
    Wait(Duration),
    /// Look again when this instance's place says: a polling period if it polls now, else a
    /// watch period.
    Look,
}

/// What the shell sees when it reports an event: reads of shared state, without side
/// effects, taken right after the I/O that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seen<I> {
    /// An acquire that got no answer in time is waiting to be settled.
    pub late: bool,
    /// Until when the lease blob is under a lock-delay, if it is.
    pub lock_delay: Option<I>,
    /// This instance counts other slots than its group.
    pub mismatched: bool,
    /// Storage has accepted the credentials at least once.
    pub authorized: bool,
    /// This instance has a line (it is a member).
    pub member: bool,
    /// It is in line: joined, and the line listed.
    pub in_line: bool,
    /// Its place in line (without a line: it polls).
    pub place: Place,
    /// It is a member that has not read who leads.
    pub leader_unknown: bool,
}

/// What ended what the campaign waited for.
#[derive(Debug, Clone)]
pub enum Event<E> {
    /// The campaign begins.
    Start,
    /// A pause ran out.
    Rested,
    /// `stop` came during a pause.
    Stopped,
    /// The late acquire is settled: the pause before the next attempt (`None`: `stop` came).
    SatOut(Option<Duration>),
    /// The deleted blob was created again, or not (the next rounds see to it).
    Recreated,
    /// The blob under a lock-delay was looked at ([`Action::Look`]).
    Looked,
    /// Whether the body could start now.
    MayLead(bool),
    /// What slot 0 said of the group's count: whether ours differs.
    Counted(Result<bool, E>),
    /// What a round came to.
    Round(Result<Outcome, E>),
    /// Listening ([`Action::Listen`]); `Seen::place` was read after.
    Listening,
    /// During the pause between rounds: a wake-up.
    Woken,
    /// During the pause between rounds: the record keeper's listing placed this instance
    /// next in line.
    Placed,
}

/// How a pause is timed, on the one clock the campaign is stepped with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest<I> {
    /// This long from now.
    For(Duration),
    /// Until this instant, or this long from now if that comes first.
    UntilAtMost(I, Duration),
}

/// Why a campaign ended.
#[derive(Debug, Clone)]
pub enum End<E> {
    /// A term was won (the round that won it holds it).
    Won,
    /// `stop` came.
    Stopped,
    /// Storage refused the credentials before it ever accepted them.
    Denied(E),
}

/// What the shell does.
#[derive(Debug, Clone)]
pub enum Action<I, E> {
    /// Log this.
    Say(Note<I, E>),
    /// Wait for the late acquire to settle: then [`Event::SatOut`].
    SitOut,
    /// Create slot 0's deleted blob again if this instance is to: then [`Event::Recreated`].
    Recreate,
    /// Slot 0's blob was found missing now: its lock-delay begins.
    Missing,
    /// Read slot 0's blob during its lock-delay: found deleted again (or created again since),
    /// the lock-delay is moved on. Then [`Event::Looked`].
    Look,
    /// Ask the body whether it could start now: then [`Event::MayLead`].
    AskBody,
    /// Read slot 0 for the group's count: then [`Event::Counted`].
    CheckCount,
    /// A round: then [`Event::Round`].
    Round(Round),
    /// Listen for a listing that places this instance next in line: then
    /// [`Event::Listening`], at once.
    Listen,
    /// A pause that only `stop` cuts short: then [`Event::Rested`] or [`Event::Stopped`].
    Rest(Rest<I>),
    /// The pause between rounds: it ends when its time runs out ([`Event::Rested`]), at a
    /// wake-up ([`Event::Woken`]), while listening at the listing ([`Event::Placed`]), or at
    /// `stop` ([`Event::Stopped`]).
    Follow {
        /// Its length.
        pause: Duration,
        /// Whether a listing that places this member first in line ends it.
        listening: bool,
    },
    /// The campaign is over.
    End(End<E>),
}

/// A line of the log that a transition calls for.
#[derive(Debug, Clone)]
pub enum Note<I, E> {
    /// Waiting out the lock-delay of the deleted lease blob until then.
    LockDelay(I),
    /// This instance's place in line changed to `place`; `moved`: from another it had said
    /// before (not the first place said).
    Place {
        /// The place now.
        place: Place,
        /// It was in another place before.
        moved: bool,
    },
    /// Another instance holds the lease: following (once per campaign).
    Following,
    /// The group's blob could not be read for its count.
    CountUnread(E),
    /// An acquire got no answer in time: it is sat out, not sent again.
    NoAnswer(E),
    /// An attempt failed; the next one after this pause.
    Retrying(E, Duration),
}

/// A candidate: its state, and what it remembers between rounds of its campaign.
#[derive(Debug)]
pub struct Candidate<I> {
    state: State<I>,
    timing: Timing,
    /// `[lease].slots` above 1: the slots' rounds, no read at once, no reserved epoch.
    slots: bool,
    /// A read of one blob names who leads: not with slots, nor on several replicas (a
    /// majority's holder is no one blob's), where a refused round is followed by a pause
    /// rather than a read at once.
    reads_leader: bool,
    /// What the next round is.
    next: Next,
    /// Whether it said it follows (once per campaign).
    following: bool,
    /// Whether the group's count was read (before the first acquire with slots: slot i > 0
    /// could be won before slot 0 said what the group counts).
    count_checked: bool,
    /// The place last logged, so that the line an operator (or a test) reads names the moment
    /// this member becomes next in line.
    last_place: Option<Place>,
    /// Where this instance stood when its last round began: a watch round after which it
    /// stands next in line moved it up.
    round_place: Place,
    /// The end of the lock-delay last logged (once per delay, not at each look).
    last_delay: Option<I>,
    /// The pauses after failed attempts, from the shortest again after each answered round.
    backoff: Backoff,
}

impl<I: Moment> Candidate<I> {
    /// The candidate of an instance with `slots` slots (`[lease].slots`), with `timing`.
    pub fn new(timing: Timing, slots: u32) -> Self {
        Self {
            state: State::Start,
            timing,
            slots: slots > 1,
            reads_leader: slots <= 1,
            next: Next::Acquire { woken: false },
            following: false,
            count_checked: false,
            last_place: None,
            round_place: Place::Poll,
            last_delay: None,
            backoff: error_backoff(&timing),
        }
    }

    /// The candidate of a group whose lease lives on several replicas: no one blob names who
    /// leads.
    pub fn on_replicas(mut self) -> Self {
        self.reads_leader = false;
        self
    }

    /// Where it stands.
    pub fn state(&self) -> State<I> {
        self.state
    }

    /// The one transition: `event` ended what the candidate waited for, and the shell now sees
    /// `seen`. Moves the state on; returns what to do, the last action being the one whose end
    /// is the next event (or [`Action::End`]).
    pub fn step<E: StoreFailure>(
        &mut self,
        event: Event<E>,
        seen: &Seen<I>,
        draw: &mut impl FnMut() -> f64,
    ) -> Vec<Action<I, E>> {
        let mut actions = Vec::new();
        self.step_into(event, seen, draw, &mut actions);
        actions
    }

    /// [`Candidate::step`], its actions pushed onto `actions` (a campaign keeps one list's
    /// room for all its steps).
    pub fn step_into<E: StoreFailure>(
        &mut self,
        event: Event<E>,
        seen: &Seen<I>,
        draw: &mut impl FnMut() -> f64,
        actions: &mut Vec<Action<I, E>>,
    ) {
        match (self.state, event) {
            (State::Start, Event::Start) => {
                self.count_checked = !self.slots && !seen.mismatched;
                self.ready(seen, actions);
            }
            (_, Event::Stopped) | (State::SittingOut, Event::SatOut(None)) => {
                self.end(End::Stopped, actions);
            }
            (State::SittingOut, Event::SatOut(Some(pause))) => {
                self.state = State::SatOut;
                actions.push(Action::Rest(Rest::For(pause)));
            }
            (State::Recreating { until }, Event::Recreated) => {
                self.lock_delay(until, actions, draw)
            }
            (State::SatOut, Event::Rested) => self.ready(seen, actions),
            // Still under the lock-delay: a look at the blob, then waiting on.
            (State::LockDelay, Event::Rested) if seen.lock_delay.is_some() => {
                actions.push(Action::Look);
            }
            (State::LockDelay, Event::Looked) => self.ready(seen, actions),
            (State::LockDelay, Event::Rested) => {
                self.next = match self.next {
                    Next::Acquire { woken } => Next::Acquire { woken },
                    _ => Next::Acquire { woken: false },
                };
                self.ask(actions);
            }
            (State::Asking, Event::MayLead(false)) => {
                self.state = State::Barred;
                let pause = Pace::new(&self.timing).poll(draw());
                actions.push(Action::Rest(Rest::For(pause)));
            }
            (State::Asking, Event::MayLead(true)) => {
                if !self.count_checked || seen.mismatched {
                    self.state = State::Counting;
                    actions.push(Action::CheckCount);
                } else {
                    self.round(seen, actions);
                }
            }
            (State::Counting, Event::Counted(counted)) => {
                self.counted(counted, seen, actions, draw)
            }
            (
                State::Barred | State::Mismatched | State::Unread | State::Following,
                Event::Rested,
            ) => self.ready(seen, actions),
            (State::Polling | State::Watching, Event::Round(round)) => {
                self.rounded(round, seen, actions, draw)
            }
            // A listing between a watch round and now may have placed this instance next in
            // line already: then it acquires at once, as the listing's wake-up would have it do
            // (the lease may be handed to it now, and the leader waits only a first hop).
            (State::Listening { .. }, Event::Listening)
                if seen.place == Place::Poll && self.round_place == Place::Watch =>
            {
                self.ready(seen, actions)
            }
            (State::Listening { pause }, Event::Listening) => {
                self.follow(pause, seen, actions, draw)
            }
            (State::Following, Event::Placed) => self.ready(seen, actions),
            (State::Following, Event::Woken) => {
                self.next = Next::Acquire { woken: !self.slots };
                self.ready(seen, actions);
            }
            (state, event) => unreachable!("the candidate got {event:?} while {state:?}"),
        }
    }

    /// The deleted blob was created again (or not): its lock-delay runs until `until`, and
    /// the blob is looked at every watch period meanwhile.
    fn lock_delay<E>(
        &mut self,
        until: I,
        actions: &mut Vec<Action<I, E>>,
        draw: &mut impl FnMut() -> f64,
    ) {
        self.state = State::LockDelay;
        if self.last_delay != Some(until) {
            self.last_delay = Some(until);
            actions.push(Action::Say(Note::LockDelay(until)));
        }
        let look = Pace::new(&self.timing).watch(draw());
        actions.push(Action::Rest(Rest::UntilAtMost(until, look)));
    }

    /// What slot 0 said of the group's count: the round, or a look again later.
    fn counted<E: StoreFailure>(
        &mut self,
        counted: Result<bool, E>,
        seen: &Seen<I>,
        actions: &mut Vec<Action<I, E>>,
        draw: &mut impl FnMut() -> f64,
    ) {
        match counted {
            Ok(false) => {
                self.count_checked = true;
                self.round(seen, actions);
            }
            // The group's blob is gone: it records no count (it is created again under a
            // lock-delay by the rounds, docs/safety.md "Recovery from anything").
            Err(e) if e.failure() == Failure::Missing => {
                actions.push(Action::Missing);
                self.count_checked = true;
                self.round(seen, actions);
            }
            Ok(true) => {
                self.state = State::Mismatched;
                actions.push(Action::Rest(Rest::For(Pace::MISMATCH_RECHECK)));
            }
            Err(e) => {
                self.state = State::Unread;
                let pause = self.backoff.next_pause(draw());
                actions.push(Action::Say(Note::CountUnread(e)));
                actions.push(Action::Rest(Rest::For(pause)));
            }
        }
    }

    /// The pause between rounds, after listening for a listing that places this member first
    /// in line: a poller's is a polling period, which a listing need not cut short.
    fn follow<E>(
        &mut self,
        mut pause: Duration,
        seen: &Seen<I>,
        actions: &mut Vec<Action<I, E>>,
        draw: &mut impl FnMut() -> f64,
    ) {
        let listening = match seen.place {
            Place::Poll => {
                pause = Pace::new(&self.timing).poll(draw());
                false
            }
            Place::Watch => true,
        };
        self.state = State::Following;
        actions.push(Action::Follow { pause, listening });
    }

    fn end<E>(&mut self, end: End<E>, actions: &mut Vec<Action<I, E>>) {
        self.state = State::Done;
        actions.push(Action::End(end));
    }

    /// Before a round: a late acquire is sat out, a lock-delay waited out (with slots, a round
    /// skips the slots under one), then the body is asked.
    fn ready<E>(&mut self, seen: &Seen<I>, actions: &mut Vec<Action<I, E>>) {
        if seen.late {
            self.state = State::SittingOut;
            actions.push(Action::SitOut);
        } else if let Some(until) = seen.lock_delay.filter(|_| !self.slots) {
            self.state = State::Recreating { until };
            actions.push(Action::Recreate);
        } else {
            self.ask(actions);
        }
    }

    fn ask<E>(&mut self, actions: &mut Vec<Action<I, E>>) {
        self.state = State::Asking;
        actions.push(Action::AskBody);
    }

    /// The round `self.next` calls for.
    fn round<E>(&mut self, seen: &Seen<I>, actions: &mut Vec<Action<I, E>>) {
        let place = match self.next {
            Next::Acquire { .. } => Place::Poll,
            Next::Read if seen.member => Place::Watch,
            _ => seen.place,
        };
        if seen.in_line && self.last_place != Some(seen.place) {
            let moved = self.last_place.is_some();
            actions.push(Action::Say(Note::Place {
                place: seen.place,
                moved,
            }));
            self.last_place = Some(seen.place);
        }
        let round = match (place, self.slots, self.next) {
            (Place::Poll, true, _) => Round::Slots,
            (Place::Poll, false, Next::Acquire { woken: true }) => Round::Handed,
            (Place::Poll, false, _) => Round::Acquire,
            (Place::Watch, true, _) => Round::WatchSlots,
            (Place::Watch, false, _) => Round::Watch,
        };
        self.next = Next::Placed;
        self.round_place = seen.place;
        self.state = match place {
            Place::Poll => State::Polling,
            Place::Watch => State::Watching,
        };
        actions.push(Action::Round(round));
    }

    /// What a round came to: won, acquire again at once, sit out a late acquire, or follow
    /// for a pause.
    fn rounded<E: StoreFailure>(
        &mut self,
        round: Result<Outcome, E>,
        seen: &Seen<I>,
        actions: &mut Vec<Action<I, E>>,
        draw: &mut impl FnMut() -> f64,
    ) {
        let pace = Pace::new(&self.timing);
        // A watch round whose reads placed this instance next in line acquires at once: the
        // leader may hand it the lease any moment and waits only a first hop for its acquire.
        let moved_up = self.state == State::Watching
            && self.round_place == Place::Watch
            && seen.place == Place::Poll;
        let round = round.map(|outcome| match outcome {
            Outcome::Look if moved_up => Outcome::Acquire,
            Outcome::Look => Outcome::Wait(match seen.place {
                Place::Poll => pace.poll(draw()),
                Place::Watch => pace.watch(draw()),
            }),
            outcome => outcome,
        });
        // With slots the pollers come from the listing (who holds which slot), not from
        // knowing one leader: no read at once.
        let read_now =
            self.reads_leader && matches!(round, Ok(Outcome::Held)) && seen.leader_unknown;
        self.next = match read_now {
            true => Next::Read,
            false => Next::Placed,
        };
        let pause = match round {
            Ok(Outcome::Won) => return self.end(End::Won, actions),
            Ok(Outcome::Acquire) => {
                self.next = Next::Acquire { woken: false };
                return self.ready(seen, actions);
            }
            Ok(Outcome::Held | Outcome::Wait(_)) if !self.following => {
                actions.push(Action::Say(Note::Following));
                self.following = true;
                self.backoff = error_backoff(&self.timing);
                match round {
                    Ok(Outcome::Wait(d)) => d,
                    _ => pace.poll(draw()),
                }
            }
            Ok(Outcome::Held) => {
                self.backoff = error_backoff(&self.timing);
                pace.poll(draw())
            }
            Ok(Outcome::Wait(d)) => {
                self.backoff = error_backoff(&self.timing);
                d
            }
            Ok(Outcome::Look) => unreachable!("resolved above"),
            Err(e) if seen.late => {
                actions.push(Action::Say(Note::NoAnswer(e)));
                return self.ready(seen, actions);
            }
            Err(e) => {
                let pause = self.backoff.next_pause(draw());
                if e.failure() == Failure::Denied && !seen.authorized {
                    return self.end(End::Denied(e), actions);
                }
                actions.push(Action::Say(Note::Retrying(e, pause)));
                pause
            }
        };
        let pause = if read_now { Duration::ZERO } else { pause };
        // While it watches, a listing of the record keeper that makes this instance next in
        // line ends the watch period (it may be handed the lease any moment). Listened for
        // before the place is looked at again, so that a listing in between is not missed; not
        // during a polling period, which a listing need not cut short.
        let watching = pause > pace.poll_longest();
        if watching && seen.member {
            self.state = State::Listening { pause };
            actions.push(Action::Listen);
        } else {
            self.state = State::Following;
            actions.push(Action::Follow {
                pause,
                listening: false,
            });
        }
    }
}

/// The pauses after failed attempts: from `acquire_interval`, doubling up to the longest
/// error backoff of the timing table.
fn error_backoff(timing: &Timing) -> Backoff {
    Backoff::new(
        timing.acquire_interval,
        Pace::new(timing).error_backoff_longest(),
    )
}

#[cfg(test)]
mod tests;
