//! Slots: a semaphore of N (docs/slots.md). With `[lease].slots = N > 1`, up to N members lead at
//! once, each holding one slot lease: slot 0 is the group's blob, slot i the blob
//! `<blob>.slots/<i>`. Each slot is a lease of its own with its own epoch, kept and given up by the
//! one elector loop exactly as the single lease is (the safety model holds per slot); this module
//! owns what differs: which members poll and how, which slot a poller takes, and the check that
//! every instance of a group counts the same slots.
//!
//! Who polls: the first F members in line that hold no slot, F = max(1, free slots in the last
//! listing); each of their rounds (every jittered `acquire_interval`) tries the slots one by one
//! until one is won (N acquires at most), or, past [`ACQUIRE_ALL_UP_TO`](slots::ACQUIRE_ALL_UP_TO) slots, lists the group
//! once and tries the free ones. Everyone else watches the record of the member just ahead of
//! it among those that hold no slot (one read every `5 x acquire_interval`) and lists the group
//! only when that record changed (the member won a slot: its record publishes a new lease id)
//! or died: so that one listing per change, by the one member it concerns, moves the line on.
//! A member holds one slot at most: it campaigns only while it holds none, a round ends at its
//! first win, and an acquire without an answer keeps it out of every slot until that acquire
//! is settled (its late success released).
//!
//! The group's count is what slot 0 records (`leasehold_slots`, absent: 1) while it is leased:
//! an instance that counts otherwise does not campaign (one ERROR line naming both counts and
//! the key), and looks again every [`Pace::MISMATCH_RECHECK`].

use crate::elector::instance::Elector;
use crate::elector::members::{Place, round_order};
use crate::elector::observe::LeaseOp;
use crate::elector::term::Term;
use crate::fmt::human;
use crate::store::{ETag, Holder, LeaseState, LeaseStore, MemberKey, StoreError};
use leasehold_core::Pace;
use leasehold_core::slots::{
    self, CountChange, PollAction, PollEvent, PollGrounds, PollRequest, PollRound, WaitAction,
    WaitEvent, WaitGrounds, WaitRequest, WaitRound,
};
use tokio::time::Instant;

/// The count a blob's holder recorded (the core's [`slots::recorded`]): `None` on a blob no
/// leader ever wrote.
pub(crate) fn recorded_count(holder: Option<&Holder>) -> Option<u32> {
    slots::recorded(holder.is_some(), holder.and_then(|h| h.slots))
}

/// What the watch of a member waiting for a slot saw last: whose record, with which ETag.
pub(crate) type SlotWatch = slots::AheadWatch<MemberKey, crate::store::ETag>;

impl<S: LeaseStore> Elector<S> {
    /// Whether this instance's count differs from its group's (it does not campaign).
    pub(crate) fn mismatched(&self) -> bool {
        self.count().mismatched()
    }

