//! A request on its way ([`Carrying`]): how it starts ([`Start`]), what each return of its
//! calls becomes ([`Step`]: the next call, or the member's reply), and when the call on its way
//! stops being waited for.

use super::view::{CallOf, Carry, Fail, ReturnOf};
use crate::campaign::Failed;
use crate::holder;
use crate::leading;
use crate::line::Record;
use crate::member::{Confirming, Listing, Reply};
use crate::store::{Call, Return, Types};
use crate::timing::Moment;
use crate::{Failure, StoreFailure};
use std::collections::VecDeque;
use std::time::Duration;

/// How a request starts.
pub enum Start<I, K: Carry> {
    /// Send this call; its return goes to the [`Carrying`].
    Call(Carrying<I, K>, CallOf<K>),
    /// Answered at once, nothing sent.
    Reply(Reply<K, Fail<K>>),
    /// Not a store request: a probe or a wake-up, for the shell's HTTP client.
    Http,
    /// A request not translated: the renew of a replica other than the first (a lease on
    /// several storage accounts is not a member's yet). A driver that cannot carry it out
    /// answers `cut` at `limit`, as if storage never answered (with no limit, it is never
    /// answered).
    NotCarried {
        /// When the request counts as failed.
        limit: Option<I>,
        /// Its reply then.
        cut: Reply<K, Fail<K>>,
    },
}

impl<I, K: Carry> Start<I, K> {
    /// A request that is one call, read as `shape`, cut at `limit` (`None`: waited for as long
    /// as the member waits).
    pub(super) fn one(shape: Shape, call: CallOf<K>, limit: Option<I>, each: Duration) -> Self {
        Self::job(Job::One(shape), call, limit, each)
    }

    /// A request carried out as `job` says, its first call `call` cut at `limit`, each call
    /// after it `each` after its send.
    pub(super) fn job(job: Job<K>, call: CallOf<K>, limit: Option<I>, each: Duration) -> Self {
        let replica = 0;
        Self::Call(
            Carrying {
                job,
                limit,
                each,
                replica,
            },
            call,
        )
    }

    /// The same request, sent to the replica at `replica` in the set's order.
    pub(super) fn on(mut self, replica: usize) -> Self {
        if let Self::Call(carrying, _) = &mut self {
            carrying.replica = replica;
        }
        self
    }
}

/// What comes after a call's return.
pub enum Step<K: Carry> {
    /// Send this call next.
    Call(CallOf<K>),
    /// The request is done: the member's reply.
    Reply(Reply<K, Fail<K>>),
}

/// A request being carried out: what its calls' returns become, and when the call on its way
/// stops being waited for.
pub struct Carrying<I, K: Carry> {
    job: Job<K>,
    /// The limit of the call on its way.
    limit: Option<I>,
    /// How long a call of a sequence may take, from its send.
    each: Duration,
    /// The replica its calls go to, in the set's order (0: the one account).
    replica: usize,
}

/// A read of a member's record as it came back (`None` within: gone).
type RecordRead<K> = Result<Option<<K as crate::member::Kinds>::Record>, Fail<K>>;

/// What the returns become.
pub(super) enum Job<K: Carry> {
    /// One call: its return, read so.
    One(Shape),
    /// A blob created again: after the listing (if any), marked when others are alive.
    Recreate {
        slot: u32,
        me: String,
        /// Known once listed (or at once when the member saw the blob led).
        others: Option<bool>,
    },
    /// The keeper's tidying: the deletes still to send.
    Tidy(VecDeque<CallOf<K>>),
    /// The choice's notice naming `to`, reserving `reserved` for it: the notice as the choice
    /// holds it, once written. (The records here are boxed: the jobs of a term's end are rare,
    /// and a shell keeps, and moves, every request's job on its way.)
    Notice {
        to: Box<K::Record>,
        reserved: Option<u64>,
    },
    /// The confirmation's read of the blob of `slot`, after the successor's record when it is
    /// read too (its read kept until the blob's comes), both cut at the request's one limit.
    Confirm {
        slot: u32,
        record: Option<Box<RecordRead<K>>>,
    },
    /// This member's record written saying its standby: what it says.
    Standby(Box<K::Published>),
}

/// How one call's return becomes the member's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Acquired,
    Blob,
    /// A replica's blob, with the set's marks on it.
    Stamped,
    Written,
    Done,
    Listed,
    Ahead,
    Member,
    Renewed,
    Released,
    /// A choice's read of a member's record.
    Chosen,
    /// The handoff's `change`.
    Changed,
    /// A hand-on's notice.
    Noticed,
    /// A conditional release.
    ReleasedIf,
}

