//! A group whose lease lives on a replica set (docs/quorum.md, "What the simulator plays") in
//! the synchronous world: a store a replica, each blob stamped for the set before the first
//! member starts, each member's calls routed to the store of the replica its request names (as
//! the shell's `Calls` routes them), and faults per replica drawn from a stream of their own
//! ([`Stream::Replicas`]): a region's link (30-150 ms each way, jittered), its outage (every
//! request hangs, or is refused), its answers lost (applied, not answered), its service clock
//! fast, its blob wiped (deleted: the next acquire creates it again, stamped, in lock-delay) or
//! rolled back (an older copy restored: an older epoch, no lease, a blob written anew), a
//! member's wall clock off (the epoch's floor), and a member that lists another set (mixed
//! sets: the same accounts, its last two swapped, so that its fingerprint differs and the
//! group's replicas are not its set's). A set with an account of its own beside the group's
//! is not played: a replica the two share, wiped and created again by the other set's member,
//! counts for that set, and the two sets' majorities need not meet (docs/quorum.md).
//!
//! A history on one account has none of this (`Sim::replicas` is `None`): its draws, its
//! trace and its hash are what they were.

use super::driver::Sim;
use super::state::{Event, Region, Replicas, Trip, Who};
use crate::sim::check::REGION_LATENCY_MS;
use crate::sim::dice::{Dice, Stream};
use crate::sim::network::{LinkFaults, faulted, ms, secs};
use crate::sim::trace::{MemberId, What};
use crate::store::Op;
use crate::store::StoreError;
use crate::store::memory::{Fate, MemoryStore, ServiceClock};
use leasehold_core::quorum::ReplicaSet;
use std::time::Duration;
use tokio::time::Instant;

/// The names of the accounts of a set of `n`, in the group's order (`swapped`: its last two
/// swapped).
fn accounts(n: usize, swapped: bool) -> Vec<String> {
    let mut names: Vec<String> = (0..n).map(|i| format!("region-{i}")).collect();
    if swapped {
        names.swap(n - 2, n - 1);
    }
    names
}

impl Replicas {
    /// The set of `n` of a history with `seed` and `members` at the start, its stores past
    /// `first` made and every blob stamped for the set. The stamps' ids come from the thread's
    /// source, which `play` seeds with the history's seed.
    pub(super) fn new(
        seed: u64,
        n: usize,
        members: usize,
        first: &MemoryStore,
        end: Instant,
    ) -> Self {
        let dice = Dice::new(seed, Stream::Replicas);
        // The set's size was drawn from this stream (`Config::set_size`): drawn again, the
        // stream's later draws stay the same whatever was asked.
        let _ = dice.below(4);
        let set = ReplicaSet::new(&accounts(n, false)).expect("3 or 5");
        first.stamp(set.fingerprint());
        let mut stores = Vec::with_capacity(n);
        for _ in 1..n {
            let ppm = dice.u64(0, 501) as u32;
            let store = MemoryStore::on(ServiceClock::faster_by_ppm(ppm));
            store.stamp(set.fingerprint());
            stores.push(store);
        }
        let mixed = (dice.below(4) == 0).then(|| {
            let other = ReplicaSet::new(&accounts(n, true)).expect("3 or 5");
            (dice.index(members.max(1)), other)
        });
        let regions = (0..=stores.len())
            .map(|_| Region {
                latency: dice.between(ms(30), ms(REGION_LATENCY_MS)),
                ..Region::default()
            })
            .collect();
        // Half the members' clocks off by up to 7 s either way: apart by less than a replica's
        // lock-delay `L + M` (16 s), which is what the epoch's wall-clock floor needs after a
        // replica wiped or rolled back (docs/safety.md, "Epochs across the deletion of the blob
        // rest on the wall clock"); beyond the floor, the epoch read from the replicas.
        let skews = (0..64)
            .map(|_| match dice.coin() {
                true => dice.u64(0, 14_001) as i64 - 7_000,
                false => 0,
            })
            .collect();
        Self {
            set,
            mixed,
            copies: vec![None; stores.len() + 1],
            stores,
            regions,
            skews,
            dice,
            calm_from: end,
        }
    }
}

