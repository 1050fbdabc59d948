//! The promises, one row per case: what starts a stretch without a leader (a cause in the
//! world: a signal, a kill, a deletion, the end of a fault), how long until a body runs again,
//! as a sum of the group's own timings, and what that bound assumes. The simulator's checker
//! holds every history to these rows (src/sim/check), and docs/safety.md shows the same table
//! (a test renders it and compares): the docs cannot promise what the checker does not hold.
//!
//! A row without a bound says so ("no bound of its own"): such a stretch is held only to rule
//! (d), the liveness bound after the last fault.

use crate::timing::Timing;
use leasehold_core::Pace;
use std::time::Duration;

/// One duration of the timing table, a term of the bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Term {
    /// `G`: the body's stop (it is killed at `G`).
    Stop,
    /// `L`: a lease held by nobody alive runs out.
    Lease,
    /// `M`: the safety margin, which the lock-delay adds.
    Margin,
    /// `R`: a leader's renew finds a deleted blob within this.
    Renew,
    /// The longest polling period: `acquire_interval` stretched by the whole jitter.
    Poll,
    /// The longest watch period: `5 x acquire_interval` stretched by the whole jitter.
    Watch,
    /// The confirm window of a successor that answered its wake-up.
    Woken,
    /// The confirm window of the first hop without a wake-up: a poll and 300 ms.
    FirstHop,
    /// The confirm window of a later hop without a wake-up: a watch, a poll and 300 ms.
    LaterHop,
    /// The longest pause of a campaign after storage failed.
    Backoff,
    /// The lease on a member record: how long a crashed member still looks alive.
    RecordLease,
    /// How long after a read that shows a new leader the member it moved up lists.
    ListAfterChange,
    /// The requests on the way (acquire, epoch write, a listing), and the start of the body.
    Requests,
}

impl Term {
    /// Its value for `timing`.
    pub fn value(self, timing: &Timing) -> Duration {
        let pace = Pace::new(timing);
        match self {
            Term::Stop => timing.stop_timeout,
            Term::Lease => timing.duration,
            Term::Margin => timing.safety_margin,
            Term::Renew => timing.renew_interval,
            Term::Poll => pace.poll_longest(),
            Term::Watch => pace.watch_longest(),
            Term::Woken => pace.confirm_window(true, true),
            Term::FirstHop => pace.confirm_window(false, true),
            Term::LaterHop => pace.confirm_window(false, false),
            Term::Backoff => pace.error_backoff_longest(),
            Term::RecordLease => Pace::RECORD_LEASE,
            Term::ListAfterChange => Pace::LIST_AFTER_A_CHANGE,
            Term::Requests => Duration::from_secs(1),
        }
    }

    /// Its name in the docs' table.
    pub fn name(self) -> &'static str {
        match self {
            Term::Stop => "G",
            Term::Lease => "L",
            Term::Margin => "M",
            Term::Renew => "R",
            Term::Poll => "a poll",
            Term::Watch => "a watch",
            Term::Woken => "C_woken",
            Term::FirstHop => "C_first",
            Term::LaterHop => "C_later",
            Term::Backoff => "the error backoff",
            Term::RecordLease => "a record lease",
            Term::ListAfterChange => "the listing's delay",
            Term::Requests => "1 s",
        }
    }

    /// Every term, in the order the docs explain them.
    pub const ALL: [Term; 13] = [
        Term::Stop,
        Term::Lease,
        Term::Margin,
        Term::Renew,
        Term::Poll,
        Term::Watch,
        Term::Woken,
        Term::FirstHop,
        Term::LaterHop,
        Term::Backoff,
        Term::RecordLease,
        Term::ListAfterChange,
        Term::Requests,
    ];

    /// What it is, for the docs: the formula from the settings, and why it bounds what it does.
    pub fn meaning(self) -> &'static str {
        match self {
            Term::Stop => "`[child].stop_timeout`: the body's stop; it is killed at `G`",
            Term::Lease => "`[lease].duration`: a lease held by nobody alive runs out",
            Term::Margin => "`[lease].safety_margin`, which the lock-delay of a deleted blob adds",
            Term::Renew => {
                "`[lease].renew_interval`: a leader's renew finds a deleted blob within it"
            }
            Term::Poll => {
                "1.2 x `acquire_interval`: the successor's polling period, at its longest"
            }
            Term::Watch => "6 x `acquire_interval`: a watcher's reading period, at its longest",
            Term::Woken => "1 s: a successor that answered its wake-up tries at once",
            Term::FirstHop => {
                "a poll + 0.3 s: the first member handed the lease, not woken, finds it at its poll"
            }
            Term::LaterHop => {
                "a watch + a poll + 0.3 s: a member the lease is handed on to, not woken, reads the notice naming it at its watch"
            }
            Term::Backoff => {
                "max(`acquire_interval`, 10 s): the longest pause of a campaign after storage failed"
            }
            Term::RecordLease => "30 s: a crashed member's record looks alive that long at most",
            Term::ListAfterChange => {
                "0.5 s: a watcher that read a new leader lists that much later, once a stopping leader's record is surely deleted"
            }
            Term::Requests => {
                "the requests on the way (acquire, epoch write, a listing) and the body's start"
            }
        }
    }
}

