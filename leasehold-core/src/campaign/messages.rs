//! What a campaign and its shell say to each other: the store requests and their replies, the
//! inputs, the outputs, what ends its wait ([`Awaits`]), how it ends, and what it asks of the
//! member it runs in ([`Grounds`]).

use crate::attempt::{self, Delay};
use crate::candidate::{self, Outcome, Seen};
use crate::exchange::{Answer, Send, Tag, Waiting};
use crate::failure::StoreFailure;
use crate::late::Settled;
use crate::quorum::{self, ReplicaSet};
use crate::slots::{PollGrounds, WaitEvent, WaitGrounds, WaitRequest};
use crate::timing::{Deadline, Timing};
use crate::watch;
use std::time::Duration;

/// The simulator's mutants that break a campaign (docs/testing.md, "The simulator"); all off
/// outside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// Those of its attempts.
    pub attempt: attempt::Mutants,
    /// `watcher-stays`: a watcher never lists nor reads ahead after a new term.
    pub watcher_stays: bool,
    /// `trust-the-notice`: a woken member that reads a handoff notice naming it leads at once,
    /// with the next epoch, without an acquire of its own and without writing that epoch.
    pub trust_the_notice: bool,
    /// Those of its attempts on several replicas.
    pub quorum: quorum::Mutants,
}

/// What a campaign is given.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// The user's timing.
    pub timing: Timing,
    /// `[lease].slots`.
    pub slots: u32,
    /// Whether a blob found missing is created again.
    pub create_if_missing: bool,
    /// The storage accounts the lease lives on: one, or a majority of 3 or 5 (docs/quorum.md).
    pub set: ReplicaSet,
    /// The simulator's mutants.
    pub mutants: Mutants,
}

/// A store request of the campaign.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<I, K> {
    /// A request of the attempt on `slot`.
    Attempt {
        /// The slot tried.
        slot: u32,
        /// The request.
        request: attempt::Request<I>,
    },
    /// A request of a watcher's round.
    Watch(watch::Request<I>),
    /// A request of a waiting member's round.
    Wait(WaitRequest<I, K>),
    /// A poller's listing of the line: then [`Reply::Listed`].
    List {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Create the blob of `slot` again if this member found it deleted and is to: then
    /// [`Reply::Recreated`].
    Recreate {
        /// The slot.
        slot: u32,
    },
    /// Read the blob of `slot` under its lock-delay (deleted again, the delay begins again):
    /// then [`Reply::Looked`].
    Look {
        /// The slot.
        slot: u32,
    },
    /// Read slot 0 for the group's count: then [`Reply::Counted`].
    CheckCount,
    /// The mutant `trust-the-notice`: read the lease blob for a notice naming this member,
    /// then [`Reply::Notice`].
    Notice,
    /// A request of the attempt on a majority of several replicas, to the replica it names:
    /// then [`Reply::Replica`].
    Replica(quorum::Request<I>),
}

/// What came back of a request ([`Request`]), as the shell reads it off the store.
#[derive(Debug, Clone)]
pub enum Reply<V, E> {
    /// To an attempt's request.
    Attempt(attempt::Event<E>),
    /// To a watcher's request.
    Watch(watch::Event<E>),
    /// To a waiting member's request.
    Wait(WaitEvent<V, E>),
    /// The poller's listing.
    Listed(Result<(), E>),
    /// The blob was created again, or not.
    Recreated,
    /// The blob under its lock-delay was looked at.
    Looked,
    /// Slot 0 said whether the group counts other slots than this member.
    Counted(Result<bool, E>),
    /// The notice: `Some(last epoch)` when it names this member.
    Notice(Result<Option<Option<u64>>, E>),
    /// What a replica answered.
    Replica(quorum::Reply),
}

/// What the shell reports.
#[derive(Debug, Clone)]
pub enum Input<I, V, E> {
    /// The campaign begins.
    Start,
    /// A request's answer.
    Answer(Answer<I, Reply<V, E>>),
    /// The instant [`Awaits`] named came.
    Timer,
    /// `stop` came.
    Stop,
    /// A wake-up came.
    Woken,
    /// A listing of the record keeper placed this member next in line (after
    /// [`Output::Listen`]).
    Placed,
    /// The shell listens for that now ([`Output::Listen`]).
    Listening,
    /// The body could start now, or not ([`Output::AskBody`]).
    MayLead(bool),
    /// The late acquire being sat out ([`Output::SitOut`]) settled so.
    Settled(Settled),
}

/// A term won: its slot, deadline and epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Won<I> {
    /// The slot won.
    pub slot: u32,
    /// Counted from the acquire's send; on several replicas, the k-th latest of the leases that
    /// count.
    pub deadline: Deadline<I>,
    /// The epoch written.
    pub epoch: u64,
    /// Whether it was the one a handoff reserved.
    pub reserved: bool,
    /// On several replicas, each one's lease in the set's order: `Some` for one held that
    /// counts (the holder renews it), `None` elsewhere. Empty for the one account.
    pub leases: Vec<Option<Deadline<I>>>,
    /// On several replicas, what the leader needs to win back those it does not hold.
    pub unheld: crate::quorum::Unheld<I>,
}

