//! Members and the line of succession (design section 10): this instance's member record, kept
//! by a task of its own ([`Membership`]); the line as last listed, and what each instance's
//! part in it is ([`Line`], [`Part`]); the successor a leader hands its lease to
//! ([`successor`]).
//!
//! The record is a blob beside the lease blob, held under a lease of its own: its liveness. A
//! member whose record lease is not `leased` is dead. The record says who the member is, its
//! priority and the lease id it acquires the group's lease with; the service's creation time
//! says when it joined (the record is created anew at every join, so a restarted member goes to
//! the back of its priority). The line is: highest priority first, then earliest joined, then
//! identity.
//!
//! Only the successor (the first live member in line that does not lead and is not in a
//! cooldown) polls the lease; the others watch the lease blob with a read every
//! `5 x acquire_interval` and list the members only when that shows something they cannot
//! place, or rarely ([`LIST_INTERVAL`]): List Blobs costs ten times a read.

use super::{LeaseOp, Observer, timed};
use crate::clock;
use crate::config::Election;
use crate::fmt::human;
use crate::store::{
    BlobState, ETag, Failure, LeaseId, LeaseState, LeaseStore, Member, MemberKey, MemberRecord,
    SlotRecord, StoreError,
};
use crate::timing::{POLL_JITTER, Timing};
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The lease on a member record: how long a crashed member still looks alive, at most.
pub(crate) const RECORD_LEASE: Duration = Duration::from_secs(30);

/// How often a member renews its record lease: three times per lease, so that two renews can
/// fail in a row without the member looking dead.
pub(crate) const RECORD_RENEW: Duration = Duration::from_secs(10);

/// How often every member lists the line anyway, to learn of joins and deaths it had no other
/// sign of (stretched by up to 20 % at random).
pub(crate) const LIST_INTERVAL: Duration = Duration::from_secs(300);

/// How often the leader lists the line (stretched the same way): it is the one whose view
/// `/status` users look at first, and the one that must learn of a member that outranks it
/// (issue 17's `preempt_after`, 30 s by default). Two lists a minute: about 86,000 a month.
pub(crate) const LEADER_LIST_INTERVAL: Duration = Duration::from_secs(30);

/// How long a member that was handed the lease and did not take it is passed over (design
/// section 16): longer than a crashed member's record looks alive, as long as the rare listing
/// of every member. A forged record (anyone who can write to the container can make one) is
/// tried again after this long.
pub(crate) const PASSED_OVER_FOR: Duration = Duration::from_secs(300);

/// A leader deletes the record of a member dead for longer than this.
pub(crate) const DEAD_RECORD_AGE: Duration = Duration::from_secs(600);

/// How many watch periods (of `acquire_interval` each) a member that is not the successor
/// waits between two reads of the lease blob.
pub(crate) const WATCH_PERIODS: u32 = 5;

/// After a failed record request, the next one comes this soon.
const RETRY: Duration = Duration::from_secs(2);

/// The line of succession: priority (higher first), then joined (earlier first), then identity.
pub(crate) fn order(records: &mut [MemberRecord]) {
    records.sort_by(|a, b| {
        b.member
            .priority
            .cmp(&a.member.priority)
            .then(a.joined.cmp(&b.joined))
            .then_with(|| a.identity().cmp(b.identity()))
    });
}

/// The member a leader hands its lease to: the first in `line` (in succession order) that is
/// alive, not in a cooldown at `now`, not `leader`, and not `skipped` (for slots: members that
/// hold one already).
pub(crate) fn successor<'a>(
    line: &'a [MemberRecord],
    leader: Option<&str>,
    now: OffsetDateTime,
    skipped: impl Fn(&MemberRecord) -> bool,
) -> Option<&'a MemberRecord> {
    line.iter().find(|r| {
        r.is_alive() && !r.member.in_standby(now) && Some(r.identity()) != leader && !skipped(r)
    })
}

/// A member's part, as the table of `status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Part {
    /// Holds the lease.
    Leader,
    /// First in line: the leader hands its lease to it; it polls the lease.
    Successor,
    /// Alive, in line behind the successor: watches.
    Follower,
    /// Alive, out of the election for a while (a health cooldown).
    Standby,
    /// Its record lease is not held.
    Dead,
}

/// One member as the table shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct MemberRow {
    pub identity: String,
    pub priority: i64,
    /// Its part: leader, successor, follower, standby or dead.
    #[serde(rename = "role")]
    pub part: Part,
    /// Whether its record lease is held.
    pub alive: bool,
    /// Alive: since it joined; dead: since this instance first saw it dead (unknown to a
    /// one-shot `status`).
    pub since: Option<String>,
    pub advertise: Option<String>,
    /// While in standby: until when.
    pub standby_until: Option<String>,
    /// With `[lease].slots` > 1: the slot it holds, as the listing of slots shows (design
    /// section 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<u32>,
}

/// The line: the members in order with each one's part, given who leads.
/// A member passed over (design section 16) is no successor: `passed_over` says who is.
pub(crate) fn table(
    line: &[MemberRecord],
    leader: Option<&str>,
    now: OffsetDateTime,
    dead_since: &BTreeMap<MemberKey, OffsetDateTime>,
    passed_over: &dyn Fn(&str) -> bool,
) -> Vec<MemberRow> {
    let next = successor(line, leader, now, |r| passed_over(r.identity()))
        .map(|r| r.identity().to_owned());
    line.iter()
        .map(|r| {
            let part = if !r.is_alive() {
                Part::Dead
            } else if Some(r.identity()) == leader {
                Part::Leader
            } else if r.member.in_standby(now) {
                Part::Standby
            } else if next.as_deref() == Some(r.identity()) {
                Part::Successor
            } else {
                Part::Follower
            };
            let since = if r.is_alive() {
                Some(r.joined)
            } else {
                dead_since.get(&r.key).copied()
            };
            MemberRow {
                identity: r.identity().to_owned(),
                priority: r.member.priority,
                part,
                alive: r.is_alive(),
                since: since.map(crate::store::rfc3339),
                advertise: r.member.advertise.clone(),
                standby_until: r
                    .member
                    .standby_until
                    .filter(|_| part == Part::Standby)
                    .map(crate::store::rfc3339),
                slot: None,
            }
        })
        .collect()
}

/// Where this instance's record stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Standing {
    /// Not (yet) in line: joining, or storage failed meanwhile.
    Joining,
    /// In line: the record exists under our lease.
    Joined,
    /// Another live instance holds the record of this identity (or this instance before a
    /// restart, whose record lease has not yet expired): no place in line.
    Duplicate,
    /// Storage refuses member records to these credentials (they need to list, create and
    /// delete blobs in the container): no records, and this instance polls as without them.
    Refused(String),
}

/// What a follower does next, from where it stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Place {
    /// Poll the lease with acquire every `acquire_interval`: the successor, or an instance
    /// without a line to place itself in (no records, or none listed yet).
    Poll,
    /// Watch the lease blob with a read every `5 x acquire_interval`.
    Watch,
}

