//! An in-memory [`LeaseStore`] for unit tests: Azure's lease rules on tokio time, plus scripted
//! faults (delay, failure, hang) per operation. Integration tests use a real Azurite instead.

use super::{BlobState, ETag, Holder, LeaseCheck, LeaseId, LeaseState, LeaseStore, StoreError};
use std::collections::HashMap;
#[cfg(test)]
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
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

/// The kinds of request, as [`MemoryStore::set`] scripts them and [`MemoryStore::calls`] lists
/// them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Acquire the lease.
    Acquire,
    /// Renew it.
    Renew,
    /// Release it.
    Release,
    /// Read the blob (lease state, metadata), or check a lease id.
    Read,
    /// Write the holder metadata (the epoch).
    Write,
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
    etag: u64,
}

/// A lease blob in memory, with Azure's lease rules on tokio's clock (so that leases expire on
/// paused time too), and faults scripted per kind of request ([`MemoryStore::set`]). For
/// testing leader code: give it to [`Elector::with_store`](crate::Elector::with_store).
#[derive(Default)]
pub struct MemoryStore {
    blob: Mutex<Blob>,
    behaviour: Mutex<HashMap<Op, Behaviour>>,
    calls: Mutex<Vec<(Op, Instant, Option<LeaseId>)>>,
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
        *b = Blob::default();
        b.etag = etag;
    }

    /// Someone writes the holder metadata directly (an operator, a tampering script).
    pub fn set_holder(&self, holder: Option<Holder>) {
        let mut b = self.blob.lock().unwrap();
        b.holder = holder;
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
        Ok(())
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
        self.run(Op::Write, Some(id), |b| {
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
            b.etag += 1;
            Ok(())
        })
        .await
    }
}

#[cfg(test)]
/// Another client of the same blob, whose answers all arrive `delay` late: each operation is
/// applied when its request arrives (at once), as with [`Behaviour::SlowAnswer`], but only this
/// client hears of it late. Two electors, one on the store and one on this, are a healthy and a
/// slow instance of one group.
pub struct SlowClient {
    pub store: Arc<MemoryStore>,
    pub delay: Duration,
}

#[cfg(test)]
impl SlowClient {
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
        let a = self.store.acquire(id, seconds).await;
        self.late(a).await
    }

    async fn renew(&self, id: LeaseId) -> Result<(), StoreError> {
        let a = self.store.renew(id).await;
        self.late(a).await
    }

    async fn release(&self, id: LeaseId) -> Result<(), StoreError> {
        let a = self.store.release(id).await;
        self.late(a).await
    }

    async fn break_lease(&self, period: Duration) -> Result<u64, StoreError> {
        let a = self.store.break_lease(period).await;
        self.late(a).await
    }

    async fn read(&self) -> Result<BlobState, StoreError> {
        let a = self.store.read().await;
        self.late(a).await
    }

    async fn check_lease(&self, id: LeaseId) -> Result<LeaseCheck, StoreError> {
        let a = self.store.check_lease(id).await;
        self.late(a).await
    }

    async fn write_holder(
        &self,
        id: LeaseId,
        etag: &ETag,
        holder: &Holder,
    ) -> Result<(), StoreError> {
        let a = self.store.write_holder(id, etag, holder).await;
        self.late(a).await
    }
}
