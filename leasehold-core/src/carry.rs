//! A member's requests carried out as store calls: [`carry`] turns one
//! [`member::Request`](crate::member::Request), with what the member knows ([`View`]), into the
//! [`store::Call`](crate::store::Call)s it is made of, one after the other ([`Carrying`]), and
//! their [`Return`]s into the member's [`Reply`]. Most requests are one call; a blob created
//! again lists the members first unless this member saw it led (docs/safety.md, "Recovery from
//! anything"); the keeper's tidying deletes each long-dead record, each conditional on its ETag
//! as listed; a listing covers the slot blobs only when the group has slots.
//!
//! The store's types and the member's are tied by [`Carry`]: the member's [`Kinds`] and the
//! store's [`Types`] stay two traits (a member handles a notice as its choice wrote it, the
//! store the notice it writes; the store has types a member never sees: the holder metadata,
//! a lease state), and `Carry::Store` says which of them are the same type.
//!
//! Each call has a limit ([`Carrying::limit`]): a driver that has no answer by then answers
//! with the call's timeout ([`Call::failed`] with [`Failed::timed_out`]) and goes on, as the
//! shell cuts each request at its limit (docs/safety.md, rule 4). What is not a store call (a probe, a
//! wake-up: the HTTP client's) or not translated yet (the handoff's own requests, a standby)
//! the translation says so ([`Start::Http`], [`Start::NotCarried`]).

use crate::attempt;
use crate::campaign::{self, Failed};
use crate::holder;
use crate::leading;
use crate::line::Record;
use crate::member::{Kept, Key, Kinds, Known, Listing, Reply, Request};
use crate::pace::Pace;
use crate::record;
use crate::slots::{self, WaitRequest};
use crate::store::{Call, Return, Types};
use crate::timing::Moment;
use crate::watch;
use crate::{Failure, StoreFailure};
use std::collections::VecDeque;

#[cfg(test)]
mod tests;

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
    /// group of `slots` as a holder records it ([`slots::to_record`]).
    fn holder(
        me: &str,
        epoch: u64,
        wall: Self::Wall,
        id: &Self::LeaseId,
        slots: Option<u32>,
    ) -> <Self::Store as Types>::Holder;

    /// Whether a record's lease state, as read, is leased.
    fn leased(state: &<Self::Store as Types>::LeaseState) -> bool;
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
    /// What the store's answers left.
    pub kept: &'a Kept<K>,
    /// The lease id the next acquire goes out with.
    pub next_id: &'a K::LeaseId,
    /// The lease id of the member's record (the shell's, for the record's lifetime).
    pub record_lease: &'a K::LeaseId,
    /// Whether a blob found missing is created again.
    pub create_if_missing: bool,
}

/// How a request starts.
pub enum Start<I, K: Carry> {
    /// Send this call; its return goes to the [`Carrying`].
    Call(Carrying<I, K>, CallOf<K>),
    /// Answered at once, nothing sent.
    Reply(Reply<K, Fail<K>>),
    /// Not a store request: a probe or a wake-up, for the shell's HTTP client.
    Http,
    /// A request not translated yet: the handoff's (a choice's notice and read, a `change`, a
    /// hand-on's notice, a conditional release, the confirmation's read), a standby, a renew
    /// of a replica other than the first. A driver that cannot carry it out answers `cut` at
    /// `limit`, as if storage never answered (with no limit, it is never answered).
    NotCarried {
        /// When the request counts as failed.
        limit: Option<I>,
        /// Its reply then.
        cut: Reply<K, Fail<K>>,
    },
}

impl<I, K: Carry> Start<I, K> {
    /// A request that is one call, read as `shape`, cut at `limit`.
    fn one(shape: Shape, call: CallOf<K>, limit: Option<I>, timing: &crate::Timing) -> Self {
        let carrying = Carrying {
            job: Job::One(shape),
            limit,
            each: timing.request_timeout(),
        };
        Self::Call(carrying, call)
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
    each: std::time::Duration,
}

/// What the returns become.
enum Job<K: Carry> {
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
}

/// How one call's return becomes the member's reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Acquired,
    Blob,
    Written,
    Done,
    Listed,
    Ahead,
    Member,
    Renewed,
    Released,
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

    /// The call sent last returned `answer` at `now`: the next call, or the reply.
    pub fn answer(&mut self, answer: ReturnOf<K>, now: I) -> Step<K> {
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
        }
    }
}

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
    let one = |shape, call, limit| Start::one(shape, call, limit, &view.known.timing);
    match request {
        Request::Campaign(request) => campaign(view, request, now, wall),
        Request::Keeper(request) => keeper(view, request, now),
        Request::Leading(request) => lead(view, request),
        Request::Release { slot, id, limit } => match id {
            Some(id) => one(
                Shape::Done,
                Call::Release {
                    slot: *slot,
                    id: id.clone(),
                },
                Some(*limit),
            ),
            None => Start::Reply(Reply::Done(Ok(()))),
        },
    }
}

