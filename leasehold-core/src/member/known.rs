//! What a member knows that its roles share ([`Known`]: the line, its own record, the lock-delays, the
//! group's count, the wake-ups, an acquire without an answer, the credentials, a shutdown),
//! and the campaign's questions answered from them ([`Campaigning`], every `Grounds` a
//! campaign and its rounds ask), with what the store's answers left that the next questions
//! need ([`Kept`]). What a question changes that people should hear of comes back as a
//! [`Note`] for the shell to log.

use super::kinds::Kinds;
use super::own::Own;
use crate::attempt::{self, Delay};
use crate::blob::LeaseBlob;
use crate::campaign;
use crate::candidate::Seen;
use crate::line::{Line, Place, Record, Standing};
use crate::lock_delay::LockDelays;
use crate::pace::Pace;
use crate::quorum::Stamp;
use crate::slots::{Count, CountChange, PollGrounds, WaitGrounds};
use crate::timing::{Moment, Timing};
use crate::wake::Wakes;
use crate::watch::{self, BlobWatch, Read};
use std::time::Duration;

/// What one member knows that more than one of its roles reads or changes.
#[derive(Debug)]
pub struct Known<I, K: Kinds> {
    /// The user's timing.
    pub timing: Timing,
    /// `[lease].slots`.
    pub slots: u32,
    /// The line of succession.
    pub line: Line<I, K::Record, K::Slot>,
    /// This member's record.
    pub own: Own<I, K::Published>,
    /// The lock-delay of each slot's blob (docs/safety.md, "Recovery from anything").
    pub delays: LockDelays<I>,
    /// The group's count of slots beside this member's.
    pub count: Count,
    /// The wake-ups accepted, and the epoch the last one reserved.
    pub wakes: Wakes<I, K::ETag>,
    /// When the acquire that got no answer in time was sent, while it is not settled.
    pub late: Option<I>,
    /// Storage has accepted the credentials at least once.
    pub authorized: bool,
    /// Shutdown was asked for.
    pub shutdown: bool,
    /// On a replica set, the largest epoch this member has read on a replica or written to
    /// one: its next term's epoch is above it (docs/quorum.md, the rule *Epochs*), so that a
    /// replica wiped or rolled back since cannot take the group's epochs back.
    pub epoch_seen: Option<u64>,
}

impl<I: Moment, K: Kinds> Known<I, K> {
    /// A replica carried `epoch`, or the member wrote it there.
    pub fn saw_epoch(&mut self, epoch: Option<u64>) {
        self.epoch_seen = self.epoch_seen.max(epoch);
    }

    /// The facts of a member `me` that has not joined yet, to publish `published`.
    pub fn new(timing: Timing, slots: u32, me: String, published: K::Published) -> Self {
        Self {
            timing,
            slots,
            line: Line::new(me, slots),
            own: Own::new(published),
            delays: LockDelays::default(),
            count: Count::default(),
            wakes: Wakes::default(),
            late: None,
            authorized: false,
            shutdown: false,
            epoch_seen: None,
        }
    }

    /// A member has a record ([`Seen::member`]).
    const MEMBER: bool = true;

    /// What the campaign sees at `now`: reads without side effects.
    pub fn seen(&self, now: I, wall: K::Wall) -> Seen<I> {
        let line = &self.line;
        Seen {
            late: self.late.is_some(),
            lock_delay: self.delays.until(0, now),
            mismatched: self.count.mismatched(),
            authorized: self.authorized,
            member: Self::MEMBER,
            in_line: line.standing == Standing::Joined && line.listed.is_some(),
            place: line.place(now, wall),
            leader_unknown: line.leader.is_none(),
        }
    }

    /// Takes what slot 0 says of the group's count (`recorded`, while it is `leased`); returns
    /// whether ours differs, and notes a mismatch that begins or ends.
    pub fn note_count(
        &mut self,
        leased: bool,
        recorded: Option<u32>,
        notes: &mut Vec<Note>,
    ) -> bool {
        match self.count.note(self.slots, recorded, leased) {
            CountChange::Began(recorded) => notes.push(Note::Mismatch(Some(recorded))),
            CountChange::Ended(_) => notes.push(Note::Mismatch(None)),
            CountChange::Goes(_) | CountChange::Matches => {}
        }
        self.count.mismatched()
    }
}

/// What a question answered from what it knows changed that people should hear of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The group's count of slots differs from this member's: the count slot 0 records; `None`:
    /// it matches again.
    Mismatch(Option<u32>),
    /// A lock-delay of this long began on the blob of `slot`.
    LockDelay {
        /// The slot.
        slot: u32,
        /// How long it runs.
        left: Duration,
    },
    /// Slot 0 was released: the group counts this many slots, not this member's.
    CountsOtherwise(u32),
}

