//! `leasehold break`: breaks whatever lease is on the blob (forcing a failover), and says whom
//! it took the lease from.

use super::held::{LeaseHolder, read_verified};
use super::request::within;
use super::status::LeaseReport;
use crate::store::target::StorageTarget;
use crate::store::{BlobState, LeaseCheck, LeaseState, LeaseStore, StoreError};
use std::time::Duration;

/// What `break` did.
#[derive(Debug, Clone)]
pub enum BreakOutcome {
    /// There was no lease to break.
    NotLeased(LeaseReport),
    /// There is no blob, so no lease, to break (a replica of a group, wiped or not yet made:
    /// it counts for no holder).
    NoBlob {
        /// Where the blob would be: `container/blob`.
        at: String,
    },
    /// The lease was broken; it can be acquired again after `seconds`. `holder` names who held
    /// it.
    Broken {
        before: LeaseReport,
        holder: String,
        seconds: u64,
    },
}

impl BreakOutcome {
    pub fn render(&self) -> String {
        match self {
            Self::NotLeased(r) => format!(
                "nothing to break: the lease on {}/{} is {}{}\n",
                r.container,
                r.blob,
                r.lease_state,
                r.last_holder
                    .as_ref()
                    .map(|h| format!(" (last leader {h}, epoch {})", r.epoch.unwrap_or(0)))
                    .unwrap_or_default()
            ),
            Self::NoBlob { at } => format!("nothing to break: {at} does not exist\n"),
            Self::Broken {
                before,
                holder,
                seconds,
            } => format!(
                "broke the lease on {}/{} held by {holder}{}; {}\n",
                before.container,
                before.blob,
                if before.lease_state == LeaseState::Breaking {
                    " (it was already being broken)"
                } else {
                    ""
                },
                if *seconds == 0 {
                    "it can be acquired again now".to_owned()
                } else {
                    format!("it can be acquired again in {seconds}s")
                }
            ),
        }
    }
}

/// `leasehold break`: breaks whatever lease is on the blob. The holder notices at its next renew
/// (`LeaseIsBrokenAndCannotBeRenewed`) and stops its child at once.
pub async fn break_lease<S: LeaseStore>(
    store: &S,
    target: &StorageTarget,
    period: Duration,
) -> Result<BreakOutcome, StoreError> {
    let (state, holder) = read_verified(store).await?;
    let before = LeaseReport::from_state(target, &state, holder);
    if !matches!(
        before.lease_state,
        LeaseState::Leased | LeaseState::Breaking
    ) {
        return Ok(BreakOutcome::NotLeased(before));
    }
    let holder = holder_of(store, &state, &before).await;
    match within(store.break_lease(period)).await {
        Ok(seconds) => Ok(BreakOutcome::Broken {
            before,
            holder,
            seconds,
        }),
        // It expired or was released between the read and the break.
        Err(e) if e.code() == Some("LeaseNotPresentWithLeaseOperation") => {
            Ok(BreakOutcome::NotLeased(before))
        }
        Err(e) => Err(e),
    }
}

/// Who holds a leased or breaking lease, as `break` names it. A breaking lease is still held
/// under its lease id until the break period ends, so the recorded holder is checked the same
/// way as for a leased one.
async fn holder_of<S: LeaseStore>(store: &S, state: &BlobState, before: &LeaseReport) -> String {
    let recorded = |h: &crate::store::Holder| format!("{} (epoch {})", h.identity, h.epoch);
    let unrecorded = |last: Option<&crate::store::Holder>| match last {
        Some(h) => format!(
            "an instance that had not written its metadata (last leader {})",
            recorded(h)
        ),
        None => "an instance that had not written its metadata".to_owned(),
    };
    let holder = state.holder.as_ref();
    let check = match (state.lease, holder.and_then(|h| h.lease)) {
        (LeaseState::Leased, _) => before.lease_holder,
        (LeaseState::Breaking, Some(id)) => match within(store.check_lease(id)).await {
            Ok(LeaseCheck::Active) => Some(LeaseHolder::Recorded),
            Ok(LeaseCheck::HeldByAnother) => Some(LeaseHolder::Unrecorded),
            _ => Some(LeaseHolder::Unverified),
        },
        (LeaseState::Breaking, None) if holder.is_none() => Some(LeaseHolder::Unrecorded),
        _ => Some(LeaseHolder::Unverified),
    };
    match (check, holder) {
        (Some(LeaseHolder::Recorded), Some(h)) => recorded(h),
        (Some(LeaseHolder::Unverified), Some(h)) => format!(
            "{} (as recorded; whether it still held the lease could not be checked)",
            recorded(h)
        ),
        (_, last) => unrecorded(last),
    }
}
