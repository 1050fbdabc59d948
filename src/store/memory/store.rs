//! The in-memory store itself: its scripted faults and what tests look at, other clients of the
//! same blob, and how one request goes (scripted, late, or over a simulated network).

use super::network::{Fate, Network, ServiceClock};
use super::rules;
use super::state::{Behaviour, Blob, Connection, Shared};
#[cfg(test)]
use super::state::{listed, listing};
#[cfg(any(test, feature = "test-util"))]
use crate::store::blob::Holder;
use crate::store::blob::LeaseId;
use crate::store::error::StoreError;
#[cfg(any(test, feature = "test-util"))]
use crate::store::lease::GroupStore;
#[cfg(any(test, feature = "test-util"))]
use crate::store::member::Member;
use crate::store::member::MemberKey;
#[cfg(test)]
use crate::store::member::MemberRecord;
use crate::store::op::Op;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// A lease blob in memory, with Azure's lease rules on tokio's clock (so that leases expire on
/// paused time too), and faults scripted per kind of request ([`MemoryStore::set`]). For
/// testing leader code: give it to [`Elector::with_store`](crate::Elector::with_store).
#[derive(Default)]
pub struct MemoryStore {
    pub(super) shared: Arc<Shared>,
    pub(super) connection: Arc<Connection>,
}

/// A copy of a blob's metadata and marks ([`MemoryStore::copy`]).
#[cfg(any(test, feature = "test-util"))]
#[derive(Debug, Clone)]
pub(crate) struct BlobCopy {
    holder: Option<Holder>,
    stamp: leasehold_core::quorum::Stamp,
}

impl MemoryStore {
    /// A store whose service keeps its leases on `clock` (the default store's runs at its
    /// clients' rate).
    pub(crate) fn on(clock: ServiceClock) -> Self {
        Self {
            shared: Arc::new(Shared::on(clock)),
            connection: Arc::default(),
        }
    }

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
    pub(super) fn requests(&self, op: Op) -> impl Iterator<Item = (Instant, Option<LeaseId>)> {
        let calls = self.shared.calls.lock().unwrap().clone();
        calls
            .into_iter()
            .filter(move |(o, _, _)| *o == op)
            .map(|(_, at, id)| (at, id))
    }

    /// The shared state of slot `slot`'s blob (`<blob>.slots/<i>`), made at its first use.
    pub(super) fn slot_shared(&self, slot: u32) -> Arc<Shared> {
        let mut slots = self.shared.slots.lock().unwrap();
        let shared = slots.entry(slot).or_insert_with(|| {
            let shared = Shared::on(self.shared.clock());
            shared.blob.lock().unwrap().slot = slot;
            Arc::new(shared)
        });
        shared.clone()
    }

