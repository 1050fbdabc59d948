//! The line of succession as this instance knows it (docs/succession.md; docs/slots.md): the order
//! ([`order`]), the successor a leader hands its lease to ([`successor`]), and what the line says
//! of each instance's part ([`Line::place`]: the successor polls, the others watch; with slots, the
//! first F members holding no slot poll, [`pollers`], and the others watch the record of the member
//! just ahead of them, [`Line::predecessor`]). No I/O: the record keeper and the campaign fill it
//! from their listings and reads, and decide from it.

use crate::store::{
    BlobState, ETag, Holder, LeaseState, Member, MemberKey, MemberRecord, SlotRecord,
};
use leasehold_core::Pace;
use std::collections::BTreeMap;
use time::OffsetDateTime;
use tokio::time::Instant;

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

/// Where a member stands in line (the core's: the candidate looks at the lease by it).
pub(crate) use leasehold_core::Place;

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
    /// may stay alive for up to [`Pace::RECORD_LEASE`] after a crash.
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
    /// Terms this instance began (the record keeper lists after each: `Pace::TERM_START_QUIET`).
    pub terms_begun: u64,
    /// `terms_begun` at the last listing.
    listed_in_term: u64,
    /// When each dead record was first seen dead, by this instance.
    pub dead_since: BTreeMap<MemberKey, OffsetDateTime>,
    /// `[lease].slots` of this instance (docs/slots.md).
    pub slots: u32,
    /// The slot blobs as last listed (only with more than one slot), as this instance has
    /// updated them since (its own terms and handoffs).
    pub slot_states: Vec<SlotRecord>,
    /// The slot this instance holds, while it leads.
    pub holding: Option<u32>,
    /// The group's slot count, while it differs from ours (this instance does not lead).
    pub mismatch: Option<u32>,
    /// Same, on the monotonic clock, for the 10-minute rule.
    pub(super) dead_seen: BTreeMap<MemberKey, Instant>,
    /// When our record was created (answered), for its `settled` mark.
    pub(super) created: Option<Instant>,
    /// While leading: the member this instance will hand over to, and from when
    /// (`preempt`).
    pub preempting: Option<(String, OffsetDateTime)>,
    /// Members that were handed the lease and did not take it, until when each is passed
    /// over, and the creation of its record then (as the line had it, or as the next listing
    /// shows it): seen by this instance, or named by a notice it read (docs/succession.md). A
    /// pass-over is of that record: a member that joined again since (a new record: a new
    /// process) stands in line.
    pub passed_over: BTreeMap<String, (Instant, Option<OffsetDateTime>)>,
    /// Records whose lease runs on though their process is gone (a probe of its URL found none,
    /// or another), by when each was created: out of line until that record is gone or made
    /// anew (docs/slots.md).
    pub ghosts: BTreeMap<MemberKey, OffsetDateTime>,
}

impl Line {
    /// The line of a member that is joining, whose record is to say `published`.
    pub fn new(published: Member) -> Self {
        Self {
            standing: Standing::Joining,
            members: Vec::new(),
            listed: None,
            leader: None,
            last_leader: None,
            former: Vec::new(),
            notice: None,
            holder: None,
            slots: published.slots,
            published,
            written: false,
            leading: false,
            terms_begun: 0,
            listed_in_term: 0,
            dead_since: BTreeMap::new(),
            dead_seen: BTreeMap::new(),
            slot_states: Vec::new(),
            holding: None,
            mismatch: None,
            created: None,
            preempting: None,
            passed_over: BTreeMap::new(),
            ghosts: BTreeMap::new(),
        }
    }

    /// Whether `r` is a record whose process is gone ([`Line::ghosts`]).
    pub fn is_ghost(&self, r: &MemberRecord) -> bool {
        self.ghosts.get(&r.key) == Some(&r.joined)
    }

