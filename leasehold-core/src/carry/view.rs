//! What ties a member's data to the store's ([`Carry`]: which of a member's [`Kinds`] and the
//! store's [`Types`] are one type, and what the translation makes of a member's data for the
//! store: the holder metadata, a handoff notice, a record's lease id), and what a request is
//! carried out with ([`View`]: what the member knows, read right after its step).

use crate::member::{Kept, Key, Kinds, Known};
use crate::quorum::Stamp;
use crate::store::{Call, Return, Types};

/// A member's store data as the store's calls carry it: the types both name are one.
pub trait Carry: Kinds {
    /// The store's types.
    type Store: Types<
            LeaseId = Self::LeaseId,
            ETag = Self::ETag,
            Read = Self::Blob,
            Key = Key<Self>,
            Record = Self::Record,
            Slot = Self::Slot,
            Publish = Self::Published,
        >;

    /// The holder metadata of `me`'s term of `epoch`, begun at `wall`, under lease `id`, in a
    /// group of `slots` as a holder records it ([`slots::to_record`](crate::slots::to_record)).
    fn holder(
        me: &str,
        epoch: u64,
        wall: Self::Wall,
        id: &Self::LeaseId,
        slots: Option<u32>,
    ) -> <Self::Store as Types>::Holder;

    /// Puts a replica's `stamp` (docs/quorum.md, *One replica set*) on the holder metadata
    /// written there: a metadata write replaces every key, and a replica that lost its stamp
    /// counts for nobody.
    fn stamp(holder: &mut <Self::Store as Types>::Holder, stamp: Stamp);

    /// Whether a record's lease state, as read, is leased.
    fn leased(state: &<Self::Store as Types>::LeaseState) -> bool;

    /// The handoff notice naming `to`, passing over the members `passed_over`, reserving the
    /// epoch `reserved` (if any) for the lease id `to`'s record says it acquires with
    /// (docs/succession.md, "The handoff").
    fn notice(
        to: &Self::Record,
        passed_over: Vec<String>,
        reserved: Option<u64>,
    ) -> <Self::Store as Types>::Notice;

    /// The notice naming `to` and reserving `reserved` for it, as the choice of a successor
    /// holds it once written: the blob's ETag after it was `etag`.
    fn noticed(to: &Self::Record, reserved: Option<u64>, etag: Self::ETag) -> Self::Notice;

    /// The lease id a member's record says it acquires with: the one a handoff to it changes
    /// the lease to.
    fn lease_of(record: &Self::Record) -> Self::LeaseId;
}

/// The store's error for `K`.
pub type Fail<K> = <<K as Carry>::Store as Types>::Error;
/// A store call for `K`.
pub type CallOf<K> = Call<<K as Carry>::Store>;
/// A store call's return for `K`.
pub type ReturnOf<K> = Return<<K as Carry>::Store>;

/// What a request is carried out with, read off the member right after the step that sent it
/// (`Member::known`, `Member::kept`, `Member::next_id`), and what only the shell holds.
pub struct View<'a, I, K: Kinds> {
    /// What the member knows.
    pub known: &'a Known<I, K>,
    /// What the store's answers left (with a term won: its slot, lease id, epoch and start).
    pub kept: &'a Kept<K>,
    /// The lease id the next acquire goes out with.
    pub next_id: &'a K::LeaseId,
    /// The lease id of the member's record (the shell's, for the record's lifetime).
    pub record_lease: &'a K::LeaseId,
    /// Whether a blob found missing is created again.
    pub create_if_missing: bool,
}

impl<I, K: Kinds> View<'_, I, K> {
    /// The lease id an attempt's requests go out with: the one its acquire took, else the next.
    pub(super) fn attempt_id(&self) -> K::LeaseId {
        self.kept.id.clone().unwrap_or_else(|| self.next_id.clone())
    }
}
