//! The checker (docs/safety.md, "The safety model" and "What each case costs"): the rules every
//! simulated history must keep, judged from its trace alone ([`check`]). `rules` states them;
//! `facts` gathers what they read from the trace; `safety` holds (a), (b), (c);
//! `liveness` (d)'s bound after the last fault and (e); `episodes` (d) case by case, from each
//! cause (src/cases.rs); `succession` (f) and (g); `crash` (h); `stopping` (i); (j), that
//! virtual time moved on, here.

mod crash;
mod episodes;
mod facts;
mod liveness;
mod rules;
mod safety;
mod stopping;
mod succession;

pub use rules::{REGION_LATENCY_MS, Rules, STANDSTILL, TIMER_SLACK, Violation};

use crate::sim::trace::{Event, What};

/// Judges one history: the facts gathered once from the trace, then each group of rules in
/// turn.
pub fn check(events: &[Event], rules: &Rules) -> Vec<Violation> {
    let facts = facts::Facts::gather(events, rules);
    let mut violations = safety::judge(&facts, rules);
    violations.extend(liveness::judge(&facts, rules));
    violations.extend(episodes::judge(&facts, rules));
    violations.extend(succession::judge(&facts, rules));
    violations.extend(crash::judge(&facts, rules));
    violations.extend(stopping::judge(&facts, rules));
    violations.extend(time_moved(events));
    violations.sort_by_key(|v| (v.at, v.rule));
    violations
}

/// (j): virtual time moved on. A machine that asks to be woken at an instant it does not then
/// move past spins there for ever; the engine ends such a history where it stood
/// ([`What::StoodStill`]), and that is a violation rather than a run that never ends.
fn time_moved(events: &[Event]) -> Option<Violation> {
    events.iter().rev().find_map(|e| match e.what {
        What::StoodStill { events, member } => Some(Violation {
            rule: 'j',
            at: e.at,
            what: match member {
                Some(m) => format!("time stood still: {events} events at one instant, for m{m}"),
                None => format!("time stood still: {events} events at one instant"),
            },
        }),
        _ => None,
    })
}
