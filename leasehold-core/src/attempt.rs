//! One acquisition attempt as a state machine: the acquire (after a wake-up, with the read or
//! the reserved epoch's write beside it), then the term's epoch read and written under the new
//! lease; the term is won only once that write is confirmed before the term's stop deadline
//! (rule 6 of docs/safety.md). A lease taken for no term goes back at once.
//!
//! The campaign ([`crate::campaign`]) drives it: it sends what [`Action::Send`] says under a tag
//! of its own (the shell runs the acquire, and what goes beside it, in tasks of their own: an
//! acquire that gets no answer in time goes on, and settles as a late acquire, [`crate::late`]),
//! waits for the answer [`Action::Await`] names and reports it with [`Attempt::step`], with the
//! instant it came. What the attempt asks of the member it runs in (the line, the lock-delays, a
//! shutdown, the wall clock) the shell answers through [`Grounds`], read at the moment asked,
//! so that the order of those questions is this module's.

use crate::epoch;
use crate::failure::{Failure, StoreFailure};
use crate::timing::{Deadline, Moment, Timing};
use std::time::Duration;

#[cfg(test)]
mod tests;

/// What goes out beside the acquire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Beside {
    /// Nothing: the blob is read once the acquire succeeded.
    Nothing,
    /// The read the epoch write needs (after a wake-up): it serves if nothing wrote the blob
    /// since, and the blob is read again if something did.
    Read,
    /// The write of the epoch a handoff reserved for this member (after a wake-up that carried
    /// one, docs/succession.md): conditional on the ETag the handoff left, under this attempt's
    /// lease id, so it goes through only if the lease was handed to us and nothing wrote since.
    ReservedEpoch(u64),
}

/// The simulator's mutants that break an attempt (docs/testing.md, "The simulator"); all off
/// outside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// `deadline-from-answer`: the term's deadline counted from the acquire's answer, not
    /// its send.
    pub deadline_from_answer: bool,
    /// `start-before-epoch`: the term is won while its epoch write is on its way.
    pub start_before_epoch: bool,
    /// `lead-on-the-reservation`: a reserved epoch leads without waiting for its write.
    pub lead_on_the_reservation: bool,
}

/// A request on the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<I> {
    /// Acquire the slot's lease with this attempt's lease id, for `L`.
    Acquire,
    /// Read the slot's blob beside the acquire, cut at `until`.
    ReadBeside {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Read the slot's blob, cut at `until`.
    Read {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Write the epoch the handoff reserved, beside the acquire, cut at `until`.
    WriteReserved {
        /// The epoch.
        epoch: u64,
        /// No answer by then is a timeout.
        until: I,
    },
    /// Read slot 0's blob for the group's count (an attempt on another slot), cut at `until`.
    ReadCount {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Write `epoch` under the lease, conditional on the ETag of the last read, cut at `until`
    /// (`None`: not waited for, the mutant `start-before-epoch`).
    WriteEpoch {
        /// The epoch.
        epoch: u64,
        /// No answer by then is a timeout.
        until: Option<I>,
    },
    /// Create the slot's blob again (found missing): marked for a lock-delay when the member
    /// saw it led or others are listed.
    Recreate,
    /// Release the lease this attempt took.
    Release,
}

/// The answer the driver waits for next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Awaited<I> {
    /// The acquire's, until this instant: then [`Event::NoAnswer`].
    Acquire(I),
    /// The answer to what went beside the acquire.
    Beside,
    /// The answer to the request just sent.
    Sent,
}

/// What the driver reports.
#[derive(Debug, Clone)]
pub enum Event<E> {
    /// The attempt begins.
    Start,
    /// The acquire's answer.
    Acquired(Result<(), E>),
    /// No answer to the acquire by the instant awaited.
    NoAnswer,
    /// A read of the slot's blob answered; `Ok` with the epoch it carries. The driver keeps
    /// the blob's ETag for the epoch write and answers [`Grounds`] of it.
    Read(Result<Option<u64>, E>),
    /// Slot 0's read answered: whether the group counts other slots than this member.
    Counted(Result<bool, E>),
    /// An epoch write answered (a reserved one, or one after a read).
    Written(Result<(), E>),
    /// The blob was created again, or not.
    Recreated(Result<(), E>),
    /// The release is done (whatever its answer).
    Released,
}

/// What an attempt learnt of the slot's lock-delay ([`crate::lock_delay::LockDelays`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// Someone holds the blob: found missing later, it was deleted under a body.
    Led,
    /// The blob is missing: its lock-delay begins (and it is created again).
    Missing,
    /// The reserved epoch was written: a leader's handoff, no lock-delay.
    Over,
    /// A term was won on it.
    Won,
}