impl<I: Moment, K: Carry> Carrying<I, K>
where
    Fail<K>: Failed,
{
    /// The limit of the call on its way: no answer by then is a timeout (`None`: waited for
    /// as long as the member waits, an acquire).
    pub fn limit(&self) -> Option<I> {
        self.limit
    }

    /// The storage account its calls go to: its place in the replica set (0 for the one
    /// account of a group without replicas).
    pub fn replica(&self) -> usize {
        self.replica
    }

    /// The call sent last returned `answer` at `now`: the next call, or the reply.
    pub fn answer(&mut self, answer: ReturnOf<K>, now: I) -> Step<K> {
        let limit = self.limit;
        self.limit = Some(now + self.each);
        match &mut self.job {
            Job::One(shape) => Step::Reply(reply(*shape, answer)),
            Job::Recreate { slot, me, others } => match (*others, answer) {
                (None, Return::ListMembers(listed)) => {
                    let alive = match listed {
                        Ok(records) => records
                            .iter()
                            .any(|r| r.is_alive() && r.identity() != me.as_str()),
                        // Credentials that may not list keep no member records either: the
                        // group elects as without members, and so without the delay.
                        Err(e) if e.failure() == Failure::Denied => false,
                        Err(e) => return Step::Reply(Reply::Recreated(Some(Err(e)))),
                    };
                    *others = Some(alive);
                    Step::Call(create(*slot, me, alive))
                }
                (Some(marked), Return::Recreate(r) | Return::Prepare(r)) => {
                    Step::Reply(Reply::Recreated(Some(r.map(|()| marked))))
                }
                (_, other) => unexpected(&other),
            },
            // Whatever each delete answered: a record left is tidied at a later look.
            Job::Tidy(left) => match left.pop_front() {
                Some(next) => Step::Call(next),
                None => Step::Reply(Reply::Done(Ok(()))),
            },
            Job::Notice { to, reserved } => match answer {
                Return::WriteNotice(r) => Step::Reply(Reply::Leading(leading::Reply::Choice(
                    Box::new(crate::choice::Reply::Noticed(
                        r.map(|etag| K::noticed(to, *reserved, etag)),
                    )),
                ))),
                other => unexpected(&other),
            },
            Job::Confirm { slot, record } => match answer {
                // The blob is read after the record, within the same limit: a successor that
                // published a new lease id by the record's read had written its epoch by then,
                // which the blob then shows (its record is not judged: the lease is taken).
                Return::ReadRecord(read) if record.is_none() => {
                    *record = Some(Box::new(read));
                    match limit {
                        Some(limit) if now >= limit => {
                            let blob = Err(Fail::<K>::timed_out(self.each));
                            let record = record.take().map(|r| *r);
                            let led = false;
                            let read = Confirming { blob, record, led };
                            Step::Reply(Reply::Confirming(Box::new(read)))
                        }
                        limit => {
                            self.limit = limit;
                            Step::Call(Call::Read { slot: *slot })
                        }
                    }
                }
                Return::Read(blob) => Step::Reply(Reply::Confirming(Box::new(Confirming {
                    blob,
                    record: record.take().map(|r| *r),
                    led: false,
                }))),
                other => unexpected(&other),
            },
            Job::Standby(says) => match answer {
                Return::WriteMember(r) => Step::Reply(Reply::Wrote(r.map(|()| says.clone()))),
                other => unexpected(&other),
            },
        }
    }
}

/// The blob of `slot` created again: marked (a lock-delay follows) when others may have run a
/// body on it, plainly otherwise (a brand-new group).
pub(super) fn create<T: Types>(slot: u32, me: &str, marked: bool) -> Call<T> {
    match marked {
        true => Call::Recreate {
            slot,
            by: me.to_owned(),
        },
        false => Call::Prepare { slot, create: true },
    }
}

/// One call's return read as `shape` says.
fn reply<K: Carry>(shape: Shape, answer: ReturnOf<K>) -> Reply<K, Fail<K>>
where
    Fail<K>: Failed,
{
    use leading::Reply as L;
    match (shape, answer) {
        (Shape::Acquired, Return::Acquire(r)) => Reply::Acquired(r),
        (Shape::Blob, Return::Read(r)) => Reply::Blob(r.map(Box::new)),
        (Shape::Stamped, Return::ReadStamped(r)) => Reply::Stamped(r.map(Box::new)),
        (Shape::Written, Return::WriteHolder(r)) => Reply::Written(r),
        (
            Shape::Done,
            Return::Release(r)
            | Return::DeleteMember(r)
            | Return::CreateStamped(r)
            | Return::CreateMember(r)
            | Return::AcquireMember(r)
            | Return::RenewMember(r)
            | Return::WriteMember(r),
        ) => Reply::Done(r),
        (Shape::Listed, Return::ListMembers(r)) => Reply::Listed(r.map(|records| Listing {
            records,
            slots: None,
        })),
        (Shape::Listed, Return::ListGroup(r)) => Reply::Listed(r.map(|l| Listing {
            records: l.records,
            slots: Some(l.slots),
        })),
        (Shape::Ahead, Return::ReadRecord(r)) => Reply::Ahead(r.map(|r| r.map(Box::new))),
        (Shape::Member, Return::ReadMember(r)) => {
            Reply::Member(r.map(|(state, etag)| (K::leased(&state), etag)))
        }
        (Shape::Renewed, Return::Renew(r)) => Reply::Leading(L::Renew(match r {
            Ok(()) => holder::Reply::Renewed,
            Err(e) if e.loses_lease() => holder::Reply::Refused {
                missing: e.failure() == Failure::Missing,
            },
            Err(_) => holder::Reply::Failed,
        })),
        (Shape::Released, Return::Release(r)) | (Shape::ReleasedIf, Return::ReleaseIf(r)) => {
            Reply::Leading(L::Released(r))
        }
        // A record that is gone, or not read, is no successor confirmed.
        (Shape::Chosen, Return::ReadRecord(r)) => Reply::Leading(L::Choice(Box::new(
            crate::choice::Reply::Read(r.ok().flatten()),
        ))),
        (Shape::Changed, Return::Change(r)) => Reply::Leading(L::Changed(r)),
        (Shape::Noticed, Return::WriteNotice(r)) => Reply::Leading(L::Noticed(r)),
        (_, other) => unexpected(&other),
    }
}

/// A return that is not the call's: the driver answered another call than the one sent.
pub(super) fn unexpected<T: Types, R>(answer: &Return<T>) -> R {
    panic!(
        "a return to another call than the one sent ({})",
        answer.name()
    )
}
