//! The confirmation of a handoff: after a holder changed the lease to its successor's lease id
//! (and woke it), it reads the blob until the successor's epoch shows there. A successor that
//! does not write its epoch within its confirm window ([`Pace::confirm_window`]) is passed
//! over, and the lease handed on to the next member in line, by a notice and a `change` both
//! conditional on the blob's ETag being what the holder's handoff left: the successor's epoch
//! write changes the ETag and is itself conditional on the lease, so either it leads or the
//! next one does, never both (docs/safety.md, "Recovery from anything", rule 3). With nobody
//! left in line the lease is released, on the same condition (docs/succession.md).
//!
//! The window is cut short when the successor's record says it will not come: its record is
//! gone (it left the line), or it rejoined under a new record (the line is stale: the members
//! are listed again), or another process answers at its URL (a wake-up refused). A successor
//! that kept its record but acquires with a new lease id (it led since it was listed) is handed
//! the lease again under that id; with slots it may hold a slot now, which only a listing shows,
//! so the members are listed and the lease handed to the listing's successor. A wake-up that
//! nothing answered gives the successor a first hop's window, whatever the hop (rule (g) of
//! docs/safety.md): a live member polls within it.
//!
//! Nothing here sends a request or keeps time: the shell carries out each [`Action`] and
//! reports its end as an [`Event`], with the instant it came. The successor is the shell's
//! member record `M`, the blob's ETag the shell's `T`: the confirmation only holds them.

use crate::blob::LeaseBlob;
use crate::failure::Failure;
use crate::line::{self, Line, SlotBlob};
use crate::pace::Pace;
use crate::timing::{Moment, Timing};
use std::time::Duration;

#[cfg(test)]
mod tests;

/// What the wake-up after a `change` found at the successor's URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// It was accepted: the member tries its acquire now.
    Accepted,
    /// No URL, no answer, or a wake-up came first (429): the member finds the handoff by
    /// itself.
    Missed,
    /// Nothing listens at its URL (the connection refused or reset): a member that died, or
    /// one alive whose URL is wrong. Its record is read with the first read.
    Unreachable,
    /// Refused: whoever answers at its URL does not hold the member's wake token, so it is not
    /// the member its record names. Unless its record shows a new lease id, it is passed over
    /// at once.
    Refused,
}

impl Wake {
    /// Whether the member took the wake-up: it tries its acquire now.
    pub fn accepted(self) -> bool {
        self == Self::Accepted
    }

    /// Whether the wake-up says the process at the member's URL may not be the member: its
    /// record is read with the next read of the blob.
    fn doubts(self) -> bool {
        matches!(self, Self::Unreachable | Self::Refused)
    }
}

/// What a read of the blob showed, as the shell judges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read<T> {
    /// The successor wrote its epoch, above the handing term's: the handoff is confirmed.
    Taken,
    /// The blob is as the handoff left it (the holder's metadata, its term's epoch), with this
    /// ETag: the lease is still the handing holder's to move.
    Ours(T),
    /// Anything else (a newer leader's epoch or notice): not the holder's to move.
    Other,
    /// On several replicas, another member's epoch above the term's on a majority of them: it
    /// leads, and the handoff is over at once (no hop of the lease could outweigh that
    /// majority, and the holder is back in line for the next term).
    Led,
    /// No answer: the last answered read stands.
    Unanswered,
}

/// What a read of the successor's record says of the handoff to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record<M> {
    /// Still the successor (or the read got no answer).
    Stands,
    /// Still the successor, but acquiring with another lease id than the one the lease was
    /// changed to: it led since it was listed, and published a new one.
    NewLeaseId(M),
    /// It rejoined since it was listed (a new record, at the back of its priority): it is not
    /// passed over, but the line is stale and the members are listed.
    Rejoined,
    /// With slots: still in its place, but acquiring with another lease id than the one the
    /// lease was changed to. It won a slot since it was listed and may hold one now, which only
    /// a listing shows (docs/slots.md, "Failover and handoffs"): it is not passed over, but the
    /// line is stale and the members are listed, as for [`Record::Rejoined`].
    LedSince,
    /// No longer the successor: it left, or is no candidate now.
    Gone,
}

