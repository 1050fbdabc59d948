//! The synchronous world's plain data, which its parts share: one start of a member's process
//! ([`Who`]), the events on the queue ([`Event`]), a wake-up on its way ([`Wake`]), and what
//! the director keeps between its looks ([`Directing`], [`Later`], [`Forger`], [`Storm`]), a
//! process's start-up prepare under way ([`Preparing`]), what becomes of a call on its link
//! ([`Trip`]), a group's replica set with its stores and regions ([`Replicas`], played by
//! replicas.rs), and the map a process keeps its small keys in ([`Small`]).

use crate::elector::Startup;
use crate::sim::dice::Dice;
use crate::sim::director::Planned;
use crate::sim::trace::MemberId;
use crate::store::Shell;
use crate::store::memory::{BlobCopy, MemoryStore};
use crate::store::{Call, LeaseId, MemberKey, Op, Return, StoreError};
use leasehold_core::backoff::Backoff;
use leasehold_core::exchange::Tag;
use leasehold_core::member::Reply;
use leasehold_core::quorum::ReplicaSet;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::Duration;
use tokio::time::Instant;

/// A map of a process's small keys (its requests' tags, its slots), hashed with one multiply:
/// the standard library's SipHash cost more than what the map holds. Never iterated, so its
/// order matters to nothing.
pub(super) type Small<K, V> = HashMap<K, V, BuildHasherDefault<Keys>>;

/// The hasher of [`Small`].
#[derive(Default)]
pub(super) struct Keys(u64);

impl Hasher for Keys {
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// One start of a member's process: the member and which start it is. An event for an
/// earlier start finds its process gone and is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Who {
    pub(super) id: MemberId,
    pub(super) generation: u64,
}

/// An event on the queue.
pub(super) enum Event {
    /// Member `id`'s process starts (again), unless it runs already.
    Start(MemberId),
    /// The director's next look (director.rs).
    Direct,
    /// Something the director set for later (director.rs).
    Later(Later),
    /// A call reaches the store `store` (0 unless the group is on a replica set); its answer
    /// goes back after `down`, unless it is lost.
    Arrive {
        who: Who,
        tag: Tag,
        way: u64,
        call: std::rc::Rc<Call>,
        sent: Instant,
        down: Option<Duration>,
        store: usize,
    },
    /// A call's return from `store` reaches its member (`kind`: the call's kind and lease, as
    /// traced).
    Back {
        who: Who,
        tag: Tag,
        way: u64,
        ret: Box<Return>,
        sent: Instant,
        kind: Option<(Op, Option<LeaseId>)>,
        store: usize,
    },
    /// A call's limit came.
    Cut { who: Who, tag: Tag, way: u64 },
    /// A reply given without the store (or the cut of a request not carried) reaches it.
    Reply {
        who: Who,
        tag: Tag,
        reply: Box<Reply<Shell, StoreError>>,
    },
    /// A wake-up or a probe (lives.rs).
    Wake(Box<Wake>),
    /// The member's timer.
    Timer { who: Who, round: u64 },
    /// The body may campaign.
    MayCampaign(Who),
    /// The member's body (its process, its guard, its supervisor) looks at the clock.
    Body { who: Who, round: u64 },
    /// A freeze of the member ends.
    Thaw(Who),
    /// SIGTERM reaches the member's process.
    Shutdown(Who),
    /// The regions' next look, on a replica set (replicas.rs).
    Regions,
}

impl Event {
    /// The member whose process it is for, if any.
    pub(super) fn member(&self) -> Option<MemberId> {
        match self {
            Event::Start(id) => Some(*id),
            Event::Arrive { who, .. }
            | Event::Back { who, .. }
            | Event::Cut { who, .. }
            | Event::Reply { who, .. }
            | Event::Timer { who, .. }
            | Event::MayCampaign(who)
            | Event::Body { who, .. }
            | Event::Thaw(who)
            | Event::Shutdown(who) => Some(who.id),
            Event::Wake(wake) => Some(wake.from.id),
            Event::Direct | Event::Later(_) | Event::Regions => None,
        }
    }
}

/// How a wake-up or a probe went, as its sender hears it: the shell's own.
pub(super) use crate::elector::wake::WakeSent as Sent;

