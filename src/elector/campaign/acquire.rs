//! One acquisition attempt and the epoch it leads with (rule 6): the acquire (a task of its own, so
//! that a request that gets no answer in time goes on, and settles in the background); the next
//! epoch (`leasehold_core::epoch`) written under the lease with `If-Match`, and only once that
//! write is confirmed is the term won. After a wake-up, what the epoch write needs goes out
//! beside the acquire (docs/succession.md, "The handoff"). A blob found deleted is created again
//! under the lock-delay (`vanish`).

use super::late::{LateAcquire, settle};
use super::slots::recorded_count;
use crate::clock;
use crate::elector::instance::Elector;
use crate::elector::keep::log_deadline;
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::elector::term::Term;
use crate::elector::vanish;
use crate::elector::wake::Reserved;
use crate::mutant::Mutant;
use crate::store::{BlobState, ETag, Failure, Holder, LeaseId, LeaseState, LeaseStore, StoreError};
use crate::timing::Deadline;
use leasehold_core::epoch;
use std::sync::Arc;
use time::OffsetDateTime;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

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
        let limit = clock::now() + self.timing.request_timeout();
        let store = self.store_of(slot).clone();
        match timed(&*self.observer, LeaseOp::Read, limit, store.read()).await {
            Ok(state) => self.vanished.looked(slot, Some(&state), &self.timing),
            Err(e) if e.failure() == Failure::Missing => {
                self.vanished.looked(slot, None, &self.timing)
            }
            Err(e) => tracing::debug!(error = %e, "could not look at the deleted lease blob"),
        }
    }

    /// Creates slot `slot`'s blob again, marked when this instance saw it led or other members
    /// are listed ([`vanish::create`]); whether it was marked.
    async fn recreate(&self, slot: u32) -> Result<bool, StoreError> {
        vanish::create(
            &*self.store,
            &**self.store_of(slot),
            &self.identity,
            self.vanished.was_led(slot),
            &self.timing,
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
        self.acquire_slot(slot, None).await
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
        let with = match reserved {
            Some(r) if self.slots == 1 => WithAcquire::ReservedEpoch(r),
            _ => WithAcquire::Read,
        };
        self.acquire_slot(0, Some(with)).await
    }

    async fn acquire_slot(
        &mut self,
        slot: u32,
        with: Option<WithAcquire>,
    ) -> Result<Option<Term>, StoreError> {
        let id = self.next_id;
        let sent = clock::now();
        let limit = sent + self.timing.request_timeout();
        let seconds = self.timing.lease_seconds();
        let store = self.store_of(slot).clone();
        let with = with.map(|with| self.send_with_acquire(&store, id, limit, with));
        // A task of its own, so that the request goes on when we stop waiting for it.
        let request = crate::spawn::spawn(async move { store.acquire(id, seconds).await });
        let acquired = self.await_acquire(slot, id, sent, limit, request).await?;
        // Any answer but a refusal proves the credentials; no answer proves nothing.
        match &acquired {
            Err(StoreError::Unreachable(_) | StoreError::TimedOut(_)) => {}
            Err(e) if e.failure() == Failure::Denied => {}
            _ => self.authorized = true,
        }
        match acquired {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Held => {
                // Someone holds it, and may run a body: found missing later, the blob was
                // deleted under it, whatever the member records say then (they may be gone
                // too: simulator seed 16491).
                self.vanished.led(slot);
                return Ok(None);
            }
            Err(e) if e.failure() == Failure::Missing && self.create_if_missing => {
                self.vanished.missing(slot, &self.timing);
                tracing::warn!(error = %e, "the lease blob is missing; creating it");
                let marked = self.recreate(slot).await?;
                match marked {
                    true => self.vanished.created(slot),
                    // A brand-new group's blob: no body ran on it.
                    false => self.vanished.fresh(slot),
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        }

        // We hold the lease since `sent`. The epoch must be confirmed before the stop deadline
        // of this very lease, or the child would have no time to run.
        let counted_from = match self.mutant.on(Mutant::DeadlineFromAnswer) {
            true => clock::now(),
            false => sent,
        };
        let deadline = Deadline::from_sent(counted_from, &self.timing);
        let (written, reserved) = match with {
            Some(SentWithAcquire::ReservedEpoch(holder, write)) => {
                self.reserved_epoch(slot, id, deadline, holder, write).await
            }
            Some(SentWithAcquire::Read(read)) => {
                let read = read.await.ok().and_then(Result::ok);
                (self.write_epoch(slot, id, deadline, read).await, false)
            }
            None => (self.write_epoch(slot, id, deadline, None).await, false),
        };
        // This id is spent: the next acquire goes out with a new one, which the member record
        // publishes only now, after the epoch (with slots, a member waiting behind this one
        // takes the record's change for this win: a listing that saw the new record saw the
        // epoch that names this instance the slot's holder).
        self.acquire_next_with(LeaseId::random());
        match written {
            Ok(None) => {
                // Another count of slots leads this group, or the blob is under a lock-delay:
                // no body, and the slot back at once.
                self.release_on(slot, id).await;
                Ok(None)
            }
            Ok(Some(Won { holder, etag })) => {
                log_deadline(&deadline, holder.epoch);
                self.vanished.won(slot);
                Ok(Some(Term {
                    slot,
                    lease: id,
                    epoch: holder.epoch,
                    deadline,
                    acquired_at: holder.acquired_at,
                    reserved,
                    etag,
                }))
            }
            Err(e) => {
                self.release_on(slot, id).await;
                Err(e)
            }
        }
    }

    /// Sends what goes beside an acquire of `id` on `store`, each in a task of its own.
    fn send_with_acquire(
        &self,
        store: &Arc<S>,
        id: LeaseId,
        limit: Instant,
        with: WithAcquire,
    ) -> SentWithAcquire {
        let observer = self.observer.clone();
        let store = store.clone();
        match with {
            WithAcquire::Read => SentWithAcquire::Read(crate::spawn::spawn(async move {
                timed(&*observer, LeaseOp::Read, limit, store.read()).await
            })),
            WithAcquire::ReservedEpoch(reserved) => {
                let holder = Holder {
                    identity: self.identity.clone(),
                    epoch: reserved.epoch,
                    acquired_at: crate::clock::wall(),
                    lease: Some(id),
                    slots: None,
                };
                SentWithAcquire::ReservedEpoch(
                    holder.clone(),
                    crate::spawn::spawn(async move {
                        let write = store.write_holder(id, &reserved.etag, &holder);
                        timed(&*observer, LeaseOp::WriteEpoch, limit, write).await
                    }),
                )
            }
        }
    }

    /// Waits for the acquire `request` of `id` on `slot`, sent at `sent`, until `limit`. No
    /// answer by then: the request goes on in the late acquire's task, which settles it, and
    /// the next acquire goes out with a new id. `Err` only then; the answer otherwise.
    async fn await_acquire(
        &mut self,
        slot: u32,
        id: LeaseId,
        sent: Instant,
        limit: Instant,
        mut request: JoinHandle<Result<(), StoreError>>,
    ) -> Result<Result<(), StoreError>, StoreError> {
        let started = Instant::now();
        let acquired =
            match tokio::time::timeout_at(clock::timer_instant(limit), &mut request).await {
                Ok(joined) => joined.unwrap_or_else(|e| {
                    Err(StoreError::Client(format!(
                        "the acquire request failed: {e}"
                    )))
                }),
                Err(_) => {
                    let e = StoreError::TimedOut(limit - sent);
                    self.observer
                        .lease_op(LeaseOp::Acquire, started.elapsed(), Some(&e));
                    self.acquire_next_with(LeaseId::random());
                    self.late = Some(LateAcquire {
                        sent,
                        settled: crate::spawn::spawn(settle(
                            self.store_of(slot).clone(),
                            self.observer.clone(),
                            self.timing,
                            id,
                            sent,
                            request,
                        )),
                    });
                    return Err(e);
                }
            };
        self.observer
            .lease_op(LeaseOp::Acquire, started.elapsed(), acquired.as_ref().err());
        Ok(acquired)
    }

    /// Whether the group counts other slots than this instance does, as slot 0 records it
    /// (`state` is `slot`'s blob; for another slot, slot 0 is read, cut at the term's
    /// `stop_at`): then no epoch is written, and the slot goes back.
    async fn counts_otherwise(
        &mut self,
        slot: u32,
        state: &BlobState,
        stop_at: Instant,
    ) -> Result<bool, StoreError> {
        if slot == 0 {
            // Slot 0 was free (or handed to us): its last count stands only while a live member
            // still counts it (`Line::counts_otherwise`).
            let recorded = recorded_count(state.holder.as_ref());
            let otherwise = (self.membership.as_ref())
                .and_then(|m| m.with(|l| l.succession.counts_otherwise(recorded)));
            if let Some(n) = otherwise {
                self.note_count(LeaseState::Leased, state.holder.as_ref());
                tracing::debug!(
                    recorded = n,
                    "released slot 0: the group counts other slots"
                );
                return Ok(true);
            }
        } else {
            let limit = (clock::now() + self.timing.request_timeout()).min(stop_at);
            let zero = self.call(LeaseOp::Read, limit, self.store.read()).await?;
            if self.note_count(zero.lease, zero.holder.as_ref()) {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The mutant `trust-the-notice` (docs/testing.md, "The simulator"; never switched on outside
    /// the simulator): a woken member that reads a handoff notice naming it leads at once, with the
    /// next epoch, without an acquire of its own and without writing that epoch.
    pub(super) async fn trust_the_notice(&mut self) -> Result<Option<Term>, StoreError> {
        let sent = clock::now();
        let limit = sent + self.timing.request_timeout();
        let state = self.call(LeaseOp::Read, limit, self.store.read()).await?;
        if state.successor.as_deref() != Some(self.identity.as_str()) {
            return self.try_acquire_handed(None).await;
        }
        let lease = self.next_id;
        self.acquire_next_with(LeaseId::random());
        Ok(Some(Term {
            slot: 0,
            lease,
            epoch: state
                .holder
                .map_or(1, |h| epoch::after(h.epoch).unwrap_or(u64::MAX)),
            deadline: Deadline::from_sent(sent, &self.timing),
            acquired_at: clock::wall(),
            reserved: false,
            etag: None,
        }))
    }

    /// The epoch reserved for us, written beside our acquire ([`Elector::try_acquire_handed`]):
    /// ours once that write is confirmed (rule 6); refused (the blob changed since the notice,
    /// or the lease was not ours when it arrived), the epoch is read and written after the
    /// acquire as without a reservation. The mutants `start-before-epoch` and
    /// `lead-on-the-reservation` lead without waiting for it. Also says whether the reserved
    /// epoch was the one written.
    async fn reserved_epoch(
        &mut self,
        slot: u32,
        id: LeaseId,
        deadline: Deadline,
        holder: Holder,
        write: JoinHandle<Result<ETag, StoreError>>,
    ) -> (Result<Option<Won>, StoreError>, bool) {
        let leads_at_once = self.mutant.on(Mutant::StartBeforeEpoch)
            || self.mutant.on(Mutant::LeadOnTheReservation);
        let written = match leads_at_once {
            true => Ok(None),
            false => write
                .await
                .unwrap_or_else(|e| Err(StoreError::Client(format!("the epoch write failed: {e}"))))
                .map(Some),
        };
        match written {
            Ok(etag) if clock::now() < deadline.stop_at => {
                tracing::debug!(
                    epoch = holder.epoch,
                    "wrote the epoch the handoff reserved for this instance"
                );
                // The notice that reserved it was a leader's epoch write: no lock-delay.
                self.vanished.over(slot);
                (Ok(Some(Won { holder, etag })), true)
            }
            Ok(_) => (
                Err(StoreError::TimedOut(deadline.stop_at - deadline.sent)),
                false,
            ),
            Err(e) => {
                tracing::debug!(error = %e, "the reserved epoch was not written; reading the blob");
                (self.write_epoch(slot, id, deadline, None).await, false)
            }
        }
    }

    /// Reads the last epoch and writes epoch + 1 under our lease on `slot`, conditional on the
    /// ETag read. `Ok(None)`: the group counts other slots than we do (slot 0 records it): no
    /// epoch written, and the caller gives the slot back.
    async fn write_epoch(
        &mut self,
        slot: u32,
        id: LeaseId,
        deadline: Deadline,
        read: Option<BlobState>,
    ) -> Result<Option<Won>, StoreError> {
        if let Some(state) = read {
            match self.write_epoch_on(slot, id, deadline, state).await {
                Err(e) if e.code() == Some("ConditionNotMet") => tracing::debug!(
                    "the blob changed after the read sent beside the acquire; reading it again"
                ),
                written => return written,
            }
        }
        let limit = (clock::now() + self.timing.request_timeout()).min(deadline.stop_at);
        let store = self.store_of(slot).clone();
        let state = self.call(LeaseOp::Read, limit, store.read()).await?;
        self.write_epoch_on(slot, id, deadline, state).await
    }

    /// Writes epoch + 1 over what `state` read, conditional on its ETag ([`Elector::write_epoch`]).
    async fn write_epoch_on(
        &mut self,
        slot: u32,
        id: LeaseId,
        deadline: Deadline,
        state: BlobState,
    ) -> Result<Option<Won>, StoreError> {
        if self
            .counts_otherwise(slot, &state, deadline.stop_at)
            .await?
        {
            return Ok(None);
        }
        // Members a handoff passed over are passed over here too (docs/safety.md, "Recovery from
        // anything").
        if let Some(m) = &self.membership
            && !state.passed_over.is_empty()
        {
            m.with(|l| state.passed_over.iter().for_each(|p| l.pass_over(p)));
        }
        if self.vanished.before_epoch(slot, &state, &self.timing) {
            return Ok(None);
        }
        let now = crate::clock::wall();
        let last = state.holder.as_ref().map(|h| h.epoch);
        let epoch = epoch::next(last, wall_ms(now)).ok_or_else(|| StoreError::BadMetadata {
            key: crate::store::META_EPOCH,
            value: last.unwrap_or_default().to_string(),
        })?;
        let holder = Holder {
            identity: self.identity.clone(),
            epoch,
            acquired_at: now,
            lease: Some(id),
            slots: leasehold_core::slots::to_record(self.slots),
        };
        // A shutdown that came while the acquire or this read was on its way: no epoch is
        // spent on a term that would run no body, and the lease goes back at once
        // (`Ok(None)`). An epoch reserved for us went out beside the acquire, before any
        // shutdown: that term is returned, and the campaign's caller releases it.
        if self
            .shutdown
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
        {
            tracing::info!(
                "shutting down: releasing the lease just acquired, before writing an epoch"
            );
            return Ok(None);
        }
        let limit = || (clock::now() + self.timing.request_timeout()).min(deadline.stop_at);
        let store = self.store_of(slot).clone();
        if self.mutant.on(Mutant::StartBeforeEpoch) {
            // The body starts while the write is on its way, whatever becomes of it.
            let (store, etag, written) = (store.clone(), state.etag.clone(), holder.clone());
            crate::spawn::spawn(async move { store.write_holder(id, &etag, &written).await });
            return Ok(Some(Won { holder, etag: None }));
        }
        let etag = self
            .call(
                LeaseOp::WriteEpoch,
                limit(),
                store.write_holder(id, &state.etag, &holder),
            )
            .await?;
        if clock::now() >= deadline.stop_at {
            return Err(StoreError::TimedOut(deadline.stop_at - deadline.sent));
        }
        Ok(Some(Won {
            holder,
            etag: Some(etag),
        }))
    }
}

/// An epoch written: the holder metadata, and the blob's ETag after it (`None` when not
/// known), which the term's handoff can carry to its successor.
struct Won {
    holder: Holder,
    etag: Option<ETag>,
}

/// What an acquire after a wake-up sends beside it ([`Elector::try_acquire_handed`]).
enum WithAcquire {
    /// The read the epoch write needs.
    Read,
    /// The epoch write of the epoch reserved for us.
    ReservedEpoch(Reserved),
}

/// A [`WithAcquire`] request on its way.
enum SentWithAcquire {
    Read(JoinHandle<Result<BlobState, StoreError>>),
    ReservedEpoch(Holder, JoinHandle<Result<ETag, StoreError>>),
}

/// The epoch of the first leadership of a blob that has none, at `now`
/// ([`leasehold_core::epoch::first`]).
#[cfg(test)]
pub(super) fn first_epoch(now: OffsetDateTime) -> u64 {
    epoch::first(wall_ms(now))
}

/// `now` in milliseconds since 1970 (0 before it).
fn wall_ms(now: OffsetDateTime) -> u64 {
    u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}
