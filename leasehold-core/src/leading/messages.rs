//! What a leader and its shell say to each other over one term: the store requests and their
//! replies, the inputs, the outputs, what ends its wait ([`Awaits`]), how the term ended
//! ([`Ended`]), and what it asks of the member it runs in ([`Grounds`]).

use crate::choice;
use crate::confirmation::{Read, Record as Judged, Wake};
use crate::exchange::{self, Send, Tag, Tags, Waiting};
use crate::handoff::{self, Surrender, preparation};
use crate::holder::{self, Note, Renew, Tenure};
use crate::preemption::Preemption;
use crate::term::TermEnd;
use crate::timing::Timing;
use crate::wake::Reserved;
use std::time::Duration;

/// The simulator's mutants that break a term (docs/testing.md, "The simulator"); all off
/// outside it. (Those of the loop of terms are its [`Terms`](crate::term::Terms)'.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Mutants {
    /// The holder's.
    pub holder: holder::Mutants,
    /// The preparation's (`change-before-gone`).
    pub preparation: preparation::Mutants,
    /// The handoff's (`hop-waits-out-refusal`).
    pub handoff: handoff::Mutants,
}

/// What a leader is given when its term begins; `T` is the blob's ETag.
#[derive(Debug, Clone)]
pub struct Settings<T> {
    /// The user's timing.
    pub timing: Timing,
    /// `[election].preempt_after` (`None`: off).
    pub preempt_after: Option<Duration>,
    /// `[election].priority`.
    pub priority: i64,
    /// This member's identity.
    pub me: String,
    /// The slot held: the holder of slot 0 lists for preemption, the others look at the line
    /// as their record keeper lists it ([`Listing::for_slot`](crate::preemption::lookout::Listing::for_slot)).
    pub slot: u32,
    /// `[lease].slots`.
    pub slots: u32,
    /// The term's epoch.
    pub epoch: u64,
    /// The blob's ETag after the term's own epoch write, when known.
    pub etag: Option<T>,
    /// Whether this member has a line of members to hand the lease to (it prepares a handoff
    /// while the body stops, and hands the lease over; without one it releases).
    pub lined: bool,
    /// The storage accounts the group's lease lives on (one, or a majority of 3 or 5).
    pub set: crate::quorum::ReplicaSet,
    /// The simulator's mutants.
    pub mutants: Mutants,
}

/// A request of the leader; `R` is a member's record, `T` the blob's ETag.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<I, R, T> {
    /// Renew one replica's lease, cut at its limit: then [`Reply::Renew`].
    Renew(Renew<I>),
    /// Release the term's lease on a replica beyond the first, cut at `limit`, beside the
    /// release or handoff of the first (docs/quorum.md): not awaited, for its answer changes
    /// nothing (a lease not released runs out within `L`).
    ReleaseReplica {
        /// Its place in the set.
        replica: usize,
        /// No answer by then is no confirmation.
        limit: I,
    },
    /// A request of winning back a replica the term does not hold (docs/quorum.md, the rule
    /// *Renewing*): its acquire, its read, the term's epoch written there, its release (not
    /// awaited). Then [`Reply::WinBack`].
    WinBack(crate::quorum::Request<I>),
    /// List the line for the lookout, cut at `limit`: then [`Reply::Listed`].
    List {
        /// No answer by then is a failure.
        limit: I,
    },
    /// Probe the member `to` at its advertised `url` (a `POST /wake` without its token): then
    /// [`Reply::Probed`].
    Probe {
        /// The member due.
        to: String,
        /// Its advertised URL.
        url: String,
    },
    /// A request of the choice of a successor ([`choice::Chooser`]: its notice under the
    /// term's lease, a record's read, a listing), cut at `limit`: then [`Reply::Choice`].
    Choice {
        /// The request (boxed, as every large request of a term's end: each request moves
        /// through the member by value, most of them a renew of a few bytes).
        request: Box<choice::Request<R>>,
        /// When it counts as failed.
        limit: I,
    },
    /// This member's record says it stands by for `cooldown` from now (a health step-down,
    /// a crash-loop backoff), beside the choice, cut at `limit`: then [`Reply::StoodBy`].
    Standby {
        /// How long it stands aside.
        cooldown: Duration,
        /// When it counts as failed.
        limit: I,
    },
    /// A request of the handoff on the lease blob (its `change`, a hand-on's notice, a
    /// release, the confirmation's read), cut at `limit`: then [`Reply::Changed`],
    /// [`Reply::Noticed`], [`Reply::Released`] or [`Reply::Read`].
    Store {
        /// The request (boxed).
        request: Box<handoff::Request<R, T>>,
        /// When it counts as failed.
        limit: I,
    },
    /// The lease was changed to `to`'s lease id: the line says so, and `to` is woken (with
    /// `reserved`, the wake-up carries the epoch reserved for it): then [`Reply::Woke`].
    Wake {
        /// The member handed the lease (boxed).
        to: Box<R>,
        /// The epoch reserved for it, and the ETag its epoch write is conditional on.
        reserved: Option<Reserved<T>>,
    },
    /// List the members afresh into the line, cut at `limit`, for the confirmation's hand-on:
    /// then [`Reply::Relisted`].
    Relist {
        /// When it counts as failed.
        limit: I,
    },
    /// The mutant `change-before-gone`: change the lease to `to`'s lease id under the term's
    /// own, the body still running, with no limit: then [`Reply::Changed`], whatever it says.
    ChangeBeforeGone(Box<R>),
}

