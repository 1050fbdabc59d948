//! The exhaustive search: breadth first from the start over every enabled action, each state
//! visited once, the properties checked in each; the first violation found is one of the
//! shortest, and its trace is replayed from the start.
//!
//! A search of its own rather than the `stateright` crate's checker: the model is small, the
//! walk is some sixty lines, it needs no dependency (and no build of one on a two-core CI
//! machine), its order is the enabled actions' fixed order (so it is deterministic), and it
//! reports what the tests assert beside the properties: the states explored and which faults
//! the histories reached.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::time::{Duration, Instant};

use crate::rules::{Config, Tick};
use crate::state::State;
use crate::step::{Action, Heard, apply, enabled, split};

/// A property broken in some state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// One body: these members' bodies run at once.
    TwoBodies(Vec<usize>),
    /// Epochs growing: a body started with an epoch not above an earlier body's.
    EpochFell,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TwoBodies(members) => write!(f, "two bodies run at once: members {members:?}"),
            Self::EpochFell => write!(f, "a body started with an epoch not above an earlier one"),
        }
    }
}

/// Which faults and situations the explored histories reached (each count is of transitions).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reached {
    /// Replicas wiped.
    pub wipes: usize,
    /// Replicas restored from an old copy.
    pub rollbacks: usize,
    /// Requests applied whose answers were lost.
    pub lost_answers: usize,
    /// Requests never applied nor answered.
    pub unanswered: usize,
    /// Members frozen.
    pub freezes: usize,
    /// States where a member whose set is not the group's holds a replica.
    pub mixed_holds: usize,
    /// States with a split vote (each of three members holding one replica).
    pub splits: usize,
    /// Bodies started.
    pub bodies: usize,
}

impl Reached {
    fn count(&mut self, config: &Config, action: Action, before: &State, next: &State) {
        match action {
            Action::Wipe(_) => self.wipes += 1,
            Action::Rollback(_) | Action::RestoreInPlace(_) => self.rollbacks += 1,
            Action::Request(_, _, Heard::AppliedLost) => self.lost_answers += 1,
            Action::Request(_, _, Heard::NotApplied) => self.unanswered += 1,
            Action::Freeze(_) => self.freezes += 1,
            _ => {}
        }
        let started = next.bodies().len() > before.bodies().len();
        self.bodies += usize::from(started);
        let last = next.members.len() - 1;
        if config.mixed != crate::rules::Mixed::None
            && next.members[last].holds.iter().any(Option::is_some)
        {
            self.mixed_holds += 1;
        }
        if split(next) {
            self.splits += 1;
        }
    }
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every reachable state keeps both properties.
    Holds,
    /// A shortest history to a violation.
    Violated {
        /// The property broken.
        violation: Violation,
        /// The steps from the start.
        trace: Vec<Step>,
    },
}

/// One step of a counterexample: the tick it happened at, the action, and the bodies that
/// started or stopped with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The tick.
    pub tick: Tick,
    /// The action.
    pub action: Action,
    /// The bodies it started or stopped, e.g. `m0's body starts (epoch 2, kill at 5)`.
    pub bodies: String,
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={} {}", self.tick, self.action)?;
        if !self.bodies.is_empty() {
            write!(f, "; {}", self.bodies)?;
        }
        Ok(())
    }
}

/// A search's result.
#[derive(Clone, Debug)]
pub struct Report {
    /// Distinct states visited.
    pub states: usize,
    /// How long the search took.
    pub elapsed: Duration,
    /// The faults reached.
    pub reached: Reached,
    /// Whether the properties hold.
    pub outcome: Outcome,
}

/// The properties, in one state.
#[must_use]
pub fn check(state: &State) -> Option<Violation> {
    let bodies = state.bodies();
    if bodies.len() > 1 {
        return Some(Violation::TwoBodies(bodies));
    }
    state.epoch_fell.then_some(Violation::EpochFell)
}

/// Every state reachable under `config`, breadth first; stops at the first violation.
#[must_use]
pub fn explore(config: &Config) -> Report {
    let began = Instant::now();
    let first = State::initial(config);
    let mut index: HashMap<State, u32, BuildHasherDefault<Fx>> = HashMap::default();
    let mut parents: Vec<(u32, Option<Action>)> = vec![(0, None)];
    let mut queue = VecDeque::from([(first.clone(), 0_u32)]);
    index.insert(first, 0);
    let mut reached = Reached::default();
    while let Some((state, at)) = queue.pop_front() {
        for action in enabled(config, &state) {
            let next = apply(config, &state, action);
            reached.count(config, action, &state, &next);
            if index.contains_key(&next) {
                continue;
            }
            let id = u32::try_from(parents.len()).expect("fewer than 2^32 states");
            parents.push((at, Some(action)));
            if let Some(violation) = check(&next) {
                let trace = replay(config, &parents, id);
                return report(
                    began,
                    parents.len(),
                    reached,
                    Outcome::Violated { violation, trace },
                );
            }
            index.insert(next.clone(), id);
            queue.push_back((next, id));
        }
    }
    report(began, parents.len(), reached, Outcome::Holds)
}

fn report(began: Instant, states: usize, reached: Reached, outcome: Outcome) -> Report {
    Report {
        states,
        elapsed: began.elapsed(),
        reached,
        outcome,
    }
}

/// The steps from the start to state `id`.
fn replay(config: &Config, parents: &[(u32, Option<Action>)], id: u32) -> Vec<Step> {
    let mut actions = Vec::new();
    let mut at = id;
    while let (parent, Some(action)) = parents[at as usize] {
        actions.push(action);
        at = parent;
    }
    actions.reverse();
    let mut state = State::initial(config);
    actions
        .into_iter()
        .map(|action| {
            let tick = state.now;
            let next = apply(config, &state, action);
            let bodies = changes(&state, &next);
            state = next;
            Step {
                tick,
                action,
                bodies,
            }
        })
        .collect()
}

/// The bodies that started or stopped between `before` and `after`.
fn changes(before: &State, after: &State) -> String {
    let mut out = Vec::new();
    for (m, (was, is)) in before.members.iter().zip(&after.members).enumerate() {
        match (was.body, is.body) {
            (None, Some(b)) => out.push(format!(
                "m{m}'s body starts (epoch {}, kill at {})",
                b.epoch, b.kill
            )),
            (Some(_), None) => out.push(format!("m{m}'s body stops")),
            (Some(a), Some(b)) if a.kill != b.kill => {
                out.push(format!("m{m}'s kill moves to {}", b.kill));
            }
            _ => {}
        }
    }
    out.join(", ")
}

/// A fast hash for the visited set (the `FxHash` of rustc: one multiply a word).
#[derive(Default)]
pub struct Fx(u64);

impl Hasher for Fx {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}
