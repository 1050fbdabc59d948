//! An in-memory [`LeaseStore`] for unit tests: Azure's lease rules on tokio time, plus scripted
//! faults (delay, failure, hang) per operation. Integration tests use a real Azurite instead.
//!
//! For the simulator it also models what a storage account goes through: a blob deleted (and
//! created again by `prepare`), metadata no leader wrote, a service clock that runs faster than
//! its clients' ([`server_clock_ppm`]), and, per client, a network ([`Network`]) that says how
//! long each request travels each way and what becomes of it. On such a network a request is
//! applied by a task of the store's own, once it has arrived, whatever became of its sender
//! meanwhile (a crashed client's request still lands); its answer may be late or lost.

pub use super::Op;
use super::{
    BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, LeaseStore, Member, MemberKey,
    MemberRecord, Notice, Reservation, SlotRecord, StoreError,
};
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// How the store answers one kind of operation.
#[derive(Debug, Clone)]
pub enum Behaviour {
    /// Apply the operation at once and answer at once.
    Normal,
    /// Apply the operation when the request arrives, answer after this long (a slow network).
    SlowAnswer(Duration),
    /// Do not apply; answer with this error.
    Fail(StoreError),
    /// Never answer (a blackholed connection).
    Hang,
}

thread_local! {
    /// How much faster than tokio's clock the service's clock runs, in parts per million.
    static SERVER_PPM: Cell<u32> = const { Cell::new(0) };
}

/// From now on (on this thread), the service's clock runs `ppm` parts per million faster than
/// its clients' (tokio's): a lease of `L` ends `L * ppm / 1e6` early by their clocks, as when
/// the storage service's clock rate differs from the machine's. The safety margin `M` covers
/// such a drift (design section 4). 0: the same rate.
pub(crate) fn server_clock_ppm(ppm: u32) {
    SERVER_PPM.with(|c| c.set(ppm));
}

/// `d` on the service's clock, as tokio's clock measures it.
fn on_server_clock(d: Duration) -> Duration {
    match SERVER_PPM.with(Cell::get) {
        0 => d,
        ppm => d.mul_f64(1e6 / (1e6 + f64::from(ppm))),
    }
}

/// What becomes of one request on a simulated client's network (see [`Network`]).
#[derive(Debug, Clone)]
pub(crate) enum Fate {
    /// It arrives and is applied; its answer comes back.
    Deliver,
    /// It arrives and is applied; its answer is lost (the client waits until it gives up).
    LoseAnswer,
    /// It is refused with this error, unapplied, after travelling both ways (a 503, a
    /// connection refused).
    Refuse(StoreError),
    /// It never arrives and nothing comes back (a blackholed connection).
    Hang,
}

/// One request's trip over a simulated network.
#[derive(Debug, Clone)]
pub(crate) struct Trip {
    /// How long it travels to the service.
    pub up: Duration,
    /// How long its answer travels back.
    pub down: Duration,
    pub fate: Fate,
}

/// A simulated client's network: the simulator decides each request's trip, and hears what the
/// service did and what its client heard.
pub(crate) trait Network: Send + Sync {
    /// The trip of the next request, `op` (naming lease `id`).
    fn trip(&self, op: Op, id: Option<LeaseId>) -> Trip;
    /// The service applied `op`, which the client sent at `sent`: `outcome` is `Ok` or the
    /// error the service answered; `epoch`: the epoch the blob records after it.
    fn applied(
        &self,
        op: Op,
        id: Option<LeaseId>,
        sent: Instant,
        outcome: Result<(), &StoreError>,
        epoch: Option<u64>,
    );
    /// The client heard the answer to `op`, sent at `sent`.
    fn answered(
        &self,
        op: Op,
        id: Option<LeaseId>,
        sent: Instant,
        outcome: Result<(), &StoreError>,
    );
}

#[derive(Clone, Copy)]
struct Lease {
    id: LeaseId,
    expires: Instant,
    length: Duration,
}

/// The lease of one blob (the lease blob, a slot blob or a member record), with Azure's rules:
/// the last lease granted, which holds until it expires.
#[derive(Clone, Copy, Default)]
struct BlobLease(Option<Lease>);

impl BlobLease {
    /// The lease while it has not expired.
    fn active(&self) -> Option<Lease> {
        self.0.filter(|l| l.expires > Instant::now())
    }

