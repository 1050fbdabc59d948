//! A term of leadership from the body's side: why a term ends ([`TermEnd`]), rule 1 for the
//! body ([`Phase`]: stopped by its stop deadline, killed by its kill deadline), and the two
//! decisions of rule 7 once the body is gone: what becomes of the lease ([`give_up`]) and how long
//! the member stays out before campaigning again ([`rest`]).
//!
//! The driver runs the body (a child process, a task), reads the holder's [`Tenure`] and the
//! clock, and carries out what these say; nothing here waits or signals.

use crate::choice::Ending;
use crate::holder::Tenure;
use crate::timing::{Deadline, Moment, Timing};
use std::time::Duration;

/// Why a term ended. The member decides from it what becomes of the lease ([`give_up`]), how
/// long it stays out of the election and whether it goes on ([`rest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TermEnd {
    /// The body ended by itself (a child with `on_exit = "release"`, or whose restarts ran out;
    /// a task that returned): release, wait a polling period, campaign again.
    Released,
    /// The child ended by itself with `on_exit = "exit"`: release, then end with its code.
    Exit(i32),
    /// Storage said the lease is someone else's; the body was stopped at once.
    Lost,
    /// No renew succeeded before the stop deadline; the body was stopped.
    Expired,
    /// Shutdown was asked for; the body was stopped.
    Shutdown,
    /// The child's health checks failed; it was stopped, and this member stays out of the
    /// election for `cooldown`.
    Unhealthy {
        /// How long it stays out.
        cooldown: Duration,
    },
    /// The child failed soon after it started (a crash loop): the lease goes on as after
    /// [`TermEnd::Released`], and this member stands aside for `backoff`, as after a health
    /// step-down (its record says standby meanwhile, so the line passes over it).
    CrashLoop {
        /// How long it stands aside.
        backoff: Duration,
    },
    /// A live member of strictly higher priority has been a member for `preempt_after`
    /// (docs/preferred.md): the body was stopped, and the lease goes to that member.
    Preempted,
    /// The body was still there after its kill: a task that blocks its thread cannot be
    /// aborted. The member stops renewing and waits for it, at most until the lease has surely
    /// expired.
    Overran,
}

impl TermEnd {
    /// How a term that gives its lease up voluntarily ended, as its handoff decides by it;
    /// `None` for an involuntary end (the lease lost or expired, a body that overran its kill),
    /// which hands nothing over.
    pub fn voluntary(&self) -> Option<Ending> {
        match self {
            Self::Released | Self::Exit(_) => Some(Ending::ByItself),
            Self::Shutdown => Some(Ending::Stop),
            Self::Preempted => Some(Ending::Preempted),
            Self::Unhealthy { cooldown } | Self::CrashLoop { backoff: cooldown } => {
                Some(Ending::StandAside(*cooldown))
            }
            Self::Lost | Self::Expired | Self::Overran => None,
        }
    }

    /// Whether a member that stands for one term only stops after this end: every end but a
    /// shutdown's or an exit's cut its one term short.
    pub fn cuts_one_term_short(&self) -> bool {
        !matches!(self, Self::Shutdown | Self::Exit(_))
    }
}

/// Where the body of a term stands, as rule 1 sees it (the phases of watchexec's supervisor).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase<I> {
    /// Running under a held lease.
    Running,
    /// Told to stop at `since`, because of `why`: the child got its stop signal, the task's
    /// token was cancelled.
    Stopping {
        /// Why.
        why: TermEnd,
        /// When the stop was sent.
        since: I,
    },
    /// Killed at `at`, because of `why`: the child's group got SIGKILL, the task was aborted.
    /// Only its end is awaited now.
    Killed {
        /// Why.
        why: TermEnd,
        /// When the kill was sent.
        at: I,
    },
}

/// What one look at the lease and the clock calls for ([`Phase::step`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step<I> {
    /// The deadlines of the lease as last renewed.
    pub deadline: Deadline<I>,
    /// Tell the body to stop now, for this reason; then log.
    pub stop: Option<TermEnd>,
    /// The instant by which the body must be dead.
    pub kill_at: I,
    /// Kill the body now.
    pub kill: bool,
}

impl<I: Moment> Phase<I> {
    /// Looks at the lease (`tenure`) and the clock (`now`), moves the phase on, and says what
    /// to do: the one round of rule 1 that every body takes each time it wakes.
    pub fn step(&mut self, tenure: &Tenure<I>, now: I, shutdown: bool, grace: Duration) -> Step<I> {
        let deadline = tenure.deadline();
        let stop = self.stop(Self::stop_reason(tenure, now, shutdown), now);
        let kill_at = self.kill_at(&deadline, grace);
        let kill = self.kill_due(&deadline, grace, now);
        Step {
            deadline,
            stop,
            kill_at,
            kill,
        }
    }

