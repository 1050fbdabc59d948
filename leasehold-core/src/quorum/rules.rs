//! The rules of a lease held on several storage accounts as plain values and pure functions (the
//! rules themselves, and what each keeps, are in quorum.rs's top doc): what a member knows of each
//! replica, which replicas count, the term's epoch, the set's fingerprint, split votes. The
//! quorum model calls them (`models/quorum`), and so does the attempt on the replicas
//! (attempt.rs beside this file), through quorum.rs's re-exports.

use crate::backoff::Backoff;
use crate::epoch;
use crate::lock_delay::old_at;
use crate::pace::Pace;
use crate::timing::{Deadline, Moment, Timing};
use std::cmp::Reverse;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How many accounts a replica set may list: one (today's single account), three or five. An even
/// count keeps a majority through no more accounts down than one account fewer does.
pub const SIZES: [usize; 3] = [1, 3, 5];

/// A replica set the rules refuse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0} storage accounts: a group's lease is held on 1, 3 or 5 (with 2 or 4, a majority survives no more accounts down than with one fewer)"
)]
pub struct SetError(pub usize);

/// The fingerprint of a replica set (the rule *One replica set*): FNV-1a (64 bits) over the number
/// of accounts and then each account's identity, in the set's order, each number and length as 8
/// bytes little-endian before the identity's bytes. The same accounts in the same order give the
/// same fingerprint on every machine and every version; another list (another account, another
/// order, one account more or listed twice) gives another, but for a chance of 2^-64.
///
/// It guards against a mistake, not an attacker: whoever can write a blob's metadata could write
/// any fingerprint. Shown (and stored in a blob's metadata) as 16 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(u64);

impl Fingerprint {
    /// The fingerprint of the accounts `accounts`, in this order. An account's identity is whatever
    /// the shell names it by (the daemon: its blob endpoint, not its credential: one account
    /// reached with two credentials is one replica).
    pub fn of<A: AsRef<[u8]>>(accounts: &[A]) -> Self {
        const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
        const PRIME: u64 = 0x0000_0100_0000_01b3;
        let mix = |hash: u64, bytes: &[u8]| {
            bytes
                .iter()
                .fold(hash, |h, b| (h ^ u64::from(*b)).wrapping_mul(PRIME))
        };
        let mut hash = mix(OFFSET, &(accounts.len() as u64).to_le_bytes());
        for account in accounts {
            let bytes = account.as_ref();
            hash = mix(hash, &(bytes.len() as u64).to_le_bytes());
            hash = mix(hash, bytes);
        }
        Self(hash)
    }
}

impl fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Metadata that is not a fingerprint or a replica id (its value).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not {1} lowercase hex digits")]
pub struct ParseError(String, usize);

/// `digits` lowercase hex digits, as [`Fingerprint`] and [`ReplicaId`] are shown.
fn hex(s: &str, digits: usize) -> Result<u128, ParseError> {
    let fine = s.len() == digits && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    let value = fine.then(|| u128::from_str_radix(s, 16).ok()).flatten();
    value.ok_or_else(|| ParseError(s.to_owned(), digits))
}

impl FromStr for Fingerprint {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        let value = hex(s, 16)?;
        Ok(Self(
            u64::try_from(value).map_err(|_| ParseError(s.to_owned(), 16))?,
        ))
    }
}

/// A replica's own id, drawn at random (by the shell) when its blob is created and stored in its
/// metadata: two places in a set whose blobs carry one id are one account listed twice, which
/// counts once. Shown as 32 lowercase hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplicaId(pub u128);

impl fmt::Display for ReplicaId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:032x}", self.0)
    }
}

impl FromStr for ReplicaId {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        hex(s, 32).map(Self)
    }
}

/// The accounts that hold a group's lease, in their fixed order (the order of the config's
/// `[[storage.replica]]` tables), as the rules see them: how many, and their fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaSet {
    len: usize,
    fingerprint: Fingerprint,
}

