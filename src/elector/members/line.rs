//! The line of succession as this instance knows it (docs/succession.md; docs/slots.md): the
//! core's [`Succession`] (the order, the successor, each member's place, with slots the
//! pollers; `leasehold_core::line`), read at the lease clock's and the wall clock's now, beside
//! what only this instance's shell keeps: what its record says, and the last leader's metadata
//! for people. No I/O: the record keeper and the campaign fill it from their listings and
//! reads, and decide from it.

use crate::clock::Clock;
use crate::store::{BlobState, Holder, LeaseState, Member, MemberKey, MemberRecord, SlotRecord};
use leasehold_core::blob::LeaseBlob;
pub(crate) use leasehold_core::line::{Place, Standing, successor};
use leasehold_core::line::{Record, SlotBlob};
use leasehold_core::member::{Own, Publish};
use time::OffsetDateTime;
use tokio::time::Instant;

/// The core's line of succession, on the lease clock, of the store's records.
pub(crate) type Succession = leasehold_core::Line<Instant, MemberRecord, SlotRecord>;

impl Record for MemberRecord {
    type Key = MemberKey;
    type Wall = OffsetDateTime;
    fn key(&self) -> &MemberKey {
        &self.key
    }
    fn identity(&self) -> &str {
        &self.member.identity
    }
    fn priority(&self) -> i64 {
        self.member.priority
    }
    fn joined(&self) -> OffsetDateTime {
        self.joined
    }
    fn is_alive(&self) -> bool {
        self.lease == LeaseState::Leased
    }
    fn in_standby(&self, wall: OffsetDateTime) -> bool {
        self.member.in_standby(wall)
    }
    fn slots(&self) -> u32 {
        self.member.slots
    }
    fn settled(&self) -> Option<std::time::Duration> {
        self.member.settled
    }
    fn age(&self) -> std::time::Duration {
        self.age
    }
    fn set_alive(&mut self) {
        self.lease = LeaseState::Leased;
    }
    fn advertise(&self) -> Option<&str> {
        self.member.advertise.as_deref()
    }
    fn acquires_as(&self, other: &Self) -> bool {
        self.member.acquires_with == other.member.acquires_with
    }
}

impl Publish for Member {
    fn settled(&self) -> Option<std::time::Duration> {
        self.settled
    }
    fn set_settled(&mut self, settled: Option<std::time::Duration>) {
        self.settled = settled;
    }
}

impl SlotBlob for SlotRecord {
    type Wall = OffsetDateTime;
    fn free(slot: u32) -> Self {
        Self {
            slot,
            lease: LeaseState::Available,
            holder: None,
            successor: None,
        }
    }
    fn slot(&self) -> u32 {
        self.slot
    }
    fn is_leased(&self) -> bool {
        self.lease == LeaseState::Leased
    }
    fn last_holder(&self) -> Option<&str> {
        self.holder.as_ref().map(|h| h.identity.as_str())
    }
    fn successor(&self) -> Option<&str> {
        self.successor.as_deref()
    }
    fn set_held_by(&mut self, identity: Option<&str>, wall: OffsetDateTime, slots: u32) {
        let Some(id) = identity else {
            self.lease = LeaseState::Available;
            return;
        };
        self.lease = LeaseState::Leased;
        let mut holder = self.holder.clone().unwrap_or(Holder {
            identity: String::new(),
            epoch: 0,
            acquired_at: wall,
            lease: None,
            slots: Some(slots),
        });
        holder.identity = id.to_owned();
        self.holder = Some(holder);
        self.successor = None;
    }
}

/// The line as this instance knows it, shared by the elector and the record keeper: the
/// core's line, and what the shell keeps beside it.
pub(crate) struct Line {
    /// The line of succession.
    pub succession: Succession,
    /// What our record should say, whether it says it, and when it was created.
    pub own: Own<Instant, Member>,
    /// The last leader's metadata (epoch, since when) as last read, for people; with when it
    /// was read.
    pub holder: Option<(Holder, OffsetDateTime)>,
    /// The group's slot count, while it differs from ours (this instance does not lead).
    pub mismatch: Option<u32>,
    /// While leading: the member this instance will hand over to, and from when
    /// (`preempt`).
    pub preempting: Option<(String, OffsetDateTime)>,
    /// The clocks the line is judged at (the elector's).
    pub clock: Clock,
}

/// The core's judgements, at the clocks' now.
impl Line {
    /// The line of a member that is joining, whose record is to say `published`, judged at
    /// `clock`.
    pub fn new(published: Member, clock: Clock) -> Self {
        Self {
            succession: Succession::new(published.identity.clone(), published.slots),
            own: Own::new(published),
            holder: None,
            mismatch: None,
            preempting: None,
            clock,
        }
    }

    /// Our place, from the line as last listed.
    pub fn place(&self) -> Place {
        self.succession.place(self.clock.now(), self.clock.wall())
    }

    /// Whether this instance is the successor: named by a handoff notice, or first in line
    /// after the leader.
    pub fn is_successor(&self) -> bool {
        self.succession
            .is_successor(self.clock.now(), self.clock.wall())
    }

    /// Whether `identity` is passed over now.
    pub fn is_passed_over(&self, identity: &str) -> bool {
        self.succession.is_passed_over(identity, self.clock.now())
    }

    /// Passes `identity` over from now.
    pub fn pass_over(&mut self, identity: &str) {
        self.succession.pass_over(identity, self.clock.now());
    }

    /// With one slot: the member just ahead of this instance in line.
    pub fn ahead(&self) -> Option<&MemberRecord> {
        self.succession.ahead(self.clock.now(), self.clock.wall())
    }

    /// Takes a fresh listing.
    pub(super) fn listed(&mut self, records: Vec<MemberRecord>) {
        self.succession
            .listed(records, self.clock.now(), self.clock.wall());
    }

    /// Takes what a read of the lease blob said of its holder and notice.
    pub fn read(&mut self, state: &BlobState) {
        self.succession.read(state.seen(), self.clock.now());
        self.note_holder(state);
    }

    /// The last leader's metadata, as a read of the lease blob shows it while leased, for people.
    pub fn note_holder(&mut self, state: &BlobState) {
        let leased = state.lease == LeaseState::Leased;
        self.holder = (state.holder.clone())
            .filter(|_| leased)
            .map(|h| (h, self.clock.wall()));
    }

    /// Records dead for longer than `Pace::DEAD_RECORD_AGE`, as this instance has seen them.
    pub(super) fn long_dead(&self) -> Vec<(MemberKey, crate::store::ETag)> {
        (self.succession.long_dead(self.clock.now()))
            .map(|r| (r.key.clone(), r.etag.clone()))
            .collect()
    }

    /// Slot `slot` is now held by `identity` (`None`: by nobody), as this instance learnt
    /// without a listing.
    pub fn set_slot_holder(&mut self, slot: u32, identity: Option<&str>) {
        self.succession
            .set_slot_holder(slot, identity, self.clock.wall());
    }

    /// The member just ahead of this instance among those waiting for a slot: the one whose
    /// record it watches.
    pub fn predecessor(&self) -> Option<MemberKey> {
        self.succession
            .predecessor(self.clock.wall())
            .map(MemberKey::of)
    }
}

/// Which slots a round tries first: those free at the last look, then the rest.
pub(crate) fn round_order(line: Option<&Line>, n: u32) -> Vec<u32> {
    match line {
        Some(l) => l.succession.round_order(n),
        None => (0..n).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::members::rows::Part;
    use crate::elector::members::rows::table;
    use std::collections::BTreeMap;

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
