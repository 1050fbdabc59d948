//! The campaign's machine ([`Campaign`]): the candidate and what it waits for (a pause, its own
//! request, a round, a late acquire sat out), each input routed to what awaits it, each of the
//! candidate's actions carried out. The rounds themselves are the [`Runner`]'s, over the one
//! exchange of requests in flight ([`InFlight`]).

use super::flight::InFlight;
use super::messages::{Awaits, End, Failed, Grounds, Input, Output, Reply, Request, Say, Settings};
use super::round::{Next, Runner, Running};
use crate::attempt::Delay;
use crate::candidate::{self, Candidate, Outcome, Rest, Round};
use crate::exchange::{Answer, Tag, Waiting};
use crate::late::Settled;
use crate::timing::Moment;

/// What the candidate asked of the store itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Asked {
    Recreate,
    Look,
    Count,
}

/// What the campaign waits for.
#[derive(Debug)]
#[allow(clippy::large_enum_variant)] // one per campaign: boxing a round would allocate per step
enum Stage<I, K, V, E> {
    /// An event of the candidate's own: a pause, the body, listening, a late acquire.
    Candidate,
    /// A pause: it ends at `until`, at `stop`, and (`woken`) at a wake-up, or (`placed`) a
    /// placement.
    Pause { until: I, woken: bool, placed: bool },
    /// The candidate's own request.
    Asked(Tag, Asked),
    /// A round the candidate called for.
    Round(Running<I, K, V, E>),
    /// Sitting a late acquire out, sent at `sent`: until it settled, or until the lease it may
    /// have taken has surely expired (`sent + L`).
    SittingOut { sent: I },
    /// `stop` came while sitting it out: a grace until `until` for its settling (a late
    /// success is released then, rule 7 of docs/safety.md).
    Grace { expired: I, until: I },
    /// Over.
    Over,
}

/// A member's campaign: the candidate, the round running, and what the rounds remember.
#[derive(Debug)]
pub struct Campaign<I, K, V, T, E> {
    settings: Settings,
    candidate: Candidate<I>,
    /// One round only, without the candidate ([`Campaign::one_round`]).
    one_round: Option<Round>,
    stage: Stage<I, K, V, E>,
    /// The candidate's requests and its rounds', under their tags.
    flight: InFlight<I, V, E>,
    /// The rounds, and what they remember and leave.
    runner: Runner<I, K, V, T, E>,
    /// `stop` came: the next pause ends at once.
    stopping: bool,
    /// The candidate's actions of one of its steps, empty between them: kept for its room (a
    /// step within a step, the candidate's next after a round over at once, takes a list of
    /// its own).
    actions: Vec<candidate::Action<I, E>>,
}

