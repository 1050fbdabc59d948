//! The driver of one acquisition attempt ([`leasehold_core::attempt`], which says what is sent
//! when and what each answer means, rule 6): it sends each request (the acquire, and what goes
//! beside it, in tasks of their own, so that an acquire that gets no answer in time goes on as
//! a late acquire), waits for the answer the attempt names, and answers its questions from the
//! elector (the line, the lock-delays, a shutdown, the wall clock).

use super::late::{LateAcquire, settle};
use crate::elector::instance::Elector;
use crate::elector::keep::log_deadline;
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::elector::term::Term;
use crate::mutant::Mutant;
use crate::store::{BlobState, ETag, Failure, Holder, LeaseId, LeaseState, LeaseStore, StoreError};
use leasehold_core::attempt::{
    Action, Attempt, Awaited, Beside, Delay, Event, GaveBack, Grounds, Mutants, Outcome, Request,
    Why,
};
use std::sync::Arc;
use time::OffsetDateTime;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The answer of a request that went beside the acquire, on its way.
enum BesideSent {
    Read(JoinHandle<Result<BlobState, StoreError>>),
    ReservedEpoch(JoinHandle<Result<ETag, StoreError>>),
}

/// One attempt on its way: the elector it runs in, and what its requests left.
pub(super) struct Driver<'a, S: LeaseStore> {
    elector: &'a mut Elector<S>,
    slot: u32,
    /// The lease id the acquire goes out with.
    id: LeaseId,
    sent: Instant,
    store: Arc<S>,
    acquire: Option<JoinHandle<Result<(), StoreError>>>,
    beside: Option<BesideSent>,
    /// The answer of the request sent last, awaited at once.
    answer: Option<Event<StoreError>>,
    /// The slot's blob as last read: the epoch write is conditional on its ETag.
    read: Option<BlobState>,
    /// The wall clock the epoch was drawn from: the term's acquisition time.
    wall: Option<OffsetDateTime>,
    /// The ETag the handoff's notice left, which the reserved epoch's write is conditional on.
    reservation: Option<ETag>,
    /// The epoch's holder metadata last sent, and the blob's ETag after it, once confirmed.
    holder: Option<Holder>,
    etag: Option<ETag>,
}

impl<S: LeaseStore> Elector<S> {
    /// One acquisition attempt on `slot` with `beside` going out beside the acquire
    /// (`Beside::ReservedEpoch` with the reservation's ETag).
    pub(super) async fn attempt(
        &mut self,
        slot: u32,
        beside: Beside,
        reserved_etag: Option<ETag>,
    ) -> Result<Option<Term>, StoreError> {
        let sent = self.clock.now();
        let mutants = Mutants {
            deadline_from_answer: self.mutant.on(Mutant::DeadlineFromAnswer),
            start_before_epoch: self.mutant.on(Mutant::StartBeforeEpoch),
            lead_on_the_reservation: self.mutant.on(Mutant::LeadOnTheReservation),
        };
        let attempt = Attempt::new(
            slot,
            sent,
            self.timing,
            beside,
            self.create_if_missing,
            mutants,
        );
        let driver = Driver {
            id: self.next_id,
            store: self.store_of(slot).clone(),
            elector: self,
            slot,
            sent,
            acquire: None,
            beside: None,
            answer: None,
            read: None,
            wall: None,
            reservation: reserved_etag,
            holder: None,
            etag: None,
        };
        driver.run(attempt).await
    }
}

