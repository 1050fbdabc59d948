//! A state of the model: the real time, each replica's blob and lease, each member's view of
//! what it holds, its campaign and its body, and the faults left. What a member counts, its kill
//! deadline and its epoch are the core's rules, called through [`crate::mapping`].

use crate::rules::{ACCOUNTS, Config, Epoch, FIRST_EPOCH, LOCK_DELAY, Mixed, Tick};

/// A replica's blob as its account stores it. The replica's id is its account's number: one
/// account listed twice is one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Blob {
    /// When the blob was created, by the replica's own clock (for its lock-delay).
    pub created: Tick,
    /// The epoch in its metadata, if any.
    pub epoch: Option<Epoch>,
    /// The fingerprint of the set whose member created it, named by the kind of set (the
    /// fingerprint itself is the core's, `mapping::replica_set`).
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
    /// `t_s`: the send of the request that won or renewed the lease (its deadline is
    /// `t_s + L - M`, `mapping::deadline`).
    pub sent: Tick,
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
