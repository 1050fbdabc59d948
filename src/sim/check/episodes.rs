//! Rule (d), case by case: every stretch in which the group runs short of leaders is held to
//! the bound of the case that began it (src/cases.rs), counted from its cause in the world.
//!
//! Each cause (a SIGTERM, a kill, a body's own end, a deletion, a fault's end, a start) is
//! classified with what the world shows at that instant: who leads, and the line of member
//! records with whose process holds each. A handover's bound adds, for each member it will
//! pass over on the way (a dead one ahead in line, or one that left since the leader's last
//! listing), that member's confirm window. A stretch is judged at each instant against the
//! latest of the deadlines of the causes since the last fault (a later cause only extends the
//! time allowed); a fault inside an episode suspends its bound, and then only the liveness
//! bound after the fault holds (src/sim/check/liveness.rs).

use super::facts::{Cause, Facts};
use super::liveness::{short, timeline};
use super::rules::{Rules, Violation};
use crate::cases::{Case, Term, row};
use crate::sim::trace::{InLine, MemberId, at};
use leasehold_core::Pace;
use std::time::Duration;

/// One cause, classified.
#[derive(Debug, Clone)]
struct Episode {
    at: Duration,
    case: Case,
    /// `None`: no bound of its own.
    bound: Option<Duration>,
    /// What the classification saw, for people.
    why: String,
    /// It only extends an episode already under way (a member that did not lead died: a
    /// handover on its way may pass it over), and begins none.
    extends: bool,
}

/// Judges every stretch short of leaders against its episodes' bounds.
pub(super) fn judge(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let episodes: Vec<Episode> = f
        .causes
        .iter()
        .filter_map(|(at, cause)| classify(f, rules, *at, *cause))
        .map(|e| on_a_set(rules, e))
        .collect();
    // The instants after which every earlier cause is suspended: the end of each fault that
    // lasts, and the deletion of records (a crash or a blob's deletion is a cause, and its
    // bound counts from it).
    let mut fault_ends: Vec<Duration> = f
        .faults
        .iter()
        .filter(|(a, b)| a < b)
        .map(|(_, b)| *b)
        .chain(
            f.instant_faults
                .iter()
                .filter(|(_, c)| *c == Some(Cause::RecordsDeleted))
                .map(|(at, _)| *at),
        )
        .collect();
    fault_ends.sort();
    let horizon = row(Case::FaultEnd)
        .bound
        .map(|b| b.value(&rules.timing, rules.slots, 0, 0))
        .unwrap_or_default();
    let times = timeline(f);
    let mut violations = Vec::new();
    let mut run: Option<(Duration, bool)> = None;
    for w in times.windows(2) {
        let (t, next) = (w[0], w[1]);
        if !short(f, rules.slots, t) {
            run = None;
            continue;
        }
        let (from, reported) = run.get_or_insert((t, false));
        if *reported || f.faults.iter().any(|(a, b)| *a <= t && t < *b) {
            continue;
        }
        let since = fault_ends
            .iter()
            .rev()
            .find(|b| **b <= t)
            .copied()
            .unwrap_or_default();
        let mut open: Vec<&Episode> = episodes
            .iter()
            .filter(|e| e.at >= since && e.at <= t)
            .collect();
        let under_way = |x: &Episode| {
            open.iter()
                .any(|e| !e.extends && e.at <= x.at && e.bound.is_none_or(|b| e.at + b >= x.at))
        };
        let extending: Vec<bool> = open.iter().map(|e| !e.extends || under_way(e)).collect();
        let mut keep = extending.into_iter();
        open.retain(|_| keep.next().unwrap_or(false));
        if open
            .iter()
            .any(|e| e.bound.is_none() && e.at + horizon >= t)
        {
            continue;
        }
        let governing = open
            .iter()
            .filter_map(|e| e.bound.map(|b| (e.at + b, *e)))
            .max_by_key(|(deadline, _)| *deadline);
        let Some((deadline, e)) = governing else {
            if since == Duration::ZERO && open.is_empty() {
                violations.push(Violation {
                    rule: 'd',
                    at: t,
                    what: format!("the group ran short of a leader at {} with no cause", at(t)),
                });
                *reported = true;
            }
            continue;
        };
        if deadline < next && deadline < f.end {
            violations.push(Violation {
                rule: 'd',
                at: deadline.max(t),
                what: format!(
                    "the group has run short of a leader since {}: {} (from {}: {}) promises {}",
                    at(*from),
                    row(e.case).what,
                    at(e.at),
                    e.why,
                    at(e.bound.unwrap_or_default())
                ),
            });
            *reported = true;
        }
    }
    violations
}

