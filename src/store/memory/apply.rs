//! The store's calls as plain data ([`Call`]) judged synchronously: [`MemoryStore::apply`], for
//! a simulator that runs no runtime and carries each request to the service itself. The same
//! rules as the async requests (`rules.rs`), at the instant the caller gives, with no network
//! and no scripted fault: a request lost, late or refused is the simulator's network's to
//! decide, before or after it calls this.

#[cfg(any(test, feature = "test-util"))]
use super::network::Applied;
use super::rules;
use super::state::{Blob, Shared};
use super::store::MemoryStore;
use crate::store::blob::LeaseId;
use crate::store::call::{Call, Return, listing};
use crate::store::lease::GroupStore;
use crate::store::op::Op;
use time::OffsetDateTime;
use tokio::time::Instant;

#[cfg(test)]
mod tests;

impl MemoryStore {
    /// `call` arrives at the service at `at` (on the clock the store's leases run on), its
    /// service's wall clock then reading `wall` (what a creation time or a blob's age is taken
    /// from): judged there and then, answered at once. Counted among the requests of its kind
    /// ([`MemoryStore::calls`]) at `at`, as an async request is at its arrival; a break, as
    /// there, is not.
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "the synchronous simulator is to send its calls here"
        )
    )]
    pub(crate) fn apply(&self, call: &Call, at: Instant, wall: OffsetDateTime) -> Return {
        let slot_store = match call.slot() {
            Some(n) if n > 0 => Some(self.slot(n)),
            _ => None,
        };
        let store = slot_store.as_deref().unwrap_or(self);
        if let Some((op, id)) = kind(call) {
            store.shared.calls.lock().unwrap().push((op, at, id));
        }
        store.judge(call, at, wall)
    }

    /// `call` judged on this store (a slot's, for a call on a slot), not counted.
    fn judge(&self, call: &Call, at: Instant, wall: OffsetDateTime) -> Return {
        judge(&mut self.blob(), &self.shared, call, at, wall)
    }
}

/// `call` judged on `b`, the blob of `shared` (locked by the caller), not counted.
fn judge(b: &mut Blob, shared: &Shared, call: &Call, at: Instant, wall: OffsetDateTime) -> Return {
    match call {
        Call::Prepare { create, .. } => Return::Prepare(rules::prepare(b, *create, wall)),
        Call::Acquire { id, seconds, .. } => Return::Acquire(rules::acquire(b, at, *id, *seconds)),
        Call::Renew { id, .. } => Return::Renew(rules::renew(b, at, *id)),
        Call::Release { id, .. } => Return::Release(rules::release(b, *id)),
        Call::BreakLease { .. } => Return::BreakLease(Ok(rules::break_lease(b))),
        Call::Read { .. } => Return::Read(rules::read(b, at, wall)),
        Call::ReadStamped { .. } => {
            Return::ReadStamped(rules::read(b, at, wall).map(|read| (read, b.stamp)))
        }
        Call::CheckLease { id, .. } => Return::CheckLease(rules::check_lease(b, at, *id)),
        Call::WriteHolder {
            id, etag, holder, ..
        } => Return::WriteHolder(rules::write_holder(b, at, *id, etag, holder.clone())),
        Call::Change {
            id,
            proposed,
            if_match,
            ..
        } => Return::Change(rules::change(b, at, *id, *proposed, if_match.as_ref())),
        Call::WriteNotice {
            id,
            holder,
            notice,
            if_match,
            ..
        } => Return::WriteNotice(rules::write_notice(
            b,
            at,
            *id,
            holder.clone(),
            notice.clone(),
            if_match.as_ref(),
        )),
        Call::ReleaseIf { id, etag, .. } => Return::ReleaseIf(rules::release_if(b, *id, etag)),
        Call::Recreate { by, .. } => Return::Recreate(rules::recreate(b, by.clone(), wall)),
        Call::CreateStamped { fingerprint, .. } => {
            let stamp = rules::stamp(*fingerprint);
            Return::CreateStamped(rules::create_stamped(b, stamp, wall))
        }
        Call::ReadMember { key } => Return::ReadMember(rules::read_member(b, at, wall, key)),
        Call::ReadRecord { key } => Return::ReadRecord(rules::read_record(b, at, wall, key)),
        Call::ListGroup => {
            Return::ListGroup(rules::list_group(b, &shared.slots, at, wall).map(listing))
        }
        Call::ListMembers => Return::ListMembers(rules::list_members(b, at, wall)),
        Call::CreateMember { key, member } => {
            Return::CreateMember(rules::create_member(b, key.clone(), member.clone(), wall))
        }
        Call::AcquireMember { key, id, seconds } => {
            Return::AcquireMember(rules::acquire_member(b, at, key, *id, *seconds))
        }
        Call::RenewMember { key, id } => Return::RenewMember(rules::renew_member(b, at, key, *id)),
        Call::WriteMember { key, id, member } => {
            Return::WriteMember(rules::write_member(b, at, key, *id, member.clone()))
        }
        Call::DeleteMember { key, lease, etag } => {
            Return::DeleteMember(rules::delete_member(b, at, key, *lease, etag.as_ref()))
        }
    }
}

