//! What the in-memory store keeps: the blob (its lease under Azure's rules, its metadata, its
//! member records), the faults scripted on it, the requests it got, and each client's own
//! connection; and the service's answers that the requests share (404, 409, 412, listings).

use super::network::{Network, ServiceClock};
use crate::store::blob::{ETag, Holder, LeaseId, LeaseState, Reservation, SlotRecord};
use crate::store::error::StoreError;
use crate::store::member::{Member, MemberKey, MemberRecord};
use crate::store::op::Op;
use leasehold_core::quorum::Stamp;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
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

#[derive(Debug, Clone, Copy)]
pub(super) struct Lease {
    pub(super) id: LeaseId,
    pub(super) expires: Instant,
    pub(super) length: Duration,
}

/// The lease of one blob (the lease blob, a slot blob or a member record), with Azure's rules:
/// the last lease granted, which holds until it expires. Each rule is judged at the instant it
/// is given (`now`: when the request reached the service), not at a clock of its own, so that
/// whoever drives the store decides when a request lands.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct BlobLease(pub(super) Option<Lease>);

impl BlobLease {
    /// The lease while it has not expired.
    pub(super) fn active(&self, now: Instant) -> Option<Lease> {
        self.0.filter(|l| l.expires > now)
    }

    /// As a listing or a read shows it.
    pub(super) fn state(&self, now: Instant) -> LeaseState {
        if self.active(now).is_some() {
            LeaseState::Leased
        } else {
            LeaseState::Available
        }
    }

    pub(super) fn grant(
        &mut self,
        id: LeaseId,
        length: Duration,
        clock: ServiceClock,
        now: Instant,
    ) {
        self.0 = Some(Lease {
            id,
            expires: now + clock.lasts(length),
            length,
        });
    }

    /// Acquire Lease with a proposed id: refused while a lease of another id is active.
    pub(super) fn acquire(
        &mut self,
        id: LeaseId,
        seconds: u8,
        clock: ServiceClock,
        now: Instant,
    ) -> Result<(), StoreError> {
        match self.active(now) {
            Some(l) if l.id != id => Err(conflict("LeaseAlreadyPresent")),
            _ => {
                self.grant(id, Duration::from_secs(u64::from(seconds)), clock, now);
                Ok(())
            }
        }
    }

    /// Renew Lease. Azure lets an expired lease be renewed while nobody re-acquired it.
    pub(super) fn renew(
        &mut self,
        id: LeaseId,
        clock: ServiceClock,
        now: Instant,
    ) -> Result<(), StoreError> {
        match &mut self.0 {
            Some(l) if l.id == id => {
                l.expires = now + clock.lasts(l.length);
                Ok(())
            }
            _ => Err(conflict("LeaseIdMismatchWithLeaseOperation")),
        }
    }

    /// A write under lease `id` goes through only while `id` is the active lease.
    pub(super) fn admits_write(&self, id: LeaseId, now: Instant) -> Result<(), StoreError> {
        if self.active(now).is_some_and(|l| l.id == id) {
            Ok(())
        } else {
            Err(precondition("LeaseIdMismatchWithBlobOperation"))
        }
    }
}

#[derive(Debug, Default)]
pub(super) struct Blob {
    /// The clock its leases, and its member records', run on.
    pub(super) clock: ServiceClock,
    /// Which slot's blob it is (0: the group's), as the simulator's trace names it.
    pub(super) slot: u32,
    /// Deleted: every request on it is answered 404 until `prepare` creates it again (its
    /// member records are blobs of their own, and stay).
    pub(super) missing: bool,
    pub(super) lease: BlobLease,
    pub(super) broken: bool,
    /// A metadata key no leader wrote (`leasehold_epoch = "x"`, say): reading the holder fails
    /// on it until a leader's write replaces the metadata, or it is repaired.
    pub(super) garbage: Option<(&'static str, String)>,
    pub(super) holder: Option<Holder>,
    /// The handoff notice.
    pub(super) successor: Option<String>,
    /// The members that notice passes over.
    pub(super) passed_over: Vec<String>,
    /// The epoch that notice reserves for the successor.
    pub(super) reserved: Option<Reservation>,
    /// Who created the blob again after a deletion (until a leader writes an epoch).
    pub(super) recreated: Option<String>,
    /// When it was created again, by the store's clock (whole seconds).
    pub(super) created: Option<OffsetDateTime>,
    /// The replica set's marks it was created with (none: created plainly).
    pub(super) stamp: Stamp,
    pub(super) etag: u64,
    /// The member records beside it.
    pub(super) members: BTreeMap<MemberKey, Record>,
    /// Writes to member records so far: each gets an ETag of its own, as the service's are
    /// unique (a record created again never shows the ETag its predecessor had).
    pub(super) record_writes: u64,
}

impl Blob {
    /// An empty blob whose leases run on `clock`: a service's clock stays what it is through
    /// a deletion.
    pub(super) fn on(clock: ServiceClock) -> Self {
        Self {
            clock,
            ..Self::default()
        }
    }