/// A campaign's request.
fn campaign<I: Moment, K: Carry>(
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
    let one = |shape, call, limit| Start::one(shape, call, limit, &known.timing);
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
        campaign::Request::Wait(WaitRequest::Probe(_)) => Start::Http,
        campaign::Request::Recreate { slot } => {
            if !view.create_if_missing || !known.delays.to_create(*slot, now) {
                return Start::Reply(Reply::Recreated(None));
            }
            recreate(known, *slot, soon, rt)
        }
        campaign::Request::Look { slot } => read(*slot, soon),
        campaign::Request::CheckCount | campaign::Request::Notice => read(0, soon),
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
    let id = || kept.id.clone().unwrap_or_else(|| view.next_id.clone());
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
                holder: K::holder(me, *epoch, wall, &id(), None),
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

/// The blob of `slot` created again: marked at once when this member saw it led, else after a
/// listing of the members shows whether others are alive.
fn recreate<I: Moment, K: Carry>(
    known: &Known<I, K>,
    slot: u32,
    limit: I,
    each: std::time::Duration,
) -> Start<I, K> {
    let me = known.line.me.clone();
    let led = known.delays.was_led(slot);
    let call = match led {
        true => create(slot, &me, true),
        false => Call::ListMembers,
    };
    let job = Job::Recreate {
        slot,
        me,
        others: led.then_some(true),
    };
    Start::Call(
        Carrying {
            job,
            limit: Some(limit),
            each,
        },
        call,
    )
}

/// The blob of `slot` created again: marked (a lock-delay follows) when others may have run a
/// body on it, plainly otherwise (a brand-new group).
fn create<T: Types>(slot: u32, me: &str, marked: bool) -> Call<T> {
    match marked {
        true => Call::Recreate {
            slot,
            by: me.to_owned(),
        },
        false => Call::Prepare { slot, create: true },
    }
}

/// A listing of the line: with slots, the slot blobs too.
fn list<I, K: Kinds, T: Types>(known: &Known<I, K>) -> Call<T> {
    match known.slots > 1 {
        true => Call::ListGroup,
        false => Call::ListMembers,
    }
}

/// The record keeper's request, cut at the request timeout.
fn keeper<I: Moment, K: Carry>(
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
            member: member.clone(),
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
            member: member.clone(),
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
            return Start::Call(
                Carrying {
                    job,
                    limit: Some(now + rt),
                    each: rt,
                },
                first,
            );
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
    Start::Call(
        Carrying {
            job: Job::One(shape),
            limit: Some(now + rt),
            each: rt,
        },
        call,
    )
}

/// The leader's request over its term, on the slot won with the lease id it acquired with.
fn lead<I: Moment, K: Carry>(
    view: &View<'_, I, K>,
    request: &leading::Request<I, K::Record, K::ETag>,
) -> Start<I, K>
where
    Fail<K>: Failed,
{
    let (known, kept) = (view.known, view.kept);
    let rt = known.timing.request_timeout();
    let slot = kept.slot;
    let Some(id) = kept.id.clone() else {
        return not_carried(request, rt);
    };
    let (shape, call, limit) = match request {
        leading::Request::Renew(holder::Renew { replica: 0, limit }) => {
            (Shape::Renewed, Call::Renew { slot, id }, *limit)
        }
        leading::Request::List { limit }
        | leading::Request::Relist { limit }
        | leading::Request::Choice {
            request: crate::choice::Request::List,
            limit,
        } => (Shape::Listed, list(known), *limit),
        leading::Request::Store {
            request: crate::handoff::Request::Release,
            limit,
        } => (Shape::Released, Call::Release { slot, id }, *limit),
        leading::Request::Probe { .. } | leading::Request::Wake { .. } => return Start::Http,
        other => return not_carried(other, rt),
    };
    Start::Call(
        Carrying {
            job: Job::One(shape),
            limit: Some(limit),
            each: rt,
        },
        call,
    )
}

/// A leader's request not translated yet, and what it comes to when storage never answers it:
/// a notice not written, a record not read, a `change` or a release not confirmed, a read
/// unanswered.
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
        R::List { limit } => (*limit, L::Listed(None)),
        R::Relist { limit } => (*limit, L::Relisted(false)),
        R::Probe { .. } => return Start::Http,
        R::Wake { .. } => return Start::Http,
        R::Choice { request, limit } => (
            *limit,
            L::Choice(match request {
                Choice::Notice(_) => C::Noticed(Err(failed())),
                Choice::Read(_) => C::Read(None),
                Choice::List => C::Listed(Err(failed())),
            }),
        ),
        R::Standby { limit, .. } => (*limit, L::StoodBy),
        R::Store { request, limit } => (
            *limit,
            match request {
                H::Change { .. } => L::Changed(Err(failed())),
                H::Notice { .. } => L::Noticed(Err(failed())),
                H::Release | H::ReleaseIf { .. } => L::Released(false),
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

/// One call's return read as `shape` says.
fn reply<K: Carry>(shape: Shape, answer: ReturnOf<K>) -> Reply<K, Fail<K>>
where
    Fail<K>: Failed,
{
    match (shape, answer) {
        (Shape::Acquired, Return::Acquire(r)) => Reply::Acquired(r),
        (Shape::Blob, Return::Read(r)) => Reply::Blob(r),
        (Shape::Written, Return::WriteHolder(r)) => Reply::Written(r),
        (
            Shape::Done,
            Return::Release(r)
            | Return::DeleteMember(r)
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
        (Shape::Ahead, Return::ReadRecord(r)) => Reply::Ahead(r),
        (Shape::Member, Return::ReadMember(r)) => {
            Reply::Member(r.map(|(state, etag)| (K::leased(&state), etag)))
        }
        (Shape::Renewed, Return::Renew(r)) => Reply::Leading(leading::Reply::Renew(match r {
            Ok(()) => holder::Reply::Renewed,
            Err(e) if e.loses_lease() => holder::Reply::Refused {
                missing: e.failure() == Failure::Missing,
            },
            Err(_) => holder::Reply::Failed,
        })),
        (Shape::Released, Return::Release(r)) => {
            Reply::Leading(leading::Reply::Released(r.is_ok()))
        }
        (_, other) => unexpected(&other),
    }
}

/// A return that is not the call's: the driver answered another call than the one sent.
fn unexpected<T: Types, R>(answer: &Return<T>) -> R {
    panic!(
        "a return to another call than the one sent ({})",
        answer.name()
    )
}
