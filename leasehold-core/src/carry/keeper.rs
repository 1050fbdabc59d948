//! The record keeper's requests carried out, each cut at the request timeout: its record
//! created, leased, renewed, written and deleted under the record's own lease, a listing, a
//! read of the lease blob, and the tidying: each long-dead record deleted, conditional on its
//! ETag as listed, one after the other.

use super::campaign::list;
use super::carrying::{Job, Shape, Start};
use super::view::{CallOf, Carry, Fail, View};
use crate::campaign::Failed;
use crate::line::Record;
use crate::member::Reply;
use crate::pace::Pace;
use crate::record;
use crate::store::Call;
use crate::timing::Moment;
use std::collections::VecDeque;

/// The record keeper's request, cut at the request timeout.
pub(super) fn keeper<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    request: &record::Request<K::Published>,
    now: I,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let known = view.known;
    let rt = known.timing.request_timeout();
    let key = K::key_of(&known.line.me);
    let lease = view.record_lease.clone();
    let call = match request {
        record::Request::DeleteOld { ours } => Call::DeleteMember {
            key,
            lease: ours.then_some(lease),
            etag: None,
        },
        record::Request::Create(member) => Call::CreateMember {
            key,
            member: (**member).clone(),
        },
        record::Request::TakeLease => Call::AcquireMember {
            key,
            id: lease,
            seconds: Pace::RECORD_LEASE.as_secs() as u8,
        },
        record::Request::Renew => Call::RenewMember { key, id: lease },
        record::Request::Write(member) => Call::WriteMember {
            key,
            id: lease,
            member: (**member).clone(),
        },
        record::Request::List => list(known),
        record::Request::Read => Call::Read { slot: 0 },
        record::Request::Tidy => {
            let mut deletes: VecDeque<CallOf<K>> = (known.line.long_dead(now))
                .map(|r| Call::DeleteMember {
                    key: r.key().clone(),
                    lease: None,
                    etag: Some(K::record_etag(r).clone()),
                })
                .collect();
            let Some(first) = deletes.pop_front() else {
                return Start::Reply(Reply::Done(Ok(())));
            };
            let job = Job::Tidy(deletes);
            return Start::job(job, first, Some(now + rt), rt);
        }
        record::Request::Leave => Call::DeleteMember {
            key,
            lease: Some(lease),
            etag: None,
        },
    };
    let shape = match request {
        record::Request::List => Shape::Listed,
        record::Request::Read => Shape::Blob,
        _ => Shape::Done,
    };
    Start::one(shape, call, Some(now + rt), rt)
}