    /// Why a body must stop now under `tenure`, if it must: the lease was lost (rule 2), the stop
    /// deadline passed without a renew (rules 1 and 3), or shutdown was asked (rule 7). Also why
    /// a term won gets no body at all.
    pub fn stop_reason(tenure: &Tenure<I>, now: I, shutdown: bool) -> Option<TermEnd> {
        match *tenure {
            Tenure::Lost(_) => Some(TermEnd::Lost),
            Tenure::Expired(_) => Some(TermEnd::Expired),
            Tenure::Held(d) if now >= d.stop_at => Some(TermEnd::Expired),
            Tenure::Held(_) if shutdown => Some(TermEnd::Shutdown),
            Tenure::Held(_) => None,
        }
    }

    /// A running body is told to stop for `why` (if there is one). Returns the reason when this
    /// is the moment to send the stop: the caller stops the body, and only then logs.
    pub fn stop(&mut self, why: Option<TermEnd>, now: I) -> Option<TermEnd> {
        match (*self, why) {
            (Self::Running, Some(why)) => {
                *self = Self::Stopping { why, since: now };
                Some(why)
            }
            _ => None,
        }
    }

    /// When the stop began, for the guard: `None` while the body runs.
    pub fn stop_began(&self) -> Option<I> {
        match *self {
            Self::Running => None,
            Self::Stopping { since, .. } => Some(since),
            Self::Killed { at, .. } => Some(at),
        }
    }

    /// The instant by which the body must be dead: the kill deadline `t_s + L - M`, or `G` after
    /// the stop began if that comes first.
    pub fn kill_at(&self, deadline: &Deadline<I>, grace: Duration) -> I {
        match *self {
            Self::Running => deadline.kill_at,
            Self::Stopping { since, .. } => (since + grace).min(deadline.kill_at),
            Self::Killed { at, .. } => at,
        }
    }

    /// Whether the body must be killed now: a stop has begun, and its kill instant has come.
    /// (A running body past its kill deadline was told to stop first, by [`Phase::stop`] with
    /// [`Phase::stop_reason`]: the stop deadline comes earlier.)
    pub fn kill_due(&mut self, deadline: &Deadline<I>, grace: Duration, now: I) -> bool {
        match *self {
            Self::Stopping { why, .. } if now >= self.kill_at(deadline, grace) => {
                *self = Self::Killed { why, at: now };
                true
            }
            _ => false,
        }
    }

    /// Killed now whatever the phase (a second stop request): `why` if it was still running.
    /// False when it had been killed already.
    pub fn kill_now(&mut self, why: TermEnd, now: I) -> bool {
        let why = match *self {
            Self::Running => why,
            Self::Stopping { why, .. } => why,
            Self::Killed { .. } => return false,
        };
        *self = Self::Killed { why, at: now };
        true
    }

    /// Why the body is being stopped; `None` while it runs.
    pub fn why(&self) -> Option<TermEnd> {
        match *self {
            Self::Running => None,
            Self::Stopping { why, .. } | Self::Killed { why, .. } => Some(why),
        }
    }

    /// Whether the body runs and was not told to stop.
    pub fn is_running(&self) -> bool {
        matches!(self, Self::Running)
    }

    /// Whether the body was told to stop and not yet killed.
    pub fn is_stopping(&self) -> bool {
        matches!(self, Self::Stopping { .. })
    }

    /// Whether the body was killed.
    pub fn is_killed(&self) -> bool {
        matches!(self, Self::Killed { .. })
    }
}

/// What becomes of the lease once the body is gone and renewing stopped (rule 7: never before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUp<I> {
    /// The lease is not ours any more: nothing to give.
    Nothing,
    /// A voluntary end while the lease is held: hand it to the successor, within the deadline
    /// of the lease as last renewed.
    HandOver(Ending, Deadline<I>),
    /// An involuntary end (no renew in time, a body that overran its kill): release it.
    Release,
}

/// What a term that ended for `end`, under the lease as the holder last knew it (`last`), does
/// with the lease: the one place where a term gives its lease up.
pub fn give_up<I: Copy>(end: TermEnd, last: &Tenure<I>) -> GiveUp<I> {
    if end == TermEnd::Lost || matches!(last, Tenure::Lost(_)) {
        return GiveUp::Nothing;
    }
    match (end.voluntary(), last) {
        (Some(ending), Tenure::Held(deadline)) => GiveUp::HandOver(ending, *deadline),
        _ => GiveUp::Release,
    }
}

