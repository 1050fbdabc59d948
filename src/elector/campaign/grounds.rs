//! What the core's campaign asks of the elector it runs in ([`leasehold_core::campaign::Grounds`]
//! and the rounds' own), answered from the elector's state at the moment asked: the line, the
//! lock-delays, the group's count, the lease id, a shutdown, the wall clock, a random draw. Beside
//! them, what the store's answers left that the next questions and the term need ([`Kept`]).

use super::watch::read;
use crate::elector::instance::Elector;
use crate::elector::members::{Place, Standing, round_order};
use crate::store::{BlobState, ETag, Holder, LeaseId, LeaseStore, MemberKey, MemberRecord};
use leasehold_core::attempt::{self, Delay};
use leasehold_core::blob::LeaseBlob;
use leasehold_core::campaign::{self, Failed};
use leasehold_core::candidate::Seen;
use leasehold_core::slots::{PollGrounds, WaitGrounds};
use leasehold_core::watch::{self, BlobWatch, Read};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What the store's answers left that later questions, requests and the term need.
#[derive(Default)]
pub(super) struct Kept {
    /// The slot of the attempt on its way, and the lease id its acquire goes out with.
    pub(super) slot: u32,
    pub(super) id: Option<LeaseId>,
    /// The slot's blob as the attempt last read it: the epoch write is conditional on its ETag.
    pub(super) read: Option<BlobState>,
    /// The wall clock the epoch was drawn from: the term's acquisition time.
    pub(super) wall: Option<OffsetDateTime>,
    /// The ETag the handoff's notice left, which the reserved epoch's write is conditional on.
    pub(super) reservation: Option<ETag>,
    /// The epoch's holder metadata last sent, and the blob's ETag after it, once confirmed.
    pub(super) holder: Option<Holder>,
    pub(super) etag: Option<ETag>,
    /// The lease blob as a watcher's round just read it.
    pub(super) blob: Option<BlobState>,
    /// The member just ahead in line, as a watcher's round last listed it.
    pub(super) ahead: Option<MemberRecord>,
}

/// The elector a campaign runs in, as the campaign's grounds: what answers its questions and
/// carries out its requests, and what the store's answers left.
pub(super) struct ElectorGrounds<'a, S: LeaseStore> {
    pub(super) elector: &'a mut Elector<S>,
    pub(super) kept: Kept,
    /// The mutant `slot-refill-late` (docs/testing.md).
    pub(super) refill_late: bool,
}

impl<S: LeaseStore> ElectorGrounds<'_, S> {
    fn membership(&self) -> &crate::elector::members::Membership {
        (self.elector.membership.as_ref()).expect("a round that reads the line is a member's")
    }

    /// The lease id of the attempt on its way.
    pub(super) fn id(&self) -> LeaseId {
        self.kept.id.unwrap_or(self.elector.next_id)
    }

    /// The holder metadata of `epoch`, acquired at `acquired_at`.
    pub(super) fn holder_of(&self, epoch: u64, at: OffsetDateTime, slots: Option<u32>) -> Holder {
        Holder {
            identity: self.elector.identity.clone(),
            epoch,
            acquired_at: at,
            lease: Some(self.id()),
            slots,
        }
    }
}

impl<S: LeaseStore> campaign::Grounds<Instant, MemberKey, ETag, ETag> for ElectorGrounds<'_, S> {
    fn seen(&self) -> Seen<Instant> {
        self.elector.seen()
    }

    fn draw(&mut self) -> f64 {
        fastrand::f64()
    }

    fn begin(&mut self, slot: u32) {
        let reservation = self.kept.reservation.take();
        self.kept = Kept {
            slot,
            id: Some(self.elector.next_id),
            reservation,
            ..Kept::default()
        };
    }

    fn reserved(&mut self) -> Option<u64> {
        let reserved = self.elector.waker.take_reserved()?;
        self.kept.reservation = Some(reserved.etag);
        Some(reserved.epoch)
    }

    fn delay(&mut self, slot: u32, delay: Delay) {
        let vanished = &self.elector.vanished;
        match delay {
            // Someone holds it, and may run a body: found missing later, the blob was deleted
            // under it, whatever the member records say then.
            Delay::Led => vanished.led(slot),
            Delay::Missing => vanished.missing(slot, &self.elector.timing),
            Delay::Over => vanished.over(slot),
            Delay::Won => vanished.won(slot),
        }
    }

    fn authorized(&mut self) {
        self.elector.authorized = true;
    }

    fn late_sent(&self) -> Option<Instant> {
        self.elector.late.as_ref().map(|late| late.sent)
    }
}

