//! Rules (f) and (g): the line moves on. After a change of leader the live member first in line
//! after the new one sends a lease request within a watch period, the listing's delay and a
//! poll (one slot); a lease handed to a member whose wake-up was refused or unanswered or whose
//! record is gone moves on within a first hop's confirm window and the requests on the way,
//! whatever the hop.

use super::facts::{Facts, Handoff, overlaps};
use super::rules::{HOP_END_TRIPS, Rules, Violation};
use crate::cases::{Case, row};
use crate::sim::trace::{InLine, at};
use std::time::Duration;

/// Judges (f) and (g).
pub(super) fn judge(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let mut violations = next_polls(f, rules);
    violations.extend(hand_on(f, rules));
    violations
}

/// Whether any fault (or a crash) meets `[from, to]`.
fn faulty(f: &Facts, from: Duration, to: Duration) -> bool {
    overlaps(&f.faults, from, to)
}

/// (f): after each change of leader (one slot), the member first in line after the new leader,
/// when it is alive and nobody dead stands ahead of it, sends a lease request in time.
fn next_polls(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let Some(bound) = row(Case::NextPolls).bound else {
        return Vec::new();
    };
    if rules.slots != 1 {
        return Vec::new();
    }
    let bound = bound.value(&rules.timing, 1, 0, 0);
    let mut violations = Vec::new();
    for life in &f.lives {
        let (t, until) = (life.start, life.start + bound);
        // The new leader leads through the window, quietly, and no fault ended within an error
        // backoff before it (a member that storage failed may be pausing still).
        let backoff = crate::cases::Term::Backoff.value(&rules.timing);
        if until > f.end
            || life.gone_or(f.end) < until
            || faulty(f, t.saturating_sub(backoff), until)
        {
            continue;
        }
        let Some(line) = f.line_at(t) else { continue };
        let leader = f.identity_at(life.member, t).unwrap_or_default();
        let Some(next) = line.iter().find(|r| r.identity != leader && !r.standby) else {
            continue;
        };
        let Some(member) = next.owner else { continue };
        // First in line through the whole window: nobody joined ahead of it meanwhile, even
        // for a while (a member that joins ahead and leaves again sends it back to watching, and
        // its window begins again when it is first once more; that later window is judged as
        // its own only at a change of leader, so it is left to (d)).
        let first_in = |l: &[InLine]| {
            l.iter()
                .find(|r| r.identity != leader && !r.standby)
                .map(|r| r.identity.clone())
        };
        let first_throughout = f.line_at(until).and_then(first_in).as_deref()
            == Some(next.identity.as_str())
            && f.lines
                .iter()
                .filter(|(at, _)| *at > t && *at <= until)
                .all(|(_, l)| first_in(l).as_deref() == Some(next.identity.as_str()));
        if !first_throughout {
            continue;
        }
        // Nor does a member ahead of it come back from a cooldown meanwhile.
        let back_ahead = line
            .iter()
            .take_while(|r| r.identity != next.identity)
            .filter_map(|r| r.owner)
            .any(|o| {
                f.standby
                    .get(&o)
                    .is_some_and(|s| s.iter().any(|(_, end)| *end >= t && *end <= until))
            });
        if back_ahead {
            continue;
        }
        // Able through the window, and not passed over.
        let able = f.able(member, t)
            && f.able(member, until)
            && !f.frozen_in(member, t, until)
            && !overlaps(f.stopping.get(&member).map_or(&[][..], |s| s), t, until)
            && !overlaps(f.standby.get(&member).map_or(&[][..], |s| s), t, until)
            && f.up
                .get(&member)
                .is_some_and(|s| s.iter().any(|(a, b)| *a <= t && until <= *b));
        if !able || f.passed_over_at(&next.identity, t) {
            continue;
        }
        let asked = f
            .acquires
            .get(&member)
            .is_some_and(|s| s.iter().any(|sent| *sent >= t && *sent <= until));
        if !asked {
            violations.push(Violation {
                rule: 'f',
                at: until,
                what: format!(
                    "m{} ({}) is first in line after m{} (leader since {}) and sent no lease request within {}",
                    member,
                    next.identity,
                    life.member,
                    at(t),
                    at(bound)
                ),
            });
        }
    }
    violations
}