/// How long a member whose term ended stays out of the election ([`rest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest<I> {
    /// The member is done: shutdown, or the body asked to end with this code.
    Done(Option<i32>),
    /// Campaign again at once (the lease was lost to another member).
    Now,
    /// Give the other members a fair chance first: this long, or until a wake-up (a member
    /// handed the lease back already).
    Yield(Duration),
    /// Stay out until `until`; a wake-up cuts it short only if `wakeable`. The member is back in
    /// line after it.
    Until {
        /// When it campaigns again.
        until: I,
        /// Whether a wake-up ends it early (a health step-down or a crash-loop backoff is sat
        /// out whatever wakes come; its record says standby meanwhile).
        wakeable: bool,
        /// Why the term ended.
        why: TermEnd,
    },
}

/// The pause after a term that ended for `end` at `ended` (its body gone), under the lease as
/// last renewed (`last`), with `shutdown` asked or not.
///
/// - A lease given up by choice: the longest poll ([`Pace::yield_for`](crate::Pace::yield_for)),
///   so that every follower polls meanwhile.
/// - A health step-down or a crash loop: the cooldown or backoff, from the body's end.
/// - No renew succeeded: nobody can take the lease before the last successful send + `L` (the
///   server's lease runs at least that long), so staying out until then costs nothing when
///   storage is down for everyone, and when it is slow for this member alone gives a healthy
///   follower the lease instead of this member winning it back only to lose it again.
pub fn rest<I: Moment>(
    end: TermEnd,
    last: &Tenure<I>,
    ended: I,
    shutdown: bool,
    timing: &Timing,
) -> Rest<I> {
    match end {
        TermEnd::Shutdown => Rest::Done(None),
        TermEnd::Exit(code) => Rest::Done(Some(code)),
        TermEnd::Overran if shutdown => Rest::Done(None),
        TermEnd::Lost => Rest::Now,
        TermEnd::Released | TermEnd::Overran | TermEnd::Preempted => {
            Rest::Yield(crate::Pace::new(timing).yield_for())
        }
        TermEnd::Unhealthy { cooldown: pause } | TermEnd::CrashLoop { backoff: pause } => {
            Rest::Until {
                until: ended + pause,
                wakeable: false,
                why: end,
            }
        }
        TermEnd::Expired => Rest::Until {
            until: last.deadline().expiry(timing),
            wakeable: true,
            why: end,
        },
    }
}

/// What stopped a member's loop of terms ([`Stage::Done`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Done {
    /// Shutdown was asked for: the body is gone and the lease given up.
    Shutdown,
    /// The body asked to end with this code (`on_exit = "exit"`); the lease is given up.
    Exit(i32),
    /// One term only: the campaign gave up without winning.
    NotElected,
    /// One term only: it ended otherwise than asked; the body was stopped and the lease given
    /// up as usual.
    CutShort(TermEnd),
}

/// The next stage of a member's loop of terms ([`Terms::step`]); the driver reports its end
/// with the method each names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage<I> {
    /// Campaign until a term is won, shutdown, or (one term only) the campaign gives up:
    /// [`Terms::won`] or [`Terms::not_won`].
    Campaign,
    /// Keep the lease won, and run the body unless `unstarted` says why not (a term won while
    /// shutting down, or whose epoch write took it past its stop deadline):
    /// [`Terms::body_gone`].
    Lead {
        /// Why the term gets no body.
        unstarted: Option<TermEnd>,
    },
    /// The body is gone: stop renewing, and take the holder's last word on the lease:
    /// [`Terms::renewing_stopped`].
    StopRenewing,
    /// The body outlived its kill: wait for it, at most until the lease has surely expired;
    /// not renewed for, nor given up while it may run: [`Terms::outlasted`].
    Outlast,
    /// Give the lease up so (the body is gone and renewing stopped): [`Terms::given_up`].
    GiveUp(GiveUp<I>),
    /// Stay out of the election so: [`Terms::rested`].
    Rest(Rest<I>),
    /// The loop is over.
    Done(Done),
}

/// Deliberately broken rules of the loop, for the simulator's mutants: plain switches, off in
/// every build that leads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Broken {
    /// A crash loop's end is taken for a plain release: no backoff.
    pub no_crash_backoff: bool,
    /// A body that outlived its kill is not waited for: its lease is released at once.
    pub release_the_stuck: bool,
}