/// The line as this instance knows it, shared by the elector and the record keeper.
pub(crate) struct Line {
    pub standing: Standing,
    /// The members in succession order, as last listed.
    pub members: Vec<MemberRecord>,
    /// When they were listed (`None`: never).
    pub listed: Option<Instant>,
    /// The leader as last known: whom the lease blob named while leased, this instance while it
    /// leads, the member it handed the lease to.
    pub leader: Option<String>,
    /// Whom the lease blob's metadata named last, leased or not: while the lease is free (its
    /// leader crashed, or released with nobody to hand it to), the successor is the first live
    /// member after that one, as for a held lease, and not that leader itself, whose record
    /// may stay alive for up to [`RECORD_LEASE`] after a crash.
    pub last_leader: Option<String>,
    /// Leaders seen to give the lease up since the last listing. In a rolling restart each of
    /// them stopped (its record deleted) and came back at the back of the line, while a
    /// watcher's listing, minutes old, still shows its old record ahead: judging the line
    /// without them is what lets the member next in line learn it at its next read, not at its
    /// next listing. A wrong guess costs one listing, which clears this.
    pub former: Vec<String>,
    /// The handoff notice last read on the lease blob.
    pub notice: Option<String>,
    /// The last leader's metadata (epoch, since when) as last read, for people; with when it
    /// was read.
    pub holder: Option<(crate::store::Holder, OffsetDateTime)>,
    /// What our record should say.
    pub published: Member,
    /// Whether the record says it.
    pub written: bool,
    /// Whether this instance leads (then it also deletes long-dead records).
    pub leading: bool,
    /// When each dead record was first seen dead, by this instance.
    pub dead_since: BTreeMap<MemberKey, OffsetDateTime>,
    /// `[lease].slots` of this instance (design section 12).
    pub slots: u32,
    /// The slot blobs as last listed (only with more than one slot), as this instance has
    /// updated them since (its own terms and handoffs).
    pub slot_states: Vec<SlotRecord>,
    /// The slot this instance holds, while it leads.
    pub holding: Option<u32>,
    /// The group's slot count, while it differs from ours (this instance does not lead).
    pub mismatch: Option<u32>,
    /// Same, on the monotonic clock, for the 10-minute rule.
    dead_seen: BTreeMap<MemberKey, Instant>,
    /// When our record was created (answered), for its `settled` mark.
    created: Option<Instant>,
    /// While leading: the member this instance will hand over to, and from when
    /// (`preempt`).
    pub preempting: Option<(String, OffsetDateTime)>,
    /// Members that were handed the lease and did not take it, and until when they are
    /// passed over (design section 16): seen by this instance, or named by a notice it read.
    pub passed_over: BTreeMap<String, Instant>,
}

impl Line {
    /// Our place, from the line as last listed.
    pub fn place(&self) -> Place {
        match &self.standing {
            Standing::Joining | Standing::Refused(_) => Place::Poll,
            Standing::Duplicate => Place::Watch,
            Standing::Joined if self.listed.is_none() => Place::Poll,
            Standing::Joined if self.slots > 1 => {
                let me = self.published.identity.as_str();
                if super::slots::pollers(self).contains(&me) {
                    Place::Poll
                } else {
                    Place::Watch
                }
            }
            Standing::Joined => {
                if self.is_successor() {
                    Place::Poll
                } else {
                    Place::Watch
                }
            }
        }
    }

    /// Whether this instance is the successor: named by a handoff notice, or first in line
    /// after the leader.
    pub fn is_successor(&self) -> bool {
        let me = self.published.identity.as_str();
        if self.notice.as_deref() == Some(me) && self.leader.as_deref() != Some(me) {
            return true;
        }
        successor(
            &self.members,
            self.leader.as_deref().or(self.last_leader.as_deref()),
            crate::clock::wall(),
            |r| self.is_passed_over(r.identity()),
        )
        .is_some_and(|r| r.identity() == me)
    }

    /// Whether `identity` is passed over now: it was handed the lease lately and did not
    /// take it.
    pub fn is_passed_over(&self, identity: &str) -> bool {
        self.passed_over
            .get(identity)
            .is_some_and(|until| Instant::now() < *until)
    }

    /// Passes `identity` over for [`PASSED_OVER_FOR`] from now (unless it is already).
    pub fn pass_over(&mut self, identity: &str) {
        let now = Instant::now();
        self.passed_over.retain(|_, until| *until > now);
        self.passed_over
            .entry(identity.to_owned())
            .or_insert(now + PASSED_OVER_FOR);
    }

    /// Whether this instance would be the successor if `gone`, and every other leader seen to
    /// give the lease up since the last listing ([`Line::former`]), were not in line.
    pub fn is_successor_without(&self, gone: &str) -> bool {
        let me = self.published.identity.as_str();
        successor(
            &self.members,
            self.leader.as_deref(),
            crate::clock::wall(),
            |r| {
                r.identity() == gone
                    || self.former.iter().any(|f| f == r.identity())
                    || self.is_passed_over(r.identity())
            },
        )
        .is_some_and(|r| r.identity() == me)
    }

    /// A leader this instance saw give the lease up to another (it reads the blob; it does not
    /// list): until the next listing, the line is judged as if `old` had left it.
    pub fn gave_up(&mut self, old: &str) {
        if !self.former.iter().any(|f| f == old) {
            self.former.push(old.to_owned());
        }
    }

    /// Whether the line as listed knows `identity`.
    pub fn knows(&self, identity: &str) -> bool {
        self.members.iter().any(|r| r.identity() == identity)
    }

    /// This instance's place in line, from 1; `None` when not in it.
    pub fn position(&self) -> Option<usize> {
        let me = self.published.identity.as_str();
        self.members
            .iter()
            .filter(|r| r.is_alive())
            .position(|r| r.identity() == me)
            .map(|p| p + 1)
    }

    /// Takes a fresh listing.
    fn listed(&mut self, mut records: Vec<MemberRecord>) {
        order(&mut records);
        let (now, wall) = (Instant::now(), crate::clock::wall());
        self.dead_seen
            .retain(|k, _| records.iter().any(|r| &r.key == k && !r.is_alive()));
        self.dead_since
            .retain(|k, _| records.iter().any(|r| &r.key == k && !r.is_alive()));
        for r in records.iter().filter(|r| !r.is_alive()) {
            self.dead_seen.entry(r.key.clone()).or_insert(now);
            self.dead_since.entry(r.key.clone()).or_insert(wall);
        }
        self.members = records;
        self.listed = Some(now);
        self.former.clear();
    }

    /// Takes a fresh listing of the slot blobs; slot 0's holder is the leader people see.
    fn slots_listed(&mut self, slots: Vec<SlotRecord>) {
        if !self.leading
            && let Some(zero) = slots.iter().find(|s| s.slot == 0)
        {
            self.leader = match zero.lease {
                LeaseState::Leased => zero.holder.as_ref().map(|h| h.identity.clone()),
                _ => None,
            };
        }
        self.slot_states = slots;
    }

    /// Takes what a read of the lease blob said of its holder and notice.
    pub fn read(&mut self, state: &BlobState) {
        self.leader = match state.lease {
            LeaseState::Leased => state.holder.as_ref().map(|h| h.identity.clone()),
            _ => None,
        };
        self.last_leader = state.holder.as_ref().map(|h| h.identity.clone());
        self.notice = state.successor.clone();
        for identity in &state.passed_over {
            self.pass_over(identity);
        }
        self.holder = state
            .holder
            .clone()
            .filter(|_| state.lease == LeaseState::Leased)
            .map(|h| (h, crate::clock::wall()));
    }

    /// The table of the line as listed.
    pub fn table(&self) -> Vec<MemberRow> {
        table(
            &self.members,
            self.leader.as_deref(),
            crate::clock::wall(),
            &self.dead_since,
            &|identity| self.is_passed_over(identity),
        )
    }

    /// Records dead for longer than [`DEAD_RECORD_AGE`], as this instance has seen them.
    fn long_dead(&self) -> Vec<(MemberKey, ETag)> {
        let now = Instant::now();
        self.members
            .iter()
            .filter(|r| !r.is_alive())
            .filter(|r| {
                self.dead_seen
                    .get(&r.key)
                    .is_some_and(|at| now.saturating_duration_since(*at) >= DEAD_RECORD_AGE)
            })
            .map(|r| (r.key.clone(), r.etag.clone()))
            .collect()
    }
}

/// The leader as a member knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct LeaderRow {
    pub identity: String,
    pub epoch: u64,
    /// When its leadership began (RFC 3339).
    pub since: String,
    /// When this instance last read that from the lease blob (RFC 3339).
    pub seen_at: String,
}