/// (g): each handoff to a member whose wake-up was refused or whose record was gone.
fn hand_on(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let Some(bound) = row(Case::HandOnToGone).bound else {
        return Vec::new();
    };
    // On a set, the requests after the window are each a region's round trip, in turn
    // (docs/quorum.md, Handover): one account's second of requests counts its own link only.
    let window = bound.value(&rules.timing, rules.slots, 0, 0) + rules.set_trips(HOP_END_TRIPS);
    let mut violations = Vec::new();
    for (i, h) in f.handoffs.iter().enumerate() {
        let until = h.at + window;
        let refused = f.wakes.iter().any(|(at, by, to, answer)| {
            *by == h.by
                && *to == h.to
                && *at >= h.at
                && *at <= h.at + Duration::from_secs(1)
                && matches!(*answer, "refused" | "unreachable")
        });
        if (h.record || kept_before_read(f, h)) && !refused {
            continue;
        }
        // A fault from the `change`'s send on meets the hop: the lease moved somewhere between
        // the send and the answer (on a set, a region's round trip), and the hop's end works
        // on what it moved (docs/safety.md: (g) begins with the `change`).
        if until > f.end || faulty(f, h.sent, until) || f.frozen_in(h.by, h.sent, until) {
            continue;
        }
        // The change lands before its answer comes back (a slow answer): a body of that slot
        // that started after the handing leader's own body ended took the lease it handed.
        let handed_from = f
            .lives
            .iter()
            .filter(|l| l.member == h.by && l.slot == h.slot)
            .filter_map(|l| l.gone.filter(|g| *g <= h.at))
            .max()
            .unwrap_or(h.at);
        let moved = f.handoffs[i + 1..]
            .iter()
            .any(|later| later.by == h.by && later.slot == h.slot && later.at <= until)
            || f.releases
                .iter()
                .any(|(t, m)| *m == h.by && *t >= h.at && *t <= until)
            || f.lives
                .iter()
                .any(|l| l.slot == h.slot && l.start >= handed_from && l.start <= until);
        // The lease ran out meanwhile: a free lease, for (d).
        let lapsed = f.lapsed(h, rules.lease(), until);
        if !moved && !lapsed {
            violations.push(Violation {
                rule: 'g',
                at: until,
                what: format!(
                    "m{} handed slot {} to {} at {} ({}); it did not move on within {}",
                    h.by,
                    h.slot,
                    h.to,
                    at(h.at),
                    if h.record {
                        "its wake-up refused"
                    } else {
                        "its record gone"
                    },
                    at(window)
                ),
            });
        }
    }
    violations
}

/// Whether the record of the member `h` handed the lease to, gone as it was handed (its lease
/// lapsed while it was cut off, say), was kept again by that member before the handing
/// leader's first read of it on some replica: the leader reads it alive, the member in line,
/// and waits for it as for any member in line (rule (g) is for a member that left).
fn kept_before_read(f: &Facts, h: &Handoff) -> bool {
    let to = f.identities.iter().find_map(|(m, ids)| {
        let now = ids.iter().rev().find(|(t, _)| *t <= h.at)?;
        (now.1 == h.to).then_some(*m)
    });
    let Some(to) = to else { return false };
    let first_read = |replica: Option<usize>| {
        (f.record_reads.iter())
            .filter(|(t, m, r)| *m == h.by && *t >= h.at && *r == replica)
            .map(|(t, _, _)| *t)
            .min()
    };
    f.records_kept.iter().any(|(t, m, replica)| {
        *m == to && *t >= h.at && first_read(*replica).is_some_and(|read| *t <= read)
    })
}
