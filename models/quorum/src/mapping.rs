//! The model's states as the core sees them: its ticks as instants ([`At`]), its timing as a
//! [`Timing`], a member's holds as [`Replica`]s in the order of its set, and the calls of the
//! rules in `leasehold_core::quorum` that decide what the member counts, its kill deadline, its
//! epoch, where it writes, what it releases and who yields a split vote.
//!
//! The broken rules ([`Mutant`]) break the core's rules around these calls (what the model hands
//! in), except the two that live inside counting (`minority-leads` and `deadline-from-latest`),
//! which are the core's own switches ([`Mutants`]).

use std::ops::{Add, Sub};
use std::sync::LazyLock;
use std::time::Duration;

use leasehold_core::Timing;
use leasehold_core::quorum::{
    self, Count, Mutants, Outcome, Replica, ReplicaId, ReplicaSet, Split, Stamp,
};

use crate::rules::{
    Config, Epoch, GROUP_SET, GUARD, LEASE, LOCK_DELAY, MARGIN, Mixed, Mutant, Tick,
};
use crate::state::{Member, State};

/// A tick as an instant of the core's lease clock: one tick is one second. Every replica's
/// service clock reads the same real time, exactly (no whole seconds to round to).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct At(pub Tick);

/// A whole number of ticks in a duration (the model's durations are whole ticks).
fn ticks(d: Duration) -> Tick {
    Tick::try_from(d.as_secs()).expect("a duration of the model fits a tick")
}

/// A non-negative number of ticks as a duration.
fn span(t: Tick) -> Duration {
    Duration::from_secs(u64::try_from(t).expect("a span of the model is not negative"))
}

impl Add<Duration> for At {
    type Output = Self;

    fn add(self, d: Duration) -> Self {
        Self(self.0 + ticks(d))
    }
}

impl Sub<Duration> for At {
    type Output = Self;

    fn sub(self, d: Duration) -> Self {
        Self(self.0 - ticks(d))
    }
}

/// As `std::time::Instant`'s: zero when `earlier` is later.
impl Sub for At {
    type Output = Duration;

    fn sub(self, earlier: Self) -> Duration {
        span((self.0 - earlier.0).max(0))
    }
}

/// The model's timing: `L`, `M` and `G` in ticks (the rest the core's rules do not read here).
pub const TIMING: Timing = Timing {
    duration: Duration::from_secs(LEASE as u64),
    renew_interval: Duration::from_secs(1),
    acquire_interval: Duration::from_secs(1),
    safety_margin: Duration::from_secs(MARGIN as u64),
    stop_timeout: Duration::from_secs(GUARD as u64),
};

/// The tick of an instant.
#[must_use]
pub fn tick(at: At) -> Tick {
    at.0
}

/// The kill deadline `t_s + L - M` of a lease won or renewed by a request sent at `sent`.
#[must_use]
pub fn deadline(sent: Tick) -> Tick {
    tick(leasehold_core::Deadline::from_sent(At(sent), &TIMING).kill_at)
}

/// An account's identity, as the fingerprint reads it.
fn identity(account: u8) -> [u8; 1] {
    [account]
}

/// The replica set of each kind of list, as the core sees it, made once: the search asks for
/// one millions of times.
static SETS: LazyLock<[ReplicaSet; 4]> = LazyLock::new(|| {
    [
        Mixed::None,
        Mixed::Doubled,
        Mixed::Foreign,
        Mixed::AllDoubled,
    ]
    .map(|kind| ReplicaSet::new(&kind.set().map(identity)).expect("three accounts"))
});

/// The replica set of a kind of list, as the core sees it.
#[must_use]
pub fn set_of_kind(kind: Mixed) -> ReplicaSet {
    SETS[kind as usize]
}

/// Member `m`'s replica set, as the core sees it.
#[must_use]
pub fn replica_set(config: &Config, m: usize) -> ReplicaSet {
    set_of_kind(config.fingerprint(m))
}

/// The core's switches for the broken rules that live inside counting.
fn mutants(config: &Config) -> Mutants {
    Mutants {
        minority_leads: config.breaks(Mutant::MinorityLeads),
        deadline_from_latest: config.breaks(Mutant::DeadlineFromLatest),
        ..Mutants::default()
    }
}

/// What member `m` knows of the replica at `place` of its set, account `account`, at `now`, as
/// the core's [`Replica`]: its lease (won by a request sent when the hold's was, its success
/// heard then, the epoch read with it), the request of unknown outcome that reached it, the
/// stamp its blob carried and its age then.
fn replica(config: &Config, state: &State, m: usize, place: usize, account: u8) -> Replica<At> {
    let member = &state.members[m];
    let mut r = Replica::default();
    if member.unknown & (1 << account) != 0 {
        r.unanswered();
    }
    let Some(hold) = member.holds[usize::from(account)] else {
        return r;
    };
    let sent = At(hold.sent);
    r.won(sent, sent, &TIMING);
    let set = replica_set(config, m);
    let stamp = if config.breaks(Mutant::CountListedTwice) {
        // The broken rule reads neither the fingerprint nor the id: every place is a blob of
        // the set's own, and of its own.
        Stamp::new(&set, ReplicaId(place as u128))
    } else if config.breaks(Mutant::NoFingerprintCheck) {
        // It reads the id, not the fingerprint.
        Stamp::new(&set, ReplicaId(u128::from(account)))
    } else {
        Stamp {
            fingerprint: Some(set_of_kind(hold.fingerprint).fingerprint()),
            id: Some(ReplicaId(u128::from(account))),
        }
    };
    r.read(sent, true, hold.epoch.map(u64::from), stamp);
    // The broken rule never looks at a blob's age.
    if !config.breaks(Mutant::NoReplicaLockDelay) {
        let now = At(state.now);
        r.aged(now, now - At(hold.created), span(LOCK_DELAY));
    }
    if let (true, Some(epoch)) = (hold.written, member.epoch) {
        r.written(u64::from(epoch));
    }
    r
}