/// What `status` and `/metrics` show of the line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct LineView {
    /// The leader, as last read.
    pub leader: Option<LeaderRow>,
    /// The member the leader is handing the lease to (the handoff notice), while it does.
    pub handing_to: Option<String>,
    /// The members in order with their parts.
    pub members: Vec<MemberRow>,
    /// This instance's place in line, from 1 (`None`: not in line).
    pub position: Option<usize>,
    /// Why this instance has no place, when it has none.
    pub standing: Option<String>,
    /// When the line was last listed (RFC 3339).
    pub listed_at: Option<String>,
    /// With `[lease].slots` > 1: every slot, as last listed (design section 12).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub slots: Vec<super::slots::SlotRow>,
    /// The group's slot count while it differs from this instance's (it does not lead).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot_mismatch: Option<u32>,
    /// On the leader: a preemption it has armed (section 11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preempting: Option<PendingPreemption>,
}

/// A preemption the leader has armed: to whom, and from when (RFC 3339) at the earliest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub(crate) struct PendingPreemption {
    pub identity: String,
    pub at: String,
}

/// This instance as a member: its record, kept by a task of its own, and the line as last
/// listed. Dropping it stops the task (the record then expires within [`RECORD_LEASE`]);
/// [`Membership::leave`] deletes the record first.
pub(crate) struct Membership {
    pub line: Arc<Mutex<Line>>,
    key: MemberKey,
    /// The lease on our record.
    record_lease: LeaseId,
    poke: Arc<Notify>,
    /// Told when a listing by the record keeper makes this instance poll (next in line), so
    /// that a campaign that is waiting out a watch period polls at once.
    placed: Arc<Notify>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What the record keeper works with.
struct Keeper<S> {
    store: Arc<S>,
    observer: Arc<dyn Observer>,
    timing: Timing,
    line: Arc<Mutex<Line>>,
    key: MemberKey,
    record_lease: LeaseId,
    poke: Arc<Notify>,
    placed: Arc<Notify>,
    /// `[election].preempt_after`: when the record says it is settled.
    settle_after: Option<Duration>,
}

impl Membership {
    /// Joins the line (in the background) as `identity`, acquiring the group's lease with
    /// `acquires_with` until told otherwise, and (with `advertise`) taking wake-ups that carry
    /// `wake_token`.
    #[allow(clippy::too_many_arguments)]
    pub fn start<S: LeaseStore>(
        store: Arc<S>,
        observer: Arc<dyn Observer>,
        timing: Timing,
        identity: &str,
        election: &Election,
        acquires_with: LeaseId,
        wake_token: &crate::secret::Secret,
        slots: u32,
    ) -> Self {
        let line = Arc::new(Mutex::new(Line {
            standing: Standing::Joining,
            members: Vec::new(),
            listed: None,
            leader: None,
            last_leader: None,
            former: Vec::new(),
            notice: None,
            holder: None,
            published: Member {
                identity: identity.to_owned(),
                priority: election.priority,
                acquires_with,
                advertise: election.advertise.clone(),
                // Only a member that takes wake-ups needs one.
                wake_token: election.advertise.as_ref().map(|_| wake_token.clone()),
                standby_until: None,
                slots,
                settled: None,
            },
            written: false,
            leading: false,
            dead_since: BTreeMap::new(),
            dead_seen: BTreeMap::new(),
            slots,
            slot_states: Vec::new(),
            holding: None,
            mismatch: None,
            created: None,
            preempting: None,
            passed_over: BTreeMap::new(),
        }));
        let key = MemberKey::of(identity);
        let record_lease = LeaseId::random();
        let poke = Arc::new(Notify::new());
        let placed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let keeper = Keeper {
            store,
            observer,
            timing,
            line: line.clone(),
            key: key.clone(),
            record_lease,
            poke: poke.clone(),
            placed: placed.clone(),
            settle_after: election.preempt_after,
        };
        let task = crate::spawn::spawn(keeper.run(stop.clone()));
        Self {
            line,
            key,
            record_lease,
            poke,
            placed,
            stop,
            task: Some(task),
        }
    }

