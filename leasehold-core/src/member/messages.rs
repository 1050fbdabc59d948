//! What a member and its shell say to each other: its settings, the store requests of its
//! roles ([`Request`]) and what came back of them ([`Reply`]: the store's data, which the member
//! reads itself), the inputs, the outputs, what ends its wait ([`Awaits`]), and what only the
//! shell can do for it ([`Env`]: a draw, a lease id, the wall clock in milliseconds).

use super::kinds::Kinds;
use super::known::Note;
use crate::campaign;
use crate::exchange::{Answer, Send, Tag, Waiting};
use crate::holder::{self, Tenure};
use crate::late::{self, Settled};
use crate::leading::{self, Ended, Stop};
use crate::line::{Found, Record};
use crate::quorum::{ReplicaSet, Stamp};
use crate::record;
use crate::term::{Broken, Done, TermEnd};
use crate::timing::{Deadline, Timing};
use crate::wake::WakeAnswer;
use std::time::Duration;

/// The key of a member record of the store `K`.
pub type Key<K> = <<K as Kinds>::Record as Record>::Key;

/// What a member is given.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The user's timing.
    pub timing: Timing,
    /// `[lease].slots`.
    pub slots: u32,
    /// This member's identity.
    pub me: String,
    /// `[election].priority`.
    pub priority: i64,
    /// `[election].preempt_after` (`None`: off).
    pub preempt_after: Option<Duration>,
    /// Whether a blob found missing is created again.
    pub create_if_missing: bool,
    /// The storage accounts the lease lives on: one, or a majority of 3 or 5 (docs/quorum.md).
    pub set: ReplicaSet,
    /// It stands for one term only.
    pub one_term: bool,
    /// Storage accepted the credentials in an earlier member of this process (the daemon
    /// starts a new member at each SIGTSTP/SIGCONT session): a refusal is then retried, as a
    /// rotated key or an expired SAS is; only one before storage ever accepted them ends the
    /// member (docs/configuration.md, "Exit codes").
    pub authorized: bool,
    /// The simulator's mutants (all off outside it).
    pub mutants: Mutants,
}

/// The simulator's mutants that break a member (docs/testing.md, "The simulator").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// Its campaign's.
    pub campaign: campaign::Mutants,
    /// Its terms'.
    pub leading: leading::Mutants,
    /// Its loop of terms'.
    pub terms: Broken,
    /// `slot-refill-late`: a poller tries only as many slots as the last look showed free.
    pub refill_late: bool,
    /// `create-unmarked`: a member that saw its group led creates a missing blob plainly when
    /// its listing shows no other live member, as a brand-new group's.
    pub create_unmarked: bool,
    /// `brand-new-slot-delayed`: a member that saw any slot of its group led takes every
    /// slot's blob for one led, so a blob no leader took yet gets a lock-delay.
    pub brand_new_slot_delayed: bool,
}

/// What the shell does for the member that the core must not do itself.
pub trait Env<K: Kinds> {
    /// A uniform draw in `[0, 1)`.
    fn draw(&mut self) -> f64;
    /// A lease id never used before: the next acquire goes out with it.
    fn lease_id(&mut self) -> K::LeaseId;
    /// The wall clock now, in milliseconds since 1970 (an epoch is drawn from it).
    fn wall_ms(&mut self) -> u64;
}

/// A store request of one of the member's roles, as that role asked it. What the request
/// needs beside it (the lease id, the slot blob read last, the record ahead, the dead records)
/// the shell reads off [`Member::known`](super::Member::known) and
/// [`Member::kept`](super::Member::kept) when it sends it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<I, K: Kinds> {
    /// The campaign's.
    Campaign(campaign::Request<I, Key<K>>),
    /// The record keeper's.
    Keeper(record::Request<K::Published>),
    /// The leader's, over its term.
    Leading(leading::Request<I, K::Record, K::ETag>),
    /// `request` on the replica at `replica` in the set's order: a member on several replicas
    /// sends its record requests and its listings to every one (docs/quorum.md; the answers
    /// are one for the role that asked). (Boxed: rare beside the rest.)
    OnReplica {
        /// Its place in the set.
        replica: usize,
        /// The request.
        request: Box<Request<I, K>>,
    },
    /// The release of what a late acquire on `slot` took with `id` (on several replicas, on
    /// `replica`): then [`Reply::Done`].
    Release {
        /// The slot the late acquire was on.
        slot: u32,
        /// The replica it was on, in the set's order (0: the one account).
        replica: usize,
        /// The lease id it went out with.
        id: Option<K::LeaseId>,
        /// No answer by then is no confirmation.
        limit: I,
    },
}

