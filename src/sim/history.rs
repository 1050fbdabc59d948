//! One simulated history: what it is drawn from ([`Config`]), how it is run on a thread of its
//! own ([`run`]: the world on tokio's paused clock, every random choice from the seed), and what
//! came of it ([`History`]: the trace, the rules it was held to, the violations, the hash).

use super::bounds::{handoff_bound, liveness_bound};
use super::check::{self, Rules, Violation};
use super::dice::{Dice, Stream};
use super::director;
use super::schedule::Schedule;
use super::trace::{self, Event, What};
use super::world;
use crate::mutant::Mutant;
use crate::timing::Timing;
use std::time::Duration;

/// One history to simulate.
#[derive(Debug, Clone)]
pub struct Config {
    /// Every random choice of the history comes from it.
    pub seed: u64,
    /// Members at the start (more may join).
    pub members: usize,
    /// How long it runs, in virtual time.
    pub length: Duration,
    /// A deliberately broken rule to switch on.
    pub mutant: Option<Mutant>,
    /// A scripted schedule instead of the director's draws (its own seed, length and group).
    pub schedule: Option<Schedule>,
    /// The engine that plays it.
    pub engine: Engine,
    /// The storage accounts the group leads on (docs/quorum.md): 1 (one account), 3 or 5 (a
    /// replica set, a store a replica, with faults per replica), or 0: 3 or 5 drawn from the
    /// seed (one history in four on five). Replica sets are played by the synchronous engine.
    pub replicas: usize,
}

/// The engine that plays a history: tokio's (the shell's elector on tokio's paused clock), or
/// the synchronous one (the core's members driven with no runtime). Both record the same trace,
/// which the same checker judges and the same hash sums.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Engine {
    /// The real shell elector on tokio's paused clock.
    #[default]
    Tokio,
    /// The core's members, driven with no runtime (src/sim/sync/).
    Sync,
}

impl Engine {
    /// Its name on the command line (`--engine NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Engine::Tokio => "tokio",
            Engine::Sync => "sync",
        }
    }

    /// The engine named `name`, if there is one.
    pub fn from_name(name: &str) -> Option<Engine> {
        [Engine::Tokio, Engine::Sync]
            .into_iter()
            .find(|e| e.name() == name)
    }
}

impl Config {
    /// Seed `seed`: 5 members, 10 minutes, no mutant.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            members: 5,
            length: Duration::from_secs(600),
            mutant: None,
            schedule: None,
            engine: Engine::Tokio,
            replicas: 1,
        }
    }

    /// The scripted schedule `schedule`: its seed, group and length.
    pub fn scripted(schedule: Schedule) -> Self {
        Self {
            seed: schedule.seed,
            members: schedule.members.len(),
            length: schedule.length,
            mutant: None,
            schedule: Some(schedule),
            engine: Engine::Tokio,
            replicas: 1,
        }
    }

    /// With `k` members at the start.
    pub fn members(mut self, k: usize) -> Self {
        self.members = k;
        self
    }

    /// `m` minutes of virtual time.
    pub fn minutes(mut self, m: u64) -> Self {
        self.length = Duration::from_secs(60 * m);
        self
    }

    /// With `mutant` switched on.
    pub fn mutant(mut self, mutant: Option<Mutant>) -> Self {
        self.mutant = mutant;
        self
    }

    /// Played by `engine`.
    pub fn engine(mut self, engine: Engine) -> Self {
        self.engine = engine;
        self
    }

    /// On `n` storage accounts (see [`Config::replicas`]).
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n;
        self
    }

    /// The replica set's size its seed plays: 1, 3 or 5.
    pub fn set_size(&self) -> usize {
        match self.replicas {
            0 => match Dice::new(self.seed, Stream::Replicas).below(4) {
                0 => 5,
                _ => 3,
            },
            n => n,
        }
    }
}

/// A simulated history, judged.
#[derive(Debug, Clone)]
pub struct History {
    /// The seed it was drawn from.
    pub seed: u64,
    /// Its trace.
    pub events: Vec<Event>,
    /// The rules it was held to.
    pub rules: Rules,
    /// What broke them, in time order.
    pub violations: Vec<Violation>,
    /// A hash of the whole trace: the same seed gives the same hash.
    pub hash: u64,
    /// Its shape, kept when the trace is dropped.
    pub shape: Shape,
    /// How many members it had at the start, and its mutant (for the replay command).
    config: Config,
}

impl Config {
    /// The command that replays this history.
    pub fn replay_command(&self) -> String {
        if let Some(s) = &self.schedule {
            let mut command = format!(
                "cargo run --release --example simulate -- --schedule {}",
                s.name
            );
            if self.seed != s.seed {
                command += &format!(" --from {} --seeds 1", self.seed);
            }
            if let Some(m) = self.mutant {
                command += &format!(" --mutant {}", m.name());
            }
            return command;
        }
        let mut command = format!(
            "cargo run --release --example simulate -- --seed {}",
            self.seed
        );
        if self.members != 5 {
            command += &format!(" --members {}", self.members);
        }
        if self.length != Duration::from_secs(600) {
            command += &format!(" --history-minutes {}", self.length.as_secs() / 60);
        }
        if let Some(m) = self.mutant {
            command += &format!(" --mutant {}", m.name());
        }
        if self.engine != Engine::Tokio {
            command += &format!(" --engine {}", self.engine.name());
        }
        match self.replicas {
            1 => {}
            0 => command += " --replicas any",
            n => command += &format!(" --replicas {n}"),
        }
        command
    }
}

