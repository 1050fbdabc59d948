//! Who holds a leased blob: the holder its metadata records, or an instance that has not
//! written it. Get Blob Properties shows that a blob is leased, not by whom; `status`, `break`
//! and `check` tell by a second read conditional on the recorded lease id.

use super::request::within;
use crate::store::{BlobState, LeaseCheck, LeaseState, LeaseStore, StoreError};
use serde::Serialize;

/// Whether a leased blob is held by the holder its metadata records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum LeaseHolder {
    /// Held under the lease id the last leader recorded: that leader leads.
    Recorded,
    /// Held by an instance that has not written its metadata: a new leader between its acquire
    /// and its epoch write (a few milliseconds), or one that cannot finish acquiring.
    Unrecorded,
    /// Not known: the metadata records no lease id (written before leasehold recorded it), or
    /// the check got no answer.
    Unverified,
}

/// Reads the blob and, while it is leased, whether the holder its metadata records still holds
/// the lease ([`verified`]).
pub async fn read_verified<S: LeaseStore>(
    store: &S,
) -> Result<(BlobState, Option<LeaseHolder>), StoreError> {
    let state = within(store.read()).await?;
    verified(store, state).await
}

/// Whether the holder that `state` (just read) records still holds the lease: Get Blob
/// Properties does not show the lease id, so a second read conditional on the recorded lease
/// id tells (it changes nothing). A lease that ends between the two reads is read once more.
pub async fn verified<S: LeaseStore>(
    store: &S,
    mut state: BlobState,
) -> Result<(BlobState, Option<LeaseHolder>), StoreError> {
    for _ in 0..2 {
        match verify(store, &state).await {
            Some(LeaseCheck::Active) => return Ok((state, Some(LeaseHolder::Recorded))),
            Some(LeaseCheck::HeldByAnother) => return Ok((state, Some(LeaseHolder::Unrecorded))),
            Some(LeaseCheck::NotLeased) => state = within(store.read()).await?,
            None if state.lease == LeaseState::Leased => {
                return Ok((state, Some(LeaseHolder::Unverified)));
            }
            None => return Ok((state, None)),
        }
    }
    let leased = state.lease == LeaseState::Leased;
    Ok((state, leased.then_some(LeaseHolder::Unverified)))
}

/// For a leased blob: whether its recorded holder's lease is the active one. `None` when the
/// blob is not leased, or it cannot be told (no recorded lease id, no answer).
pub(super) async fn verify<S: LeaseStore>(store: &S, state: &BlobState) -> Option<LeaseCheck> {
    if state.lease != LeaseState::Leased {
        return None;
    }
    let Some(holder) = &state.holder else {
        // Leased, and nobody has ever written the metadata.
        return Some(LeaseCheck::HeldByAnother);
    };
    within(store.check_lease(holder.lease?)).await.ok()
}