impl ReplicaSet {
    /// The set of `accounts` (each named by its identity, [`Fingerprint::of`]), in this order: 1, 3
    /// or 5 of them. One account listed twice is allowed here and counts once ([`count`]).
    pub fn new<A: AsRef<[u8]>>(accounts: &[A]) -> Result<Self, SetError> {
        if !SIZES.contains(&accounts.len()) {
            return Err(SetError(accounts.len()));
        }
        Ok(Self {
            len: accounts.len(),
            fingerprint: Fingerprint::of(accounts),
        })
    }

    /// One account, today's single lease: its blob needs no stamp, so the set needs no name.
    pub fn one() -> Self {
        Self {
            len: 1,
            fingerprint: Fingerprint::of::<&[u8]>(&[]),
        }
    }

    /// How many accounts it lists, `n`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a set lists at least one account (for clippy's sake).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many replicas must count for a member to lead (the rule *Counting*): a majority, `k =
    /// n/2 + 1`. Any two majorities share a replica, and one replica holds one lease at a time.
    pub fn majority(&self) -> usize {
        self.len / 2 + 1
    }

    /// Its fingerprint, which every replica's blob carries.
    pub fn fingerprint(&self) -> Fingerprint {
        self.fingerprint
    }
}

/// The set's marks on one replica's blob, as read from its metadata: the fingerprint of the set
/// whose member created it, and the blob's own id. `None` where the metadata has none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Stamp {
    /// The fingerprint of the set whose member created the blob.
    pub fingerprint: Option<Fingerprint>,
    /// The blob's own id.
    pub id: Option<ReplicaId>,
}

impl Stamp {
    /// What a member of `set` writes on a blob it creates: its set's fingerprint and `id`, a fresh
    /// random id (the shell's draw).
    pub fn new(set: &ReplicaSet, id: ReplicaId) -> Self {
        Self {
            fingerprint: Some(set.fingerprint),
            id: Some(id),
        }
    }

    /// Whether a blob with this stamp is one of `set`'s replicas (the rule *One replica set*): it
    /// carries the set's fingerprint and an id. A set of one also takes a blob without a
    /// fingerprint: today's single account's, written before replica sets; a blob another set
    /// stamped counts for it no more than for any other set.
    pub fn matches(&self, set: &ReplicaSet) -> bool {
        match self.fingerprint {
            Some(f) => f == set.fingerprint && (set.len == 1 || self.id.is_some()),
            None => set.len == 1,
        }
    }
}

/// The epoch a member knows one of its replicas carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Read {
    /// Not read since this member won the lease there: the replica does not count yet.
    Unread,
    /// Read at or after the acquire: the blob carries no epoch.
    NoEpoch,
    /// Read at or after the acquire (or written by this member since): this epoch.
    Epoch(u64),
}

impl Read {
    /// The epoch, if known and any.
    pub fn epoch(self) -> Option<u64> {
        match self {
            Self::Epoch(e) => Some(e),
            Self::Unread | Self::NoEpoch => None,
        }
    }
}

/// A lease a member holds on one replica: won or renewed by a request whose success it heard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lease<I> {
    /// The deadlines from the send of the last acquire or renew whose success it heard: `kill_at =
    /// t_s + L - M`.
    pub deadline: Deadline<I>,
    /// When it heard the acquire succeed: a read counts for the epoch only from then.
    pub acquired: I,
    /// The epoch read there at or after the acquire.
    pub read: Read,
    /// The epoch of this member's whose write there it heard confirmed, if any.
    pub written: Option<u64>,
}

