//! A campaign's requests carried out: its attempts' (the acquire, the reads, the epoch
//! written, a blob created again, a release), its watchers' and waiting members' (a listing, a
//! read of the blob or of the record ahead; a probe is the HTTP client's), its looks at a slot.

use super::carrying::{Job, Shape, Start, create};
use super::view::{CallOf, Carry, Fail, View};
use crate::attempt;
use crate::campaign::{self, Failed};
use crate::line::Record;
use crate::member::{Key, Kinds, Known, Reply};
use crate::quorum;
use crate::slots::{self, WaitRequest};
use crate::store::{Call, Types};
use crate::timing::Moment;
use crate::watch;

/// A campaign's request.
pub(super) fn campaign<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    request: &campaign::Request<I, Key<K>>,
    now: I,
    wall: K::Wall,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let known = view.known;
    let rt = known.timing.request_timeout();
    let soon = now + rt;
    let one = |shape, call, limit| Start::one(shape, call, limit, rt);
    let read = |slot, until: I| one(Shape::Blob, Call::Read { slot }, Some(until));
    match request {
        campaign::Request::Attempt { slot, request } => {
            attempt(view, *slot, request, now, wall, one)
        }
        campaign::Request::Watch(watch::Request::List { until })
        | campaign::Request::Wait(WaitRequest::List { until })
        | campaign::Request::List { until } => one(Shape::Listed, list(known), Some(*until)),
        campaign::Request::Watch(watch::Request::ReadBlob { until }) => read(0, *until),
        campaign::Request::Watch(watch::Request::ReadAhead { until }) => match &view.kept.ahead {
            Some(ahead) => one(
                Shape::Ahead,
                Call::ReadRecord {
                    key: ahead.key().clone(),
                },
                Some(*until),
            ),
            None => Start::Reply(Reply::Nothing),
        },
        campaign::Request::Wait(WaitRequest::Read { ahead, until }) => one(
            Shape::Member,
            Call::ReadMember { key: ahead.clone() },
            Some(*until),
        ),
        campaign::Request::Wait(WaitRequest::Probe(_))
        | campaign::Request::Watch(watch::Request::ProbeAhead) => Start::Http,
        campaign::Request::Recreate { slot } => {
            if !view.create_if_missing || !known.delays.to_create(*slot, now) {
                return Start::Reply(Reply::Recreated(None));
            }
            recreate(known, *slot, soon, rt)
        }
        campaign::Request::Look { slot } => read(*slot, soon),
        campaign::Request::CheckCount | campaign::Request::Notice => read(0, soon),
        campaign::Request::Replica(request) => {
            replica(view, request, now, wall).on(request.replica())
        }
    }
}

/// A request of the attempt on a majority of replicas (or of a leader winning one back), on
/// the replica it names; each with the member's one lease id (the term's, once won).
pub(super) fn replica<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    request: &quorum::Request<I>,
    now: I,
    wall: K::Wall,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let (known, kept) = (view.known, view.kept);
    let rt = known.timing.request_timeout();
    let id = || view.attempt_id();
    let one = |shape, call, limit| Start::one(shape, call, limit, rt);
    match *request {
        // Waited for as long as the attempt waits: an answer after its limit counts for nobody,
        // and a lease it says was won is released (the attempt's `heard_late`).
        quorum::Request::Acquire { .. } => one(
            Shape::Acquired,
            Call::Acquire {
                slot: 0,
                id: id(),
                seconds: known.timing.lease_seconds(),
            },
            None,
        ),
        quorum::Request::Read { until, .. } => {
            one(Shape::Stamped, Call::ReadStamped { slot: 0 }, Some(until))
        }
        quorum::Request::WriteEpoch {
            replica,
            epoch,
            until,
        } => {
            let read = kept.replicas.get(replica).and_then(Option::as_ref);
            let etag = read.map(|(blob, _)| crate::blob::LeaseBlob::etag(blob));
            let mut holder = K::holder(
                &known.line.me,
                epoch,
                kept.wall.unwrap_or(wall),
                &id(),
                None,
            );
            // The write replaces the blob's metadata: the replica's stamp goes with it.
            if let Some((_, stamp)) = read {
                K::stamp(&mut holder, *stamp);
            }
            let write = Call::WriteHolder {
                slot: 0,
                id: id(),
                etag: etag.cloned().unwrap_or_else(|| K::ETag::from("")),
                holder,
            };
            one(Shape::Written, write, Some(until))
        }
        quorum::Request::Create { fingerprint, .. } => one(
            Shape::Done,
            Call::CreateStamped {
                slot: 0,
                fingerprint,
            },
            Some(now + rt),
        ),
        quorum::Request::Release { .. } => one(
            Shape::Done,
            Call::Release { slot: 0, id: id() },
            Some(now + rt),
        ),
    }
}

