//! The JSON of `/status`, in one place: what the daemon's HTTP endpoint shows and what
//! `leasehold status` reads back from the local daemon. Field names are part of the contract
//! (README, "HTTP endpoints"; docs/operations.md).

use crate::elector::members::LineView;
use serde::{Deserialize, Serialize};

/// The JSON of `/status`. Field names are part of the contract (README, "HTTP endpoints");
/// `status` reads it back from the local daemon.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusReport {
    pub identity: String,
    pub container: String,
    pub blob: String,
    pub role: Role,
    /// The epoch of the current leadership, or of this instance's last one.
    pub epoch: Option<u64>,
    pub leader_since: Option<String>,
    /// Since the last successful acquire or renew was sent (`t_s`).
    pub seconds_since_renew: Option<f64>,
    /// Until the child gets its stop signal unless a renew succeeds first.
    pub seconds_to_stop_deadline: Option<f64>,
    /// Until the child's group is SIGKILLed unless a renew succeeds first.
    pub seconds_to_kill_deadline: Option<f64>,
    pub child: Option<ChildReport>,
    pub restarts: u32,
    /// The last health check of the current child (`[child.health]`), if any ran.
    pub health: Option<HealthReport>,
    /// While cooling down (after an unhealthy child, a crash-looping one, or a term whose
    /// renews all failed): until this instance competes again.
    pub seconds_to_rejoin: Option<f64>,
    /// While the child fails soon after each start (`[child].crash_backoff`): how often in a
    /// row, the backoff, and the last failure. Gone once a run lasted `crash_window`.
    #[serde(default)]
    pub crash_loop: Option<CrashLoopReport>,
    /// A group of an ended child that survives SIGKILL: this instance neither hands the lease on
    /// nor releases it, nor campaigns, until it is gone (docs/safety.md, "Recovery from anything").
    #[serde(default)]
    pub stuck_group: Option<StuckGroupReport>,
    /// The line of members as this instance last knew it: the leader, the members in order
    /// with their parts, this instance's place.
    #[serde(default)]
    pub line: LineView,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HealthReport {
    pub last_check: String,
    pub last_result: HealthResult,
    pub consecutive_failures: u32,
    /// What the last check printed or answered (one line, at most 300 characters).
    pub last_output: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CrashLoopReport {
    /// Failures in a row, each within `crash_window` of its start.
    pub quick_failures: u32,
    /// How long this instance stood (or stands) aside after the last one.
    pub backoff_seconds: f64,
    /// The last failure: `exit code 1 after 12ms`, `killed by SIGSEGV after 3s`.
    pub last_failure: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StuckGroupReport {
    pub pgid: u32,
    /// When its SIGKILL was found not to have ended it.
    pub since: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChildReport {
    pub pid: u32,
    pub state: ChildState,
    pub started_at: String,
}

/// The daemon's part in the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Checking storage before the first campaign.
    Starting,
    /// Trying to acquire while someone else (or nobody reachable) leads.
    Follower,
    /// Holding the lease; the child may run.
    Leader,
    /// Still holding the lease, but stopping the child before giving it up.
    SteppingDown,
    /// Out of the election for a while: after stepping down with an unhealthy child or a
    /// crash-looping one, or until a lease it could not renew has surely expired.
    CoolingDown,
}

/// The child as the daemon sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChildState {
    Running,
    /// The stop signal was sent; waiting for the group to be gone.
    Stopping,
    /// Between two runs (`on_exit = "restart"`).
    Restarting,
}

/// How one health check of the child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HealthResult {
    Pass,
    Fail,
    Timeout,
}

impl HealthResult {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
            Self::Timeout => "timeout",
        }
    }
}
