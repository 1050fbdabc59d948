//! The checker: reads a witness history and the daemons' own deadlines, and reports everything
//! the safety model forbids: the one checker of the fault suite, the chaos command and the
//! benchmark.
//!
//! * **Overlaps**: a witness that found another one alive when it started (the kernel's verdict,
//!   from the shared `flock`), or two recorded lifetimes that intersect.
//! * **Epochs** that do not grow in start order (a new daemon must lead with a larger epoch).
//! * **Late children**: a child seen alive after its daemon's kill deadline `t_s + L - M`. The
//!   deadlines come from the daemon's debug line `lease deadline epoch=E kill_at_mono_ns=N`
//!   (src/elector.rs), in the same CLOCK_MONOTONIC the witness writes. A child's life is known
//!   from its `start` line to its last line (`stop` when it handled the stop signal, or its last
//!   `beat` when it was SIGKILLed), so a late child is caught to within one beat period.

use crate::history::{History, Life};
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// The kill deadlines the daemons logged: for each (identity, epoch), the latest one.
#[derive(Debug, Clone, Default)]
pub struct Deadlines(BTreeMap<(String, u64), Duration>);

impl Deadlines {
    /// Collects the `lease deadline` lines of one daemon's log (run with
    /// `RUST_LOG=info,leasehold::elector=debug`, see [`crate::daemon::DEADLINE_LOG`]).
    pub fn read_log(&mut self, identity: &str, log: &str) {
        for (epoch, at) in logged_deadlines(log) {
            let slot = self.0.entry((identity.to_owned(), epoch)).or_default();
            *slot = (*slot).max(at);
        }
    }

    pub fn from_log(identity: &str, log: &str) -> Self {
        let mut d = Self::default();
        d.read_log(identity, log);
        d
    }

    /// The last kill deadline of `identity`'s term with `epoch`.
    pub fn of(&self, identity: &str, epoch: u64) -> Option<Duration> {
        self.0.get(&(identity.to_owned(), epoch)).copied()
    }

    /// Every deadline of `identity`, whatever the term.
    pub fn all_of(&self, identity: &str) -> Vec<Duration> {
        self.0
            .iter()
            .filter(|((id, _), _)| id == identity)
            .map(|(_, t)| *t)
            .collect()
    }

    pub fn merge(&mut self, other: &Deadlines) {
        for (k, v) in &other.0 {
            let slot = self.0.entry(k.clone()).or_default();
            *slot = (*slot).max(*v);
        }
    }
}

/// The deadlines of several daemons in one: each (identity, epoch)'s latest.
impl FromIterator<Deadlines> for Deadlines {
    fn from_iter<I: IntoIterator<Item = Deadlines>>(all: I) -> Self {
        let mut merged = Self::default();
        for d in all {
            merged.merge(&d);
        }
        merged
    }
}

/// Every `lease deadline epoch=E kill_at_mono_ns=N` line of a daemon's log, in order: one per
/// lease won or renewed, as (epoch, kill deadline on CLOCK_MONOTONIC).
pub fn logged_deadlines(log: &str) -> impl Iterator<Item = (u64, Duration)> + '_ {
    log.lines()
        .filter_map(|l| l.find("lease deadline").map(|i| &l[i..]))
        .filter_map(|line| {
            // Only the fields after the message: the line's `term{identity=.. epoch=..}` span
            // comes before it.
            let field = |name: &str| {
                line.split_whitespace()
                    .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                    .and_then(|v| v.parse::<u64>().ok())
            };
            Some((
                field("epoch")?,
                Duration::from_nanos(field("kill_at_mono_ns")?),
            ))
        })
}

/// Two children alive at once.
#[derive(Debug, Clone)]
pub struct Overlap {
    /// When it was seen.
    pub at: Duration,
    /// The child that started (or tried to) while `alive` lived.
    pub newcomer: String,
    pub newcomer_epoch: u64,
    /// The children alive at that instant, as far as the history shows.
    pub alive: Vec<Life>,
    /// Reported by the kernel (the witness lock), rather than by the recorded lifetimes.
    pub kernel: bool,
}

/// A child seen alive after its daemon's kill deadline.
#[derive(Debug, Clone)]
pub struct Late {
    pub life: Life,
    pub deadline: Duration,
    /// `last_seen - deadline`.
    pub by: Duration,
}

/// What the checker found in one history.
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    pub lives: Vec<Life>,
    pub overlaps: Vec<Overlap>,
    /// Consecutive starts where the epoch did not grow as it must.
    pub epoch_regressions: Vec<(Life, Life)>,
    pub late: Vec<Late>,
    /// Over the children with a known deadline: the largest `last_seen - deadline`, in
    /// nanoseconds (negative: the worst child was last seen that long *before* its deadline).
    pub worst_margin_ns: Option<i128>,
    /// Children whose daemon logged no deadline for their epoch (cannot be judged).
    pub undated: Vec<Life>,
}

