//! The preferred leader (docs/preferred.md): while this instance leads, it watches the line for a
//! live member of strictly higher priority that has been a member for `preempt_after`, and when
//! there is one, says so ([`watch`]); the loop then stops the body and hands the lease to that
//! member ([`TermEnd::Preempted`](super::TermEnd::Preempted)).
//!
//! "A member for `preempt_after`" is measured from its record's creation, by the service's
//! clock: the leader turns the record's age in a listing (the listing's `Date` minus the
//! record's creation time) into a local instant when it first sees it, so that neither its own
//! restart nor the members' clocks change it. Both times are whole seconds, so that instant is
//! only good to a second; and a member killed after it joined leaves a record that looks alive
//! until its record lease expires ([`Pace::RECORD_LEASE`](Pace::RECORD_LEASE), longer than
//! short windows). So the member itself marks its record once it has been a member for its
//! own `preempt_after` by its own monotonic clock (`settled`, one write per join), and the
//! leader preempts only for a marked record: a crash-looping member that never lives
//! `preempt_after` never preempts, and the mark makes the moment exact. The leader lists at
//! the cadence of [`cadence`] to learn of members before they are eligible, and every
//! [`Pace::PROBE`] around the moment a member it knows of should mark its record.
//!
//! Preemption counts only members confirmed alive (docs/safety.md, "Recovery from anything"): a
//! member passed over after failing to take a handoff is no candidate while it is passed over, and
//! a member with an advertised URL must answer a wake-up there before the leader stops its body for
//! it (one that does not is passed over). Without `advertise` the settled mark is all there is; a
//! handoff to a member that died since is then caught by the confirmed handoff.

use super::Observer;
use super::members::{Line, Membership};
use super::wake::{self, WakeSent};
use crate::clock;
use crate::fmt::human;
use crate::store::{LeaseStore, MemberKey, MemberRecord};
use crate::timing::{POLL_JITTER, Timing};
use leasehold_core::Pace;
use std::collections::BTreeMap;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// Why this leader steps down, for the one line it logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Preemption {
    /// The member it hands over to.
    pub to: String,
    /// That member's priority, and ours.
    pub priority: i64,
    pub ours: i64,
    /// How long that member has been a member, as its record says.
    pub member_for: Duration,
}

impl std::fmt::Display for Preemption {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "preempted by {} (priority {} > {}, a member for {})",
            self.to,
            self.priority,
            self.ours,
            human(self.member_for)
        )
    }
}

/// The leader's listing period while preemption is on: `preempt_after / 2` (so that it knows of
/// a member before the member is eligible), shortened by up to 20 % at random (leaders of
/// several groups do not list in step), and no longer than the rare listing of every member.
pub(crate) fn cadence(preempt_after: Duration) -> Duration {
    (preempt_after / 2)
        .mul_f64(1.0 - POLL_JITTER * fastrand::f64())
        .min(Pace::LIST_EVERY)
}

/// A member of higher priority the leader knows of.
#[derive(Debug, Clone)]
struct Candidate {
    /// Its record's creation time (a new record is a new membership).
    joined: OffsetDateTime,
    /// From when it may be eligible, on the local clock: its creation, by the service's age of
    /// the record, plus `preempt_after`.
    eligible_at: Instant,
}

/// What the leader knows of the members it might hand over to.
pub(crate) struct PreemptionWatch {
    after: Duration,
    ours: i64,
    me: String,
    candidates: BTreeMap<MemberKey, Candidate>,
}

impl PreemptionWatch {
    pub fn new(after: Duration, ours: i64, me: &str) -> Self {
        Self {
            after,
            ours,
            me: me.to_owned(),
            candidates: BTreeMap::new(),
        }
    }

    /// Whether `r` could ever be handed the lease by preemption: alive, another member, and of
    /// strictly higher priority.
    fn outranks(&self, r: &MemberRecord) -> bool {
        r.is_alive() && r.identity() != self.me && r.member.priority > self.ours
    }