/// The episode `cause` at `t` begins, if it begins one.
/// On a replica set, an episode is held to the liveness bound at the least: its member is not
/// lined (docs/quorum.md, development.md "The quorum in the core": a term's end releases every
/// replica, nothing is handed over, and the others find the lease free at their poll, a split
/// vote a round more), so the handover's bounds of src/cases.rs, built on the line and the
/// handoff of one account, are not what it promises until the handoff on every replica lands.
fn on_a_set(rules: &Rules, mut e: Episode) -> Episode {
    if rules.replicas > 1 {
        e.bound = e.bound.map(|b| b.max(rules.liveness));
    }
    e
}

fn classify(f: &Facts, rules: &Rules, t: Duration, cause: Cause) -> Option<Episode> {
    let timing = &rules.timing;
    let fixed = |case: Case, why: String| {
        let bound = row(case).bound.map(|b| b.value(timing, rules.slots, 0, 0));
        Some(Episode {
            at: t,
            case,
            bound,
            why,
            extends: false,
        })
    };
    match cause {
        Cause::Stop(m) => match holding(f, m, t) {
            Some(slot) => handover(f, rules, m, t, slot, Handing::Stop),
            // A member that did not lead leaves: a handover on its way may pass it over.
            None => Some(Episode {
                at: t,
                case: Case::DeadSuccessor,
                bound: Some(passed_along(rules)),
                why: format!("m{m} stopped while it did not lead"),
                extends: true,
            }),
        },
        Cause::Ended(m) => {
            let slot = f
                .lives
                .iter()
                .find(|l| l.member == m && l.gone == Some(t))?
                .slot;
            handover(f, rules, m, t, slot, Handing::Ended)
        }
        Cause::Unhealthy(m) => {
            let slot = holding(f, m, t)?;
            handover(f, rules, m, t, slot, Handing::StepDown)
        }
        // A stop signal for a preferred member (a SIGTERM or a failed check is judged as such).
        Cause::Stopping(m) => {
            let stopping = f
                .stopping
                .get(&m)
                .is_some_and(|s| s.iter().any(|(a, b)| *a <= t && t <= *b));
            let standing_by = f
                .standby
                .get(&m)
                .is_some_and(|s| s.iter().any(|(a, b)| *a <= t && t <= *b));
            if stopping || standing_by {
                return None;
            }
            let slot = holding(f, m, t)?;
            handover(f, rules, m, t, slot, Handing::Preempted)
        }
        // Killed while it confirmed a handoff (its body gone, the lease handed, not yet taken):
        // nobody hands the lease on now, and it runs out. With slots, members waiting behind a
        // dead member without a URL learn of the free slot only once its record runs out.
        Cause::Crash(m)
            if holding(f, m, t).is_none()
                && f.handoffs.iter().any(|h| {
                    h.by == m
                        && h.at <= t
                        && h.at + Term::LaterHop.value(timing) + Term::Requests.value(timing) >= t
                        && !f
                            .lives
                            .iter()
                            .any(|l| l.slot == h.slot && l.start >= h.at && l.start <= t)
                }) =>
        {
            let case = match behind_a_silent_ghost(f, rules, t) {
                true => Case::SlotHolderCrashBehindGhost,
                false => Case::Crash,
            };
            fixed(case, format!("m{m} killed while it confirmed a handoff"))
        }
        Cause::Crash(m) | Cause::Stuck(m) if holding(f, m, t).is_none() => {
            // A member that did not lead: a handover on its way may pass it over; with slots,
            // members waiting behind it may wait for its record to run out.
            let bound = match rules.slots {
                1 => passed_along(rules),
                _ => passed_along(rules).max(
                    row(Case::SlotHolderCrashBehindGhost)
                        .bound
                        .map(|b| b.value(timing, rules.slots, 0, 0))
                        .unwrap_or_default(),
                ),
            };
            Some(Episode {
                at: t,
                case: Case::DeadSuccessor,
                bound: Some(bound),
                why: format!("m{m} killed while it did not lead"),
                extends: true,
            })
        }
        Cause::Crash(m) | Cause::Stuck(m) => {
            let line = f.line_at(t).unwrap_or_default();
            let me = f.identity_at(m, t).unwrap_or_default();
            // With slots, the killed holder's own record waits in line now, dead, like any.
            let me_in_line = match rules.slots {
                1 => me,
                _ => "",
            };
            // With slots, the slot of the killed holder's body (gone at `t`).
            let slot = (f.lives.iter())
                .find(|l| l.member == m && l.start <= t && l.stuck.or(l.gone) == Some(t))
                .map(|l| l.slot);
            // Other slots free already (their holders gone earlier, not yet taken again) go
            // first, each to the next live member waiting in line: this one goes to the member
            // after those, and the dead members ahead of it are those it waits behind.
            let free = match rules.slots {
                1 => 0,
                n => (0..n)
                    .filter(|s| {
                        Some(*s) != slot && !f.lives.iter().any(|l| l.slot == *s && l.runs_at(t))
                    })
                    .count(),
            };
            let mut dead = dead_ahead(f, line, me_in_line, t, free);
            // With one slot, a live member first in line that does not poll (its line says
            // another is next) leaves the free lease to the watchers, as a dead one does.
            let polls = |o: MemberId| {
                polls_within(
                    f,
                    o,
                    t,
                    t + Term::Poll.value(timing) + Term::Requests.value(timing),
                )
            };
            let first_live = line
                .iter()
                .filter(|r| r.identity != me && !r.standby)
                .find(|r| r.owner.is_some());
            let unaware = rules.slots == 1
                && dead.is_empty()
                && first_live.is_some_and(|r| {
                    r.owner
                        .is_some_and(|o| !polls(o) && !could_know(f, rules, o, me, t))
                });
            if unaware {
                dead.extend(first_live);
            }
            // A probe finds each dead member with a URL within a watch.
            let found = |dead: &[&InLine]| {
                dead.iter().all(|r| r.advertised)
                    && Term::Watch.value(timing) * dead.len() as u32 + Term::Poll.value(timing)
                        <= timing.duration
            };
            let case = match (rules.slots, dead.is_empty()) {
                (1, true) => Case::Crash,
                (1, false) => Case::CrashBehindGhost,
                (_, true) => Case::SlotHolderCrash,
                (_, false) if found(&dead) => Case::SlotHolderCrash,
                (_, false) => Case::SlotHolderCrashBehindGhost,
            };
            fixed(case, format!("m{m} killed while it led"))
        }
        // A member finds the blob missing within a watch of the deletion, and its lock-delay
        // runs from then; with no member up, the first to start finds it, at its start.
        Cause::Deleted(slot) => {
            let found = first_up(f, t);
            let mut episode = fixed(Case::Deleted, format!("slot {slot}'s blob deleted"))?;
            if found > t {
                episode.at = found;
                episode.why += &format!(", found by a member started at {}", at(found));
            }
            Some(episode)
        }
        Cause::RecordsDeleted => fixed(Case::RecordsDeleted, "records deleted".into()),
        Cause::Up(m) => {
            // A member that restarted within a record lease of its crash finds its old record
            // held still: it is out of line, and watches, until that record runs out.
            let me = f.identity_at(m, t).unwrap_or_default();
            let behind_itself = f
                .line_at(t)
                .unwrap_or_default()
                .iter()
                .any(|r| r.identity == me && r.owner.is_none());
            // A member that joins while a handover is under way (the lease handed, not yet
            // taken, nor released by the member that handed it) frees nothing: the
            // handover's bound holds, and the member that joined may cost it a first hop more
            // (it moves ahead of the member handed the lease). A lease released since is free:
            // the join is a case of its own.
            let handing = f.handoffs.iter().any(|h| {
                h.at <= t
                    && h.at + passed_along(rules) >= t
                    && !f
                        .lives
                        .iter()
                        .any(|l| l.slot == h.slot && l.start >= h.at && l.start <= t)
                    && !f
                        .releases
                        .iter()
                        .any(|(at, by)| *by == h.by && *at >= h.at && *at <= t)
            });
            if handing {
                return Some(Episode {
                    at: t,
                    case: Case::JoinedDuringHandoff,
                    bound: Some(
                        Term::FirstHop.value(timing)
                            + Term::LaterHop.value(timing)
                            + Term::Requests.value(timing),
                    ),
                    why: format!("m{m} started while a handover was under way"),
                    extends: true,
                });
            }
            match (behind_itself, behind_a_silent_ghost(f, rules, t)) {
                (_, true) => fixed(
                    Case::SlotHolderCrashBehindGhost,
                    format!("m{m} started behind a dead member without a URL"),
                ),
                (true, false) => fixed(Case::Rejoin, format!("m{m} started, its old record held")),
                (false, false) => fixed(Case::Join, format!("m{m} started")),
            }
        }
        Cause::Cooled(m) if behind_a_silent_ghost(f, rules, t) => fixed(
            Case::SlotHolderCrashBehindGhost,
            format!("m{m} back from standing by, behind a dead member without a URL"),
        ),
        Cause::Cooled(m) => fixed(Case::Join, format!("m{m} back from standing by")),
        Cause::FaultEnded => fixed(Case::FaultEnd, "a fault ended".into()),
    }
}

