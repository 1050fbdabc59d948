//! Groups with slots (`[lease].slots = N`, docs/slots.md): the witness of each slot records into a
//! history of its own and holds a lock of its own (the child picks both by its `LEASEHOLD_SLOT`),
//! so that the one checker ([`check`]) judges each slot as it judges a group of one lease (never
//! two children at once, epochs that grow, no child past its deadline), and [`SlotVerdict`] adds
//! what holds across slots: never more than N children at once.

use crate::binaries::witness_bin;
use crate::check::{Deadlines, Verdict, check};
use crate::group::Group;
use crate::history::{Event, History, Life};
use crate::wait::wait_until_some;
use std::path::PathBuf;
use std::time::Duration;

/// The history file of slot `slot` of `group`.
pub fn slot_history_path(group: &Group, slot: u32) -> PathBuf {
    group.dir().join(format!("history-slot-{slot}"))
}

/// A `[child]` body for a group with slots: the witness (with `options`), recording into its
/// slot's history and holding its slot's lock, then `lines`.
pub fn slot_witness_child(group: &Group, options: &[&str], lines: &str) -> String {
    let dir = group.dir().display().to_string();
    let script = format!(
        "exec \"$0\" --history \"{dir}/history-slot-$LEASEHOLD_SLOT\" --lock \
         \"{dir}/slot-$LEASEHOLD_SLOT.lock\" \"$@\""
    );
    let mut parts = vec![
        "/bin/sh".to_owned(),
        "-c".to_owned(),
        script,
        witness_bin().display().to_string(),
    ];
    parts.extend(options.iter().map(|s| s.to_string()));
    let command = parts
        .iter()
        .map(|p| format!("{p:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!("command = [{command}]\n{lines}\n")
}

/// The histories of slots 0..`n` of `group`.
pub fn slot_histories(group: &Group, n: u32) -> Vec<History> {
    (0..n)
        .map(|i| History::read(&slot_history_path(group, i)))
        .collect()
}

/// The checker's verdict on each slot, and the most children seen alive at once.
#[derive(Debug)]
pub struct SlotVerdict {
    /// Per slot, the one checker's verdict.
    pub slots: Vec<Verdict>,
    /// The most children alive at one instant, over all slots.
    pub most_at_once: usize,
    /// The lives of all slots, with their slot.
    pub lives: Vec<(u32, Life)>,
}

impl SlotVerdict {
    /// Whether every slot is safe and no more than `n` children ever ran at once.
    pub fn is_safe(&self, n: usize) -> bool {
        self.slots.iter().all(Verdict::is_safe) && self.most_at_once <= n
    }

    /// Panics with the whole verdict unless it [`SlotVerdict::is_safe`], or when no child ran at
    /// all (a verdict over nothing).
    pub fn assert_safe(&self, n: usize) {
        assert!(
            !self.lives.is_empty(),
            "no child ran on any slot: nothing was judged"
        );
        assert!(self.is_safe(n), "{self}");
    }

    /// The lives that ran on slot `slot`, in order.
    pub fn lives_of(&self, slot: u32) -> Vec<&Life> {
        self.lives
            .iter()
            .filter(|(s, _)| *s == slot)
            .map(|(_, l)| l)
            .collect()
    }
}

impl std::fmt::Display for SlotVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "most children at once: {}", self.most_at_once)?;
        for (i, v) in self.slots.iter().enumerate() {
            writeln!(f, "slot {i}: {v}")?;
        }
        Ok(())
    }
}

/// Checks each slot's history of `group` (slots 0..`n`) against the safety model, and counts
/// the children alive at once across slots.
pub fn check_slots(group: &Group, n: u32, deadlines: &Deadlines) -> SlotVerdict {
    let histories = slot_histories(group, n);
    let slots: Vec<Verdict> = histories.iter().map(|h| check(h, deadlines)).collect();
    let lives: Vec<(u32, Life)> = histories
        .iter()
        .enumerate()
        .flat_map(|(i, h)| h.lives().into_iter().map(move |l| (i as u32, l)))
        .collect();
    // At each start, how many lives (this one included) are alive.
    let most_at_once = lives
        .iter()
        .map(|(_, b)| {
            lives
                .iter()
                .filter(|(_, a)| a.start <= b.start && b.start <= a.last_seen)
                .count()
        })
        .max()
        .unwrap_or(0);
    SlotVerdict {
        slots,
        most_at_once,
        lives,
    }
}

/// The children alive at the end of each history now (their last line within `fresh`).
pub fn running_now(group: &Group, n: u32, now: Duration, fresh: Duration) -> Vec<(u32, Life)> {
    slot_histories(group, n)
        .into_iter()
        .enumerate()
        .flat_map(|(i, h)| {
            h.lives()
                .into_iter()
                .filter(|l| !l.end.starts_with("stop") && !l.end.starts_with("exit"))
                .filter(|l| now.saturating_sub(l.last_seen) <= fresh)
                .map(move |l| (i as u32, l))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The first child that starts on slot `slot` of `group` after `after` (monotonic), waiting up
/// to `within` for it: the refill of a slot whose holder was killed at `after`.
pub fn next_start(group: &Group, slot: u32, after: Duration, within: Duration) -> Option<Event> {
    wait_until_some(within, || {
        History::read(&slot_history_path(group, slot))
            .starts()
            .into_iter()
            .find(|e| e.t > after)
            .cloned()
    })
}
