//! The lead while the body runs: the [`Holder`] renewing the lease and the preferred leader's
//! [`Lookout`] side by side, the body told to stop once (a shutdown, a member due by
//! preemption), and, once it is gone, renewing stopped with the holder's last word.
//!
//! The body enforces its own deadlines from the [`Tenure`] this publishes (rule 1 of
//! docs/safety.md: its timers, not these answers, stop and kill it), so that a stuck request
//! can never delay a kill. What this decides is when the body is told to stop for a reason of
//! the member's, how its end reads (a body stopped for a preemption ended
//! [`TermEnd::Preempted`]), and which requests go out.

use super::messages::{Outbox, Output, Request, Settings, Stop};
use super::winning::Winning;
use crate::exchange::{self, Tag};
use crate::holder::{self, Holder, Tenure};
use crate::line::Record;
use crate::preemption::Preemption;
use crate::preemption::lookout::{self, Listing, Lookout};
use crate::quorum::{self, Unheld};
use crate::term::TermEnd;
use crate::timing::Deadline;
use crate::timing::Moment;

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

/// What the lookout's request came back with.
pub(super) enum Came<R> {
    /// The line's candidates after the listing, or `None`: it failed.
    Listed(Option<Vec<R>>),
    /// Whether the member probed answered at its URL.
    Probed(bool),
}

/// How the lead ended: why the body ended, as the term takes it, the holder's last word on
/// the lease, and the member the lease goes to by preemption, if one was due.
#[derive(Debug)]
pub(super) struct Over<I> {
    pub end: TermEnd,
    pub last: Tenure<I>,
    pub preempted: Option<Preemption>,
}

/// One term's lead: the holder and the lookout, until the body is gone.
#[derive(Debug, Clone)]
pub(super) struct Lead<I, R: Record> {
    holder: Holder<I>,
    /// On several replicas, the winning back of those not held.
    winning: Option<Winning<I>>,
    lookout: Lookout<I, R>,
    watching: Watching<I>,
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

impl<I: Moment, R: Record + Clone> Lead<I, R> {
    /// The lead of a term whose lease was won by a request sent at `sent` (on several
    /// replicas, each one's as `leases` says: [`Holder::with_leases`]; those not held won back
    /// as `unheld` allows).
    pub(super) fn new<T>(
        settings: &Settings<T>,
        sent: I,
        leases: &[Option<Deadline<I>>],
        unheld: &Unheld<I>,
    ) -> Self {
        let timing = &settings.timing;
        let mutants = settings.mutants.holder;
        let holder = match leases.is_empty() {
            true => Holder::new(timing, sent, settings.set.len(), mutants),
            false => Holder::with_leases(timing, sent, leases, mutants),
        };
        let winning = (settings.set.len() > 1)
            .then(|| Winning::new(settings.set, *timing, settings.epoch, unheld));
        let lookout = Lookout::new(
            timing,
            settings.preempt_after,
            settings.priority,
            &settings.me,
            Listing::for_slot(settings.slot),
        );
        Self {
            published: holder.tenure(),
            holder,
            winning,
            lookout,
            watching: Watching::Asleep(None),
            renews: Vec::new(),
            shutdown: false,
            preempted: None,
            stopping: false,
            over: false,
        }
    }

    /// The lease as the holder sees it now.
    pub(super) fn tenure(&self) -> Tenure<I> {
        self.holder.tenure()
    }

    /// Whether the lease on `replica` counts for the term now.
    pub(super) fn holds(&self, replica: usize) -> bool {
        self.holder.holds(replica)
    }

    /// Whether the body is gone.
    pub(super) fn over(&self) -> bool {
        self.over
    }

    /// The earlier of the next renew and the lookout's wake (none once the lead is over: the
    /// holder still names its next renew, which nobody sends).
    pub(super) fn until(&self) -> Option<I> {
        let lookout_at = match self.watching {
            Watching::Asleep(at) => at,
            _ => None,
        };
        // Replicas are won back only while the lease is held (`renew`): a term that lost it
        // names no try of theirs, or its timer would come again at an instant it stays at.
        let winning_at = (self.winning.as_ref())
            .filter(|_| self.holder.tenure().is_held())
            .and_then(Winning::until);
        let until = [self.holder.poll_timeout(), lookout_at, winning_at]
            .into_iter()
            .flatten()
            .min();
        until.filter(|_| !self.over)
    }