/// A listing of the line: the member records, and with slots the slot blobs.
#[derive(Debug, Clone)]
pub struct Listing<R, S> {
    /// The member records.
    pub records: Vec<R>,
    /// The slot blobs (`None`: the group has one slot).
    pub slots: Option<Vec<S>>,
}

/// The confirmation's read of the lease blob, and of the successor's record ([`Reply::Confirming`]).
#[derive(Debug)]
pub struct Confirming<K: Kinds, E> {
    /// The blob as read.
    pub blob: Result<K::Blob, E>,
    /// The successor's record as read (`None` within: gone).
    pub record: Option<Result<Option<K::Record>, E>>,
    /// On several replicas: another member's epoch above the term's on a majority of them, so
    /// that member leads, and the lease is no longer the holder's to move
    /// ([`Read::Led`](crate::confirmation::Read::Led)). Always `false` on one account.
    pub led: bool,
}

/// What came back of a [`Request`], as the shell reads it off the store: the data itself, which
/// the member takes in (the line, the lock-delays, the count, the credentials) before it tells
/// the role that asked.
#[derive(Debug)]
pub enum Reply<K: Kinds, E> {
    /// An acquire's answer (the late acquire's too).
    Acquired(Result<(), E>),
    /// A read of a lease or slot blob.
    /// (The blob, a record and what a record says are boxed: every reply moves through the
    /// member by value, most of them a few bytes.)
    Blob(Result<Box<K::Blob>, E>),
    /// A read of one replica's lease blob, with the replica set's marks on it (boxed too).
    Stamped(Result<Box<(K::Blob, Stamp)>, E>),
    /// An epoch write: the blob's ETag after it.
    Written(Result<K::ETag, E>),
    /// A blob created again, marked for a lock-delay or not (`None`: nothing was to be created).
    Recreated(Option<Result<bool, E>>),
    /// A listing of the line.
    Listed(Result<Listing<K::Record, K::Slot>, E>),
    /// A fresh read of the record ahead (`None`: it is gone).
    Ahead(Result<Option<Box<K::Record>>, E>),
    /// A read of a member's record: whether it is leased, and its ETag.
    Member(Result<(bool, K::ETag), E>),
    /// A probe of the member ahead at its URL with its wake token: what answered there.
    Probed(Found),
    /// Done, with this answer (a record request, a release).
    Done(Result<(), E>),
    /// A reply of the leader's, as its messages name them.
    Leading(leading::Reply<K::Record, K::Notice, K::ETag, E>),
    /// The confirmation's read of the lease blob, and of the successor's record when it asked
    /// for it (`None`: not asked): the member judges them, its line taking a fresh record
    /// ([`confirmation::judge`](crate::confirmation::judge)).
    /// (Boxed: the largest reply, and a rare one; every reply is moved through the member.)
    Confirming(Box<Confirming<K, E>>),
    /// This member's record was written saying this (its standby), or why not.
    Wrote(Result<Box<K::Published>, E>),
    /// Nothing was sent (nobody ahead to read).
    Nothing,
}

/// What the shell reports.
#[derive(Debug)]
pub enum Input<I, K: Kinds, E> {
    /// The member starts: it joins the line, and campaigns.
    Start,
    /// A request's answer.
    Answer(Answer<I, Reply<K, E>>),
    /// The instant [`Awaits`] named came.
    Timer,
    /// Shutdown was asked for.
    Shutdown,
    /// A one-term member ([`Settings::one_term`]: `leasehold run --try`, `--timeout`) gives up
    /// campaigning: its campaign ends between attempts, never cutting one, so an acquire on
    /// its way that wins still leads its term. No shutdown: a term it leads runs on. Ignored
    /// by a member that stands for many terms.
    GiveUp,
    /// A wake-up came: whether it carried this member's token (compared with
    /// [`wake::same`](crate::wake::same)), and a handoff's reservation (the header's value).
    /// Answered in the same step ([`Output::Woken`]).
    Wake {
        /// It carried the token.
        token_matches: bool,
        /// The reservation it carried.
        handoff: Option<String>,
    },
    /// The body could start now, or not (after [`Output::AskBody`]).
    MayCampaign(bool),
    /// The body is gone, for this reason; with [`TermEnd::Overran`] it was killed and is still
    /// there: then [`Input::StuckGone`].
    BodyGone(TermEnd),
    /// The body that outlived its kill is gone at last.
    StuckGone,
}

