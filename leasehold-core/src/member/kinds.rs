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
    /// A blob's ETag (a wake-up's reservation carries one as text).
    type ETag: Clone + PartialEq + Debug + for<'a> From<&'a str>;
    /// A lease id.
    type LeaseId: Clone + PartialEq + Debug;
    /// A handoff notice as a leader's choice of a successor wrote it.
    type Notice: Clone + Debug;

    /// The key of the record of the member `identity`.
    fn key_of(identity: &str) -> <Self::Record as Record>::Key;
    /// The ETag of a record as listed: a new one means the record changed.
    fn record_etag(record: &Self::Record) -> &Self::ETag;
    /// Whether `notice` names `next` and reserves the epoch for the lease id it acquires with.
    fn names(notice: &Self::Notice, next: &Self::Record) -> bool;
    /// The blob's ETag after `notice` was written.
    fn notice_etag(notice: Self::Notice) -> Self::ETag;
    /// From now on the group's lease is acquired with `id`: the record is to say so; whether
    /// that changed what it says.
    fn acquire_with(published: &mut Self::Published, id: &Self::LeaseId) -> bool;
    /// Back from a cooldown: the record no longer says standby; whether that changed it.
    fn back_in_line(published: &mut Self::Published) -> bool;
    /// Into a cooldown of `cooldown` from `wall` (a health step-down, a crash-loop backoff):
    /// the record is to say this member stands by until then.
    fn stand_by(published: &mut Self::Published, wall: Self::Wall, cooldown: Duration);
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