/// What the driver does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<I, E> {
    /// Send this request, in a task of its own.
    Send(Request<I>),
    /// Wait for this answer.
    Await(Awaited<I>),
    /// This attempt's lease id is spent: the next acquire goes out with a new one, drawn now.
    SpendId,
    /// Tell the slot's lock-delay.
    Delay(Delay),
    /// The attempt is over.
    Done(Outcome<I, E>),
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome<I, E> {
    /// A term, with its deadline and epoch; `reserved` when the epoch was the one a handoff
    /// reserved.
    Won {
        /// Counted from the acquire's send.
        deadline: Deadline<I>,
        /// The epoch written.
        epoch: u64,
        /// Whether it was the reserved one.
        reserved: bool,
    },
    /// Someone else holds the lease.
    Held,
    /// The lease was taken, but for no term: it went back.
    GaveBack(GaveBack),
    /// The acquire got no answer in time: it goes on as a late acquire.
    NoAnswer,
    /// It failed (after the lease went back, if it was taken).
    Failed(Why<E>),
}

/// Why a lease taken went back without a term.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GaveBack {
    /// The group counts other slots than this member (slot 0 records it).
    OtherCount,
    /// The blob is under a lock-delay.
    LockDelay,
    /// A shutdown came while the acquire or the read was on its way: no epoch is spent on a
    /// term that would run no body.
    ShuttingDown,
}

/// Why an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Why<E> {
    /// A request failed so.
    Store(E),
    /// The epoch was confirmed only after the term's stop deadline, which fell this long after
    /// the acquire's send.
    PastStopDeadline(Duration),
    /// The blob carries an epoch that has no successor.
    LastEpoch(u64),
}

/// What an attempt asks of the member it runs in, answered by the driver at the moment asked.
pub trait Grounds {
    /// Slot 0 was free (or handed to us): whether another count of slots leads the group, as
    /// the blob last read records it and the line says (`Line::counts_otherwise`); noted.
    fn counts_otherwise(&mut self) -> bool;
    /// Members a handoff passed over, as the blob last read names them, are passed over in the
    /// line too (docs/safety.md, "Recovery from anything").
    fn pass_over(&mut self);
    /// Whether the blob last read is under a lock-delay (`LockDelays::before_epoch`).
    fn delayed(&mut self) -> bool;
    /// Whether the member is shutting down: no epoch is spent on a term that would run no body.
    fn shutting_down(&self) -> bool;
    /// The wall clock in milliseconds since 1970, for the epoch.
    fn wall_ms(&mut self) -> u64;
}

/// Where an attempt stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage<I> {
    Begin,
    Acquiring,
    Recreating,
    /// Waiting for the reserved epoch's write.
    Reserved(Deadline<I>, u64),
    /// Waiting for the read beside the acquire (`true`) or one sent after it.
    Reading(Deadline<I>, bool),
    /// Waiting for slot 0's read of the count, after the slot's read (beside or not).
    Counting(Deadline<I>, bool),
    /// Waiting for the epoch's write, after the read beside (`true`) or not.
    Writing(Deadline<I>, u64, bool),
    /// Waiting for the release.
    Releasing,
    Over,
}

