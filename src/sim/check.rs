//! The checker (design section 15): the rules every simulated history must keep, judged from
//! its trace alone.
//!
//! * **(a)** Never two bodies of one slot alive at once, except where the earlier one's member
//!   was frozen within a lease duration before the later one started (a paused process cannot
//!   stop its child in time), or faults deleted the slot's blob and every live member's record
//!   in between (nothing in storage tells that group from a brand-new one, which leads at
//!   once: design section 16); then the later one has the larger epoch.
//! * **(b)** No body alive past its kill deadline `t_s + L - M`, where `t_s` is when its
//!   member sent the last acquire or renew of that body's lease whose success it heard, unless
//!   its member was frozen meanwhile.
//! * **(c)** A body starts only with an epoch its blob records already, written under its own
//!   lease (rule 6), and epochs grow per slot in the order bodies start, across blob deletions.
//! * **(d)** Liveness: in a stretch of time without faults, whenever fewer bodies run than there
//!   are members able to lead (up, not frozen, not standing by, not stopping; at most one per
//!   slot), that lasts at most the liveness bound.
//! * **(e)** A term handed to a member that was already gone (crashed, stopped, or never a
//!   process at all) is, within the handoff bound, taken over by some member or handed on (or
//!   its lease runs out meanwhile: then it is a free lease, and (d) holds).
//!
//! A body that survives its kill (stuck in the kernel) is beyond anyone's reach from then on:
//! (b) holds it to its kill deadline only up to that instant. What the elector owes instead
//! (rule 7, design section 16): its member neither hands that lease on nor releases it, nor
//! starts another body, while it lives, and another member's body of its slot starts only once
//! its lease has surely expired (a lease duration after the last renew its member heard of);
//! (a) holds those. For (d) the member stands by meanwhile.
//!
//! Every instant is virtual time, exact: a timer fires within a millisecond of its instant
//! (tokio's timer granularity), which is all the slack (b) allows.

use super::trace::{Event, MemberId, What};
use crate::store::{LeaseId, Op};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// What the checker holds a history to.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// `L`.
    pub lease: Duration,
    /// `M`.
    pub margin: Duration,
    /// `[lease].slots`.
    pub slots: u32,
    /// (d): the longest a quiet group may run short of leaders.
    pub liveness: Duration,
    /// (e): the longest a group may run short of a leader after a handoff to a member gone.
    pub handoff: Duration,
    /// When the history ended.
    pub end: Duration,
}

/// The slack (b) allows past a kill deadline: tokio's timers fire on whole milliseconds.
pub const TIMER_SLACK: Duration = Duration::from_millis(2);

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `a` to `e`.
    pub rule: char,
    /// When it was seen broken.
    pub at: Duration,
    /// What broke it, for people.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "({}) at {}: {}",
            self.rule,
            super::trace::at(self.at),
            self.what
        )
    }
}

/// One body's life.
#[derive(Debug, Clone)]
struct Life {
    member: MemberId,
    slot: u32,
    epoch: u64,
    lease: LeaseId,
    start: Duration,
    /// When it survived its kill, if it did.
    stuck: Option<Duration>,
    /// `None`: alive at the end.
    gone: Option<Duration>,
}

impl Life {
    fn gone_or(&self, end: Duration) -> Duration {
        self.gone.unwrap_or(end)
    }
}

/// Intervals `[from, to]` of time.
type Spans = Vec<(Duration, Duration)>;

fn overlaps(spans: &[(Duration, Duration)], from: Duration, to: Duration) -> bool {
    spans.iter().any(|(a, b)| *a <= to && *b >= from)
}

