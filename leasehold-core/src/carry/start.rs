//! Where a member's request starts: each role's requests to their own translation, and a late
//! acquire's release.

use super::campaign::campaign;
use super::carrying::{Shape, Start};
use super::keeper::keeper;
use super::lead::lead;
use super::view::{Carry, Fail, View};
use crate::campaign::Failed;
use crate::member::{Reply, Request};
use crate::store::Call;
use crate::timing::Moment;

/// Starts carrying `request` out at `now`, the wall clock reading `wall`, with what `view`
/// shows.
pub fn carry<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    request: &Request<I, K>,
    now: I,
    wall: K::Wall,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let rt = view.known.timing.request_timeout();
    match request {
        Request::Campaign(request) => campaign(view, request, now, wall),
        Request::Keeper(request) => keeper(view, request, now),
        Request::Leading(request) => lead(view, request, now, wall),
        Request::OnReplica { replica, request } => carry(view, request, now, wall).on(*replica),
        Request::Release {
            slot,
            replica,
            id,
            limit,
        } => match id {
            Some(id) => Start::one(
                Shape::Done,
                Call::Release {
                    slot: *slot,
                    id: id.clone(),
                },
                Some(*limit),
                rt,
            )
            .on(*replica),
            None => Start::Reply(Reply::Done(Ok(()))),
        },
    }
}
