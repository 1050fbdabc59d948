//! The handoff's requests carried out (docs/succession.md, "The handoff"), under the term's
//! lease on its slot ([`Held`]): the choice's notice naming its successor, its read of that
//! member's record, its listing; this member's record saying its standby; the `change` to a
//! successor's lease id, a hand-on's notice, a release (conditional or not); the
//! confirmation's read of the blob and of the successor's record, which the member judges
//! itself, its line being its own; and the mutant `change-before-gone`'s `change`.
//!
//! A notice is written with the holder metadata of the term's own epoch write again (who, its
//! epoch, since when, its lease id, the group's count), and reserves the next epoch for the
//! lease id the successor's record says it acquires with.

use super::campaign::list;
use super::carrying::{Job, Shape, Start};
use super::view::{Carry, Fail, View};
use crate::campaign::Failed;
use crate::choice;
use crate::epoch;
use crate::handoff;
use crate::leading;
use crate::line::{Record, Standing};
use crate::member::Reply;
use crate::slots;
use crate::store::Call;
use crate::timing::Moment;
use std::time::Duration;

/// The term a handoff's requests go out under: its slot, the lease id it acquired with, its
/// epoch and the wall clock it began at, and who holds it.
pub(super) struct Held<'a, K: Carry> {
    slot: u32,
    id: K::LeaseId,
    epoch: u64,
    wall: K::Wall,
    me: &'a str,
    slots: u32,
    /// On several replicas, the handoff's replica's own stamp (`Kept::anchor`): the notice is
    /// written there and replaces every key of its metadata, and a replica that lost its stamp,
    /// or carries another's id, counts for nobody, or once for two.
    stamp: Option<crate::quorum::Stamp>,
}

impl<'a, K: Carry> Held<'a, K> {
    /// The term the member won, as its attempt left it (`None` before one is won); a term with
    /// no start on record began at `wall`.
    pub(super) fn of<I>(view: &View<'a, I, K>, wall: K::Wall) -> Option<Self> {
        let (known, kept) = (view.known, view.kept);
        Some(Self {
            slot: kept.slot,
            id: kept.id.clone()?,
            epoch: kept.epoch?,
            wall: kept.wall.unwrap_or(wall),
            me: known.line.me.as_str(),
            slots: known.slots,
            stamp: kept
                .replicas
                .get(kept.anchor)
                .and_then(Option::as_ref)
                .map(|(_, s)| *s),
        })
    }

    /// The epoch a notice reserves for the member it names.
    fn reserved(&self) -> Option<u64> {
        epoch::after(self.epoch)
    }

    /// The notice naming `to`, passing `passed_over` over, written under `from`'s lease id
    /// (the term's own: none) only while the blob's ETag is `if_match`.
    fn notice(
        &self,
        from: Option<&K::Record>,
        to: &K::Record,
        passed_over: Vec<String>,
        if_match: Option<K::ETag>,
    ) -> Call<K::Store> {
        let mut holder = K::holder(
            self.me,
            self.epoch,
            self.wall,
            &self.id,
            slots::to_record(self.slots),
        );
        if let Some(stamp) = self.stamp {
            K::stamp(&mut holder, stamp);
        }
        Call::WriteNotice {
            slot: self.slot,
            id: self.lease(from),
            holder,
            notice: K::notice(to, passed_over, self.reserved()),
            if_match,
        }
    }

    /// The lease id the lease has now: `from`'s, the member it was changed to, or the term's
    /// own.
    fn lease(&self, from: Option<&K::Record>) -> K::LeaseId {
        from.map_or_else(|| self.id.clone(), K::lease_of)
    }
}

/// A request of the choice of a successor, cut at `limit`: the notice naming a member (under
/// the term's lease, on no condition), the read of its record, a listing of the line.
pub(super) fn choice<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    held: &Held<'_, K>,
    request: &choice::Request<K::Record>,
    limit: I,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let rt = view.known.timing.request_timeout();
    match request {
        choice::Request::Notice(to) => {
            let job = Job::Notice {
                to: Box::new(to.clone()),
                reserved: held.reserved(),
            };
            Start::job(
                job,
                held.notice(None, to, Vec::new(), None),
                Some(limit),
                rt,
            )
        }
        choice::Request::Read(member) => {
            let key = member.key().clone();
            Start::one(Shape::Chosen, Call::ReadRecord { key }, Some(limit), rt)
        }
        choice::Request::List => Start::one(Shape::Listed, list(view.known), Some(limit), rt),
    }
}

/// This member's record says its standby, as the member set it when its term asked: written
/// under the record's lease, cut at `limit`; a member out of line has no record to write, and
/// the choice goes on.
pub(super) fn standby<I: Moment, K: Carry>(view: &View<'_, I, K>, limit: I) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let known = view.known;
    if known.line.standing != Standing::Joined {
        return Start::Reply(Reply::Leading(leading::Reply::StoodBy));
    }
    let says = known.own.published.clone();
    let call = Call::WriteMember {
        key: K::key_of(&known.line.me),
        id: view.record_lease.clone(),
        member: says.clone(),
    };
    let rt = known.timing.request_timeout();
    Start::job(Job::Standby(Box::new(says)), call, Some(limit), rt)
}

/// A request of the handoff on the lease blob, cut at `limit`.
pub(super) fn store<I: Moment, K: Carry>(
    held: &Held<'_, K>,
    request: &handoff::Request<K::Record, K::ETag>,
    limit: I,
    rt: Duration,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    use handoff::Request as H;
    let slot = held.slot;
    let one = |shape, call| Start::one(shape, call, Some(limit), rt);
    match request {
        H::Change { from, to, etag } => one(
            Shape::Changed,
            Call::Change {
                slot,
                id: held.lease(from.as_ref()),
                proposed: K::lease_of(to),
                if_match: etag.clone(),
            },
        ),
        H::Notice {
            from,
            to,
            passed_over,
            etag,
        } => {
            let passed_over = (passed_over.iter())
                .map(|m| m.identity().to_owned())
                .collect();
            let notice = held.notice(Some(from), to, passed_over, Some(etag.clone()));
            one(Shape::Noticed, notice)
        }
        H::Release => one(
            Shape::Released,
            Call::Release {
                slot,
                id: held.id.clone(),
            },
        ),
        H::ReleaseIf { from, etag } => one(
            Shape::ReleasedIf,
            Call::ReleaseIf {
                slot,
                id: K::lease_of(from),
                etag: etag.clone(),
            },
        ),
        H::Read { successor, record } => {
            let job = Job::Confirm { slot, record: None };
            let first = match record {
                true => Call::ReadRecord {
                    key: successor.key().clone(),
                },
                false => Call::Read { slot },
            };
            Start::job(job, first, Some(limit), rt)
        }
    }
}

/// The mutant `change-before-gone`: the lease changed to `to`'s lease id under the term's own,
/// the body still running, waited for with no limit.
pub(super) fn change_before_gone<I: Moment, K: Carry>(
    held: &Held<'_, K>,
    to: &K::Record,
    rt: Duration,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let call: Call<K::Store> = Call::Change {
        slot: held.slot,
        id: held.id.clone(),
        proposed: K::lease_of(to),
        if_match: None,
    };
    Start::one(Shape::Changed, call, None, rt)
}
