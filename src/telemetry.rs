//! What the daemon reports about itself. For now: one place where every lease operation is
//! recorded (with its outcome and latency), so that logs and later metrics see the same events.

use crate::store::StoreError;
use std::time::Duration;

/// The storage operations leasehold performs, as named in logs and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeaseOp {
    Prepare,
    Acquire,
    Renew,
    Release,
    Read,
    WriteEpoch,
    Break,
}

impl LeaseOp {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prepare => "prepare",
            Self::Acquire => "acquire",
            Self::Renew => "renew",
            Self::Release => "release",
            Self::Read => "read",
            Self::WriteEpoch => "write_epoch",
            Self::Break => "break",
        }
    }
}

#[derive(Debug, Default)]
pub struct Telemetry {}

impl Telemetry {
    /// Records one storage request and how it ended.
    pub fn lease_op(&self, op: LeaseOp, elapsed: Duration, error: Option<&StoreError>) {
        match error {
            None => tracing::trace!(op = op.as_str(), ?elapsed, "lease operation succeeded"),
            Some(e) => {
                tracing::debug!(op = op.as_str(), ?elapsed, error = %e, "lease operation failed")
            }
        }
    }
}