/// What a member knows of one replica of its set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Replica<I> {
    /// The lease it holds there, if any: none before it won one, once it was refused (a later
    /// request answered 409, 412 or 404), released or let run out.
    pub lease: Option<Lease<I>>,
    /// A request whose outcome it never learnt reached this replica (a timeout, a lost answer): it
    /// may hold the lease there without knowing. Never counted; released on giving up.
    pub unknown: bool,
    /// What the last read of the blob showed of the set's marks.
    pub stamp: Stamp,
    /// The end of its lock-delay: it counts for nobody before this instant.
    pub young_until: Option<I>,
}

impl<I> Default for Replica<I> {
    fn default() -> Self {
        Self {
            lease: None,
            unknown: false,
            stamp: Stamp::default(),
            young_until: None,
        }
    }
}

impl<I: Moment> Replica<I> {
    /// An acquire sent at `sent` succeeded, heard at `heard` (the rule *Counting*): its deadline
    /// counts from `sent`. Nothing is known yet of the epoch the blob carries.
    pub fn won(&mut self, sent: I, heard: I, timing: &Timing) {
        self.lease = Some(Lease {
            deadline: Deadline::from_sent(sent, timing),
            acquired: heard,
            read: Read::Unread,
            written: None,
        });
    }

    /// A renew sent at `sent` succeeded (the rule *Counting*): its deadline counts from `sent`,
    /// unless a request sent later succeeded already. A renew of a lease this member no longer
    /// holds changes nothing.
    pub fn renewed(&mut self, sent: I, timing: &Timing) {
        if let Some(lease) = &mut self.lease
            && sent > lease.deadline.sent
        {
            lease.deadline = Deadline::from_sent(sent, timing);
        }
    }

    /// A request on it was refused (409, 412, 404; the rule *Counting*): the lease is dropped at
    /// once, whatever deadline it had.
    pub fn refused(&mut self) {
        self.lease = None;
    }

    /// A request's outcome is unknown (the rule *Counting*): the replica gains nothing from it (a
    /// lease already held keeps the deadline of its last heard success), and is released on giving
    /// up.
    pub fn unanswered(&mut self) {
        self.unknown = true;
    }

    /// A read of the blob, sent at `sent`, showed `epoch` and `stamp` (the rules *Epochs* and *One
    /// replica set*). The epoch counts only if the read saw the blob at or after this member's
    /// acquire there: the read's ETag is the acquire's (`same_etag`), or it was sent once the
    /// acquire's success was heard.
    pub fn read(&mut self, sent: I, same_etag: bool, epoch: Option<u64>, stamp: Stamp) {
        self.stamp = stamp;
        if let Some(lease) = &mut self.lease
            && (same_etag || sent >= lease.acquired)
        {
            lease.read = epoch.map_or(Read::NoEpoch, Read::Epoch);
        }
    }

    /// The blob was `age` old at `now` by its service's clock: it counts for nobody until it is
    /// `lock_delay` old (the rule *Lock-delay per replica*: a blob found missing, and so created
    /// again, or restored from an old copy, is young, and a body that counted it before lives at
    /// most `L - M` after that). The daemon hands in [`Pace::lock_delay`] and a
    /// [`Pace::SERVICE_CLOCK`] more, as a service's clock counts whole seconds; a lock-delay
    /// running already that ends later is kept.
    pub fn aged(&mut self, now: I, age: Duration, lock_delay: Duration) {
        let until = old_at(now, age, lock_delay);
        self.young_until = Some(self.young_until.map_or(until, |was| was.max(until)));
    }

    /// A blob this member created in a brand-new group ([`brand_new`]; the rule *Lock-delay per
    /// replica*): no lock-delay.
    pub fn fresh(&mut self) {
        self.young_until = None;
    }

    /// This member's write of `epoch` there was confirmed (the rule *Epochs*): the replica carries
    /// it, and counts for the term of that epoch.
    pub fn written(&mut self, epoch: u64) {
        if let Some(lease) = &mut self.lease {
            lease.read = Read::Epoch(epoch);
            lease.written = Some(epoch);
        }
    }

