//! A leader while its term's body runs, as one machine: the [`Holder`] renewing the lease and
//! the preferred leader's [`Lookout`], side by side over the member's exchange
//! ([`crate::exchange`]), until the body is gone. It keeps the order rule 7 of docs/safety.md
//! asks of a term: the body is told to stop (a shutdown, a member due by preemption) and only
//! once it is gone does renewing stop and the term end ([`Output::End`]), with the holder's last
//! word on the lease for what becomes of it ([`crate::term::give_up`]).
//!
//! The body enforces its own deadlines from the [`Tenure`] this machine publishes (rule 1: its
//! timers, not this machine's answers, stop and kill it), so that a stuck request can never
//! delay a kill. What this machine decides is when the body is told to stop for a reason of the
//! member's (shutdown, preemption), how its end reads (a body stopped for a preemption ended
//! [`TermEnd::Preempted`]), and which requests go out.
//!
//! Nothing here sends a request or keeps time: the shell carries out each [`Output`], reports
//! what came back as an [`Input`] with the instant, the wall clock and a uniform draw, and
//! waits for what [`Leading::awaits`] names.

use crate::exchange::{self, Send, Tag, Tags, Waiting};
use crate::holder::{self, Holder, Note, Renew, Tenure};
use crate::line::Record;
use crate::preemption::Preemption;
use crate::preemption::lookout::{self, Listing, Lookout};
use crate::term::TermEnd;
use crate::timing::{Moment, Timing};
use std::time::Duration;

#[cfg(test)]
mod tests;

/// What a leader is given when its term begins.
#[derive(Debug, Clone)]
pub struct Settings {
    /// The user's timing.
    pub timing: Timing,
    /// `[election].preempt_after` (`None`: off).
    pub preempt_after: Option<Duration>,
    /// `[election].priority`.
    pub priority: i64,
    /// This member's identity.
    pub me: String,
    /// The slot held: the holder of slot 0 lists for preemption, the others look at the line
    /// as their record keeper lists it ([`Listing::for_slot`]).
    pub slot: u32,
    /// How many replica leases the group's lease is (1 today).
    pub replicas: usize,
    /// The simulator's mutants of the holder.
    pub mutants: holder::Mutants,
}

/// A request of the leader.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<I> {
    /// Renew one replica's lease, cut at its limit: then [`Reply::Renew`].
    Renew(Renew<I>),
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
}

/// What came back of a [`Request`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<R> {
    /// The renew's reply.
    Renew(holder::Reply),
    /// The line's candidates after the listing, or `None`: it failed.
    Listed(Option<Vec<R>>),
    /// Whether the member probed answered at its URL.
    Probed(bool),
}

/// What the shell reports.
#[derive(Debug, Clone)]
pub enum Input<I, R> {
    /// The body starts: the line's candidates as the member knows them, and when that line
    /// was listed.
    Start {
        /// The candidates for preemption ([`crate::preemption::candidates`]).
        line: Vec<R>,
        /// When the listing they come from was sent.
        listed: Option<I>,
    },
    /// A request's answer.
    Answer(exchange::Answer<I, Reply<R>>),
    /// The instant [`Leading::awaits`] named came.
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
    /// The body is gone, for this reason (as its driver tells it).
    BodyGone(TermEnd),
}

/// How a term's lead ended: the body gone and renewing stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended<I> {
    /// Why the body ended, as the term takes it.
    pub end: TermEnd,
    /// The holder's last word on the lease.
    pub last: Tenure<I>,
    /// The member the lease goes to by preemption, if one was due.
    pub preempted: Option<Preemption>,
}

/// What the shell does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output<I> {
    /// Send this request.
    Send(Send<Request<I>>),
    /// The answer to this request is no longer wanted.
    Forget(Tag),
    /// Look at the line as the record keeper last listed it: then [`Input::Looked`].
    Look,
    /// The lease as the holder sees it changed: the body reads its deadlines from it.
    Tenure(Tenure<I>),
    /// What a renew's answer changed, for the log and the metrics.
    Renewal(Note<I>),
    /// The member probed did not answer: pass it over in the line, and say why.
    PassOver(String),
    /// The member of higher priority eligible first, and in how long; the line shows it.
    Pending(Option<(String, Duration)>),
    /// Tell the body to stop (once, whatever comes after).
    StopBody(Stop),
    /// The lead is over.
    End(Ended<I>),
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