/// What `read`, a read of the record of `to` (the member the lease was changed to) at `now`
/// (`wall` on the wall clock), says of the handoff to it, by `line`: still the successor (the
/// line takes the fresh record), the same member under a new lease id (with one slot), with
/// slots a member that led since it was listed or one that rejoined (the line takes the fresh
/// record), or gone (no record, or no candidate now). A read that got no answer, or failed
/// otherwise than with a 404, leaves the listing's record standing: the confirmation's window
/// catches a member gone.
pub fn judge<I, R, S>(
    line: &mut Line<I, R, S>,
    to: &R,
    read: Result<Option<R>, Failure>,
    now: I,
    wall: R::Wall,
) -> Record<R>
where
    I: Moment,
    R: line::Record + Clone,
    S: SlotBlob<Wall = R::Wall>,
{
    match read {
        Ok(Some(fresh)) if line.still_successor(to, &fresh, now, wall) => {
            line.refresh(fresh);
            Record::Stands
        }
        Ok(Some(fresh)) if line.slots == 1 && line.still_in_place(to, &fresh, now, wall) => {
            Record::NewLeaseId(fresh)
        }
        Ok(Some(fresh)) if line.still_in_place(to, &fresh, now, wall) => {
            // With slots a new lease id is a slot won since the listing, perhaps held still: not
            // gone, and not the successor under its new id either until a listing says which.
            // Until then the line counts it holding one.
            line.led_since.push(fresh.identity().to_owned());
            line.refresh(fresh);
            Record::LedSince
        }
        Ok(Some(fresh)) if fresh.key() == to.key() && fresh.joined() != to.joined() => {
            // It is alive under its new record: the line takes it. With slots it may have won
            // a slot since it rejoined, which only a listing shows: until then the line counts
            // it holding one.
            if line.slots > 1 {
                line.led_since.push(fresh.identity().to_owned());
            }
            line.refresh(fresh);
            Record::Rejoined
        }
        Ok(_) | Err(Failure::Missing) => Record::Gone,
        Err(_) => Record::Stands,
    }
}

/// What `blob`, a read of the lease blob, says of the handoff of `me`'s term of `epoch` to the
/// member `to`: taken when `to` wrote its epoch, above the term's; the holder's to move only
/// while it is as the handoff left it (`me`'s holder metadata, the term's epoch), with its
/// ETag; anything else is not the holder's to move.
pub fn read_of<B: LeaseBlob>(blob: &B, me: &str, to: &str, epoch: u64) -> Read<B::ETag>
where
    B::ETag: Clone,
{
    match (blob.named(), blob.epoch()) {
        (Some(named), Some(written)) if named == to && written > epoch => Read::Taken,
        (Some(named), Some(written)) if named == me && written == epoch => {
            Read::Ours(blob.etag().clone())
        }
        _ => Read::Other,
    }
}

/// What became of the handoff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirmed<M> {
    /// Handed to this member: it took the lease, or the lease is no longer the holder's to
    /// move (it expires on its own).
    HandedTo(M),
    /// Released, nobody being left to hand it to (`true`: confirmed by storage).
    Released(bool),
}

