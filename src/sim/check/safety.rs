//! Rules (a), (b) and (c): one body per slot, no body past its kill deadline, epochs recorded
//! before a body starts and growing (src/sim/check/rules.rs states them).

use super::facts::{Facts, Life};
use super::rules::{Rules, TIMER_SLACK, Violation};
use crate::sim::trace::{MemberId, at};
use std::collections::BTreeMap;
use std::time::Duration;

/// Judges (a), (b) and (c).
pub(super) fn judge(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let mut violations = Vec::new();
    let mut by_slot: BTreeMap<u32, Vec<&Life>> = BTreeMap::new();
    for life in &f.lives {
        by_slot.entry(life.slot).or_default().push(life);
    }
    for (slot, lives) in &by_slot {
        one_body(f, rules, *slot, lives, &mut violations);
        epochs(f, rules, *slot, lives, &mut violations);
    }
    stuck(f, &mut violations);
    deadlines(f, rules, &mut violations);
    violations
}

/// Whether `m` heard an answer that showed a blob of its group led, in its process that ran
/// at `t`, before `before` (or led a body of its own in it).
fn saw_led(f: &Facts, m: MemberId, t: Duration, before: Duration) -> bool {
    let started =
        f.up.get(&m)
            .and_then(|s| s.iter().rev().find(|(a, _)| *a <= t))
            .map_or(Duration::ZERO, |(a, _)| *a);
    let heard = f
        .saw_led
        .get(&m)
        .is_some_and(|s| s.iter().any(|at| *at >= started && *at < before));
    heard
        || f.lives
            .iter()
            .any(|l| l.member == m && l.start >= started && l.start < before)
}

/// (a), in start order.
fn one_body(f: &Facts, rules: &Rules, slot: u32, lives: &[&Life], out: &mut Vec<Violation>) {
    for (j, later) in lives.iter().enumerate() {
        for earlier in &lives[..j] {
            if later.start >= earlier.gone_or(f.end) {
                continue;
            }
            let paused = f.paused_in(
                earlier.member,
                later.start.saturating_sub(rules.lease()),
                later.start,
            );
            // Stuck, and waited out by another member.
            let waited_out = earlier.stuck.is_some_and(|s| s <= later.start)
                && later.member != earlier.member
                && f.expiry(earlier, rules.lease())
                    .is_some_and(|x| x <= later.start);
            // The slot's blob created plainly with no other record leased (the group's state
            // in storage gone) by a member that never saw its group led, and the later member
            // never saw it led since: a brand-new group to both, by design (docs/safety.md).
            // (What it saw of a group led since the erasure, a brand-new one, tells it nothing.)
            let after_erasure = f.erased.get(&slot).is_some_and(|e| {
                e.iter().any(|(at, by)| {
                    *at >= earlier.start
                        && *at <= later.start
                        && !saw_led(f, *by, *at, *at)
                        && !saw_led(f, later.member, later.start, *at)
                })
            });
            let excused = (paused || waited_out || after_erasure) && later.epoch > earlier.epoch;
            if !excused {
                out.push(Violation {
                    rule: 'a',
                    at: later.start,
                    what: format!(
                        "slot {slot}: m{} started epoch {} while m{}'s body of epoch {} was alive (until {})",
                        later.member,
                        later.epoch,
                        earlier.member,
                        earlier.epoch,
                        at(earlier.gone_or(f.end))
                    ),
                });
            }
        }
    }
}

