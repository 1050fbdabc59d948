//! When a group runs short of leaders ([`short`]: fewer bodies than members able to lead, one
//! per slot), and rules (d) and (e) on those stretches: the liveness bound after the last
//! fault, and a handoff to a member gone taken over or handed on in time.

use super::facts::{Facts, overlaps};
use super::rules::{Rules, Violation};
use crate::sim::trace::at;
use std::time::Duration;

/// Whether the group runs fewer bodies at `t` than it could: fewer than the members able to
/// lead, at most one per slot.
pub(super) fn short(f: &Facts, slots: u32, t: Duration) -> bool {
    let able = f.up.keys().filter(|m| f.able(**m, t)).count();
    let alive = f.lives.iter().filter(|l| l.runs_at(t)).count();
    alive < able.min(slots as usize)
}

/// Every instant at which whether the group is short may change (and the start and end), in
/// order: between two of them it does not.
pub(super) fn timeline(f: &Facts) -> Vec<Duration> {
    let mut times: Vec<Duration> = vec![Duration::ZERO, f.end];
    for l in &f.lives {
        times.push(l.start);
        times.extend(l.stuck);
        times.extend(l.gone);
    }
    for spans in [&f.up, &f.frozen, &f.standby, &f.stopping] {
        for s in spans.values().flatten() {
            times.extend([s.0, s.1]);
        }
    }
    for (a, b) in &f.faults {
        times.extend([*a, *b]);
    }
    times.extend(f.causes.iter().map(|(at, _)| *at));
    times.retain(|t| *t <= f.end);
    times.sort();
    times.dedup();
    times
}

/// Judges (d) (the liveness bound after the last fault) and (e).
pub(super) fn judge(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let times = timeline(f);
    let mut violations = Vec::new();
    // Runs of time, outside every fault, during which the group was short.
    let mut run: Option<(Duration, bool)> = None;
    for w in times.windows(2) {
        let (t, next) = (w[0], w[1]);
        // A fault of an instant (a crash, a deletion) starts the count again from it.
        if f.faults.iter().any(|(a, b)| a == b && *a == t) {
            run = None;
        }
        let quiet = !f.faults.iter().any(|(a, b)| *a <= t && t < *b);
        if quiet && short(f, rules.slots, t) {
            let (from, reported) = run.get_or_insert((t, false));
            if !*reported && next - *from > rules.liveness {
                violations.push(Violation {
                    rule: 'd',
                    at: *from + rules.liveness,
                    what: format!(
                        "the group has run short of a leader since {} without a fault (over {})",
                        at(*from),
                        at(rules.liveness)
                    ),
                });
                *reported = true;
            }
        } else {
            run = None;
        }
    }
    violations.retain(|v| v.at < f.end);
    violations.extend(handoffs(f, rules, &times));
    violations
}

/// (e): each handoff to a member already gone.
fn handoffs(f: &Facts, rules: &Rules, times: &[Duration]) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (i, h) in f.handoffs.iter().enumerate() {
        let until = h.at + rules.handoff;
        if h.alive || overlaps(&f.faults, h.at, until) || until > f.end {
            continue;
        }
        // The lease the leader handed ran out within the bound (a chain of members passed
        // over outlasts what was left of it): from then on it is a free lease, which (d)
        // holds the group to.
        let lapsed = f.lapsed(h, rules.lease(), until);
        if lapsed {
            continue;
        }
        // Handed on (to the next member, by the leader that confirms its handoffs) in time:
        // that handoff is judged on its own.
        let handed_on = f.handoffs[i + 1..]
            .iter()
            .any(|later| later.slot == h.slot && later.at <= until)
            || f.releases
                .iter()
                .any(|(t, m)| *m == h.by && *t >= h.at && *t <= until);
        // Short at every instant from the handoff to the bound: nobody took over in time.
        let mut instants: Vec<Duration> = times
            .iter()
            .copied()
            .filter(|t| *t >= h.at && *t <= until)
            .chain([h.at])
            .collect();
        instants.sort();
        // Taken: a body of that slot started in time.
        let taken = f
            .lives
            .iter()
            .any(|l| l.slot == h.slot && l.start >= h.at && l.start <= until);
        if !handed_on && !taken && instants.iter().all(|t| short(f, rules.slots, *t)) {
            violations.push(Violation {
                rule: 'e',
                at: until,
                what: format!(
                    "slot {} was handed to {}, already gone, at {}; nobody took it, and it was not handed on, within {}",
                    h.slot,
                    h.to,
                    at(h.at),
                    at(rules.handoff)
                ),
            });
        }
    }
    violations
}
