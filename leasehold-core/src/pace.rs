//! The one timing table: every duration the protocol uses, a row each, with what it bounds and
//! why it is what it is. The user's five settings ([`Timing`]: `L`, `R`, the polling interval,
//! `M`, `G`) are the table's inputs; a row is either fixed (a constant of the protocol) or
//! derived from them. docs/safety.md shows the table for the default timings (a test renders
//! it and compares), and the table of cases and bounds (`leasehold::cases`) is a sum of its rows.
//!
//! The core has no randomness of its own: a row that is stretched at random ([`Pace::jittered`])
//! takes the shell's draw.

use crate::timing::{POLL_JITTER, Timing};
use std::time::Duration;

/// How many watch periods of the polling interval make one watch period: a member that is not
/// next in line reads the lease blob this much less often than the one that is.
pub const WATCH_PERIODS: u32 = 5;

/// The durations of one group, from its [`Timing`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pace {
    timing: Timing,
}

/// One row of the table, as docs/safety.md shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The row's name in the code.
    pub name: &'static str,
    /// Its value for the timing the table was made from.
    pub value: Duration,
    /// What it bounds.
    pub what: String,
    /// Why it is what it is.
    pub why: &'static str,
    /// Whether it is derived from the user's settings (else a constant of the protocol).
    pub derived: bool,
}