/// How long a case may leave a group short of a leader: a sum of terms, and for a handover a
/// cost per member passed over on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The sum.
    pub terms: &'static [Term],
    /// With slots (`[lease].slots` > 1): these more.
    pub with_slots: &'static [Term],
    /// A handover's cost per member passed over: `refused` when its wake-up was refused (no
    /// process, or another, at its URL) or its record is gone (rule (g)), `silent` otherwise.
    pub per_passed_over: Option<(Term, Term)>,
}

impl Bound {
    /// The bound for `timing` and `slots`, with `refused` members passed over because their
    /// wake-up was refused or their record gone and `silent` members passed over otherwise.
    pub fn value(&self, timing: &Timing, slots: u32, refused: u32, silent: u32) -> Duration {
        let sum = |terms: &[Term]| terms.iter().map(|t| t.value(timing)).sum::<Duration>();
        let mut total = sum(self.terms);
        if slots > 1 {
            total += sum(self.with_slots);
        }
        if let Some((r, s)) = self.per_passed_over {
            total += r.value(timing) * refused + s.value(timing) * silent;
        }
        total
    }

    /// The formula, for people: `G + C_woken + 1 s`.
    pub fn formula(&self) -> String {
        let mut out = self
            .terms
            .iter()
            .map(|t| t.name())
            .collect::<Vec<_>>()
            .join(" + ");
        if !self.with_slots.is_empty() {
            let extra: Vec<&str> = self.with_slots.iter().map(|t| t.name()).collect();
            out += &format!(" (with slots: + {})", extra.join(" + "));
        }
        if let Some((r, s)) = self.per_passed_over {
            out += &format!(
                ", + per member passed over: {} if its wake-up is refused or its record gone, {} otherwise",
                r.name(),
                s.name()
            );
        }
        out
    }
}

/// A case: what starts it, and the rule of the checker that holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Case {
    /// SIGTERM to the leader; the successor answers its wake-up.
    GracefulWoken,
    /// SIGTERM to the leader; the successor polls.
    GracefulPolled,
    /// The body ended by itself (`on_exit = "release"` or `"exit"`).
    Voluntary,
    /// The body was told to stop for a preferred member, failed its health checks, or failed
    /// at once (a crash loop).
    StepDown,
    /// A handover with dead members ahead of the first live one in line.
    DeadSuccessor,
    /// A handover whose successor joined after the leader's last listing.
    JoinedDuringHandoff,
    /// The leader was killed; its successor polls.
    Crash,
    /// The leader was killed, with a dead member first in line.
    CrashBehindGhost,
    /// A slot holder was killed (`[lease].slots` > 1).
    SlotHolderCrash,
    /// A slot holder was killed, with a dead member without a URL waiting ahead.
    SlotHolderCrashBehindGhost,
    /// The lease blob (or a slot blob) was deleted.
    Deleted,
    /// A member joined a group with a free slot, or came back from a cooldown.
    Join,
    /// A member restarted within a record lease of its crash, its old record held still.
    Rejoin,
    /// A fault ended: an outage, a member cut off or frozen, lost or slow answers, garbage.
    FaultEnd,
    /// Member records were deleted.
    RecordsDeleted,
    /// Rule (f): after a change of leader, the member first in line after the new one polls.
    NextPolls,
    /// Rule (g): a lease handed to a member whose wake-up was refused or whose record is gone
    /// moves on.
    HandOnToGone,
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct Row {
    /// The case.
    pub case: Case,
    /// The rule of the checker that holds it: `d` for the per-case bounds, `f`, `g`.
    pub rule: char,
    /// What happened, for people.
    pub what: &'static str,
    /// The cause the episode begins with, in the world (never what the elector reports).
    pub cause: &'static str,
    /// The bound; `None`: no bound of its own (rule (d) holds).
    pub bound: Option<Bound>,
    /// What the bound assumes; a case whose assumptions do not hold is another row.
    pub assumes: &'static str,
}

