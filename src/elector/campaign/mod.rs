//! Winning a term: the campaign is the core's state machine
//! ([`leasehold_core::campaign`]: the candidate and the round it runs, one machine without
//! I/O); `run` is its shell, which carries out what it says and reports what came of it. The
//! successor acquires every jittered `acquire_interval` while someone else leads, the other
//! members watch the lease blob (with slots, the record of the member ahead); a won lease leads
//! only once epoch + 1 is written under it with `If-Match` (rule 6). An acquire that got no
//! answer in time is never resent, and a late success is released (`late`). `requests` says
//! what each request does on the store, `grounds` what the campaign asks of the elector,
//! `say` its log lines; `watch` takes a read of the lease blob into the line, `slots` keeps
//! the group's count, `acquire` one round alone for the tests.

mod acquire;
mod grounds;
mod late;
mod requests;
mod run;
mod say;
mod slots;
#[cfg(test)]
mod tests;
mod watch;

pub(crate) use late::LateAcquire;
