//! The design's default timings, which a daemon with no `[lease]` settings runs with, and the
//! bounds that follow from them: what the tests, the bench and chaos hold the daemons to.

use std::time::Duration;

/// The lease duration L.
pub const L: Duration = Duration::from_secs(15);
/// The renew interval R.
pub const R: Duration = Duration::from_secs(4);
/// The safety margin M.
pub const M: Duration = Duration::from_secs(1);
/// The stop timeout G: what [`Group::config`](crate::Group::config) gives a child that sets none.
pub const G: Duration = Duration::from_secs(2);
/// The longest a polling member waits between two acquires: 1.2 x acquire_interval (1 s).
pub const POLL: Duration = Duration::from_millis(1200);
/// The longest a member that is not the successor waits between two reads of the lease blob:
/// 1.2 x 5 x acquire_interval.
pub const WATCH: Duration = Duration::from_secs(6);
