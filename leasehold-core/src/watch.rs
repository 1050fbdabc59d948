//! The watch of a member that is not next in line (docs/succession.md): one read of the lease
//! blob every watch period; a new ETag (a new epoch, or a handoff notice) placed in the line as
//! last listed, and the members listed again only when that is what places this member
//! ([`BlobWatch::read`]), a moment later ([`BlobWatch::list_soon`]).
//!
//! Only the member that would be next without the old leader lists after a change of leader,
//! so that a change costs one listing, not one per member; a lease held by nobody is read once
//! more a polling period later, and then acquired: that fallback bounds a dead successor, or a
//! line that is out of date, to about a lease duration and a watch period (rule (f) of
//! docs/safety.md).
//!
//! A watcher's round ([`Round`]) is a state machine: the [`campaign`](crate::campaign) sends the
//! requests it names and reports their answers; the shell answers its questions of the line
//! ([`Grounds`]).

use crate::candidate::Outcome;
use crate::failure::{Failure, StoreFailure};
use crate::line::{BlobSeen, Found, Line, Record, SlotBlob};
use crate::pace::Pace;
use crate::timing::{Moment, Timing};
use std::time::Duration;

#[cfg(test)]
mod tests;

/// One read of the lease blob, as the watch takes it.
#[derive(Debug, Clone, Copy)]
pub struct BlobRead<'a, T> {
    /// Whether its lease is held.
    pub leased: bool,
    /// Whether it was created again after a deletion, with no epoch written since.
    pub recreated: bool,
    /// Its ETag: a new one means a new epoch or a handoff notice.
    pub etag: &'a T,
    /// What it says of its holder and its notice.
    pub seen: BlobSeen<'a>,
}

/// What one read of the lease blob calls for ([`BlobWatch::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Acquire now, for this reason.
    Acquire(Why),
    /// The lease is held by nobody: read once more a polling period later (the successor
    /// should have taken it meanwhile).
    Unleased,
    /// Nothing new: the same ETag as the last read.
    Same,
    /// A new epoch or notice, placed in the line: list the members now (this member may be
    /// next, or the line does not know whom the blob names), and (`list_later`) once more when
    /// a crashed leader's record has surely expired.
    Moved {
        /// List the members now (a moment later: [`BlobWatch::list_soon`]).
        list_now: bool,
        /// Then once more, when a crashed leader's record has surely expired.
        list_later: bool,
    },
}

/// Why a watcher acquires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// The blob was created again after a deletion, and is free: whoever takes it waits out
    /// the lock-delay holding it.
    Recreated,
    /// The lease is free and this member is next in line after the last leader.
    NextInLine,
    /// The lease has been free for a polling period.
    FreeForAPoll,
    /// The leader's handoff notice names this member.
    Named,
}

/// What a member that is not the successor saw of the lease blob so far. `I` is the lease
/// clock's instant, `T` the blob's ETag.
#[derive(Debug, Clone)]
pub struct BlobWatch<I, T> {
    /// The ETag of the last read.
    etag: Option<T>,
    /// The last read found the lease held by nobody.
    unleased: bool,
    /// The last handoff notice read: a new leader it named was handed the lease; one it did not
    /// name took it after its predecessor crashed or lost it.
    notice: Option<String>,
    /// A listing put off: a moment after a change of leader ([`Pace::LIST_AFTER_A_CHANGE`]), or
    /// until a crashed leader's record has surely expired.
    list_at: Option<I>,
    /// The listing put off is the one after a change of leader that no notice announced: if
    /// it does not make this member the successor, one more once a crashed leader's record has
    /// surely expired.
    then_at_expiry: bool,
}

impl<I, T> Default for BlobWatch<I, T> {
    fn default() -> Self {
        Self {
            etag: None,
            unleased: false,
            notice: None,
            list_at: None,
            then_at_expiry: false,
        }
    }
}