    /// As a listing or a read shows it.
    fn state(&self) -> LeaseState {
        if self.active().is_some() {
            LeaseState::Leased
        } else {
            LeaseState::Available
        }
    }

    fn grant(&mut self, id: LeaseId, length: Duration) {
        self.0 = Some(Lease {
            id,
            expires: Instant::now() + on_server_clock(length),
            length,
        });
    }

    /// Acquire Lease with a proposed id: refused while a lease of another id is active.
    fn acquire(&mut self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        match self.active() {
            Some(l) if l.id != id => Err(conflict("LeaseAlreadyPresent")),
            _ => {
                self.grant(id, Duration::from_secs(u64::from(seconds)));
                Ok(())
            }
        }
    }

    /// Renew Lease. Azure lets an expired lease be renewed while nobody re-acquired it.
    fn renew(&mut self, id: LeaseId) -> Result<(), StoreError> {
        match &mut self.0 {
            Some(l) if l.id == id => {
                l.expires = Instant::now() + on_server_clock(l.length);
                Ok(())
            }
            _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
        }
    }

    /// A write under lease `id` goes through only while `id` is the active lease.
    fn admits_write(&self, id: LeaseId) -> Result<(), StoreError> {
        if self.active().is_some_and(|l| l.id == id) {
            Ok(())
        } else {
            Err(precondition("LeaseIdMismatchWithBlobOperation"))
        }
    }
}

#[derive(Default)]
struct Blob {
    /// Deleted: every request on it is answered 404 until `prepare` creates it again (its
    /// member records are blobs of their own, and stay).
    missing: bool,
    lease: BlobLease,
    broken: bool,
    /// A metadata key no leader wrote (`leasehold_epoch = "x"`, say): reading the holder fails
    /// on it until a leader's write replaces the metadata, or it is repaired.
    garbage: Option<(&'static str, String)>,
    holder: Option<Holder>,
    /// The handoff notice.
    successor: Option<String>,
    /// The members that notice passes over.
    passed_over: Vec<String>,
    /// The epoch that notice reserves for the successor.
    reserved: Option<Reservation>,
    /// Who created the blob again after a deletion (until a leader writes an epoch).
    recreated: Option<String>,
    /// When it was created again, by the store's clock (whole seconds).
    created: Option<OffsetDateTime>,
    etag: u64,
    /// The member records beside it.
    members: BTreeMap<MemberKey, Record>,
    /// Writes to member records so far: each gets an ETag of its own, as the service's are
    /// unique (a record created again never shows the ETag its predecessor had).
    record_writes: u64,
}

/// A member record.
struct Record {
    member: Member,
    lease: BlobLease,
    created: OffsetDateTime,
    etag: u64,
}

/// What every client of one blob sees: the blob, the faults scripted on it, the requests it got.
#[derive(Default)]
struct Shared {
    blob: Mutex<Blob>,
    behaviour: Mutex<HashMap<Op, Behaviour>>,
    calls: Mutex<Vec<(Op, Instant, Option<LeaseId>)>>,
    /// The instant of the first record created: the store's wall clock for creation times
    /// starts there.
    epoch: OnceLock<Instant>,
    /// The blobs of slots 1.. (`<blob>.slots/<i>`), each shared as this one is, made at first
    /// use.
    slots: Mutex<BTreeMap<u32, Arc<Shared>>>,
}

impl Shared {
    /// Slot `slot`'s state as a listing shows it (`None`: deleted).
    fn slot_record(&self, slot: u32) -> Option<SlotRecord> {
        let b = self.blob.lock().unwrap();
        (!b.missing).then(|| slot_record(slot, &b))
    }
}

/// One client's own connection to the blob (its clients of the slot blobs share it).
#[derive(Default)]
struct Connection {
    /// How late its answers arrive; `None`: at once, without yielding.
    delay: Option<Duration>,
    /// The requests it sent, in order.
    sent: Mutex<Vec<Op>>,
    /// Cut off: every request fails as unreachable, without reaching storage.
    cut: AtomicBool,
    /// A simulated network, which decides each request's trip (then `delay` and the scripted
    /// behaviours do not apply).
    network: Option<Arc<dyn Network>>,
}

/// A lease blob in memory, with Azure's lease rules on tokio's clock (so that leases expire on
/// paused time too), and faults scripted per kind of request ([`MemoryStore::set`]). For
/// testing leader code: give it to [`Elector::with_store`](crate::Elector::with_store).
#[derive(Default)]
pub struct MemoryStore {
    shared: Arc<Shared>,
    connection: Arc<Connection>,
}

impl MemoryStore {
    /// From now on, requests of kind `op` behave as `b`.
    pub fn set(&self, op: Op, b: Behaviour) {
        self.shared.behaviour.lock().unwrap().insert(op, b);
    }

