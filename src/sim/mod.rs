//! The simulator (design section 15): the real elector (campaign, keep, handoff, wake-ups,
//! preemption, slots, member records) of K members, driven on virtual time in one thread, with
//! every random choice drawn from one seed, so that a seed replays its history exactly.
//!
//! Each member is a real [`Elector`](crate::Elector) running its loop with a simulated body
//! (`body`), as one simulated process (`gate`: its tasks are frozen and killed together); all
//! of them reach one [`MemoryStore`](crate::store::MemoryStore), which keeps Azure's lease
//! rules on tokio's paused clock, over a simulated network that delays, loses and refuses
//! requests (`world`). A director draws from the seed what happens to them. Everything is
//! recorded in one trace (`trace`), and the checker (`check`) judges the history from the trace
//! alone: [`Violation`]s of rules (a) to (e).
//!
//! What it cannot see: the real child process and its process group (the fault suite and the
//! chaos command test those), the real HTTP stack (wake-ups are delivered in memory), and real
//! Azure (the store is a model of its lease rules, checked against Azurite by the integration
//! tests).
//!
//! ```
//! use leasehold::sim::{Config, run};
//!
//! let history = run(&Config::new(7).minutes(1));
//! assert!(history.violations.is_empty(), "{}", history.report());
//! assert_eq!(history.hash, run(&Config::new(7).minutes(1)).hash, "a seed replays exactly");
//! ```

mod body;
mod check;
pub(crate) mod gate;
mod trace;
mod world;

pub use crate::mutant::Mutant;
pub use check::{Rules, TIMER_SLACK, Violation};
pub use trace::{Event, MemberId, What};

use crate::timing::{POLL_JITTER, Timing};
use std::time::Duration;

/// Whether this thread is running a simulated history now (lease ids then come from its seed).
pub(crate) fn active() -> bool {
    crate::random::seeded()
}

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
}

impl Config {
    /// Seed `seed`: 5 members, 10 minutes, no mutant.
    pub fn new(seed: u64) -> Self {
        Self {
            seed,
            members: 5,
            length: Duration::from_secs(600),
            mutant: None,
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
    /// How many members it had at the start, and its mutant (for the replay command).
    config: Config,
}

impl Config {
    /// The command that replays this history.
    pub fn replay_command(&self) -> String {
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

/// The liveness bound of rule (d) for `timing` (docs/safety.md, "Recovery"): how long a group
/// with a member able to lead may run without a leader after the last fault. A member that
/// storage failed retries within the longest error backoff, its request may take up to `R`
/// to time out; then the lease it finds may be held by nobody alive until it expires (`L`), or
/// the blob deleted and under its lock-delay (`L + M`); the member that takes it over polls
/// within `1.2 x acquire_interval`; 1 s for the requests on the way. With `slots` above 1,
/// the members waiting for a slot move on only when the one ahead of them leads or its record
/// dies: a poller that died keeps them waiting until its record's lease expires (30 s), and
/// the next one sees that at its next watch of that record (a watch period).
pub fn liveness_bound(timing: &Timing, slots: u32) -> Duration {
    let single = crate::elector::longest_error_backoff(timing)
        + timing.renew_interval
        + timing.duration
        + timing.safety_margin
        + timing.longest_poll()
        + Duration::from_secs(1);
    match slots {
        1 => single,
        _ => {
            let watch = timing.acquire_interval * crate::elector::members::WATCH_PERIODS;
            single
                + crate::elector::members::RECORD_LEASE
                + watch.mul_f64(1.0 + POLL_JITTER)
                + Duration::from_secs(1)
        }
    }
}

/// The handoff bound of rule (e) for `timing` (docs/safety.md): a term handed to a member
/// that was already gone is taken over, or handed on to the next member, within this long: the
/// leader waits for the successor's epoch for its confirm window (the longest: a member that
/// was handed the lease on and only watches the blob reads the notice naming it within a watch
/// period, and then polls), then hands the lease on (or, when the lease expired meanwhile, a
/// member that polls takes it within a polling period); 2 s for the requests on the way.
pub fn handoff_bound(timing: &Timing) -> Duration {
    crate::elector::confirm_window(timing, false, false)
        + timing.longest_poll()
        + Duration::from_secs(2)
}

/// Simulates one history on this thread, and judges it.
pub fn run(config: &Config) -> History {
    let timing = Timing::default();
    fastrand::seed(config.seed);
    crate::random::from_seed(true);
    crate::mutant::switch(config.mutant);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a current-thread runtime");
    let shape = world::Shape {
        members: config.members,
        length: config.length,
        final_calm: Duration::from_secs(120).min(config.length / 3),
    };
    let (events, slots) = runtime.block_on(async {
        crate::clock::simulated::set(true);
        let recorder = trace::Recorder::new();
        let world = world::World::new(shape, timing, recorder.clone());
        let slots = world.slots();
        world.play().await;
        (recorder.events(), slots)
    });
    // Whatever is still running stops here, with the runtime, before the thread goes on.
    drop(runtime);
    crate::clock::simulated::set(false);
    crate::mutant::switch(None);
    crate::store::memory::server_clock_ppm(0);
    crate::random::from_seed(false);
    let rules = Rules {
        lease: timing.duration,
        margin: timing.safety_margin,
        slots,
        liveness: liveness_bound(&timing, slots),
        handoff: handoff_bound(&timing),
        end: config.length,
    };
    let violations = check::check(&events, &rules);
    let hash = trace::hash(&events);
    History {
        seed: config.seed,
        events,
        rules,
        violations,
        hash,
        config: config.clone(),
    }
}

/// Folds the hash of one more history into the hash of a run of several (in seed order).
pub fn combine_hashes(run: u64, history: u64) -> u64 {
    trace::combine(run, history)
}

#[cfg(test)]
mod tests;