#[cfg(any(test, feature = "test-util"))]
impl MemoryStore {
    /// [`MemoryStore::apply`] (not counted: the trace has every call), and what the blob showed as the async requests over a simulated
    /// network report it to their network ([`Applied`]): whether it was led by someone else
    /// when the call came, the epoch it records after it. The return is boxed where it is
    /// made: it travels back boxed, and a return is the largest thing a history moves.
    pub(crate) fn apply_seen(
        &self,
        call: &Call,
        at: Instant,
        wall: OffsetDateTime,
    ) -> (Box<Return>, Applied) {
        let id = kind(call).and_then(|(_, id)| id);
        let seen = |blob: &Blob| {
            // Led by someone else: an epoch on it, or a lease under another id.
            let led = blob.holder.is_some()
                || (blob.lease.active(at)).is_some_and(|l| id.is_some_and(|id| l.id != id));
            (led, blob.holder.as_ref().map(|h| h.epoch))
        };
        let slot_shared = match call.slot() {
            Some(n) if n > 0 => Some(self.slot_shared(n)),
            _ => None,
        };
        let shared = slot_shared.as_deref().unwrap_or(self.shared.as_ref());
        // One lock for the whole call: what the blob showed before, the call, after.
        let mut blob = shared.blob.lock().unwrap();
        let (led, _) = seen(&blob);
        let was_missing = blob.missing;
        // Not counted among the store's requests: a history's thousands of calls are traced.
        let ret = Box::new(judge(&mut blob, shared, call, at, wall));
        let (_, epoch) = seen(&blob);
        let created = blob.created_plainly(was_missing);
        (
            ret,
            Applied {
                epoch,
                led,
                created,
            },
        )
    }
}

/// The kind of request `call` is counted as, and the lease id it names, as the async requests
/// count it (`requests.rs`); `None` for a break, which is not counted (nor traced).
#[cfg(any(test, feature = "test-util"))]
pub(crate) fn op_of(call: &Call) -> Option<(Op, Option<LeaseId>)> {
    kind(call)
}

/// The kind of request `call` is counted as, and the lease id it names, as the async requests
/// count it (`requests.rs`); `None` for a break, which is not counted.
fn kind(call: &Call) -> Option<(Op, Option<LeaseId>)> {
    Some(match call {
        Call::Prepare { .. } | Call::Recreate { .. } | Call::CreateStamped { .. } => {
            (Op::Prepare, None)
        }
        Call::Acquire { id, .. } => (Op::Acquire, Some(*id)),
        Call::Renew { id, .. } => (Op::Renew, Some(*id)),
        Call::Release { id, .. } | Call::ReleaseIf { id, .. } => (Op::Release, Some(*id)),
        Call::BreakLease { .. } => return None,
        Call::Read { .. } | Call::ReadStamped { .. } | Call::CheckLease { .. } => (Op::Read, None),
        Call::WriteHolder { id, .. } => (Op::WriteEpoch, Some(*id)),
        Call::Change { id, .. } => (Op::Change, Some(*id)),
        Call::WriteNotice { id, .. } => (Op::Notice, Some(*id)),
        Call::ReadMember { .. } | Call::ReadRecord { .. } => (Op::MemberRead, None),
        Call::ListGroup | Call::ListMembers => (Op::List, None),
        Call::CreateMember { .. } => (Op::MemberCreate, None),
        Call::AcquireMember { id, .. } => (Op::MemberAcquire, Some(*id)),
        Call::RenewMember { id, .. } => (Op::MemberRenew, Some(*id)),
        Call::WriteMember { id, .. } => (Op::MemberWrite, Some(*id)),
        Call::DeleteMember { lease, .. } => (Op::MemberDelete, *lease),
    })
}