    /// The answers on their way: the renews' and the lookout's.
    pub(super) fn answers(&self) -> Vec<Tag> {
        let mut answers: Vec<Tag> = self.renews.iter().map(|(ours, _)| *ours).collect();
        if let Watching::Asked(tag) = self.watching {
            answers.push(tag);
        }
        if let Some(winning) = &self.winning {
            winning.answers(&mut answers);
        }
        answers
    }

    /// Whether a look at the line is awaited.
    pub(super) fn looking(&self) -> bool {
        self.watching == Watching::Looking
    }

    /// The body starts: the lookout begins with the line's candidates, listed at `listed`.
    pub(super) fn start<T, E>(
        &mut self,
        now: I,
        wall: R::Wall,
        line: Vec<R>,
        listed: Option<I>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let start = lookout::Event::Start { line, listed };
        self.watch(now, wall, start, draw, out);
    }

    /// The instant named came: the lookout wakes, if its sleep is over.
    pub(super) fn timer<T, E>(
        &mut self,
        now: I,
        wall: R::Wall,
        draw: &mut impl FnMut() -> f64,
        out: &mut Outbox<I, R, T, E>,
    ) {
        if let Watching::Asleep(Some(at)) = self.watching
            && now >= at
        {
            self.watch(now, wall, lookout::Event::Woke, draw, out);
        }
    }

    /// Whether a look at the line as listed at `listed` reads the line
    /// ([`Lookout::takes_line`]).
    pub(super) fn takes_line(&self, listed: Option<I>) -> bool {
        self.lookout.takes_line(listed)
    }

    /// The line as the record keeper last listed it, when the lookout waits for a look.
    pub(super) fn looked<T, E>(
        &mut self,
        now: I,
        wall: R::Wall,
        line: Vec<R>,
        listed: Option<I>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Outbox<I, R, T, E>,
    ) {
        if self.looking() {
            let looked = lookout::Event::Looked { line, listed };
            self.watch(now, wall, looked, draw, out);
        }
    }

    /// Shutdown was asked for: the body is told to stop, unless it was told already.
    pub(super) fn shutdown<T, E>(&mut self, out: &mut Outbox<I, R, T, E>) {
        self.shutdown = true;
        self.stop_body(Stop::Shutdown, out);
    }

    /// Sends the renews due now, and publishes the tenure when it changed (an expiry found
    /// at a renew's due time is one).
    pub(super) fn renew<T, E>(&mut self, now: I, out: &mut Outbox<I, R, T, E>) {
        if self.over {
            return;
        }
        while let Some(send) = self.holder.poll_request(now) {
            let tag = out.send(Request::Renew(send.request));
            self.renews.push((tag, send.tag));
        }
        match &mut self.winning {
            Some(winning) if self.holder.tenure().is_held() => winning.poll(now, &self.holder, out),
            // The lease lost, nothing more is won back, and nothing won is given back while the
            // body lives (rule 7 of docs/safety.md: a stuck body's leases run out, none is
            // released); the term's end releases every replica.
            Some(winning) => winning.end(out),
            None => {}
        }
        self.publish(out);
    }

    /// An answer to a request of winning back a replica came, under `tag`: the replica may
    /// count now. False if it was none of those.
    pub(super) fn won_back<T, E>(
        &mut self,
        now: I,
        answer: exchange::Answer<I, quorum::Reply>,
        out: &mut Outbox<I, R, T, E>,
    ) -> bool {
        let Some(winning) = &mut self.winning else {
            return false;
        };
        if self.over || !winning.owns(answer.tag) {
            return false;
        }
        let came = (answer.tag, answer.sent, answer.answer);
        winning.answered(now, came, &mut self.holder, out);
        self.publish(out);
        true
    }