impl<S: LeaseStore> Driver<'_, S> {
    async fn run(
        mut self,
        mut attempt: Attempt<Instant, StoreError>,
    ) -> Result<Option<Term>, StoreError> {
        let mut event = Event::Start;
        loop {
            let mut next = None;
            for action in attempt.step(self.elector.clock.now(), event, &mut self) {
                match action {
                    Action::Send(request) => self.send(request).await,
                    Action::Await(awaited) => next = Some(self.wait(awaited).await),
                    Action::SpendId => self.elector.acquire_next_with(self.elector.new_lease_id()),
                    Action::Delay(delay) => self.delay(delay),
                    Action::Done(outcome) => return self.end(outcome),
                }
            }
            // Each step ends with what to wait for, or with the attempt's end.
            event = next.ok_or_else(|| StoreError::Client("an attempt ended unfinished".into()))?;
        }
    }

    /// Sends `request`: the acquire and what goes beside it in tasks of their own; any other
    /// request is awaited at once, its answer kept for [`Awaited::Sent`].
    async fn send(&mut self, request: Request<Instant>) {
        let (id, store, observer) = (self.id, self.store.clone(), self.elector.observer.clone());
        let clock = self.elector.clock;
        let answer = match request {
            Request::Acquire => {
                let seconds = self.elector.timing.lease_seconds();
                self.acquire = Some(crate::spawn::spawn(async move {
                    store.acquire(id, seconds).await
                }));
                return;
            }
            Request::ReadBeside { until } => {
                self.beside = Some(BesideSent::Read(crate::spawn::spawn(async move {
                    timed(clock, &*observer, LeaseOp::Read, until, store.read()).await
                })));
                return;
            }
            Request::WriteReserved { epoch, until } => {
                let holder = self.holder_of(epoch, clock.wall(), None);
                let etag = self.reservation.take().unwrap_or_else(|| ETag::from(""));
                let written = holder.clone();
                self.holder = Some(holder);
                self.beside = Some(BesideSent::ReservedEpoch(crate::spawn::spawn(async move {
                    let write = store.write_holder(id, &etag, &written);
                    timed(clock, &*observer, LeaseOp::WriteEpoch, until, write).await
                })));
                return;
            }
            Request::Read { until } => self.read(until).await,
            Request::ReadCount { until } => self.read_count(until).await,
            Request::WriteEpoch { epoch, until } => self.write_epoch(epoch, until).await,
            Request::Recreate => {
                tracing::warn!(slot = self.slot, "the lease blob is missing; creating it");
                let recreated = self.elector.recreate(self.slot).await;
                match recreated {
                    Ok(true) => self.elector.vanished.created(self.slot),
                    // A brand-new group's blob: no body ran on it.
                    Ok(false) => self.elector.vanished.fresh(self.slot),
                    Err(_) => {}
                }
                Event::Recreated(recreated.map(drop))
            }
            Request::Release => {
                self.elector.release_on(self.slot, id).await;
                Event::Released
            }
        };
        self.answer = Some(answer);
    }

    /// Waits for the answer `awaited` names.
    async fn wait(&mut self, awaited: Awaited<Instant>) -> Event<StoreError> {
        match awaited {
            Awaited::Acquire(until) => self.wait_for_acquire(until).await,
            Awaited::Beside => match self.beside.take() {
                Some(BesideSent::Read(read)) => {
                    let read = read.await.unwrap_or_else(|e| Err(failed("read", &e)));
                    self.read_answer(read)
                }
                Some(BesideSent::ReservedEpoch(write)) => {
                    let written = write
                        .await
                        .unwrap_or_else(|e| Err(failed("epoch write", &e)));
                    self.reserved_answer(written)
                }
                None => Event::Written(Err(StoreError::Client(
                    "nothing went beside the acquire".into(),
                ))),
            },
            Awaited::Sent => (self.answer.take()).unwrap_or_else(|| {
                Event::Written(Err(StoreError::Client("no request was sent".into())))
            }),
        }
    }

    /// Waits for the acquire until `until`. No answer by then: the request goes on, and
    /// [`Outcome::NoAnswer`] leaves it to the late acquire's task.
    async fn wait_for_acquire(&mut self, until: Instant) -> Event<StoreError> {
        let started = Instant::now();
        let Some(request) = self.acquire.as_mut() else {
            return Event::Acquired(Err(StoreError::Client("no acquire was sent".into())));
        };
        let observer = &self.elector.observer;
        match tokio::time::timeout_at(self.elector.clock.timer_instant(until), request).await {
            Ok(joined) => {
                self.acquire = None;
                let acquired = joined.unwrap_or_else(|e| Err(failed("acquire", &e)));
                observer.lease_op(LeaseOp::Acquire, started.elapsed(), acquired.as_ref().err());
                // Any answer but a refusal proves the credentials; no answer proves nothing.
                match &acquired {
                    Err(StoreError::Unreachable(_) | StoreError::TimedOut(_)) => {}
                    Err(e) if e.failure() == Failure::Denied => {}
                    _ => self.elector.authorized = true,
                }
                Event::Acquired(acquired)
            }
            Err(_) => {
                let e = StoreError::TimedOut(until - self.sent);
                observer.lease_op(LeaseOp::Acquire, started.elapsed(), Some(&e));
                Event::NoAnswer
            }
        }
    }

    /// Reads the slot's blob after the acquire, cut at `until`.
    async fn read(&mut self, until: Instant) -> Event<StoreError> {
        let store = self.store.clone();
        let read = self.elector.call(LeaseOp::Read, until, store.read()).await;
        self.read_answer(read)
    }

    /// A read of the slot's blob: kept for the epoch write; its epoch to the attempt.
    fn read_answer(&mut self, read: Result<BlobState, StoreError>) -> Event<StoreError> {
        Event::Read(read.map(|state| {
            let epoch = state.holder.as_ref().map(|h| h.epoch);
            self.read = Some(state);
            epoch
        }))
    }

    /// The reserved epoch's write answered.
    fn reserved_answer(&mut self, written: Result<ETag, StoreError>) -> Event<StoreError> {
        match written {
            Ok(etag) => {
                let epoch = self.holder.as_ref().map(|h| h.epoch);
                tracing::debug!(
                    epoch,
                    "wrote the epoch the handoff reserved for this instance"
                );
                self.etag = Some(etag);
                Event::Written(Ok(()))
            }
            Err(e) => {
                tracing::debug!(error = %e, "the reserved epoch was not written; reading the blob");
                Event::Written(Err(e))
            }
        }
    }

    /// Reads slot 0 for the group's count (an attempt on another slot), cut at `until`.
    async fn read_count(&mut self, until: Instant) -> Event<StoreError> {
        let store = self.elector.store.clone();
        let zero = self.elector.call(LeaseOp::Read, until, store.read()).await;
        Event::Counted(zero.map(|zero| (self.elector).note_count(zero.lease, zero.holder.as_ref())))
    }

    /// Writes `epoch` under the lease, conditional on the ETag last read, cut at `until`
    /// (`None`: sent, not waited for).
    async fn write_epoch(&mut self, epoch: u64, until: Option<Instant>) -> Event<StoreError> {
        let wall = self.wall.unwrap_or_else(|| self.elector.clock.wall());
        let slots = leasehold_core::slots::to_record(self.elector.slots);
        let holder = self.holder_of(epoch, wall, slots);
        self.holder = Some(holder.clone());
        let etag = (self.read.as_ref()).map_or_else(|| ETag::from(""), |r| r.etag.clone());
        let (id, store) = (self.id, self.store.clone());
        let Some(until) = until else {
            crate::spawn::spawn(async move { store.write_holder(id, &etag, &holder).await });
            return Event::Written(Ok(()));
        };
        let write = store.write_holder(id, &etag, &holder);
        match self.elector.call(LeaseOp::WriteEpoch, until, write).await {
            Ok(etag) => {
                self.etag = Some(etag);
                Event::Written(Ok(()))
            }
            Err(e) => {
                if e.code() == Some("ConditionNotMet") {
                    tracing::debug!("the blob changed since it was read; reading it again");
                }
                Event::Written(Err(e))
            }
        }
    }

    fn holder_of(&self, epoch: u64, acquired_at: OffsetDateTime, slots: Option<u32>) -> Holder {
        Holder {
            identity: self.elector.identity.clone(),
            epoch,
            acquired_at,
            lease: Some(self.id),
            slots,
        }
    }

    fn delay(&mut self, delay: Delay) {
        let vanished = &self.elector.vanished;
        match delay {
            // Someone holds it, and may run a body: found missing later, the blob was deleted
            // under it, whatever the member records say then.
            Delay::Led => vanished.led(self.slot),
            Delay::Missing => vanished.missing(self.slot, &self.elector.timing),
            Delay::Over => vanished.over(self.slot),
            Delay::Won => vanished.won(self.slot),
        }
    }

    /// What the attempt came to, as the campaign takes it.
    fn end(self, outcome: Outcome<Instant, StoreError>) -> Result<Option<Term>, StoreError> {
        match outcome {
            Outcome::Won {
                deadline,
                epoch,
                reserved,
            } => {
                log_deadline(&deadline, epoch);
                let acquired_at = self
                    .holder
                    .map_or_else(|| self.elector.clock.wall(), |h| h.acquired_at);
                Ok(Some(Term {
                    slot: self.slot,
                    lease: self.id,
                    epoch,
                    deadline,
                    acquired_at,
                    reserved,
                    etag: self.etag,
                }))
            }
            Outcome::Held => Ok(None),
            Outcome::GaveBack(why) => {
                match why {
                    GaveBack::OtherCount => {}
                    GaveBack::LockDelay => {}
                    GaveBack::ShuttingDown => tracing::info!(
                        "shutting down: releasing the lease just acquired, before writing an epoch"
                    ),
                }
                Ok(None)
            }
            Outcome::NoAnswer => {
                let e = StoreError::TimedOut(self.elector.timing.request_timeout());
                if let Some(request) = self.acquire {
                    let settled = crate::spawn::spawn(settle(
                        self.elector.clock,
                        self.store,
                        self.elector.observer.clone(),
                        self.elector.timing,
                        self.id,
                        self.sent,
                        request,
                    ));
                    self.elector.late = Some(LateAcquire {
                        sent: self.sent,
                        settled,
                    });
                }
                Err(e)
            }
            Outcome::Failed(Why::Store(e)) => Err(e),
            Outcome::Failed(Why::PastStopDeadline(span)) => Err(StoreError::TimedOut(span)),
            Outcome::Failed(Why::LastEpoch(last)) => Err(StoreError::BadMetadata {
                key: crate::store::META_EPOCH,
                value: last.to_string(),
            }),
        }
    }
}