    /// The group's count beside ours.
    pub(crate) fn count(&self) -> std::sync::MutexGuard<'_, slots::Count> {
        self.count.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether this instance counts the slots its group counts, from one read of slot 0 (the
    /// group's blob): the group's count is what its holder recorded, while it is leased. Logs
    /// one ERROR line when a mismatch begins, one INFO line when it ends.
    pub(crate) async fn check_count(&mut self) -> Result<bool, StoreError> {
        let limit = self.clock.now() + self.timing.request_timeout();
        let state = self.call(LeaseOp::Read, limit, self.store.read()).await?;
        self.authorized = true;
        Ok(self.note_count(state.lease, state.holder.as_ref()))
    }

    /// Takes what slot 0 says of the group's count; returns whether ours differs. Logs one
    /// ERROR line when a mismatch begins, one INFO line when it ends.
    pub(crate) fn note_count(&self, lease: LeaseState, holder: Option<&Holder>) -> bool {
        let recorded = recorded_count(holder);
        let change = self
            .count()
            .note(self.slots, recorded, lease == LeaseState::Leased);
        match change {
            CountChange::Began(recorded) => {
                self.observer.slot_mismatch(Some(recorded));
                tracing::error!(
                    configured = self.slots,
                    recorded,
                    "[lease].slots = {} here, but this group leads with slots = {recorded} \
                     (recorded on its blob by the leader of slot 0): this instance does not \
                     lead; set [lease].slots = {recorded} (or change every instance of the \
                     group, see docs/slots.md); looking again every {}",
                    self.slots,
                    human(Pace::MISMATCH_RECHECK)
                );
            }
            CountChange::Ended(was) => {
                self.observer.slot_mismatch(None);
                tracing::info!(
                    configured = self.slots,
                    was,
                    "the group's slot count now matches this instance's; campaigning"
                );
            }
            CountChange::Goes(_) | CountChange::Matches => {}
        }
        let mismatch = self.count().mismatch;
        if let Some(m) = &self.membership
            && (mismatch.is_some() || change != CountChange::Matches)
        {
            m.with(|l| l.mismatch = mismatch);
        }
        mismatch.is_some()
    }

    /// One poller's round ([`PollRound`], the core's: the slots one by one, free ones first,
    /// until one is won; past [`ACQUIRE_ALL_UP_TO`](slots::ACQUIRE_ALL_UP_TO) slots, one listing first and then only the
    /// free slots; a slot under a lock-delay seen to, not acquired). `Ok(None)`: all held. An
    /// error ends the round (an acquire without an answer keeps this instance out of every
    /// slot until it is settled).
    pub(crate) async fn poll_slots(&mut self) -> Result<Option<Term>, StoreError> {
        let mut round = PollRound::new(&self.timing, self.slots, self.membership.is_some());
        let refill_late = self.mutant.on(crate::mutant::Mutant::SlotRefillLate);
        let mut won = None;
        let mut event = PollEvent::Start;
        let clock = self.clock;
        loop {
            let mut grounds = Poller {
                elector: self,
                refill_late,
            };
            let request = match round.step(clock.now(), event, &mut grounds) {
                PollAction::Send(request) => request,
                PollAction::Done(end) => return end.map(|_| won),
            };
            event = match request {
                PollRequest::List { until } => {
                    let (store, observer) = (self.store.clone(), self.observer.clone());
                    let m = self.membership.as_ref();
                    let listed = match m {
                        Some(m) => m.list(&*store, &*observer, until).await.map(drop),
                        None => Ok(()),
                    };
                    PollEvent::Listed(listed)
                }
                PollRequest::Recreate(slot) => {
                    self.create_vanished(slot).await;
                    PollEvent::Recreated
                }
                PollRequest::Look(slot) => {
                    self.look_at_vanished_slot(slot).await;
                    PollEvent::Looked
                }
                PollRequest::Try(slot) => {
                    let tried = self.try_acquire_slot(slot).await;
                    PollEvent::Tried(tried.map(|term| {
                        won = term;
                        won.is_some()
                    }))
                }
            };
        }
    }

    /// Whether the member ahead, whose record has not changed, is a record whose process is gone:
    /// a probe of its URL with its wake token finds nothing there, or another process. Such a
    /// record is out of line from now on ([`Line::ghosts`](crate::elector::members::Line)), so
    /// that a waiting member does not wait for it to poll (docs/slots.md). A member without a
    /// URL, or one that does not answer in time (frozen, or its network slow), stands.
    async fn probe_ahead(&self, ahead: &MemberKey) -> bool {
        let Some(m) = &self.membership else {
            return false;
        };
        let Some(record) = m.with(|l| {
            l.succession
                .members
                .iter()
                .find(|r| &r.key == ahead)
                .cloned()
        }) else {
            return false;
        };
        let (Some(url), Some(token)) = (&record.member.advertise, &record.member.wake_token) else {
            return false;
        };
        match self.wake_sender.probe(url, token).await {
            crate::elector::wake::WakeSent::Refused
            | crate::elector::wake::WakeSent::Unreachable => {
                tracing::info!(
                    member = record.identity(),
                    "the member ahead in line is not the process its record names (its URL answers \
                     for another, or for none); passing its record over"
                );
                m.with(|l| {
                    l.succession
                        .ghosts
                        .insert(record.key.clone(), record.joined);
                });
                true
            }
            _ => false,
        }
    }

    /// One round of a member waiting for a slot that does not poll ([`WaitRound`], the core's:
    /// one read of the record of the member just ahead of it; when that record changed (that
    /// member won a slot, and published a new lease id) or its member died, one listing).
    /// Returns where this instance stands now.
    pub(crate) async fn watch_slots(&mut self, w: &mut SlotWatch) -> Result<Place, StoreError> {
        let Some(m) = &self.membership else {
            return Ok(Place::Poll);
        };
        let mut round = WaitRound::new(&self.timing);
        let mut event = WaitEvent::Start;
        loop {
            let mut next = None;
            let mut grounds = Waiter(m);
            for action in round.step(self.clock.now(), event, w, &mut grounds) {
                match action {
                    WaitAction::Send(request) => next = Some(self.send_waiting(request).await),
                    WaitAction::Authorized => self.authorized = true,
                    WaitAction::ShowLine => self.observer.line(&m.view()),
                    WaitAction::Done(place) => return place,
                }
            }
            // Each step ends with a request, or with the round's end.
            let unfinished = || StoreError::Client("a waiting round ended unfinished".into());
            event = next.ok_or_else(unfinished)?;
        }
    }

    /// Carries out a request of a waiting member's round.
    async fn send_waiting(
        &self,
        request: WaitRequest<Instant, MemberKey>,
    ) -> WaitEvent<ETag, StoreError> {
        match request {
            WaitRequest::List { until } => {
                let Some(m) = &self.membership else {
                    return WaitEvent::Listed(Ok(()));
                };
                WaitEvent::Listed(m.list(&*self.store, &*self.observer, until).await.map(drop))
            }
            WaitRequest::Read { ahead, until } => {
                tracing::trace!(ahead = %ahead, "reading the record of the member ahead");
                let read = self.store.read_member(&ahead);
                let read = self.call(LeaseOp::MemberRead, until, read).await;
                WaitEvent::Read(read.map(|(lease, etag)| (lease == LeaseState::Leased, etag)))
            }
            WaitRequest::Probe(ahead) => WaitEvent::Probed(self.probe_ahead(&ahead).await),
        }
    }
}

/// What a waiting member's round asks of the line.
struct Waiter<'a>(&'a crate::elector::members::Membership);

impl WaitGrounds<MemberKey, ETag> for Waiter<'_> {
    fn predecessor(&mut self) -> Option<MemberKey> {
        self.0.with(|l| l.predecessor())
    }

    fn listed(&mut self, ahead: &MemberKey) -> Option<ETag> {
        self.0.with(|l| {
            let r = l.succession.members.iter().find(|r| &r.key == ahead);
            r.map(|r| r.etag.clone())
        })
    }

    fn place(&mut self) -> Place {
        self.0.with(|l| l.place())
    }

    fn members(&mut self) -> usize {
        self.0.with(|l| l.succession.members.len())
    }
}

/// What a poller's round asks of the elector.
struct Poller<'a, S: LeaseStore> {
    elector: &'a Elector<S>,
    /// The mutant `slot-refill-late` (docs/testing.md).
    refill_late: bool,
}

impl<S: LeaseStore> PollGrounds for Poller<'_, S> {
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