/// One acquisition attempt on one slot.
#[derive(Debug)]
pub struct Attempt<I, E> {
    slot: u32,
    sent: I,
    timing: Timing,
    beside: Beside,
    create_if_missing: bool,
    mutants: Mutants,
    stage: Stage<I>,
    /// The epoch the slot's blob carried when last read.
    last: Option<u64>,
    /// The acquire's failure while the blob is created again; the end after a release.
    end: Option<Outcome<I, E>>,
}

impl<I: Moment, E: StoreFailure> Attempt<I, E> {
    /// An attempt on `slot`, its acquire sent at `sent`, with `beside` going out beside it.
    pub fn new(
        slot: u32,
        sent: I,
        timing: Timing,
        beside: Beside,
        create_if_missing: bool,
        mutants: Mutants,
    ) -> Self {
        Self {
            slot,
            sent,
            timing,
            beside,
            create_if_missing,
            mutants,
            stage: Stage::Begin,
            last: None,
            end: None,
        }
    }

    /// The slot it tries.
    pub fn slot(&self) -> u32 {
        self.slot
    }

    /// The timing it runs with.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// The one transition: `event` came at `now`. Returns what to do, the last action being
    /// what to wait for next (or [`Action::Done`]).
    pub fn step(
        &mut self,
        now: I,
        event: Event<E>,
        grounds: &mut impl Grounds,
    ) -> Vec<Action<I, E>> {
        let mut actions = Vec::new();
        self.step_into(now, event, grounds, &mut actions);
        actions
    }

    /// [`Attempt::step`], its actions pushed onto `actions` (a caller that steps it many
    /// times keeps one list's room).
    pub fn step_into(
        &mut self,
        now: I,
        event: Event<E>,
        grounds: &mut impl Grounds,
        actions: &mut Vec<Action<I, E>>,
    ) {
        match (self.stage, event) {
            (Stage::Begin, Event::Start) => self.begin(actions),
            (Stage::Acquiring, Event::NoAnswer) => {
                actions.push(Action::SpendId);
                self.done(Outcome::NoAnswer, actions);
            }
            (Stage::Acquiring, Event::Acquired(answer)) => self.acquired(now, answer, actions),
            (Stage::Recreating, Event::Recreated(result)) => {
                let failed = self.end.take();
                match (result, failed) {
                    (Err(e), _) => self.done(Outcome::Failed(Why::Store(e)), actions),
                    (Ok(()), Some(failed)) => self.done(failed, actions),
                    (Ok(()), None) => unreachable!("an attempt recreates only after a failure"),
                }
            }
            (Stage::Reserved(deadline, epoch), Event::Written(written)) => match written {
                Ok(()) => self.reserved_in_time(now, deadline, epoch, actions),
                // Refused (the blob changed since the notice, or the lease was not ours when it
                // arrived): the epoch is read and written as without a reservation.
                Err(_) => self.read(now, deadline, actions),
            },
            (Stage::Reading(deadline, beside), Event::Read(read)) => match read {
                Ok(last) => self.judge(now, deadline, last, beside, grounds, actions),
                // A read beside the acquire that failed is taken again after it.
                Err(_) if beside => self.read(now, deadline, actions),
                Err(e) => self.give_back(Outcome::Failed(Why::Store(e)), actions),
            },
            (Stage::Counting(deadline, beside), Event::Counted(counted)) => match counted {
                Ok(true) => self.give_back(Outcome::GaveBack(GaveBack::OtherCount), actions),
                Ok(false) => self.write(now, deadline, beside, grounds, actions),
                Err(e) => self.give_back(Outcome::Failed(Why::Store(e)), actions),
            },
            (Stage::Writing(deadline, epoch, beside), Event::Written(written)) => match written {
                // The blob changed after the read that went beside the acquire: read it again.
                Err(e) if beside && e.condition_failed() => self.read(now, deadline, actions),
                Err(e) => self.give_back(Outcome::Failed(Why::Store(e)), actions),
                Ok(()) if now >= deadline.stop_at => {
                    let late = Why::PastStopDeadline(self.span(deadline));
                    self.give_back(Outcome::Failed(late), actions)
                }
                Ok(()) => self.won(deadline, epoch, false, actions),
            },
            (Stage::Releasing, Event::Released) => {
                if let Some(end) = self.end.take() {
                    self.done(end, actions)
                }
            }
            (stage, event) => {
                debug_assert!(false, "an attempt at {stage:?} got {event:?}");
            }
        }
    }

