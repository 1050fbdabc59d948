//! The simulated network between the members and the store: each member's link (a
//! loopback-like round trip, a listing a little longer) and the faults the director puts on
//! it (cut off, blackholed, lossy, slow) or on the service (an outage). Every request as the
//! store applied it and as its sender heard the answer goes into the trace.

use super::dice::Dice;
use super::trace::{InLine, MemberId, Recorder, What};
use crate::store::memory::{Applied, Fate, Network, Trip};
use crate::store::{LeaseId, Op, StoreError};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The faults on one member's network, each until an instant.
#[derive(Debug, Default, Clone)]
pub(super) struct LinkFaults {
    /// Every request refused at once, unapplied (connection refused).
    pub(super) cut_until: Option<Instant>,
    /// Every request lost on the way (a blackhole).
    pub(super) blackhole_until: Option<Instant>,
    /// Answers lost (1 in `lose`), or requests lost (1 in `hang`).
    pub(super) lossy_until: Option<Instant>,
    /// Answers up to this much late.
    pub(super) slow: Option<(Instant, Duration)>,
}

/// The network's state, shared by every member's link and the director.
#[derive(Default)]
pub(super) struct Faults {
    pub(super) links: BTreeMap<MemberId, LinkFaults>,
    /// The service answers 503 to everyone, unapplied.
    pub(super) outage_until: Option<Instant>,
}

/// Who holds each member record's lease: the member and its incarnation, by the record lease
/// id it acquired with.
pub(super) type Owners = Arc<Mutex<BTreeMap<LeaseId, (MemberId, u64)>>>;

/// One member's connection to storage.
pub(super) struct Link {
    /// `None`: the forger's, which no fault touches and the trace does not show.
    pub(super) member: Option<MemberId>,
    /// Which start of that member it is.
    pub(super) incarnation: u64,
    pub(super) faults: Arc<Mutex<Faults>>,
    pub(super) recorder: Recorder,
    /// Where it notes the record leases its member takes.
    pub(super) owners: Owners,
    /// Its own draws: each request's trip.
    pub(super) dice: Dice,
}

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(super) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// What the faults on a member's `link` and the service's `outage` make of a request's trip at
/// `now`, drawn from `dice` (the same draws for both engines): its fate, and its way `down`
/// (none for a refusal, longer on a slow link).
pub(super) fn faulted(
    dice: &Dice,
    link: &LinkFaults,
    outage: Option<Instant>,
    now: Instant,
    mut down: Duration,
) -> (Fate, Duration) {
    let until = |at: Option<Instant>| at.is_some_and(|at| now < at);
    let fate = if until(link.blackhole_until) {
        Fate::Hang
    } else if until(link.cut_until) {
        down = Duration::ZERO;
        Fate::Refuse(StoreError::Unreachable(
            "connection refused (simulated)".into(),
        ))
    } else if until(outage) {
        Fate::Refuse(StoreError::Status {
            status: 503,
            code: Some("ServerBusy".into()),
        })
    } else if until(link.lossy_until) {
        match dice.below(10) {
            0..3 => Fate::LoseAnswer,
            3 => Fate::Hang,
            _ => Fate::Deliver,
        }
    } else {
        Fate::Deliver
    };
    if let Some((at, most)) = link.slow
        && now < at
    {
        down += dice.between(Duration::ZERO, most);
    }
    (fate, down)
}

/// [`What::Erased`], if `by`'s plain creation of `slot`'s blob came while `line` (the leased
/// records then) held no record but `by`'s own.
pub(super) fn erased(line: &[InLine], slot: u32, by: MemberId) -> Option<What> {
    (line.iter().all(|r| r.owner == Some(by))).then_some(What::Erased { slot, by })
}

impl Network for Link {
    fn trip(&self, op: Op, _id: Option<LeaseId>) -> Trip {
        // A loopback-like round trip of 0.6-4 ms; a listing takes longer.
        let dice = &self.dice;
        let mut up = dice.between(Duration::from_micros(300), ms(2));
        let down = dice.between(Duration::from_micros(300), ms(2));
        if op == Op::List {
            up += dice.between(ms(1), ms(4));
        }
        let Some(member) = self.member else {
            return Trip {
                up,
                down,
                fate: Fate::Deliver,
            };
        };
        let now = Instant::now();
        let faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let link = faults.links.get(&member).cloned().unwrap_or_default();
        let (fate, down) = faulted(dice, &link, faults.outage_until, now, down);
        Trip { up, down, fate }
    }

    fn applied(
        &self,
        op: Op,
        id: Option<LeaseId>,
        sent: Instant,
        outcome: Result<(), &StoreError>,
        blob: Applied,
    ) {
        if let Some(member) = self.member {
            if op == Op::MemberAcquire
                && outcome.is_ok()
                && let Some(id) = id
            {
                self.owners
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(id, (member, self.incarnation));
            }
            self.recorder.record(What::Applied {
                member,
                op,
                lease: id,
                sent: self.recorder.since_start(sent),
                ok: outcome.is_ok(),
                epoch: blob.epoch.filter(|_| op == Op::WriteEpoch),
                led: blob.led,
            });
            if op == Op::List && outcome.is_ok() {
                // The line the member is told of.
                self.recorder.line();
            }
            if let Some(slot) = blob.created
                && let Some(erased) = erased(&self.recorder.look(), slot, member)
            {
                self.recorder.record(erased);
            }
        }
    }

    fn answered(
        &self,
        op: Op,
        id: Option<LeaseId>,
        sent: Instant,
        outcome: Result<(), &StoreError>,
    ) {
        if let Some(member) = self.member {
            self.recorder.record(What::Answered {
                member,
                op,
                lease: id,
                sent: self.recorder.since_start(sent),
                ok: outcome.is_ok(),
            });
        }
    }
}
