//! The model's configuration: how many members, what they list, how long a history runs, how
//! many faults it may have, and which rule (if any) is broken.

use std::fmt;
use std::str::FromStr;

/// A tick of the model's real time, which every replica's service clock reads.
pub type Tick = i8;

/// An epoch (fencing token).
pub type Epoch = u8;

/// The lease duration `L`, in ticks.
pub const LEASE: Tick = 3;
/// The safety margin `M`: a member's deadline on a replica is `t_s + L - M`. The model's
/// replicas apply a request at the tick it is sent and their clocks do not drift, which is what
/// `M` covers: 0 leaves the deadlines of the replicas a member counts as far apart as they can
/// be (`L - 1` ticks), where a kill deadline from the wrong one shows.
pub const MARGIN: Tick = 0;
/// The guard `G`: a body starts only while its kill deadline is at least this far away.
pub const GUARD: Tick = 1;
/// A replica whose blob is missing, carries no epoch or is younger than this counts for nobody.
pub const LOCK_DELAY: Tick = LEASE + MARGIN;
/// The wall-clock floor of an epoch grows this much a tick: more than the epochs the members
/// can hand out in one tick (each computes at most one per campaign, and a campaign given up
/// waits for the next tick), as milliseconds outrun a thousand leaderships a second.
pub const FLOOR_PER_TICK: Epoch = 5;
/// How far behind real time the last member's wall clock runs, in ticks, by default: less than
/// the lock-delay, so that the floor still covers a replica that forgot its epoch, but enough
/// that the floor alone cannot hide an epoch read from too few replicas.
pub const SKEW: Tick = 2;
/// The epoch every replica carries at the start: the group has led before.
pub const FIRST_EPOCH: Epoch = 1;
/// The accounts: 0, 1 and 2 are the group's replicas; 3 is an account only a foreign set lists.
pub const ACCOUNTS: usize = 4;
/// The group's replica set, in its fixed order.
pub const GROUP_SET: [u8; 3] = [0, 1, 2];

/// What the last member lists instead of the group's set, if anything.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mixed {
    /// Every member lists the group's set.
    None,
    /// The last member lists account 1 twice (`[0, 1, 1]`): another fingerprint.
    Doubled,
    /// The last member lists an account of another set (`[0, 1, 3]`): another fingerprint.
    Foreign,
    /// Every member lists account 1 twice (`[0, 1, 1]`): one fingerprint, two accounts.
    AllDoubled,
}

impl Mixed {
    /// The list of accounts the member of this kind names, in its order.
    #[must_use]
    pub const fn set(self) -> [u8; 3] {
        match self {
            Self::None => GROUP_SET,
            Self::Doubled | Self::AllDoubled => [0, 1, 1],
            Self::Foreign => [0, 1, 3],
        }
    }
}

/// A kind of fault a history may have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fault {
    /// A replica's blob deleted: its lease and epoch gone.
    Wipe,
    /// A replica restored from an old copy: a new blob with an old epoch and no lease.
    Rollback,
    /// A request without an answer: applied with its answer lost, or never applied.
    Silence,
    /// A replica restored in place: its old epoch back and its lease gone, but its creation
    /// time kept (what a restore that recreates nothing would do). Not among the faults the
    /// rules cover: the model shows they do not.
    RestoreInPlace,
    /// A member that holds a body frozen: it takes no step while time passes.
    Freeze,
}

impl Fault {
    /// Every kind, in a fixed order.
    pub const ALL: [Self; 5] = [
        Self::Wipe,
        Self::Rollback,
        Self::Silence,
        Self::RestoreInPlace,
        Self::Freeze,
    ];

    /// The name the command line uses.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Wipe => "wipe",
            Self::Rollback => "rollback",
            Self::Silence => "silence",
            Self::RestoreInPlace => "restore-in-place",
            Self::Freeze => "freeze",
        }
    }

    const fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|f| f.name()).collect();
                format!("unknown fault `{s}` (one of: {})", names.join(", "))
            })
    }
}

/// A rule broken on purpose: the search must find the property it guards violated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mutant {
    /// A member leads on fewer than `k` replicas (one of three).
    MinorityLeads,
    /// The kill deadline is the latest counted deadline instead of the k-th latest.
    DeadlineFromLatest,
    /// The epoch is read from one counted replica (the first) instead of all of them.
    EpochFromOne,
    /// A wiped or restored replica counts at once, without its lock-delay.
    NoReplicaLockDelay,
    /// A request whose answer never came counts as won.
    CountUnknownOutcome,
    /// A replica counts whatever set's fingerprint it carries.
    NoFingerprintCheck,
    /// Neither the fingerprint nor the replica ids are checked: an account listed twice counts
    /// twice.
    CountListedTwice,
    /// The body starts before its epoch was written to a majority (on a majority of holds).
    StartBeforeWrite,
    /// The epoch has no wall-clock floor.
    NoWallClockFloor,
    /// No guard: a frozen member's body runs on past its kill deadline until the member thaws.
    NoGuard,
}

impl Mutant {
    /// Every broken rule, in a fixed order.
    pub const ALL: [Self; 10] = [
        Self::MinorityLeads,
        Self::DeadlineFromLatest,
        Self::EpochFromOne,
        Self::NoReplicaLockDelay,
        Self::CountUnknownOutcome,
        Self::NoFingerprintCheck,
        Self::CountListedTwice,
        Self::StartBeforeWrite,
        Self::NoWallClockFloor,
        Self::NoGuard,
    ];

