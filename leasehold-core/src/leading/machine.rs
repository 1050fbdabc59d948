//! The machine of one term ([`Leading`]): the lead while the body runs, the preparation beside
//! the stopping body, and once the body is gone and renewing stopped, the outlast and the
//! give-up, each input routed to the part it is for, in the order of the member's loop of
//! terms ([`Terms`]: rule 7 of docs/safety.md).

use super::handing::{Beside, Handing};
use super::lead::{Came, Lead, Over};
use super::messages::{Awaits, Ended, Grounds, Input, Outbox, Output, Reply, Request, Settings};
use super::preparing::Preparing;
use crate::exchange::{self, Tag, Tags, Waiting};
use crate::failure::StoreFailure;
use crate::handoff::{self, Begin, Surrender};
use crate::holder::Tenure;
use crate::line::Record;
use crate::term::{GiveUp, Stage, TermEnd, Terms};
use crate::timing::Deadline;
use crate::timing::Moment;

/// Where the term stands.
#[derive(Debug)]
enum At<I, R, N, T, E> {
    /// The lease is won, the term not begun ([`Input::Start`]).
    Won,
    /// The lead: the body runs, or stops.
    Leading,
    /// The body outlived its kill: it is waited for until this instant, when the lease it was
    /// last renewed under has surely expired.
    Outlasting(I),
    /// The release under this tag is on its way.
    Releasing(Tag),
    /// The handoff.
    Handing(Box<Handing<I, R, N, T, E>>),
    /// The lease is given up: the term is over.
    Ended,
}

/// One term of a leader, from the lease won to the lease given up, over the member's
/// exchange: `R` is a member's record, `N` a notice as the choice wrote it, `T` the blob's
/// ETag, `E` a store's error.
#[derive(Debug)]
pub struct Leading<I, R: Record, N, T, E> {
    settings: Settings<T>,
    /// The member's loop of terms, lent for the term: it keeps rule 7's order.
    terms: Terms<I>,
    lead: Lead<I, R>,
    /// The handoff's preparation, until the handoff takes it, waits for it or drops it.
    prep: Option<Preparing<I, R, N, E>>,
    at: At<I, R, N, T, E>,
    tags: Tags,
    /// Shutdown was asked for.
    shutdown: bool,
    /// How the lead ended, once the body is gone.
    over: Option<Over<I>>,
    /// The body outlived its kill and its lease.
    outlived: bool,
}