/// (c): each body's epoch recorded under its lease before it started (on a replica set, on a
/// majority of its replicas: docs/quorum.md, *Epochs*), and growing.
fn epochs(f: &Facts, rules: &Rules, slot: u32, lives: &[&Life], out: &mut Vec<Violation>) {
    for life in lives {
        let recorded = match rules.replicas > 1 {
            false => f.written.get(&life.lease).is_some_and(|w| {
                w.iter()
                    .any(|(e, at)| *e == life.epoch && *at <= life.start)
            }),
            true => {
                let mut on: Vec<usize> = (f.written_on.get(&life.lease).into_iter().flatten())
                    .filter(|(e, at, _)| *e == life.epoch && *at <= life.start)
                    .map(|(_, _, r)| *r)
                    .collect();
                on.sort_unstable();
                on.dedup();
                on.len() >= rules.majority()
            }
        };
        if !recorded {
            out.push(Violation {
                rule: 'c',
                at: life.start,
                what: format!(
                    "slot {slot}: m{}'s body of epoch {} started before its blob recorded that epoch under its lease",
                    life.member, life.epoch
                ),
            });
        }
    }
    for w in lives.windows(2) {
        if w[1].epoch <= w[0].epoch {
            out.push(Violation {
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

/// (a): the lease of a stuck body does not move while it lives.
fn stuck(f: &Facts, out: &mut Vec<Violation>) {
    for life in &f.lives {
        let Some(stuck) = life.stuck else { continue };
        let gone = life.gone_or(f.end);
        let moved = f
            .releases
            .iter()
            .map(|(at, m)| (*at, *m))
            .chain(f.handoffs.iter().map(|h| (h.at, h.by)))
            .find(|(at, m)| *m == life.member && *at >= stuck && *at < gone);
        let beside = f
            .lives
            .iter()
            .find(|l| l.member == life.member && l.start > stuck && l.start < gone);
        if let Some(l) = beside {
            out.push(Violation {
                rule: 'a',
                at: l.start,
                what: format!(
                    "m{} started epoch {} while its body of epoch {}, stuck since {}, was alive",
                    life.member,
                    l.epoch,
                    life.epoch,
                    at(stuck)
                ),
            });
        }
        if let Some((when, _)) = moved {
            out.push(Violation {
                rule: 'a',
                at: when,
                what: format!(
                    "m{} gave its lease up while its body of epoch {}, stuck since {}, was alive",
                    life.member,
                    life.epoch,
                    at(stuck)
                ),
            });
        }
    }
}

/// (b): no body alive past its kill deadline.
fn deadlines(f: &Facts, rules: &Rules, out: &mut Vec<Violation>) {
    for life in &f.lives {
        // A body stuck in the kernel is beyond reach from the moment its kill failed.
        let gone = life.stuck.unwrap_or(life.gone_or(f.end));
        let deadline = match rules.replicas > 1 {
            false => f
                .heard
                .get(&life.lease)
                .into_iter()
                .flatten()
                .filter(|(m, _, heard)| *m == life.member && *heard <= gone)
                .map(|(_, sent, _)| *sent + rules.lease() - rules.margin())
                .max(),
            true => kth_latest_heard(f, rules, life, gone),
        };
        // Its daemon frozen alone is no excuse: the guard holds the body to its deadline.
        if f.paused_in(life.member, life.start, gone) {
            continue;
        }
        match deadline {
            None => out.push(Violation {
                rule: 'b',
                at: life.start,
                what: format!(
                    "m{}'s body of epoch {} ran without a lease it heard it had",
                    life.member, life.epoch
                ),
            }),
            Some(d) if gone > d + TIMER_SLACK => out.push(Violation {
                rule: 'b',
                at: d,
                what: format!(
                    "m{}'s body of epoch {} was alive {} past its kill deadline",
                    life.member,
                    life.epoch,
                    at(gone - d)
                ),
            }),
            Some(_) => {}
        }
    }
}

/// On a replica set, a body's kill deadline (docs/quorum.md, *Counting*): the k-th latest of
/// its replicas' deadlines, each `t_s + L - M` from the last acquire or renew of its lease there
/// whose success its member heard (by `gone`); `None` if fewer than a majority were heard.
fn kth_latest_heard(f: &Facts, rules: &Rules, life: &Life, gone: Duration) -> Option<Duration> {
    let mut latest: BTreeMap<usize, Duration> = BTreeMap::new();
    let heard = f.heard_on.get(&life.lease).into_iter().flatten();
    for (_, r, sent, _) in heard.filter(|(m, _, _, heard)| *m == life.member && *heard <= gone) {
        let d = latest.entry(*r).or_insert(*sent);
        *d = (*d).max(*sent);
    }
    let mut sent: Vec<Duration> = latest.into_values().collect();
    sent.sort_unstable_by(|a, b| b.cmp(a));
    let kth = sent.get(rules.majority() - 1)?;
    Some(*kth + rules.lease() - rules.margin())
}
