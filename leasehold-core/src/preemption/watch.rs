//! What a leader knows of the members it might hand the lease over to by preemption: the
//! [`cadence`] of its listings, when each member of higher priority may be eligible
//! ([`PreemptionWatch`], from the age of its record in a listing), who is due
//! ([`PreemptionWatch::due`]), and whom a leader may hand over to at all ([`candidates`]).

use crate::line::{Line, Record, SlotBlob};
use crate::pace::Pace;
use crate::timing::{Moment, POLL_JITTER};
use std::collections::BTreeMap;
use std::time::Duration;

/// A leader steps down for this member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preemption {
    /// The member it hands over to.
    pub to: String,
    /// That member's priority.
    pub priority: i64,
    /// The leader's priority.
    pub ours: i64,
    /// How long that member has been a member, as its record says.
    pub member_for: Duration,
}

impl std::fmt::Display for Preemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let member_for = Duration::from_millis(self.member_for.as_millis() as u64);
        write!(
            f,
            "preempted by {} (priority {} > {}, a member for {})",
            self.to,
            self.priority,
            self.ours,
            humantime::format_duration(member_for)
        )
    }
}

/// The leader's listing period while preemption is on: `preempt_after / 2` (so that it knows of
/// a member before the member is eligible), shortened by up to 20 % by `draw` (uniform in
/// `[0, 1)`, the shell's: leaders of several groups do not list in step), and no longer than
/// the rare listing of every member.
pub fn cadence(preempt_after: Duration, draw: f64) -> Duration {
    (preempt_after / 2)
        .mul_f64(1.0 - POLL_JITTER * draw)
        .min(Pace::LIST_EVERY)
}

/// A member of higher priority the leader knows of.
#[derive(Debug, Clone)]
struct Outranking<I, W> {
    /// Its record's creation time (a new record is a new membership).
    joined: W,
    /// From when it may be eligible, on the leader's clock: its creation, by the service's age
    /// of the record, plus `preempt_after`.
    eligible_at: I,
}

/// What the leader knows of the members it might hand over to.
#[derive(Debug, Clone)]
pub struct PreemptionWatch<I, R: Record> {
    /// `[election].preempt_after`.
    after: Duration,
    /// The leader's priority.
    ours: i64,
    /// The leader's identity.
    me: String,
    /// The members that outrank it, by record.
    outranking: BTreeMap<R::Key, Outranking<I, R::Wall>>,
}

impl<I: Moment, R: Record> PreemptionWatch<I, R> {
    /// The watch of leader `me` of priority `ours`, preempted after `after`.
    pub fn new(after: Duration, ours: i64, me: &str) -> Self {
        Self {
            after,
            ours,
            me: me.to_owned(),
            outranking: BTreeMap::new(),
        }
    }

    /// Whether `r` could ever be handed the lease by preemption: alive, another member, and of
    /// strictly higher priority.
    fn outranks(&self, r: &R) -> bool {
        r.is_alive() && r.identity() != self.me && r.priority() > self.ours
    }

    /// Takes a listing sent at `sent`: members of higher priority seen for the first time get
    /// the instant they may be eligible; members gone, dead, or recreated are forgotten (a
    /// member that dies cancels its timer).
    pub fn listed(&mut self, line: &[R], sent: I) {
        let mut kept = BTreeMap::new();
        let outranking: Vec<&R> = line.iter().filter(|r| self.outranks(r)).collect();
        for r in outranking {
            let known = (self.outranking.remove(r.key())).filter(|c| c.joined == r.joined());
            let c = known.unwrap_or_else(|| Outranking {
                joined: r.joined(),
                eligible_at: self.eligible_at(sent, r.age()),
            });
            kept.insert(r.key().clone(), c);
        }
        self.outranking = kept;
    }