impl<S: LeaseStore> attempt::Grounds for ElectorGrounds<'_, S> {
    fn counts_otherwise(&mut self) -> bool {
        // Slot 0 was free (or handed to us): its last count stands only while a live member
        // still counts it (`Line::counts_otherwise`).
        let recorded = self.kept.read.as_ref().and_then(LeaseBlob::count_recorded);
        let otherwise = (self.elector.membership.as_ref())
            .and_then(|m| m.with(|l| l.succession.counts_otherwise(recorded)));
        let Some(n) = otherwise else {
            return false;
        };
        self.elector.note_count(true, recorded);
        tracing::debug!(
            recorded = n,
            "released slot 0: the group counts other slots"
        );
        true
    }

    fn pass_over(&mut self) {
        if let (Some(m), Some(read)) = (&self.elector.membership, &self.kept.read)
            && !read.passed_over.is_empty()
        {
            m.with(|l| read.passed_over.iter().for_each(|p| l.pass_over(p)));
        }
    }

    fn delayed(&mut self) -> bool {
        let Some(read) = &self.kept.read else {
            return false;
        };
        let e = &self.elector;
        e.vanished.before_epoch(self.kept.slot, read, &e.timing)
    }

    fn shutting_down(&self) -> bool {
        (self.elector.shutdown.as_ref()).is_some_and(CancellationToken::is_cancelled)
    }

    fn wall_ms(&mut self) -> u64 {
        let now = self.elector.clock.wall();
        self.kept.wall = Some(now);
        super::acquire::wall_ms(now)
    }
}

impl<S: LeaseStore> watch::Grounds<Instant, ETag> for ElectorGrounds<'_, S> {
    fn is_successor(&mut self) -> bool {
        self.membership().with(|l| l.is_successor())
    }

    fn looked(&mut self) {
        let e = &*self.elector;
        e.vanished.looked(0, self.kept.blob.as_ref(), &e.timing);
    }

    fn counts_otherwise(&mut self) -> bool {
        let Some(state) = &self.kept.blob else {
            return false;
        };
        self.elector
            .note_count(state.leased(), state.count_recorded())
    }

    /// (At the lease clock's now, which `read` reads itself.)
    fn read(&mut self, watch: &mut BlobWatch<Instant, ETag>, _now: Instant) -> Read {
        let Some(state) = &self.kept.blob else {
            return Read::Same;
        };
        self.membership().with(|l| read(watch, l, state))
    }

    fn has_ahead(&mut self) -> bool {
        self.kept.ahead = self.membership().with(|l| l.ahead().cloned());
        self.kept.ahead.is_some()
    }
}

impl<S: LeaseStore> PollGrounds for ElectorGrounds<'_, S> {
    fn order(&mut self, listed: bool) -> Vec<u32> {
        let (n, late) = (self.elector.slots, self.refill_late);
        match &self.elector.membership {
            Some(m) => m.with(|l| l.succession.slots_to_try(n, listed, late)),
            None => round_order(None, n),
        }
    }

    fn delayed(&mut self, slot: u32) -> bool {
        self.elector.vanished.until(slot).is_some()
    }

    fn look_due(&mut self, slot: u32) -> bool {
        let every = leasehold_core::Pace::new(&self.elector.timing).watch_longest();
        self.elector.vanished.look_due(slot, every)
    }

    fn mismatched(&mut self) -> bool {
        self.elector.mismatched()
    }
}

impl<S: LeaseStore> WaitGrounds<MemberKey, ETag> for ElectorGrounds<'_, S> {
    fn predecessor(&mut self) -> Option<MemberKey> {
        self.membership().with(|l| l.predecessor())
    }

    fn listed(&mut self, ahead: &MemberKey) -> Option<ETag> {
        self.membership().with(|l| {
            let r = l.succession.members.iter().find(|r| &r.key == ahead);
            r.map(|r| r.etag.clone())
        })
    }

    fn place(&mut self) -> Place {
        self.membership().with(|l| l.place())
    }

    fn members(&mut self) -> usize {
        self.membership().with(|l| l.succession.members.len())
    }
}

impl Failed for crate::store::StoreError {
    fn timed_out(span: Duration) -> Self {
        Self::TimedOut(span)
    }

    fn last_epoch(last: u64) -> Self {
        Self::BadMetadata {
            key: crate::store::META_EPOCH,
            value: last.to_string(),
        }
    }
}

impl<S: LeaseStore> Elector<S> {
    /// What the campaign sees now: reads of shared state without side effects.
    pub(super) fn seen(&self) -> Seen<Instant> {
        let (member, in_line) = match &self.membership {
            Some(m) => (
                true,
                m.with(|l| {
                    l.succession.standing == Standing::Joined && l.succession.listed.is_some()
                }),
            ),
            None => (false, false),
        };
        Seen {
            late: self.late.is_some(),
            lock_delay: self.vanished.until(0),
            mismatched: self.mismatched(),
            authorized: self.authorized,
            member,
            in_line,
            place: self.place(),
            leader_unknown: self.leader_unknown(),
        }
    }

    /// Whether this instance is a member that has not yet read who leads.
    fn leader_unknown(&self) -> bool {
        self.membership
            .as_ref()
            .is_some_and(|m| m.with(|l| l.succession.leader.is_none()))
    }

    /// Where this instance stands now: the successor (or an instance without a line) polls,
    /// the others watch.
    pub(super) fn place(&self) -> Place {
        match &self.membership {
            Some(m) => m.with(|l| l.place()),
            None => Place::Poll,
        }
    }
}