    fn begin(&mut self, actions: &mut Vec<Action<I, E>>) {
        let until = self.sent + self.timing.request_timeout();
        match self.beside {
            Beside::Nothing => {}
            Beside::Read => actions.push(Action::Send(Request::ReadBeside { until })),
            Beside::ReservedEpoch(epoch) => {
                actions.push(Action::Send(Request::WriteReserved { epoch, until }))
            }
        }
        actions.push(Action::Send(Request::Acquire));
        actions.push(Action::Await(Awaited::Acquire(until)));
        self.stage = Stage::Acquiring;
    }

    /// The acquire answered: held, the term's epoch comes next (the lease is ours since it was
    /// sent); refused, the attempt is over (a missing blob created again first).
    fn acquired(&mut self, now: I, answer: Result<(), E>, actions: &mut Vec<Action<I, E>>) {
        match answer {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Held => {
                // Someone holds it, and may run a body: found missing later, the blob was
                // deleted under it, whatever the member records say then.
                actions.push(Action::Delay(Delay::Led));
                return self.done(Outcome::Held, actions);
            }
            Err(e) if e.failure() == Failure::Missing && self.create_if_missing => {
                actions.push(Action::Delay(Delay::Missing));
                actions.push(Action::Send(Request::Recreate));
                actions.push(Action::Await(Awaited::Sent));
                self.end = Some(Outcome::Failed(Why::Store(e)));
                self.stage = Stage::Recreating;
                return;
            }
            Err(e) => return self.done(Outcome::Failed(Why::Store(e)), actions),
        }
        // The epoch must be confirmed before the stop deadline of this very lease, or the
        // child would have no time to run.
        let counted_from = match self.mutants.deadline_from_answer {
            true => now,
            false => self.sent,
        };
        let deadline = Deadline::from_sent(counted_from, &self.timing);
        match self.beside {
            Beside::ReservedEpoch(epoch) => {
                self.stage = Stage::Reserved(deadline, epoch);
                if self.mutants.start_before_epoch || self.mutants.lead_on_the_reservation {
                    // Leads at once, whatever becomes of the write.
                    return self.reserved_in_time(now, deadline, epoch, actions);
                }
                actions.push(Action::Await(Awaited::Beside));
            }
            Beside::Read => {
                self.stage = Stage::Reading(deadline, true);
                actions.push(Action::Await(Awaited::Beside));
            }
            Beside::Nothing => self.read(now, deadline, actions),
        }
    }

    fn reserved_in_time(
        &mut self,
        now: I,
        deadline: Deadline<I>,
        epoch: u64,
        actions: &mut Vec<Action<I, E>>,
    ) {
        if now < deadline.stop_at {
            // The notice that reserved it was a leader's epoch write: no lock-delay.
            actions.push(Action::Delay(Delay::Over));
            return self.won(deadline, epoch, true, actions);
        }
        self.give_back(
            Outcome::Failed(Why::PastStopDeadline(self.span(deadline))),
            actions,
        )
    }

    /// Reads the slot's blob for its last epoch, cut at the stop deadline.
    fn read(&mut self, now: I, deadline: Deadline<I>, actions: &mut Vec<Action<I, E>>) {
        let until = self.until(now, deadline);
        actions.push(Action::Send(Request::Read { until }));
        actions.push(Action::Await(Awaited::Sent));
        self.stage = Stage::Reading(deadline, false);
    }