    /// Takes a listing sent at `sent`: members of higher priority seen for the first time get
    /// the instant they may be eligible; members gone, dead, or recreated are forgotten (a
    /// member that dies cancels its timer).
    pub fn listed(&mut self, line: &[MemberRecord], sent: Instant) {
        let mut kept = BTreeMap::new();
        let outranking: Vec<&MemberRecord> = line.iter().filter(|r| self.outranks(r)).collect();
        for r in outranking {
            let known = self
                .candidates
                .remove(&r.key)
                .filter(|c| c.joined == r.joined);
            let c = known.unwrap_or_else(|| Candidate {
                joined: r.joined,
                eligible_at: (sent + self.after).checked_sub(r.age).unwrap_or(sent),
            });
            kept.insert(r.key.clone(), c);
        }
        self.candidates = kept;
    }

    /// The member to hand over to now, from a fresh listing: the first in line that outranks
    /// this leader, is not in a cooldown, and has marked its record as a member for
    /// `preempt_after` (for a member whose own window is shorter than ours: and the service's
    /// age of its record says so too).
    pub fn due(
        &self,
        line: &[MemberRecord],
        now: Instant,
        wall: OffsetDateTime,
    ) -> Option<Preemption> {
        line.iter()
            .filter(|r| self.outranks(r) && !r.member.in_standby(wall))
            .find_map(|r| {
                let settled = r.member.settled?;
                let c = self.candidates.get(&r.key)?;
                let long_enough = settled >= self.after || now >= c.eligible_at;
                long_enough.then(|| Preemption {
                    to: r.identity().to_owned(),
                    priority: r.member.priority,
                    ours: self.ours,
                    member_for: settled.max(r.age),
                })
            })
    }

    /// The member that will be eligible first, and when (local clock), among those not yet.
    pub fn first(&self, now: Instant) -> Option<(&MemberKey, Instant)> {
        self.candidates
            .iter()
            .map(|(k, c)| (k, c.eligible_at))
            .filter(|(_, at)| *at + Pace::PROBE_FOR > now)
            .min_by_key(|(_, at)| *at)
    }