/// The term won, for the body: what it runs under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term<I, W> {
    /// The slot held.
    pub slot: u32,
    /// The term's epoch.
    pub epoch: u64,
    /// The deadlines of the lease as won.
    pub deadline: Deadline<I>,
    /// Whether it was the epoch a handoff reserved.
    pub reserved: bool,
    /// The wall clock the epoch was drawn from.
    pub acquired: Option<W>,
}

/// The role a member plays now, for whoever watches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// It campaigns, or rests between terms.
    Follower,
    /// It leads the term of `epoch` on `slot`, its body running.
    Leader {
        /// The term's epoch.
        epoch: u64,
        /// The slot held.
        slot: u32,
    },
}

/// A line of the log that the member calls for.
#[derive(Debug, Clone)]
pub enum Say<I, K: Kinds, E> {
    /// The campaign's.
    Campaign(campaign::Say<I, E>),
    /// The record keeper's.
    Keeper(record::Say<E>),
    /// The settling of a late acquire.
    Late(late::Said<E>),
    /// A late acquire is settled so.
    Settled(Settled),
    /// The term's end's (boxed, as the term's end: rare, and large beside the outputs of
    /// every step).
    Leading(Box<leading::Say<K::Record, E>>),
    /// What a renew's answer changed.
    Renewal(holder::Note<I>),
    /// The member of higher priority eligible first, and in how long.
    Pending(Option<(String, Duration)>),
    /// A term was won.
    Won(Term<I, K::Wall>),
    /// The body outlived its kill; waited for until the lease surely expired.
    Outlasting {
        /// The kill deadline it outlived.
        kill_at: I,
        /// When the lease it was last renewed under has surely expired.
        expiry: I,
    },
    /// A term ended so (boxed).
    TermEnded(Box<Ended<I, K::Record>>),
    /// Out of the election until `until` because the term ended for `why`.
    Resting {
        /// Why the term ended.
        why: TermEnd,
        /// When it campaigns again.
        until: I,
    },
    /// The member probed by the lookout did not answer: passed over.
    PassedOver(String),
    /// The member ahead in line is not the process its record names: its record is passed
    /// over (a ghost).
    Ghost(String),
    /// The write of the epoch a handoff reserved for this member was answered (`failed`:
    /// refused, or no answer; the attempt reads the blob and writes the next epoch as without
    /// it).
    Reserved {
        /// The epoch reserved.
        epoch: u64,
        /// Why it was not written.
        failed: Option<E>,
    },
    /// A release of the lease got no confirmation (an attempt giving back the lease it took,
    /// or a term's release): the lease expires on its own within the lease duration.
    Unreleased(E),
    /// Shutdown ended the campaign: the member stopped as a follower.
    StoppedFollowing,
}

/// What the shell does.
#[derive(Debug, Clone)]
pub enum Output<I, K: Kinds, E> {
    /// Send this request.
    Send(Send<Request<I, K>>),
    /// The answer to this request is no longer wanted (a request on its way goes on, its
    /// answer dropped).
    Forget(Tag),
    /// Start the body under this term.
    StartBody(Term<I, K::Wall>),
    /// The lease as the holder sees it changed: the body reads its deadlines from it.
    Tenure(Tenure<I>),
    /// Tell the body to stop (once).
    StopBody(Stop),
    /// The body is gone and renewing stopped: the member no longer leads.
    SteppedDown {
        /// Why the body ended, as the term takes it.
        end: TermEnd,
        /// The holder's last word on the lease.
        last: Tenure<I>,
    },
    /// The role it plays now.
    Role(Role),
    /// A rest that kept it out of the election ([`Say::Resting`]) is over: it is back in
    /// line, following (its campaign's requests come next).
    Rested,
    /// Ask the body whether it may campaign now: then [`Input::MayCampaign`].
    AskBody,
    /// How the wake-up of this step was taken (the daemon answers it so).
    Woken(WakeAnswer),
    /// The line changed: show it.
    ShowLine,
    /// Log this.
    Say(Say<I, K, E>),
    /// What a question answered from what the member knows changed.
    Note(Note),
    /// A round of the campaign ended, with its failure if it failed.
    Rounded(Option<E>),
    /// The member left the line and is over: its loop ended so, or storage refused the
    /// credentials before it ever accepted them.
    End(Result<Done, E>),
}

/// What ends the member's wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaits<I> {
    /// The answers awaited and the one timer.
    pub waiting: Waiting<I>,
    /// The body's answer ([`Input::MayCampaign`]).
    pub may_campaign: bool,
    /// The body's end ([`Input::BodyGone`]).
    pub body: bool,
    /// The end of a body that outlived its kill ([`Input::StuckGone`]).
    pub stuck: bool,
    /// It is over: nothing ends its wait.
    pub over: bool,
}