    /// Its slot, if the request just applied created it plainly (it was missing before, and
    /// is there now without the mark of a blob created again).
    pub(super) fn created_plainly(&self, was_missing: bool) -> Option<u32> {
        (was_missing && !self.missing && self.recreated.is_none()).then_some(self.slot)
    }
}

/// A member record.
#[derive(Debug)]
pub(super) struct Record {
    pub(super) member: Member,
    pub(super) lease: BlobLease,
    pub(super) created: OffsetDateTime,
    pub(super) etag: u64,
}

/// What every client of one blob sees: the blob, the faults scripted on it, the requests it got.
#[derive(Default)]
pub(super) struct Shared {
    pub(super) blob: Mutex<Blob>,
    pub(super) behaviour: Mutex<HashMap<Op, Behaviour>>,
    pub(super) calls: Mutex<Vec<(Op, Instant, Option<LeaseId>)>>,
    /// The instant of the first record created: the store's wall clock for creation times
    /// starts there.
    pub(super) epoch: OnceLock<Instant>,
    /// The blobs of slots 1.. (`<blob>.slots/<i>`), each shared as this one is, made at first
    /// use.
    pub(super) slots: Mutex<BTreeMap<u32, Arc<Shared>>>,
}

impl Shared {
    /// A blob's shared state, its leases kept on `clock`.
    pub(super) fn on(clock: ServiceClock) -> Self {
        Self {
            blob: Mutex::new(Blob::on(clock)),
            ..Self::default()
        }
    }

    /// The clock the blob's leases run on.
    pub(super) fn clock(&self) -> ServiceClock {
        self.blob.lock().unwrap().clock
    }

    /// Slot `slot`'s state at `now` as a listing shows it (`None`: deleted).
    pub(super) fn slot_record(&self, slot: u32, now: Instant) -> Option<SlotRecord> {
        let b = self.blob.lock().unwrap();
        (!b.missing).then(|| slot_record(slot, &b, now))
    }
}

/// One client's own connection to the blob (its clients of the slot blobs share it).
#[derive(Default)]
pub(super) struct Connection {
    /// How late its answers arrive; `None`: at once, without yielding.
    pub(super) delay: Option<Duration>,
    /// The requests it sent, in order.
    pub(super) sent: Mutex<Vec<Op>>,
    /// Cut off: every request fails as unreachable, without reaching storage.
    pub(super) cut: AtomicBool,
    /// A simulated network, which decides each request's trip (then `delay` and the scripted
    /// behaviours do not apply).
    pub(super) network: Option<Arc<dyn Network>>,
}

/// The service's 404 for a deleted blob.
pub(super) fn present(b: &Blob) -> Result<(), StoreError> {
    if b.missing { Err(not_found()) } else { Ok(()) }
}

/// The record `key`, or the service's 404 for it.
pub(super) fn record<'a>(b: &'a mut Blob, key: &MemberKey) -> Result<&'a mut Record, StoreError> {
    b.members.get_mut(key).ok_or_else(not_found)
}

/// A slot blob as a listing at `now` shows it.
pub(super) fn slot_record(slot: u32, b: &Blob, now: Instant) -> SlotRecord {
    SlotRecord {
        slot,
        lease: b.lease.state(now),
        holder: b.holder.clone(),
        successor: b.successor.clone(),
    }
}

/// The member records as a listing shows them (in name order): their leases at `now`, their
/// ages at the service's wall clock `date`.
pub(super) fn listing(b: &Blob, now: Instant, date: OffsetDateTime) -> Vec<MemberRecord> {
    b.members
        .iter()
        .map(|(k, r)| listed(k, r, now, date))
        .collect()
}

/// A record as a listing at `now` (on the service's wall clock, `date`) shows it.
pub(super) fn listed(
    key: &MemberKey,
    r: &Record,
    now: Instant,
    date: OffsetDateTime,
) -> MemberRecord {
    MemberRecord {
        key: key.clone(),
        member: r.member.clone(),
        joined: r.created,
        lease: r.lease.state(now),
        etag: ETag(r.etag.to_string()),
        age: (date - r.created).try_into().unwrap_or_default(),
    }
}

pub(super) fn not_found() -> StoreError {
    StoreError::Status {
        status: 404,
        code: Some("BlobNotFound".to_owned()),
    }
}

pub(super) fn precondition(code: &str) -> StoreError {
    StoreError::Status {
        status: 412,
        code: Some(code.to_owned()),
    }
}

pub(super) fn conflict(code: &str) -> StoreError {
    StoreError::Status {
        status: 409,
        code: Some(code.to_owned()),
    }
}