/// What happens next; the shell carries it out and reports its end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action<M, T> {
    /// Log this.
    Say(Note<M>),
    /// Pause this long: then [`Event::Slept`].
    Sleep(Duration),
    /// Read the blob and, with `record`, the successor's record beside it: then
    /// [`Event::Read`].
    Read {
        /// Whether the successor's record is read too.
        record: bool,
    },
    /// Change the lease from `from`'s lease id to `to`'s (the same member's new one), and take
    /// `to`'s record into the line: then [`Event::Rekeyed`].
    Rekey {
        /// The member as handed the lease.
        from: M,
        /// The same member under its new lease id.
        to: M,
    },
    /// The lease was handed to `to`: the line says so, and `to` is woken (with `reserve`, the
    /// wake-up carries the epoch reserved for it). Then [`Event::Woke`].
    Wake {
        /// The member handed the lease.
        to: M,
        /// Whether the wake-up carries a reserved epoch.
        reserve: bool,
    },
    /// Pass `member` over in the line (none: the line was stale, and it is not passed over),
    /// and say who is the line's successor now: then [`Event::Successor`].
    PassOver {
        /// The member passed over.
        member: Option<M>,
    },
    /// List the members afresh: then [`Event::Relisted`].
    Relist,
    /// Hand the lease on from `from` to `to`: a notice naming `to` and `passed_over`, then the
    /// `change`, both conditional on `etag`. Then [`Event::HandedOn`].
    HandOn {
        /// The member the lease is changed to now.
        from: M,
        /// The next member in line.
        to: M,
        /// Every member passed over in this handoff.
        passed_over: Vec<M>,
        /// The ETag the handoff left on the blob.
        etag: T,
    },
    /// Release the lease under `from`'s lease id, conditional on `etag`: then
    /// [`Event::Released`].
    Release {
        /// The member the lease is changed to now.
        from: M,
        /// The ETag the handoff left on the blob.
        etag: T,
    },
    /// The confirmation is over.
    Done(Confirmed<M>),
}

/// What ended what the confirmation waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event<M, T> {
    /// A pause ran out.
    Slept,
    /// The blob was read; the successor's record too when asked.
    Read(Read<T>, Option<Record<M>>),
    /// The lease was changed to the successor's new lease id (`false`: it was not).
    Rekeyed(bool),
    /// What the wake-up found.
    Woke(Wake),
    /// The line's successor now.
    Successor(Option<M>),
    /// The successor of a fresh listing (`Some(None)`: no other live member); `None`: no
    /// listing.
    Relisted(Option<Option<M>>),
    /// The notice and the `change` of a hand-on: done (`false`: refused or unanswered).
    HandedOn(bool),
    /// The release: confirmed by storage or not.
    Released(bool),
}

/// A line of the log that a transition calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note<M> {
    /// The member took the lease at its own poll, though nothing listens at its URL (its
    /// advertised URL is likely wrong).
    TakenAtItsOwnPoll(M),
    /// Another process answers at the URL of the member handed the lease: passed over.
    AnotherProcessAnswers(M),
    /// The member handed the lease rejoined the line since it was listed.
    Rejoined(M),
    /// With slots, the member handed the lease led since it was listed, and may hold a slot
    /// now: the members are listed.
    LedSince(M),
    /// The member handed the lease left the line (its record is gone): passed over.
    Left(M),
    /// The member did not take the lease within its window: passed over.
    NotTaken {
        /// The member.
        member: M,
        /// How long was waited.
        waited: Duration,
        /// Its window.
        window: Duration,
        /// What its wake-up found.
        wake: Wake,
    },
    /// The lease was handed to the same successor's new lease id.
    NewLeaseId(M),
    /// Nobody else is in line: the lease is released.
    NobodyElse,
    /// The lease was handed on to this member.
    HandedOn(M),
}

/// What the confirmation waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiting {
    Sleep,
    Read,
    Rekey,
    /// The wake-up of the same member under its new lease id: the hop goes on.
    WakeAgain,
    /// The wake-up of the member handed the lease on: a hop begins.
    WakeNext,
    Successor,
    Relist,
    HandOn,
    Release,
    Done,
}