/// How much longer a handover under way may take when a member it may hand the lease to dies
/// or leaves: the rest of the body's stop, that member's window (a later hop's, at most), and
/// the next one's take (a later hop too).
fn passed_along(rules: &Rules) -> Duration {
    let timing = &rules.timing;
    Term::Stop.value(timing) + Term::LaterHop.value(timing) * 2 + Term::Requests.value(timing)
}

/// The first instant from `t` on at which some member is up (`t` when none ever is).
fn first_up(f: &Facts, t: Duration) -> Duration {
    let spans = || f.up.values().flatten();
    if spans().any(|(a, b)| *a <= t && t < *b) {
        return t;
    }
    spans()
        .map(|(a, _)| *a)
        .filter(|a| *a > t)
        .min()
        .unwrap_or(t)
}

/// Whether `o` sent an acquire in `[from, to]`.
fn polls_within(f: &Facts, o: MemberId, from: Duration, to: Duration) -> bool {
    f.acquires
        .get(&o)
        .is_some_and(|s| s.iter().any(|sent| *sent >= from && *sent <= to))
}

/// With slots: whether a dead member without a URL waits in line at `t` (the members behind it
/// wait for its record to run out: nothing else tells them it is gone).
fn behind_a_silent_ghost(f: &Facts, rules: &Rules, t: Duration) -> bool {
    rules.slots > 1
        && f.line_at(t)
            .unwrap_or_default()
            .iter()
            .any(|r| r.owner.is_none() && !r.advertised)
}

