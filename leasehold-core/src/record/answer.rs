//! What each answer to a request on the member's own record means ([`after_delete`],
//! [`after_create`], [`after_acquire`], [`after_renew`]), as [`Reply`], [`Join`] and [`Outcome`].

use super::rounds::Kept;
use crate::failure::{Failure, StoreFailure};
use crate::pace::Pace;

/// What a request on the member's own record came to, as the keeper tells them apart
/// ([`Reply::of`] the store's answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Done.
    Done,
    /// The record does not exist (404).
    Missing,
    /// A delete without a lease id found the record leased (412 `LeaseIdMissing`): by another
    /// instance of this identity, or by this one (a take whose answer was lost).
    LeasedElsewhere,
    /// Another lease holds the record (409 `LeaseAlreadyPresent`).
    Held,
    /// Any other conflict (409, 412): the record or its lease is not as the request expected.
    Conflict,
    /// The credentials were refused.
    Denied,
    /// No answer that says either (a timeout, a 5xx, no connection).
    Failed,
}

impl Reply {
    /// What the store's answer to a request on the record came to.
    pub fn of<E: StoreFailure>(answer: &Result<(), E>) -> Self {
        let Err(e) = answer else {
            return Self::Done;
        };
        if e.lease_id_missing() {
            return Self::LeasedElsewhere;
        }
        match e.failure() {
            Failure::Missing => Self::Missing,
            Failure::Held => Self::Held,
            Failure::LeaseLost => Self::Conflict,
            Failure::Denied => Self::Denied,
            _ => Self::Failed,
        }
    }

    /// Whether another instance has the record: any conflict.
    fn conflicts(self) -> bool {
        matches!(self, Self::LeasedElsewhere | Self::Held | Self::Conflict)
    }
}

/// Where joining the line goes next: a record is created anew at each join (its creation time
/// is when the member joined), so a record this identity left before goes first; one whose
/// lease is held belongs to a live instance, unless the lease is ours.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Join {
    /// Delete the old record with our record lease id (it may be ours: a take whose answer was
    /// lost).
    DeleteOurs,
    /// Create the record.
    Create,
    /// Take the record's lease.
    Acquire,
    /// The join ends so.
    End(Outcome),
}

/// How an attempt to join or keep the record ended, for the member's standing and the
/// keeper's next round ([`Outcome::kept`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// In line, under our lease.
    Joined,
    /// Another live instance holds the record of this identity: out of line for now.
    Duplicate,
    /// The credentials are refused member records: none, for now.
    Refused,
    /// The record is gone (deleted by a leader that saw it dead long enough, or by hand): join
    /// again.
    Rejoin,
    /// Our record lease lapsed and someone took it, or it was broken: take it back (the place in
    /// line is kept: the record is the same).
    TakeBack,
    /// Anything else: again soon.
    Retry,
}

impl Outcome {
    /// When the keeper tries again ([`Outcome::TakeBack`] is done at once, not waited for).
    pub fn kept(self) -> Kept {
        match self {
            Self::Joined => Kept::Ok,
            Self::Duplicate => Kept::Later(Pace::RECORD_RENEW),
            Self::Refused => Kept::Later(Pace::LIST_EVERY),
            Self::Rejoin | Self::TakeBack | Self::Retry => Kept::Retry,
        }
    }

    /// Any request's failure that no rule of its own covers.
    fn of_failure(reply: Reply) -> Self {
        match reply {
            Reply::Denied => Self::Refused,
            _ => Self::Retry,
        }
    }
}

/// After the delete of an old record (`ours`: the one with our lease id, after one without
/// found it leased).
pub fn after_delete(reply: Reply, ours: bool) -> Join {
    match reply {
        Reply::LeasedElsewhere if !ours => Join::DeleteOurs,
        Reply::Done | Reply::Missing => Join::Create,
        r if r.conflicts() => Join::End(Outcome::Duplicate),
        r => Join::End(Outcome::of_failure(r)),
    }
}

/// After the record's creation: created meanwhile by another instance of this identity is a
/// conflict.
pub fn after_create(reply: Reply) -> Join {
    match reply {
        Reply::Done => Join::Acquire,
        r if r.conflicts() => Join::End(Outcome::Duplicate),
        r => Join::End(Outcome::of_failure(r)),
    }
}

/// After taking the record's lease (after creating it, or after ours lapsed and was lost).
pub fn after_acquire(reply: Reply) -> Outcome {
    match reply {
        Reply::Done => Outcome::Joined,
        Reply::Held => Outcome::Duplicate,
        Reply::Missing => Outcome::Rejoin,
        r => Outcome::of_failure(r),
    }
}

/// After a renew of the record's lease (a renew of a lapsed lease that nobody took succeeds
/// too).
pub fn after_renew(reply: Reply) -> Outcome {
    match reply {
        Reply::Done => Outcome::Joined,
        Reply::Missing => Outcome::Rejoin,
        Reply::LeasedElsewhere | Reply::Conflict => Outcome::TakeBack,
        r => Outcome::of_failure(r),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A join deletes the old record (with our lease id when it is leased), creates it and
    /// takes its lease; another instance's record makes this one a duplicate, refused
    /// credentials refuse it, anything else is tried again.
    #[test]
    fn a_join_deletes_creates_and_takes_or_says_why_not() {
        assert_eq!(after_delete(Reply::Done, false), Join::Create);
        assert_eq!(after_delete(Reply::Missing, false), Join::Create);
        assert_eq!(
            after_delete(Reply::LeasedElsewhere, false),
            Join::DeleteOurs
        );
        let duplicate = Join::End(Outcome::Duplicate);
        assert_eq!(
            after_delete(Reply::LeasedElsewhere, true),
            duplicate,
            "not ours"
        );
        assert_eq!(after_delete(Reply::Conflict, false), duplicate);
        assert_eq!(
            after_delete(Reply::Denied, false),
            Join::End(Outcome::Refused)
        );
        assert_eq!(after_delete(Reply::Failed, true), Join::End(Outcome::Retry));
        assert_eq!(after_create(Reply::Done), Join::Acquire);
        assert_eq!(after_create(Reply::Held), duplicate, "created meanwhile");
        assert_eq!(after_create(Reply::Failed), Join::End(Outcome::Retry));
        assert_eq!(after_acquire(Reply::Done), Outcome::Joined);
        assert_eq!(after_acquire(Reply::Held), Outcome::Duplicate);
        assert_eq!(after_acquire(Reply::Missing), Outcome::Rejoin);
        assert_eq!(after_acquire(Reply::Conflict), Outcome::Retry);
        assert_eq!(Outcome::Duplicate.kept(), Kept::Later(Pace::RECORD_RENEW));
        assert_eq!(Outcome::Refused.kept(), Kept::Later(Pace::LIST_EVERY));
    }

    /// A renew keeps the record; a record gone is joined again; a lease lapsed and taken or
    /// broken is taken back; a lease held by another is tried again.
    #[test]
    fn a_renew_keeps_rejoins_or_takes_back() {
        assert_eq!(after_renew(Reply::Done), Outcome::Joined);
        assert_eq!(after_renew(Reply::Missing), Outcome::Rejoin);
        assert_eq!(after_renew(Reply::Conflict), Outcome::TakeBack);
        assert_eq!(after_renew(Reply::LeasedElsewhere), Outcome::TakeBack);
        assert_eq!(after_renew(Reply::Held), Outcome::Retry);
        assert_eq!(after_renew(Reply::Denied), Outcome::Refused);
        assert_eq!(Outcome::Rejoin.kept(), Kept::Retry);
    }
}
