//! The operator's commands, run once against the lease store: `status` (who leads, with which
//! epoch, since when, and the line of members behind it; `--watch` redraws it as it changes),
//! `check` (would `run` work here?) and `break` (force a failover); `status` and `break` of a
//! group whose lease is held on a majority of storage accounts (`replicas`, counted by
//! `majority`). `held` tells who holds a leased blob.
//!
//! None of them needs to be the leader or holds the lease beyond `check`'s acquire-and-release
//! probe, and none writes the holder metadata: the epoch stays the leaders' alone.

mod break_lease;
mod check;
mod held;
mod majority;
mod replicas;
mod request;
mod status;

pub(crate) use break_lease::break_lease;
pub(crate) use check::{
    CheckLine, check, check_config, distinct_replicas_line, of_replica, replica_id, replicas_line,
};
pub(crate) use replicas::{Replica, Unanswered, break_group, status as replica_status};
pub(crate) use request::{UNREACHABLE_HINT, storage_error_line};
pub(crate) use status::{LeaseReport, slots, status};