/// What member `m` knows of each replica of its set, in its order.
fn replicas(config: &Config, state: &State, m: usize) -> [Replica<At>; 3] {
    let set = config.set_of(m);
    std::array::from_fn(|place| replica(config, state, m, place, set[place]))
}

/// The replicas member `m` counts at the state's tick (the core's [`quorum::count`]), with the
/// epoch of its campaign once it has one. The broken rule `start-before-write` counts as if it
/// had none: a replica counts whether that epoch was written there or not.
#[must_use]
pub fn count(config: &Config, state: &State, m: usize) -> Count<At> {
    let member: &Member = &state.members[m];
    let campaign = match config.breaks(Mutant::StartBeforeWrite) {
        true => None,
        false => member.epoch.map(u64::from),
    };
    let set = replica_set(config, m);
    let replicas = replicas(config, state, m);
    quorum::count(&set, &replicas, campaign, At(state.now), mutants(config))
}

/// The kill deadline of a count, in ticks: the k-th latest counted deadline.
#[must_use]
pub fn kill_deadline(count: &Count<At>) -> Option<Tick> {
    count.kill_deadline().map(|d| tick(d.kill_at))
}

/// The epoch of member `m`'s new campaign (the core's [`quorum::new_epoch`]): the counted
/// replicas' largest + 1, the largest it handed out + 1 and its wall clock's floor. The broken
/// rule `epoch-from-one` hands in the first counted replica's epoch instead of the largest.
#[must_use]
pub fn new_epoch(config: &Config, state: &State, m: usize, count: &Count<At>) -> Epoch {
    let read = match config.breaks(Mutant::EpochFromOne) {
        true => count.counted().first().and_then(|c| c.epoch),
        false => count.largest_epoch(),
    };
    let seen = state.members[m].seen;
    let seen = (seen > 0).then_some(u64::from(seen));
    let wall = u64::from(config.floor(m, state.now));
    let epoch = quorum::new_epoch(&replica_set(config, m), read, seen, wall);
    epoch
        .and_then(|e| Epoch::try_from(e).ok())
        .expect("an epoch of the model fits")
}

/// The accounts member `m` must still write its campaign's `epoch` to (the core's
/// [`quorum::to_write`]), each once, in its set's order.
#[must_use]
pub fn to_write(config: &Config, state: &State, m: usize, epoch: Epoch) -> Vec<u8> {
    let places = quorum::to_write(&replicas(config, state, m), epoch.into(), At(state.now));
    accounts(config.set_of(m), &places)
}

/// The accounts member `m` releases when it gives up (the core's [`quorum::to_release`]).
#[must_use]
pub fn to_release(config: &Config, state: &State, m: usize) -> Vec<u8> {
    let places = quorum::to_release(&replicas(config, state, m));
    accounts(config.set_of(m), &places)
}

/// The accounts at `places` of `set`, each once.
fn accounts(set: [u8; 3], places: &[usize]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(places.len());
    for &place in places {
        if !out.contains(&set[place]) {
            out.push(set[place]);
        }
    }
    out
}

/// Whether member `m`, in a split vote (each member holding one of the group's replicas, every
/// other replica refusing it), yields (the core's [`quorum::split_vote`]): all but the holder of
/// the first replica in the set's order.
#[must_use]
pub fn yields(state: &State, m: usize) -> bool {
    let holds = &state.members[m].holds;
    let round = GROUP_SET.map(|a| match holds[usize::from(a)] {
        Some(_) => Outcome::Won,
        None => Outcome::Refused,
    });
    quorum::split_vote(&set_of_kind(Mixed::None), &round, false) == Some(Split::Yield)
}

/// The replicas a member must count to lead: a majority of its list, `k = n/2 + 1` (the
/// core's), one fewer under the broken rule.
#[must_use]
pub fn quorum(config: &Config) -> usize {
    let k = replica_set(config, 0).majority();
    if config.breaks(Mutant::MinorityLeads) {
        k - 1
    } else {
        k
    }
}

/// Whether member `m` may start its body now: an epoch written to (counted on) a majority, and
/// the kill deadline at least `G` away (the core's `Count::may_start`).
#[must_use]
pub fn may_start(config: &Config, state: &State, m: usize) -> bool {
    let member = &state.members[m];
    if member.body.is_some() || member.epoch.is_none() || member.frozen {
        return false;
    }
    count(config, state, m).may_start(At(state.now))
}