impl<I: Moment, T: Clone + PartialEq> BlobWatch<I, T> {
    /// Takes one read of the lease blob into this watch and into the line `l`, at `now`
    /// (`wall`), and says what it calls for. The listings it calls for are the shell's.
    pub fn read<R, S>(
        &mut self,
        l: &mut Line<I, R, S>,
        read: BlobRead<'_, T>,
        now: I,
        wall: R::Wall,
    ) -> Read
    where
        R: Record,
        S: SlotBlob<Wall = R::Wall>,
    {
        if !read.leased && read.recreated {
            self.unleased = false;
            return Read::Acquire(Why::Recreated);
        }
        if !read.leased {
            return self.read_unleased(l, read, now, wall);
        }
        self.unleased = false;
        if self.etag.as_ref() == Some(read.etag) {
            return Read::Same;
        }
        self.etag = Some(read.etag.clone());
        let handed = std::mem::replace(&mut self.notice, read.seen.notice.map(str::to_owned));
        let before = l.leader.clone();
        l.read(read.seen, now);
        let me = l.me.as_str();
        let named_me = l.notice.as_deref() == Some(me) && l.leader.as_deref() != Some(me);
        let unknown = (l.leader.iter())
            .chain(l.notice.iter())
            .any(|id| id != me && !l.knows(id));
        // A new leader: whether the old one is still in line is what decides who is next now
        // (a clean stop deleted its record, a release kept it, a crash left it to expire), and
        // this member's line cannot tell. Only the member that would be next without it lists.
        // A new leader that no notice named (the notice lasts only until the new epoch is
        // written, so this is what a watcher usually sees; or the old leader crashed) may have
        // left a record that has not expired yet: that member looks again once it surely has.
        let next_without_old = match (&before, &l.leader) {
            (Some(old), Some(new)) if old != new => {
                // The lease goes down the line: a member between the two leaders led in a term
                // this watch missed (handovers quicker than a watch period), and is gone from
                // the front as `old` is.
                let missed = l.between(old, new);
                l.gave_up(old);
                for between in &missed {
                    l.gave_up(between);
                }
                l.is_successor_without(old, now, wall)
            }
            _ => false,
        };
        let unannounced = match (&before, &l.leader) {
            (Some(_), Some(new)) => handed.as_deref() != Some(new.as_str()),
            _ => false,
        };
        if named_me {
            return Read::Acquire(Why::Named);
        }
        Read::Moved {
            list_now: l.is_successor(now, wall) || unknown || next_without_old,
            list_later: unannounced && next_without_old,
        }
    }

    /// A read that found the lease held by nobody: released with nobody to hand it to (a member
    /// that joined just after the leader's last listing). The member next in line after the
    /// last leader takes it at once; the others wait a polling period for it.
    fn read_unleased<R, S>(
        &mut self,
        l: &mut Line<I, R, S>,
        read: BlobRead<'_, T>,
        now: I,
        wall: R::Wall,
    ) -> Read
    where
        R: Record,
        S: SlotBlob<Wall = R::Wall>,
    {
        let next = match l.leader.clone() {
            Some(old) => l.is_successor_without(&old, now, wall),
            None => l.is_successor(now, wall),
        };
        l.read(read.seen, now);
        self.etag = None;
        if next {
            self.unleased = false;
            return Read::Acquire(Why::NextInLine);
        }
        if std::mem::replace(&mut self.unleased, true) {
            self.unleased = false;
            return Read::Acquire(Why::FreeForAPoll);
        }
        Read::Unleased
    }

    /// Whether the listing put off is due at `now` (then it is no longer put off).
    pub fn listing_due(&mut self, now: I) -> bool {
        let due = self.list_at.is_some_and(|at| now >= at);
        if due {
            self.list_at = None;
        }
        due
    }

