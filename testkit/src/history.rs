//! What the witness children of a group recorded: one line per event, appended by every witness
//! to the group's history file,
//!
//! ```text
//! <CLOCK_MONOTONIC ns> <event> <identity> <epoch> <pid> [detail]
//! ```
//!
//! with events `start`, `beat`, `stop` (it got a stop signal), `exit` (it ended by itself),
//! `signal` (a forwarded signal) and `overlap` (another witness was still alive when it
//! started). [`Event::line`] writes a line, [`History::parse`] reads them.

use std::fmt;
use std::fs;
use std::path::Path;
use std::time::Duration;

/// One line of a witness history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// When, on CLOCK_MONOTONIC.
    pub t: Duration,
    pub kind: String,
    /// `LEASEHOLD_IDENTITY` of the daemon that ran the witness.
    pub identity: String,
    /// `LEASEHOLD_EPOCH` it was given.
    pub epoch: u64,
    pub pid: u32,
    /// The rest of the line: the signal's name for `stop` and `signal`, the code for `exit`,
    /// `env_credentials=...` (the storage variables it was given) for `start`.
    pub detail: String,
}

impl Event {
    /// The history line, newline included.
    pub fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {}\n",
            self.t.as_nanos(),
            self.kind,
            self.identity,
            self.epoch,
            self.pid,
            self.detail
        )
    }

    fn parse(line: &str) -> Option<Self> {
        let mut f = line.splitn(6, ' ');
        let ns: u64 = f.next()?.parse().ok()?;
        Some(Self {
            t: Duration::from_nanos(ns),
            kind: f.next()?.to_owned(),
            identity: f.next()?.to_owned(),
            epoch: f.next()?.parse().ok()?,
            pid: f.next()?.parse().ok()?,
            detail: f.next().unwrap_or("").trim().to_owned(),
        })
    }
}

/// One child's life, as its witness recorded it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Life {
    pub identity: String,
    pub epoch: u64,
    pub pid: u32,
    pub start: Duration,
    /// Its last line: when it was last known alive.
    pub last_seen: Duration,
    /// How it ended: `stop SIGTERM`, `exit 0`, or no last word (SIGKILLed, or still running).
    pub end: String,
}

impl fmt::Display for Life {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} epoch {} (pid {}, {:.3}s..{:.3}s, {})",
            self.identity,
            self.epoch,
            self.pid,
            self.start.as_secs_f64(),
            self.last_seen.as_secs_f64(),
            self.end
        )
    }
}

/// Every event of a history, in file order (each witness writes each line with one `write` on
/// an `O_APPEND` file, so lines never interleave).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct History {
    pub events: Vec<Event>,
}

impl History {
    /// The history file at `path` (none yet: empty).
    pub fn read(path: &Path) -> Self {
        Self::parse(&fs::read_to_string(path).unwrap_or_default())
    }

    /// Parses whole lines: a last line without its newline may still be being written, and is
    /// left for the next read.
    pub fn parse(text: &str) -> Self {
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        Self {
            events: complete.lines().filter_map(Event::parse).collect(),
        }
    }

    pub fn of_kind(&self, kind: &str) -> Vec<&Event> {
        self.events.iter().filter(|e| e.kind == kind).collect()
    }

    pub fn starts(&self) -> Vec<&Event> {
        self.of_kind("start")
    }

    /// The first child `identity` started.
    pub fn first_start_of(&self, identity: &str) -> Option<Event> {
        self.events
            .iter()
            .find(|e| e.kind == "start" && e.identity == identity)
            .cloned()
    }

    /// The latest child `identity` started.
    pub fn last_start_of(&self, identity: &str) -> Option<Event> {
        self.events
            .iter()
            .rev()
            .find(|e| e.kind == "start" && e.identity == identity)
            .cloned()
    }

    /// The last event of the child `pid`: the latest instant it is known to have lived.
    pub fn last_seen(&self, pid: u32) -> Duration {
        self.events
            .iter()
            .filter(|e| e.pid == pid)
            .map(|e| e.t)
            .max()
            .unwrap_or_default()
    }

    /// When the child `pid` wrote its `stop` line: the moment it decided to end, its own last
    /// word.
    pub fn stop_of(&self, pid: u32) -> Option<Duration> {
        self.events
            .iter()
            .find(|e| e.pid == pid && e.kind == "stop")
            .map(|e| e.t)
    }

    /// Who leads now, as far as the children tell: the last child started, if it has not
    /// stopped or exited since.
    pub fn current_leader(&self) -> Option<&Event> {
        let start = self.events.iter().rev().find(|e| e.kind == "start")?;
        let ended = self
            .events
            .iter()
            .any(|e| e.pid == start.pid && (e.kind == "stop" || e.kind == "exit"));
        (!ended).then_some(start)
    }

    /// Every child that started, in start order.
    pub fn lives(&self) -> Vec<Life> {
        self.starts()
            .into_iter()
            .map(|s| {
                let own: Vec<_> = self.events.iter().filter(|e| e.pid == s.pid).collect();
                let last = own.iter().max_by_key(|e| e.t).expect("its start");
                let end = own
                    .iter()
                    .rev()
                    .find(|e| e.kind == "stop" || e.kind == "exit")
                    .map_or_else(
                        || "no last word (killed, or running)".to_owned(),
                        |e| format!("{} {}", e.kind, e.detail),
                    );
                Life {
                    identity: s.identity.clone(),
                    epoch: s.epoch,
                    pid: s.pid,
                    start: s.t,
                    last_seen: last.t,
                    end,
                }
            })
            .collect()
    }

    /// Replays every `beat`, in time order, as a write carrying the child's epoch to a downstream
    /// system that refuses epochs smaller than the largest it has seen (what the safety model
    /// asks of systems a child changes). Returns the refused writes.
    pub fn fenced_writes(&self) -> Vec<Event> {
        let mut beats: Vec<&Event> = self.of_kind("beat");
        beats.sort_by_key(|e| e.t);
        let mut highest = 0;
        let mut refused = Vec::new();
        for beat in beats {
            if beat.epoch < highest {
                refused.push(beat.clone());
            }
            highest = highest.max(beat.epoch);
        }
        refused
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_reads_back_as_the_event_it_was_written_from() {
        let event = Event {
            t: Duration::from_nanos(1_234_567_890),
            kind: "start".into(),
            identity: "a".into(),
            epoch: 1795433418354,
            pid: 42,
            detail: "env_credentials=".into(),
        };
        let text = format!("{}1 beat a 7 43", event.line());
        let history = History::parse(&text);
        assert_eq!(history.events, [event], "the unfinished last line waits");
    }
}