impl History {
    /// The command that replays this history.
    pub fn replay_command(&self) -> String {
        self.config.replay_command()
    }

    /// The notable events (not every storage request), one a line.
    pub fn trace(&self) -> String {
        self.events
            .iter()
            .filter(|e| e.what.is_notable())
            .map(|e| format!("{e}\n"))
            .collect()
    }

    /// The trace, the violations, and the replay command, for people.
    pub fn report(&self) -> String {
        let mut out = format!(
            "seed {} ({} slot(s), liveness bound {}, handoff bound {}):\n",
            self.seed,
            self.rules.slots,
            trace::at(self.rules.liveness),
            trace::at(self.rules.handoff)
        );
        out += &self.trace();
        for v in &self.violations {
            out += &format!("VIOLATION {v}\n");
        }
        out += &format!("replay: {}\n", self.replay_command());
        out
    }
}

/// Simulates one history on this thread, and judges it.
pub fn run(config: &Config) -> History {
    let timing = Timing::default();
    let shape = world::Shape {
        seed: config.seed,
        members: config.members,
        length: config.length,
        final_calm: Duration::from_secs(120).min(config.length / 3),
        scripted: config.schedule.is_some(),
        mutant: crate::mutant::Switch::of(config.mutant),
        replicas: config.set_size(),
    };
    let warnings = super::warnings::Warnings::default();
    let (events, slots) = match (config.engine, &config.schedule) {
        (Engine::Sync, script) => super::sync::play(shape, config.mutant, script.as_ref()),
        _ => play_tokio(config, shape, timing, &warnings),
    };
    judge(config, events, slots, timing, &warnings)
}

/// Plays one history on tokio's paused clock, on this thread: its trace, and its slots.
fn play_tokio(
    config: &Config,
    shape: world::Shape,
    timing: Timing,
    warnings: &super::warnings::Warnings,
) -> (Vec<Event>, u32) {
    fastrand::seed(config.seed);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let quiet = config.schedule.as_ref().is_some_and(|s| s.quiet);
    let play = || {
        runtime.block_on(async {
            let recorder = trace::Recorder::new();
            let dice = Dice::new(config.seed, Stream::Director);
            let cast = match &config.schedule {
                Some(s) => world::Cast {
                    slots: s.slots,
                    members: s.cast(),
                    plans: s.plans(),
                    ppm: 0,
                    brand_new: false,
                },
                None => director::draw_cast(&dice, config.seed, config.members),
            };
            let mut world = world::World::new(shape, cast, dice, timing, recorder.clone());
            let slots = world.slots();
            match config.schedule.clone() {
                Some(script) => world.play_script(script).await,
                None => world.play_drawn().await,
            }
            (recorder.take_events(), slots)
        })
    };
    let (events, slots) = match quiet {
        true => tracing::subscriber::with_default(warnings.clone(), play),
        false => play(),
    };
    // Whatever is still running stops here, with the runtime, before the thread goes on.
    drop(runtime);
    (events, slots)
}

/// Judges the history whose trace is `events`.
fn judge(
    config: &Config,
    events: Vec<Event>,
    slots: u32,
    timing: Timing,
    warnings: &super::warnings::Warnings,
) -> History {
    let rules = Rules {
        timing,
        slots,
        liveness: liveness_bound(&timing, slots),
        handoff: handoff_bound(&timing),
        end: config.length,
        crash_backoff: crate::crash_loop::CrashBackoff::default(),
        replicas: config.set_size(),
    };
    let mut violations = check::check(&events, &rules);
    violations.extend(warnings.take().into_iter().map(|line| Violation {
        rule: 'w',
        at: rules.end,
        what: format!("the schedule expects no warning; logged: {line}"),
    }));
    let hash = trace::hash(&events);
    History {
        seed: config.seed,
        shape: Shape::of(&events),
        events,
        rules,
        violations,
        hash,
        config: config.clone(),
    }
}

/// The shape of a history: what a rate of histories a minute is read against.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shape {
    /// How many members it had: those at the start and those that joined later.
    pub members: usize,
    /// How long it ran in virtual time: until its last event.
    pub virtual_length: Duration,
    /// How many events its trace has.
    pub events: usize,
}

impl Shape {
    /// The shape of the history whose trace is `events`.
    fn of(events: &[Event]) -> Self {
        let up = events.iter().filter_map(|e| match e.what {
            What::Up { member, .. } => Some(member),
            _ => None,
        });
        Self {
            members: up.collect::<std::collections::BTreeSet<_>>().len(),
            virtual_length: events.last().map_or(Duration::ZERO, |e| e.at),
            events: events.len(),
        }
    }
}

/// Folds the hash of one more history into the hash of a run of several (in seed order).
pub fn combine_hashes(run: u64, history: u64) -> u64 {
    trace::combine(run, history)
}