/// An attempt's request on `slot`.
fn attempt<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    slot: u32,
    request: &attempt::Request<I>,
    now: I,
    wall: K::Wall,
    one: impl Fn(Shape, CallOf<K>, Option<I>) -> Start<I, K>,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let (known, kept) = (view.known, view.kept);
    let rt = known.timing.request_timeout();
    let id = || view.attempt_id();
    let me = known.line.me.as_str();
    match request {
        attempt::Request::Acquire => one(
            Shape::Acquired,
            Call::Acquire {
                slot,
                id: id(),
                seconds: known.timing.lease_seconds(),
            },
            None,
        ),
        attempt::Request::ReadBeside { until } | attempt::Request::Read { until } => {
            one(Shape::Blob, Call::Read { slot }, Some(*until))
        }
        attempt::Request::ReadCount { until } => {
            one(Shape::Blob, Call::Read { slot: 0 }, Some(*until))
        }
        attempt::Request::WriteEpoch { epoch, until } => {
            let etag = kept.read.as_ref().map(crate::blob::LeaseBlob::etag);
            let write = Call::WriteHolder {
                slot,
                id: id(),
                etag: etag.cloned().unwrap_or_else(|| K::ETag::from("")),
                holder: K::holder(
                    me,
                    *epoch,
                    kept.wall.unwrap_or(wall),
                    &id(),
                    slots::to_record(known.slots),
                ),
            };
            one(Shape::Written, write, *until)
        }
        attempt::Request::WriteReserved { epoch, until } => {
            let write = Call::WriteHolder {
                slot,
                id: id(),
                etag: (kept.reservation.clone()).unwrap_or_else(|| K::ETag::from("")),
                holder: K::holder(me, *epoch, kept.wall.unwrap_or(wall), &id(), None),
            };
            one(Shape::Written, write, Some(*until))
        }
        attempt::Request::Recreate => recreate(known, slot, now + rt, rt),
        attempt::Request::Release => one(
            Shape::Done,
            Call::Release { slot, id: id() },
            Some(now + rt),
        ),
    }
}

/// The blob of `slot` created again: marked at once when this member saw its group led
/// ([`LockDelays::group_was_led`](crate::lock_delay::LockDelays::group_was_led)), else after
/// a listing of the members shows whether others are alive.
pub(super) fn recreate<I: Moment, K: Carry>(
    known: &Known<I, K>,
    slot: u32,
    limit: I,
    each: std::time::Duration,
) -> Start<I, K> {
    let me = known.line.me.clone();
    let led = known.delays.group_was_led(slot);
    let call = match led {
        true => create(slot, &me, true),
        false => Call::ListMembers,
    };
    let job = Job::Recreate {
        slot,
        me,
        others: led.then_some(true),
    };
    Start::job(job, call, Some(limit), each)
}

/// A listing of the line: with slots, the slot blobs too.
pub(super) fn list<I, K: Kinds, T: Types>(known: &Known<I, K>) -> Call<T> {
    match known.slots > 1 {
        true => Call::ListGroup,
        false => Call::ListMembers,
    }
}