/// The confirmation of one handoff, from the first `change` to its end.
#[derive(Debug)]
pub struct Confirmation<I, M, T> {
    pace: Pace,
    waiting: Waiting,
    /// The member the lease is changed to now.
    to: M,
    /// What its wake-up found.
    wake: Wake,
    /// Whether its record is read with the next read of the blob.
    check: bool,
    /// Every member passed over so far.
    passed_over: Vec<M>,
    /// Whether the members were listed afresh (once per handoff).
    relisted: bool,
    /// The line that named the member handed the lease is stale: it rejoined since it was
    /// listed (a new record), or with slots it led since (a new lease id). It is not passed
    /// over, and the members are listed.
    stale: bool,
    /// Its record is gone: it left the line (a graceful stop deletes the record), no cause for
    /// a warning.
    left: bool,
    /// The member a `Rekey` or `HandOn` under way moves the lease to; the line's successor
    /// while the members are listed afresh.
    next: Option<M>,
    /// When the hop began, its window, and when it ends.
    began: I,
    window: Duration,
    ends: I,
    /// The pause before the next read.
    pause: Duration,
    /// The last answered read of this hop: `Some(etag)` while the blob was as the handoff
    /// left it.
    last: Option<Option<T>>,
}

impl<I: Moment, M: Clone, T: Clone> Confirmation<I, M, T> {
    /// The confirmation of a handoff to `to`, whose wake-up found `wake`, at `now`; with
    /// `check`, `to`'s record is read with the first read (a successor not read since it was
    /// chosen). Returns it and its first actions.
    pub fn begin(
        timing: &Timing,
        now: I,
        to: M,
        wake: Wake,
        check: bool,
    ) -> (Self, Vec<Action<M, T>>) {
        let mut c = Self {
            pace: Pace::new(timing),
            waiting: Waiting::Sleep,
            to,
            wake,
            check,
            passed_over: Vec::new(),
            relisted: false,
            stale: false,
            left: false,
            next: None,
            began: now,
            window: Duration::ZERO,
            ends: now,
            pause: Pace::CONFIRM_READ_LEAST,
            last: None,
        };
        let mut actions = Vec::new();
        c.hop(now, &mut actions);
        (c, actions)
    }

    /// The member the lease is changed to now.
    pub fn successor(&self) -> &M {
        &self.to
    }

    /// The one transition: `event` ended what the confirmation waited for, at `now`. Returns
    /// what to do, the last action being the one whose end is the next event (or
    /// [`Action::Done`]).
    ///
    /// # Panics
    /// On an event that does not answer the action last returned: a fault of the shell.
    pub fn step(&mut self, now: I, event: Event<M, T>) -> Vec<Action<M, T>> {
        let mut actions = Vec::new();
        match (self.waiting, event) {
            (Waiting::Sleep, Event::Slept) => {
                self.pause = self.pause.saturating_mul(2).min(Pace::CONFIRM_READ_LONGEST);
                self.waiting = Waiting::Read;
                let record = std::mem::take(&mut self.check);
                actions.push(Action::Read { record });
            }
            (Waiting::Read, Event::Read(read, record)) => {
                self.read(now, read, record, &mut actions)
            }
            (Waiting::Rekey, Event::Rekeyed(true)) => self.wake_moved(true, &mut actions),
            (Waiting::Rekey, Event::Rekeyed(false)) => {
                self.next = None;
                self.ends = now;
                self.hop_over(now, &mut actions);
            }
            (Waiting::WakeAgain, Event::Woke(wake)) => {
                // The same hop, with a window from now: the member learns of its lease anew.
                // Not woken, its record is read with the first read, as after a hand-on: one
                // that left as it was rekeyed is passed over at once (rule (g) of
                // docs/safety.md).
                self.wake = wake;
                self.check = !wake.accepted();
                self.window = self.window_now();
                self.ends = now + self.window;
                self.pause = Pace::CONFIRM_READ_LEAST;
                self.read_later(now, &mut actions);
            }
            (Waiting::WakeNext, Event::Woke(wake)) => {
                // Not woken, its record is read with the hop's first read: a member gone since
                // the line was listed is passed over at once (rule (g) of docs/safety.md).
                self.wake = wake;
                self.check = !wake.accepted();
                self.hop(now, &mut actions);
            }
            (Waiting::Successor, Event::Successor(next)) => {
                // The line is the holder's last listing: a member that joined since is not in
                // it. Before a release, or when the line is stale, one listing.
                if self.relisted || (next.is_some() && !self.stale) {
                    self.hand_on(next, &mut actions);
                } else {
                    self.relisted = true;
                    self.next = next;
                    self.waiting = Waiting::Relist;
                    actions.push(Action::Relist);
                }
            }
            (Waiting::Relist, Event::Relisted(listed)) => {
                // Without a listing, the line as it is (rather a stale line than a release).
                let stale = self.next.take();
                self.hand_on(listed.unwrap_or(stale), &mut actions);
            }
            (Waiting::HandOn, Event::HandedOn(true)) => self.wake_moved(false, &mut actions),
            (Waiting::HandOn, Event::HandedOn(false)) => {
                // Refused: the blob changed (the successor wrote its epoch at the last moment),
                // or the lease is someone else's. Either way, not ours to move.
                self.next = None;
                self.done(Confirmed::HandedTo(self.to.clone()), &mut actions);
            }
            (Waiting::Release, Event::Released(confirmed)) => {
                self.done(Confirmed::Released(confirmed), &mut actions);
            }
            (waiting, event) => panic!(
                "the confirmation waits for {waiting:?}, not {}",
                std::any::type_name_of_val(&event)
            ),
        }
        actions
    }