/// Why a campaign ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End<I, E> {
    /// A term was won.
    Won(Won<I>),
    /// `stop` came.
    Stopped,
    /// Storage refused the credentials before it ever accepted them.
    Denied(E),
    /// A campaign of one round ([`Campaign::one_round`](super::Campaign::one_round)) that won nothing: what it came to.
    Round(Result<Outcome, E>),
}

/// A line of the log that the campaign calls for.
#[derive(Debug, Clone)]
pub enum Say<I, E> {
    /// The candidate's.
    Candidate(candidate::Note<I, E>),
    /// A watcher acquires, for this reason.
    Acquiring(watch::Why),
    /// A watcher found the lease blob gone: it campaigns for it.
    BlobGone,
    /// A shutdown came while the acquire or the read was on its way: the lease just acquired
    /// goes back before an epoch is written.
    ShuttingDown,
    /// Stopping without the answer to the late acquire: a lease it took expires unrenewed at
    /// this instant.
    Unsettled(I),
    /// On a replica set, a majority was won but these replicas (by place) carry another set's
    /// stamp, or none: they count for nobody (docs/quorum.md, the rule *One replica set*).
    /// Said when the replicas found so change.
    Foreign(Vec<usize>),
    /// On a replica set without `[storage].create_if_missing`, these replicas' blobs are missing
    /// and are not created: they count for nobody. Said when the replicas found so change.
    Missing(Vec<usize>),
}

/// What the shell does.
#[derive(Debug, Clone)]
pub enum Output<I, K, E> {
    /// Send this request.
    Send(Send<Request<I, K>>),
    /// The answer to this request is no longer wanted (a request in a task of its own goes
    /// on, its answer dropped).
    Forget(Tag),
    /// The lease id is spent: the next acquire goes out with a new one, drawn now. (An
    /// output, not a question: the member tells its record keeper of the new id, and when
    /// it does, after the requests before it, is part of the history.)
    SpendId,
    /// The acquire under this tag got no answer in time: never sent again, its answer awaited
    /// in the background, a late success released at once ([`crate::late`]). On several
    /// replicas ([`Request::Replica`]), an acquire the attempt on a majority still awaits when
    /// it ends: a late success is released on its replica, and nobody sits it out.
    Late(Tag),
    /// The late acquire is sat out: tell the campaign when it settled ([`Input::Settled`],
    /// which [`Awaits::settled`] asks for).
    SitOut,
    /// Listen for a listing that places this member next in line: then [`Input::Listening`],
    /// at once.
    Listen,
    /// Ask the body whether it could start now: then [`Input::MayLead`].
    AskBody,
    /// The line changed: show it.
    ShowLine,
    /// Log this.
    Say(Say<I, E>),
    /// A round ended, with its failure if it failed.
    Rounded(Option<E>),
    /// The campaign is over.
    End(End<I, E>),
}

/// What ends the campaign's wait: [`Waiting`] (the answers awaited, the timer), and the
/// domain's events it listens for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaits<I> {
    /// The answers and the timer.
    pub waiting: Waiting<I>,
    /// `stop` ends it ([`Input::Stop`]).
    pub stop: bool,
    /// A wake-up ends it ([`Input::Woken`]).
    pub woken: bool,
    /// A listing that places this member next in line ends it ([`Input::Placed`]).
    pub placed: bool,
    /// The late acquire's settling ends it ([`Input::Settled`]).
    pub settled: bool,
}

/// The errors a campaign reports for what is not a store's answer.
pub trait Failed: StoreFailure {
    /// No answer (or no epoch confirmed) within `span`.
    fn timed_out(span: Duration) -> Self;
    /// The blob carries an epoch that has no successor.
    fn last_epoch(last: u64) -> Self;
}

/// What a campaign asks of the member it runs in, answered at the moment asked: what its
/// rounds ask ([`attempt::Grounds`], [`watch::Grounds`], [`PollGrounds`], [`WaitGrounds`]),
/// and the member's own state.
pub trait Grounds<I, K, V, T>:
    attempt::Grounds + watch::Grounds<I, T> + PollGrounds + WaitGrounds<K, V>
{
    /// What the candidate sees now ([`Seen`]).
    fn seen(&self) -> Seen<I>;
    /// Whether it is a member with a record ([`Seen::member`]), without the rest of what it
    /// sees (its place in line is a walk along the line).
    fn member(&self) -> bool {
        self.seen().member
    }
    /// A random draw in `[0, 1)`.
    fn draw(&mut self) -> f64;
    /// An attempt on `slot` begins: its acquire goes out with the member's lease id now.
    fn begin(&mut self, slot: u32);
    /// The epoch a handoff's wake-up reserved for this member, taken (once).
    fn reserved(&mut self) -> Option<u64>;
    /// Tell the lock-delay of `slot`.
    fn delay(&mut self, slot: u32, delay: Delay);
    /// Storage answered: the credentials are good.
    fn authorized(&mut self);
    /// When the late acquire the member has not settled yet was sent, if there is one.
    fn late_sent(&self) -> Option<I>;
    /// The largest epoch this member has seen or written (on several replicas, the next
    /// term's epoch is above it: docs/quorum.md, the rule *Epochs*).
    fn epoch_seen(&self) -> Option<u64>;
}