    /// The listing put off was made at `now`; `successor`: whether it made this member the
    /// successor. One that followed an unannounced change of leader, and did not, is made once
    /// more when a crashed leader's record has surely expired ([`Pace::RECORD_LEASE`]).
    pub fn listed(&mut self, now: I, successor: bool) {
        if std::mem::take(&mut self.then_at_expiry) && !successor {
            self.list_at = Some(now + Pace::RECORD_LEASE);
        }
    }

    /// A listing is called for at `now` ([`Read::Moved`]'s `list_now`), with `list_later`:
    /// made a moment later ([`Pace::LIST_AFTER_A_CHANGE`], when a leader that stopped has
    /// surely deleted its record). The watch waits that long before it reads again.
    pub fn list_soon(&mut self, now: I, list_later: bool) -> Duration {
        self.list_at = Some(now + Pace::LIST_AFTER_A_CHANGE);
        self.then_at_expiry = list_later;
        Pace::LIST_AFTER_A_CHANGE
    }
}

/// Whether the member just ahead in line (`ahead`, as last listed) has left, died, rejoined or
/// stood by since, by a fresh read of its record (`None`: it is gone).
pub fn ahead_moved<R: Record>(ahead: &R, fresh: Option<&R>, wall: R::Wall) -> bool {
    fresh.is_none_or(|fresh| {
        !fresh.is_alive() || fresh.joined() != ahead.joined() || fresh.in_standby(wall)
    })
}