/// The slot whose body `m` runs at `t` (or whose body ended at `t`).
fn holding(f: &Facts, m: MemberId, t: Duration) -> Option<u32> {
    f.lives
        .iter()
        .find(|l| l.member == m && l.start <= t && l.stuck.or(l.gone).is_none_or(|g| g >= t))
        .map(|l| l.slot)
}

/// The dead members' records in `line` ahead of the live member after `me` that holds no slot
/// (none standing by) and has `skip` such live members ahead of it.
fn dead_ahead<'a>(
    f: &Facts,
    line: &'a [InLine],
    me: &str,
    t: Duration,
    skip: usize,
) -> Vec<&'a InLine> {
    let mut live = 0;
    line.iter()
        .filter(|r| r.identity != me && !r.standby)
        .filter(|r| r.owner.is_none_or(|o| holding(f, o, t).is_none()))
        .take_while(|r| {
            live += usize::from(r.owner.is_some());
            live <= skip
        })
        .filter(|r| r.owner.is_none())
        .collect()
}

/// Whether the live member `o`, first in line at `t`, could know it is next by then: every
/// record its line (its last listing) puts ahead of it, but the leader `me`'s, stands for a
/// process gone that advertised a URL, never frozen since (a frozen process answers no probe),
/// and `o`'s watch could find each gone in turn long enough before `t` (docs/succession.md): by
/// its probe, once another process of that identity answers at the URL (it was started again
/// there: a watch); or, with nothing listening there, by a read of the record once it ran out
/// (a record lease after the process went, and the last renew's way: a watch, and a listing a
/// moment later). Then the requests of the last. Such a member polls; one that does not is
/// judged by the crash's own bound.
fn could_know(f: &Facts, rules: &Rules, o: MemberId, me: &str, t: Duration) -> bool {
    let timing = &rules.timing;
    let Some(&(listed_at, index)) =
        (f.listings.get(&o)).and_then(|l| l.iter().rev().find(|(at, _)| *at <= t))
    else {
        return false;
    };
    if f.frozen_in(o, listed_at, t) {
        return false;
    }
    let Some(mine) = f.identity_at(o, t) else {
        return false;
    };
    let view = f.lines[index].1;
    let ahead = view
        .iter()
        .take_while(|r| r.identity != mine)
        .filter(|r| r.identity != me);
    // The same record, its process running, in a line of the world's.
    let runs_in = |line: &[InLine], r: &InLine| {
        (line.iter()).any(|c| c.identity == r.identity && c.joined == r.joined && c.owner.is_some())
    };
    let mut found_by = listed_at;
    for r in ahead {
        let frozen = r.owner.is_some_and(|p| f.frozen_in(p, listed_at, t));
        if !r.advertised || frozen || runs_in(f.line_at(t).unwrap_or_default(), r) {
            return false;
        }
        let Some(url) = f.url_of(&r.identity, listed_at) else {
            return false;
        };
        // When its process was gone, as the world saw it.
        let gone = (f.lines[index..].iter())
            .find(|(_, line)| !runs_in(line, r))
            .map_or(t, |(at, _)| *at);
        // The processes of its identity at its URL since then, up until `t`.
        let there: Vec<(MemberId, Duration, Duration)> = (f.up.iter())
            .flat_map(|(m, spans)| spans.iter().map(move |(from, to)| (*m, *from, *to)))
            .filter(|(m, from, to)| {
                *from <= t
                    && *to > gone
                    && f.identity_at(*m, *from) == Some(r.identity.as_str())
                    && f.url_at(*m, *from) == Some(url)
            })
            .collect();
        let answered = (there.iter())
            .filter(|(m, from, to)| *from >= gone && t < *to && !f.frozen_in(*m, *from, t))
            .map(|(_, from, _)| *from)
            .min();
        let back = match answered {
            Some(from) => from,
            None if there.is_empty() => {
                gone + Pace::RECORD_LEASE
                    + timing.request_timeout()
                    + Term::ListAfterChange.value(timing)
            }
            None => return false,
        };
        found_by = found_by.max(back) + Term::Watch.value(timing);
    }
    found_by + Term::Requests.value(timing) <= t
}