impl Verdict {
    pub fn is_safe(&self) -> bool {
        self.overlaps.is_empty() && self.epoch_regressions.is_empty() && self.late.is_empty()
    }

    /// Panics with the details unless the history is safe and every child could be judged.
    pub fn assert_safe(&self) {
        assert!(
            self.is_safe(),
            "the history breaks the safety model:\n{self}"
        );
        assert!(
            self.undated.is_empty(),
            "children without a logged deadline (was the daemon run with DEADLINE_LOG?):\n{self}"
        );
    }

    /// The worst margin, for people: "-1.980s" means dead 1.98 s before the deadline.
    pub fn worst_margin(&self) -> String {
        self.worst_margin_ns
            .map_or("n/a".into(), |ns| format!("{:+.3}s", ns as f64 / 1e9))
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} children, {} overlaps, {} epoch regressions, {} late, worst margin {}",
            self.lives.len(),
            self.overlaps.len(),
            self.epoch_regressions.len(),
            self.late.len(),
            self.worst_margin()
        )?;
        for o in &self.overlaps {
            writeln!(
                f,
                "  overlap at {:.3}s ({}): {} epoch {} while alive: {}",
                o.at.as_secs_f64(),
                if o.kernel { "kernel" } else { "lifetimes" },
                o.newcomer,
                o.newcomer_epoch,
                o.alive
                    .iter()
                    .map(|l| l.to_string())
                    .collect::<Vec<_>>()
                    .join("; ")
            )?;
        }
        for (a, b) in &self.epoch_regressions {
            writeln!(f, "  epoch did not grow: {a} -> {b}")?;
        }
        for l in &self.late {
            writeln!(
                f,
                "  late: {} seen {:?} after its kill deadline {:.3}s",
                l.life,
                l.by,
                l.deadline.as_secs_f64()
            )?;
        }
        for l in &self.undated {
            writeln!(f, "  no deadline logged for {l}")?;
        }
        Ok(())
    }
}

/// Checks `history` against the safety model.
pub fn check(history: &History, deadlines: &Deadlines) -> Verdict {
    let lives = history.lives();
    let mut verdict = Verdict {
        lives: lives.clone(),
        ..Verdict::default()
    };
    let alive_at = |t: Duration, except: u32| -> Vec<Life> {
        lives
            .iter()
            .filter(|l| l.pid != except && l.start <= t && t <= l.last_seen)
            .cloned()
            .collect()
    };
    for o in history.of_kind("overlap") {
        verdict.overlaps.push(Overlap {
            at: o.t,
            newcomer: o.identity.clone(),
            newcomer_epoch: o.epoch,
            alive: alive_at(o.t, o.pid),
            kernel: true,
        });
    }
    for (i, b) in lives.iter().enumerate() {
        let alive: Vec<Life> = lives[..i]
            .iter()
            .filter(|a| a.last_seen > b.start)
            .cloned()
            .collect();
        if !alive.is_empty() {
            verdict.overlaps.push(Overlap {
                at: b.start,
                newcomer: b.identity.clone(),
                newcomer_epoch: b.epoch,
                alive,
                kernel: false,
            });
        }
    }
    for pair in lives.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let grows = if a.identity == b.identity {
            b.epoch >= a.epoch
        } else {
            b.epoch > a.epoch
        };
        if !grows {
            verdict.epoch_regressions.push((a.clone(), b.clone()));
        }
    }
    for life in &lives {
        let Some(deadline) = deadlines.of(&life.identity, life.epoch) else {
            verdict.undated.push(life.clone());
            continue;
        };
        let margin = life.last_seen.as_nanos() as i128 - deadline.as_nanos() as i128;
        verdict.worst_margin_ns = Some(verdict.worst_margin_ns.map_or(margin, |w| w.max(margin)));
        if margin > 0 {
            verdict.late.push(Late {
                life: life.clone(),
                deadline,
                by: Duration::from_nanos(margin as u64),
            });
        }
    }
    verdict
}

impl History {
    /// The safety model as far as the history alone shows it, by the checker ([`check`]; here so that the history
    /// does not depend on its checker): no
    /// two children alive at once (neither the kernel's verdict, an `overlap` line, nor the
    /// recorded lifetimes), and epochs that never go down in start order and grow whenever the
    /// leading daemon changes. ([`crate::Verdict::assert_safe`] also holds every child to its
    /// daemon's kill deadline.)
    pub fn assert_safe(&self) {
        let verdict = check(self, &Deadlines::default());
        assert!(
            verdict.overlaps.is_empty() && verdict.epoch_regressions.is_empty(),
            "the history breaks the safety model:\n{verdict}"
        );
    }
}
