//! Rule (i): a stop spends nothing. A member asked to stop while it ran no body starts none
//! and sends no epoch write after the stop: an epoch is the group's fencing token, spent only
//! by a term that runs a body (docs/safety.md, "Epochs"), and a stop that comes while an
//! acquire is on its way releases what that acquire won instead.

use super::facts::Facts;
use super::rules::{Rules, Violation};
use crate::sim::trace::at;

/// Judges (i).
pub(super) fn judge(f: &Facts, _rules: &Rules) -> Vec<Violation> {
    let mut violations = Vec::new();
    for (&member, spans) in &f.stopping {
        for &(from, to) in spans {
            // A leader's stop hands over: its successor's epoch is that one's to spend.
            let led = f
                .lives
                .iter()
                .any(|l| l.member == member && l.runs_at(from));
            if led {
                continue;
            }
            // A stop that came while the member was frozen reaches it at its thaw, with what
            // else came meanwhile.
            let seen = (f.frozen.get(&member).into_iter().flatten())
                .find(|(a, b)| *a <= from && from < *b)
                .map_or(from, |(_, thaw)| (*thaw).min(to));
            // Sent at the very instant the stop reached it, the write (or the body's start) is
            // not after it: the answer that called for it came in the same timer tick (or was
            // held with the stop by a freeze), and the shell takes answers first.
            let stopped = |t| seen < t && t <= to;
            if let Some(sent) = f
                .epoch_writes
                .iter()
                .find(|(m, sent)| *m == member && stopped(*sent))
                .map(|(_, sent)| *sent)
            {
                violations.push(Violation {
                    rule: 'i',
                    at: sent,
                    what: format!(
                        "m{member} sent an epoch write at {}, after its stop at {} with no body \
                         running: an epoch spent for nothing",
                        at(sent),
                        at(from)
                    ),
                });
            }
            if let Some(life) = f
                .lives
                .iter()
                .find(|l| l.member == member && seen < l.start && l.start <= to)
            {
                violations.push(Violation {
                    rule: 'i',
                    at: life.start,
                    what: format!(
                        "m{member} started a body (epoch {}) at {}, after its stop at {}",
                        life.epoch,
                        at(life.start),
                        at(from)
                    ),
                });
            }
        }
    }
    violations
}