/// How a handover began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Handing {
    /// SIGTERM: the body stops first.
    Stop,
    /// The body ended by itself.
    Ended,
    /// A health step-down: the body stops first.
    StepDown,
    /// A preemption: the body stops first, and the lease goes to the preferred member, which
    /// need not be first in line (it may not poll): a first hop more.
    Preempted,
}

/// The episode of a handover of `slot` by `m` that began at `t`: the body's stop, each member
/// passed over on the way, and the take of the first live one.
fn handover(
    f: &Facts,
    rules: &Rules,
    m: MemberId,
    t: Duration,
    slot: u32,
    how: Handing,
) -> Option<Episode> {
    let timing = &rules.timing;
    let me = f.identity_at(m, t).unwrap_or_default().to_owned();
    let line = f.line_at(t).unwrap_or_default();
    // Members that hold another slot are no candidates.
    let holds = |r: &InLine| {
        rules.slots > 1
            && r.owner
                .is_some_and(|o| o != m && holding(f, o, t).is_some())
    };
    let candidates: Vec<&InLine> = line
        .iter()
        .filter(|r| r.identity != me && !r.standby && !holds(r))
        .collect();
    // Members passed over: the leader may skip them, or (where its view differs) hand them the
    // lease and wait its window; the members behind them may not know. Each costs a hop.
    let passed = |r: &InLine| f.passed_over_at(&r.identity, t) || f.passed_by(m, &r.identity, t);
    // The leader's line is its last listing: members that left since are handed the lease
    // first (their record is gone), and members that joined since are not in it.
    let listed: Vec<&InLine> = f
        .listings
        .get(&m)
        .and_then(|l| l.iter().rev().find(|(at, _)| *at <= t))
        .map(|(_, i)| f.lines[*i].1.iter().collect())
        .unwrap_or_default();
    let left = listed
        .iter()
        .filter(|r| r.identity != me && !line.iter().any(|c| c.identity == r.identity))
        .count() as u32;
    let joined = !listed.is_empty()
        && candidates
            .iter()
            .any(|c| c.owner.is_some() && !listed.iter().any(|r| r.identity == c.identity));
    let (mut refused, mut silent) = (left, 0);
    let mut taker = None;
    // A live member that neither takes wake-ups nor polls (its line, older than the change
    // that made it next, says another is): handed the lease, it does not take it.
    let mut unaware = None;
    // The body's stop: as long as it took (the world's own), at most `G`.
    let stop = match how {
        Handing::Stop | Handing::StepDown | Handing::Preempted => f
            .lives
            .iter()
            .rfind(|l| l.member == m && l.slot == slot && l.start <= t)
            .and_then(|l| l.gone)
            .map_or(Term::Stop.value(timing), |g| {
                g.saturating_sub(t).min(Term::Stop.value(timing))
            }),
        Handing::Ended => Duration::ZERO,
    };
    // It polls: an acquire of its own from the cause until the leader's first hop window
    // ends (a later acquire, after it read the lease handed on, comes too late).
    let polls = |o: MemberId| {
        let until = t + stop + Term::FirstHop.value(timing);
        polls_within(f, o, t, until)
    };
    // The leader walks its own line: a member that joined since its listing is handed
    // nothing, and takes the lease only once it is free (released, or run out), by its poll.
    let joined_since = |r: &InLine| {
        !listed.is_empty() && r.owner.is_some() && !listed.iter().any(|l| l.identity == r.identity)
    };
    // A dead member's URL refuses its wake-up (nothing, or another process, answers there),
    // which costs a first hop's window; but a wake-up whose answer was lost timed out, and
    // the leader, told nothing, waits that hop's own window (docs/safety.md, rule (g)).
    let timed_out = |r: &InLine| {
        f.wakes.iter().any(|(at, by, to, answer)| {
            *by == m
                && *to == r.identity
                && *answer == "timeout"
                && *at >= t
                && *at <= t + passed_along(rules)
        })
    };
    for r in &candidates {
        if joined_since(r) {
            continue;
        }
        if passed(r) {
            silent += 1;
            continue;
        }
        match r.owner {
            Some(o) if f.able(o, t) && (r.advertised || polls(o)) => {
                taker = Some(*r);
                break;
            }
            Some(o) if f.able(o, t) => {
                unaware.get_or_insert(*r);
                silent += 1;
            }
            // A dead member's URL: nothing (or another process) answers there.
            None if r.advertised && !timed_out(r) => refused += 1,
            _ => silent += 1,
        }
    }
    let taker = match (taker, unaware) {
        (Some(taker), _) => taker,
        // Nobody else: the leader lists, releases, and that member reads the free lease at
        // its watch.
        (None, Some(unaware)) => {
            silent -= 1;
            unaware
        }
        // Nobody alive in line (a member that restarted within a record lease of its crash
        // is out of line until its old record runs out): the lease is passed along the line,
        // then released, and a member reads it free at its watch and takes it a poll later.
        (None, None) => {
            let passed =
                Term::FirstHop.value(timing) * refused + Term::LaterHop.value(timing) * silent;
            let stop = match how {
                Handing::Stop | Handing::StepDown | Handing::Preempted => Term::Stop.value(timing),
                Handing::Ended => Duration::ZERO,
            };
            return Some(Episode {
                at: t,
                case: Case::DeadSuccessor,
                bound: Some(
                    stop + passed
                        + Term::Watch.value(timing)
                        + Term::Poll.value(timing) * 2
                        + Term::Requests.value(timing),
                ),
                why: format!("m{m} handing slot {slot} over with nobody alive in line"),
                extends: false,
            });
        }
    };
    let unaware = unaware.is_some();
    let first = refused + silent == 0 && !unaware;
    let take = match (taker.advertised, first) {
        (true, _) => Term::Woken,
        (false, true) => Term::FirstHop,
        (false, false) => Term::LaterHop,
    };
    // The unaware one is handed the lease first (a first hop's window), the next later.
    let take = match unaware && silent == 0 && refused == 0 {
        true => Term::FirstHop.value(timing) + Term::LaterHop.value(timing),
        false => take.value(timing),
    };
    let passed = Term::FirstHop.value(timing) * refused + Term::LaterHop.value(timing) * silent;
    let preferred = match how {
        Handing::Preempted => Term::FirstHop.value(timing),
        _ => Duration::ZERO,
    };
    // With slots, another holder's handover under way may take the same member first: this
    // one's taker is the next (a later hop more for each).
    let busy = match rules.slots {
        1 => 0,
        _ => f
            .causes
            .iter()
            .filter(|(at, _)| *at <= t && *at + passed_along(rules) >= t)
            .filter_map(|(at, c)| match c {
                // A body that ended by itself hands its slot over as a stopped one does.
                Cause::Stop(o) | Cause::Unhealthy(o) | Cause::Stopping(o) | Cause::Ended(o)
                    if *o != m =>
                {
                    holding(f, *o, *at).map(|s| (*at, s))
                }
                _ => None,
            })
            .filter(|(at, s)| {
                *s != slot
                    && !f
                        .lives
                        .iter()
                        .any(|l| l.slot == *s && l.start >= *at && l.start <= t)
            })
            .count() as u32,
    };
    let mut bound = stop
        + preferred
        + passed
        + take
        + Term::LaterHop.value(timing) * busy
        + Term::Requests.value(timing);
    let case = match (first, joined, how) {
        (_, true, _) => {
            bound = bound.max(
                stop + passed
                    + Term::FirstHop.value(timing)
                    + Term::LaterHop.value(timing)
                    + Term::Requests.value(timing),
            );
            Case::JoinedDuringHandoff
        }
        (false, false, _) => Case::DeadSuccessor,
        (true, false, Handing::Stop) if taker.advertised => Case::GracefulWoken,
        (true, false, Handing::Stop) => Case::GracefulPolled,
        (true, false, Handing::Ended) => Case::Voluntary,
        (true, false, Handing::StepDown | Handing::Preempted) => Case::StepDown,
    };
    Some(Episode {
        at: t,
        case,
        bound: Some(bound),
        why: format!(
            "m{m} handing slot {slot} over ({how:?}), {refused} member(s) ahead refused or gone, {silent} silent, to {}{}{}",
            taker.identity,
            if unaware {
                ", after a live member that does not poll"
            } else {
                ""
            },
            if joined {
                ", joined since its listing"
            } else {
                ""
            }
        ),
        extends: false,
    })
}