/// What came back of a [`Request`]; `N` is a notice as the choice wrote it, `E` a store's
/// error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<R, N, T, E> {
    /// The renew's reply.
    Renew(holder::Reply),
    /// What the replica a request of winning it back went to answered.
    WinBack(crate::quorum::Reply),
    /// The line's candidates after the lookout's listing, or `None`: it failed.
    Listed(Option<Vec<R>>),
    /// Whether the member probed answered at its URL.
    Probed(bool),
    /// To a request of the choice (boxed, as the confirmation's read: replies of a term's
    /// end are rare, and every reply moves through the member by value).
    Choice(Box<choice::Reply<R, N, E>>),
    /// The record said its standby (or could not: the choice goes on either way).
    StoodBy,
    /// The answer to a `change`.
    Changed(Result<(), E>),
    /// The answer to a hand-on's notice: the blob's ETag after it.
    Noticed(Result<T, E>),
    /// A release's answer (an error, or none in time: not confirmed by storage).
    Released(Result<(), E>),
    /// The blob was read (and the successor's record, when asked), as the shell judges them
    /// ([`confirmation::judge`](crate::confirmation::judge)).
    Read(Read<T>, Option<Box<Judged<R>>>),
    /// What the wake-up found.
    Woke(Wake),
    /// Whether the members were listed into the line.
    Relisted(bool),
}

/// What the shell reports.
#[derive(Debug, Clone)]
pub enum Input<I, R, N, T, E> {
    /// The term begins (its lease won, renewing under way): the line's candidates as the
    /// member knows them, when that line was listed, and whether shutdown was asked already.
    Start {
        /// The candidates for preemption ([`crate::preemption::candidates`]).
        line: Vec<R>,
        /// When the listing they come from was sent.
        listed: Option<I>,
        /// Shutdown was asked for before the term began.
        shutdown: bool,
    },
    /// A request's answer.
    Answer(exchange::Answer<I, Reply<R, N, T, E>>),
    /// The instant [`Awaits`] named came.
    Timer,
    /// The line as the record keeper last listed it (after [`Output::Look`]).
    Looked {
        /// The candidates.
        line: Vec<R>,
        /// When that listing was sent.
        listed: Option<I>,
    },
    /// Shutdown was asked for.
    Shutdown,
    /// The body is gone, for this reason (as its driver tells it); with
    /// [`TermEnd::Overran`], it was killed and is still there: then [`Input::StuckGone`].
    BodyGone(TermEnd),
    /// The body that outlived its kill is gone at last.
    StuckGone,
}

/// Why the body is told to stop, by the member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// Shutdown was asked for.
    Shutdown,
    /// A member of higher priority is due (docs/preferred.md): the lease goes to it once the
    /// body is gone.
    Preempted(Preemption),
}

/// A line of the log that the term's end calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Say<R, E> {
    /// The handoff's (and its confirmation's), or how it gave the lease up, for the observer.
    Handoff(handoff::Note<R, E>),
    /// The choice's.
    Choice(choice::Note<R, E>),
}

/// How a term ended: the body gone, renewing stopped, the lease given up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended<I, R> {
    /// Why the body ended, as the term takes it.
    pub end: TermEnd,
    /// The holder's last word on the lease.
    pub last: Tenure<I>,
    /// The member the lease was to go to by preemption, if one was due.
    pub preempted: Option<Preemption>,
    /// The body outlived its kill and the lease it was last renewed under: another member may
    /// lead beside it, and nothing was given up.
    pub outlived: bool,
    /// What became of the lease.
    pub surrender: Surrender<R>,
}

