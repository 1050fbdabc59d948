//! What the attempt on the replicas ([`Attempt`](super::Attempt)) and the shell that drives it
//! say to each other: its settings, the requests it sends (each on one replica, under a tag of
//! the exchange, [`crate::exchange`]), the replies the shell reports, what the member answers
//! when asked ([`Grounds`]) and how an attempt ends ([`Won`], [`Failed`]).

use super::rules::{Fingerprint, Mutants, ReplicaSet, Stamp};
use crate::exchange::{Answer, Send};
use crate::timing::{Deadline, Timing};
use std::time::Duration;

/// What one attempt is given when it begins.
#[derive(Debug, Clone)]
pub struct Settings<I> {
    /// The replica set, in its fixed order.
    pub set: ReplicaSet,
    /// The lease timings.
    pub timing: Timing,
    /// The largest epoch this member has seen or handed out (the rule *Epochs*).
    pub seen: Option<u64>,
    /// What the member knows of each replica's lock-delay already, one a place (`None` there:
    /// none running): a blob it found missing in an earlier attempt stays young here.
    pub young_until: Vec<Option<I>>,
    /// The group is brand-new ([`brand_new`](super::brand_new)): every blob was created by this
    /// member just now, and counts at once.
    pub brand_new: bool,
    /// `[storage].create_if_missing`: a replica whose blob is missing is created (stamped for
    /// the set); without it, it is left missing and named ([`Failed::missing`]).
    pub create_if_missing: bool,
    /// How many split votes in a row this member yielded before this attempt (0: none).
    pub split_round: u32,
    /// The shell's uniform draw in `[0, 1)` for the pause of a split vote this attempt yields.
    pub split_draw: f64,
    /// The checkers' broken rules; all off in production.
    pub mutants: Mutants,
}

/// A request on one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Request<I> {
    /// Acquire the replica's lease with this member's lease id (one for every replica), for `L`;
    /// no answer by `until` is an unknown outcome.
    Acquire {
        /// Its place in the set.
        replica: usize,
        /// No answer by then counts for nobody.
        until: I,
    },
    /// Read the replica's blob: its epoch, its stamp, its age on the service's clock.
    Read {
        /// Its place in the set.
        replica: usize,
        /// No answer by then counts for nobody.
        until: I,
    },
    /// Write the term's `epoch` under the lease, conditional on the ETag the read saw.
    WriteEpoch {
        /// Its place in the set.
        replica: usize,
        /// The term's epoch.
        epoch: u64,
        /// No answer by then counts for nobody (never past that replica's stop deadline).
        until: I,
    },
    /// Create the replica's blob, found missing, stamped with the set's fingerprint and a fresh
    /// random id (the shell's draw, [`Stamp::new`]); it counts for nobody until `L + M` old.
    Create {
        /// Its place in the set.
        replica: usize,
        /// The set's fingerprint, which the blob carries.
        fingerprint: Fingerprint,
    },
    /// Release the replica's lease: held, or perhaps held (a request of unknown outcome reached
    /// it). Its answer changes nothing.
    Release {
        /// Its place in the set.
        replica: usize,
    },
}

impl<I> Request<I> {
    /// The place of the replica it goes to.
    pub fn replica(&self) -> usize {
        match *self {
            Self::Acquire { replica, .. }
            | Self::Read { replica, .. }
            | Self::WriteEpoch { replica, .. }
            | Self::Create { replica, .. }
            | Self::Release { replica } => replica,
        }
    }
}

/// What one replica answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// The acquire won the lease (or an epoch write was confirmed).
    Done,
    /// Refused: another member holds the lease (409), or a write lost it (409, 412, 404).
    Refused,
    /// The blob is missing (404 on the acquire).
    Missing,
    /// A read's answer.
    Read {
        /// The epoch the blob carries.
        epoch: Option<u64>,
        /// The set's marks on it.
        stamp: Stamp,
        /// Its age on the service's clock (from its creation time).
        age: Duration,
        /// Its ETag is the acquire's (the read saw the blob as the acquire left it).
        same_etag: bool,
    },
    /// No answer that says either (a timeout, a 5xx, a broken connection): the outcome is unknown.
    Unknown,
}

/// What the shell reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input<I> {
    /// The attempt begins: its acquires go out now.
    Start,
    /// The answer to a request, by its tag, with the instant it was sent.
    Answer(Answer<I, Reply>),
    /// The instant the attempt asked to be woken at ([`Attempt::awaits`](super::Attempt)).
    Timer,
}

