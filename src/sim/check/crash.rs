//! Rule (h): a member whose body failed soon after its start backs off before its next body,
//! for the doubling the crash-loop figures give (src/sim/check/rules.rs states it). Computed
//! here from the figures and the trace alone (each body's start and end, each member's start),
//! not by the count the bodies keep (`crate::crash_loop`), so that the rule can catch that
//! count, or the elector's use of it, going wrong.

use super::facts::{Facts, Life};
use super::rules::{Rules, Violation};
use crate::sim::trace::at;
use std::time::Duration;

/// The backoff after the `k`th quick failure in a row (from 1): `first`, doubled each time,
/// at most `max`.
fn backoff(rules: &Rules, k: u32) -> Duration {
    let figures = &rules.crash_backoff;
    let doubled = figures
        .first
        .saturating_mul(1u32.checked_shl(k.saturating_sub(1)).unwrap_or(u32::MAX));
    doubled.min(figures.max)
}

/// Judges (h).
pub(super) fn judge(f: &Facts, rules: &Rules) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (m, starts) in &f.guarded {
        let mut lives: Vec<&Life> = f.lives.iter().filter(|l| l.member == *m).collect();
        lives.sort_by_key(|l| l.start);
        // The process each body ran in: the member's last start at or before it.
        let process = |t: Duration| starts.iter().rposition(|(at, _)| *at <= t);
        let mut failures = 0u32;
        // The last body's quick failure: when, and the backoff it calls for.
        let mut pending: Option<(Duration, Duration, u64)> = None;
        let mut last_process = None;
        for life in lives {
            let here = process(life.start);
            if here != last_process {
                // A restarted daemon counts anew.
                failures = 0;
                pending = None;
                last_process = here;
            }
            if let Some((failed_at, wait, epoch)) = pending.take()
                && life.start < failed_at + wait
            {
                violations.push(Violation {
                    rule: 'h',
                    at: life.start,
                    what: format!(
                        "m{m} started epoch {} {} after its body of epoch {} failed at once \
                         (quick failure {failures} in a row), before its backoff of {}",
                        life.epoch,
                        at(life.start - failed_at),
                        epoch,
                        at(wait)
                    ),
                });
            }
            let Some(gone) = life.gone else { continue };
            let ran = gone.saturating_sub(life.start);
            if ran >= rules.crash_backoff.window {
                failures = 0;
            } else if life.failed {
                failures += 1;
                pending = Some((gone, backoff(rules, failures), life.epoch));
            }
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crash_loop::{CrashBackoff, CrashLoop};
    use crate::timing::Timing;

    /// The checker's doubling is the production rule's, step by step up to its cap.
    #[test]
    fn the_rule_s_backoffs_are_the_figures_doubling() {
        let rules = Rules {
            timing: Timing::default(),
            slots: 1,
            liveness: Duration::ZERO,
            handoff: Duration::ZERO,
            end: Duration::ZERO,
            crash_backoff: CrashBackoff::default(),
            replicas: 1,
        };
        let mut count = CrashLoop::default();
        for k in 1..=10 {
            assert_eq!(
                backoff(&rules, k),
                count.failed(&rules.crash_backoff),
                "k = {k}"
            );
        }
        assert_eq!(backoff(&rules, 7), Duration::from_secs(60), "capped");
        assert_eq!(backoff(&rules, 200), Duration::from_secs(60), "no overflow");
    }
}