    /// The instants at which requests of kind `op` arrived.
    pub fn calls(&self, op: Op) -> Vec<Instant> {
        self.requests(op).map(|(at, _)| at).collect()
    }

    /// The lease ids of the requests of kind `op` (acquire, renew, release), in arrival order.
    pub fn ids(&self, op: Op) -> Vec<LeaseId> {
        self.requests(op).filter_map(|(_, id)| id).collect()
    }

    /// The requests of kind `op` so far: when each arrived, and the lease id it named.
    fn requests(&self, op: Op) -> impl Iterator<Item = (Instant, Option<LeaseId>)> {
        let calls = self.shared.calls.lock().unwrap().clone();
        calls
            .into_iter()
            .filter(move |(o, _, _)| *o == op)
            .map(|(_, at, id)| (at, id))
    }

    fn blob(&self) -> std::sync::MutexGuard<'_, Blob> {
        self.shared.blob.lock().unwrap()
    }

    /// The id of the lease held right now, if any.
    pub fn lease_id(&self) -> Option<LeaseId> {
        self.blob().lease.active().map(|l| l.id)
    }

    /// The blob is deleted (as by an operator or a lifecycle rule): no lease, no metadata,
    /// every request on it answered 404 until a `prepare` that may create it. Its member records
    /// stay.
    pub fn delete(&self) {
        let mut b = self.blob();
        let etag = b.etag + 1;
        let members = std::mem::take(&mut b.members);
        let record_writes = b.record_writes;
        *b = Blob::default();
        b.record_writes = record_writes;
        b.missing = true;
        b.etag = etag;
        b.members = members;
    }

    /// Whether the blob exists.
    pub fn exists(&self) -> bool {
        !self.blob().missing
    }

    /// Someone writes `value` under the metadata key `key` (one no leader would write: a
    /// leader's next epoch write replaces it, as does [`MemoryStore::repair`]).
    pub fn write_garbage(&self, key: &'static str, value: &str) {
        let mut b = self.blob();
        if !b.missing {
            b.garbage = Some((key, value.to_owned()));
            b.etag += 1;
        }
    }

    /// An operator removes the metadata key no leader wrote.
    pub fn repair(&self) {
        let mut b = self.blob();
        if b.garbage.take().is_some() {
            b.etag += 1;
        }
    }

    /// Someone deletes the record of `identity` (whoever holds its lease).
    pub fn delete_record(&self, identity: &str) -> bool {
        self.blob()
            .members
            .remove(&MemberKey::of(identity))
            .is_some()
    }

    /// The blob is deleted and created again, empty: no lease, no metadata.
    pub fn recreate(&self) {
        let mut b = self.blob();
        let etag = b.etag + 1;
        let members = std::mem::take(&mut b.members);
        let record_writes = b.record_writes;
        *b = Blob::default();
        b.record_writes = record_writes;
        b.etag = etag;
        b.members = members;
    }

    /// Someone writes the holder metadata directly (an operator, a tampering script).
    pub fn set_holder(&self, holder: Option<Holder>) {
        let mut b = self.blob();
        b.holder = holder;
        b.successor = None;
        b.reserved = None;
        b.etag += 1;
    }

    /// The holder metadata the last leader wrote.
    pub fn holder(&self) -> Option<Holder> {
        self.blob().holder.clone()
    }

    /// Whether anyone holds an unexpired lease right now.
    pub fn is_leased(&self) -> bool {
        self.blob().lease.active().is_some()
    }

    /// Another party acquires the lease (as after our lease expired).
    pub fn steal(&self, seconds: u64) {
        let mut b = self.blob();
        b.lease
            .grant(LeaseId::random(), Duration::from_secs(seconds));
        b.broken = false;
    }

    /// An admin breaks the lease with period 0.
    pub fn break_now(&self) {
        let mut b = self.blob();
        b.broken = true;
        b.lease = BlobLease::default();
    }