/// What the store's answers left that a campaign's next questions, its next requests and the
/// term it wins need.
#[derive(Debug)]
pub struct Kept<K: Kinds> {
    /// The slot of the attempt on its way.
    pub slot: u32,
    /// The lease id its acquire goes out with.
    pub id: Option<K::LeaseId>,
    /// The slot's blob as the attempt last read it: the epoch write is conditional on its ETag.
    pub read: Option<K::Blob>,
    /// The wall clock the epoch was drawn from (or the reserved epoch written at): the term's
    /// acquisition time.
    pub wall: Option<K::Wall>,
    /// The epoch the attempt wrote on the blob: the term's, once won.
    pub epoch: Option<u64>,
    /// The ETag the handoff's notice left, which the reserved epoch's write is conditional on.
    pub reservation: Option<K::ETag>,
    /// The lease blob as a watcher's round just read it.
    pub blob: Option<K::Blob>,
    /// The member just ahead in line, as a watcher's round last listed it.
    pub ahead: Option<K::Record>,
    /// On several replicas, each one's lease blob as the attempt last read it, and its stamp,
    /// one a place: the epoch's write there is conditional on its ETag, and writes the stamp
    /// again.
    pub replicas: Vec<Option<(K::Blob, Stamp)>>,
    /// On several replicas, each one's ETag after this member's epoch write there, one a
    /// place: a handoff changes the lease on each only while that ETag stands.
    pub replica_etags: Vec<Option<K::ETag>>,
    /// On several replicas, the term's replica for the handoff (docs/quorum.md, Handover):
    /// the first one it holds with its epoch written there, as its end's first request on the
    /// lease blob finds them. The handoff's notice is written there, and carries that
    /// replica's own stamp (a metadata write replaces every key). 0 on one account.
    pub anchor: usize,
}

impl<K: Kinds> Default for Kept<K> {
    fn default() -> Self {
        Self {
            slot: 0,
            id: None,
            read: None,
            wall: None,
            epoch: None,
            reservation: None,
            blob: None,
            ahead: None,
            replicas: Vec::new(),
            replica_etags: Vec::new(),
            anchor: 0,
        }
    }
}

/// What a member knows at one instant, as its campaign asks it: every `Grounds` of a campaign
/// and its rounds.
pub struct Campaigning<'a, I, K: Kinds> {
    /// What the member knows.
    pub facts: &'a mut Known<I, K>,
    /// What the store's answers left.
    pub kept: &'a mut Kept<K>,
    /// The lease id the next acquire goes out with.
    pub next_id: &'a K::LeaseId,
    /// The lease clock's now.
    pub now: I,
    /// The wall clock's now, and in milliseconds since 1970.
    pub wall: K::Wall,
    /// The wall clock's now in milliseconds since 1970, for an epoch.
    pub wall_ms: u64,
    /// The shell's uniform draws in `[0, 1)`.
    pub draw: &'a mut dyn FnMut() -> f64,
    /// What changed that people should hear of.
    pub notes: &'a mut Vec<Note>,
    /// The mutant `slot-refill-late`: a poller tries only as many slots as the last look
    /// showed free.
    pub refill_late: bool,
}

impl<I: Moment, K: Kinds> Campaigning<'_, I, K> {
    fn lock_delay(&self) -> Duration {
        Pace::new(&self.facts.timing).lock_delay()
    }

    fn began(&mut self, slot: u32, began: Option<Duration>) {
        if let Some(left) = began {
            self.notes.push(Note::LockDelay { slot, left });
        }
    }
}

impl<I: Moment, K: Kinds> campaign::Grounds<I, <K::Record as Record>::Key, K::ETag, K::ETag>
    for Campaigning<'_, I, K>
{
    fn seen(&self) -> Seen<I> {
        self.facts.seen(self.now, self.wall)
    }

    fn member(&self) -> bool {
        Known::<I, K>::MEMBER
    }

    fn draw(&mut self) -> f64 {
        (self.draw)()
    }

    fn begin(&mut self, slot: u32) {
        let reservation = self.kept.reservation.take();
        *self.kept = Kept {
            slot,
            id: Some(self.next_id.clone()),
            reservation,
            ..Kept::default()
        };
    }

    fn reserved(&mut self) -> Option<u64> {
        let reserved = self.facts.wakes.take_reserved()?;
        self.kept.reservation = Some(reserved.etag);
        Some(reserved.epoch)
    }

    fn delay(&mut self, slot: u32, delay: Delay) {
        let (now, lock_delay) = (self.now, self.lock_delay());
        let delays = &mut self.facts.delays;
        match delay {
            // Someone holds it, and may run a body: found missing later, the blob was deleted
            // under it, whatever the member records say then.
            Delay::Led => delays.led(slot, now),
            Delay::Missing => {
                let began = delays.missing(slot, now, lock_delay);
                self.began(slot, began);
            }
            Delay::Over => delays.over(slot, now),
            Delay::Won => delays.won(slot, now),
        }
    }

    fn authorized(&mut self) {
        self.facts.authorized = true;
    }

    fn late_sent(&self) -> Option<I> {
        self.facts.late
    }

    fn epoch_seen(&self) -> Option<u64> {
        self.facts.epoch_seen
    }
}