impl Sim {
    /// The set member `id` lists: the group's, or the other one of mixed sets.
    pub(super) fn set_of(&self, id: MemberId) -> ReplicaSet {
        match &self.replicas {
            None => ReplicaSet::one(),
            Some(r) => match r.mixed {
                Some((m, other)) if m == id => other,
                _ => r.set,
            },
        }
    }

    /// The store of the replica at `place` of member `id`'s set (0: the first's).
    pub(super) fn store_of(&self, id: MemberId, place: usize) -> usize {
        match &self.replicas {
            Some(r) if r.mixed.is_some_and(|(m, _)| m == id) && place + 2 >= r.set.len() => {
                // Its last two swapped.
                2 * r.set.len() - 3 - place
            }
            _ => place,
        }
    }

    /// The store `i` (0: the first's).
    pub(super) fn store_at(&self, i: usize) -> &MemoryStore {
        match (i, &self.replicas) {
            (0, _) | (_, None) => &self.store,
            (i, Some(r)) => &r.stores[i - 1],
        }
    }

    /// Member `id`'s wall clock's offset, in ms.
    pub(super) fn skew(&self, id: MemberId) -> i64 {
        (self.replicas.as_ref()).map_or(0, |r| r.skews.get(id).copied().unwrap_or(0))
    }

    /// Records `what`, a request applied or answered on store `store`: on a replica set, as
    /// on that replica.
    pub(super) fn record_on(&self, store: usize, what: What) {
        match self.replicas.is_some() {
            true => self.record(What::OnReplica {
                replica: store,
                what: Box::new(what),
            }),
            false => self.record(what),
        }
    }

    /// What `store`'s region makes of a trip over a member's link: its latency each way,
    /// jittered; its outage; its answers lost.
    pub(super) fn region_trip(&mut self, store: usize, trip: Trip) -> Trip {
        let now = self.now;
        let Some(r) = &self.replicas else {
            return trip;
        };
        let region = r.regions[store];
        let jitter = || r.dice.between(Duration::ZERO, region.latency / 5);
        let (up, down) = (region.latency + jitter(), region.latency + jitter());
        if let Some((until, hang)) = region.down
            && now < until
        {
            return match hang {
                true => Trip::Hang,
                false => Trip::Refuse {
                    after: up + down,
                    error: StoreError::Status {
                        status: 503,
                        code: Some("ServerBusy".into()),
                    },
                },
            };
        }
        let lose = region.losing.is_some_and(|until| now < until) && r.dice.below(10) < 3;
        match trip {
            Trip::Deliver { up: u, down: d } => Trip::Deliver {
                up: u + up,
                down: d.filter(|_| !lose).map(|d| d + down),
            },
            Trip::Refuse { after, error } => Trip::Refuse {
                after: after + up + down,
                error,
            },
            Trip::Hang => Trip::Hang,
        }
    }

    /// The regions' first look, if the group is on a replica set; mixed sets, a fault for the
    /// whole history.
    pub(super) fn regions_begin(&mut self) {
        let Some(r) = &self.replicas else { return };
        let first = self.now + r.dice.between(secs(10), secs(40));
        if let Some((m, _)) = r.mixed {
            // A member that lists another set is a misconfiguration that lasts: a replica it
            // creates again is stamped for its set and counts for none of the group's members,
            // so the group is promised no liveness (docs/quorum.md, "What it cannot do"), only
            // safety: rule (d) is not judged while it lasts.
            self.record(What::Fault {
                kind: "mixed sets",
                detail: format!("m{m} lists the accounts in another order"),
                until: Some(self.shape.length),
            });
        }
        self.at(first, Event::Regions);
    }