/// What the shell does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<I, R, T, E> {
    /// Send this request.
    Send(Send<Request<I, R, T>>),
    /// The answer to this request is no longer wanted.
    Forget(Tag),
    /// Start the body: the term is the member's to lead.
    StartBody,
    /// Look at the line as the record keeper last listed it: then [`Input::Looked`].
    Look,
    /// The lease as the holder sees it changed: the body reads its deadlines from it.
    Tenure(Tenure<I>),
    /// What a renew's answer changed, for the log and the metrics.
    Renewal(Note<I>),
    /// The member the lookout probed did not answer: pass it over in the line, and say why.
    PassOver(String),
    /// The member of higher priority eligible first, and in how long; the line shows it.
    Pending(Option<(String, Duration)>),
    /// Tell the body to stop (once, whatever comes after).
    StopBody(Stop),
    /// The body is gone and renewing stopped, under the lease as `last` tells of it: the
    /// member no longer leads (a wake-up from now on is fresh), while the lease is given up.
    SteppedDown {
        /// Why the body ended, as the term takes it.
        end: TermEnd,
        /// The holder's last word on the lease.
        last: Tenure<I>,
    },
    /// The body outlived its kill (`kill_at`): not renewed for any more, nor given up while it
    /// may run; waited for until the lease surely expired (`expiry`).
    Outlasting {
        /// The kill deadline it outlived.
        kill_at: I,
        /// When the lease it was last renewed under has surely expired.
        expiry: I,
    },
    /// This instance leaves the line now: its record is deleted.
    Depart,
    /// The line takes this record (a read showed the member still the successor, or the
    /// lease was moved to its new lease id).
    /// (Boxed, as what a term's end sends: rare, and large beside every renew's outputs.)
    Refresh(Box<R>),
    /// Log this, or tell the observer (boxed, as the term's end: rare, and large beside the
    /// outputs of every step).
    Say(Box<Say<R, E>>),
    /// The term is over.
    End(Box<Ended<I, R>>),
}

/// What ends the leader's wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaits<I> {
    /// The answers awaited and the one timer.
    pub waiting: Waiting<I>,
    /// A look at the line is awaited ([`Input::Looked`]).
    pub look: bool,
    /// The body's end ends it ([`Input::BodyGone`]).
    pub body: bool,
    /// The end of a body that outlived its kill ends it ([`Input::StuckGone`]).
    pub stuck: bool,
}

/// What a term's end asks of the member it runs in, answered at the moment asked, by the
/// line: what the choice of a successor asks ([`choice::Grounds`]), what the preparation asks
/// ([`preparation::Grounds`]) and what the handoff asks (its guess, a pass-over).
pub trait Grounds<R, N, T> {
    /// The successor a term hands its lease to now (with `named`, a preemption's member, while
    /// it is a candidate).
    fn successor(&mut self, named: Option<&str>) -> Option<R>;
    /// Whether `fresh`, a read of the record of `listed`, shows that member still the
    /// successor.
    fn still_successor(&mut self, listed: &R, fresh: &R) -> bool;
    /// Whether `notice` names `next` and reserves the epoch for the lease id it acquires with.
    fn names(&mut self, notice: &N, next: &R) -> bool;
    /// The blob's ETag after `notice` was written.
    fn etag(&mut self, notice: N) -> T;
    /// The line's successor, if the line was listed since the term began (before that, the
    /// line is the one this member had as a poller, and the leader before it may still stand
    /// next).
    fn guess(&mut self) -> Option<R>;
    /// Pass `member` over in the line (none: it rejoined, and is not passed over): the line's
    /// successor now.
    fn pass_over(&mut self, member: Option<&R>) -> Option<R>;
}

/// The outputs of one step, and the tags its requests go out under: the machine's, each
/// handed out once over the term, whichever part sends.
#[derive(Debug)]
pub(super) struct Outbox<I, R, T, E> {
    tags: Tags,
    out: Vec<Output<I, R, T, E>>,
}

impl<I, R, T, E> Outbox<I, R, T, E> {
    /// A step's outputs, its requests under `tags`.
    pub(super) fn new(tags: Tags) -> Self {
        Self {
            tags,
            out: Vec::new(),
        }
    }

    /// Sends `request` under a fresh tag: that tag.
    pub(super) fn send(&mut self, request: Request<I, R, T>) -> Tag {
        let tag = self.tags.fresh();
        self.out.push(Output::Send(Send { tag, request }));
        tag
    }

    pub(super) fn push(&mut self, output: Output<I, R, T, E>) {
        self.out.push(output);
    }

    pub(super) fn extend(&mut self, outputs: impl IntoIterator<Item = Output<I, R, T, E>>) {
        self.out.extend(outputs);
    }

    /// The step's outputs, and the tags for the next.
    pub(super) fn done(self) -> (Vec<Output<I, R, T, E>>, Tags) {
        (self.out, self.tags)
    }
}