impl<I: Moment, K: Kinds> attempt::Grounds for Campaigning<'_, I, K> {
    fn counts_otherwise(&mut self) -> bool {
        // Slot 0 was free (or handed to us): its last count stands only while a live member
        // still counts it (`Line::counts_otherwise`).
        let recorded = self.kept.read.as_ref().and_then(LeaseBlob::count_recorded);
        let Some(n) = self.facts.line.counts_otherwise(recorded) else {
            return false;
        };
        self.facts.note_count(true, recorded, self.notes);
        self.notes.push(Note::CountsOtherwise(n));
        true
    }

    fn pass_over(&mut self) {
        if let Some(read) = &self.kept.read {
            for passed in read.passed_over() {
                self.facts.line.pass_over(passed, self.now);
            }
        }
    }

    fn delayed(&mut self) -> bool {
        let Some(read) = &self.kept.read else {
            return false;
        };
        let (slot, look) = (self.kept.slot, read.look());
        let (now, lock_delay) = (self.now, self.lock_delay());
        let judged = self.facts.delays.before_epoch(slot, &look, now, lock_delay);
        self.began(slot, judged.began);
        judged.delayed
    }

    fn shutting_down(&self) -> bool {
        self.facts.shutdown
    }

    fn wall_ms(&mut self) -> u64 {
        self.kept.wall = Some(self.wall);
        self.wall_ms
    }
}

impl<I: Moment, K: Kinds> watch::Grounds<I, K::ETag> for Campaigning<'_, I, K> {
    fn is_successor(&mut self) -> bool {
        self.facts.line.is_successor(self.now, self.wall)
    }

    fn looked(&mut self) {
        let look = self.kept.blob.as_ref().map(LeaseBlob::look);
        let (now, lock_delay) = (self.now, self.lock_delay());
        let began = self.facts.delays.looked(0, look.as_ref(), now, lock_delay);
        self.began(0, began);
    }

    fn counts_otherwise(&mut self) -> bool {
        let Some(blob) = &self.kept.blob else {
            return false;
        };
        let (leased, recorded) = (blob.leased(), blob.count_recorded());
        self.facts.note_count(leased, recorded, self.notes)
    }

    fn read(&mut self, watch: &mut BlobWatch<I, K::ETag>, now: I) -> Read {
        let Some(blob) = &self.kept.blob else {
            return Read::Same;
        };
        watch.read(&mut self.facts.line, blob.watch_read(), now, self.wall)
    }

    fn has_ahead(&mut self) -> bool {
        let ahead = self.facts.line.ahead(self.now, self.wall);
        self.kept.ahead = ahead.cloned();
        self.kept.ahead.is_some()
    }

    fn ahead_advertises(&mut self) -> bool {
        self.has_ahead() && (self.kept.ahead.as_ref()).is_some_and(|a| a.advertise().is_some())
    }

    fn read_unheard(&mut self) -> bool {
        let Some(ahead) = &self.kept.ahead else {
            return false;
        };
        let timing = &self.facts.timing;
        let watch = Pace::new(timing).watch_longest();
        (self.facts.line).read_unheard(ahead, self.now, timing.request_timeout(), watch)
    }
}

impl<I: Moment, K: Kinds> PollGrounds for Campaigning<'_, I, K> {
    fn order(&mut self, listed: bool) -> Vec<u32> {
        let n = self.facts.slots;
        self.facts.line.slots_to_try(n, listed, self.refill_late)
    }

    fn delayed(&mut self, slot: u32) -> bool {
        self.facts.delays.until(slot, self.now).is_some()
    }

    fn look_due(&mut self, slot: u32) -> bool {
        let every = Pace::new(&self.facts.timing).watch_longest();
        self.facts.delays.look_due(slot, every, self.now)
    }

    fn mismatched(&mut self) -> bool {
        self.facts.count.mismatched()
    }
}

impl<I: Moment, K: Kinds> WaitGrounds<<K::Record as Record>::Key, K::ETag>
    for Campaigning<'_, I, K>
{
    fn predecessor(&mut self) -> Option<<K::Record as Record>::Key> {
        let line = &self.facts.line;
        line.predecessor(self.wall).map(K::key_of)
    }

    fn listed(&mut self, ahead: &<K::Record as Record>::Key) -> Option<K::ETag> {
        let line = &self.facts.line;
        let record = line.members.iter().find(|r| r.key() == ahead);
        record.map(|r| K::record_etag(r).clone())
    }

    fn place(&mut self) -> Place {
        self.facts.line.place(self.now, self.wall)
    }

    fn members(&mut self) -> usize {
        self.facts.line.members.len()
    }
}