const fn bound(terms: &'static [Term]) -> Option<Bound> {
    Some(Bound {
        terms,
        with_slots: &[],
        per_passed_over: None,
    })
}

use Term::*;

/// The table, in the order docs/safety.md shows it.
pub const TABLE: [Row; 17] = [
    Row {
        case: Case::GracefulWoken,
        rule: 'd',
        what: "graceful handover, the successor advertises",
        cause: "SIGTERM to the leader",
        bound: bound(&[Stop, Woken, Requests]),
        assumes: "the successor is alive, answers its wake-up, and was in line at the leader's last listing; nobody dead ahead of it",
    },
    Row {
        case: Case::GracefulPolled,
        rule: 'd',
        what: "graceful handover, no advertise",
        cause: "SIGTERM to the leader",
        bound: bound(&[Stop, FirstHop, Requests]),
        assumes: "the successor is alive, polls, and was in line at the leader's last listing; nobody dead ahead of it",
    },
    Row {
        case: Case::Voluntary,
        rule: 'd',
        what: "the body ends by itself",
        cause: "the body's own end (`on_exit = \"release\"` or `\"exit\"`)",
        bound: bound(&[FirstHop, Requests]),
        assumes: "as for a graceful handover",
    },
    Row {
        case: Case::StepDown,
        rule: 'd',
        what: "a preemption, a health step-down, or a crash-looping child's failure",
        cause: "the body's stop signal for a preferred member, its failed health check, or its quick failure (the member stands by for its backoff)",
        bound: bound(&[Stop, FirstHop, FirstHop, Requests]),
        assumes: "as for a graceful handover; a preemption hands the lease to the preferred member, which need not be the one that polls (a first hop more)",
    },
    Row {
        case: Case::DeadSuccessor,
        rule: 'd',
        what: "a handover with dead members ahead in line (crashed within a record lease)",
        cause: "as the handover's",
        bound: Some(Bound {
            terms: &[Stop, LaterHop, Requests],
            with_slots: &[],
            per_passed_over: Some((FirstHop, LaterHop)),
        }),
        assumes: "a live member behind them",
    },
    Row {
        case: Case::JoinedDuringHandoff,
        rule: 'd',
        what: "a handover to a member that joined after the leader's last listing",
        cause: "as the handover's",
        bound: bound(&[Stop, FirstHop, LaterHop, Requests]),
        assumes: "the member that joined is alive; the leader lists once before it releases",
    },
    Row {
        case: Case::Crash,
        rule: 'd',
        what: "the leader crashes",
        cause: "SIGKILL of the leader",
        bound: bound(&[Lease, Poll, Requests]),
        assumes: "the member first in line is alive and polls",
    },
    Row {
        case: Case::CrashBehindGhost,
        rule: 'd',
        what: "the leader crashes with a dead member first in line",
        cause: "SIGKILL of the leader",
        bound: bound(&[Lease, Watch, Poll, Poll, Requests]),
        assumes: "a live member in line: it reads the free lease at its watch, and takes it a poll later",
    },
    Row {
        case: Case::SlotHolderCrash,
        rule: 'd',
        what: "a slot holder crashes (`[lease].slots` > 1)",
        cause: "SIGKILL of the holder",
        bound: bound(&[Lease, Poll, Requests]),
        assumes: "a live member waits for a slot; dead members waiting ahead of it have a URL (each found so within a watch, by a probe of it), at most as many as watches fit in `L`",
    },
    Row {
        case: Case::SlotHolderCrashBehindGhost,
        rule: 'd',
        what: "a slot holder crashes with a dead member without a URL waiting ahead (or a member joins, or comes back from a cooldown, behind one)",
        cause: "SIGKILL of the holder (its start, its cooldown's end)",
        bound: bound(&[RecordLease, Watch, Poll, Requests]),
        assumes: "the dead member's record runs out within a record lease; the member behind it reads that at its watch, and polls",
    },
    Row {
        case: Case::Deleted,
        rule: 'd',
        what: "the lease blob (or a slot blob) is deleted",
        cause: "the deletion",
        bound: Some(Bound {
            terms: &[Watch, Lease, Margin, Poll, Requests],
            with_slots: &[Watch, Lease, Margin],
            per_passed_over: None,
        }),
        assumes: "a member finds the blob missing within a watch (the leader at its renew, `R`, a poller at its poll, a watcher at its read; with no member up, the first to start, at its start: the bound counts from then); the lock-delay `L + M` runs from then; with slots, a member that waits out another slot's delay (or holds a slot) sees a deletion at its look, every watch, or once that delay is over: one lock-delay more",
    },
    Row {
        case: Case::Join,
        rule: 'd',
        what: "a member joins a group with a free slot, or comes back from a cooldown (a health step-down's, a crash-loop backoff)",
        cause: "its start, or its cooldown's end",
        bound: Some(Bound {
            terms: &[Poll, Requests],
            with_slots: &[Poll],
            per_passed_over: None,
        }),
        assumes: "no lease held by a member gone, no lock-delay running",
    },
    Row {
        case: Case::Rejoin,
        rule: 'd',
        what: "a member restarts within a record lease of its crash, and finds its old record held still",
        cause: "its start",
        bound: Some(Bound {
            terms: &[Watch, Poll, Poll, Requests],
            with_slots: &[RecordLease],
            per_passed_over: None,
        }),
        assumes: "it is out of line until that record runs out, and watches the lease blob: a lease free for a poll it takes; with slots it waits for a slot until its old record runs out",
    },
    Row {
        case: Case::FaultEnd,
        rule: 'd',
        what: "the end of a fault: a storage outage, a member cut off, frozen, or losing or slow answers, garbage metadata",
        cause: "the fault's end",
        bound: Some(Bound {
            terms: &[Backoff, Renew, Lease, Margin, Poll, Requests],
            with_slots: &[RecordLease, Watch, Requests],
            per_passed_over: None,
        }),
        assumes: "a member able to lead: the longest backoff, a lease left by a member that can no longer lead running out, the next poll",
    },
    Row {
        case: Case::RecordsDeleted,
        rule: 'd',
        what: "member records are deleted",
        cause: "the deletion",
        bound: None,
        assumes: "",
    },
    Row {
        case: Case::NextPolls,
        rule: 'f',
        what: "after a change of leader, the live member first in line after the new one sends a lease request",
        cause: "the new leader's start",
        bound: bound(&[Watch, ListAfterChange, Poll, Requests]),
        assumes: "one slot; nobody dead ahead of that member",
    },
    Row {
        case: Case::HandOnToGone,
        rule: 'g',
        what: "a lease handed to a member whose wake-up is refused (401) or unanswered (connection refused or reset), or whose record is gone, moves on",
        cause: "the `change` to that member",
        bound: bound(&[FirstHop, Requests]),
        assumes: "whatever the hop: refused or gone, at the first read; unanswered, after a first hop's window (a live member whose URL is wrong polls within it); a URL that swallows traffic is a timeout (the hop's own window)",
    },
];