    /// The lease was moved to the member a `Rekey` (`same`: the same member's new lease id) or
    /// a `HandOn` named: it is the successor now, and is woken. The wake-up after a rekey
    /// carries the reserved epoch; after a hand-on none, as the member must read the members
    /// passed over.
    fn wake_moved(&mut self, same: bool, actions: &mut Vec<Action<M, T>>) {
        let to = self
            .next
            .take()
            .expect("a rekey or a hand-on names its member");
        actions.push(Action::Say(match same {
            true => Note::NewLeaseId(to.clone()),
            false => Note::HandedOn(to.clone()),
        }));
        self.to = to.clone();
        self.waiting = match same {
            true => Waiting::WakeAgain,
            false => Waiting::WakeNext,
        };
        actions.push(Action::Wake { to, reserve: same });
    }

    /// The window of the hop as it stands: a first hop's for a member that nothing answered
    /// at its URL, whatever the hop (rule (g) of docs/safety.md). A hop after a fresh listing
    /// is a later hop, though nobody was passed over: the member it names stood behind the one
    /// the lease was handed first, and learns that it is next only at its watch.
    fn window_now(&self) -> Duration {
        let first =
            (self.passed_over.is_empty() && !self.relisted) || self.wake == Wake::Unreachable;
        self.pace.confirm_window(self.wake.accepted(), first)
    }

    /// A hop begins: the member the lease is changed to now has its window from `now`.
    fn hop(&mut self, now: I, actions: &mut Vec<Action<M, T>>) {
        self.check |= self.wake.doubts();
        self.window = self.window_now();
        self.began = now;
        self.ends = now + self.window;
        self.pause = Pace::CONFIRM_READ_LEAST;
        self.last = None;
        self.read_later(now, actions);
    }

    /// The pause before the next read: doubling from [`Pace::CONFIRM_READ_LEAST`], never past
    /// the window's end. The window's last read reads the successor's record too: one that
    /// led since its record was read (with slots, won another slot by another holder's
    /// handoff), rejoined or left is not passed over for nothing, and the line that named it
    /// is stale; handed on down that line, a slot goes to a member waiting behind the poller,
    /// which never reads the notice naming it (docs/slots.md, "Failover and handoffs").
    fn read_later(&mut self, now: I, actions: &mut Vec<Action<M, T>>) {
        let left = if self.ends > now {
            self.ends - now
        } else {
            Duration::ZERO
        };
        self.check |= self.pause >= left;
        self.waiting = Waiting::Sleep;
        actions.push(Action::Sleep(self.pause.min(left)));
    }