impl<I, K, V, T, E> Campaign<I, K, V, T, E>
where
    I: Moment,
    K: Clone + PartialEq + std::fmt::Debug,
    V: Clone + PartialEq + std::fmt::Debug,
    T: Clone + PartialEq,
    E: Failed,
{
    /// A campaign with `settings`, until a term is won, `stop` comes or the credentials are
    /// refused.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            candidate: match settings.set.len() > 1 {
                true => Candidate::new(settings.timing, settings.slots).on_replicas(),
                false => Candidate::new(settings.timing, settings.slots),
            },
            one_round: None,
            stage: Stage::Candidate,
            flight: InFlight::default(),
            runner: Runner::new(settings),
            stopping: false,
            actions: Vec::new(),
        }
    }

    /// A campaign of `round` alone: it ends with the round ([`End::Won`] or [`End::Round`]).
    pub fn one_round(settings: Settings, round: Round) -> Self {
        Self {
            one_round: Some(round),
            ..Self::new(settings)
        }
    }

    /// What ends its wait now.
    pub fn awaits(&self) -> Awaits<I> {
        let mut answers = Vec::new();
        let (until, pause) = self.waits(Some(&mut answers));
        let settled = matches!(self.stage, Stage::SittingOut { .. } | Stage::Grace { .. });
        Awaits {
            waiting: Waiting { answers, until },
            stop: pause.is_some(),
            woken: pause.is_some_and(|(woken, _)| woken),
            placed: pause.is_some_and(|(_, placed)| placed),
            settled,
        }
    }

    /// The instant it is woken at, as [`Campaign::awaits`] names it (without the list of
    /// answers: asked at every step of a member).
    pub fn until(&self) -> Option<I> {
        self.waits(None).0
    }

    /// Whether it takes a wake-up now, and a late acquire settled, as [`Campaign::awaits`]
    /// says.
    pub fn takes(&self) -> (bool, bool) {
        let (_, pause) = self.waits(None);
        let settled = matches!(self.stage, Stage::SittingOut { .. } | Stage::Grace { .. });
        (pause.is_some_and(|(woken, _)| woken), settled)
    }

    /// Whether it awaits the answer under `tag` now, as [`Campaign::awaits`] names them,
    /// without building their list (asked at every answer).
    fn awaits_answer(&self, tag: Tag) -> bool {
        match &self.stage {
            Stage::Round(running) => running.awaits_answer(tag),
            Stage::Asked(asked, _) => *asked == tag,
            _ => false,
        }
    }

    /// Its timer, and in a pause whether a wake-up and a placement end it; with `answers`,
    /// the answers it awaits are pushed there.
    fn waits(&self, answers: Option<&mut Vec<Tag>>) -> (Option<I>, Option<(bool, bool)>) {
        match &self.stage {
            Stage::Pause {
                until,
                woken,
                placed,
            } => (Some(*until), Some((*woken, *placed))),
            Stage::Round(running) => match answers {
                Some(answers) => (running.awaits(answers), None),
                None => (running.until(), None),
            },
            Stage::Asked(tag, _) => {
                answers.into_iter().for_each(|a| a.push(*tag));
                (None, None)
            }
            Stage::SittingOut { sent } => {
                let expired = *sent + self.settings.timing.duration;
                (Some(expired), Some((false, false)))
            }
            Stage::Grace { until, .. } => (Some(*until), None),
            Stage::Candidate | Stage::Over => (None, None),
        }
    }

    /// Whether it is over.
    pub fn is_over(&self) -> bool {
        matches!(self.stage, Stage::Over)
    }

    /// The one transition: `input` came at `now`. Returns what to do, in order.
    pub fn handle<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        input: Input<I, V, E>,
        g: &mut G,
    ) -> Vec<Output<I, K, E>> {
        let mut out = Vec::new();
        self.handle_into(now, input, g, &mut out);
        out
    }

    /// [`Campaign::handle`], its outputs pushed onto `out` (a member keeps one list's room
    /// for every step of its campaign).
    pub fn handle_into<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        input: Input<I, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        match input {
            Input::Start => match self.one_round {
                Some(round) => self.round(now, round, g, out),
                None => self.step(now, candidate::Event::Start, g, out),
            },
            Input::Answer(answer) => {
                let Some(answer) = self.flight.came(answer) else {
                    return;
                };
                match self.awaits_answer(answer.tag) {
                    true => self.answered(now, answer, g, out),
                    false => self.flight.keep(answer),
                }
            }
            Input::Timer => self.timer(now, g, out),
            Input::Stop => {
                self.stopping = true;
                match self.stage {
                    Stage::SittingOut { .. } => self.sit_out_stopped(now, g, out),
                    _ => self.paused(now, candidate::Event::Stopped, g, out),
                }
            }
            Input::Woken => self.paused(now, candidate::Event::Woken, g, out),
            Input::Placed => self.paused(now, candidate::Event::Placed, g, out),
            Input::Listening => self.step(now, candidate::Event::Listening, g, out),
            Input::MayLead(may) => self.step(now, candidate::Event::MayLead(may), g, out),
            Input::Settled(settled) => self.settled(now, settled, g, out),
        }
    }

    /// An event that ends a pause, if the campaign pauses (else it is for later, or nothing).
    fn paused<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        event: candidate::Event<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let wanted = match (&self.stage, &event) {
            (Stage::Pause { .. }, candidate::Event::Stopped | candidate::Event::Rested) => true,
            (Stage::Pause { woken, .. }, candidate::Event::Woken) => *woken,
            (Stage::Pause { placed, .. }, candidate::Event::Placed) => *placed,
            _ => false,
        };
        if wanted {
            self.step(now, event, g, out);
        }
    }

    /// The timer came: a pause is over, or an acquire got no answer in time.
    fn timer<G: Grounds<I, K, V, T>>(&mut self, now: I, g: &mut G, out: &mut Vec<Output<I, K, E>>) {
        match std::mem::replace(&mut self.stage, Stage::Over) {
            Stage::Round(running) => {
                let next = self.runner.timer(now, running, &mut self.flight, g, out);
                self.ran(now, next, g, out);
            }
            stage @ Stage::Pause { .. } => {
                self.stage = stage;
                self.paused(now, candidate::Event::Rested, g, out);
            }
            // The lease it may have taken has surely expired.
            stage @ Stage::SittingOut { .. } => {
                self.stage = stage;
                self.settled(now, Settled::MayHold, g, out);
            }
            Stage::Grace { expired, .. } => {
                out.push(Output::Say(Say::Unsettled(expired)));
                self.step(now, candidate::Event::SatOut(None), g, out);
            }
            stage => self.stage = stage,
        }
    }

    /// One step of the candidate, and what its actions call for.
    fn step<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        event: candidate::Event<E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let mut seen = g.seen();
        // (The shell learns of a late acquire only from this step's outputs.)
        seen.late |= self.runner.is_late();
        self.stage = Stage::Candidate;
        let mut actions = std::mem::take(&mut self.actions);
        (self.candidate).step_into(event, &seen, &mut || g.draw(), &mut actions);
        for action in actions.drain(..) {
            self.act(now, action, g, out);
        }
        crate::room::put_back(&mut self.actions, actions);
    }

    fn act<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        action: candidate::Action<I, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        use candidate::Action;
        match action {
            Action::Say(note) => out.push(Output::Say(Say::Candidate(note))),
            Action::SitOut => {
                let sent = self
                    .runner
                    .take_late()
                    .or_else(|| g.late_sent())
                    .unwrap_or(now);
                self.stage = Stage::SittingOut { sent };
                out.push(Output::SitOut);
            }
            Action::Recreate => self.ask(Request::Recreate { slot: 0 }, Asked::Recreate, out),
            Action::Missing => g.delay(0, Delay::Missing),
            Action::Look => self.ask(Request::Look { slot: 0 }, Asked::Look, out),
            Action::AskBody => out.push(Output::AskBody),
            Action::CheckCount => self.ask(Request::CheckCount, Asked::Count, out),
            Action::Round(round) => self.round(now, round, g, out),
            Action::Listen => out.push(Output::Listen),
            Action::Rest(how) => {
                let until = match how {
                    Rest::For(pause) => now + pause,
                    Rest::UntilAtMost(at, most) => at.min(now + most),
                };
                self.pause(now, until, false, false, g, out);
            }
            Action::Follow { pause, listening } => {
                self.pause(now, now + pause, true, listening, g, out)
            }
            Action::End(end) => {
                self.stage = Stage::Over;
                let end = match end {
                    candidate::End::Won => match self.runner.take_won() {
                        Some(won) => End::Won(won),
                        None => unreachable!("a round won a term"),
                    },
                    candidate::End::Stopped => End::Stopped,
                    candidate::End::Denied(e) => End::Denied(e),
                };
                out.push(Output::End(end));
            }
        }
    }

    /// The late acquire sat out settled so (or the lease it may have taken has surely expired):
    /// the pause before the next attempt, from what it learnt; after a stop, none.
    fn settled<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        settled: Settled,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let timing = self.settings.timing;
        match self.stage {
            Stage::SittingOut { sent } => {
                let pause = settled.pause(sent, now, &timing, || g.draw());
                self.step(now, candidate::Event::SatOut(Some(pause)), g, out);
            }
            Stage::Grace { .. } => self.step(now, candidate::Event::SatOut(None), g, out),
            _ => {}
        }
    }

    /// `stop` while sitting a late acquire out: exiting now would leave a late success held by
    /// nobody; its answer usually comes soon after the timeout, and the release then takes one
    /// request, so it is given `2R`. (Come at the expiry itself, the expiry is first: the
    /// pause it calls for ends at once.)
    fn sit_out_stopped<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Stage::SittingOut { sent } = self.stage else {
            return;
        };
        let timing = self.settings.timing;
        let expired = sent + timing.duration;
        if now >= expired {
            return self.settled(now, Settled::MayHold, g, out);
        }
        let until = now + 2 * timing.request_timeout();
        self.stage = Stage::Grace { expired, until };
    }

    fn ask(&mut self, request: Request<I, K>, asked: Asked, out: &mut Vec<Output<I, K, E>>) {
        let tag = self.flight.send(request, out);
        self.stage = Stage::Asked(tag, asked);
    }

    /// A pause until `until`: over at once if `stop` came already.
    fn pause<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        until: I,
        woken: bool,
        placed: bool,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        self.stage = Stage::Pause {
            until,
            woken,
            placed,
        };
        if self.stopping {
            self.step(now, candidate::Event::Stopped, g, out);
        }
    }

    /// The round the candidate calls for.
    fn round<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        round: Round,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let next = self.runner.start(now, round, &mut self.flight, g, out);
        self.ran(now, next, g, out);
    }

    /// Where the round is after a step: running on, or over.
    fn ran<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        next: Next<I, K, V, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        match next {
            Next::Runs(running) => self.stage = Stage::Round(running),
            Next::Over(result) => self.rounded(now, result, g, out),
        }
    }

    /// A round is over: the candidate takes what it came to (a campaign of one round ends).
    fn rounded<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        result: Result<Outcome, E>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        out.push(Output::Rounded(result.as_ref().err().cloned()));
        if self.one_round.is_none() {
            return self.step(now, candidate::Event::Round(result), g, out);
        }
        self.stage = Stage::Over;
        let end = match (result, self.runner.take_won()) {
            (Ok(Outcome::Won), Some(won)) => End::Won(won),
            (result, _) => End::Round(result),
        };
        out.push(Output::End(end));
    }

    /// An answer awaited came.
    fn answered<G: Grounds<I, K, V, T>>(
        &mut self,
        now: I,
        answer: Answer<I, Reply<V, E>>,
        g: &mut G,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        use candidate::Event as C;
        match (std::mem::replace(&mut self.stage, Stage::Over), answer) {
            (Stage::Round(running), answer) => {
                let next = (self.runner).answered(now, running, answer, &mut self.flight, g, out);
                self.ran(now, next, g, out);
            }
            (
                Stage::Asked(_, Asked::Recreate),
                Answer {
                    answer: Reply::Recreated,
                    ..
                },
            ) => self.step(now, C::Recreated, g, out),
            (
                Stage::Asked(_, Asked::Look),
                Answer {
                    answer: Reply::Looked,
                    ..
                },
            ) => self.step(now, C::Looked, g, out),
            (
                Stage::Asked(_, Asked::Count),
                Answer {
                    answer: Reply::Counted(c),
                    ..
                },
            ) => self.step(now, C::Counted(c), g, out),
            (stage, answer) => {
                debug_assert!(false, "a campaign at {stage:?} got {:?}", answer.answer);
                self.stage = stage;
            }
        }
    }
}