/// A member's loop of terms: campaign, lead (keep the lease, run the body), once the body is
/// gone stop renewing and give the lease up, rest, again, until shutdown. Rule 7 is its order:
/// the lease is given up only once the body is gone and renewing stopped, and a body that
/// outlived its kill is waited for first ([`Stage::Outlast`]). The driver asks [`Terms::step`],
/// carries the step out, and reports its end.
#[derive(Debug, Clone)]
pub struct Terms<I> {
    /// Only one term is stood for.
    one_term: bool,
    broken: Broken,
    timing: Timing,
    at: At<I>,
}

/// Where the loop stands: what it does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At<I> {
    Campaigning,
    Leading { unstarted: Option<TermEnd> },
    BodyGone(Gone<I>),
    Outlasting(Gone<I>, Tenure<I>),
    GivingUp(Gone<I>, Tenure<I>),
    Ended(Gone<I>, Tenure<I>),
    Over(Done),
}

/// A term whose body is gone: why, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Gone<I> {
    end: TermEnd,
    ended: I,
}

impl<I: Moment> Terms<I> {
    /// The loop of a member with `timing`, standing for one term only or not.
    pub fn new(timing: Timing, one_term: bool, broken: Broken) -> Self {
        Self {
            one_term,
            broken,
            timing,
            at: At::Campaigning,
        }
    }

    /// What to do next; `shutdown`: whether shutdown was asked.
    pub fn step(&self, shutdown: bool) -> Stage<I> {
        match self.at {
            At::Campaigning => Stage::Campaign,
            At::Leading { unstarted } => Stage::Lead { unstarted },
            At::BodyGone(_) => Stage::StopRenewing,
            At::Outlasting(..) => Stage::Outlast,
            At::GivingUp(gone, last) => Stage::GiveUp(give_up(gone.end, &last)),
            // A candidate for one term does not stand again.
            At::Ended(gone, _) if self.one_term && gone.end.cuts_one_term_short() => {
                Stage::Done(Done::CutShort(gone.end))
            }
            At::Ended(gone, last) => {
                Stage::Rest(rest(gone.end, &last, gone.ended, shutdown, &self.timing))
            }
            At::Over(done) => Stage::Done(done),
        }
    }

    /// A term was won at `now` under the lease as `tenure` tells of it.
    pub fn won(&mut self, now: I, tenure: &Tenure<I>, shutdown: bool) {
        let unstarted = Phase::stop_reason(tenure, now, shutdown);
        self.at = At::Leading { unstarted };
    }

    /// The campaign ended without a term: shutdown, or a one-term campaign gave up.
    pub fn not_won(&mut self, shutdown: bool) {
        self.at = At::Over(match shutdown {
            true => Done::Shutdown,
            false => Done::NotElected,
        });
    }

    /// The body is gone (or never ran) at `ended`, for `end`; returns the end as the rest of
    /// the term takes it.
    pub fn body_gone(&mut self, end: TermEnd, ended: I) -> TermEnd {
        let end = match end {
            TermEnd::CrashLoop { .. } if self.broken.no_crash_backoff => TermEnd::Released,
            end => end,
        };
        self.at = At::BodyGone(Gone { end, ended });
        end
    }

    /// Renewing stopped; `last`: the holder's last word on the lease.
    pub fn renewing_stopped(&mut self, last: Tenure<I>) {
        let At::BodyGone(gone) = self.at else {
            return;
        };
        let waits = gone.end == TermEnd::Overran && !self.broken.release_the_stuck;
        self.at = match waits {
            true => At::Outlasting(gone, last),
            false => At::GivingUp(gone, last),
        };
    }

    /// The body that outlived its kill ended before its lease surely expired (`gone`): the
    /// term ends as usual; or not: the lease expired on the server with the body still there,
    /// and there is nothing to give up.
    pub fn outlasted(&mut self, gone: bool) {
        let At::Outlasting(body, last) = self.at else {
            return;
        };
        self.at = match gone {
            true => At::GivingUp(body, last),
            false => At::Ended(body, last),
        };
    }

    /// The lease was given up (handed over, released, or it was not ours any more).
    pub fn given_up(&mut self) {
        if let At::GivingUp(gone, last) = self.at {
            self.at = At::Ended(gone, last);
        }
    }

    /// The rest is over: campaign again, or (`done`) the loop is over so.
    pub fn rested(&mut self, done: Option<Done>) {
        self.at = match done {
            Some(done) => At::Over(done),
            None => At::Campaigning,
        };
    }
}

#[cfg(test)]
mod tests;