    fn publish<T, E>(&mut self, out: &mut Outbox<I, R, T, E>) {
        let tenure = self.holder.tenure();
        if tenure != self.published {
            self.published = tenure;
            out.push(Output::Tenure(tenure));
        }
    }

    /// A renew's answer came, under `tag`: the holder takes it. False if the lead did not
    /// send it, or no longer wants it.
    pub(super) fn renewed<T, E>(
        &mut self,
        now: I,
        answer: exchange::Answer<I, holder::Reply>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Outbox<I, R, T, E>,
    ) -> bool {
        let Some(at) = self.renews.iter().position(|(t, _)| *t == answer.tag) else {
            return false;
        };
        let (_, holders) = self.renews.remove(at);
        let renewed = exchange::Answer {
            tag: holders,
            sent: answer.sent,
            answer: answer.answer,
        };
        if let Some(note) = self.holder.handle_answer(now, renewed, &mut *draw) {
            out.push(Output::Renewal(note));
        }
        self.publish(out);
        true
    }

    /// The lookout's request under `tag` came back: the lookout takes it. False if it was not
    /// the lookout's request on its way.
    pub(super) fn came<T, E>(
        &mut self,
        now: I,
        wall: R::Wall,
        tag: Tag,
        came: Came<R>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Outbox<I, R, T, E>,
    ) -> bool {
        if self.watching != Watching::Asked(tag) {
            return false;
        }
        let event = match came {
            Came::Listed(line) => lookout::Event::Listed(line),
            Came::Probed(answered) => lookout::Event::Probed(answered),
        };
        self.watch(now, wall, event, draw, out);
        true
    }

    /// Steps the lookout with `event` and carries its actions into outputs; its last action
    /// is what it waits for next.
    fn watch<T, E>(
        &mut self,
        now: I,
        wall: R::Wall,
        event: lookout::Event<I, R>,
        draw: &mut impl FnMut() -> f64,
        out: &mut Outbox<I, R, T, E>,
    ) {
        for action in self.lookout.step(now, wall, event, draw) {
            match action {
                lookout::Action::List { limit } => {
                    self.ask(Request::List { limit }, out);
                }
                lookout::Action::Probe { to, url } => {
                    self.ask(Request::Probe { to, url }, out);
                }
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
    fn stop_body<T, E>(&mut self, why: Stop, out: &mut Outbox<I, R, T, E>) {
        if !std::mem::replace(&mut self.stopping, true) {
            out.push(Output::StopBody(why));
        }
    }

    /// Sends the lookout's request.
    fn ask<T, E>(&mut self, request: Request<I, R, T>, out: &mut Outbox<I, R, T, E>) {
        self.watching = Watching::Asked(out.send(request));
    }

    /// The body is gone: renewing stops (the answers on their way are no longer wanted) and
    /// the lead ends with the holder's last word. A body stopped for a preemption, and not
    /// for a shutdown that came too, ended [`TermEnd::Preempted`].
    pub(super) fn end<T, E>(&mut self, end: TermEnd, out: &mut Outbox<I, R, T, E>) -> Over<I> {
        self.over = true;
        // The body's own timer stopped it at the stop deadline, maybe before the renew cut at
        // that deadline was answered: the holder says so now, not after the release.
        if end == TermEnd::Expired
            && let Some(note) = self.holder.expiry()
        {
            out.push(Output::Renewal(note));
        }
        let renews = self.renews.drain(..).map(|(ours, _)| ours);
        let asked = match std::mem::replace(&mut self.watching, Watching::Done) {
            Watching::Asked(tag) => Some(tag),
            _ => None,
        };
        out.extend(renews.chain(asked).map(Output::Forget));
        if let Some(winning) = &mut self.winning {
            winning.end(out);
        }
        let end = match end {
            TermEnd::Shutdown if self.preempted.is_some() && !self.shutdown => TermEnd::Preempted,
            end => end,
        };
        Over {
            end,
            last: self.holder.tenure(),
            preempted: self.preempted.clone(),
        }
    }
}
