//! The guard: a tiny process beside each child (`leasehold __guard PGID SIGNAL GRACE_NS
//! KILL_AT_NS`) that holds the child's process group to its deadlines when the daemon cannot
//! (docs/safety.md, "The guard").
//!
//! The daemon's timers and its backstop thread stop with the daemon: a daemon that is frozen
//! (SIGSTOP, Ctrl-Z), hung or starved would let its child run past its lease. The guard is a
//! process of its own, so it runs on. The daemon tells it each new kill deadline `t_s + L - M`
//! (after every renew) and, once a stop begins, `stop + G`, as absolute instants of
//! CLOCK_BOOTTIME (the lease clock, [`crate::clock`]: it counts a machine suspend, as the
//! server's lease clock does), in fixed-size [`Order`]s over a pipe only the daemon writes to.
//! The guard waits on a timerfd of that clock and the pipe at once: at `deadline - G` it sends
//! the stop signal to the group, at the deadline SIGKILL. It obeys the latest order; once the
//! stop has begun (its own or the daemon's) only an earlier deadline counts. When the pipe
//! closes (the daemon died, however) it SIGKILLs the group at once.
//!
//! **One stop signal.** The daemon and the guard may both come to the stop deadline at the same
//! instant. Whoever sends the stop signal first takes the **stop token**: one byte in a pipe
//! that both read without blocking and nobody writes to again, so exactly one read gets it
//! ([`StopToken`]). The daemon tells the guard that its stop began before it signals.
//!
//! **Never another group.** A group id is a process id, which the kernel hands out again once
//! no process of the group is left. The child's exit collector (`crate::launch`) sees the
//! leader's exit without reaping it (the zombie keeps the id taken), SIGKILLs what is left of
//! the group, kills the guard and waits until it is dead, and only then reaps: a guard that is
//! alive always guards a group that is the child's.
//!
//! The guard is this binary, run before anything else is set up (no argument parser, no log
//! subscriber, no runtime): a few hundred kilobytes of its own beside the binary's shared pages.
//!
//! `rules` holds the guard's rules without I/O (`Deadlines`: what the latest `Order` and the
//! clock call for), which the simulator's guard obeys too (src/sim/process.rs); `process` (the
//! daemon only) is the process around them, the pipe and the stop token.

#[cfg(feature = "daemon")]
mod process;

#[cfg(feature = "daemon")]
pub(crate) use process::{GuardLink, GuardLost, StopToken, args};
#[cfg(feature = "daemon")]
pub use process::{SUBCOMMAND, run};

mod rules;

// The simulator's guard obeys the same rules (the daemon's reach them from `process`).
#[cfg(any(test, feature = "test-util"))]
pub(crate) use rules::{Deadlines, Order};
