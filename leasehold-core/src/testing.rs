//! Records, slot blobs and store errors of the core's tests: what the roles read of them, and
//! nothing else.

use crate::campaign::Failed;
use crate::failure::{Failure, StoreFailure};
use crate::line::{Line, Record, SlotBlob};
use std::time::{Duration, Instant};

/// A record: times on the wall clock are seconds.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rec {
    pub id: String,
    pub priority: i64,
    pub joined: u64,
    pub alive: bool,
    pub standby_until: Option<u64>,
    pub slots: u32,
    pub settled: Option<Duration>,
    pub age: Duration,
    pub advertise: Option<String>,
    /// The lease id it acquires with.
    pub acquires_with: u64,
}

impl Record for Rec {
    type Key = String;
    type Wall = u64;
    fn key(&self) -> &String {
        &self.id
    }
    fn identity(&self) -> &str {
        &self.id
    }
    fn priority(&self) -> i64 {
        self.priority
    }
    fn joined(&self) -> u64 {
        self.joined
    }
    fn is_alive(&self) -> bool {
        self.alive
    }
    fn in_standby(&self, wall: u64) -> bool {
        self.standby_until.is_some_and(|until| until > wall)
    }
    fn slots(&self) -> u32 {
        self.slots
    }
    fn settled(&self) -> Option<Duration> {
        self.settled
    }
    fn age(&self) -> Duration {
        self.age
    }
    fn set_alive(&mut self) {
        self.alive = true;
    }
    fn advertise(&self) -> Option<&str> {
        self.advertise.as_deref()
    }
    fn acquires_as(&self, other: &Self) -> bool {
        self.acquires_with == other.acquires_with
    }
}

/// A slot blob: whether it is leased, and by whom last.
#[derive(Debug, Clone)]
pub(crate) struct Slot(pub u32, pub bool, pub Option<String>);

impl SlotBlob for Slot {
    type Wall = u64;
    fn free(slot: u32) -> Self {
        Self(slot, false, None)
    }
    fn slot(&self) -> u32 {
        self.0
    }
    fn is_leased(&self) -> bool {
        self.1
    }
    fn last_holder(&self) -> Option<&str> {
        self.2.as_deref()
    }
    fn set_held_by(&mut self, identity: Option<&str>, _: u64, _: u32) {
        self.1 = identity.is_some();
        if let Some(id) = identity {
            self.2 = Some(id.to_owned());
        }
    }
}

pub(crate) type L = Line<Instant, Rec, Slot>;

pub(crate) fn record(id: &str, priority: i64, joined: u64, alive: bool) -> Rec {
    Rec {
        id: id.into(),
        priority,
        joined,
        alive,
        standby_until: None,
        slots: 1,
        settled: None,
        age: Duration::ZERO,
        advertise: None,
        acquires_with: 0,
    }
}

/// `a` to `d`, alive, of equal priority, joined a second apart, `b` at `b_joined`.
pub(crate) fn records(b_joined: u64) -> Vec<Rec> {
    [("a", 1), ("b", b_joined), ("c", 3), ("d", 4)]
        .into_iter()
        .map(|(id, joined)| record(id, 0, joined, true))
        .collect()
}

/// The line of `me`, joined, listed at `now` (wall clock 100), with `b`'s record made at
/// `b_joined`.
pub(crate) fn line_of(me: &str, b_joined: u64, now: Instant) -> L {
    let mut l = L::new(me.into(), 1);
    l.standing = crate::line::Standing::Joined;
    l.listed(records(b_joined), now, 100);
    l
}

/// A store error of the tests: only its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fails(pub Failure);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
}

impl Failed for Fails {
    fn timed_out(_: Duration) -> Self {
        Fails(Failure::Transient)
    }
    fn last_epoch(_: u64) -> Self {
        Fails(Failure::Permanent)
    }
}
