//! What the checker holds a history to ([`Rules`]) and what it reports ([`Violation`]).
//!
//! A member is **paused** while a freeze reaches past its guard: a pause of its whole machine
//! (a paused VM, `docker pause`: daemon, guard and child together), or any freeze of a member
//! without a guard (the library's, whose body is a task of its own process). A daemon frozen
//! alone (SIGSTOP, Ctrl-Z, a debugger) is not paused: its child's guard runs on and holds the
//! child to the deadlines the daemon told it (docs/safety.md, "The guard").
//!
//! * **(a)** Never two bodies of one slot alive at once, except where the earlier one's member
//!   was paused within a lease duration before the later one started (nothing on a paused
//!   machine can stop its child in time), or a member that never saw its group led created
//!   the slot's missing blob plainly in between while no record but its own was leased, and
//!   the later body's member never saw any blob of its group led since (nothing in storage
//!   tells that group from a brand-new one, which leads at once: docs/safety.md); then the
//!   later one has the larger epoch.
//! * **(b)** No body alive past its kill deadline `t_s + L - M`, where `t_s` is when its
//!   member sent the last acquire or renew of that body's lease whose success it heard, unless
//!   its member was paused meanwhile. A daemon frozen alone is held to it: its guard kills the
//!   body by that deadline.
//! * **(c)** A body starts only with an epoch its blob records already, written under its own
//!   lease (rule 6), and epochs grow per slot in the order bodies start, across blob deletions.
//! * **(d)** Liveness: in a stretch of time without faults, whenever fewer bodies run than there
//!   are members able to lead (up, not frozen, not standing by after a health step-down or a
//!   crash-loop failure, not stopping; at most one per slot), that lasts at most the liveness
//!   bound; and each such stretch is held to the bound of the case that began it (the table of
//!   src/cases.rs, docs/safety.md), from its cause.
//! * **(e)** A term handed to a member that was already gone (crashed, stopped, or never a
//!   process at all) is, within the handoff bound, taken over by some member or handed on (or
//!   its lease runs out meanwhile: then it is a free lease, and (d) holds).
//! * **(f)** After a change of leader, the live member first in line after the new one sends a
//!   lease request within a watch period, the listing's delay and a poll.
//! * **(g)** A lease handed to a member whose wake-up was refused (another process at its URL)
//!   or unanswered (nothing listens there), or whose record is gone, moves on within a first
//!   hop's confirm window and the requests on the way, whatever the hop; on a replica set the
//!   requests of the hop's end each cross a region, a round trip each ([`HOP_END_TRIPS`]). The
//!   case begins with the `change` (docs/safety.md): a fault from its send on meets it, though
//!   the window counts from its answer.
//! * **(h)** After a member's body failed at once (it ended by itself, a non-zero exit, within
//!   the crash window of its start), that member's next body starts no sooner than the backoff
//!   the crash-loop figures give for that failure's place in its run of quick failures
//!   (`first`, doubling, at most `max`: 1, 2, 4 ... 60 s by default); a body that ran the
//!   window starts the count again, and so does a restart of the member's process. A lone
//!   member whose children keep failing starts at most 7 in 60 s.
//! * **(i)** A stop spends nothing: a member asked to stop while it ran no body starts none and
//!   sends no epoch write after the stop (a stop that comes while it is frozen reaches it at
//!   its thaw).
//! * **(j)** Virtual time moves on: no instant of a history takes more than
//!   [`STANDSTILL`] events (a machine woken again and again at an instant it does not move
//!   past spins there for ever; the engine ends the history at that instant instead).
//!
//! A body that survives its kill (stuck in the kernel) is beyond anyone's reach from then on:
//! (b) holds it to its kill deadline only up to that instant. What the elector owes instead
//! (rule 7, docs/safety.md "Recovery from anything"): its member neither hands that lease on
//! nor releases it, nor starts another body, while it lives, and another member's body of its
//! slot starts only once its lease has surely expired (a lease duration after the last renew
//! its member heard of); (a) holds those. For (d) the member stands by meanwhile.
//!
//! Every instant is virtual time, exact: a timer fires within a millisecond of its instant
//! (tokio's timer granularity), which is all the slack (b) allows.

use crate::crash_loop::CrashBackoff;
use crate::timing::Timing;
use std::fmt;
use std::time::Duration;

/// What the checker holds a history to.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// The group's timings: `L`, `R`, `M`, `G`, `acquire_interval`.
    pub timing: Timing,
    /// `[lease].slots`.
    pub slots: u32,
    /// (d): the longest a quiet group may run short of leaders.
    pub liveness: Duration,
    /// (e): the longest a group may run short of a leader after a handoff to a member gone.
    pub handoff: Duration,
    /// When the history ended.
    pub end: Duration,
    /// (h): `[child].crash_backoff`, `crash_backoff_max` and `crash_window` (the defaults).
    pub crash_backoff: CrashBackoff,
    /// The storage accounts the group leads on: 1, or a replica set of 3 or 5, where a body's
    /// lease is a majority of leases (docs/quorum.md): (b) holds it to the k-th latest of its
    /// replicas' deadlines, (c) to its epoch recorded on a majority.
    pub replicas: usize,
}

impl Rules {
    /// `L`.
    pub fn lease(&self) -> Duration {
        self.timing.duration
    }

    /// `M`.
    pub fn margin(&self) -> Duration {
        self.timing.safety_margin
    }

    /// How many of the replicas a body's lease needs: a majority (1 on one account).
    pub fn majority(&self) -> usize {
        self.replicas.max(1) / 2 + 1
    }

    /// What `trips` requests in turn cost on a replica set beyond one account's: each a
    /// region's round trip at its longest (`REGION_TRIP`); nothing on one account.
    pub fn set_trips(&self, trips: u32) -> Duration {
        match self.replicas > 1 {
            true => REGION_TRIP * trips,
            false => Duration::ZERO,
        }
    }
}

/// The slack (b) allows past a kill deadline: tokio's timers fire on whole milliseconds.
pub const TIMER_SLACK: Duration = Duration::from_millis(2);

/// On a replica set, the longest round trip to a replica's region the simulator plays: 150 ms
/// each way, each jittered by up to a fifth (src/sim/sync/replicas.rs, docs/quorum.md "What
/// the simulator plays"). A set's requests each cross it; one account's are the member's link
/// alone.
pub const REGION_TRIP: Duration =
    Duration::from_millis(2 * (REGION_LATENCY_MS + REGION_LATENCY_MS / 5));

/// The longest one-way latency of a replica's region, before its jitter, in milliseconds.
pub const REGION_LATENCY_MS: u64 = 150;

/// (g) on a replica set: the requests a hop's end takes in turn on the first replica, each a
/// region's round trip that one account's `1 s` of requests does not count: the window's last
/// read (the successor's record, then the blob), a listing, the notice and the `change`.
pub const HOP_END_TRIPS: u32 = 5;

/// (j): the most events one instant of a history may take. A history takes about 4,000 events
/// in all; an instant with this many is a machine spinning.
pub const STANDSTILL: u64 = 100_000;

/// A broken rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// `a` to `j`.
    pub rule: char,
    /// When it was seen broken.
    pub at: Duration,
    /// What broke it, for people.
    pub what: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "({}) at {}: {}",
            self.rule,
            crate::sim::trace::at(self.at),
            self.what
        )
    }
}
