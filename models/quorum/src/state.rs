//! A state of the model: the real time, each replica's blob and lease, each member's view of
//! what it holds, its campaign and its body, and the faults left. Also what a member counts:
//! the rules of counting, the kill deadline and the epoch.

use crate::rules::{ACCOUNTS, Config, Epoch, FIRST_EPOCH, GUARD, LOCK_DELAY, Mixed, Mutant, Tick};

/// A replica's blob as its account stores it. The replica's id is its account's number: one
/// account listed twice is one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blob {
    /// When the blob was created, by the replica's own clock (for its lock-delay).
    pub created: Tick,
    /// The epoch in its metadata, if any.
    pub epoch: Option<Epoch>,
    /// The fingerprint of the set whose member created it.
    pub fingerprint: Mixed,
    /// The member whose lease it carries, and when the server lets that lease expire.
    pub lease: Option<(u8, Tick)>,
}

impl Blob {
    /// The holder of a lease that has not expired at `now`.
    #[must_use]
    pub fn holder(&self, now: Tick) -> Option<u8> {
        self.lease.filter(|&(_, until)| until > now).map(|(m, _)| m)
    }
}

/// What a member knows of a replica whose lease it won or renewed and heard so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Hold {
    /// `t_s + L - M`, from the send of the request that won or renewed the lease.
    pub deadline: Tick,
    /// The epoch read at (right after) the acquire: the only read of this replica that counts.
    pub epoch: Option<Epoch>,
    /// The blob's creation time, as the replica's clock gave it.
    pub created: Tick,
    /// The blob's fingerprint.
    pub fingerprint: Mixed,
    /// Whether this member's current epoch was written here and the write confirmed.
    pub written: bool,
}

/// A running body: stopped (killed) at `kill`, by the guard even if its member is frozen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Body {
    /// Its fencing token.
    pub epoch: Epoch,
    /// The k-th latest deadline of the replicas its member counts.
    pub kill: Tick,
}

/// One member's state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Member {
    /// The replicas it holds, by account.
    pub holds: [Option<Hold>; ACCOUNTS],
    /// Accounts a request of unknown outcome reached (never counted, released on giving up).
    pub unknown: u8,
    /// The epoch of its campaign, once computed.
    pub epoch: Option<Epoch>,
    /// The largest epoch it has handed out.
    pub seen: Epoch,
    /// Its body, while it runs.
    pub body: Option<Body>,
    /// Frozen: it takes no step while time passes.
    pub frozen: bool,
    /// It gave up (or yielded a split vote) this tick and waits for the next.
    pub resting: bool,
}

/// The whole model's state.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// Real time.
    pub now: Tick,
    /// Each account's blob, `None` while it is missing.
    pub replicas: [Option<Blob>; ACCOUNTS],
    /// The members.
    pub members: Vec<Member>,
    /// The largest epoch any body started with.
    pub last_body_epoch: Epoch,
    /// A body started with an epoch not above an earlier body's.
    pub epoch_fell: bool,
    /// Faults left.
    pub faults_left: u8,
}

impl State {
    /// The start: every replica's blob old, with the group's epoch and no lease.
    #[must_use]
    pub fn initial(config: &Config) -> Self {
        let blob = |fingerprint| {
            Some(Blob {
                created: -LOCK_DELAY,
                epoch: Some(FIRST_EPOCH),
                fingerprint,
                lease: None,
            })
        };
        // The group's blobs carry its members' fingerprint.
        let group = config.fingerprint(0);
        Self {
            now: 0,
            replicas: [blob(group), blob(group), blob(group), blob(Mixed::Foreign)],
            members: vec![Member::default(); config.members],
            last_body_epoch: 0,
            epoch_fell: false,
            faults_left: config.faults,
        }
    }

    /// The members whose bodies run now.
    #[must_use]
    pub fn bodies(&self) -> Vec<usize> {
        (0..self.members.len())
            .filter(|&m| self.members[m].body.is_some())
            .collect()
    }
}