/// Writes the table: each fixed row an associated constant, each derived row a method, and
/// [`Pace::rows`] listing them all with their doc text, so that the code and the docs' table
/// cannot part.
macro_rules! table {
    (
        fixed { $( $(#[doc = $what:literal])+ why $why:literal; $name:ident = $value:expr; )* }
        derived {
            $( $(#[doc = $dwhat:literal])+ why $dwhy:literal; $dname:ident($t:ident) = $dvalue:expr; )*
        }
    ) => {
        impl Pace {
            $( $(#[doc = $what])+ pub const $name: Duration = $value; )*
            $(
                $(#[doc = $dwhat])+
                pub fn $dname(&self) -> Duration {
                    let $t = &self.timing;
                    $dvalue
                }
            )*

            /// Every row, fixed rows first, with its value for this group's timing.
            pub fn rows(&self) -> Vec<Row> {
                vec![
                    $( Row {
                        name: stringify!($name),
                        value: Self::$name,
                        what: prose(&[$($what),+]),
                        why: $why,
                        derived: false,
                    }, )*
                    $( Row {
                        name: stringify!($dname),
                        value: self.$dname(),
                        what: prose(&[$($dwhat),+]),
                        why: $dwhy,
                        derived: true,
                    }, )*
                ]
            }
        }
    };
}

/// Doc lines as one paragraph.
fn prose(lines: &[&str]) -> String {
    lines.iter().map(|l| l.trim()).collect::<Vec<_>>().join(" ")
}

impl Pace {
    /// The table of `timing`.
    pub fn new(timing: &Timing) -> Self {
        Self { timing: *timing }
    }

    /// The timing it was made from.
    pub fn timing(&self) -> &Timing {
        &self.timing
    }

    /// `period`, stretched by up to [`POLL_JITTER`] by `draw` (uniform in `[0, 1)`, the shell's).
    pub fn jittered(period: Duration, draw: f64) -> Duration {
        period.mul_f64(1.0 + POLL_JITTER * draw)
    }

    /// The polling period for `draw`: `acquire_interval` stretched at random.
    pub fn poll(&self, draw: f64) -> Duration {
        Self::jittered(self.timing.acquire_interval, draw)
    }

    /// The longest watch period of `t`: `5 x acquire_interval` stretched by the whole jitter.
    fn watch_longest_of(t: &Timing) -> Duration {
        Self::jittered(t.acquire_interval * WATCH_PERIODS, 1.0)
    }

    /// The watch period for `draw`: `5 x acquire_interval` stretched at random.
    pub fn watch(&self, draw: f64) -> Duration {
        Self::jittered(self.timing.acquire_interval * WATCH_PERIODS, draw)
    }
}

table! {
    fixed {
        /// The first pause after a renew that storage failed (then doubling).
        why "short, so that a transient failure costs little of the time left before the stop deadline";
        RENEW_RETRY_LEAST = Duration::from_millis(200);

        /// The longest pause between two renew attempts.
        why "a failing renew is tried at least once a second until the stop deadline, which the timing rule puts at least `R` past the last success";
        RENEW_RETRY_LONGEST = Duration::from_secs(1);

        /// The lease on a member record: how long a crashed member still looks alive, at most.
        why "two renews of the record may fail in a row without the member looking dead";
        RECORD_LEASE = Duration::from_secs(30);

        /// How often a member renews its record lease.
        why "three times per record lease";
        RECORD_RENEW = Duration::from_secs(10);

        /// After a failed record request, the next one comes this soon.
        why "well inside the record lease: a member that failed once still renews in time";
        RECORD_RETRY = Duration::from_secs(2);

        /// How often every member lists the line anyway (stretched at random), to learn of joins and deaths it had no other sign of.
        why "a List Blobs per member every five minutes costs nothing; the line's own signs (reads of the lease blob, wake-ups) come sooner";
        LIST_EVERY = Duration::from_secs(300);

        /// How often the leader lists the line (stretched at random).
        why "the leader must learn of a member that outranks it (`preempt_after`, 30 s by default), and its view is the one `status` shows";
        LEADER_LIST_EVERY = Duration::from_secs(30);

        /// A new leader's first listing waits this long after its term begins.
        why "the listing is not on the handover's path; on storage that serves one request at a time it would compete with the body's start";
        TERM_START_QUIET = Duration::from_millis(200);

        /// How long a member that was handed the lease and did not take it is passed over.
        why "longer than a crashed member's record looks alive, and as long as the rare listing: a forged record is tried again after this";
        PASSED_OVER_FOR = Duration::from_secs(300);

        /// A leader deletes the record of a member dead for longer than this.
        why "twice the rare listing: every member has listed the line since the death";
        DEAD_RECORD_AGE = Duration::from_secs(600);

        /// How long after a read that shows a new leader a member that moved up lists the line.
        why "a leader that stopped deletes its record in its confirmation's first read; a listing sooner could still show it alive ahead in line";
        LIST_AFTER_A_CHANGE = Duration::from_millis(500);

        /// How often an instance whose `[lease].slots` differs from its group's looks again.
        why "a misconfigured member waits for an operator; once a minute is enough to notice the fix";
        MISMATCH_RECHECK = Duration::from_secs(60);

        /// How often the leader lists while a member of higher priority should be marking its record.
        why "a preemption waits for the member's mark: four looks a second keep it short";
        PROBE = Duration::from_millis(250);

        /// How long past the earliest moment a member could mark its record the leader keeps probing.
        why "the service's clock counts whole seconds either way, and the member's own write takes time";
        PROBE_FOR = Duration::from_secs(4);

        /// How often a leader that borrows its listings looks whether the line was listed again (a look at memory, no request).
        why "the listing it borrows comes every few seconds at most";
        BORROWED_LISTING_LOOK = Duration::from_secs(1);

        /// With one slot, a stopping leader's record is deleted this long into the body's stop, if the lease is still held then (else once the body is gone).
        why "a body that stops at once would find the deletion in flight and the lease change queued behind it";
        DEPART_AFTER = Duration::from_millis(20);

        /// The acquire and epoch write of a successor, in each confirm window.
        why "two requests' round trips, with room for a slow one";
        CONFIRM_REQUESTS = Duration::from_millis(300);

        /// The confirm window of a successor that answered its wake-up.
        why "it acquires at once: its requests and its lease change";
        CONFIRM_WOKEN = Duration::from_secs(1);

        /// The first pause between two reads of the blob while a handoff is confirmed (then doubling).
        why "most successors write their epoch within a few ms of the wake-up";
        CONFIRM_READ_LEAST = Duration::from_millis(20);

        /// The longest pause between two reads of the blob while a handoff is confirmed.
        why "a late successor is seen within this of its epoch write";
        CONFIRM_READ_LONGEST = Duration::from_millis(400);

        /// After a wake-up the elector acted on, the next one it acts on comes no sooner than this.
        why "a flood of wake-ups costs at most one acquire a second";
        WAKE_INTERVAL = Duration::from_secs(1);

        /// How long the old leader waits for the member it woke to answer.
        why "a live member answers within milliseconds; waiting longer would delay the handover more than the wake-up saves";
        WAKE_SEND_TIMEOUT = Duration::from_millis(500);

        /// The first pause between two attempts to prepare the group's blobs at start-up (then doubling).
        why "storage not ready at start (a container still being made) is retried soon";
        PREPARE_RETRY_LEAST = Duration::from_secs(1);

        /// The longest pause between two attempts to prepare the group's blobs.
        why "a start-up against storage that is down tries again every few seconds, not faster";
        PREPARE_RETRY_LONGEST = Duration::from_secs(10);

        /// The least time one request preparing the group's blobs may take.
        why "creating a container is slower than a lease request";
        PREPARE_REQUEST_LEAST = Duration::from_secs(5);

        /// The resolution of the service's clock (a blob's creation time is whole seconds).
        why "an age read from the service is up to this much older than it says";
        SERVICE_CLOCK = Duration::from_secs(1);

        /// The longest pause of a campaign after storage failed, unless the polling interval is longer.
        why "a member back from an outage tries again within this";
        ERROR_BACKOFF_LONGEST = Duration::from_secs(10);

        /// The first pause of a member that yields a split vote of a lease held on several storage accounts (then doubling, each pause a random half to whole).
        why "the member that retries needs a round trip to the replicas the others released (another region: up to 150 ms) before they try again";
        SPLIT_PAUSE_LEAST = Duration::from_millis(200);
    }
    derived {
        /// How long one storage request may take before it counts as failed: `R`.
        why "a renew that takes longer is retried on a fresh request; every request is also cut at the stop deadline";
        request_timeout(t) = t.renew_interval;

        /// A renew that took longer than this is logged as slow: `R / 4`.
        why "a slow renew still keeps the lease, but warns before the stop deadline is near";
        slow_renew(t) = t.renew_interval / 4;

        /// The longest polling period: `acquire_interval` stretched by the whole jitter.
        why "followers started together do not poll in step";
        poll_longest(t) = t.longest_poll();

        /// The longest watch period: `5 x acquire_interval` stretched by the whole jitter.
        why "a member not next in line reads the blob less often";
        watch_longest(t) = Self::watch_longest_of(t);

        /// How long a member that gave the lease up by choice waits before competing again: the longest poll.
        why "every follower polls at least once meanwhile";
        yield_for(t) = t.longest_poll();

        /// The longest pause of a campaign after storage failed: `max(acquire_interval, 10 s)`.
        why "doubling from the polling interval, as long as a poll at least";
        error_backoff_longest(t) = t.acquire_interval.max(Self::ERROR_BACKOFF_LONGEST);

        /// The confirm window of the first hop without a wake-up: the longest poll and the requests.
        why "the member first in line polls, so it finds the handoff within a poll";
        confirm_first_hop(t) = t.longest_poll() + Self::CONFIRM_REQUESTS;

        /// The confirm window of a later hop without a wake-up: a watch, a poll and the requests.
        why "a member handed the lease after another did not take it only watches the blob";
        confirm_later_hop(t) =
            Self::watch_longest_of(t) + t.longest_poll() + Self::CONFIRM_REQUESTS;

        /// How long a request preparing the group's blobs may take: `max(R, 5 s)`.
        why "as a lease request, but never shorter than the container's creation needs";
        prepare_request(t) = t.renew_interval.max(Self::PREPARE_REQUEST_LEAST);

        /// The lock-delay after a blob is found deleted: `L + M`.
        why "a body on the deleted blob lives at most `L - M` after the deletion";
        lock_delay(t) = t.duration + t.safety_margin;

        /// The longest pause of a member that yields split votes round after round: the longest poll, at least the first pause.
        why "a member that keeps yielding still tries again as often as a follower polls";
        split_pause_longest(t) = t.longest_poll().max(Self::SPLIT_PAUSE_LEAST);
    }
}

impl Pace {
    /// The table as docs/safety.md shows it, with this group's values.
    pub fn markdown(&self) -> String {
        let mut out = String::from("| row | value | what it bounds | why |\n|---|---|---|---|\n");
        for row in self.rows() {
            let value = format!("{:?}", row.value);
            let name = match row.derived {
                true => format!("`{}()`", row.name),
                false => format!("`{}`", row.name),
            };
            out += &format!("| {name} | {value} | {} | {} |\n", row.what, row.why);
        }
        out
    }

    /// How long a holder that handed its lease over waits for the successor's epoch before it
    /// hands the lease on (docs/succession.md), by how the successor learns of it: a member
    /// that answered its wake-up tries at once ([`Pace::CONFIRM_WOKEN`]); the member first in
    /// line polls, so it finds the handoff within a polling period (the first hop's); a member
    /// the lease is handed on to after another did not take it only watches the blob, and
    /// reads the notice naming it within a watch period (a later hop's). Each then needs its
    /// acquire and its epoch write.
    pub fn confirm_window(&self, woken: bool, first: bool) -> Duration {
        match (woken, first) {
            (true, _) => Self::CONFIRM_WOKEN,
            (false, true) => self.confirm_first_hop(),
            (false, false) => self.confirm_later_hop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_its_reason_and_a_name_of_its_own() {
        let rows = Pace::new(&Timing::default()).rows();
        assert!(rows.len() > 30, "{}", rows.len());
        let mut names: Vec<_> = rows.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), rows.len());
        for row in &rows {
            assert!(!row.what.is_empty() && !row.why.is_empty(), "{row:?}");
        }
    }

    #[test]
    fn derived_rows_follow_the_timing() {
        let t = Timing::default();
        let p = Pace::new(&t);
        assert_eq!(p.poll_longest(), Duration::from_millis(1200));
        assert_eq!(p.watch_longest(), Duration::from_secs(6));
        assert_eq!(p.confirm_window(true, true), Duration::from_secs(1));
        assert_eq!(p.confirm_window(false, true), Duration::from_millis(1500));
        assert_eq!(p.confirm_window(false, false), Duration::from_millis(7500));
        assert_eq!(p.error_backoff_longest(), Duration::from_secs(10));
        assert_eq!(p.lock_delay(), Duration::from_secs(16));
        assert_eq!(p.split_pause_longest(), Duration::from_millis(1200));
        assert_eq!(p.poll(0.5), Duration::from_millis(1100));
    }
}