    /// `sent + after - age`: when a record `age` old in a listing sent at `sent` is `after`
    /// old. A record older than that is eligible already, and every instant over
    /// [`Pace::PROBE_FOR`] before `sent` is the same to this watch (no probing, due at once):
    /// the age counts up to that, so that an age from before any instant (a forged record) is
    /// no overflow.
    fn eligible_at(&self, sent: I, age: Duration) -> I {
        match self.after.checked_sub(age) {
            Some(ahead) => sent + ahead,
            None => sent - (age - self.after).min(Pace::PROBE_FOR),
        }
    }

    /// The member to hand over to at `now` (`wall`), from a fresh listing: the first in line
    /// that outranks this leader, is not in a cooldown, and has marked its record as a member
    /// for `preempt_after` (for a member whose own window is shorter than ours: and the
    /// service's age of its record says so too).
    pub fn due(&self, line: &[R], now: I, wall: R::Wall) -> Option<Preemption> {
        line.iter()
            .filter(|r| self.outranks(r) && !r.in_standby(wall))
            .find_map(|r| {
                let settled = r.settled()?;
                let c = self.outranking.get(r.key())?;
                let long_enough = settled >= self.after || now >= c.eligible_at;
                long_enough.then(|| Preemption {
                    to: r.identity().to_owned(),
                    priority: r.priority(),
                    ours: self.ours,
                    member_for: settled.max(r.age()),
                })
            })
    }

    /// The member that will be eligible first, and when, among those not yet (or only just) at
    /// `now`.
    pub fn first(&self, now: I) -> Option<(&R::Key, I)> {
        self.outranking
            .iter()
            .map(|(k, c)| (k, c.eligible_at))
            .filter(|(_, at)| *at + Pace::PROBE_FOR > now)
            .min_by_key(|(_, at)| *at)
    }

    /// When to list next, after a listing at `now`: at the `cadence`, or sooner when a member
    /// should mark its record about then (every [`Pace::PROBE`] from a second before the instant
    /// it may be eligible, for [`Pace::PROBE_FOR`]).
    pub fn next_list(&self, now: I, cadence: Duration) -> I {
        let mut next = now + cadence;
        for c in self.outranking.values() {
            let from = c.eligible_at - Pace::SERVICE_CLOCK;
            let until = c.eligible_at + Pace::PROBE_FOR;
            if now + Pace::PROBE >= from && now < until {
                next = next.min(now + Pace::PROBE);
            } else if from > now {
                next = next.min(from);
            }
        }
        next
    }
}

/// The members a leader may hand over to by preemption, at `now`: not passed over; with slots
/// (docs/slots.md), only those counting as many slots as it does and holding none (a member
/// holds at most one slot; a preemption for a member that already holds one could only hand
/// the leader's slot to someone else), and only while the leader is the slot holder last in
/// line: a member that outranks any holder outranks that one, and one slot handed over is
/// enough (every holder it outranks handing it theirs would leave all but one of those slots
/// empty for up to a lease).
pub fn candidates<I, R, S>(l: &Line<I, R, S>, now: I) -> Vec<R>
where
    I: Moment,
    R: Record + Clone,
    S: SlotBlob<Wall = R::Wall>,
{
    if l.slots > 1 && !last_holder_in_line(l) {
        return Vec::new();
    }
    (l.members.iter())
        .filter(|r| l.slots == 1 || (r.slots() == l.slots && !l.holds_slot(r.identity())))
        .filter(|r| !l.is_passed_over(r.identity(), now))
        .cloned()
        .collect()
}

/// Whether the member is the last slot holder in line (or the line does not know it yet: then
/// it behaves as without the rule).
fn last_holder_in_line<I, R, S>(l: &Line<I, R, S>) -> bool
where
    I: Moment,
    R: Record,
    S: SlotBlob<Wall = R::Wall>,
{
    let last = l.members.iter().rfind(|r| l.holds_slot(r.identity()));
    last.is_none_or(|r| r.identity() == l.me) || !l.knows(&l.me)
}