    /// The lease there was released (or is let go): nothing is held, nothing unknown.
    pub fn released(&mut self) {
        self.lease = None;
        self.unknown = false;
    }

    /// The replica's part in a [`Count`] at `now`, if it counts for a member of `set` whose term's
    /// epoch is `campaign` (the rule *Counting*): a lease whose success was heard, its deadline not
    /// passed, out of its lock-delay, stamped by `set`, its epoch read, and, once the term has its
    /// epoch, that epoch written there.
    fn counts(
        &self,
        place: usize,
        set: &ReplicaSet,
        campaign: Option<u64>,
        now: I,
    ) -> Option<Counted<I>> {
        let lease = self.lease?;
        let known = lease.read != Read::Unread || lease.written.is_some();
        let settled = self.young_until.is_none_or(|until| until <= now);
        let written = campaign.is_none_or(|epoch| lease.written == Some(epoch));
        (lease.deadline.kill_at > now && settled && known && written && self.stamp.matches(set))
            .then_some(Counted {
                place,
                deadline: lease.deadline,
                epoch: lease.read.epoch(),
            })
    }
}

/// Deliberately broken rules, for a checker to show it catches each (the quorum model,
/// docs/testing.md, "The quorum model"; the simulator's `minority-leads`,
/// `deadline-from-latest`, `epoch-from-one`, `no-replica-lock-delay` and
/// `count-unknown-outcome`, docs/quorum.md). All off in production.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// Lead on `k - 1` replicas instead of a majority.
    pub minority_leads: bool,
    /// The kill deadline is the latest of the counted replicas' instead of the k-th latest.
    pub deadline_from_latest: bool,
    /// The term's epoch read from one counted replica (the first in the set's order) instead of
    /// the largest of them.
    pub epoch_from_one: bool,
    /// A replica found missing, or younger than `L + M`, counts at once: no lock-delay.
    pub no_replica_lock_delay: bool,
    /// A request whose outcome is unknown (no answer by its limit, or a failure that is not a
    /// refusal) is taken for a success.
    pub count_unknown_outcome: bool,
}

/// One replica that counts, in a [`Count`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counted<I> {
    /// Its place in the set's order.
    pub place: usize,
    /// The deadlines of its lease.
    pub deadline: Deadline<I>,
    /// The epoch it carries, read at or after this member's acquire there (or written since).
    pub epoch: Option<u64>,
}

/// The replicas that count for a member at one instant ([`count`]), and what follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Count<I> {
    counted: Vec<Counted<I>>,
    k: usize,
    from_latest: bool,
    campaign: Option<u64>,
}

/// Which of `replicas` (what a member of `set` knows of each, in the set's order) count at `now`
/// (the rules *Counting* and *One replica set*). A replica counts while its lease was won or
/// renewed by a request whose success was heard, that lease's deadline `t_s + L - M` has not passed
/// (a deadline at `now` has), no later request on it was refused, its lock-delay is over, its blob
/// carries `set`'s fingerprint and an id no replica counted before it in the set's order carries
/// (one account listed twice counts once), and its epoch was read at or after the acquire.
/// `campaign` is the term's epoch once chosen: from then on a replica counts only once that epoch's
/// write there was confirmed, so that a majority counting is a majority that confirmed it. A
/// request of unknown outcome never counts: it holds no [`Lease`].
///
/// A blob found missing (and so created again), one without an epoch, or one younger than `L + M`
/// counts for nobody until it is `L + M` old ([`Replica::aged`]). Once old, a blob without an epoch
/// counts and adds none: the wall clock in the epoch covers what it forgot ([`new_epoch`]). (Were
/// it kept out until this member's epoch is written there, a group whose majority of replicas lost
/// their epochs, its member records kept, could never lead again.)
pub fn count<I: Moment>(
    set: &ReplicaSet,
    replicas: &[Replica<I>],
    campaign: Option<u64>,
    now: I,
    mutants: Mutants,
) -> Count<I> {
    debug_assert_eq!(replicas.len(), set.len, "one replica a place of the set");
    let mut counted: Vec<Counted<I>> = Vec::with_capacity(replicas.len());
    for (place, replica) in replicas.iter().enumerate() {
        let Some(c) = replica.counts(place, set, campaign, now) else {
            continue;
        };
        let id = replica.stamp.id;
        let seen = |c: &Counted<I>| id.is_some() && replicas[c.place].stamp.id == id;
        if !counted.iter().any(seen) {
            counted.push(c);
        }
    }
    let k = set.majority() - usize::from(mutants.minority_leads);
    Count {
        counted,
        k: k.max(1),
        from_latest: mutants.deadline_from_latest,
        campaign,
    }
}