    /// The slot's blob was read, carrying epoch `last`: whether the group counts other slots
    /// (slot 0 knows; another slot reads slot 0 first), then the epoch write.
    fn judge(
        &mut self,
        now: I,
        deadline: Deadline<I>,
        last: Option<u64>,
        beside: bool,
        grounds: &mut impl Grounds,
        actions: &mut Vec<Action<I, E>>,
    ) {
        self.last = last;
        if self.slot != 0 {
            let until = self.until(now, deadline);
            actions.push(Action::Send(Request::ReadCount { until }));
            actions.push(Action::Await(Awaited::Sent));
            self.stage = Stage::Counting(deadline, beside);
            return;
        }
        if grounds.counts_otherwise() {
            return self.give_back(Outcome::GaveBack(GaveBack::OtherCount), actions);
        }
        self.write(now, deadline, beside, grounds, actions)
    }
}

impl<I: Moment, E: StoreFailure> Attempt<I, E> {
    /// The epoch write: members a handoff passed over are passed over here too; a blob under a
    /// lock-delay, or a shutdown, gives the lease back; else the last epoch + 1 (or the wall
    /// clock's, if later: [`epoch::next`]) is written, cut at the stop deadline.
    fn write(
        &mut self,
        now: I,
        deadline: Deadline<I>,
        beside: bool,
        grounds: &mut impl Grounds,
        actions: &mut Vec<Action<I, E>>,
    ) {
        grounds.pass_over();
        if grounds.delayed() {
            return self.give_back(Outcome::GaveBack(GaveBack::LockDelay), actions);
        }
        let Some(epoch) = epoch::next(self.last, grounds.wall_ms()) else {
            let last = self.last.unwrap_or_default();
            return self.give_back(Outcome::Failed(Why::LastEpoch(last)), actions);
        };
        if grounds.shutting_down() {
            return self.give_back(Outcome::GaveBack(GaveBack::ShuttingDown), actions);
        }
        if self.mutants.start_before_epoch {
            // The term is won while the write is on its way, whatever becomes of it.
            let write = Request::WriteEpoch { epoch, until: None };
            actions.push(Action::Send(write));
            return self.won(deadline, epoch, false, actions);
        }
        let until = Some(self.until(now, deadline));
        actions.push(Action::Send(Request::WriteEpoch { epoch, until }));
        actions.push(Action::Await(Awaited::Sent));
        self.stage = Stage::Writing(deadline, epoch, beside);
    }

    /// A term won: the lease id is spent (the next acquire goes out with a new one, which the
    /// member record publishes only now, after the epoch).
    fn won(
        &mut self,
        deadline: Deadline<I>,
        epoch: u64,
        reserved: bool,
        actions: &mut Vec<Action<I, E>>,
    ) {
        actions.push(Action::SpendId);
        actions.push(Action::Delay(Delay::Won));
        let won = Outcome::Won {
            deadline,
            epoch,
            reserved,
        };
        self.done(won, actions)
    }

    /// The lease taken goes back, for no term: then `end`.
    fn give_back(&mut self, end: Outcome<I, E>, actions: &mut Vec<Action<I, E>>) {
        actions.push(Action::SpendId);
        actions.push(Action::Send(Request::Release));
        actions.push(Action::Await(Awaited::Sent));
        self.end = Some(end);
        self.stage = Stage::Releasing;
    }

    fn done(&mut self, end: Outcome<I, E>, actions: &mut Vec<Action<I, E>>) {
        actions.push(Action::Done(end));
        self.stage = Stage::Over;
    }

    /// A request's cut-off: the request timeout from `now`, and never past the stop deadline.
    fn until(&self, now: I, deadline: Deadline<I>) -> I {
        (now + self.timing.request_timeout()).min(deadline.stop_at)
    }

    /// How long after the acquire's send the stop deadline fell.
    fn span(&self, deadline: Deadline<I>) -> Duration {
        deadline.stop_at - deadline.sent
    }
}