    pub(super) fn blob(&self) -> std::sync::MutexGuard<'_, Blob> {
        self.shared.blob.lock().unwrap()
    }

    /// The id of the lease held right now, if any.
    pub fn lease_id(&self) -> Option<LeaseId> {
        self.blob().lease.active(Instant::now()).map(|l| l.id)
    }

    /// The blob is deleted (as by an operator or a lifecycle rule): no lease, no metadata,
    /// every request on it answered 404 until a `prepare` that may create it. Its member records
    /// stay.
    pub fn delete(&self) {
        let mut b = self.blob();
        let etag = b.etag + 1;
        let members = std::mem::take(&mut b.members);
        let (record_writes, slot) = (b.record_writes, b.slot);
        *b = Blob::on(b.clock);
        (b.record_writes, b.slot) = (record_writes, slot);
        b.missing = true;
        b.etag = etag;
        b.members = members;
    }

    /// A brand-new group's blobs, the lease blob and those of slots 1 to `slots - 1`: none
    /// exists yet (a container no member used), until a `prepare` creates it plainly.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn unborn(&self, slots: u32) {
        self.delete();
        for slot in 1..slots {
            self.slot(slot).delete();
        }
    }

    /// Whether the blob exists.
    pub fn exists(&self) -> bool {
        !self.blob().missing
    }

    /// Someone writes `value` under the metadata key `key` (one no leader would write: a
    /// leader's next epoch write replaces it, as does [`MemoryStore::repair`]).
    pub(crate) fn write_garbage(&self, key: &'static str, value: &str) {
        let mut b = self.blob();
        if !b.missing {
            b.garbage = Some((key, value.to_owned()));
            b.etag += 1;
        }
    }

    /// An operator removes the metadata key no leader wrote.
    pub(crate) fn repair(&self) {
        let mut b = self.blob();
        if b.garbage.take().is_some() {
            b.etag += 1;
        }
    }

    /// `f` of each leased member record (in name order): its member, the id of the lease held
    /// on it (for the simulator: whose process holds it), and when it was created. (The
    /// simulator looks at the line at every listing: this builds no listing.)
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn map_leased_records<T>(
        &self,
        f: impl FnMut(&Member, LeaseId, OffsetDateTime) -> T,
    ) -> Vec<T> {
        self.map_leased_records_at(Instant::now(), f)
    }

    /// `f` of each member record leased at `now` (the synchronous simulator's clock).
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn map_leased_records_at<T>(
        &self,
        now: Instant,
        mut f: impl FnMut(&Member, LeaseId, OffsetDateTime) -> T,
    ) -> Vec<T> {
        let b = self.blob();
        // Room for every record at once: a list grown from the first few is copied on the way.
        let mut leased = Vec::with_capacity(b.members.len());
        leased.extend(b.members.values().filter_map(|r| {
            let lease = r.lease.active(now)?;
            Some(f(&r.member, lease.id, r.created))
        }));
        leased
    }

    /// Whether the record of `identity` is there and leased.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn has_live_record(&self, identity: &str) -> bool {
        self.has_live_record_at(identity, Instant::now())
    }

    /// Whether the record of `identity` is there and leased at `now`.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn has_live_record_at(&self, identity: &str, now: Instant) -> bool {
        self.blob()
            .members
            .get(&MemberKey::of(identity))
            .is_some_and(|r| r.lease.active(now).is_some())
    }

    /// What the record under `key` publishes, if it is there.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn published(&self, key: &MemberKey) -> Option<Member> {
        self.blob().members.get(key).map(|r| r.member.clone())
    }

    pub(crate) fn delete_record(&self, identity: &str) -> bool {
        self.blob()
            .members
            .remove(&MemberKey::of(identity))
            .is_some()
    }

    /// Stamps the blob as a replica of the set `fingerprint` with an id of its own, as its
    /// creation on a replica does (docs/quorum.md, *One replica set*): a replica prepared
    /// before the group's first start.
    pub fn stamp(&self, fingerprint: leasehold_core::quorum::Fingerprint) {
        self.blob().stamp = super::rules::stamp(fingerprint);
    }

    /// A copy of the blob as it is now (its metadata and marks, not its lease: a copy of a blob
    /// carries none), for [`MemoryStore::restore`].
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn copy(&self) -> Option<BlobCopy> {
        let b = self.blob();
        (!b.missing).then(|| BlobCopy {
            holder: b.holder.clone(),
            stamp: b.stamp,
        })
    }

    /// An old copy of the blob is restored over it (a replica rolled back, docs/quorum.md): its
    /// lease is gone, its metadata is the copy's (an older epoch), and it is a blob written
    /// anew at `date`, so that its age starts again. Its member records stay.
    #[cfg(any(test, feature = "test-util"))]
    pub(crate) fn restore(&self, copy: &BlobCopy, date: OffsetDateTime) {
        let mut b = self.blob();
        let etag = b.etag + 1;
        let members = std::mem::take(&mut b.members);
        let (record_writes, slot) = (b.record_writes, b.slot);
        *b = Blob::on(b.clock);
        (b.record_writes, b.slot, b.etag, b.members) = (record_writes, slot, etag, members);
        b.holder = copy.holder.clone();
        b.stamp = copy.stamp;
        b.created = Some(date);
    }

    /// The blob loses its lease and metadata (as if deleted and created again, empty, by
    /// someone who kept its creation time).
    pub fn recreate(&self) {
        let mut b = self.blob();
        let etag = b.etag + 1;
        let members = std::mem::take(&mut b.members);
        let record_writes = b.record_writes;
        let created = b.created;
        *b = Blob::on(b.clock);
        // (Its metadata lost, not a blob created anew: as old as it was.)
        b.created = created;
        b.record_writes = record_writes;
        b.etag = etag;
        b.members = members;
    }

    /// Someone writes the holder metadata directly (an operator, a tampering script).
    #[cfg(test)]
    pub(crate) fn set_holder(&self, holder: Option<Holder>) {
        let mut b = self.blob();
        b.holder = holder;
        b.successor = None;
        b.reserved = None;
        b.etag += 1;
    }

    /// The holder metadata the last leader wrote.
    #[cfg(test)]
    pub(crate) fn holder(&self) -> Option<Holder> {
        self.blob().holder.clone()
    }

    /// Whether anyone holds an unexpired lease right now.
    pub fn is_leased(&self) -> bool {
        self.blob().lease.active(Instant::now()).is_some()
    }

    /// Another party acquires the lease (as after our lease expired).
    pub fn steal(&self, seconds: u64) {
        let mut b = self.blob();
        let clock = b.clock;
        let length = Duration::from_secs(seconds);
        b.lease
            .grant(LeaseId::random(), length, clock, Instant::now());
        b.broken = false;
    }

    /// An admin breaks the lease with period 0.
    pub fn break_now(&self) {
        rules::break_lease(&mut self.blob());
    }

    /// The handoff notice on the lease blob, if any.
    #[cfg(test)]
    pub(crate) fn successor(&self) -> Option<String> {
        self.blob().successor.clone()
    }

    /// The member records, as a listing would show them (in name order).
    #[cfg(test)]
    pub(crate) fn members(&self) -> Vec<MemberRecord> {
        listing(&self.blob(), Instant::now(), self.wall_now())
    }

    /// The record of `identity`, as a listing would show it.
    #[cfg(test)]
    pub(crate) fn member(&self, identity: &str) -> Option<MemberRecord> {
        let b = self.blob();
        let key = MemberKey::of(identity);
        let date = self.wall_now();
        b.members
            .get(&key)
            .map(|r| listed(&key, r, Instant::now(), date))
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
    pub(super) fn wall_now(&self) -> OffsetDateTime {
        /// The date the store's wall clock starts at (worked out at compile time).
        const BASE: OffsetDateTime = match OffsetDateTime::from_unix_timestamp(1_700_000_000) {
            Ok(base) => base,
            Err(_) => OffsetDateTime::UNIX_EPOCH,
        };
        let start = *self.shared.epoch.get_or_init(Instant::now);
        BASE + time::Duration::seconds(Instant::now().duration_since(start).as_secs() as i64)
    }

    /// One request: sent over this client's connection, applied (or not) as scripted for `op`,
    /// answered as scripted and then as late as the connection is.
    pub(super) async fn run<T: Send + 'static>(
        &self,
        op: Op,
        id: Option<LeaseId>,
        apply: impl FnOnce(&mut Blob, Instant) -> Result<T, StoreError> + Send + 'static,
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
            Behaviour::Normal => apply(&mut self.blob(), Instant::now()),
            Behaviour::SlowAnswer(d) => {
                let r = apply(&mut self.blob(), Instant::now());
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
        apply: impl FnOnce(&mut Blob, Instant) -> Result<T, StoreError> + Send + 'static,
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
            let arrived = Instant::now();
            shared.calls.lock().unwrap().push((op, arrived, id));
            let (outcome, after) = {
                let mut blob = shared.blob.lock().unwrap();
                // Led by someone else: an epoch on it, or a lease under another id.
                let led = blob.holder.is_some()
                    || blob
                        .lease
                        .active(arrived)
                        .is_some_and(|l| id.is_some_and(|id| l.id != id));
                let was_missing = blob.missing;
                let outcome = apply(&mut blob, arrived);
                let after = super::network::Applied {
                    epoch: blob.holder.as_ref().map(|h| h.epoch),
                    led,
                    created: blob.created_plainly(was_missing),
                };
                (outcome, after)
            };
            service.applied(op, id, sent, outcome.as_ref().map(drop), after);
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
