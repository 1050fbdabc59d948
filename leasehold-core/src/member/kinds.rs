//! The store's data as a member handles it ([`Kinds`]), and what of its own record the
//! protocol changes ([`Publish`]).

use crate::blob::LeaseBlob;
use crate::line::{Record, SlotBlob};
use std::fmt::Debug;
use std::time::Duration;

/// The store's data as a member handles it: a member record, a slot blob, what a record
/// publishes, a read of the lease blob, an ETag, a lease id, the wall clock. One
/// implementation per store; the core never names them.
pub trait Kinds {
    /// The wall clock records and terms are dated on.
    type Wall: Ord + Copy + Debug;
    /// A member record as a listing shows it.
    type Record: Record<Wall = Self::Wall> + Clone + Debug;
    /// A slot blob as a listing shows it.
    type Slot: SlotBlob<Wall = Self::Wall> + Debug;
    /// What this member's record says.
    type Published: Publish + Debug;
    /// A read of the lease blob.
    type Blob: LeaseBlob<ETag = Self::ETag> + Debug;
    /// A blob's ETag.
    type ETag: Clone + PartialEq + Debug;
    /// A lease id.
    type LeaseId: Clone + PartialEq + Debug;

    /// The key of the record of the member `identity`.
    fn key_of(identity: &str) -> <Self::Record as Record>::Key;
    /// The ETag of a record as listed: a new one means the record changed.
    fn record_etag(record: &Self::Record) -> &Self::ETag;
}

/// What a member's record says, as the protocol changes it: how long the member has been a
/// member ("settled", docs/preferred.md). The rest of it (identity, priority, the lease id it
/// acquires with, a standby) the member sets when it changes.
pub trait Publish: Clone + PartialEq {
    /// How long it had been a member when its record last said so.
    fn settled(&self) -> Option<Duration>;
    /// The record is to say this.
    fn set_settled(&mut self, settled: Option<Duration>);
}