    /// The regions' look: a fault drawn for one region or a few, the blobs copied (what a
    /// later roll-back restores), the next look queued.
    pub(super) fn regions_look(&mut self) {
        let now = self.now;
        let Some(r) = self.replicas.as_mut() else {
            return;
        };
        if now >= r.calm_from {
            return;
        }
        let n = r.set.len();
        let k = r.set.majority();
        let dice = &r.dice;
        let one = dice.index(n);
        let mut faults: Vec<(String, &'static str, Duration)> = Vec::new();
        match dice.below(12) {
            0..4 => {
                // One region (two of five) down: no leadership moves, no body stops.
                let hang = dice.coin();
                let span = dice.between(secs(5), secs(60));
                let count = 1 + dice.index(n - k);
                for i in 0..count {
                    let store = (one + i) % n;
                    r.regions[store].down = Some((now + span, hang));
                    let how = if hang { "hangs" } else { "refuses" };
                    faults.push((format!("replica {store} {how}"), "region down", span));
                }
            }
            4 => {
                // A majority of regions down: the body stops by its deadline, nobody leads.
                let span = dice.between(secs(5), secs(40));
                for i in 0..k {
                    let store = (one + i) % n;
                    r.regions[store].down = Some((now + span, dice.coin()));
                    faults.push((format!("replica {store} down"), "regions down", span));
                }
            }
            5 | 6 => {
                let span = dice.between(secs(10), secs(60));
                r.regions[one].losing = Some(now + span);
                faults.push((format!("replica {one} loses answers"), "answers lost", span));
            }
            7 => {
                let store = &r.stores;
                match one {
                    0 => self.store.delete(),
                    i => store[i - 1].delete(),
                }
                faults.push((
                    format!("replica {one} wiped"),
                    "replica wiped",
                    Duration::ZERO,
                ));
            }
            8 => {
                if let Some(copy) = r.copies[one].clone() {
                    let date = self.store_date();
                    let r = self.replicas.as_ref().expect("a set");
                    match one {
                        0 => self.store.restore(&copy, date),
                        i => r.stores[i - 1].restore(&copy, date),
                    }
                    let what = format!("replica {one} rolled back");
                    faults.push((what, "replica rolled back", Duration::ZERO));
                }
            }
            _ => {}
        }
        let copies = (0..n).map(|i| self.store_at(i).copy()).collect::<Vec<_>>();
        let r = self.replicas.as_mut().expect("a set");
        for (i, copy) in copies.into_iter().enumerate() {
            // A copy of a blob that is missing keeps the last one taken.
            if copy.is_some() {
                r.copies[i] = copy;
            }
        }
        let next = now + r.dice.between(secs(15), secs(60));
        for (detail, kind, span) in faults {
            let until = (!span.is_zero()).then(|| self.since() + span);
            self.record(What::Fault {
                kind,
                detail,
                until,
            });
        }
        self.at(next, Event::Regions);
    }
}

impl Sim {
    /// A request's trip over `who`'s link, drawn as the tokio engine's link draws it
    /// (src/sim/network.rs), draw for draw: a loopback-like round trip, a listing a little
    /// longer, and the faults the director put on the link or the service (on a replica set,
    /// the first account's: an outage of the first region).
    pub(super) fn trip(&self, who: Who, op: Option<Op>, store: usize) -> Trip {
        let now = self.now;
        let none = LinkFaults::default();
        let link = self.faults.links.get(&who.id).unwrap_or(&none);
        let outage = self.faults.outage_until.filter(|_| store == 0);
        let Some(p) = self.running_process(who) else {
            return Trip::Hang;
        };
        let dice = &p.net;
        let mut up = dice.between(Duration::from_micros(300), ms(2));
        let down = dice.between(Duration::from_micros(300), ms(2));
        if op == Some(Op::List) {
            up += dice.between(ms(1), ms(4));
        }
        let (fate, down) = faulted(dice, link, outage, now, down);
        match fate {
            Fate::Deliver => Trip::Deliver {
                up,
                down: Some(down),
            },
            Fate::LoseAnswer => Trip::Deliver { up, down: None },
            Fate::Refuse(error) => Trip::Refuse {
                after: up + down,
                error,
            },
            Fate::Hang => Trip::Hang,
        }
    }
}