/// A request of a watcher's round ([`Round`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<I> {
    /// List the members (the listing put off is due), cut at `until`.
    List {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Read the lease blob, cut at `until`.
    ReadBlob {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Read the record of the member just ahead in line, cut at `until`.
    ReadAhead {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Probe the URL of the member just ahead in line with its wake token (an HTTP request,
    /// none to storage; the HTTP client's own timeout cuts it).
    ProbeAhead,
}

/// What the driver of a watcher's round reports.
#[derive(Debug, Clone)]
pub enum Event<E> {
    /// The round begins.
    Start,
    /// The listing is done (whatever its answer: the round reads the blob anyway).
    Listed,
    /// The lease blob was read (the driver keeps what it read, for [`Grounds`]).
    BlobRead(Result<(), E>),
    /// The record of the member ahead was read: whether it left, died, rejoined or stood by
    /// since it was listed ([`ahead_moved`]).
    AheadRead(Result<bool, E>),
    /// The probe of the member ahead found this at its URL (another process: the line passes
    /// its record over already).
    Probed(Found),
}

/// What the driver of a watcher's round does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<I, E> {
    /// Send this request; then its [`Event`].
    Send(Request<I>),
    /// Storage answered a read of the blob: the credentials are good.
    Authorized,
    /// The lease blob is missing: its lock-delay begins, and this member campaigns for it.
    Missing,
    /// The line changed: show it.
    ShowLine,
    /// This member acquires, for this reason.
    Acquiring(Why),
    /// The round is over.
    Done(Result<Outcome, E>),
}

/// What a watcher's round asks of the member it runs in, answered at the moment asked.
pub trait Grounds<I, T> {
    /// Whether the listing just made places this member next in line.
    fn is_successor(&mut self) -> bool;
    /// The lock-delay's look at the blob just read: marked, its lock-delay runs from its
    /// creation; an epoch on it ends one.
    fn looked(&mut self);
    /// Whether the blob just read says the group counts other slots than this member.
    fn counts_otherwise(&mut self) -> bool;
    /// The blob just read, taken into `watch` and the line at `now` ([`BlobWatch::read`]).
    fn read(&mut self, watch: &mut BlobWatch<I, T>, now: I) -> Read;
    /// Whether the line names a member just ahead of this one.
    fn has_ahead(&mut self) -> bool;
    /// Whether the line names a member just ahead of this one that advertises a URL to probe.
    fn ahead_advertises(&mut self) -> bool;
    /// The probe found nothing listening at the URL of the member just ahead: whether to read
    /// its record now ([`Line::read_unheard`]).
    fn read_unheard(&mut self) -> bool;
}

/// Where a round stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Begin,
    Listing,
    Reading,
    /// Reading the record ahead, with the `list_later` of the read that called for it.
    Ahead(bool),
    /// Probing the member ahead, the blob unchanged.
    Probing,
    Over,
}

/// One round of a member that is not the successor: the listing put off, if it is due (the
/// blob is read in this round too: a listing that took a round's place would leave the blob
/// unread for two watch periods, rule (f) of docs/safety.md); one read of the lease blob taken
/// into the line; after a new term, one read of the record of the member just ahead (it may
/// have left or died since the last listing, which nothing on the lease blob shows); with no
/// new term, a probe of the member just ahead at its URL, when it advertises one.
///
/// The probe is what makes a watcher the successor when the member its line puts ahead was
/// started again (which gave it a new join date, behind), or died: nothing on the lease blob
/// shows that while the leader lives, and the watcher lists only every [`Pace::LIST_EVERY`];
/// the leader's crash would then be followed at a watch, not at a poll (docs/succession.md).
/// Another process answering at its URL makes its record a ghost's at once; nothing listening
/// there (a process gone, or started again on another port; or a live member whose URL is
/// wrong) makes the round read that record, and list when it ran out or was made anew, for a
/// record lease and a watch at most ([`Line::read_unheard`]). A member that does not answer in
/// time (frozen, or its network slow) stands. The probe costs no storage request; nothing
/// listening, a read a watch for about 40 s.
#[derive(Debug)]
pub struct Round {
    request_timeout: Duration,
    longest_poll: Duration,
    /// The mutant `watcher-stays` (docs/testing.md): a watcher never lists nor reads ahead
    /// after a new term, nor probes the member ahead.
    stays: bool,
    stage: Stage,
}

impl Round {
    /// A round with `timing`; `stays` is the mutant `watcher-stays`.
    pub fn new(timing: &Timing, stays: bool) -> Self {
        Self {
            request_timeout: timing.request_timeout(),
            longest_poll: timing.longest_poll(),
            stays,
            stage: Stage::Begin,
        }
    }

    /// The one transition: `event` came at `now`. Returns what to do, the last action being a
    /// request (whose answer is the next event) or [`Action::Done`].
    pub fn step<I: Moment, T: Clone + PartialEq, E: StoreFailure>(
        &mut self,
        now: I,
        event: Event<E>,
        watch: &mut BlobWatch<I, T>,
        grounds: &mut impl Grounds<I, T>,
    ) -> Vec<Action<I, E>> {
        let mut actions = Vec::new();
        self.step_into(now, event, watch, grounds, &mut actions);
        actions
    }

    /// [`Round::step`], its actions pushed onto `actions` (a campaign keeps one list's room
    /// for all its rounds).
    pub fn step_into<I: Moment, T: Clone + PartialEq, E: StoreFailure>(
        &mut self,
        now: I,
        event: Event<E>,
        watch: &mut BlobWatch<I, T>,
        grounds: &mut impl Grounds<I, T>,
        actions: &mut Vec<Action<I, E>>,
    ) {
        let until = now + self.request_timeout;
        match (self.stage, event) {
            (Stage::Begin, Event::Start) if watch.listing_due(now) => {
                self.stage = Stage::Listing;
                actions.push(Action::Send(Request::List { until }));
            }
            (Stage::Begin, Event::Start) => self.read_blob(until, actions),
            (Stage::Listing, Event::Listed) => {
                watch.listed(now, grounds.is_successor());
                self.read_blob(until, actions);
            }
            (Stage::Reading, Event::BlobRead(Err(e))) if e.failure() == Failure::Missing => {
                // Nobody watches a leader that is gone (docs/safety.md, "Recovery from
                // anything"): the blob was deleted, and whoever leads next does so under the
                // lock-delay.
                actions.extend([Action::Authorized, Action::Missing]);
                self.done(Ok(Outcome::Acquire), actions);
            }
            (Stage::Reading, Event::BlobRead(Err(e))) => self.done(Err(e), actions),
            (Stage::Reading, Event::BlobRead(Ok(()))) => {
                actions.push(Action::Authorized);
                self.take_read(now, until, watch, grounds, actions);
            }
            (Stage::Ahead(list_later), Event::AheadRead(moved)) => {
                let moved = moved.unwrap_or_else(|e| e.failure() == Failure::Missing);
                self.after_the_read(now, moved, list_later, watch, actions);
            }
            // Nothing listens at its URL: its process is gone, or the URL it advertises is
            // wrong. Its record says which: one that ran out, or was taken back with a new
            // join date, has the line listed; one that lives on stands, and past a record
            // lease is read no more.
            (Stage::Probing, Event::Probed(Found::Nothing)) if grounds.read_unheard() => {
                self.stage = Stage::Ahead(false);
                actions.push(Action::Send(Request::ReadAhead { until }));
            }
            // Found gone (another process answers there), its record is passed over from now
            // on: the candidate sees this member's new place (next in line, it acquires at
            // once). One that answered, or did not in time, stands.
            (Stage::Probing, Event::Probed(_)) => self.done(Ok(Outcome::Look), actions),
            (stage, event) => debug_assert!(false, "a watcher's round at {stage:?} got {event:?}"),
        }
    }

    fn read_blob<I, E>(&mut self, until: I, actions: &mut Vec<Action<I, E>>) {
        self.stage = Stage::Reading;
        actions.push(Action::Send(Request::ReadBlob { until }));
    }

    /// The blob was read: the lock-delay looks, the group's count is checked, and the read is
    /// taken into the watch and the line.
    fn take_read<I: Moment, T: Clone + PartialEq, E>(
        &mut self,
        now: I,
        until: I,
        watch: &mut BlobWatch<I, T>,
        grounds: &mut impl Grounds<I, T>,
        actions: &mut Vec<Action<I, E>>,
    ) {
        grounds.looked();
        if grounds.counts_otherwise() {
            return self.done(Ok(Outcome::Wait(Pace::MISMATCH_RECHECK)), actions);
        }
        let (list_now, list_later) = match grounds.read(watch, now) {
            Read::Acquire(why) => {
                if why == Why::Named {
                    actions.push(Action::ShowLine);
                }
                actions.push(Action::Acquiring(why));
                return self.done(Ok(Outcome::Acquire), actions);
            }
            Read::Unleased => return self.done(Ok(Outcome::Wait(self.longest_poll)), actions),
            Read::Same if !self.stays && grounds.ahead_advertises() => {
                self.stage = Stage::Probing;
                return actions.push(Action::Send(Request::ProbeAhead));
            }
            Read::Same => return self.done(Ok(Outcome::Look), actions),
            Read::Moved {
                list_now,
                list_later,
            } => (list_now, list_later),
        };
        actions.push(Action::ShowLine);
        if !list_now && !self.stays && grounds.has_ahead() {
            self.stage = Stage::Ahead(list_later);
            return actions.push(Action::Send(Request::ReadAhead { until }));
        }
        self.after_the_read(now, list_now, list_later, watch, actions)
    }

    /// A new term was read: listing a moment later if the read (or the record ahead) calls
    /// for it, else looking again at the next round.
    fn after_the_read<I: Moment, T: Clone + PartialEq, E>(
        &mut self,
        now: I,
        list_now: bool,
        list_later: bool,
        watch: &mut BlobWatch<I, T>,
        actions: &mut Vec<Action<I, E>>,
    ) {
        if list_now && !self.stays {
            let pause = watch.list_soon(now, list_later);
            return self.done(Ok(Outcome::Wait(pause)), actions);
        }
        self.done(Ok(Outcome::Look), actions)
    }

    fn done<I, E>(&mut self, end: Result<Outcome, E>, actions: &mut Vec<Action<I, E>>) {
        self.stage = Stage::Over;
        actions.push(Action::Done(end));
    }
}
