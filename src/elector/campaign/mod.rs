//! Winning a term: the successor acquires every jittered `acquire_interval` while someone else
//! leads, the other members watch the lease blob (`watch`); then epoch + 1 written under the
//! lease with `If-Match` ([`first_epoch`] on a blob without one). An acquire that got no answer
//! in time is never resent, and a late success is released (`LateAcquire`, `settle`).

mod acquire;
mod late;
mod run;
mod slots;
mod state;
#[cfg(test)]
mod tests;
mod watch;

pub(crate) use late::LateAcquire;
pub(crate) use slots::count_to_record;