impl<I, R, N, T, E> Leading<I, R, N, T, E>
where
    I: Moment,
    R: Record + Clone,
    N: Clone,
    T: Clone,
    E: StoreFailure,
{
    /// The term of a lease won by a request sent at `sent`; `terms` is the member's loop of
    /// terms as its campaign left it, which the term keeps (told the term is won at
    /// [`Input::Start`], and each of its stages after) until it gives it back
    /// ([`Leading::into_terms`]).
    pub fn new(settings: Settings<T>, sent: I, terms: Terms<I>) -> Self {
        Self::with_leases(
            settings,
            sent,
            &[],
            &crate::quorum::Unheld::default(),
            terms,
        )
    }

    /// A term won on several replicas: each one's lease as the attempt on a majority won it
    /// ([`Holder::with_leases`](crate::holder::Holder::with_leases); empty: the one account's,
    /// won by a request sent at `sent`), and what it needs to win back those it does not hold
    /// (`unheld`; docs/quorum.md, the rule *Renewing*).
    pub fn with_leases(
        settings: Settings<T>,
        sent: I,
        leases: &[Option<Deadline<I>>],
        unheld: &crate::quorum::Unheld<I>,
        terms: Terms<I>,
    ) -> Self {
        Self {
            lead: Lead::new(&settings, sent, leases, unheld),
            settings,
            terms,
            prep: None,
            at: At::Won,
            tags: Tags::default(),
            shutdown: false,
            over: None,
            outlived: false,
        }
    }

    /// The lease as the holder sees it now.
    pub fn tenure(&self) -> Tenure<I> {
        self.lead.tenure()
    }

    /// Whether the lease on `replica` counts for the term now (on several replicas: won with
    /// the term or since, and not refused).
    pub fn holds(&self, replica: usize) -> bool {
        self.lead.holds(replica)
    }

    /// The member's loop of terms, as the term left it.
    pub fn terms(&self) -> &Terms<I> {
        &self.terms
    }

    /// The member's loop of terms, given back (once the term is over: [`Output::End`], it
    /// stands at the rest that term calls for).
    pub fn into_terms(self) -> Terms<I> {
        self.terms
    }

    /// What ends the wait now: the answers on their way, the one timer (the next renew or the
    /// lookout's wake, the departure, the wait for what was prepared, a pause of the handoff,
    /// the end of an outlast), a look at the line, the body's end.
    pub fn awaits(&self) -> Awaits<I> {
        let leading = matches!(self.at, At::Leading) && !self.lead.over();
        let mut answers = self.lead.answers();
        if let Some(p) = &self.prep {
            answers.extend(p.awaits());
        }
        match &self.at {
            At::Releasing(tag) => answers.push(*tag),
            At::Handing(h) => answers.extend(h.awaits()),
            _ => {}
        }
        Awaits {
            waiting: Waiting {
                answers,
                until: self.until(),
            },
            look: self.lead.looking(),
            body: leading,
            stuck: matches!(self.at, At::Outlasting(_)),
        }
    }

    /// Whether [`Input::Looked`] with the line as listed at `listed` reads the line: a look
    /// at a listing its lookout has seen drops the line unread, and the member, which copies
    /// every candidate's record into it, gives it none then.
    pub fn takes_line(&self, listed: Option<I>) -> bool {
        self.lead.takes_line(listed)
    }

    /// The one timer, as [`Leading::awaits`] names it (without the list of answers: asked at
    /// every step of a member).
    pub fn until(&self) -> Option<I> {
        let leading = matches!(self.at, At::Leading) && !self.lead.over();
        let mut until = leading.then(|| self.lead.until()).flatten();
        let mut also = |at: Option<I>| {
            until = match (until, at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        };
        if let Some(p) = &self.prep {
            also(p.until());
        }
        match &self.at {
            At::Outlasting(at) => also(Some(*at)),
            At::Handing(h) => also(h.until()),
            _ => {}
        }
        until
    }

    /// What `input`, reported at `now` (`wall` on the wall clock), calls for. `draw` is the
    /// shell's uniform draw in `[0, 1)`, taken only when a rule needs one, at the moment it
    /// does; `grounds` answers what only the member knows, at the moment asked: a simulated
    /// history depends on their order.
    pub fn handle(
        &mut self,
        now: I,
        wall: R::Wall,
        input: Input<I, R, N, T, E>,
        draw: &mut impl FnMut() -> f64,
        grounds: &mut impl Grounds<R, N, T>,
    ) -> Vec<Output<I, R, T, E>> {
        let mut out = Outbox::new(std::mem::take(&mut self.tags));
        match input {
            Input::Start {
                line,
                listed,
                shutdown,
            } => {
                if matches!(self.at, At::Won) {
                    let begun = (line, listed, shutdown);
                    self.start(now, wall, begun, draw, grounds, &mut out);
                }
            }
            Input::Answer(answer) => self.answered(now, wall, answer, draw, grounds, &mut out),
            Input::Timer => self.timer(now, wall, draw, grounds, &mut out),
            Input::Looked { line, listed } => {
                self.lead.looked(now, wall, line, listed, draw, &mut out);
            }
            Input::Shutdown => {
                self.shutdown = true;
                if matches!(self.at, At::Leading) && !self.lead.over() {
                    self.lead.shutdown(&mut out);
                }
                self.stop(now, grounds, &mut out);
            }
            Input::BodyGone(end) => {
                if matches!(self.at, At::Leading) && !self.lead.over() {
                    self.body_gone(now, end, grounds, &mut out);
                }
            }
            Input::StuckGone => {
                if matches!(self.at, At::Outlasting(_)) {
                    self.outlasted(now, true, grounds, &mut out);
                }
            }
        }
        if matches!(self.at, At::Leading) {
            self.lead.renew(now, &mut out);
        }
        let (out, tags) = out.done();
        self.tags = tags;
        out
    }

    /// The term begins at `now`, with the line as `listed`, `shutdown` asked or not: the
    /// preparation waits for a stop (begun at once when shutdown was asked already), and the
    /// body starts, unless the term gets none (won while shutting down, or past its stop
    /// deadline): then it is gone at once.
    fn start(
        &mut self,
        now: I,
        wall: R::Wall,
        (line, listed, shutdown): (Vec<R>, Option<I>, bool),
        draw: &mut impl FnMut() -> f64,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        self.shutdown |= shutdown;
        self.terms.won(now, &self.lead.tenure(), self.shutdown);
        self.at = At::Leading;
        if self.settings.lined {
            let s = &self.settings;
            let mutants = s.mutants.preparation;
            self.prep = Some(Preparing::begin(&s.timing, s.slots, mutants));
        }
        if self.shutdown {
            self.stop(now, grounds, out);
        }
        match self.terms.step(self.shutdown) {
            Stage::Lead {
                unstarted: Some(end),
            } => self.body_gone(now, end, grounds, out),
            _ => {
                out.push(Output::StartBody);
                self.lead.start(now, wall, line, listed, draw, out);
            }
        }
    }

    /// A stop was requested (shutdown): the preparation begins, unless the handoff took it.
    fn stop(&mut self, now: I, grounds: &mut impl Grounds<R, N, T>, out: &mut Outbox<I, R, T, E>) {
        let held_until = self.held_until();
        if let Some(p) = &mut self.prep {
            p.stop(now, held_until, grounds, out);
        }
    }

    /// The term's kill deadline while the lease is held: none once it is not.
    fn held_until(&self) -> Option<I> {
        match self.lead.tenure() {
            Tenure::Held(deadline) => Some(deadline.kill_at),
            _ => None,
        }
    }

    /// The instant named came, at `now`: the renew or the lookout's wake, the departure, the
    /// end of an outlast, the handoff's pause or its wait for what was prepared.
    fn timer(
        &mut self,
        now: I,
        wall: R::Wall,
        draw: &mut impl FnMut() -> f64,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        if matches!(self.at, At::Leading) && !self.lead.over() {
            self.lead.timer(now, wall, draw, out);
        }
        let held = self.held_until().is_some();
        if let Some(p) = &mut self.prep {
            p.timer(now, held, out);
        }
        match &mut self.at {
            At::Outlasting(until) if now >= *until => self.outlasted(now, false, grounds, out),
            At::Handing(h) => {
                let beside = Beside {
                    prep: &mut self.prep,
                    stopped: self.shutdown,
                };
                if let Some(surrender) = h.timer(now, beside, grounds, out) {
                    self.surrendered(now, surrender, out);
                }
            }
            _ => {}
        }
    }

    /// An answer came: a renew's goes to the holder, a listing's or a probe's to the lookout,
    /// the rest to the preparation or the handoff that sent it, or the release.
    fn answered(
        &mut self,
        now: I,
        wall: R::Wall,
        answer: exchange::Answer<I, Reply<R, N, T, E>>,
        draw: &mut impl FnMut() -> f64,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let (tag, sent) = (answer.tag, answer.sent);
        let came = match answer.answer {
            Reply::Renew(answer) => {
                let renewed = exchange::Answer { tag, sent, answer };
                self.lead.renewed(now, renewed, draw, out);
                return;
            }
            Reply::WinBack(answer) => {
                let won_back = exchange::Answer { tag, sent, answer };
                self.lead.won_back(now, won_back, out);
                return;
            }
            Reply::Listed(line) => Came::Listed(line),
            Reply::Probed(answered) => Came::Probed(answered),
            reply => return self.ended(now, tag, sent, reply, grounds, out),
        };
        self.lead.came(now, wall, tag, came, draw, out);
    }

    /// An answer to a request of the term's end: the preparation's, the handoff's, or the
    /// release's.
    fn ended(
        &mut self,
        now: I,
        tag: Tag,
        sent: I,
        reply: Reply<R, N, T, E>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let held_until = self.held_until();
        let prepared = match (&mut self.prep, reply) {
            (Some(p), Reply::Choice(r)) if p.owns(tag) => {
                let answer = exchange::Answer {
                    tag,
                    sent,
                    answer: *r,
                };
                p.chose(now, held_until, answer, grounds, out)
            }
            (Some(p), Reply::Changed(_)) if p.owns(tag) => p.changed(now, tag, grounds, out),
            (_, Reply::Released(released)) if matches!(self.at, At::Releasing(t) if t == tag) => {
                return self.finish(Surrender::Released(released.is_ok()), out);
            }
            (_, reply) => {
                let answer = exchange::Answer {
                    tag,
                    sent,
                    answer: reply,
                };
                return self.handed(now, answer, grounds, out);
            }
        };
        // What was prepared may be ready now, while the handoff waits for it.
        if prepared && let At::Handing(h) = &mut self.at {
            let beside = Beside {
                prep: &mut self.prep,
                stopped: self.shutdown,
            };
            if let Some(surrender) = h.prepared(now, beside, grounds, out) {
                self.surrendered(now, surrender, out);
            }
        }
    }

    /// An answer for the handoff, if it is on its way.
    fn handed(
        &mut self,
        now: I,
        answer: exchange::Answer<I, Reply<R, N, T, E>>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let At::Handing(h) = &mut self.at else {
            return;
        };
        if !h.owns(answer.tag) {
            return;
        }
        let beside = Beside {
            prep: &mut self.prep,
            stopped: self.shutdown,
        };
        if let Some(surrender) = h.answered(now, answer, beside, grounds, out) {
            self.surrendered(now, surrender, out);
        }
    }

    /// The body is gone at `now`, for `end`: renewing stops, the member steps down, and then
    /// (rule 7: never before) the body that outlived its kill is outlasted, or the lease is
    /// given up.
    fn body_gone(
        &mut self,
        now: I,
        end: TermEnd,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let over = self.lead.end(end, out);
        let end = self.terms.body_gone(over.end, now);
        let last = over.last;
        self.terms.renewing_stopped(last);
        out.push(Output::SteppedDown { end, last });
        self.over = Some(Over { end, ..over });
        match self.terms.step(self.shutdown) {
            Stage::Outlast => {
                let deadline = last.deadline();
                let expiry = deadline.expiry(&self.settings.timing);
                let kill_at = deadline.kill_at;
                out.push(Output::Outlasting { kill_at, expiry });
                self.at = At::Outlasting(expiry);
            }
            Stage::GiveUp(give) => self.give_up(now, give, grounds, out),
            stage => unreachable!("a term whose body is gone stands at {stage:?}"),
        }
    }

    /// The body that outlived its kill is gone (`gone`), or the lease it was last renewed
    /// under has surely expired with the body still there: then nothing is given up.
    fn outlasted(
        &mut self,
        now: I,
        gone: bool,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        self.terms.outlasted(gone);
        match self.terms.step(self.shutdown) {
            Stage::GiveUp(give) => self.give_up(now, give, grounds, out),
            _ => {
                self.outlived = true;
                self.finish(Surrender::Lost, out);
            }
        }
    }

    /// The lease is given up as `give` says ([`crate::term::give_up`]), at `now`: nothing
    /// when it is not the term's any more, a release after an involuntary end, the handoff
    /// after a voluntary one.
    fn give_up(
        &mut self,
        now: I,
        give: GiveUp<I>,
        grounds: &mut impl Grounds<R, N, T>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        // On several replicas, a handoff changes the lease on each this term holds (its
        // requests on the first replica mirrored by the member, docs/quorum.md, Handover): the
        // others are released once it ends ([`Self::surrendered`]).
        if matches!(give, GiveUp::Release) {
            self.release_replicas(now, out);
        }
        match give {
            GiveUp::Nothing => self.finish(Surrender::Lost, out),
            GiveUp::Release => {
                self.drop_prep(out);
                let limit = now + self.settings.timing.request_timeout();
                let request = Request::Store {
                    request: Box::new(handoff::Request::Release),
                    limit,
                };
                self.at = At::Releasing(out.send(request));
            }
            GiveUp::HandOver(ending, deadline) => {
                let over = self.over.as_ref().expect("the body is gone");
                let s = &self.settings;
                let term = handoff::Term {
                    kill_at: deadline.kill_at,
                    epoch: s.epoch,
                    etag: s.etag.clone(),
                    slots: s.slots,
                    departs: matches!(over.end, TermEnd::Shutdown | TermEnd::Exit(_)),
                };
                let named = over.preempted.as_ref().map(|p| p.to.clone());
                let begin = Begin {
                    ending,
                    named: named.is_some(),
                    lined: s.lined,
                    mutants: s.mutants.handoff,
                };
                let beside = Beside {
                    prep: &mut self.prep,
                    stopped: self.shutdown,
                };
                let (mut h, first) = Handing::begin(&s.timing, now, term, begin, named);
                let done = h.carry(now, first, beside, grounds, out);
                self.at = At::Handing(Box::new(h));
                if let Some(surrender) = done {
                    self.surrendered(now, surrender, out);
                }
            }
        }
    }

    /// The handoff gave the lease up so: on several replicas, the term's lease on each beyond
    /// the first is released too. Even once it was handed over: a replica the hand-on did not
    /// change (its lease won back as the term ended, or another member's write there since
    /// refused the change) would otherwise keep the term's lease until it runs out, and the
    /// successor could not win a majority before that; one it changed refuses the release, its
    /// lease now under the successor's id.
    fn surrendered(&mut self, now: I, surrender: Surrender<R>, out: &mut Outbox<I, R, T, E>) {
        self.release_replicas(now, out);
        self.finish(surrender, out);
    }

    /// On several replicas, the term's lease on each beyond the first is released beside what
    /// becomes of the first's (a release, or a handoff), each release going on alone (one
    /// changed to another member's lease id since refuses it).
    fn release_replicas(&mut self, now: I, out: &mut Outbox<I, R, T, E>) {
        let limit = now + self.settings.timing.request_timeout();
        for replica in 1..self.settings.set.len() {
            let tag = out.send(Request::ReleaseReplica { replica, limit });
            out.push(Output::Forget(tag));
        }
    }

    /// What was being prepared is dropped: its requests on their way are no longer wanted.
    fn drop_prep(&mut self, out: &mut Outbox<I, R, T, E>) {
        if let Some(p) = self.prep.take() {
            p.drop_all(out);
        }
    }

    /// The lease was given up so: the term is over.
    fn finish(&mut self, surrender: Surrender<R>, out: &mut Outbox<I, R, T, E>) {
        self.drop_prep(out);
        self.terms.given_up();
        self.at = At::Ended;
        let over = self.over.take().expect("the body is gone");
        out.push(Output::End(Box::new(Ended {
            end: over.end,
            last: over.last,
            preempted: over.preempted,
            outlived: self.outlived,
            surrender,
        })));
    }
}