/// Judges one history.
pub fn check(events: &[Event], rules: &Rules) -> Vec<Violation> {
    let end = rules.end;
    let mut lives: Vec<Life> = Vec::new();
    let mut open: BTreeMap<MemberId, usize> = BTreeMap::new();
    let mut frozen: BTreeMap<MemberId, Spans> = BTreeMap::new();
    let mut frozen_since: BTreeMap<MemberId, Duration> = BTreeMap::new();
    let mut up: BTreeMap<MemberId, Spans> = BTreeMap::new();
    let mut up_since: BTreeMap<MemberId, Duration> = BTreeMap::new();
    let mut stopping: BTreeMap<MemberId, Spans> = BTreeMap::new();
    let mut stop_since: BTreeMap<MemberId, Duration> = BTreeMap::new();
    let mut standby: BTreeMap<MemberId, Spans> = BTreeMap::new();
    let mut faults: Spans = Vec::new();
    let mut identity: BTreeMap<MemberId, String> = BTreeMap::new();
    // Heard successes of acquires and renews, by lease: (sent, heard).
    let mut heard: BTreeMap<LeaseId, Vec<(MemberId, Duration, Duration)>> = BTreeMap::new();
    let mut handoffs: Vec<(Duration, usize, String, bool, MemberId)> = Vec::new();
    let mut releases: Vec<(Duration, MemberId)> = Vec::new();
    // Epochs written and confirmed by the service, by lease: (epoch, when applied).
    let mut written: BTreeMap<LeaseId, Vec<(u64, Duration)>> = BTreeMap::new();
    // When each slot's whole state in storage was gone (its blob and every leased record).
    let mut erased: BTreeMap<u32, Vec<Duration>> = BTreeMap::new();
    let close = |spans: &mut BTreeMap<MemberId, Spans>,
                 since: &mut BTreeMap<MemberId, Duration>,
                 m: MemberId,
                 at: Duration| {
        if let Some(from) = since.remove(&m) {
            spans.entry(m).or_default().push((from, at));
        }
    };
    for e in events {
        let at = e.at;
        match &e.what {
            What::Up {
                member,
                identity: i,
                ..
            } => {
                up_since.insert(*member, at);
                identity.insert(*member, i.clone());
            }
            What::Crash { member } => {
                close(&mut up, &mut up_since, *member, at);
                // Killed while frozen: the freeze was a fault until the kill.
                if let Some(from) = frozen_since.get(member) {
                    faults.push((*from, at));
                }
                close(&mut frozen, &mut frozen_since, *member, at);
                close(&mut stopping, &mut stop_since, *member, at);
                faults.push((at, at));
            }
            What::Exit { member } => {
                close(&mut up, &mut up_since, *member, at);
                close(&mut stopping, &mut stop_since, *member, at);
            }
            What::Stop { member } => {
                stop_since.insert(*member, at);
            }
            What::Freeze { member } => {
                frozen_since.entry(*member).or_insert(at);
            }
            What::Thaw { member } => {
                if let Some(from) = frozen_since.remove(member) {
                    frozen.entry(*member).or_default().push((from, at));
                    faults.push((from, at));
                }
            }
            What::Fault { until, .. } => faults.push((at, until.unwrap_or(at))),
            What::Erased { slot } => erased.entry(*slot).or_default().push(at),
            What::Standby { member, until } => {
                standby.entry(*member).or_default().push((at, *until));
            }
            What::BodyStart {
                member,
                slot,
                epoch,
                lease,
            } => {
                open.insert(*member, lives.len());
                lives.push(Life {
                    member: *member,
                    slot: *slot,
                    epoch: *epoch,
                    lease: *lease,
                    start: at,
                    stuck: None,
                    gone: None,
                });
            }
            What::BodyStuck { member, .. } => {
                if let Some(&i) = open.get(member) {
                    lives[i].stuck = Some(at);
                }
            }
            What::BodyGone { member, .. } => {
                if let Some(i) = open.remove(member) {
                    lives[i].gone = Some(at);
                    if let Some(stuck) = lives[i].stuck {
                        standby.entry(*member).or_default().push((stuck, at));
                    }
                }
            }
            What::Released { member } => releases.push((at, *member)),
            What::HandedTo {
                to, slot, member, ..
            } => {
                // Gone: no member runs under that identity now, or it is stopping.
                let alive = identity.iter().any(|(m, i)| {
                    i == to && up_since.contains_key(m) && !stop_since.contains_key(m)
                });
                handoffs.push((at, *slot as usize, to.clone(), alive, *member));
            }
            What::Applied {
                op: Op::WriteEpoch,
                lease: Some(lease),
                ok: true,
                epoch: Some(epoch),
                ..
            } => written.entry(*lease).or_default().push((*epoch, at)),
            What::Answered {
                member,
                op: Op::Acquire | Op::Renew,
                lease: Some(lease),
                sent,
                ok: true,
            } => heard.entry(*lease).or_default().push((*member, *sent, at)),
            _ => {}
        }
    }
    for (m, from) in frozen_since {
        // Still frozen at the end.
        frozen.entry(m).or_default().push((from, end));
        faults.push((from, end));
    }
    for (m, from) in up_since {
        up.entry(m).or_default().push((from, end));
    }
    for (m, from) in stop_since {
        stopping.entry(m).or_default().push((from, end));
    }
    for life in lives.iter().filter(|l| l.gone.is_none()) {
        if let Some(stuck) = life.stuck {
            standby.entry(life.member).or_default().push((stuck, end));
        }
    }
    // When a body's lease has surely expired on the service: a lease duration after the last
    // acquire or renew of it that its member heard had succeeded.
    let expiry = |life: &Life| {
        heard
            .get(&life.lease)
            .into_iter()
            .flatten()
            .filter(|(m, ..)| *m == life.member)
            .map(|(_, sent, _)| *sent + rules.lease)
            .max()
    };
    let frozen_in = |m: MemberId, from: Duration, to: Duration| {
        frozen.get(&m).is_some_and(|s| overlaps(s, from, to))
    };

    let mut violations = Vec::new();
    let mut by_slot: BTreeMap<u32, Vec<&Life>> = BTreeMap::new();
    for life in &lives {
        by_slot.entry(life.slot).or_default().push(life);
    }
    for (slot, slot_lives) in &by_slot {
        // (a) and (c), in start order.
        for (j, later) in slot_lives.iter().enumerate() {
            for earlier in &slot_lives[..j] {
                let overlap = later.start < earlier.gone_or(end);
                if !overlap {
                    continue;
                }
                let frozen = frozen_in(
                    earlier.member,
                    later.start.saturating_sub(rules.lease),
                    later.start,
                );
                // Stuck, and waited out by another member.
                let waited_out = earlier.stuck.is_some_and(|s| s <= later.start)
                    && later.member != earlier.member
                    && expiry(earlier).is_some_and(|x| x <= later.start);
                // The blob and every record deleted: a brand-new group, by design.
                let after_erasure = erased.get(slot).is_some_and(|e| {
                    e.iter()
                        .any(|at| *at >= earlier.start && *at <= later.start)
                });
                let excused =
                    (frozen || waited_out || after_erasure) && later.epoch > earlier.epoch;
                if !excused {
                    violations.push(Violation {
                        rule: 'a',
                        at: later.start,
                        what: format!(
                            "slot {slot}: m{} started epoch {} while m{}'s body of epoch {} was alive (until {})",
                            later.member,
                            later.epoch,
                            earlier.member,
                            earlier.epoch,
                            super::trace::at(earlier.gone_or(end))
                        ),
                    });
                }
            }
        }
        for life in slot_lives {
            let recorded = written.get(&life.lease).is_some_and(|w| {
                w.iter()
                    .any(|(e, at)| *e == life.epoch && *at <= life.start)
            });
            if !recorded {
                violations.push(Violation {
                    rule: 'c',
                    at: life.start,
                    what: format!(
                        "slot {slot}: m{}'s body of epoch {} started before its blob recorded that epoch under its lease",
                        life.member, life.epoch
                    ),
                });
            }
        }
        for w in slot_lives.windows(2) {
            if w[1].epoch <= w[0].epoch {
                violations.push(Violation {
                    rule: 'c',
                    at: w[1].start,
                    what: format!(
                        "slot {slot}: m{} started epoch {} after m{}'s epoch {}",
                        w[1].member, w[1].epoch, w[0].member, w[0].epoch
                    ),
                });
            }
        }
    }
    // (a): the lease of a stuck body does not move while it lives.
    for life in &lives {
        let Some(stuck) = life.stuck else { continue };
        let gone = life.gone_or(end);
        let moved = releases
            .iter()
            .map(|(at, m)| (*at, *m))
            .chain(handoffs.iter().map(|(at, _, _, _, m)| (*at, *m)))
            .find(|(at, m)| *m == life.member && *at >= stuck && *at < gone);
        let beside = lives
            .iter()
            .find(|l| l.member == life.member && l.start > stuck && l.start < gone);
        if let Some(l) = beside {
            violations.push(Violation {
                rule: 'a',
                at: l.start,
                what: format!(
                    "m{} started epoch {} while its body of epoch {}, stuck since {}, was alive",
                    life.member,
                    l.epoch,
                    life.epoch,
                    super::trace::at(stuck)
                ),
            });
        }
        if let Some((at, _)) = moved {
            violations.push(Violation {
                rule: 'a',
                at,
                what: format!(
                    "m{} gave its lease up while its body of epoch {}, stuck since {}, was alive",
                    life.member,
                    life.epoch,
                    super::trace::at(stuck)
                ),
            });
        }
    }
    // (b).
    for life in &lives {
        // A body stuck in the kernel is beyond reach from the moment its kill failed.
        let gone = life.stuck.unwrap_or(life.gone_or(end));
        let deadline = heard
            .get(&life.lease)
            .into_iter()
            .flatten()
            .filter(|(m, _, heard)| *m == life.member && *heard <= gone)
            .map(|(_, sent, _)| *sent + rules.lease - rules.margin)
            .max();
        if frozen_in(life.member, life.start, gone) {
            continue;
        }
        match deadline {
            None => violations.push(Violation {
                rule: 'b',
                at: life.start,
                what: format!(
                    "m{}'s body of epoch {} ran without a lease it heard it had",
                    life.member, life.epoch
                ),
            }),
            Some(d) if gone > d + TIMER_SLACK => violations.push(Violation {
                rule: 'b',
                at: d,
                what: format!(
                    "m{}'s body of epoch {} was alive {} past its kill deadline",
                    life.member,
                    life.epoch,
                    super::trace::at(gone - d)
                ),
            }),
            Some(_) => {}
        }
    }

    // (d) and (e): when the group runs short of leaders.
    let short = Shortfall {
        lives: &lives,
        up: &up,
        frozen: &frozen,
        standby: &standby,
        stopping: &stopping,
        slots: rules.slots,
    };
    let mut times: Vec<Duration> = vec![Duration::ZERO, end];
    for l in &lives {
        times.push(l.start);
        times.extend(l.stuck);
        times.extend(l.gone);
    }
    for spans in [&up, &frozen, &standby, &stopping] {
        for s in spans.values().flatten() {
            times.extend([s.0, s.1]);
        }
    }
    for (a, b) in &faults {
        times.extend([*a, *b]);
    }
    times.retain(|t| *t <= end);
    times.sort();
    times.dedup();
    // Runs of time, outside every fault, during which the group was short.
    let mut run: Option<(Duration, bool)> = None;
    for w in times.windows(2) {
        let (t, next) = (w[0], w[1]);
        // A fault of an instant (a crash, a deletion) starts the count again from it.
        if faults.iter().any(|(a, b)| a == b && *a == t) {
            run = None;
        }
        let quiet = !faults.iter().any(|(a, b)| *a <= t && t < *b);
        if quiet && short.at(t) {
            let (from, reported) = run.get_or_insert((t, false));
            if !*reported && next - *from > rules.liveness {
                violations.push(Violation {
                    rule: 'd',
                    at: *from + rules.liveness,
                    what: format!(
                        "the group has run short of a leader since {} without a fault (over {})",
                        super::trace::at(*from),
                        super::trace::at(rules.liveness)
                    ),
                });
                *reported = true;
            }
        } else {
            run = None;
        }
    }
    violations.retain(|v| v.rule != 'd' || v.at < end);
    for (i, (at, slot, to, alive, by)) in handoffs.iter().enumerate() {
        if *alive || overlaps(&faults, *at, *at + rules.handoff) || *at + rules.handoff > end {
            continue;
        }
        // The lease the leader handed ran out within the bound (a chain of members passed
        // over outlasts what was left of it): from then on it is a free lease, which (d)
        // holds the group to.
        let lapsed = lives
            .iter()
            .filter(|l| l.member == *by && l.slot as usize == *slot && l.start <= *at)
            .max_by_key(|l| l.start)
            .and_then(&expiry)
            .is_some_and(|x| x <= *at + rules.handoff);
        if lapsed {
            continue;
        }
        // Handed on (to the next member, by the leader that confirms its handoffs) in time:
        // that handoff is judged on its own.
        let handed_on = handoffs[i + 1..]
            .iter()
            .any(|(later, s, ..)| s == slot && *later <= *at + rules.handoff)
            || releases
                .iter()
                .any(|(t, m)| m == by && *t >= *at && *t <= *at + rules.handoff);
        // Short at every instant from the handoff to the bound: nobody took over in time.
        let mut instants: Vec<Duration> = times
            .iter()
            .copied()
            .filter(|t| *t >= *at && *t <= *at + rules.handoff)
            .chain([*at])
            .collect();
        instants.sort();
        // Taken: a body of that slot started in time.
        let taken = lives
            .iter()
            .any(|l| l.slot as usize == *slot && l.start >= *at && l.start <= *at + rules.handoff);
        if !handed_on && !taken && instants.iter().all(|t| short.at(*t)) {
            violations.push(Violation {
                rule: 'e',
                at: *at + rules.handoff,
                what: format!(
                    "slot {slot} was handed to {to}, already gone, at {}; nobody took it, and it was not handed on, within {}",
                    super::trace::at(*at),
                    super::trace::at(rules.handoff)
                ),
            });
        }
    }
    violations.sort_by_key(|v| v.at);
    violations
}

/// Whether the group runs fewer bodies than it could at an instant.
struct Shortfall<'a> {
    lives: &'a [Life],
    up: &'a BTreeMap<MemberId, Spans>,
    frozen: &'a BTreeMap<MemberId, Spans>,
    standby: &'a BTreeMap<MemberId, Spans>,
    stopping: &'a BTreeMap<MemberId, Spans>,
    slots: u32,
}

impl Shortfall<'_> {
    /// Fewer bodies alive at `t` than members able to lead (at most one per slot).
    fn at(&self, t: Duration) -> bool {
        let within =
            |spans: Option<&Spans>| spans.is_some_and(|s| s.iter().any(|(a, b)| *a <= t && t < *b));
        let able = self
            .up
            .keys()
            .filter(|m| {
                within(self.up.get(m))
                    && !within(self.frozen.get(m))
                    && !within(self.standby.get(m))
                    && !within(self.stopping.get(m))
            })
            .count();
        let alive = self
            .lives
            .iter()
            .filter(|l| l.start <= t && l.stuck.or(l.gone).is_none_or(|g| t < g))
            .count();
        alive < able.min(self.slots as usize)
    }
}