/// What a wake-up or a probe is, by the request that sent it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// A handoff's wake-up of the member handed the lease (traced).
    Wake,
    /// A leader's lookout's probe without the token (traced, as a wake-up without a token).
    Lookout,
    /// A waiting member's or a watcher's probe of the member ahead, with its token (not
    /// traced).
    Probe,
}

/// A wake-up or a probe on its way.
pub(super) struct Wake {
    pub(super) from: Who,
    pub(super) tag: Tag,
    pub(super) kind: Kind,
    /// The member it is for, by name, and the token it carries.
    pub(super) to: String,
    pub(super) token: Option<String>,
    pub(super) handoff: Option<String>,
    /// Where it is: on its way to `at`, or its answer on its way back.
    pub(super) leg: Leg,
}

pub(super) enum Leg {
    There { at: Who, travel: Duration },
    Back(Sent),
}

/// The director's state between its looks.
pub(super) struct Directing {
    pub(super) end: Instant,
    pub(super) calm_from: Instant,
    pub(super) next: Instant,
    pub(super) storm_left: u32,
    pub(super) planned: Vec<(Instant, Planned)>,
}

/// Something the world does at a later instant.
pub(super) enum Later {
    /// A broken deploy of this member for this long.
    Break(MemberId, Duration),
    /// Garbage metadata repaired.
    Repair,
    /// A forger renews its records, until its instant; then deletes them.
    Forge(usize),
    /// The next forged wake-up of a storm.
    Storm(usize),
}

/// A forger: the records it holds, until when.
pub(super) struct Forger {
    pub(super) records: Vec<(MemberKey, LeaseId)>,
    pub(super) until: Instant,
}

/// A wake-up storm: whom it wakes, until when, its draws.
pub(super) struct Storm {
    pub(super) wakers: Vec<Who>,
    pub(super) until: Instant,
    pub(super) dice: Dice,
}

/// A process's start-up prepare under way.
pub(super) struct Preparing {
    /// The attempt's steps (none between two attempts).
    pub(super) startup: Option<Startup>,
    /// The attempt's limit.
    pub(super) until: Instant,
    /// The way of the call on its way (a return of an earlier one is stale), the call, when it
    /// was sent.
    pub(super) way: u64,
    pub(super) call: Option<Call>,
    pub(super) sent: Instant,
    /// The pauses between attempts.
    pub(super) backoff: Backoff,
}

/// What becomes of one call on its link.
pub(super) enum Trip {
    /// It arrives after `up` and is applied; its return comes back after `down` (`None`: it
    /// is lost).
    Deliver {
        up: Duration,
        down: Option<Duration>,
    },
    /// It is refused unapplied: `error` comes back after `after`.
    Refuse { after: Duration, error: StoreError },
    /// It never arrives, and nothing comes back.
    Hang,
}

/// The replica set of a history, its stores past the first, and their regions.
pub(crate) struct Replicas {
    /// The group's set.
    pub(super) set: ReplicaSet,
    /// A member that lists another set, and that set: the group's accounts, its last two
    /// swapped.
    pub(super) mixed: Option<(MemberId, ReplicaSet)>,
    /// The stores past the first (`Sim::store`, where the member records live): the set's
    /// places 1 to n - 1.
    pub(super) stores: Vec<MemoryStore>,
    /// Each store's region, by store (0: the first's).
    pub(super) regions: Vec<Region>,
    /// Each member's wall clock off by this many ms (the epoch's floor, section 13).
    pub(super) skews: Vec<i64>,
    /// The draws of the regions' links and faults.
    pub(super) dice: Dice,
    /// Each store's blob at the regions' last look: what a roll-back restores.
    pub(super) copies: Vec<Option<BlobCopy>>,
    /// The regions' looks end here: the history's final calm is without their faults.
    pub(super) calm_from: Instant,
}

/// A region: its store's link and faults.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Region {
    /// One way's latency to it, from every member.
    pub(super) latency: Duration,
    /// Down until then: every request hangs (`true`) or is refused.
    pub(super) down: Option<(Instant, bool)>,
    /// Its answers lost (3 in 10) until then.
    pub(super) losing: Option<Instant>,
}