/// A replica as member `m` counts it: its deadline and the epoch read there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counted {
    /// The account.
    pub account: u8,
    /// Its deadline.
    pub deadline: Tick,
    /// The epoch read at the acquire (or written since).
    pub epoch: Option<Epoch>,
}

/// The replicas member `m` counts at `now`, in its list's order. A replica counts while its
/// lease was won or renewed by a request whose success was heard, its deadline has not passed,
/// its fingerprint is the member's own, its id was not counted already, it is out of its
/// lock-delay and, once the member has an epoch, that epoch was written there.
#[must_use]
pub fn counted(config: &Config, state: &State, m: usize) -> Vec<Counted> {
    let member = &state.members[m];
    let own = config.set_of(m);
    let fingerprint = config.fingerprint(m);
    let mut out: Vec<Counted> = Vec::new();
    for (slot, &account) in own.iter().enumerate() {
        let listed_before = own[..slot].contains(&account);
        if listed_before && !config.breaks(Mutant::CountListedTwice) {
            continue;
        }
        let Some(hold) = member.holds[usize::from(account)] else {
            continue;
        };
        if counts(config, state.now, member, &hold, fingerprint) {
            out.push(Counted {
                account,
                deadline: hold.deadline,
                epoch: hold.epoch,
            });
        }
    }
    out
}

/// Whether one hold counts (see [`counted`]).
fn counts(config: &Config, now: Tick, member: &Member, hold: &Hold, fingerprint: Mixed) -> bool {
    let set_checked =
        !config.breaks(Mutant::NoFingerprintCheck) && !config.breaks(Mutant::CountListedTwice);
    let lock_delay = !config.breaks(Mutant::NoReplicaLockDelay)
        && (now - hold.created < LOCK_DELAY || (hold.epoch.is_none() && !hold.written));
    let unwritten =
        member.epoch.is_some() && !hold.written && !config.breaks(Mutant::StartBeforeWrite);
    hold.deadline > now
        && (!set_checked || hold.fingerprint == fingerprint)
        && !lock_delay
        && !unwritten
}

/// The kill deadline of a member counting `counted`: the k-th latest deadline, if it counts `k`.
#[must_use]
pub fn kill_deadline(config: &Config, counted: &[Counted]) -> Option<Tick> {
    let k = config.quorum();
    if counted.len() < k || k == 0 {
        return None;
    }
    let mut deadlines: Vec<Tick> = counted.iter().map(|c| c.deadline).collect();
    deadlines.sort_unstable_by(|a, b| b.cmp(a));
    if config.breaks(Mutant::DeadlineFromLatest) {
        return deadlines.first().copied();
    }
    Some(deadlines[k - 1])
}

/// The epoch of a new campaign: the largest of the counted replicas' largest epoch + 1, the
/// largest this member handed out + 1, and its wall clock's floor.
#[must_use]
pub fn new_epoch(config: &Config, state: &State, m: usize, counted: &[Counted]) -> Epoch {
    let read = if config.breaks(Mutant::EpochFromOne) {
        counted.first().and_then(|c| c.epoch).unwrap_or(0)
    } else {
        counted.iter().filter_map(|c| c.epoch).max().unwrap_or(0)
    };
    let seen = state.members[m].seen;
    (read + 1).max(seen + 1).max(config.floor(m, state.now))
}

/// Whether member `m` may start its body now: an epoch written to (counted on) a majority, and
/// the kill deadline at least `G` away.
#[must_use]
pub fn may_start(config: &Config, state: &State, m: usize) -> bool {
    let member = &state.members[m];
    if member.body.is_some() || member.epoch.is_none() || member.frozen {
        return false;
    }
    let counted = counted(config, state, m);
    kill_deadline(config, &counted).is_some_and(|kill| kill - state.now >= GUARD)
}
