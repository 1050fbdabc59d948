//! What the record keeper and its shell say to each other: the store requests ([`Request`]),
//! the inputs, the outputs, what ends its wait ([`Awaits`]), and what it reads and changes of
//! the member's line ([`Grounds`]). A request's answer is `Ok` or the store's error, as it
//! came; the keeper tells the errors apart ([`Reply::of`](super::Reply::of)).

use crate::exchange::{Answer, Send, Waiting};
use crate::line::Standing;

/// What the keeper reads of the line before each step: read fresh each time, for the rest of
/// the member changes the line between two steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts<I> {
    /// This member is in line under its record lease.
    pub joined: bool,
    /// The record says what this member publishes now.
    pub written: bool,
    /// When the line was last listed (by anyone of this member).
    pub listed: Option<I>,
    /// This member leads.
    pub leading: bool,
    /// This member is in line and polls (first in line, not leading).
    pub polls: bool,
    /// The group has more than one slot: a listing shows the slot blobs, the lease blob among
    /// them.
    pub slotted: bool,
    /// How many terms this member has begun.
    pub terms_begun: u64,
    /// When the record is to say it is settled, while it does not.
    pub settle_at: Option<I>,
}

/// A request of a join or a renew, on the member's own record (what [`Say::Failed`] names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Delete the old record of this identity; with our record lease id if `ours`.
    DeleteOld {
        /// With our record lease id.
        ours: bool,
    },
    /// Create the record anew.
    Create,
    /// Take the record's lease.
    TakeLease,
    /// Renew the record's lease.
    Renew,
}

/// A store request of the keeper; `P` is what a member record says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<P> {
    /// Delete the old record of this identity; with our record lease id if `ours`.
    DeleteOld {
        /// With our record lease id.
        ours: bool,
    },
    /// Create the record anew, saying `P` (what the join publishes). (Boxed, as the write's:
    /// a member's every request moves through it and is kept on its way by value, and what a
    /// record says is the largest of them by far.)
    Create(Box<P>),
    /// Take the record's lease.
    TakeLease,
    /// Renew the record's lease.
    Renew,
    /// Write `P` to the record, under its lease.
    Write(Box<P>),
    /// List the line into the member's line (and with slots, the slot blobs).
    List,
    /// Read the lease blob into the line, for its holder, unless this member leads by the
    /// time the answer comes (a leader knows better): pollers learn of leaders this way.
    Read,
    /// Delete, each conditional on its ETag as listed, the records the line counts dead for
    /// over [`Pace::DEAD_RECORD_AGE`](crate::Pace::DEAD_RECORD_AGE) (a member that came back
    /// keeps its record).
    Tidy,
    /// Delete the record under its lease: the member leaves the line.
    Leave,
}

/// What the shell reports.
#[derive(Debug, Clone)]
pub enum Input<I, E> {
    /// The keeper begins.
    Start,
    /// A request's answer.
    Answer(Answer<I, Result<(), E>>),
    /// The instant [`Awaits`] named came.
    Timer,
    /// The member changed what the record is to say, or how often it lists (a term began or
    /// ended): the keeper looks again now.
    Poked,
    /// The member leaves.
    Stop,
}

/// A line of the log that the keeper calls for.
#[derive(Debug, Clone)]
pub enum Say<E> {
    /// The standing of this member changed to this.
    Standing(Standing),
    /// A renew found the record gone: the member joins again.
    RecordGone,
    /// A join's or a renew's request failed so: tried again.
    Failed(Keep, E),
    /// A write found the record or its lease gone: the renew sorts out what became of it.
    WriteLost(E),
    /// A write failed otherwise: again soon.
    WriteFailed(E),
    /// The record was deleted on leaving, or not.
    Left(Result<(), E>),
}

/// What the shell does.
#[derive(Debug, Clone)]
pub enum Output<P, E> {
    /// Send this request.
    Send(Send<Request<P>>),
    /// The line changed: show it.
    ShowLine,
    /// A listing placed this member to poll (first in line, not leading): a campaign waiting
    /// out a watch period polls at once.
    Placed,
    /// Log this.
    Say(Say<E>),
    /// The keeper is done: the member left.
    End,
}

/// What ends the keeper's wait: [`Waiting`] (the answer awaited, the timer), and the member's
/// events it listens for now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaits<I> {
    /// The answer and the timer.
    pub waiting: Waiting<I>,
    /// A stop ends it ([`Input::Stop`]).
    pub stop: bool,
    /// A poke ends it ([`Input::Poked`]).
    pub poked: bool,
}

/// What the keeper reads and changes of the member's line, answered at the moment asked; `P`
/// is what a member record says.
pub trait Grounds<I, P> {
    /// The line as it stands now.
    fn facts(&self) -> Facts<I>;
    /// A random draw in `[0, 1)`.
    fn draw(&mut self) -> f64;
    /// What the member publishes now.
    fn published(&self) -> P;
    /// A join begins: the record is created anew (its creation time is this join), so it is
    /// unsettled and not yet created; what it publishes then.
    fn joining(&mut self) -> P;
    /// The record was created at `now`: it settles from then.
    fn created(&mut self, now: I);
    /// The record says from `now` how long this member has been a member.
    fn settle(&mut self, now: I);
    /// The record says `record` now: written, if the member still publishes that.
    fn wrote(&mut self, record: &P);
    /// The record's lease is ours: the line counts our record alive.
    fn held(&mut self);
    /// The member stands so now: whether that changed.
    fn stand(&mut self, standing: Standing) -> bool;
}
