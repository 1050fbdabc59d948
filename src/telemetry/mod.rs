//! What the daemon knows about itself, in one place: the state shown by `/status`, `/readyz` and
//! `/healthz` (`state`, with the JSON of `/status` in `status`), and the Prometheus metrics of
//! `/metrics` (`metrics`).
//!
//! The elector, the supervisor and the daemon loop report events here (a lease operation, an
//! acquisition, a renew, a child start or exit); the HTTP handlers only read.

mod metrics;
mod replicas;
mod state;
mod status;
#[cfg(test)]
mod tests;

pub(crate) use metrics::{ExitReason, WakeTaken};
#[cfg(feature = "kubernetes")]
pub(crate) use state::Presence;
pub(crate) use state::Telemetry;
pub(crate) use status::{HealthResult, Role, StatusReport};
