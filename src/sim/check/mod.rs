//! The checker (docs/safety.md, "The safety model" and "What each case costs"): the rules every
//! simulated history must keep, judged from its trace alone ([`check`]). `rules` states them;
//! `facts` gathers what they read from the trace; `safety` holds (a), (b), (c);
//! `liveness` (d)'s bound after the last fault and (e); `episodes` (d) case by case, from each
//! cause (src/cases.rs); `succession` (f) and (g); `crash` (h); `stopping` (i).

mod crash;
mod episodes;
mod facts;
mod liveness;
mod rules;
mod safety;
mod stopping;
mod succession;

pub use rules::{Rules, TIMER_SLACK, Violation};

use crate::sim::trace::Event;

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
    violations.sort_by_key(|v| (v.at, v.rule));
    violations
}