    /// The handoff notice on the lease blob, if any.
    pub fn successor(&self) -> Option<String> {
        self.blob().successor.clone()
    }

    /// The member records, as a listing would show them (in name order).
    pub fn members(&self) -> Vec<MemberRecord> {
        listing(&self.blob(), self.wall_now())
    }

    /// The record of `identity`, as a listing would show it.
    pub fn member(&self, identity: &str) -> Option<MemberRecord> {
        let b = self.blob();
        let key = MemberKey::of(identity);
        let date = self.wall_now();
        b.members.get(&key).map(|r| listed(&key, r, date))
    }

    /// The record of `identity` loses its lease, as when its member stopped renewing long ago.
    pub fn expire_member(&self, identity: &str) {
        let mut b = self.blob();
        if let Some(r) = b.members.get_mut(&MemberKey::of(identity)) {
            r.lease = BlobLease::default();
        }
    }

    /// Another client of the same blob: one instance's own connection to it. Its answers
    /// arrive `delay` late (each operation is applied when its request arrives, at once, as
    /// with [`Behaviour::SlowAnswer`], but only this client hears of it late: two electors, one
    /// on the store and one on a slow client, are a healthy and a slow instance of one group).
    /// It counts its requests ([`MemoryStore::sent`]), and can be cut off from storage.
    #[cfg(test)]
    pub(crate) fn client(&self, delay: Duration) -> Self {
        Self {
            shared: self.shared.clone(),
            connection: Arc::new(Connection {
                delay: Some(delay),
                ..Connection::default()
            }),
        }
    }

    /// Another client of the same blob, on the simulated network `network` (see [`Network`]).
    pub(crate) fn client_on(&self, network: Arc<dyn Network>) -> Self {
        Self {
            shared: self.shared.clone(),
            connection: Arc::new(Connection {
                network: Some(network),
                ..Connection::default()
            }),
        }
    }

    /// The requests this client sent so far (its slot clients' too).
    #[cfg(test)]
    pub(crate) fn sent(&self) -> Vec<Op> {
        self.connection.sent.lock().unwrap().clone()
    }

    /// Cut off from storage (`true`), or back: every request of this client (and of its slot
    /// clients) fails as unreachable, without reaching storage.
    #[cfg(test)]
    pub(crate) fn cut_off(&self, cut: bool) {
        self.connection.cut.store(cut, Ordering::SeqCst);
    }

    /// The creation time of a record created now: whole seconds, as the service reports it,
    /// from a fixed date on tokio's (paused) clock.
    fn wall_now(&self) -> OffsetDateTime {
        let start = *self.shared.epoch.get_or_init(Instant::now);
        let base = OffsetDateTime::from_unix_timestamp(1_700_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        base + time::Duration::seconds(Instant::now().duration_since(start).as_secs() as i64)
    }

    /// One request: sent over this client's connection, applied (or not) as scripted for `op`,
    /// answered as scripted and then as late as the connection is.
    async fn run<T: Send + 'static>(
        &self,
        op: Op,
        id: Option<LeaseId>,
        apply: impl FnOnce(&mut Blob) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let connection = &self.connection;
        if connection.cut.load(Ordering::SeqCst) {
            return Err(StoreError::Unreachable("cut off (test)".to_owned()));
        }
        if let Some(network) = &connection.network {
            connection.sent.lock().unwrap().push(op);
            return self.travel(network.clone(), op, id, apply).await;
        }
        connection.sent.lock().unwrap().push(op);
        self.shared
            .calls
            .lock()
            .unwrap()
            .push((op, Instant::now(), id));
        let b = self
            .shared
            .behaviour
            .lock()
            .unwrap()
            .get(&op)
            .cloned()
            .unwrap_or(Behaviour::Normal);
        let answer = match b {
            Behaviour::Normal => apply(&mut self.blob()),
            Behaviour::SlowAnswer(d) => {
                let r = apply(&mut self.blob());
                tokio::time::sleep(d).await;
                r
            }
            Behaviour::Fail(e) => Err(e),
            Behaviour::Hang => std::future::pending().await,
        };
        if let Some(delay) = connection.delay {
            tokio::time::sleep(delay).await;
        }
        answer
    }
}

