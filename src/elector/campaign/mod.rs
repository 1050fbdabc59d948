//! Winning a term: the candidate's state machine is the core's
//! ([`leasehold_core::candidate`]: where it stands, what it remembers, one transition without
//! I/O); `run` is its shell, which does what the transitions say. The successor acquires
//! every jittered `acquire_interval` while someone else leads, the other members watch the
//! lease blob (`watch`; with slots, the record of the member ahead: `slots`); a won lease
//! leads only once epoch + 1 is written under it with `If-Match` (`acquire`, rule 6). An
//! acquire that got no answer in time is never resent, and a late success is released
//! (`late`).

mod acquire;
mod attempt;
mod late;
mod run;
mod slots;
#[cfg(test)]
mod tests;
mod watch;

pub(crate) use late::LateAcquire;
