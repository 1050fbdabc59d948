//! The checker (docs/safety.md, "The safety model" and "What each case costs"): the rules every
//! simulated history must keep, judged from its trace alone. `rules` states them and judges a
//! history; `facts` gathers what they read from the trace; `safety` holds (a), (b), (c);
//! `liveness` (d)'s bound after the last fault and (e); `episodes` (d) case by case, from each
//! cause (src/cases.rs); `succession` (f) and (g).

mod episodes;
mod facts;
mod liveness;
mod rules;
mod safety;
mod succession;

pub use rules::{Rules, TIMER_SLACK, Violation, check};