/// What ends the leader's wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Awaits<I> {
    /// The answers awaited and the one timer.
    pub waiting: Waiting<I>,
    /// A look at the line is awaited ([`Input::Looked`]).
    pub look: bool,
    /// The body's end ends it ([`Input::BodyGone`]).
    pub body: bool,
}

/// Where the lookout's one action at a time stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Watching<I> {
    /// Its request under this tag is on its way.
    Asked(Tag),
    /// It waits for a look at the line.
    Looking,
    /// It sleeps until this instant (`None`: for ever).
    Asleep(Option<I>),
    /// It handed the lease over, or the lead is over.
    Done,
}

/// One term's lead: the holder and the lookout, until the body is gone.
#[derive(Debug, Clone)]
pub struct Leading<I, R: Record> {
    holder: Holder<I>,
    lookout: Lookout<I, R>,
    watching: Watching<I>,
    tags: Tags,
    /// The renews on their way, by the tag the lead sent them under, and the holder's. (The
    /// lookout's one request on its way is [`Watching::Asked`].)
    renews: Vec<(Tag, Tag)>,
    /// The tenure last published.
    published: Tenure<I>,
    /// Shutdown was asked for.
    shutdown: bool,
    /// The member the body was stopped for.
    preempted: Option<Preemption>,
    /// The body was told to stop.
    stopping: bool,
    /// Set once the body is gone.
    over: bool,
}

impl<I: Moment, R: Record + Clone> Leading<I, R> {
    /// The lead of a term whose lease was won by a request sent at `sent`.
    pub fn new(settings: &Settings, sent: I) -> Self {
        let holder = Holder::new(&settings.timing, sent, settings.replicas, settings.mutants);
        let lookout = Lookout::new(
            &settings.timing,
            settings.preempt_after,
            settings.priority,
            &settings.me,
            Listing::for_slot(settings.slot),
        );
        Self {
            published: holder.tenure(),
            holder,
            lookout,
            watching: Watching::Asleep(None),
            tags: Tags::default(),
            renews: Vec::new(),
            shutdown: false,
            preempted: None,
            stopping: false,
            over: false,
        }
    }

    /// The lease as the holder sees it now.
    pub fn tenure(&self) -> Tenure<I> {
        self.holder.tenure()
    }