impl MemoryStore {
    /// One request over a simulated network: it travels, is applied by a task of the store's
    /// own (so that it lands even if its sender is gone by then), and its answer travels back,
    /// unless the network says otherwise.
    async fn travel<T: Send + 'static>(
        &self,
        network: Arc<dyn Network>,
        op: Op,
        id: Option<LeaseId>,
        apply: impl FnOnce(&mut Blob) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let sent = Instant::now();
        let trip = network.trip(op, id);
        match &trip.fate {
            Fate::Refuse(e) => {
                tokio::time::sleep(trip.up + trip.down).await;
                network.answered(op, id, sent, Err(e));
                return Err(e.clone());
            }
            Fate::Hang => return std::future::pending().await,
            Fate::Deliver | Fate::LoseAnswer => {}
        }
        let (answer, answered) = tokio::sync::oneshot::channel();
        let (shared, service) = (self.shared.clone(), network.clone());
        // Not the sender's task: a request on the wire reaches the service whatever becomes of
        // its sender.
        tokio::spawn(async move {
            tokio::time::sleep(trip.up).await;
            shared.calls.lock().unwrap().push((op, Instant::now(), id));
            let (outcome, epoch) = {
                let mut blob = shared.blob.lock().unwrap();
                let outcome = apply(&mut blob);
                (outcome, blob.holder.as_ref().map(|h| h.epoch))
            };
            service.applied(op, id, sent, outcome.as_ref().map(drop), epoch);
            let _ = answer.send(outcome);
        });
        let Ok(outcome) = answered.await else {
            return std::future::pending().await;
        };
        if matches!(trip.fate, Fate::LoseAnswer) {
            return std::future::pending().await;
        }
        tokio::time::sleep(trip.down).await;
        network.answered(op, id, sent, outcome.as_ref().map(drop));
        outcome
    }
}

fn conflict(code: &str) -> StoreError {
    StoreError::Status {
        status: 409,
        code: Some(code.to_owned()),
    }
}

impl LeaseStore for MemoryStore {
    async fn prepare(&self, create: bool) -> Result<(), StoreError> {
        self.run(Op::Prepare, None, move |b| {
            if b.missing {
                if !create {
                    return Err(not_found());
                }
                b.missing = false;
                b.etag += 1;
            }
            Ok(())
        })
        .await
    }