/// The row of `case`.
pub fn row(case: Case) -> &'static Row {
    TABLE
        .iter()
        .find(|r| r.case == case)
        .expect("every case has its row")
}

/// A duration as the table shows it: `7.5 s`.
fn seconds(d: Duration) -> String {
    let s = format!("{:.1}", d.as_secs_f64());
    format!("{} s", s.trim_end_matches(".0"))
}

/// The table as docs/safety.md shows it, for `timing` (the defaults there).
pub fn markdown(timing: &Timing) -> String {
    let mut out = String::from(
        "| case | begins with | bound | with the defaults | assumes |\n|---|---|---|---|---|\n",
    );
    for r in &TABLE {
        let (formula, value) = match r.bound {
            None => ("no bound of its own; rule (d)".to_owned(), "-".to_owned()),
            Some(b) => {
                let value = match (b.with_slots.is_empty(), b.per_passed_over) {
                    (true, None) => seconds(b.value(timing, 1, 0, 0)),
                    (false, _) => format!(
                        "{}; with slots {}",
                        seconds(b.value(timing, 1, 0, 0)),
                        seconds(b.value(timing, 2, 0, 0))
                    ),
                    (true, Some(_)) => format!(
                        "{}; one member passed over: {} or {}",
                        seconds(b.value(timing, 1, 0, 0)),
                        seconds(b.value(timing, 1, 1, 0)),
                        seconds(b.value(timing, 1, 0, 1))
                    ),
                };
                (b.formula(), value)
            }
        };
        let what = match r.rule {
            'd' => r.what.to_owned(),
            rule => format!("({rule}) {}", r.what),
        };
        out += &format!(
            "| {what} | {} | {formula} | {value} | {} |\n",
            r.cause,
            if r.assumes.is_empty() { "-" } else { r.assumes }
        );
    }
    out += "\n| term | what it is | default |\n|---|---|---|\n";
    for t in Term::ALL {
        out += &format!(
            "| {} | {} | {} |\n",
            t.name(),
            t.meaning(),
            seconds(t.value(timing))
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEGIN: &str = "<!-- cases: generated from src/cases.rs; LEASEHOLD_UPDATE_DOCS=1 cargo test --lib cases rewrites it -->\n";
    const END: &str = "<!-- cases: end -->";

    const PACE_BEGIN: &str = "<!-- pace: generated from leasehold-core/src/pace.rs; LEASEHOLD_UPDATE_DOCS=1 cargo test --lib cases rewrites it -->\n";
    const PACE_END: &str = "<!-- pace: end -->";

    /// `doc` with what stands between `begin` and `end` replaced by `table`.
    fn with_table(doc: &str, begin: &str, end: &str, table: &str) -> String {
        let (before, rest) = doc
            .split_once(begin)
            .unwrap_or_else(|| panic!("docs/safety.md has the marker {begin}"));
        let (_, after) = rest.split_once(end).expect("and its end marker");
        format!("{before}{begin}{table}{end}{after}")
    }

    /// docs/safety.md shows the table the checker holds histories to, and the core's timing
    /// table, with the defaults (one test: both rewrite the same file).
    #[test]
    fn docs_safety_shows_the_tables_the_code_holds() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/safety.md");
        let doc = std::fs::read_to_string(path).expect("docs/safety.md");
        let timing = Timing::default();
        let expected = with_table(&doc, BEGIN, END, &markdown(&timing));
        let pace = leasehold_core::Pace::new(&timing).markdown();
        let expected = with_table(&expected, PACE_BEGIN, PACE_END, &pace);
        if std::env::var_os("LEASEHOLD_UPDATE_DOCS").is_some() {
            std::fs::write(path, &expected).expect("docs/safety.md written");
            return;
        }
        assert!(
            doc == expected,
            "docs/safety.md's table of cases or timing table is not the code's: run \
             LEASEHOLD_UPDATE_DOCS=1 cargo test --lib cases"
        );
    }

    /// The defaults' figures the docs name elsewhere.
    #[test]
    fn the_bounds_with_the_defaults() {
        let t = Timing::default();
        let b = |case| row(case).bound.unwrap().value(&t, 1, 0, 0);
        assert_eq!(b(Case::Crash), Duration::from_millis(17_200));
        assert_eq!(b(Case::SlotHolderCrash), Duration::from_millis(17_200));
        assert_eq!(b(Case::HandOnToGone), Duration::from_millis(2_500));
        assert_eq!(b(Case::FaultEnd), Duration::from_millis(32_200));
        assert_eq!(
            row(Case::FaultEnd).bound.unwrap().value(&t, 3, 0, 0),
            Duration::from_millis(69_200),
            "rule (d)'s bounds, as before"
        );
        assert!(row(Case::RecordsDeleted).bound.is_none());
    }
}