    /// Told when a listing of the record keeper finds this instance next in line (a member
    /// that joined while its campaign had begun a watch period, say: the leader may be handing
    /// it the lease right now, and waits for it only the confirm window). Only futures waiting
    /// at that moment are told: enable it, then check [`Line::place`], then wait.
    pub fn placed_to_poll(&self) -> tokio::sync::futures::Notified<'_> {
        self.placed.notified()
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut Line) -> T) -> T {
        f(&mut self.line.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// From now on the group's lease is acquired with `id`: the record says so at once.
    pub fn acquire_with(&self, id: LeaseId) {
        self.with(|l| {
            if l.published.acquires_with != id {
                l.published.acquires_with = id;
                l.written = false;
            }
        });
        self.poke.notify_one();
    }

    /// This instance leads the term with `epoch` since `since` (`None`: no longer leads).
    pub fn leading(&self, term: Option<(u64, OffsetDateTime, LeaseId)>) {
        // The keeper lists on the leader's cadence from now on (or the follower's again).
        self.poke.notify_one();
        self.with(|l| {
            l.leading = term.is_some();
            if term.is_none() && l.leader.as_deref() == Some(l.published.identity.as_str()) {
                // No longer ours: whoever leads now is learnt from the blob, not assumed to
                // be this instance still (design section 16).
                l.leader = None;
            }
            if let Some((epoch, acquired_at, lease)) = term {
                l.leader = Some(l.published.identity.clone());
                l.notice = None;
                l.holder = Some((
                    crate::store::Holder {
                        identity: l.published.identity.clone(),
                        epoch,
                        acquired_at,
                        lease: Some(lease),
                        slots: None,
                    },
                    crate::clock::wall(),
                ));
            }
        });
    }

    /// This instance holds slot `slot` now (`None`: none).
    pub fn holding(&self, slot: Option<u32>) {
        self.with(|l| {
            let me = l.published.identity.clone();
            match slot {
                Some(i) => l.set_slot_holder(i, Some(&me)),
                None => {
                    // Unless it was handed on meanwhile (the handoff named the next holder).
                    let mine = |r: &SlotRecord| r.holder.as_ref().is_some_and(|h| h.identity == me);
                    if let Some(i) = l.holding
                        && l.slot_states.iter().any(|r| r.slot == i && mine(r))
                    {
                        l.set_slot_holder(i, None);
                    }
                }
            }
            l.holding = slot;
        });
    }

    /// Out of the election until `until` (`None`: back in): the record says so; awaited, so
    /// that no leader hands this instance the lease meanwhile.
    pub async fn standby<S: LeaseStore>(
        &self,
        store: &S,
        observer: &dyn Observer,
        until: Option<OffsetDateTime>,
        limit: Instant,
    ) {
        let member = self.with(|l| {
            l.published.standby_until = until;
            l.written = false;
            (l.standing == Standing::Joined).then(|| l.published.clone())
        });
        let Some(member) = member else { return };
        let written = timed(
            observer,
            LeaseOp::MemberWrite,
            limit,
            store.write_member(&self.key, self.record_lease, &member),
        )
        .await;
        match written {
            Ok(()) => self.with(|l| l.written = l.published == member),
            Err(e) => {
                tracing::warn!(error = %e, "could not mark this instance's member record; the record keeper tries again");
                self.poke.notify_one();
            }
        }
    }

    /// Back from a cooldown: the record no longer says standby.
    pub fn back_in_line(&self) {
        let changed = self.with(|l| {
            let changed = l.published.standby_until.take().is_some();
            l.written &= !changed;
            changed
        });
        if changed {
            self.poke.notify_one();
        }
    }

    /// Lists the line now; `Err` leaves the line as it was.
    pub async fn list<S: LeaseStore>(
        &self,
        store: &S,
        observer: &dyn Observer,
        limit: Instant,
    ) -> Result<(), StoreError> {
        list(store, observer, &self.line, limit).await
    }

    /// Starts leaving the line without waiting: the record task deletes the record in the
    /// background ([`Membership::leave`] then waits for it). A leader that stops hands the
    /// lease over and departs at once, so that the members that list while it confirms the
    /// handoff do not count it in line.
    pub fn depart(&self) {
        self.stop.cancel();
    }

    /// Leaves the line: stops keeping the record and deletes it (under its lease), so that no
    /// leader hands this instance the lease any more.
    pub async fn leave(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// What `status` shows of the line.
    pub fn view(&self) -> LineView {
        self.with(|l| view(l))
    }
}

fn view(l: &Line) -> LineView {
    LineView {
        leader: l.holder.as_ref().map(|(h, seen)| LeaderRow {
            identity: h.identity.clone(),
            epoch: h.epoch,
            since: crate::store::rfc3339(h.acquired_at),
            seen_at: crate::store::rfc3339(*seen),
        }),
        handing_to: l.notice.clone(),
        members: l.table(),
        position: (l.standing == Standing::Joined)
            .then(|| l.position())
            .flatten(),
        standing: match &l.standing {
            Standing::Joined => None,
            Standing::Joining => Some("joining".to_owned()),
            Standing::Duplicate => {
                Some("another live instance holds the member record of this identity".to_owned())
            }
            Standing::Refused(why) => Some(why.clone()),
        },
        slots: match l.slots {
            1 => Vec::new(),
            n => super::slots::slot_rows(&l.slot_states, n),
        },
        slot_mismatch: l.mismatch,
        listed_at: l.listed.map(|at| {
            let ago = Instant::now().saturating_duration_since(at);
            crate::store::rfc3339(
                crate::clock::wall() - time::Duration::seconds(ago.as_secs() as i64),
            )
        }),
        preempting: l
            .preempting
            .as_ref()
            .filter(|_| l.leading)
            .map(|(identity, at)| PendingPreemption {
                identity: identity.clone(),
                at: crate::store::rfc3339(*at),
            }),
    }
}

/// Lists the members into `line`, and tells the observer.
pub(super) async fn list<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    line: &Mutex<Line>,
    limit: Instant,
) -> Result<(), StoreError> {
    let slotted = line.lock().unwrap_or_else(|e| e.into_inner()).slots > 1;
    let (records, slots) = if slotted {
        let (records, slots) = timed(observer, LeaseOp::List, limit, store.list_group()).await?;
        (records, Some(slots))
    } else {
        let records = timed(observer, LeaseOp::List, limit, store.list_members()).await?;
        (records, None)
    };
    let view = {
        let mut l = line.lock().unwrap_or_else(|e| e.into_inner());
        l.listed(records);
        if let Some(slots) = slots {
            l.slots_listed(slots);
        }
        view(&l)
    };
    observer.line(&view);
    Ok(())
}

/// How the last attempt to join or keep the record went.
enum Kept {
    /// In line; next renew after [`RECORD_RENEW`].
    Ok,
    /// Try again after [`RETRY`].
    Retry,
    /// Try again after a [`RECORD_RENEW`] (someone else holds the record) or a
    /// [`LIST_INTERVAL`] (refused credentials).
    Later(Duration),
}

impl<S: LeaseStore> Keeper<S> {
    fn with<T>(&self, f: impl FnOnce(&mut Line) -> T) -> T {
        f(&mut self.line.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn limit(&self) -> Instant {
        clock::now() + self.timing.request_timeout()
    }

    fn set_standing(&self, standing: Standing) {
        let changed = self.with(|l| {
            let changed = l.standing != standing;
            l.standing = standing.clone();
            changed
        });
        if !changed {
            return;
        }
        match &standing {
            Standing::Joined => tracing::info!("joined the line of members"),
            Standing::Duplicate => tracing::warn!(
                record = %self.key,
                "another instance holds the member record of this identity (another instance \
                 with this identity, or this instance before a restart whose record lease has \
                 not expired yet, within {}): this instance stays out of line (it still takes \
                 a lease nobody holds) and tries again every {}",
                human(RECORD_LEASE),
                human(RECORD_RENEW)
            ),
            Standing::Refused(why) => tracing::warn!(
                "{why}; this instance has no member record and polls the lease every \
                 acquire_interval as without members; trying again every {}",
                human(LIST_INTERVAL)
            ),
            Standing::Joining => {}
        }
        let view = self.with(|l| view(l));
        self.observer.line(&view);
    }

    /// The record task: join, renew every [`RECORD_RENEW`], write what changed, list every
    /// [`LIST_INTERVAL`] (a leader then deletes long-dead records), and at the end leave.
    async fn run(self, stop: CancellationToken) {
        let mut next_keep = Instant::now();
        // When the line was last listed or tried, and how much this round's listing period is
        // stretched (so that members do not list in step).
        let mut last_try = Instant::now();
        let mut stretch = 1.0 + POLL_JITTER * fastrand::f64();
        // When a leader last deleted long-dead records. Listings by others (the preemption
        // watch) keep the line fresh, so that this task may never list itself while it leads:
        // tidying goes by the line, however it was listed.
        let mut tidied: Option<Instant> = None;
        loop {
            let joined = self.with(|l| l.standing == Standing::Joined);
            if Instant::now() >= next_keep {
                let kept = if joined {
                    self.renew().await
                } else {
                    self.join().await
                };
                next_keep = Instant::now()
                    + match kept {
                        Kept::Ok => RECORD_RENEW,
                        Kept::Retry => RETRY,
                        Kept::Later(d) => d,
                    };
                if !joined && matches!(kept, Kept::Ok) {
                    // A first look at the line, to know our place.
                    last_try = Instant::now();
                    let _ = self.list_now().await;
                }
            }
            let settle_at = self.settle_at();
            if settle_at.is_some_and(|at| Instant::now() >= at) {
                self.settle();
            }
            if self.with(|l| l.standing == Standing::Joined && !l.written) {
                self.write().await;
            }
            // A member that polls lists as often as the leader: nothing on the lease blob tells
            // a poller that a member joined ahead of it (members that joined together may each
            // have listed before the other's record existed, and then both poll), so without
            // this a second poller would go on for a whole LIST_INTERVAL.
            let (listed, leading, polls) = self.with(|l| {
                let polls = l.standing == Standing::Joined && l.place() == Place::Poll;
                (l.listed, l.leading, polls)
            });
            let period = match leading || polls {
                true => LEADER_LIST_INTERVAL,
                false => LIST_INTERVAL,
            };
            let next_list =
                listed.map_or(last_try, |at| at.max(last_try)) + period.mul_f64(stretch);
            if Instant::now() >= next_list {
                last_try = Instant::now();
                stretch = 1.0 + POLL_JITTER * fastrand::f64();
                let _ = self.list_now().await;
                tidied = Some(Instant::now());
                self.tidy().await;
                continue;
            }
            let listed_since_tidy = listed.is_some_and(|at| tidied.is_none_or(|t| at > t));
            let tidy_due = tidied.is_none_or(|t| t.elapsed() >= LEADER_LIST_INTERVAL);
            if leading && listed_since_tidy && tidy_due {
                tidied = Some(Instant::now());
                self.tidy().await;
            }
            let unwritten = self.with(|l| l.standing == Standing::Joined && !l.written);
            let wake_at = if unwritten {
                Instant::now() + RETRY
            } else {
                let next = next_keep.min(next_list);
                self.settle_at().map_or(next, |at| next.min(at))
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => break,
                () = self.poke.notified() => {}
                () = tokio::time::sleep_until(wake_at) => {}
            }
        }
        self.leave().await;
    }

    /// List, and read the lease blob for its holder: pollers learn of leaders this way.
    async fn list_now(&self) -> Result<(), StoreError> {
        let listed = self.list_and_read().await;
        let polls =
            self.with(|l| l.standing == Standing::Joined && !l.leading && l.place() == Place::Poll);
        if polls {
            // A campaign in a watch period polls at once; one that polls already is not
            // waiting for this, and no permit is left for later.
            self.placed.notify_waiters();
        }
        listed
    }

    async fn list_and_read(&self) -> Result<(), StoreError> {
        list(&*self.store, &*self.observer, &self.line, self.limit()).await?;
        if self.with(|l| l.slots > 1) {
            // The listing showed the slot blobs, slot 0 (the group's blob) among them.
            return Ok(());
        }
        if self.with(|l| l.leading) {
            return Ok(());
        }
        let read = timed(
            &*self.observer,
            LeaseOp::Read,
            self.limit(),
            self.store.read(),
        )
        .await;
        if let Ok(state) = read {
            let view = self.with(|l| {
                // A leader knows better (it may have begun leading meanwhile).
                (!l.leading).then(|| {
                    l.read(&state);
                    view(l)
                })
            });
            if let Some(view) = view {
                self.observer.line(&view);
            }
        }
        Ok(())
    }

    /// When our record is to say it is settled (`preempt_after` after its creation), while it
    /// does not yet.
    fn settle_at(&self) -> Option<Instant> {
        let after = self.settle_after?;
        self.with(|l| {
            let unsettled = l.standing == Standing::Joined && l.published.settled.is_none();
            l.created.filter(|_| unsettled).map(|c| c + after)
        })
    }

    /// The record says how long this instance has been a member: from now on a leader of
    /// lower priority may hand over to it (section 11).
    fn settle(&self) {
        self.with(|l| {
            if let Some(created) = l.created {
                l.published.settled = Some(Instant::now().saturating_duration_since(created));
                l.written = false;
            }
        });
    }

    /// Joins: the record is created anew (so that its creation time is this join), under a
    /// lease of ours.
    async fn join(&self) -> Kept {
        let member = self.with(|l| {
            // A new membership: settled again only `preempt_after` from now.
            l.published.settled = None;
            l.created = None;
            l.published.clone()
        });
        // A record left by this identity before (a crash, an expired lease) goes first; one
        // whose lease is held belongs to a live instance.
        let deleted = timed(
            &*self.observer,
            LeaseOp::MemberDelete,
            self.limit(),
            self.store.delete_member(&self.key, None, None),
        )
        .await;
        match deleted {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Missing => {}
            Err(e) if e.code() == Some("LeaseIdMissing") => {
                self.set_standing(Standing::Duplicate);
                return Kept::Later(RECORD_RENEW);
            }
            Err(e) => return self.failed("delete the old member record", e),
        }
        let created = timed(
            &*self.observer,
            LeaseOp::MemberCreate,
            self.limit(),
            self.store.create_member(&self.key, &member),
        )
        .await;
        match created {
            Ok(()) => self.with(|l| l.created = Some(Instant::now())),
            // Created meanwhile by another instance of this identity.
            Err(StoreError::Status {
                status: 409 | 412, ..
            }) => {
                self.set_standing(Standing::Duplicate);
                return Kept::Later(RECORD_RENEW);
            }
            Err(e) => return self.failed("create the member record", e),
        }
        self.take_lease(member).await
    }

    /// Takes the record's lease (after creating it, or after ours lapsed and was lost).
    async fn take_lease(&self, member: Member) -> Kept {
        let acquired = timed(
            &*self.observer,
            LeaseOp::MemberAcquire,
            self.limit(),
            self.store
                .acquire_member(&self.key, self.record_lease, RECORD_LEASE.as_secs() as u8),
        )
        .await;
        match acquired {
            Ok(()) => {
                self.with(|l| l.written = l.published == member);
                self.set_standing(Standing::Joined);
                Kept::Ok
            }
            Err(e) if e.failure() == Failure::Held => {
                self.set_standing(Standing::Duplicate);
                Kept::Later(RECORD_RENEW)
            }
            Err(e) if e.failure() == Failure::Missing => {
                self.set_standing(Standing::Joining);
                Kept::Retry
            }
            Err(e) => self.failed("take the member record's lease", e),
        }
    }

    async fn renew(&self) -> Kept {
        let renewed = timed(
            &*self.observer,
            LeaseOp::MemberRenew,
            self.limit(),
            self.store.renew_member(&self.key, self.record_lease),
        )
        .await;
        match renewed {
            Ok(()) => Kept::Ok,
            // Deleted (by a leader that saw it dead for 10 minutes, or by hand): join again.
            Err(e) if e.failure() == Failure::Missing => {
                tracing::warn!("this instance's member record is gone; joining again");
                self.set_standing(Standing::Joining);
                Kept::Retry
            }
            // Our lease lapsed and someone took the record, or it was broken: take it back if
            // nobody holds it (the place in line is kept: the record is the same).
            Err(e) if e.failure() == Failure::LeaseLost => {
                let member = self.with(|l| l.published.clone());
                self.take_lease(member).await
            }
            Err(e) => self.failed("renew the member record's lease", e),
        }
    }

    async fn write(&self) {
        let member = self.with(|l| l.published.clone());
        let written = timed(
            &*self.observer,
            LeaseOp::MemberWrite,
            self.limit(),
            self.store
                .write_member(&self.key, self.record_lease, &member),
        )
        .await;
        match written {
            Ok(()) => self.with(|l| l.written = l.published == member),
            Err(e) if e.failure() == Failure::Missing || e.failure() == Failure::LeaseLost => {
                // The renew sorts out what became of the record.
                tracing::debug!(error = %e, "could not write the member record");
            }
            Err(e) => tracing::debug!(error = %e, "could not write the member record; again soon"),
        }
    }

    fn failed(&self, what: &str, e: StoreError) -> Kept {
        if e.failure() == Failure::Denied {
            self.set_standing(Standing::Refused(format!(
                "storage refused this instance's member record ({e}): member records need the \
                 credentials to list, create, write and delete blobs in the container (a SAS \
                 with sp=rwdlc on the container)"
            )));
            return Kept::Later(LIST_INTERVAL);
        }
        tracing::debug!(error = %e, "could not {what}; trying again");
        Kept::Retry
    }

    /// A leader deletes the records of members dead for over [`DEAD_RECORD_AGE`] (only if
    /// they did not change since the listing: a member that came back keeps its record).
    async fn tidy(&self) {
        let (leading, dead) = self.with(|l| (l.leading, l.long_dead()));
        if !leading {
            return;
        }
        for (key, etag) in dead {
            let deleted = timed(
                &*self.observer,
                LeaseOp::MemberDelete,
                self.limit(),
                self.store.delete_member(&key, None, Some(&etag)),
            )
            .await;
            match deleted {
                Ok(()) => {
                    tracing::info!(record = %key, "deleted the record of a member dead for over {}", human(DEAD_RECORD_AGE))
                }
                Err(e) => {
                    tracing::debug!(record = %key, error = %e, "did not delete a dead member's record")
                }
            }
        }
    }

    /// Deletes our record under its lease: no leader hands us the lease any more.
    async fn leave(&self) {
        if self.with(|l| l.standing != Standing::Joined) {
            return;
        }
        let deleted = timed(
            &*self.observer,
            LeaseOp::MemberDelete,
            self.limit(),
            self.store
                .delete_member(&self.key, Some(self.record_lease), None),
        )
        .await;
        match deleted {
            Ok(()) => tracing::info!("left the line of members"),
            Err(e) => tracing::warn!(
                error = %e,
                "could not delete this instance's member record; it counts as dead within {}",
                human(RECORD_LEASE)
            ),
        }
    }
}

/// `period`, stretched by up to 20 % at random.
pub(crate) fn jittered(period: Duration) -> Duration {
    period.mul_f64(1.0 + POLL_JITTER * fastrand::f64())
}

/// The watch period of a member that is not the successor: `5 x acquire_interval`, stretched
/// by up to 20 % at random.
pub(crate) fn watch_interval(timing: &Timing) -> Duration {
    jittered(timing.acquire_interval * WATCH_PERIODS)
}

/// The longest watch period: `5 x acquire_interval` stretched by the whole jitter.
pub(crate) fn watch_max(timing: &Timing) -> Duration {
    (timing.acquire_interval * WATCH_PERIODS).mul_f64(1.0 + POLL_JITTER)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(identity: &str, priority: i64, joined: i64, alive: bool) -> MemberRecord {
        let mut r = crate::elector::testing::record(identity, priority);
        r.joined += time::Duration::seconds(joined);
        if !alive {
            r.lease = LeaseState::Expired;
        }
        r
    }

    /// The first `n` of `a` to `e`, of equal priority, joined a second apart (so in line
    /// order): `b` is dead.
    fn line_with_b_dead(n: usize) -> Vec<MemberRecord> {
        let names = ["a", "b", "c", "d", "e"];
        (1..)
            .zip(&names[..n])
            .map(|(joined, name)| record(name, 0, joined, *name != "b"))
            .collect()
    }

    fn names(line: &[MemberRecord]) -> Vec<&str> {
        line.iter().map(|r| r.identity()).collect()
    }

    #[test]
    fn the_order_is_priority_then_seniority_then_identity() {
        let mut line = vec![
            record("c", 0, 5, true),
            record("b", 0, 5, true),
            record("a", 0, 9, true),
            record("low", -1, 0, true),
            record("high", 10, 20, true),
        ];
        order(&mut line);
        assert_eq!(names(&line), ["high", "b", "c", "a", "low"]);
    }

    #[test]
    fn the_successor_is_the_first_live_member_in_line_that_does_not_lead_nor_rest() {
        let now = OffsetDateTime::from_unix_timestamp(1_700_000_100).unwrap();
        let mut line = line_with_b_dead(4);
        order(&mut line);
        let next_in = |line: &[MemberRecord], leader, skip: &[&str]| {
            successor(line, leader, now, |r| skip.contains(&r.identity()))
                .map(|r| r.identity().to_owned())
        };
        let next = |leader, skip: &[&str]| next_in(&line, leader, skip);
        assert_eq!(
            next(None, &[]).as_deref(),
            Some("a"),
            "nobody leads: the first"
        );
        assert_eq!(next(Some("a"), &[]).as_deref(), Some("c"), "b is dead");
        assert_eq!(next(Some("c"), &[]).as_deref(), Some("a"));
        // Slots: members that hold one already are skipped.
        assert_eq!(next(Some("a"), &["c"]).as_deref(), Some("d"));
        // In a cooldown: skipped until it is over.
        assert_eq!(next(Some("a"), &["c", "d"]), None, "nobody left");
        line[2].member.standby_until = Some(now + time::Duration::seconds(10));
        assert_eq!(next_in(&line, Some("a"), &[]).as_deref(), Some("d"));
        assert_eq!(
            successor(&line, Some("a"), now + time::Duration::seconds(11), |_| {
                false
            })
            .map(|r| r.identity()),
            Some("c")
        );
    }

    #[test]
    fn the_table_names_each_part() {
        let now = OffsetDateTime::from_unix_timestamp(1_700_000_100).unwrap();
        let mut line = line_with_b_dead(5);
        line[3].member.standby_until = Some(now + time::Duration::seconds(10));
        let rows = table(&line, Some("a"), now, &BTreeMap::new(), &|_| false);
        let parts: Vec<Part> = rows.iter().map(|r| r.part).collect();
        assert_eq!(
            parts,
            [
                Part::Leader,
                Part::Dead,
                Part::Successor,
                Part::Standby,
                Part::Follower
            ]
        );
        assert_eq!(rows[0].since.as_deref(), Some("2023-11-14T22:13:21Z"));
        assert_eq!(rows[1].since, None, "dead since: not known");
        assert!(rows[3].standby_until.is_some());
        // A member passed over is no successor: the next one is.
        let third = rows[2].identity.clone();
        let rows = table(&line, Some("a"), now, &BTreeMap::new(), &|id| id == third);
        let parts: Vec<Part> = rows.iter().map(|r| r.part).collect();
        assert_eq!(
            parts,
            [
                Part::Leader,
                Part::Dead,
                Part::Follower,
                Part::Standby,
                Part::Successor
            ]
        );
    }
}

/// Succession on paused time: instances of one group on the in-memory store, each through a
/// client of its own (which counts its requests and can be cut off).
#[cfg(test)]
mod succession {
    use crate::elector::testing::{Cost, Instance, Life, Lives, joined, stop_all, timing};
    use crate::store::GroupStore;
    use crate::store::memory::{Behaviour, MemoryStore, Op};
    use std::sync::Arc;
    use std::time::Duration;
    use tokio::time::{Instant, sleep};

    fn secs(s: f64) -> Duration {
        Duration::from_secs_f64(s)
    }

    /// A group of three on a store of its own: `a` leads, then `b` and `c` join (in that
    /// order of identity, the same second) and settle.
    async fn three() -> (Arc<MemoryStore>, Lives, Instance, Instance, Instance) {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let a = Instance::start(&store, "a", &lives, None);
        lives.nth(1).await;
        let b = Instance::start(&store, "b", &lives, None);
        let c = Instance::start(&store, "c", &lives, None);
        joined(&store, "b").await;
        joined(&store, "c").await;
        sleep(secs(20.0)).await;
        (store, lives, a, b, c)
    }

    /// Prints how long after `since` the task of `next` started, beside its bound, and
    /// asserts the bound.
    fn led_within(next: &Life, since: Instant, after: &str, bound: Duration) {
        let took = next.start - since;
        println!(
            "{} led {took:?} after {after} (bound {bound:?})",
            next.identity
        );
        assert!(took <= bound, "{took:?} > {bound:?}");
    }

    fn count(sent: &[Op], op: Op) -> usize {
        sent.iter().filter(|o| **o == op).count()
    }

    #[tokio::test(start_paused = true)]
    async fn a_shutdown_hands_the_lease_to_the_first_in_line_after_its_task_is_gone() {
        let (store, lives, a, b, c) = three().await;
        let c_acquires = count(&c.client.sent(), Op::Acquire);
        let a_lease = store.lease_id().unwrap();
        let b_id = store.member("b").unwrap().member.acquires_with;
        a.stop().await;
        let gone = lives.gone(1).await;
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "b", "the first in line after the leader");
        let changes = store.calls(Op::Change);
        assert_eq!(changes.len(), 1);
        assert!(changes[0] >= gone, "changed only after the task was gone");
        assert_eq!(store.ids(Op::Change), vec![a_lease]);
        assert_eq!(
            store.lease_id(),
            Some(b_id),
            "b acquired with the id it published"
        );
        led_within(&next, changes[0], "the handoff", timing().longest_poll());
        assert!(
            store.ids(Op::Release).is_empty(),
            "handed over, not released"
        );
        assert!(
            store.member("a").is_none(),
            "a left the line: its record is deleted"
        );
        // c watched until then; once it saw b lead, it listed (it is next without a) and
        // found a gone: now the successor, it polls.
        let c_lists = count(&c.client.sent(), Op::List);
        assert!(
            count(&c.client.sent(), Op::Acquire) <= c_acquires + 1,
            "c did not poll while a led"
        );
        sleep(secs(30.0)).await;
        assert_eq!(count(&c.client.sent(), Op::List), c_lists + 1);
        assert!(count(&c.client.sent(), Op::Acquire) >= c_acquires + 20);
        lives.assert_one_at_a_time();
        // b hands over to c, the only member left.
        b.stop().await;
        assert_eq!(lives.nth(3).await.identity, "c");
        c.stop().await;
        lives.assert_one_at_a_time();
    }

    #[tokio::test(start_paused = true)]
    async fn with_no_other_live_member_the_lease_is_released() {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let a = Instance::start(&store, "a", &lives, None);
        lives.nth(1).await;
        sleep(secs(5.0)).await;
        a.stop().await;
        assert!(store.calls(Op::Change).is_empty());
        assert_eq!(store.calls(Op::Release).len(), 1);
        assert!(!store.is_leased());
        assert!(store.members().is_empty());
    }

    /// A change that gets no answer may or may not have landed: the leader releases with its
    /// own id, which frees the lease if it did not land and is refused if it did. Either way
    /// the successor leads, and never beside the old task.
    #[tokio::test(start_paused = true)]
    async fn a_handoff_without_an_answer_falls_back_to_a_release_with_the_leaders_own_id() {
        for applied in [false, true] {
            let (store, lives, a, b, c) = three().await;
            let a_lease = store.lease_id().unwrap();
            store.set(
                Op::Change,
                if applied {
                    Behaviour::SlowAnswer(secs(10.0))
                } else {
                    Behaviour::Hang
                },
            );
            let asked = Instant::now();
            a.stop().await;
            let next = lives.nth(2).await;
            assert_eq!(next.identity, "b", "applied: {applied}");
            assert_eq!(
                store.ids(Op::Release),
                vec![a_lease],
                "released with a's own id"
            );
            let waited = store.calls(Op::Release)[0] - asked;
            println!(
                "applied {applied}: released {waited:?} after the stop; b led {:?} after it",
                next.start - store.calls(Op::Release)[0]
            );
            assert!(
                waited >= timing().request_timeout(),
                "after the change's timeout"
            );
            lives.assert_one_at_a_time();
            store.set(Op::Change, Behaviour::Normal);
            stop_all([b, c]).await;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_woken_successor_takes_the_lease_at_once() {
        let (store, lives, a, b, c) = three().await;
        let (waker, watched) = (b.waker.clone(), store.clone());
        let wake = tokio::spawn(async move {
            while watched.calls(Op::Change).is_empty() {
                sleep(Duration::from_micros(100)).await;
            }
            let token = waker.token().expose().to_owned();
            assert_eq!(waker.wake(&token), crate::WakeAnswer::Accepted);
        });
        a.stop().await;
        wake.await.unwrap();
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "b");
        let change = store.calls(Op::Change)[0];
        led_within(&next, change, "the change, woken", Duration::from_millis(1));
        stop_all([b, c]).await;
    }

    /// The successor crashed just before the handoff (its record still looks alive): the
    /// leader hands the lease to it, sees no epoch of it within the confirm window, and hands
    /// the lease on to the next member (design section 16), which learns it from the notice at
    /// its next watch: within the confirm window, a watch period and a polling period, not a
    /// lease duration.
    #[tokio::test(start_paused = true)]
    async fn a_successor_dead_at_the_handoff_is_passed_over_within_the_confirm_window() {
        let (store, lives, a, b, c) = three().await;
        b.kill();
        let asked = Instant::now();
        a.stop().await;
        assert_eq!(
            store.calls(Op::Change).len(),
            2,
            "handed to b, which looked alive, then on to c"
        );
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "c");
        let t = timing();
        let bound = crate::elector::confirm_window(&t, false, true)
            + members_watch_max(&t)
            + t.longest_poll()
            + secs(0.5);
        led_within(&next, asked, "a's stop", bound);
        assert!(bound < t.duration, "well within a lease duration");
        lives.assert_one_at_a_time();
        c.stop().await;
    }

    /// A member that crashed is dead once its record lease expires; the leader deletes its
    /// record once it has seen it dead for ten minutes, whether or not the leader also lists
    /// for preemption (whose listings keep the line fresh, so the record task never lists).
    #[tokio::test(start_paused = true)]
    async fn the_leader_deletes_a_record_dead_for_ten_minutes() {
        for preempt_after in [Some(secs(30.0)), None] {
            let store = Arc::new(MemoryStore::default());
            let lives = Lives::default();
            let a = Instance::start_with(&store, "a", &lives, None, |e| {
                e.with_preempt_after(preempt_after)
            });
            lives.nth(1).await;
            let b = Instance::start(&store, "b", &lives, None);
            joined(&store, "b").await;
            sleep(secs(20.0)).await;
            b.crash();
            let crashed = Instant::now();
            while store.member("b").is_some() {
                assert!(
                    crashed.elapsed() < super::DEAD_RECORD_AGE + secs(120.0),
                    "b's record still there {:?} after its crash (preempt_after {preempt_after:?})",
                    crashed.elapsed()
                );
                sleep(secs(1.0)).await;
            }
            println!(
                "b's record deleted {:?} after its crash (preempt_after {preempt_after:?})",
                crashed.elapsed()
            );
            assert!(crashed.elapsed() >= super::DEAD_RECORD_AGE);
            a.stop().await;
        }
    }

    fn members_watch_max(t: &crate::Timing) -> Duration {
        (t.acquire_interval * super::WATCH_PERIODS).mul_f64(1.0 + crate::timing::POLL_JITTER)
    }

    /// When a handoff went to a member that cannot take the lease, the next one leads within
    /// a lease duration (the change does not restart its clock), a watch and a poll.
    fn fallback_bound() -> Duration {
        let t = timing();
        t.duration + members_watch_max(&t) + t.longest_poll() + secs(0.5)
    }

    /// The successor is alive but cannot reach storage: same bound; and once it can again, it
    /// is back in line.
    #[tokio::test(start_paused = true)]
    async fn a_successor_cut_off_from_storage_is_passed_over_by_the_fallback() {
        let (store, lives, a, b, c) = three().await;
        b.client.cut_off(true);
        let asked = Instant::now();
        a.stop().await;
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "c");
        led_within(&next, asked, "a's stop", fallback_bound());
        b.client.cut_off(false);
        sleep(secs(45.0)).await;
        assert!(store.member("b").unwrap().is_alive(), "b is back in line");
        c.stop().await;
        let back = lives.nth(3).await;
        assert_eq!(back.identity, "b");
        lives.assert_one_at_a_time();
        b.stop().await;
    }

    /// A crash hands nothing over: the successor, polling, takes the lease within
    /// `L + 1.2 x acquire_interval` of the crashed leader's last renew, as without members.
    #[tokio::test(start_paused = true)]
    async fn a_crashed_leader_with_a_live_successor_fails_over_as_before() {
        let (store, lives, a, b, c) = three().await;
        // Its last renew: nothing runs before it is killed (no await between).
        let last_renew = *store.calls(Op::Renew).last().unwrap();
        a.kill();
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "b");
        let t = timing();
        led_within(
            &next,
            last_renew,
            "a's last renew",
            t.duration + t.longest_poll(),
        );
        stop_all([b, c]).await;
    }

    /// A member whose line is out of date (it never saw the successor die) is named by the
    /// handoff notice, and takes the lease within a watch period without listing.
    #[tokio::test(start_paused = true)]
    async fn a_member_with_an_old_line_learns_of_its_handoff_from_the_notice() {
        let (store, lives, a, b, c) = three().await;
        b.kill();
        // b's record expires; c, watching, has no sign of it.
        sleep(super::RECORD_LEASE + secs(1.0)).await;
        assert!(!store.member("b").unwrap().is_alive());
        let lists = count(&c.client.sent(), Op::List);
        let asked = Instant::now();
        a.stop().await;
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "c");
        assert_eq!(
            store.successor(),
            None,
            "c's epoch write removed the notice"
        );
        // Within a watch period of the notice that names it; or, when that period ends after
        // a's confirm window (a passes c over, and releases: there is nobody else), of the
        // lease found free.
        let t = timing();
        let bound = crate::elector::confirm_window(&t, false, true)
            + members_watch_max(&t)
            + t.longest_poll()
            + secs(0.5);
        led_within(&next, asked, "a's stop", bound);
        // (As the leader, c then lists on the leader's cadence.)
        let sent = c.client.sent();
        let won = sent.iter().rposition(|o| *o == Op::Acquire).unwrap();
        assert_eq!(
            count(&sent[..won], Op::List),
            lists,
            "no listing needed to take the lease"
        );
        lives.assert_one_at_a_time();
        c.stop().await;
    }

    /// After a handoff, the member that is next only if the old leader left the line lists
    /// once, at its first sight of the new leader (the others do not): a leader that stopped
    /// cleanly is gone, so the next handoff finds it polling, not watching.
    #[tokio::test(start_paused = true)]
    async fn after_a_handoff_the_member_next_without_the_old_leader_lists_once_and_polls() {
        let (store, lives, a, b, c) = three().await;
        let d = Instance::start(&store, "d", &lives, None);
        joined(&store, "d").await;
        sleep(secs(20.0)).await;
        let lists = |i: &Instance| count(&i.client.sent(), Op::List);
        let (c_lists, d_lists) = (lists(&c), lists(&d));
        a.stop().await;
        assert_eq!(lives.nth(2).await.identity, "b");
        // c sees b lead within a watch period, lists, and polls from its next round on.
        let c_acquires = count(&c.client.sent(), Op::Acquire);
        while lists(&c) == c_lists {
            sleep(secs(0.01)).await;
        }
        sleep(timing().longest_poll() + secs(0.05)).await;
        assert_eq!(
            count(&c.client.sent(), Op::Acquire),
            c_acquires + 1,
            "c polled within a polling period of its listing"
        );
        // Every watcher has read the new epoch by now.
        sleep(super::WATCH_PERIODS * timing().acquire_interval * 2).await;
        assert_eq!(lists(&c), c_lists + 1, "c, next without a, listed once");
        assert_eq!(lists(&d), d_lists, "d did not list");
        let c_acquires = count(&c.client.sent(), Op::Acquire);
        sleep(secs(10.0)).await;
        assert!(
            count(&c.client.sent(), Op::Acquire) >= c_acquires + 8,
            "c polls the lease now"
        );
        let asked = Instant::now();
        b.stop().await;
        let next = lives.nth(3).await;
        assert_eq!(next.identity, "c");
        let a_poll = timing().longest_poll() + secs(0.1);
        led_within(&next, asked, "b's stop", a_poll);
        lives.assert_one_at_a_time();
        stop_all([c, d]).await;
    }

    /// A rolling restart: the leader stops and comes back (at the back of the line), again and
    /// again. Each time the member next in line is polling by the next stop, a watch period
    /// later, although its listing (minutes old) still shows the restarted leaders' old
    /// records ahead of it: every handover takes at most a polling period, not a watch period.
    #[tokio::test(start_paused = true)]
    async fn a_rolling_restart_finds_each_successor_polling() {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let names = ["a", "b", "c", "d", "e"];
        let mut group: Vec<Instance> = Vec::new();
        for name in names {
            group.push(Instance::start(&store, name, &lives, None));
            if name == "a" {
                lives.nth(1).await;
            }
            joined(&store, name).await;
        }
        sleep(secs(40.0)).await;
        let bound = timing().longest_poll() + secs(0.1);
        for step in 1..=4 {
            let leader = lives.nth(step).await.identity;
            let at = group.iter().position(|i| i.identity == leader).unwrap();
            let asked = Instant::now();
            group.remove(at).stop().await;
            group.push(Instance::start(&store, &leader, &lives, None));
            let next = lives.nth(step + 1).await;
            println!("step {step}:");
            led_within(&next, asked, &format!("{leader}'s stop"), bound);
            // More than a watch period: time for the next in line to learn it is.
            sleep(timing().acquire_interval * (super::WATCH_PERIODS + 2)).await;
        }
        lives.assert_one_at_a_time();
        stop_all(group).await;
    }

    /// A member that joins with a higher priority just before the handoff gets the lease (the
    /// leader lists afresh); a member that leaves just before is not handed it.
    #[tokio::test(start_paused = true)]
    async fn members_joining_and_leaving_during_handoffs() {
        let (store, lives, a, b, c) = three().await;
        let d = Instance::start_with(&store, "d", &lives, None, |e| e.with_priority(5));
        joined(&store, "d").await;
        a.stop().await;
        assert_eq!(
            lives.nth(2).await.identity,
            "d",
            "the higher priority, joined just now"
        );
        // b, first in line behind d, leaves just as d hands over.
        let leaving = tokio::spawn(b.stop());
        d.stop().await;
        leaving.await.unwrap();
        assert_eq!(lives.nth(3).await.identity, "c");
        lives.assert_one_at_a_time();
        c.stop().await;
    }

    /// Over a simulated hour, with the lease held by `a`: the successor `b` polls, the
    /// follower `c` watches. Counting a List as ten requests, the follower costs at most a
    /// third of the successor (the target); the figures are printed by price class.
    #[tokio::test(start_paused = true)]
    async fn a_follower_costs_at_most_a_third_of_the_successor() {
        let (_store, lives, a, b, c) = three().await;
        let before: Vec<Vec<Op>> = [&a, &b, &c].iter().map(|i| i.client.sent()).collect();
        sleep(Duration::from_secs(3600)).await;
        assert_eq!(lives.all().len(), 1, "a led throughout");
        let mut units = Vec::new();
        for (i, instance) in [&a, &b, &c].into_iter().enumerate() {
            let sent = instance.client.sent()[before[i].len()..].to_vec();
            let cost = Cost::of(&sent);
            println!("{}: per minute: {}", instance.identity, cost.per_minute());
            units.push(cost.units());
        }
        assert!(
            units[1] > 50 * 60,
            "the successor polls every ~1.1 s: {units:?}"
        );
        assert!(
            3 * units[2] <= units[1],
            "follower {} > successor {} / 3",
            units[2],
            units[1]
        );
        stop_all([a, b, c]).await;
    }

    #[tokio::test(start_paused = true)]
    async fn the_memory_store_keeps_member_records_as_azure_does() {
        use crate::store::{LeaseId, Member, MemberKey};
        let store = MemoryStore::default();
        let key = MemberKey::of("m");
        let member = Member {
            identity: "m".into(),
            priority: 0,
            acquires_with: LeaseId::random(),
            advertise: None,
            wake_token: None,
            standby_until: None,
            slots: 1,
            settled: None,
        };
        let (mine, other) = (LeaseId::random(), LeaseId::random());
        let code =
            |r: Result<(), crate::store::StoreError>| r.unwrap_err().code().map(str::to_owned);
        assert_eq!(
            code(store.acquire_member(&key, mine, 30).await).as_deref(),
            Some("BlobNotFound")
        );
        store.create_member(&key, &member).await.unwrap();
        assert_eq!(
            code(store.create_member(&key, &member).await).as_deref(),
            Some("BlobAlreadyExists")
        );
        store.acquire_member(&key, mine, 30).await.unwrap();
        assert_eq!(
            code(store.acquire_member(&key, other, 30).await).as_deref(),
            Some("LeaseAlreadyPresent")
        );
        assert_eq!(
            code(store.delete_member(&key, None, None).await).as_deref(),
            Some("LeaseIdMissing")
        );
        assert_eq!(
            code(store.write_member(&key, other, &member).await).as_deref(),
            Some("LeaseIdMismatchWithBlobOperation")
        );
        store.write_member(&key, mine, &member).await.unwrap();
        let listed = store.list_members().await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(listed[0].is_alive());
        // Expired: renewable by its holder while nobody took it, deletable without a lease.
        sleep(secs(31.0)).await;
        assert!(!store.list_members().await.unwrap()[0].is_alive());
        store.renew_member(&key, mine).await.unwrap();
        assert!(store.list_members().await.unwrap()[0].is_alive());
        sleep(secs(31.0)).await;
        let etag = store.list_members().await.unwrap()[0].etag.clone();
        store.delete_member(&key, None, Some(&etag)).await.unwrap();
        assert!(store.list_members().await.unwrap().is_empty());
    }
}