impl<S: LeaseStore> Grounds for Driver<'_, S> {
    fn counts_otherwise(&mut self) -> bool {
        // Slot 0 was free (or handed to us): its last count stands only while a live member
        // still counts it (`Line::counts_otherwise`).
        let holder = self.read.as_ref().and_then(|r| r.holder.as_ref());
        let recorded = super::slots::recorded_count(holder);
        let otherwise = (self.elector.membership.as_ref())
            .and_then(|m| m.with(|l| l.succession.counts_otherwise(recorded)));
        let Some(n) = otherwise else {
            return false;
        };
        self.elector.note_count(LeaseState::Leased, holder);
        tracing::debug!(
            recorded = n,
            "released slot 0: the group counts other slots"
        );
        true
    }

    fn pass_over(&mut self) {
        if let (Some(m), Some(read)) = (&self.elector.membership, &self.read)
            && !read.passed_over.is_empty()
        {
            m.with(|l| read.passed_over.iter().for_each(|p| l.pass_over(p)));
        }
    }

    fn delayed(&mut self) -> bool {
        let Some(read) = &self.read else {
            return false;
        };
        (self.elector.vanished).before_epoch(self.slot, read, &self.elector.timing)
    }

    fn shutting_down(&self) -> bool {
        (self.elector.shutdown.as_ref()).is_some_and(CancellationToken::is_cancelled)
    }

    fn wall_ms(&mut self) -> u64 {
        let now = self.elector.clock.wall();
        self.wall = Some(now);
        super::acquire::wall_ms(now)
    }
}

/// A request's task that ended without an answer (it panicked or was cancelled).
fn failed(what: &str, e: &tokio::task::JoinError) -> StoreError {
    StoreError::Client(format!("the {what} request failed: {e}"))
}
