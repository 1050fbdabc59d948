//! The line of succession (docs/succession.md; docs/slots.md) on the store's data: the core's
//! [`Succession`] (the order, the successor, each member's place, with slots the pollers;
//! `leasehold_core::line`) of member records and slot blobs, which the core member keeps, and
//! what the core reads of each (`Record`, `SlotBlob`, `Publish`).

use crate::store::{Holder, LeaseState, Member, MemberKey, MemberRecord, SlotRecord};
use leasehold_core::line::{Record, SlotBlob};
pub(crate) use leasehold_core::line::{Standing, successor};
use leasehold_core::member::Publish;
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
            stamp: Default::default(),
        });
        holder.identity = id.to_owned();
        self.holder = Some(holder);
        self.successor = None;
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
