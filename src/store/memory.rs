//! An in-memory [`LeaseStore`] for unit tests: Azure's lease rules on tokio time, plus scripted
//! faults (delay, failure, hang) per operation. Integration tests use a real Azurite instead.

pub use super::Op;
use super::{
    BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, LeaseStore, Member, MemberKey,
    MemberRecord, SlotRecord, StoreError,
};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::{Mutex, OnceLock};
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

#[derive(Clone, Copy)]
struct Lease {
    id: LeaseId,
    expires: Instant,
    length: Duration,
}

#[derive(Default)]
struct Blob {
    lease: Option<Lease>,
    broken: bool,
    holder: Option<Holder>,
    /// The handoff notice.
    successor: Option<String>,
    etag: u64,
    /// The member records beside it.
    members: BTreeMap<MemberKey, Record>,
}

/// A member record.
struct Record {
    member: Member,
    lease: Option<Lease>,
    created: OffsetDateTime,
    etag: u64,
}

impl Record {
    fn held(&self) -> Option<Lease> {
        self.lease.filter(|l| l.expires > Instant::now())
    }
}

/// A lease blob in memory, with Azure's lease rules on tokio's clock (so that leases expire on
/// paused time too), and faults scripted per kind of request ([`MemoryStore::set`]). For
/// testing leader code: give it to [`Elector::with_store`](crate::Elector::with_store).
#[derive(Default)]
pub struct MemoryStore {
    blob: Mutex<Blob>,
    behaviour: Mutex<HashMap<Op, Behaviour>>,
    calls: Mutex<Vec<(Op, Instant, Option<LeaseId>)>>,
    /// The instant of the first record created: the store's wall clock for creation times
    /// starts there.
    epoch: OnceLock<Instant>,
    /// The blobs of slots 1.. (`<blob>.slots/<i>`), each a store of its own, made at first use.
    slots: Mutex<BTreeMap<u32, Arc<MemoryStore>>>,
}

impl MemoryStore {
    /// From now on, requests of kind `op` behave as `b`.
    pub fn set(&self, op: Op, b: Behaviour) {
        self.behaviour.lock().unwrap().insert(op, b);
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
        let calls = self.calls.lock().unwrap().clone();
        calls
            .into_iter()
            .filter(move |(o, _, _)| *o == op)
            .map(|(_, at, id)| (at, id))
    }

    /// The id of the lease held right now, if any.
    pub fn lease_id(&self) -> Option<LeaseId> {
        let b = self.blob.lock().unwrap();
        b.lease.filter(|l| l.expires > Instant::now()).map(|l| l.id)
    }

    /// The blob is deleted and created again, empty: no lease, no metadata.
    pub fn recreate(&self) {
        let mut b = self.blob.lock().unwrap();
        let etag = b.etag + 1;
        let members = std::mem::take(&mut b.members);
        *b = Blob::default();
        b.etag = etag;
        b.members = members;
    }

    /// Someone writes the holder metadata directly (an operator, a tampering script).
    pub fn set_holder(&self, holder: Option<Holder>) {
        let mut b = self.blob.lock().unwrap();
        b.holder = holder;
        b.successor = None;
        b.etag += 1;
    }

    /// The holder metadata the last leader wrote.
    pub fn holder(&self) -> Option<Holder> {
        self.blob.lock().unwrap().holder.clone()
    }

    /// Whether anyone holds an unexpired lease right now.
    pub fn is_leased(&self) -> bool {
        let b = self.blob.lock().unwrap();
        b.lease.is_some_and(|l| l.expires > Instant::now())
    }

    /// Another party acquires the lease (as after our lease expired).
    pub fn steal(&self, seconds: u64) {
        let mut b = self.blob.lock().unwrap();
        let length = Duration::from_secs(seconds);
        b.lease = Some(Lease {
            id: LeaseId::random(),
            expires: Instant::now() + length,
            length,
        });
        b.broken = false;
    }

