//! The campaign's acquisition attempts outside a campaign, for the tests: one round alone
//! ([`leasehold_core::campaign::Campaign::one_round`], driven as the campaign is), and the wall
//! clock's milliseconds the first epoch of a blob is drawn from.

#[cfg(test)]
use crate::elector::instance::Elector;
#[cfg(test)]
use crate::elector::term::Term;
#[cfg(test)]
use crate::store::{LeaseStore, StoreError};
#[cfg(test)]
use leasehold_core::candidate::Round;
use time::OffsetDateTime;

#[cfg(test)]
impl<S: LeaseStore> Elector<S> {
    /// One acquisition attempt. `Ok(None)`: someone else holds the lease. An attempt that gets
    /// no answer within the request timeout returns [`StoreError::TimedOut`] and is left to
    /// settle in the background (a `LateAcquire`); [`Elector::campaign`] waits for that
    /// before its next attempt.
    pub(crate) async fn try_acquire(&mut self) -> Result<Option<Term>, StoreError> {
        self.one_round(Round::Acquire).await
    }

    /// One poller's round of slots: the slots one by one until one is won. `Ok(None)`: all
    /// held.
    pub(crate) async fn poll_slots(&mut self) -> Result<Option<Term>, StoreError> {
        self.one_round(Round::Slots).await
    }
}

/// The epoch of the first leadership of a blob that has none, at `now`
/// ([`leasehold_core::epoch::first`]).
#[cfg(test)]
pub(super) fn first_epoch(now: OffsetDateTime) -> u64 {
    leasehold_core::epoch::first(wall_ms(now))
}

/// `now` in milliseconds since 1970 (0 before it).
pub(super) fn wall_ms(now: OffsetDateTime) -> u64 {
    u64::try_from(now.unix_timestamp_nanos() / 1_000_000).unwrap_or(0)
}