    /// The name the simulator and the command line use.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::MinorityLeads => "minority-leads",
            Self::DeadlineFromLatest => "deadline-from-latest",
            Self::EpochFromOne => "epoch-from-one",
            Self::NoReplicaLockDelay => "no-replica-lock-delay",
            Self::CountUnknownOutcome => "count-unknown-outcome",
            Self::NoFingerprintCheck => "no-fingerprint-check",
            Self::CountListedTwice => "count-listed-twice",
            Self::StartBeforeWrite => "start-before-write",
            Self::NoWallClockFloor => "no-wall-clock-floor",
            Self::NoGuard => "no-guard",
        }
    }

    /// The mixed set that lets this broken rule show: a broken set check needs a member with
    /// another set.
    #[must_use]
    pub const fn mixed(self) -> Mixed {
        match self {
            Self::NoFingerprintCheck => Mixed::Foreign,
            Self::CountListedTwice => Mixed::Doubled,
            _ => Mixed::None,
        }
    }
}

impl Mutant {
    /// The fault that lets this broken rule show, if it needs one.
    #[must_use]
    pub const fn fault(self) -> Option<Fault> {
        match self {
            Self::NoReplicaLockDelay => Some(Fault::Wipe),
            Self::NoWallClockFloor => Some(Fault::Rollback),
            Self::CountUnknownOutcome => Some(Fault::Silence),
            Self::NoGuard => Some(Fault::Freeze),
            _ => None,
        }
    }
}

impl fmt::Display for Mutant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Mutant {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|m| m.name()).collect();
                format!("unknown mutant `{s}` (one of: {})", names.join(", "))
            })
    }
}

/// One model to explore: its members, its bounds and the rule it breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Members, 2 or 3. The last one's wall clock runs [`SKEW`] behind.
    pub members: usize,
    /// The last tick a history reaches.
    pub horizon: Tick,
    /// What the last member lists.
    pub mixed: Mixed,
    /// How far behind real time the last member's wall clock runs, in ticks.
    pub skew: Tick,
    /// Faults a history may have.
    pub faults: u8,
    /// The last tick at which a replica may be wiped or restored.
    pub faults_until: Tick,
    /// The kinds of fault it may have (a set of [`Fault`] bits).
    pub kinds: u8,
    /// The broken rule, if any.
    pub mutant: Option<Mutant>,
}

impl Config {
    /// The bounds the tests use for `members` members, with no fault yet: for two members, 5
    /// ticks, long enough for a lease to run out and a restored replica's lock-delay to end with
    /// a leadership after it; for three, 2 ticks (a split vote and its yield come at the first).
    /// At most one fault a history, a replica's by the end of tick 1.
    #[must_use]
    pub const fn new(members: usize) -> Self {
        Self {
            members,
            horizon: if members > 2 { 2 } else { 5 },
            mixed: Mixed::None,
            skew: SKEW,
            faults: 1,
            faults_until: 1,
            kinds: 0,
            mutant: None,
        }
    }

    /// The same bounds with one rule broken, and the mixed set that lets it show.
    #[must_use]
    pub const fn with_mutant(self, mutant: Mutant) -> Self {
        let kinds = match mutant.fault() {
            Some(kind) => kind.bit(),
            None => 0,
        };
        Self {
            mutant: Some(mutant),
            mixed: mutant.mixed(),
            kinds,
            ..self
        }
    }

    /// The same bounds with faults of `kind` only.
    #[must_use]
    pub const fn with_fault(self, kind: Fault) -> Self {
        Self {
            kinds: self.kinds | kind.bit(),
            ..self
        }
    }

    /// Whether a history may have faults of `kind`.
    #[must_use]
    pub const fn allows(&self, kind: Fault) -> bool {
        self.kinds & kind.bit() != 0
    }

    /// Whether this config breaks `rule`.
    #[must_use]
    pub fn breaks(&self, rule: Mutant) -> bool {
        self.mutant == Some(rule)
    }

    /// The accounts member `m` lists, in its order.
    #[must_use]
    pub fn set_of(&self, m: usize) -> [u8; 3] {
        self.fingerprint(m).set()
    }

    /// The fingerprint of member `m`'s set, named by the kind of set it is (the fingerprint
    /// itself is the core's function of the set's accounts: `mapping::replica_set`).
    #[must_use]
    pub fn fingerprint(&self, m: usize) -> Mixed {
        if m + 1 == self.members || self.mixed == Mixed::AllDoubled {
            self.mixed
        } else {
            Mixed::None
        }
    }

    /// Member `m`'s wall-clock floor at `now`: its clock's milliseconds, in ticks of
    /// [`FLOOR_PER_TICK`].
    #[must_use]
    pub fn floor(&self, m: usize, now: Tick) -> Epoch {
        if self.breaks(Mutant::NoWallClockFloor) {
            return 0;
        }
        let skew = if m + 1 == self.members { self.skew } else { 0 };
        let ticks = u8::try_from((now - skew).max(0)).unwrap_or(0);
        ticks * FLOOR_PER_TICK
    }
}