    /// When to list next, after a listing at `now`: at the cadence, or sooner when a member
    /// should mark its record about then (every [`Pace::PROBE`] from a second before the instant it
    /// may be eligible, for [`Pace::PROBE_FOR`]).
    pub fn next_list(&self, now: Instant, cadence: Duration) -> Instant {
        let mut next = now + cadence;
        for c in self.candidates.values() {
            let from = c
                .eligible_at
                .checked_sub(Pace::SERVICE_CLOCK)
                .unwrap_or(c.eligible_at);
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

/// The members a leader may hand over to by preemption: with slots (docs/slots.md), only those
/// counting as many slots as we do and holding none (a member holds at most one slot; a preemption
/// for a member that already holds one could only hand our slot to someone else), and only while
/// this instance is the slot holder last in line: a member that outranks any holder outranks that
/// one, and one slot handed over is enough (every holder it outranks handing it theirs would leave
/// all but one of those slots empty for up to a lease).
fn candidates(l: &Line) -> Vec<MemberRecord> {
    if l.succession.slots > 1 && !last_holder_in_line(l) {
        return Vec::new();
    }
    l.succession
        .members
        .iter()
        .filter(|r| {
            l.succession.slots == 1
                || (r.member.slots == l.succession.slots && !l.succession.holds_slot(r.identity()))
        })
        .filter(|r| !l.is_passed_over(r.identity()))
        .cloned()
        .collect()
}

/// Whether this instance is the last slot holder in line (or the line does not know it yet:
/// then it behaves as without the rule).
fn last_holder_in_line(l: &Line) -> bool {
    let me = l.published.identity.as_str();
    let last = l
        .succession
        .members
        .iter()
        .rfind(|r| l.succession.holds_slot(r.identity()));
    last.is_none_or(|r| r.identity() == me)
        || !l.succession.members.iter().any(|r| r.identity() == me)
}

/// Who lists for preemption: with slots, only the holder of slot 0 (the group's blob) lists at
/// the preemption [`cadence`]; holders of the other slots look at the line as their member
/// record task lists it anyway while they lead (every
/// [`Pace::LEADER_LIST_EVERY`](Pace::LEADER_LIST_EVERY)), so that the group's
/// listings do not grow with N. Those preempt up to one such period after the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// This leader lists at the cadence, and probes around a member's moment.
    Own,
    /// This leader lists nothing for preemption; it reads the line as others list it.
    Borrowed,
}

impl Listing {
    /// The listing a holder of `slot` does.
    pub fn for_slot(slot: u32) -> Self {
        match slot {
            0 => Listing::Own,
            _ => Listing::Borrowed,
        }
    }
}

/// While this instance leads: resolves when it should hand over to a member of higher
/// priority (never, with `preempt_after = "off"`). Lists the members at the [`cadence`], and
/// every [`Pace::PROBE`] while a member should be marking its record. (Wake-ups do not make it list:
/// `POST /wake` carries no authority, and must not make a leader spend List requests.)
#[allow(clippy::too_many_arguments)]
pub(crate) async fn watch<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    membership: &Membership,
    timing: &Timing,
    after: Option<Duration>,
    ours: i64,
    listing: Listing,
    sender: &wake::Sender,
) -> Preemption {
    let Some(after) = after else {
        return std::future::pending().await;
    };
    let me = membership.with(|l| l.published.identity.clone());
    let mut w = PreemptionWatch::new(after, ours, &me);
    if listing == Listing::Borrowed {
        return borrowed(membership, observer, &mut w, sender).await;
    }
    // The line as last listed tells of members already known: the first listing of the term
    // comes at the cadence (or when one of them is about to be eligible), not at once.
    let (cached, listed) = membership.with(|l| (candidates(l), l.succession.listed));
    let mut next = match listed {
        Some(at) => {
            w.listed(&cached, at);
            w.next_list(Instant::now(), cadence(after))
        }
        None => Instant::now(),
    };
    loop {
        if Instant::now() >= next {
            let sent = Instant::now();
            let limit = clock::now() + timing.request_timeout();
            match membership.list(store, observer, limit).await {
                Ok(()) => {
                    let line = membership.with(|l| candidates(l));
                    w.listed(&line, sent);
                    if let Some(p) = w.due(&line, Instant::now(), crate::clock::wall())
                        && answers(&line, &p, membership, observer, sender).await
                    {
                        membership.with(|l| l.preempting = None);
                        return p;
                    }
                    let pending = w.first(Instant::now()).and_then(|(k, at)| {
                        let r = line.iter().find(|r| &r.key == k)?;
                        let ahead = at.saturating_duration_since(Instant::now());
                        Some((r.identity().to_owned(), crate::clock::wall() + ahead))
                    });
                    let changed = membership.with(|l| {
                        let changed = l.preempting != pending;
                        l.preempting = pending;
                        changed
                    });
                    if changed {
                        observer.line(&membership.view());
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "could not list the members to look for a preferred leader")
                }
            }
            next = w.next_list(Instant::now(), cadence(after));
        }
        tokio::time::sleep_until(next).await;
    }
}

/// The watch of a holder that lists nothing for preemption: each time the line was listed
/// (by the member record task), the same rule on it.
async fn borrowed(
    membership: &Membership,
    observer: &dyn Observer,
    w: &mut PreemptionWatch,
    sender: &wake::Sender,
) -> Preemption {
    let mut seen = None;
    loop {
        let (listed, line) = membership.with(|l| (l.succession.listed, candidates(l)));
        if let Some(at) = listed.filter(|at| seen != Some(*at)) {
            seen = Some(at);
            w.listed(&line, at);
            if let Some(p) = w.due(&line, Instant::now(), crate::clock::wall())
                && answers(&line, &p, membership, observer, sender).await
            {
                return p;
            }
        }
        tokio::time::sleep(Pace::BORROWED_LISTING_LOOK).await;
    }
}

/// Whether the member `p` names is confirmed alive, as far as it can be: one with an
/// advertised URL must answer a probe there, a `POST /wake` without its wake token (any
/// answer, 401 as a rule: it is a process that listens; the probe costs it no attempt, no
/// storage request, and not its one wake-up a second, which the handoff's wake-up then has);
/// one that does not is passed over, and the leader stays. Without `advertise` its settled
/// record is all there is.
async fn answers(
    line: &[MemberRecord],
    p: &Preemption,
    membership: &Membership,
    observer: &dyn Observer,
    sender: &wake::Sender,
) -> bool {
    let Some(url) = line
        .iter()
        .find(|r| r.identity() == p.to)
        .and_then(|r| r.member.advertise.as_deref())
    else {
        return true;
    };
    if !matches!(
        sender.send(url, None, None).await,
        WakeSent::Failed | WakeSent::Unreachable
    ) {
        return true;
    }
    tracing::warn!(
        member = p.to,
        "not stepping down for a member of higher priority that does not answer at its \
         advertised URL; passing it over"
    );
    membership.with(|l| l.pass_over(&p.to));
    observer.line(&membership.view());
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::LeaseState;

    fn record(identity: &str, priority: i64, age: u64, settled: Option<u64>) -> MemberRecord {
        let mut r = crate::elector::testing::record(identity, priority);
        r.age = Duration::from_secs(age);
        r.member.settled = settled.map(Duration::from_secs);
        r
    }

    #[tokio::test(start_paused = true)]
    async fn only_a_settled_member_of_higher_priority_is_due() {
        let after = Duration::from_secs(30);
        let mut w = PreemptionWatch::new(after, 0, "me");
        let wall = crate::clock::wall();
        let now = Instant::now();
        let line = vec![
            record("high", 10, 5, None),
            record("me", 0, 100, Some(30)),
            record("equal", 0, 100, Some(30)),
            record("low", -1, 100, Some(30)),
        ];
        w.listed(&line, now);
        assert_eq!(w.due(&line, now, wall), None, "not settled");
        assert_eq!(
            w.first(now).map(|(_, at)| at - now),
            Some(Duration::from_secs(25))
        );
        // The probing starts a second before it may be eligible.
        assert_eq!(
            w.next_list(now, Duration::from_secs(15)),
            now + Duration::from_secs(15)
        );
        let soon = now + Duration::from_secs(24);
        assert_eq!(
            w.next_list(soon, Duration::from_secs(15)),
            soon + Pace::PROBE
        );
        let mut settled = line.clone();
        settled[0].member.settled = Some(after);
        let due = w.due(&settled, soon, wall).expect("settled");
        assert_eq!(due.to, "high");
        assert_eq!(
            due.to_string(),
            "preempted by high (priority 10 > 0, a member for 30s)"
        );
        // Dead, or in a cooldown: not due.
        let mut dead = settled.clone();
        dead[0].lease = LeaseState::Expired;
        w.listed(&dead, soon);
        assert_eq!(w.due(&dead, soon, wall), None);
        assert!(w.first(soon).is_none(), "its timer is gone");
        let mut resting = settled.clone();
        resting[0].member.standby_until = Some(wall + time::Duration::seconds(60));
        assert_eq!(w.due(&resting, soon, wall), None);
        // A mark for a shorter window than ours counts only once the service's age agrees.
        let mut w = PreemptionWatch::new(after, 0, "me");
        let short = vec![record("high", 10, 12, Some(10))];
        w.listed(&short, now);
        assert_eq!(w.due(&short, now, wall), None);
        assert!(w.due(&short, now + Duration::from_secs(18), wall).is_some());
    }
}