/// The k-th latest of `deadlines` (`k` from 1), by their kill instant (the rule *Counting*): `None`
/// if there are fewer than `k`.
pub fn kth_latest<I: Moment>(
    deadlines: impl IntoIterator<Item = Deadline<I>>,
    k: usize,
) -> Option<Deadline<I>> {
    if k == 1 {
        // The latest, the first of equals as the sort below has it, with no list: a lease on
        // one storage account asks this at every look at its term.
        return (deadlines.into_iter()).fold(None, |latest, d| match latest {
            Some(l) if l.kill_at >= d.kill_at => Some(l),
            _ => Some(d),
        });
    }
    let mut all: Vec<Deadline<I>> = deadlines.into_iter().collect();
    all.sort_by_key(|d| Reverse(d.kill_at));
    all.get(k.checked_sub(1)?).copied()
}

impl<I: Moment> Count<I> {
    /// The replicas that count, in the set's order.
    pub fn counted(&self) -> &[Counted<I>] {
        &self.counted
    }

    /// How many must count to lead: `k`.
    pub fn majority(&self) -> usize {
        self.k
    }

    /// Whether the member leads: a majority counts.
    pub fn leads(&self) -> bool {
        self.counted.len() >= self.k
    }

    /// Whether a majority confirmed the write of the term's epoch (the rule *Epochs*): counted
    /// with that epoch, the member leads.
    pub fn confirmed(&self) -> bool {
        self.campaign.is_some() && self.leads()
    }

    /// The member's kill deadline while it leads: the **k-th latest** deadline of the replicas that
    /// count (the rule *Counting*). Until then at least `k` of its leases are still its own, so no
    /// other member can count a majority (any two share a replica); after it, fewer may be. `None`
    /// while it does not lead.
    pub fn kill_deadline(&self) -> Option<Deadline<I>> {
        if !self.leads() {
            return None;
        }
        let k = if self.from_latest { 1 } else { self.k };
        kth_latest(self.counted.iter().map(|c| c.deadline), k)
    }

    /// Whether a body may start at `now` (the rules *Counting* and *Epochs*): the member leads and
    /// its kill deadline is at least `G` away (`now` at or before its `stop_at`). Counted with the
    /// term's epoch ([`count`]'s `campaign`), a member that leads is one a majority confirmed that
    /// epoch to.
    pub fn may_start(&self, now: I) -> bool {
        self.kill_deadline().is_some_and(|d| now <= d.stop_at)
    }

    /// The largest epoch the counted replicas carry, read at or after this member's acquire (the
    /// rule *Epochs*).
    pub fn largest_epoch(&self) -> Option<u64> {
        self.counted.iter().filter_map(|c| c.epoch).max()
    }

    /// The epoch the first counted replica carries: what the mutant `epoch-from-one` takes for
    /// [`Count::largest_epoch`].
    pub fn first_epoch(&self) -> Option<u64> {
        self.counted.first().and_then(|c| c.epoch)
    }
}