    /// What ends the wait now: the answers on their way, the earlier of the next renew and
    /// the lookout's wake, a look at the line, the body's end.
    pub fn awaits(&self) -> Awaits<I> {
        let lookout_at = match self.watching {
            Watching::Asleep(at) => at,
            _ => None,
        };
        let renew_at = self.holder.poll_timeout();
        let until = match (renew_at, lookout_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let mut answers: Vec<Tag> = self.renews.iter().map(|(ours, _)| *ours).collect();
        if let Watching::Asked(tag) = self.watching {
            answers.push(tag);
        }
        // Once the lead is over nothing is on its way and the lookout is done; the holder
        // still names its next renew, which nobody sends.
        Awaits {
            waiting: Waiting {
                answers,
                until: until.filter(|_| !self.over),
            },
            look: self.watching == Watching::Looking,
            body: !self.over,
        }
    }

    /// What `input`, reported at `now` (`wall` on the wall clock), calls for. `draw` is the
    /// shell's uniform draw in `[0, 1)`, taken only when a rule needs one (a retry's pause, a
    /// listing's cadence), at the moment it does: a simulated history depends on their order.
    pub fn handle(
        &mut self,
        now: I,
        wall: R::Wall,
        input: Input<I, R>,
        draw: &mut impl FnMut() -> f64,
    ) -> Vec<Output<I>> {
        let mut out = Vec::new();
        if self.over {
            return out;
        }
        match input {
            Input::Start { line, listed } => {
                self.watch(
                    now,
                    wall,
                    lookout::Event::Start { line, listed },
                    draw,
                    &mut out,
                );
            }
            Input::Answer(answer) => self.answered(now, wall, answer, draw, &mut out),
            Input::Timer => {
                if let Watching::Asleep(Some(at)) = self.watching
                    && now >= at
                {
                    self.watch(now, wall, lookout::Event::Woke, draw, &mut out);
                }
            }
            Input::Looked { line, listed } => {
                if self.watching == Watching::Looking {
                    self.watch(
                        now,
                        wall,
                        lookout::Event::Looked { line, listed },
                        draw,
                        &mut out,
                    );
                }
            }
            Input::Shutdown => {
                self.shutdown = true;
                self.stop_body(Stop::Shutdown, &mut out);
            }
            Input::BodyGone(end) => {
                self.end(end, &mut out);
                return out;
            }
        }
        self.renew(now, &mut out);
        out
    }

    /// Sends the renews due now, and publishes the tenure when it changed (an expiry found
    /// at a renew's due time is one).
    fn renew(&mut self, now: I, out: &mut Vec<Output<I>>) {
        while let Some(send) = self.holder.poll_request(now) {
            let tag = self.tags.fresh();
            self.renews.push((tag, send.tag));
            out.push(Output::Send(Send {
                tag,
                request: Request::Renew(send.request),
            }));
        }
        self.publish(out);
    }

    fn publish(&mut self, out: &mut Vec<Output<I>>) {
        let tenure = self.holder.tenure();
        if tenure != self.published {
            self.published = tenure;
            out.push(Output::Tenure(tenure));
        }
    }

    /// An answer came: a renew's goes to the holder, a listing's or a probe's to the lookout.
    fn answered(
        &mut self,
        now: I,
        wall: R::Wall,
        answer: exchange::Answer<I, Reply<R>>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Vec<Output<I>>,
    ) {
        let event = match answer.answer {
            Reply::Renew(reply) => {
                let Some(at) = self.renews.iter().position(|(t, _)| *t == answer.tag) else {
                    return;
                };
                let (_, holders) = self.renews.remove(at);
                let renewed = exchange::Answer {
                    tag: holders,
                    sent: answer.sent,
                    answer: reply,
                };
                if let Some(note) = self.holder.handle_answer(now, renewed, &mut *draw) {
                    out.push(Output::Renewal(note));
                }
                self.publish(out);
                return;
            }
            Reply::Listed(line) => lookout::Event::Listed(line),
            Reply::Probed(answered) => lookout::Event::Probed(answered),
        };
        if self.watching == Watching::Asked(answer.tag) {
            self.watch(now, wall, event, draw, out);
        }
    }

    /// Steps the lookout with `event` and carries its actions into outputs; its last action
    /// is what it waits for next.
    fn watch(
        &mut self,
        now: I,
        wall: R::Wall,
        event: lookout::Event<I, R>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Vec<Output<I>>,
    ) {
        for action in self.lookout.step(now, wall, event, draw) {
            match action {
                lookout::Action::List { limit } => self.ask(Request::List { limit }, out),
                lookout::Action::Probe { to, url } => self.ask(Request::Probe { to, url }, out),
                lookout::Action::Look => {
                    self.watching = Watching::Looking;
                    out.push(Output::Look);
                }
                lookout::Action::PassOver(to) => out.push(Output::PassOver(to)),
                lookout::Action::Pending(p) => out.push(Output::Pending(p)),
                lookout::Action::Sleep(at) => self.watching = Watching::Asleep(at),
                lookout::Action::Preempt(p) => {
                    self.watching = Watching::Done;
                    self.preempted = Some(p.clone());
                    self.stop_body(Stop::Preempted(p), out);
                }
            }
        }
    }

    /// Tells the body to stop, unless it was told already.
    fn stop_body(&mut self, why: Stop, out: &mut Vec<Output<I>>) {
        if !std::mem::replace(&mut self.stopping, true) {
            out.push(Output::StopBody(why));
        }
    }

    /// Sends the lookout's request.
    fn ask(&mut self, request: Request<I>, out: &mut Vec<Output<I>>) {
        let tag = self.tags.fresh();
        self.watching = Watching::Asked(tag);
        out.push(Output::Send(Send { tag, request }));
    }

    /// The body is gone: renewing stops (the answers on their way are no longer wanted) and
    /// the lead ends with the holder's last word. A body stopped for a preemption, and not
    /// for a shutdown that came too, ended [`TermEnd::Preempted`].
    fn end(&mut self, end: TermEnd, out: &mut Vec<Output<I>>) {
        self.over = true;
        let renews = self.renews.drain(..).map(|(ours, _)| ours);
        let asked = match std::mem::replace(&mut self.watching, Watching::Done) {
            Watching::Asked(tag) => Some(tag),
            _ => None,
        };
        out.extend(renews.chain(asked).map(Output::Forget));
        let end = match end {
            TermEnd::Shutdown if self.preempted.is_some() && !self.shutdown => TermEnd::Preempted,
            end => end,
        };
        out.push(Output::End(Ended {
            end,
            last: self.holder.tenure(),
            preempted: self.preempted.clone(),
        }));
    }
}
