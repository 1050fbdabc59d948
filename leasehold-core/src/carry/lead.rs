//! The leader's requests over its term carried out, on the slot won with the lease id it
//! acquired with: its renews, its lookout's listing, a relisting for the confirmation, a
//! release; the handoff's own in handoff.rs; a probe or a wake-up is the HTTP client's.

use super::campaign::{list, replica};
use super::carrying::{Shape, Start};
use super::handoff::{self, Held};
use super::view::{Carry, Fail, View};
use crate::campaign::Failed;
use crate::holder;
use crate::leading;
use crate::member::Reply;
use crate::store::Call;
use crate::timing::Moment;

/// The leader's request over its term, on the slot won with the lease id it acquired with.
pub(super) fn lead<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    request: &leading::Request<I, K::Record, K::ETag>,
    now: I,
    wall: K::Wall,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    use leading::Request as R;
    let (known, kept) = (view.known, view.kept);
    let rt = known.timing.request_timeout();
    let slot = kept.slot;
    let Some(id) = kept.id.clone() else {
        return not_carried(request, rt);
    };
    let one = |shape, call, limit: I| Start::one(shape, call, Some(limit), rt);
    // The handoff's requests go out under the term: without it, they are cut.
    let handing = |go: &dyn Fn(&Held<K>) -> Start<I, K>| match Held::of(view, wall) {
        Some(held) => go(&held),
        None => not_carried(request, rt),
    };
    match request {
        R::Renew(holder::Renew { replica, limit }) => {
            one(Shape::Renewed, Call::Renew { slot, id }, *limit).on(*replica)
        }
        R::List { limit } | R::Relist { limit } => one(Shape::Listed, list(known), *limit),
        R::Store { request, limit } if matches!(**request, crate::handoff::Request::Release) => {
            one(Shape::Released, Call::Release { slot, id }, *limit)
        }
        R::Choice { request, limit } => {
            handing(&|held| handoff::choice(view, held, request, *limit))
        }
        R::Standby { limit, .. } => handoff::standby(view, *limit),
        R::Store { request, limit } => handing(&|held| handoff::store(held, request, *limit, rt)),
        R::ChangeBeforeGone(to) => handing(&|held| handoff::change_before_gone(held, to, rt)),
        R::ReleaseReplica { replica, limit } => {
            one(Shape::Released, Call::Release { slot, id }, *limit).on(*replica)
        }
        // With the term's lease id (the attempt's, `View::attempt_id`) and its acquisition time.
        R::WinBack(request) => replica(view, request, now, wall).on(request.replica()),
        R::Probe { .. } | R::Wake { .. } => Start::Http,
    }
}

/// A leader's request not carried out, and what it comes to when storage never answers it: a
/// renew failed, a listing failed, a notice not written, a record not read, a `change` or a
/// release not confirmed, a read unanswered. Only a term's request without the term's lease id
/// or epoch is left so (which a term won always has: a driver's mistake).
fn not_carried<I: Moment, K: Carry>(
    request: &leading::Request<I, K::Record, K::ETag>,
    rt: std::time::Duration,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    use crate::choice::{Reply as C, Request as Choice};
    use crate::handoff::Request as H;
    use leading::{Reply as L, Request as R};
    let failed = || Fail::<K>::timed_out(rt);
    let (limit, cut) = match request {
        R::Renew(holder::Renew { limit, .. }) => (*limit, L::Renew(holder::Reply::Failed)),
        R::ReleaseReplica { limit, .. } => (*limit, L::Released(Err(failed()))),
        R::WinBack(request) => {
            let limit = match *request {
                crate::quorum::Request::Acquire { until, .. }
                | crate::quorum::Request::Read { until, .. }
                | crate::quorum::Request::WriteEpoch { until, .. } => Some(until),
                crate::quorum::Request::Create { .. } | crate::quorum::Request::Release { .. } => {
                    None
                }
            };
            return Start::NotCarried {
                limit,
                cut: Reply::Leading(L::WinBack(crate::quorum::Reply::Unknown)),
            };
        }
        R::List { limit } => (*limit, L::Listed(None)),
        R::Relist { limit } => (*limit, L::Relisted(false)),
        R::Probe { .. } => return Start::Http,
        R::Wake { .. } => return Start::Http,
        R::Choice { request, limit } => (
            *limit,
            L::Choice(Box::new(match &**request {
                Choice::Notice(_) => C::Noticed(Err(failed())),
                Choice::Read(_) => C::Read(None),
                Choice::List => C::Listed(Err(failed())),
            })),
        ),
        R::Standby { limit, .. } => (*limit, L::StoodBy),
        R::Store { request, limit } => (
            *limit,
            match &**request {
                H::Change { .. } => L::Changed(Err(failed())),
                H::Notice { .. } => L::Noticed(Err(failed())),
                H::Release | H::ReleaseIf { .. } => L::Released(Err(failed())),
                H::Read { .. } => L::Read(crate::confirmation::Read::Unanswered, None),
            },
        ),
        R::ChangeBeforeGone(_) => {
            return Start::NotCarried {
                limit: None,
                cut: Reply::Leading(L::Changed(Err(failed()))),
            };
        }
    };
    Start::NotCarried {
        limit: Some(limit),
        cut: Reply::Leading(cut),
    }
}