/// The epoch of a term won on a majority of `set` (the rule *Epochs*): with several replicas, the
/// largest of `read` + 1 (`read`: the counted replicas' largest epoch, [`Count::largest_epoch`]),
/// `seen` + 1 (the largest epoch this member has seen or handed out) and the wall clock in ms,
/// [`epoch::of_replicas`]. A set of one keeps the single lease's rule, [`epoch::next`] of what the
/// blob carries (the wall clock only on a blob without one; `seen` is not used). `None` past
/// `u64::MAX`.
pub fn new_epoch(
    set: &ReplicaSet,
    read: Option<u64>,
    seen: Option<u64>,
    wall_ms: u64,
) -> Option<u64> {
    if set.len == 1 {
        return epoch::next(read, wall_ms);
    }
    epoch::of_replicas(read, seen, wall_ms)
}

/// The places of the replicas the term's `epoch` must still be written to, at `now` (the rule
/// *Epochs*): every one whose lease is held and not passed and where that epoch's write was not
/// confirmed; a replica won later is among them, and counts only once its write was confirmed.
pub fn to_write<I: Moment>(replicas: &[Replica<I>], epoch: u64, now: I) -> Vec<usize> {
    let due = |r: &Replica<I>| {
        r.lease
            .is_some_and(|l| l.deadline.kill_at > now && l.written != Some(epoch))
    };
    (0..replicas.len()).filter(|&i| due(&replicas[i])).collect()
}

/// The places of the replicas a member that gives up (or yields a split vote) releases (the rules
/// *Counting* and *No split vote that lasts*): every one whose lease it holds, run out or not, and
/// every one a request of unknown outcome reached.
pub fn to_release<I>(replicas: &[Replica<I>]) -> Vec<usize> {
    let reached = |r: &Replica<I>| r.lease.is_some() || r.unknown;
    (0..replicas.len())
        .filter(|&i| reached(&replicas[i]))
        .collect()
}

/// What a look at one replica found, for [`brand_new`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looked {
    /// Its lease blob is missing and it holds no member record.
    Empty,
    /// Its lease blob exists, or it holds member records.
    Used,
    /// No answer.
    Unanswered,
}

/// Whether a group is brand-new (the rule *Lock-delay per replica*): every replica of `set`
/// answered, and on each the lease blob is missing and no member record is kept. Only then may the
/// blobs this member creates count at once ([`Replica::fresh`]); a majority found empty is not
/// enough, as the rest may be where the group has led.
pub fn brand_new(set: &ReplicaSet, looked: &[Looked]) -> bool {
    looked.len() == set.len && looked.iter().all(|l| *l == Looked::Empty)
}

/// What one round's request (every replica asked side by side) got from one replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The lease was won.
    Won,
    /// Refused: another member holds it.
    Refused,
    /// No answer, or one that says neither.
    Unknown,
}

/// What a member that won a minority in a round does (the rule *No split vote that lasts*).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    /// Retry the replicas it did not win, at once, keeping those it won.
    Retry,
    /// Release what it won at once ([`to_release`]) and wait [`split_pause`].
    Yield,
}

/// The rule *No split vote that lasts*: whether a member of `set` whose round got `round` (one
/// outcome a replica, in the set's order) is in a split vote, and what it does: `None` if it won a
/// majority or nothing. The member whose won replica comes first in the set's order among those
/// that answered (won or refused) retries the others, once (`retried`: it did already, and then
/// yields); every other member that won a minority yields. A replica down answers nobody, so the
/// next one decides.
pub fn split_vote(set: &ReplicaSet, round: &[Outcome], retried: bool) -> Option<Split> {
    let won = round.iter().filter(|o| **o == Outcome::Won).count();
    if won == 0 || won >= set.majority() {
        return None;
    }
    let first = round.iter().find(|o| **o != Outcome::Unknown);
    match first {
        Some(Outcome::Won) if !retried => Some(Split::Retry),
        _ => Some(Split::Yield),
    }
}