    /// An admin breaks the lease with period 0.
    pub fn break_now(&self) {
        let mut b = self.blob.lock().unwrap();
        b.broken = true;
        b.lease = None;
    }

    /// The handoff notice on the lease blob, if any.
    pub fn successor(&self) -> Option<String> {
        self.blob.lock().unwrap().successor.clone()
    }

    /// The member records, as a listing would show them (in name order).
    pub fn members(&self) -> Vec<MemberRecord> {
        let b = self.blob.lock().unwrap();
        let date = self.wall_now();
        b.members.iter().map(|(k, r)| listed(k, r, date)).collect()
    }

    /// The record of `identity`, as a listing would show it.
    pub fn member(&self, identity: &str) -> Option<MemberRecord> {
        let b = self.blob.lock().unwrap();
        let key = MemberKey::of(identity);
        let date = self.wall_now();
        b.members.get(&key).map(|r| listed(&key, r, date))
    }

    /// Slot `slot`'s state as a listing shows it.
    fn slot_record(&self, slot: u32) -> SlotRecord {
        let b = self.blob.lock().unwrap();
        SlotRecord {
            slot,
            lease: if b.lease.is_some_and(|l| l.expires > Instant::now()) {
                LeaseState::Leased
            } else {
                LeaseState::Available
            },
            holder: b.holder.clone(),
            successor: b.successor.clone(),
        }
    }

    /// The record of `identity` loses its lease, as when its member stopped renewing long ago.
    pub fn expire_member(&self, identity: &str) {
        let mut b = self.blob.lock().unwrap();
        if let Some(r) = b.members.get_mut(&MemberKey::of(identity)) {
            r.lease = None;
        }
    }

    /// The creation time of a record created now: whole seconds, as the service reports it,
    /// from a fixed date on tokio's (paused) clock.
    fn wall_now(&self) -> OffsetDateTime {
        let start = *self.epoch.get_or_init(Instant::now);
        let base = OffsetDateTime::from_unix_timestamp(1_700_000_000)
            .unwrap_or(OffsetDateTime::UNIX_EPOCH);
        base + time::Duration::seconds(Instant::now().duration_since(start).as_secs() as i64)
    }

    async fn run<T>(
        &self,
        op: Op,
        id: Option<LeaseId>,
        apply: impl FnOnce(&mut Blob) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.calls.lock().unwrap().push((op, Instant::now(), id));
        let b = self
            .behaviour
            .lock()
            .unwrap()
            .get(&op)
            .cloned()
            .unwrap_or(Behaviour::Normal);
        match b {
            Behaviour::Normal => apply(&mut self.blob.lock().unwrap()),
            Behaviour::SlowAnswer(d) => {
                let r = apply(&mut self.blob.lock().unwrap());
                tokio::time::sleep(d).await;
                r
            }
            Behaviour::Fail(e) => Err(e),
            Behaviour::Hang => std::future::pending().await,
        }
    }
}

fn conflict(code: &str) -> StoreError {
    StoreError::Status {
        status: 409,
        code: Some(code.to_owned()),
    }
}

impl LeaseStore for MemoryStore {
    async fn prepare(&self, _create: bool) -> Result<(), StoreError> {
        self.run(Op::Prepare, None, |_| Ok(())).await
    }

