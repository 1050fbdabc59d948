//! What code outside the leader's task sees of leadership ([`Elector::watch`](crate::Elector::watch)):
//! the elector's part now, on a `tokio::sync::watch` channel, so that the rest of a program
//! observes leadership (a readiness probe, a metric, a router that sends writes to the leader)
//! without polling the elector.

/// This instance's part in its group now, as [`Elector::watch`](crate::Elector::watch) tells
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Role {
    /// Not leading: campaigning, following another leader, or out of the election for a
    /// while.
    Follower,
    /// Leading: the term with this epoch (the fencing token its task's
    /// [`Leadership::epoch`](crate::Leadership::epoch) carries), on this slot (0 without
    /// slots). From just before the term's task starts (its epoch confirmed) until the task is
    /// gone; the task itself learns of its term's end first, from
    /// [`Leadership::cancelled`](crate::Leadership::cancelled).
    Leader {
        /// The term's epoch.
        epoch: u64,
        /// The slot it holds.
        slot: u32,
    },
}

impl Role {
    /// Whether this instance leads now.
    pub fn is_leader(&self) -> bool {
        matches!(self, Self::Leader { .. })
    }

    /// The epoch of the term this instance leads now; `None` while it does not lead.
    pub fn epoch(&self) -> Option<u64> {
        match *self {
            Self::Leader { epoch, .. } => Some(epoch),
            Self::Follower => None,
        }
    }
}