    /// What a read of the blob (and of the successor's record) says.
    fn read(
        &mut self,
        now: I,
        read: Read<T>,
        record: Option<Record<M>>,
        actions: &mut Vec<Action<M, T>>,
    ) {
        match read {
            Read::Taken => {
                if self.wake == Wake::Unreachable {
                    // It polled; a wake-up would have saved it that poll's wait.
                    actions.push(Action::Say(Note::TakenAtItsOwnPoll(self.to.clone())));
                }
                return self.done(Confirmed::HandedTo(self.to.clone()), actions);
            }
            Read::Led => return self.done(Confirmed::HandedTo(self.to.clone()), actions),
            Read::Ours(etag) => self.last = Some(Some(etag)),
            Read::Other => self.last = Some(None),
            Read::Unanswered => {}
        }
        match record {
            None => {}
            // A refused wake-up and a record that stands: nobody acquires with its lease id.
            Some(Record::Stands) if self.wake == Wake::Refused => {
                actions.push(Action::Say(Note::AnotherProcessAnswers(self.to.clone())));
                self.ends = now;
            }
            Some(Record::Stands) => {}
            Some(Record::Rejoined) => {
                actions.push(Action::Say(Note::Rejoined(self.to.clone())));
                self.stale = true;
                self.ends = now;
            }
            Some(Record::LedSince) => {
                actions.push(Action::Say(Note::LedSince(self.to.clone())));
                self.stale = true;
                self.ends = now;
            }
            Some(Record::Gone) => {
                self.left = true;
                self.ends = now;
            }
            Some(Record::NewLeaseId(fresh)) => {
                // Nobody acquires with the id the lease has now: it goes to the new one.
                self.next = Some(fresh.clone());
                self.waiting = Waiting::Rekey;
                return actions.push(Action::Rekey {
                    from: self.to.clone(),
                    to: fresh,
                });
            }
        }
        if now >= self.ends {
            self.hop_over(now, actions);
        } else {
            self.read_later(now, actions);
        }
    }

    /// The hop's window is over and the member did not take the lease. It is handed on only
    /// while the blob is as the handoff left it: anything else (no read of it, a newer
    /// leader's epoch or notice: the holder may have been paused past the lease) means it is
    /// not the holder's to move, and the lease expires on its own.
    fn hop_over(&mut self, now: I, actions: &mut Vec<Action<M, T>>) {
        if !matches!(self.last, Some(Some(_))) {
            return self.done(Confirmed::HandedTo(self.to.clone()), actions);
        }
        // A member that rejoined is alive under its new record, and one that led since (with
        // slots) under its new lease id: not passed over, but the line that named its old one
        // is stale, so the members are listed.
        let passed = if std::mem::take(&mut self.left) {
            actions.push(Action::Say(Note::Left(self.to.clone())));
            true
        } else if !self.stale {
            actions.push(Action::Say(Note::NotTaken {
                member: self.to.clone(),
                waited: now - self.began,
                window: self.window,
                wake: self.wake,
            }));
            true
        } else {
            false
        };
        if passed {
            self.passed_over.push(self.to.clone());
        }
        self.waiting = Waiting::Successor;
        actions.push(Action::PassOver {
            member: (!self.stale).then(|| self.to.clone()),
        });
    }

    /// Hands the lease on to `next`, or releases it when there is nobody.
    fn hand_on(&mut self, next: Option<M>, actions: &mut Vec<Action<M, T>>) {
        // A stale line's listing is done: the next hop starts afresh.
        self.stale = false;
        let Some(Some(etag)) = self.last.clone() else {
            unreachable!("a hop is handed on only from a blob the handoff left")
        };
        let from = self.to.clone();
        match next {
            None => {
                actions.push(Action::Say(Note::NobodyElse));
                self.waiting = Waiting::Release;
                actions.push(Action::Release { from, etag });
            }
            Some(next) => {
                self.next = Some(next.clone());
                self.waiting = Waiting::HandOn;
                actions.push(Action::HandOn {
                    from,
                    to: next,
                    passed_over: self.passed_over.clone(),
                    etag,
                });
            }
        }
    }

    fn done(&mut self, confirmed: Confirmed<M>, actions: &mut Vec<Action<M, T>>) {
        self.waiting = Waiting::Done;
        actions.push(Action::Done(confirmed));
    }
}