    /// Our place, from the line as last listed.
    pub fn place(&self) -> Place {
        match &self.standing {
            Standing::Joining | Standing::Refused(_) => Place::Poll,
            Standing::Duplicate => Place::Watch,
            Standing::Joined if self.listed.is_none() => Place::Poll,
            Standing::Joined if self.slots > 1 => {
                let me = self.published.identity.as_str();
                if pollers(self).contains(&me) {
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
            self.leading_next(),
            crate::clock::wall(),
            |r| self.is_passed_over(r.identity()),
        )
        .is_some_and(|r| r.identity() == me)
    }

    /// Who leads, or is about to: the member a handoff notice names (the lease is being handed
    /// to it), else the leader as last known.
    fn leading_next(&self) -> Option<&str> {
        let me = self.published.identity.as_str();
        match self.notice.as_deref() {
            Some(named) if named != me => Some(named),
            _ => self.leader.as_deref().or(self.last_leader.as_deref()),
        }
    }

    /// Whether `identity` is passed over now: it was handed the lease lately and did not
    /// take it.
    pub fn is_passed_over(&self, identity: &str) -> bool {
        self.passed_over.get(identity).is_some_and(|(until, of)| {
            let joined_again = self
                .members
                .iter()
                .any(|r| r.identity() == identity && of.is_some_and(|of| r.joined != of));
            Instant::now() < *until && !joined_again
        })
    }

    /// Passes `identity` over for [`Pace::PASSED_OVER_FOR`] from now (unless it is already, under
    /// the same record). Never
    /// this instance itself: the mark tells the others not to wait for a member that did not
    /// take the lease, and this one, reading the blob, is alive; first in line, it polls
    /// (rule (f) of docs/safety.md), or nobody may.
    pub fn pass_over(&mut self, identity: &str) {
        if identity == self.published.identity {
            return;
        }
        let now = Instant::now();
        self.passed_over.retain(|_, (until, _)| *until > now);
        // A mark stands from when it was made; a mark of an older record is made anew.
        let of = self.joined_of(identity);
        let marked = self.passed_over.get(identity);
        if marked.is_none_or(|(_, old)| of.is_some() && *old != of) {
            let mark = (now + Pace::PASSED_OVER_FOR, of);
            self.passed_over.insert(identity.to_owned(), mark);
        }
    }

    /// When the record of `identity` in the line was created (its seniority), if the line has
    /// it.
    fn joined_of(&self, identity: &str) -> Option<OffsetDateTime> {
        self.members
            .iter()
            .find(|r| r.identity() == identity)
            .map(|r| r.joined)
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

    /// With one slot: the member just ahead of this instance in line, as [`Line::is_successor`]
    /// counts them (alive, not the leader, not in a cooldown, not passed over): the one whose
    /// place this instance would take if it left. `None` when this instance is
    /// next, or not in line.
    pub fn ahead(&self) -> Option<&MemberRecord> {
        let me = self.published.identity.as_str();
        let leader = self.leading_next();
        let now = crate::clock::wall();
        let candidates: Vec<&MemberRecord> = self
            .members
            .iter()
            .filter(|r| {
                r.identity() == me
                    || r.is_alive()
                        && !r.member.in_standby(now)
                        && Some(r.identity()) != leader
                        && !self.is_passed_over(r.identity())
            })
            .collect();
        let at = candidates.iter().position(|r| r.identity() == me)?;
        at.checked_sub(1).map(|p| candidates[p])
    }

    /// A leader this instance saw give the lease up to another (it reads the blob; it does not
    /// list): until the next listing, the line is judged as if `old` had left it.
    pub fn gave_up(&mut self, old: &str) {
        if !self.former.iter().any(|f| f == old) {
            self.former.push(old.to_owned());
        }
    }

    /// The members in line strictly between `old` and `new` (none unless `old` comes first).
    pub fn between(&self, old: &str, new: &str) -> Vec<String> {
        let at = |id: &str| self.members.iter().position(|r| r.identity() == id);
        match (at(old), at(new)) {
            (Some(o), Some(n)) if o < n => self.members[o + 1..n]
                .iter()
                .map(|r| r.identity().to_owned())
                .collect(),
            _ => Vec::new(),
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
    pub(super) fn listed(&mut self, mut records: Vec<MemberRecord>) {
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
        self.ghosts
            .retain(|k, joined| records.iter().any(|r| &r.key == k && &r.joined == joined));
        // A member passed over before this instance had its record: the pass-over is of the
        // record listed now.
        for (identity, (_, of)) in self
            .passed_over
            .iter_mut()
            .filter(|(_, (_, of))| of.is_none())
        {
            *of = records
                .iter()
                .find(|r| r.identity() == identity)
                .map(|r| r.joined);
        }
        self.members = records;
        self.listed = Some(now);
        self.listed_in_term = self.terms_begun;
        self.former.clear();
    }

    /// Whether the line was listed since this instance's last term began: before that
    /// listing (`Pace::TERM_START_QUIET` into the term) it is a poller's line, which may still name
    /// the leader before us (gone since) as our successor and miss members that joined since.
    pub fn listed_this_term(&self) -> bool {
        self.listed_in_term == self.terms_begun
    }

    /// This instance holds its record's lease (renewed, or taken back after it lapsed): its own
    /// entry, which a listing during a lapse showed expired, is alive (its place is the
    /// record's, kept).
    /// Without this, the line would count this instance out of its own place until its next
    /// listing, and it would not move up when the member ahead of it leads (rule (f)).
    pub fn own_record_held(&mut self) {
        let me = self.published.identity.clone();
        if let Some(r) = self.members.iter_mut().find(|r| r.identity() == me) {
            r.lease = LeaseState::Leased;
        }
    }

    /// Takes a fresh read of one member's record (the rest of the line as last listed).
    pub fn refresh(&mut self, record: MemberRecord) {
        if let Some(r) = self.members.iter_mut().find(|r| r.key == record.key) {
            *r = record;
        }
    }

    /// Takes a fresh listing of the slot blobs; slot 0's holder is the leader people see.
    pub(super) fn slots_listed(&mut self, slots: Vec<SlotRecord>) {
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
        // A member seen leading took a lease since it was passed over: it is not passed over
        // now (a mark made from a view that a fault cut short would else outlive the fault).
        if let Some(leader) = &self.leader {
            self.passed_over.remove(leader);
        }
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

    /// Records dead for longer than [`Pace::DEAD_RECORD_AGE`], as this instance has seen them.
    pub(super) fn long_dead(&self) -> Vec<(MemberKey, ETag)> {
        let now = Instant::now();
        self.members
            .iter()
            .filter(|r| !r.is_alive())
            .filter(|r| {
                self.dead_seen
                    .get(&r.key)
                    .is_some_and(|at| now.saturating_duration_since(*at) >= Pace::DEAD_RECORD_AGE)
            })
            .map(|r| (r.key.clone(), r.etag.clone()))
            .collect()
    }
}

impl Line {
    /// Whether `identity` holds a slot, as this instance knows.
    pub fn holds_slot(&self, identity: &str) -> bool {
        if identity == self.published.identity {
            return self.holding.is_some();
        }
        self.slot_states.iter().any(|s| {
            s.slot < self.slots
                && s.lease == LeaseState::Leased
                && s.holder.as_ref().is_some_and(|h| h.identity == identity)
        })
    }

    /// Slot `slot` is now held by `identity` (`None`: by nobody), as this instance learnt
    /// without a listing.
    pub fn set_slot_holder(&mut self, slot: u32, identity: Option<&str>) {
        let record = match self.slot_states.iter_mut().find(|s| s.slot == slot) {
            Some(r) => r,
            None => {
                self.slot_states.push(SlotRecord {
                    slot,
                    lease: LeaseState::Available,
                    holder: None,
                    successor: None,
                });
                self.slot_states.last_mut().expect("just pushed")
            }
        };
        match identity {
            Some(id) => {
                record.lease = LeaseState::Leased;
                let mut holder = record.holder.clone().unwrap_or(Holder {
                    identity: String::new(),
                    epoch: 0,
                    acquired_at: crate::clock::wall(),
                    lease: None,
                    slots: Some(self.slots),
                });
                holder.identity = id.to_owned();
                record.holder = Some(holder);
                record.successor = None;
            }
            None => record.lease = LeaseState::Available,
        }
    }

    /// How many of the N slots nobody held at the last look.
    pub fn free_slots(&self) -> u32 {
        let held = (0..self.slots)
            .filter(|i| {
                self.slot_states
                    .iter()
                    .any(|s| s.slot == *i && s.lease == LeaseState::Leased)
            })
            .count() as u32;
        self.slots.saturating_sub(held)
    }

    /// The members that hold no slot and may take one, in line: alive, not in a cooldown,
    /// counting the slots we count.
    pub(super) fn waiting(&self) -> Vec<&str> {
        let now = crate::clock::wall();
        self.members
            .iter()
            .filter(|r| {
                r.is_alive()
                    && !r.member.in_standby(now)
                    && r.member.slots == self.slots
                    && !self.holds_slot(r.identity())
                    && !self.is_ghost(r)
            })
            .map(|r| r.identity())
            .collect()
    }

    /// The member just ahead of this instance among those waiting for a slot: the one whose
    /// record it watches. `None` when this instance is first, or not waiting.
    pub fn predecessor(&self) -> Option<MemberKey> {
        let waiting = self.waiting();
        let me = self.published.identity.as_str();
        let at = waiting.iter().position(|id| *id == me)?;
        at.checked_sub(1).map(|p| MemberKey::of(waiting[p]))
    }
}

/// The members that poll: the first F that hold no slot, F = max(1, free slots).
pub(crate) fn pollers(line: &Line) -> Vec<&str> {
    let f = line.free_slots().max(1) as usize;
    line.waiting().into_iter().take(f).collect()
}

/// Which slots a round tries first: those free at the last look, then the rest.
pub(crate) fn round_order(line: Option<&Line>, n: u32) -> Vec<u32> {
    let held = |i: u32| {
        line.is_some_and(|l| {
            l.slot_states
                .iter()
                .any(|s| s.slot == i && s.lease == LeaseState::Leased)
        })
    };
    let (mut free, taken): (Vec<u32>, Vec<u32>) = (0..n).partition(|i| !held(*i));
    free.extend(taken);
    free
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::members::rows::Part;
    use crate::elector::members::rows::table;

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

    /// The line of `me` with `a` to `d` alive, `b`'s record made at `b_joined`.
    fn line_of(me: &str, b_joined: i64) -> Line {
        let mut members: Vec<MemberRecord> = [("a", 1), ("b", b_joined), ("c", 3), ("d", 4)]
            .into_iter()
            .map(|(name, joined)| record(name, 0, joined, true))
            .collect();
        order(&mut members);
        let me = members.iter().find(|r| r.identity() == me).unwrap();
        let mut l = Line::new(me.member.clone());
        l.members = members;
        l
    }

    /// A pass-over is of the record the line had: a member that joined again since (a new
    /// record, a new process) stands in line; one passed over before this instance had its
    /// record is passed over as the next listing shows it (script `passed-over-then-led`).
    #[test]
    fn a_pass_over_is_of_a_record() {
        let mut l = line_of("c", 2);
        l.pass_over("b");
        assert!(l.is_passed_over("b"));
        l.listed(line_of("c", 2).members);
        assert!(l.is_passed_over("b"), "the same record: still passed over");
        l.listed(line_of("c", 50).members);
        assert!(!l.is_passed_over("b"), "b joined again: it stands in line");
        // Passed over before its record was listed: of the record listed next.
        let mut l = line_of("c", 2);
        l.members.retain(|r| r.identity() != "b");
        l.pass_over("b");
        l.listed(line_of("c", 2).members);
        assert!(l.is_passed_over("b"));
        l.listed(line_of("c", 50).members);
        assert!(!l.is_passed_over("b"));
    }

    /// A member passed over again, under a record made since its last pass-over, is passed
    /// over anew (seeds 2582, 3268, 6013 and 7856 of a first version, which kept the old mark:
    /// the leader handed the lease to the same dead member hop after hop).
    #[test]
    fn a_member_passed_over_under_a_new_record_is_passed_over_anew() {
        let mut l = line_of("c", 2);
        l.pass_over("b");
        l.listed(line_of("c", 50).members);
        assert!(!l.is_passed_over("b"));
        l.pass_over("b");
        assert!(l.is_passed_over("b"), "passed over under its new record");
        // And never itself.
        l.pass_over("c");
        assert!(!l.is_passed_over("c"));
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