    async fn acquire(&self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        self.run(Op::Acquire, Some(id), move |b| {
            present(b)?;
            b.lease.acquire(id, seconds)?;
            b.broken = false;
            Ok(())
        })
        .await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Renew, Some(id), move |b| {
            present(b)?;
            if b.broken {
                return Err(conflict("LeaseIsBrokenAndCannotBeRenewed"));
            }
            b.lease.renew(id)
        })
        .await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Release, Some(id), move |b| {
            match present(b).map(|()| b.lease.0)? {
                Some(l) if l.id == id => {
                    b.lease = BlobLease::default();
                    Ok(())
                }
                _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
            }
        })
        .await
    }

    async fn break_lease(&self, _period: Duration) -> Result<u64, StoreError> {
        self.break_now();
        Ok(0)
    }

    async fn read(&self) -> Result<BlobState, StoreError> {
        let date = self.wall_now();
        self.run(Op::Read, None, move |b| {
            present(b)?;
            if let Some((key, value)) = &b.garbage {
                return Err(StoreError::BadMetadata {
                    key,
                    value: value.clone(),
                });
            }
            Ok(BlobState {
                lease: b.lease.state(),
                holder: b.holder.clone(),
                etag: ETag(b.etag.to_string()),
                successor: b.successor.clone(),
                passed_over: b.passed_over.clone(),
                reserved: b.reserved,
                recreated: b.recreated.clone().filter(|_| b.holder.is_none()),
                age: b
                    .created
                    .and_then(|c| (date - c).try_into().ok())
                    .unwrap_or_default(),
            })
        })
        .await
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        self.run(Op::Read, None, move |b| {
            present(b)?;
            Ok(match b.lease.active() {
                Some(l) if l.id == id => LeaseCheck::Active,
                Some(_) => LeaseCheck::HeldByAnother,
                None => LeaseCheck::NotLeased,
            })
        })
        .await
    }

    async fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> Result<(), StoreError> {
        let (holder, etag) = (holder.clone(), etag.clone());
        self.run(Op::WriteEpoch, Some(id), move |b| {
            present(b)?;
            b.lease.admits_write(id)?;
            if etag.0 != b.etag.to_string() {
                return Err(precondition("ConditionNotMet"));
            }
            b.holder = Some(holder);
            b.garbage = None;
            b.successor = None;
            b.passed_over.clear();
            b.reserved = None;
            b.recreated = None;
            b.etag += 1;
            Ok(())
        })
        .await
    }

    async fn change(
        &self,
        id: LeaseId,
        proposed: LeaseId,
        if_match: Option<&ETag>,
    ) -> Result<(), StoreError> {
        let if_match = if_match.cloned();
        self.run(Op::Change, Some(id), move |b| {
            present(b)?;
            if if_match.is_some_and(|e| e.0 != b.etag.to_string()) {
                return Err(precondition("ConditionNotMet"));
            }
            if b.broken {
                return Err(conflict("LeaseIsBrokenAndCannotBeChanged"));
            }
            match &mut b.lease.0 {
                // Neither the ETag nor the lease clock changes.
                Some(l) if l.expires > Instant::now() && (l.id == id || l.id == proposed) => {
                    l.id = proposed;
                    Ok(())
                }
                Some(l) if l.expires > Instant::now() => {
                    Err(conflict("LeaseIdMismatchWithLeaseOperation"))
                }
                _ => Err(conflict("LeaseNotPresentWithLeaseOperation")),
            }
        })
        .await
    }

    async fn write_notice(
        &self,
        id: LeaseId,
        holder: &Holder,
        notice: &Notice,
        if_match: Option<&ETag>,
    ) -> Result<ETag, StoreError> {
        let (holder, notice, if_match) = (holder.clone(), notice.clone(), if_match.cloned());
        self.run(Op::Notice, Some(id), move |b| {
            present(b)?;
            b.lease.admits_write(id)?;
            if if_match.is_some_and(|e| e.0 != b.etag.to_string()) {
                return Err(precondition("ConditionNotMet"));
            }
            b.holder = Some(holder);
            b.garbage = None;
            b.recreated = None;
            b.passed_over = notice.passed_over;
            b.reserved = notice.reserved;
            b.successor = Some(notice.successor);
            b.etag += 1;
            Ok(ETag(b.etag.to_string()))
        })
        .await
    }

    async fn release_if(&self, id: LeaseId, etag: &ETag) -> Result<(), StoreError> {
        let etag = etag.clone();
        self.run(Op::Release, Some(id), move |b| {
            present(b)?;
            if etag.0 != b.etag.to_string() {
                return Err(precondition("ConditionNotMet"));
            }
            match b.lease.0 {
                Some(l) if l.id == id => {
                    b.lease = BlobLease::default();
                    Ok(())
                }
                _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
            }
        })
        .await
    }

    async fn recreate(&self, by: &str) -> Result<(), StoreError> {
        let (by, date) = (by.to_owned(), self.wall_now());
        self.run(Op::Prepare, None, move |b| {
            if b.missing {
                b.missing = false;
                b.created = Some(date);
                b.recreated = Some(by);
                b.etag += 1;
            }
            Ok(())
        })
        .await
    }

    fn slot(&self, slot: u32) -> Arc<Self> {
        let mut slots = self.shared.slots.lock().unwrap();
        Arc::new(Self {
            shared: slots.entry(slot).or_default().clone(),
            connection: self.connection.clone(),
        })
    }

    async fn read_member(&self, key: &MemberKey) -> Result<(LeaseState, ETag), StoreError> {
        let date = self.wall_now();
        let key = key.clone();
        self.run(Op::MemberRead, None, move |b| {
            let r = b.members.get(&key).ok_or_else(not_found)?;
            let m = listed(&key, r, date);
            Ok((m.lease, m.etag))
        })
        .await
    }

    async fn list_group(&self) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        // One request, counted (and scripted) as a listing.
        let date = self.wall_now();
        let shared = self.shared.clone();
        self.run(Op::List, None, move |b| {
            // A deleted slot blob is not listed.
            let mut slots: Vec<SlotRecord> = (!b.missing)
                .then(|| slot_record(0, b))
                .into_iter()
                .collect();
            let others = shared.slots.lock().unwrap();
            slots.extend(others.iter().filter_map(|(i, s)| s.slot_record(*i)));
            Ok((listing(b, date), slots))
        })
        .await
    }

    async fn list_members(&self) -> Result<Vec<MemberRecord>, StoreError> {
        let date = self.wall_now();
        self.run(Op::List, None, move |b| Ok(listing(b, date)))
            .await
    }

    async fn create_member(&self, key: &MemberKey, member: &Member) -> Result<(), StoreError> {
        let created = self.wall_now();
        let (key, member) = (key.clone(), member.clone());
        self.run(Op::MemberCreate, None, move |b| {
            if b.members.contains_key(&key) {
                return Err(conflict("BlobAlreadyExists"));
            }
            b.members.insert(
                key,
                Record {
                    member,
                    lease: BlobLease::default(),
                    created,
                    etag: {
                        b.record_writes += 1;
                        b.record_writes
                    },
                },
            );
            Ok(())
        })
        .await
    }

    async fn acquire_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        seconds: u8,
    ) -> Result<(), StoreError> {
        let key = key.clone();
        self.run(Op::MemberAcquire, Some(id), move |b| {
            record(b, &key)?.lease.acquire(id, seconds)
        })
        .await
    }

    async fn renew_member(&self, key: &MemberKey, id: LeaseId) -> Result<(), StoreError> {
        let key = key.clone();
        self.run(Op::MemberRenew, Some(id), move |b| {
            record(b, &key)?.lease.renew(id)
        })
        .await
    }

    async fn write_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        member: &Member,
    ) -> Result<(), StoreError> {
        let (key, member) = (key.clone(), member.clone());
        self.run(Op::MemberWrite, Some(id), move |b| {
            let r = record(b, &key)?;
            r.lease.admits_write(id)?;
            r.member = member;
            b.record_writes += 1;
            let etag = b.record_writes;
            let r = record(b, &key)?;
            r.etag = etag;
            Ok(())
        })
        .await
    }

    async fn delete_member(
        &self,
        key: &MemberKey,
        lease: Option<LeaseId>,
        etag: Option<&ETag>,
    ) -> Result<(), StoreError> {
        let (key, etag) = (key.clone(), etag.cloned());
        self.run(Op::MemberDelete, lease, move |b| {
            let r = record(b, &key)?;
            match (r.lease.active(), lease) {
                (Some(_), None) => return Err(precondition("LeaseIdMissing")),
                (Some(l), Some(id)) if l.id != id => {
                    return Err(precondition("LeaseIdMismatchWithBlobOperation"));
                }
                (None, Some(_)) => return Err(precondition("LeaseNotPresentWithBlobOperation")),
                _ => {}
            }
            if etag.is_some_and(|e| e.0 != r.etag.to_string()) {
                return Err(precondition("ConditionNotMet"));
            }
            b.members.remove(&key);
            Ok(())
        })
        .await
    }
}

