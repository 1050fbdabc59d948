//! The campaign's acquisition attempts: on a slot, or after a wake-up with what the epoch write
//! needs beside the acquire (docs/succession.md, "The handoff"); each one is
//! [`leasehold_core::attempt`]'s, driven by `attempt` (rule 6: the term is won only once its
//! epoch is confirmed under the lease). A blob found deleted is created again under the
//! lock-delay (`vanish`).

use crate::elector::instance::Elector;
use crate::elector::observe::LeaseOp;
use crate::elector::term::Term;
use crate::elector::vanish;
use crate::elector::wake::Reserved;
use crate::store::{Failure, LeaseStore, StoreError};
use crate::timing::Deadline;
use leasehold_core::attempt::Beside;
use leasehold_core::epoch;
use time::OffsetDateTime;

impl<S: LeaseStore> Elector<S> {
    /// Creates the blob of `slot` again if this instance found it gone and does not know it to
    /// exist again: at once, so that its lock-delay (which counts from its creation for the
    /// members that find it marked) is not started only once this instance's own is over.
    /// Failures are left to the campaign's next attempts.
    pub(crate) async fn create_vanished(&self, slot: u32) {
        if !self.create_if_missing || !self.vanished.to_create(slot) {
            return;
        }
        let created = self.recreate(slot).await;
        match created {
            Ok(true) => self.vanished.created(slot),
            Ok(false) => self.vanished.fresh(slot),
            Err(e) => tracing::debug!(error = %e, slot, "could not create the deleted blob again"),
        }
    }

    /// A look at slot 0's blob during its lock-delay: deleted again, the lock-delay begins
    /// again now (and the blob is created again by the next step); created again by another
    /// member since, it runs from then; an epoch on it ends it (whoever wrote it waited it out).
    /// A failed read changes nothing: the delay runs on, and the next look tries again.
    pub(crate) async fn look_at_vanished(&mut self) {
        self.look_at_vanished_slot(0).await;
    }

    /// [`Elector::look_at_vanished`] for the blob of `slot`.
    pub(crate) async fn look_at_vanished_slot(&self, slot: u32) {
        let limit = self.clock.now() + self.timing.request_timeout();
        let store = self.store_of(slot).clone();
        match self.call(LeaseOp::Read, limit, store.read()).await {
            Ok(state) => self.vanished.looked(slot, Some(&state), &self.timing),
            Err(e) if e.failure() == Failure::Missing => {
                self.vanished.looked(slot, None, &self.timing)
            }
            Err(e) => tracing::debug!(error = %e, "could not look at the deleted lease blob"),
        }
    }

    /// Creates slot `slot`'s blob again, marked when this instance saw it led or other members
    /// are listed ([`vanish::create`]); whether it was marked.
    pub(super) async fn recreate(&self, slot: u32) -> Result<bool, StoreError> {
        vanish::create(
            &*self.store,
            &**self.store_of(slot),
            &self.identity,
            self.vanished.was_led(slot),
            &self.timing,
            self.clock,
            &*self.observer,
        )
        .await
    }

    /// One acquisition attempt. `Ok(None)`: someone else holds the lease. An attempt that gets
    /// no answer within the request timeout returns [`StoreError::TimedOut`] and is left to
    /// settle in the background (a `LateAcquire`); [`Elector::campaign`] waits for that
    /// before its next attempt.
    pub(crate) async fn try_acquire(&mut self) -> Result<Option<Term>, StoreError> {
        self.try_acquire_slot(0).await
    }

    /// One acquisition attempt on slot `slot` (0: the group's blob), as [`Elector::try_acquire`].
    pub(crate) async fn try_acquire_slot(&mut self, slot: u32) -> Result<Option<Term>, StoreError> {
        self.attempt(slot, Beside::Nothing, None).await
    }

    /// An acquisition attempt after a wake-up, which most likely finds the lease handed to us.
    /// What the epoch write needs goes out beside the acquire instead of after it, which saves
    /// a round trip of the handover:
    ///
    /// * With the epoch the handoff `reserved` for us (docs/succession.md, "The handoff"), the
    ///   epoch write itself: under our own lease id, which is the active one once the lease was
    ///   changed to it, and conditional on the blob's ETag being the one the notice left. It goes
    ///   through only if nothing wrote the blob since, so the epoch is the last one + 1; and it
    ///   changes the ETag, so that the old leader can no longer hand the lease on to the next
    ///   member (its `change` is conditional on the ETag it left): either we lead or the next one
    ///   does, never both (docs/safety.md, "Recovery from anything"). Refused, the epoch is written
    ///   as without it.
    /// * Without, the read the epoch write is conditional on: a read taken before the acquire
    ///   landed serves only if nothing wrote the blob since (if something did, the blob is read
    ///   again).
    ///
    /// A wake-up carries no authority: a refused acquire only wasted a request, and we never
    /// lead without our own acquire.
    pub(crate) async fn try_acquire_handed(
        &mut self,
        reserved: Option<Reserved>,
    ) -> Result<Option<Term>, StoreError> {
        match reserved {
            Some(r) if self.slots == 1 => {
                (self.attempt(0, Beside::ReservedEpoch(r.epoch), Some(r.etag))).await
            }
            _ => self.attempt(0, Beside::Read, None).await,
        }
    }

    /// The mutant `trust-the-notice` (docs/testing.md, "The simulator"; never switched on outside
    /// the simulator): a woken member that reads a handoff notice naming it leads at once, with the
    /// next epoch, without an acquire of its own and without writing that epoch.
    pub(super) async fn trust_the_notice(&mut self) -> Result<Option<Term>, StoreError> {
        let sent = self.clock.now();
        let limit = sent + self.timing.request_timeout();
        let state = self.call(LeaseOp::Read, limit, self.store.read()).await?;
        if state.successor.as_deref() != Some(self.identity.as_str()) {
            return self.try_acquire_handed(None).await;
        }
        let lease = self.next_id;
        self.acquire_next_with(self.new_lease_id());
        Ok(Some(Term {
            slot: 0,
            lease,
            epoch: state
                .holder
                .map_or(1, |h| epoch::after(h.epoch).unwrap_or(u64::MAX)),
            deadline: Deadline::from_sent(sent, &self.timing),
            acquired_at: self.clock.wall(),
            reserved: false,
            etag: None,
        }))
    }
}

/// The epoch of the first leadership of a blob that has none, at `now`
/// ([`leasehold_core::epoch::first`]).
#[cfg(test)]
pub(super) fn first_epoch(now: OffsetDateTime) -> u64 {
    epoch::first(wall_ms(now))
}

/// `now` in milliseconds since 1970 (0 before it).
pub(super) fn wall_ms(now: OffsetDateTime) -> u64 {
    u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}