    async fn acquire(&self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        self.run(Op::Acquire, Some(id), |b| {
            let now = Instant::now();
            match b.lease {
                Some(l) if l.expires > now && l.id != id => Err(conflict("LeaseAlreadyPresent")),
                _ => {
                    let length = Duration::from_secs(u64::from(seconds));
                    b.lease = Some(Lease {
                        id,
                        expires: now + length,
                        length,
                    });
                    b.broken = false;
                    Ok(())
                }
            }
        })
        .await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Renew, Some(id), |b| {
            if b.broken {
                return Err(conflict("LeaseIsBrokenAndCannotBeRenewed"));
            }
            match &mut b.lease {
                // Azure lets an expired lease be renewed while nobody re-acquired it.
                Some(l) if l.id == id => {
                    l.expires = Instant::now() + l.length;
                    Ok(())
                }
                _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
            }
        })
        .await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Release, Some(id), |b| match b.lease {
            Some(l) if l.id == id => {
                b.lease = None;
                Ok(())
            }
            _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
        })
        .await
    }

    async fn break_lease(&self, _period: Duration) -> Result<u64, StoreError> {
        self.break_now();
        Ok(0)
    }

    async fn read(&self) -> Result<BlobState, StoreError> {
        self.run(Op::Read, None, |b| {
            let leased = b.lease.is_some_and(|l| l.expires > Instant::now());
            Ok(BlobState {
                lease: if leased {
                    LeaseState::Leased
                } else {
                    LeaseState::Available
                },
                holder: b.holder.clone(),
                etag: ETag(b.etag.to_string()),
                successor: b.successor.clone(),
            })
        })
        .await
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        self.run(Op::Read, None, |b| {
            Ok(match b.lease {
                Some(l) if l.expires > Instant::now() && l.id == id => LeaseCheck::Active,
                Some(l) if l.expires > Instant::now() => LeaseCheck::HeldByAnother,
                _ => LeaseCheck::NotLeased,
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
        let holder = holder.clone();
        self.run(Op::WriteEpoch, Some(id), |b| {
            let ours = b
                .lease
                .is_some_and(|l| l.id == id && l.expires > Instant::now());
            if !ours {
                return Err(StoreError::Status {
                    status: 412,
                    code: Some("LeaseIdMismatchWithBlobOperation".to_owned()),
                });
            }
            if etag.0 != b.etag.to_string() {
                return Err(StoreError::Status {
                    status: 412,
                    code: Some("ConditionNotMet".to_owned()),
                });
            }
            b.holder = Some(holder);
            b.successor = None;
            b.etag += 1;
            Ok(())
        })
        .await
    }

    async fn change(&self, id: LeaseId, proposed: LeaseId) -> Result<(), StoreError> {
        self.run(Op::Change, Some(id), |b| {
            if b.broken {
                return Err(conflict("LeaseIsBrokenAndCannotBeChanged"));
            }
            match &mut b.lease {
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
        successor: &str,
    ) -> Result<(), StoreError> {
        let (holder, successor) = (holder.clone(), successor.to_owned());
        self.run(Op::Notice, Some(id), |b| {
            let ours = b
                .lease
                .is_some_and(|l| l.id == id && l.expires > Instant::now());
            if !ours {
                return Err(StoreError::Status {
                    status: 412,
                    code: Some("LeaseIdMismatchWithBlobOperation".to_owned()),
                });
            }
            b.holder = Some(holder);
            b.successor = Some(successor);
            b.etag += 1;
            Ok(())
        })
        .await
    }

    fn slot(&self, slot: u32) -> Arc<Self> {
        self.slots.lock().unwrap().entry(slot).or_default().clone()
    }

    async fn read_member(&self, key: &MemberKey) -> Result<(LeaseState, ETag), StoreError> {
        let date = self.wall_now();
        self.run(Op::MemberRead, None, move |b| {
            let r = b.members.get(key).ok_or_else(not_found)?;
            let m = listed(key, r, date);
            Ok((m.lease, m.etag))
        })
        .await
    }

    async fn list_group(&self) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        // One request, counted (and scripted) as a listing.
        let members = self.list_members().await?;
        let others: Vec<(u32, Arc<MemoryStore>)> = self
            .slots
            .lock()
            .unwrap()
            .iter()
            .map(|(i, s)| (*i, s.clone()))
            .collect();
        let mut slots = vec![self.slot_record(0)];
        slots.extend(others.iter().map(|(i, s)| s.slot_record(*i)));
        Ok((members, slots))
    }

    async fn list_members(&self) -> Result<Vec<MemberRecord>, StoreError> {
        let date = self.wall_now();
        self.run(Op::List, None, move |b| {
            Ok(b.members.iter().map(|(k, r)| listed(k, r, date)).collect())
        })
        .await
    }

    async fn create_member(&self, key: &MemberKey, member: &Member) -> Result<(), StoreError> {
        let created = self.wall_now();
        let (key, member) = (key.clone(), member.clone());
        self.run(Op::MemberCreate, None, |b| {
            if b.members.contains_key(&key) {
                return Err(conflict("BlobAlreadyExists"));
            }
            b.members.insert(
                key,
                Record {
                    member,
                    lease: None,
                    created,
                    etag: 1,
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
        self.run(Op::MemberAcquire, Some(id), |b| {
            let r = b.members.get_mut(&key).ok_or_else(not_found)?;
            match r.held() {
                Some(l) if l.id != id => Err(conflict("LeaseAlreadyPresent")),
                _ => {
                    let length = Duration::from_secs(u64::from(seconds));
                    r.lease = Some(Lease {
                        id,
                        expires: Instant::now() + length,
                        length,
                    });
                    Ok(())
                }
            }
        })
        .await
    }

    async fn renew_member(&self, key: &MemberKey, id: LeaseId) -> Result<(), StoreError> {
        let key = key.clone();
        self.run(Op::MemberRenew, Some(id), |b| {
            let r = b.members.get_mut(&key).ok_or_else(not_found)?;
            match &mut r.lease {
                // As on Azure: an expired lease that nobody took since can be renewed.
                Some(l) if l.id == id => {
                    l.expires = Instant::now() + l.length;
                    Ok(())
                }
                _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
            }
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
        self.run(Op::MemberWrite, Some(id), |b| {
            let r = b.members.get_mut(&key).ok_or_else(not_found)?;
            if !r.held().is_some_and(|l| l.id == id) {
                return Err(precondition("LeaseIdMismatchWithBlobOperation"));
            }
            r.member = member;
            r.etag += 1;
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
        self.run(Op::MemberDelete, lease, |b| {
            let r = b.members.get(&key).ok_or_else(not_found)?;
            match (r.held(), lease) {
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

/// A record as a listing shows it.
fn listed(key: &MemberKey, r: &Record, date: OffsetDateTime) -> MemberRecord {
    MemberRecord {
        key: key.clone(),
        member: r.member.clone(),
        joined: r.created,
        lease: if r.held().is_some() {
            LeaseState::Leased
        } else {
            LeaseState::Available
        },
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

#[cfg(test)]
/// Another client of the same blob: one instance's own connection to it. Its answers arrive
/// `delay` late (each operation is applied when its request arrives, at once, as with
/// [`Behaviour::SlowAnswer`], but only this client hears of it late: two electors, one on a
/// plain client and one on a slow one, are a healthy and a slow instance of one group). It
/// counts its requests, and can be cut off from storage.
pub struct SlowClient {
    pub store: Arc<MemoryStore>,
    pub delay: Duration,
    /// The requests it sent, in order (its slot clients' too).
    sent: Arc<Mutex<Vec<Op>>>,
    /// Cut off: every request fails as unreachable, without reaching storage (its slot
    /// clients too).
    cut: Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(test)]
impl SlowClient {
    pub fn new(store: &Arc<MemoryStore>, delay: Duration) -> Self {
        Self {
            store: store.clone(),
            delay,
            sent: Default::default(),
            cut: Default::default(),
        }
    }

    /// The requests sent so far.
    pub fn sent(&self) -> Vec<Op> {
        self.sent.lock().unwrap().clone()
    }

    /// Cut off from storage (`true`), or back.
    pub fn cut_off(&self, cut: bool) {
        self.cut.store(cut, std::sync::atomic::Ordering::SeqCst);
    }

    fn note(&self, op: Op) -> Result<(), StoreError> {
        if self.cut.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StoreError::Unreachable("cut off (test)".to_owned()));
        }
        self.sent.lock().unwrap().push(op);
        Ok(())
    }

    async fn late<T>(&self, answer: T) -> T {
        tokio::time::sleep(self.delay).await;
        answer
    }
}

#[cfg(test)]
impl LeaseStore for SlowClient {
    async fn prepare(&self, create: bool) -> Result<(), StoreError> {
        let a = self.store.prepare(create).await;
        self.late(a).await
    }

    async fn acquire(&self, id: LeaseId, seconds: u8) -> Result<(), StoreError> {
        self.note(Op::Acquire)?;
        let a = self.store.acquire(id, seconds).await;
        self.late(a).await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        self.note(Op::Renew)?;
        let a = self.store.renew(id).await;
        self.late(a).await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        self.note(Op::Release)?;
        let a = self.store.release(id).await;
        self.late(a).await
    }

    async fn break_lease(&self, period: Duration) -> Result<u64, StoreError> {
        let a = self.store.break_lease(period).await;
        self.late(a).await
    }

    async fn read(&self) -> Result<BlobState, StoreError> {
        self.note(Op::Read)?;
        let a = self.store.read().await;
        self.late(a).await
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        self.note(Op::Read)?;
        let a = self.store.check_lease(id).await;
        self.late(a).await
    }

    async fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> Result<(), StoreError> {
        self.note(Op::WriteEpoch)?;
        let a = self.store.write_holder(id, etag, holder).await;
        self.late(a).await
    }
    async fn change(&self, id: LeaseId, proposed: LeaseId) -> Result<(), StoreError> {
        self.note(Op::Change)?;
        let a = self.store.change(id, proposed).await;
        self.late(a).await
    }

    async fn write_notice(
        &self,
        id: LeaseId,
        holder: &Holder,
        successor: &str,
    ) -> Result<(), StoreError> {
        self.note(Op::Notice)?;
        let a = self.store.write_notice(id, holder, successor).await;
        self.late(a).await
    }

    fn slot(&self, slot: u32) -> Arc<Self> {
        Arc::new(SlowClient {
            store: self.store.slot(slot),
            delay: self.delay,
            sent: self.sent.clone(),
            cut: self.cut.clone(),
        })
    }

    async fn read_member(&self, key: &MemberKey) -> Result<(LeaseState, ETag), StoreError> {
        self.note(Op::MemberRead)?;
        let a = self.store.read_member(key).await;
        self.late(a).await
    }

    async fn list_group(&self) -> Result<(Vec<MemberRecord>, Vec<SlotRecord>), StoreError> {
        self.note(Op::List)?;
        let a = self.store.list_group().await;
        self.late(a).await
    }

    async fn list_members(&self) -> Result<Vec<MemberRecord>, StoreError> {
        self.note(Op::List)?;
        let a = self.store.list_members().await;
        self.late(a).await
    }

    async fn create_member(&self, key: &MemberKey, member: &Member) -> Result<(), StoreError> {
        self.note(Op::MemberCreate)?;
        let a = self.store.create_member(key, member).await;
        self.late(a).await
    }

    async fn acquire_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        seconds: u8,
    ) -> Result<(), StoreError> {
        self.note(Op::MemberAcquire)?;
        let a = self.store.acquire_member(key, id, seconds).await;
        self.late(a).await
    }

    async fn renew_member(&self, key: &MemberKey, id: LeaseId) -> Result<(), StoreError> {
        self.note(Op::MemberRenew)?;
        let a = self.store.renew_member(key, id).await;
        self.late(a).await
    }

    async fn write_member(
        &self,
        key: &MemberKey,
        id: LeaseId,
        member: &Member,
    ) -> Result<(), StoreError> {
        self.note(Op::MemberWrite)?;
        let a = self.store.write_member(key, id, member).await;
        self.late(a).await
    }

    async fn delete_member(
        &self,
        key: &MemberKey,
        lease: Option<LeaseId>,
        etag: Option<&ETag>,
    ) -> Result<(), StoreError> {
        self.note(Op::MemberDelete)?;
        let a = self.store.delete_member(key, lease, etag).await;
        self.late(a).await
    }
}