/// The service's 404 for a deleted blob.
fn present(b: &Blob) -> Result<(), StoreError> {
    if b.missing { Err(not_found()) } else { Ok(()) }
}

/// The record `key`, or the service's 404 for it.
fn record<'a>(b: &'a mut Blob, key: &MemberKey) -> Result<&'a mut Record, StoreError> {
    b.members.get_mut(key).ok_or_else(not_found)
}

/// A slot blob as a listing shows it.
fn slot_record(slot: u32, b: &Blob) -> SlotRecord {
    SlotRecord {
        slot,
        lease: b.lease.state(),
        holder: b.holder.clone(),
        successor: b.successor.clone(),
    }
}

/// The member records as a listing shows them (in name order).
fn listing(b: &Blob, date: OffsetDateTime) -> Vec<MemberRecord> {
    b.members.iter().map(|(k, r)| listed(k, r, date)).collect()
}

/// A record as a listing shows it.
fn listed(key: &MemberKey, r: &Record, date: OffsetDateTime) -> MemberRecord {
    MemberRecord {
        key: key.clone(),
        member: r.member.clone(),
        joined: r.created,
        lease: r.lease.state(),
        etag: ETag(r.etag.to_string()),
        age: (date - r.created).try_into().unwrap_or_default(),
    }
}

fn not_found() -> StoreError {
    StoreError::Status {
        status: 404,
        code: Some("BlobNotFound".to_owned()),
    }
}

fn precondition(code: &str) -> StoreError {
    StoreError::Status {
        status: 412,
        code: Some(code.to_owned()),
    }
}