/// The rule *No split vote that lasts*, before a round settled: whether a member whose `round`
/// (one outcome a replica, in the set's order; those still on their way `Unknown`) won a
/// minority yields at once. It does once a replica earlier in the set's order than every replica
/// it won refused it: another member holds that replica, and that member, or one earlier still,
/// is the one that retries. Yielding then gives up only the chance that the acquires still on
/// their way win it a majority; waiting for them would keep the replica it won from the member
/// that retries for as long as a replica that does not answer takes to be cut (`R`).
pub fn yields_early(round: &[Outcome]) -> bool {
    let first = |outcome| round.iter().position(|o| *o == outcome);
    matches!((first(Outcome::Won), first(Outcome::Refused)), (Some(won), Some(refused)) if refused < won)
}

/// What a member does before its round settled ([`before_settled`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Early {
    /// Yield the split vote at once.
    Yield,
    /// What the acquires still on their way get no longer decides the round: await them as long
    /// again as the round took, then cut them and settle it.
    Cut,
    /// Retry the replicas that refused it once as long again as the round took has passed,
    /// leaving the acquires still on their way to answer.
    Retry,
}

/// The rules *Counting* and *No split vote that lasts*, before a round settled: what a member of
/// `set` whose `round` (one outcome a replica, in the set's order; `on_way`: the replicas whose
/// acquire is still on its way) got so far does now, if anything; `retried`: the round is a
/// split vote's retry. Waiting for an acquire on its way (up to `R` where a replica does not
/// answer) only to learn what is already decided keeps a majority from everyone:
/// - a member that won a minority yields at once where it yields whatever comes
///   ([`yields_early`], or a retry that no answer on its way can make a majority);
/// - the member whose first won replica comes before every one refused and every one on its
///   way retries whatever those answers are: it retries the replicas that refused it after as
///   long again as its round took (the members yielding to it release in that time), and an
///   answer on its way still counts if it comes;
/// - a member that won nothing, where no answer on its way can make a majority, awaits them as
///   long again as its round took and then gives up (one that answers as fast as the others
///   still decides whether its lease id is spent, [`Outcome::Refused`] everywhere).
///
/// A member with an acquire on its way before its first won replica waits for it: that answer
/// decides whether it retries.
pub fn before_settled(
    set: &ReplicaSet,
    round: &[Outcome],
    on_way: &[bool],
    retried: bool,
) -> Option<Early> {
    let won = round.iter().filter(|o| **o == Outcome::Won).count();
    let out = on_way.iter().filter(|o| **o).count();
    let may_win = won + out >= set.majority();
    if won >= set.majority() {
        return None;
    }
    if won > 0 && (yields_early(round) || (retried && !may_win)) {
        return Some(Early::Yield);
    }
    let Some(first_won) = round.iter().position(|o| *o == Outcome::Won) else {
        return (!may_win).then_some(Early::Cut);
    };
    if retried || on_way[..first_won].iter().any(|o| *o) {
        return None;
    }
    match (round.contains(&Outcome::Refused), may_win) {
        (true, _) => Some(Early::Retry),
        (false, false) => Some(Early::Cut),
        (false, true) => None,
    }
}

/// How long a member that yields its `round`-th split vote in a row (from 1) waits before it tries
/// again (the rule *No split vote that lasts*): a pause from [`Pace::SPLIT_PAUSE_LEAST`] doubling
/// with each round up to [`Pace::split_pause_longest`], each a random half to whole of it by `draw`
/// (the shell's, uniform in `[0, 1)`), so that members that split once do not split again in step.
pub fn split_pause(pace: &Pace, round: u32, draw: f64) -> Duration {
    let mut pauses = Backoff::new(Pace::SPLIT_PAUSE_LEAST, pace.split_pause_longest());
    // Past 32 doublings every pause is the longest.
    for _ in 1..round.min(32) {
        pauses.next_pause(0.0);
    }
    pauses.next_pause(draw)
}
