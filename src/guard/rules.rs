//! The guard's rules, without I/O: what the latest order of the daemon and the clock call for
//! (the process that carries them out is `process`; the simulator drives the same rules).

use crate::mutant::{Mutant, Switch};

/// What the daemon tells its guard: two instants of CLOCK_BOOTTIME, in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Order {
    /// The group must be dead by then.
    pub kill_at: u64,
    /// When the daemon began the stop (it sends the stop signal itself); 0 while it has not.
    pub stop_begun: u64,
}

/// The guard's rules, without I/O: what the latest order and the clock call for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Deadlines {
    /// `G`: the stop signal goes out this long before the kill deadline.
    grace: u64,
    /// The kill deadline (CLOCK_BOOTTIME ns).
    kill_at: u64,
    /// The stop has begun (the guard's own, or the daemon's as its order said).
    stopping: bool,
    /// SIGKILL went out: nothing is left to do but wait for the end.
    killed: bool,
    /// The rule broken on purpose (the simulator's; none otherwise).
    mutant: Switch,
}

/// What a look at the clock calls for ([`Deadlines::due`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Due {
    /// The stop deadline has come and nobody had begun the stop: take the token, and if it
    /// was still there, send the stop signal.
    pub stop: bool,
    /// The kill deadline has come: SIGKILL the group.
    pub kill: bool,
}

impl Deadlines {
    pub fn new(grace: u64, kill_at: u64) -> Self {
        Self {
            grace,
            kill_at,
            stopping: false,
            killed: false,
            mutant: Switch::default(),
        }
    }

    /// Breaks the rule `mutant` names (the simulator's proof that its checker catches it).
    #[cfg(any(test, feature = "test-util"))]
    pub fn with_mutant(mut self, mutant: Switch) -> Self {
        self.mutant = mutant;
        self
    }

    /// The daemon's latest order. While running, its deadline replaces the last one (a renew
    /// moves it later); once the stop has begun, only an earlier one counts.
    pub fn order(&mut self, order: Order) {
        self.kill_at = match self.stopping {
            true => self.kill_at.min(order.kill_at),
            false => order.kill_at,
        };
        self.stopping |= order.stop_begun != 0;
    }

    /// What is due at `now`.
    pub fn due(&mut self, now: u64) -> Due {
        if self.mutant.on(Mutant::GuardSleeps) {
            return Due {
                stop: false,
                kill: false,
            };
        }
        let stop = !self.stopping && now >= self.kill_at.saturating_sub(self.grace);
        self.stopping |= stop;
        let kill = self.stopping && !self.killed && now >= self.kill_at;
        self.killed |= kill;
        Due { stop, kill }
    }

    /// When to look again: the stop deadline, then the kill deadline; never once killed.
    pub fn next(&self) -> Option<u64> {
        if self.mutant.on(Mutant::GuardSleeps) {
            return None;
        }
        match (self.killed, self.stopping) {
            (true, _) => None,
            (false, true) => Some(self.kill_at),
            (false, false) => Some(self.kill_at.saturating_sub(self.grace)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a look at the watch calls for.
    const NOTHING: Due = Due {
        stop: false,
        kill: false,
    };
    const KILL: Due = Due {
        stop: false,
        kill: true,
    };
    const STOP: Due = Due {
        stop: true,
        kill: false,
    };
    const STOP_AND_KILL: Due = Due {
        stop: true,
        kill: true,
    };

    const S: u64 = 1_000_000_000;

    /// Rule 1 kept by the guard alone: stop signal at `deadline - G`, SIGKILL at the deadline;
    /// a renew moves both later.
    #[test]
    fn the_guard_stops_at_the_stop_deadline_and_kills_at_the_kill_deadline() {
        let mut w = Deadlines::new(5 * S, 14 * S);
        assert_eq!(w.next(), Some(9 * S));
        assert_eq!(w.due(8 * S), NOTHING);
        // A renew: the deadlines move on.
        w.order(Order {
            kill_at: 18 * S,
            stop_begun: 0,
        });
        assert_eq!(w.due(9 * S), NOTHING);
        assert_eq!(w.next(), Some(13 * S));
        assert_eq!(w.due(13 * S), STOP);
        assert_eq!(w.due(13 * S), NOTHING, "one stop");
        assert_eq!(w.next(), Some(18 * S));
        // The stop has begun: a later deadline no longer counts, an earlier one does.
        w.order(Order {
            kill_at: 30 * S,
            stop_begun: 0,
        });
        assert_eq!(w.next(), Some(18 * S));
        w.order(Order {
            kill_at: 17 * S,
            stop_begun: 0,
        });
        assert_eq!(w.due(17 * S), KILL);
        assert_eq!(w.next(), None);
        assert_eq!(w.due(40 * S), NOTHING, "one kill");
    }

    /// The daemon began the stop itself (and sent the signal): the guard sends none, and kills
    /// at the stop's own deadline, `stop + G`.
    #[test]
    fn a_stop_the_daemon_began_is_not_sent_again() {
        let mut w = Deadlines::new(5 * S, 14 * S);
        w.order(Order {
            kill_at: 7 * S,
            stop_begun: 2 * S,
        });
        assert_eq!(w.next(), Some(7 * S));
        assert_eq!(w.due(6 * S), NOTHING);
        assert_eq!(w.due(9 * S), KILL);
    }

    /// An order whose deadline has passed (the daemon resumed after the machine slept) is
    /// carried out at once.
    #[test]
    fn a_deadline_already_passed_is_due_at_once() {
        let mut w = Deadlines::new(5 * S, 100 * S);
        w.order(Order {
            kill_at: 3 * S,
            stop_begun: 0,
        });
        assert_eq!(w.due(10 * S), STOP_AND_KILL);
        let mut w = Deadlines::new(0, 10 * S);
        assert_eq!(w.due(10 * S), STOP_AND_KILL, "G = 0");
    }
}