/// What the member answers when asked, at the moment asked.
pub trait Grounds<I> {
    /// The wall clock in milliseconds since 1970, for the epoch.
    fn wall_ms(&mut self) -> u64;
    /// Whether the member is shutting down: no epoch is spent on a term that would run no body.
    fn shutting_down(&self) -> bool;
    /// A set of one only: the single lease's lock-delay after a read of its blob that carried
    /// `epoch` and was `age` old (the member's [`LockDelays::before_epoch`], which knows whether
    /// the blob was led or marked): the instant it ends, `None` if none runs.
    ///
    /// [`LockDelays::before_epoch`]: crate::lock_delay::LockDelays::before_epoch
    fn single_lock_delay(&mut self, epoch: Option<u64>, age: Duration, now: I) -> Option<I>;
}

/// What the attempt says.
#[derive(Debug, Clone, PartialEq)]
pub enum Output<I> {
    /// Send this request under its tag.
    Send(Send<Request<I>>),
    /// A term was won.
    Won(Won<I>),
    /// A replica held when the term was won confirmed the epoch since: it counts now, with this
    /// deadline (the holder renews it).
    Joined {
        /// Its place in the set.
        replica: usize,
        /// The deadlines of its lease, from its acquire's send.
        deadline: Deadline<I>,
    },
    /// The attempt failed: every replica it held or may hold is released (the sends before).
    Failed(Failed),
}

/// A term won on a majority.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Won<I> {
    /// The term's epoch, confirmed by a majority.
    pub epoch: u64,
    /// Each replica's lease deadline, one a place: `Some` for a lease held and confirmed with
    /// the epoch (it counts), `None` elsewhere (a write still on its way reports
    /// [`Output::Joined`] once confirmed).
    pub leases: Vec<Option<Deadline<I>>>,
    /// The body's deadline: the k-th latest of the leases that count, at least `G` away when won.
    pub kill: Deadline<I>,
    /// What the leader needs to win back the replicas it does not hold (the rule *Renewing*).
    pub unheld: Unheld<I>,
}

/// What a term won on several replicas knows of them beside its leases, so that its leader
/// may win back those it does not hold (the rule *Renewing*). Empty for the one account.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unheld<I> {
    /// Each replica's stamp as the attempt last read it, one a place: a replica won back counts
    /// only if its id is none of the replicas' held (the rule *One replica set*).
    pub stamps: Vec<Stamp>,
    /// One a place, for a replica not held: the instant the leader may first try to win it
    /// back, once every request of the attempt on it has been answered or cut and a late
    /// success released (the same lease id would otherwise meet on one lease); `None` for one
    /// held.
    pub from: Vec<Option<I>>,
}

impl<I> Default for Unheld<I> {
    fn default() -> Self {
        Self {
            stamps: Vec::new(),
            from: Vec::new(),
        }
    }
}

/// Why an attempt failed, and what comes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failed {
    /// Why.
    pub why: Why,
    /// The pause before the next attempt, when it yielded a split vote (the ordinary campaign's
    /// pause otherwise).
    pub pause: Option<Duration>,
    /// The split votes yielded in a row, this one included (0: the round was no split vote).
    pub split_round: u32,
    /// The replicas won and read whose blob another replica set made (or a group on one
    /// account), a bit each by place (bit `i`: replica `i`): they count for nobody, and only a
    /// change of config mends that (the rule *One replica set*).
    pub foreign: u8,
    /// The replicas whose blob was missing and, without `create_if_missing`, left so: a bit
    /// each by place, as [`Failed::foreign`].
    pub missing: u8,
}

impl Failed {
    /// The places of the [`Failed::foreign`] replicas.
    pub fn foreign_places(&self) -> impl Iterator<Item = usize> + use<> {
        places(self.foreign)
    }

    /// The places of the [`Failed::missing`] replicas.
    pub fn missing_places(&self) -> impl Iterator<Item = usize> + use<> {
        places(self.missing)
    }
}

/// The places whose bits are set in `bits`.
fn places(bits: u8) -> impl Iterator<Item = usize> {
    (0..8).filter(move |i| bits & (1 << i) != 0)
}

/// Why an attempt failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Why {
    /// No replica was won: others hold them, or none answered.
    NoneWon,
    /// A minority was won, and this member yielded (the rule *No split vote that lasts*).
    Split,
    /// A majority was won, but fewer count (young replicas, another set's blobs, one account
    /// listed twice, reads or writes unanswered or refused).
    TooFew,
    /// A majority confirmed the epoch only after the k-th latest stop deadline.
    PastStopDeadline,
    /// The epoch read has no successor.
    LastEpoch,
    /// The member is shutting down: no epoch was written.
    ShuttingDown,
}
