//! The campaign's shell: drives the core's [`Campaign`] (the candidate and the round it runs,
//! one machine) over its exchange. It carries each output out in order (a request sent under
//! its tag, a late acquire left to settle, the body asked, a listing listened for, a log line),
//! then waits for what the campaign awaits ([`Awaits`]: the answers by tag, its one timer, a
//! stop, a wake-up, a placement) and hands in what came first. The I/O is here; the decisions
//! are not.

use super::grounds::{ElectorGrounds, Kept};
use super::late::{LateAcquire, settle};
use super::requests::{Came, Campaigned, Sent};
use crate::elector::error::Error;
use crate::elector::instance::Elector;
use crate::elector::keep::log_deadline;
use crate::elector::observe::LeaseOp;
use crate::elector::term::Term;
use crate::elector::wake::Waker;
use crate::mutant::Mutant;
use crate::store::{ETag, LeaseStore, MemberKey, StoreError};
use leasehold_core::attempt;
use leasehold_core::campaign::{Awaits, Campaign, End, Mutants, Settings, Won};
use leasehold_core::exchange::{Answer, Tag};
use leasehold_core::late::Settled;
use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::sync::futures::OwnedNotified;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

type Machine = Campaign<Instant, MemberKey, ETag, ETag, StoreError>;
type Output = leasehold_core::campaign::Output<Instant, MemberKey, StoreError>;
type Input = leasehold_core::campaign::Input<Instant, ETag, StoreError>;

impl<S: LeaseStore> Elector<S> {
    /// Tries to acquire until it succeeds: at once, then every jittered `acquire_interval` while
    /// someone else leads, with exponential backoff while storage fails. Returns `None` when
    /// `stop` is cancelled. `stop` only cuts the pauses between attempts, never an attempt: an
    /// acquire cut mid-flight may have succeeded on the server and would leave the lease held
    /// by nobody for up to `L`. A won term is returned even if `stop` came meanwhile; the caller
    /// releases it. An attempt that gets no answer within the request timeout is no term: it is
    /// never resent, and the campaign pauses until its late answer says what it did (a late
    /// success is released at once) or until the lease it may have taken has surely expired
    /// (a `LateAcquire`); a `stop` during that pause still waits up to `2R` for the late answer
    /// and that release.
    pub(crate) async fn campaign(
        &mut self,
        stop: &CancellationToken,
        may_lead: &mut (dyn FnMut() -> bool + Send),
    ) -> Result<Option<Term>, Error> {
        let campaign = Campaign::new(self.campaign_settings());
        match self.run_campaign(campaign, stop, may_lead).await {
            (End::Denied(e), _) => Err(Error::Denied(e)),
            (_, won) => Ok(won),
        }
    }

    /// One round alone ([`Campaign::one_round`]): its term, or none (`Ok(None)`: held), or
    /// its failure.
    #[cfg(test)]
    pub(super) async fn one_round(
        &mut self,
        round: leasehold_core::candidate::Round,
    ) -> Result<Option<Term>, StoreError> {
        let campaign = Campaign::one_round(self.campaign_settings(), round);
        match self
            .run_campaign(campaign, &CancellationToken::new(), &mut || true)
            .await
        {
            (End::Round(Err(e)), _) => Err(e),
            (_, won) => Ok(won),
        }
    }

    fn campaign_settings(&self) -> Settings {
        let on = |mutant| self.mutant.on(mutant);
        Settings {
            timing: self.timing,
            slots: self.slots,
            create_if_missing: self.create_if_missing,
            mutants: Mutants {
                attempt: attempt::Mutants {
                    deadline_from_answer: on(Mutant::DeadlineFromAnswer),
                    start_before_epoch: on(Mutant::StartBeforeEpoch),
                    lead_on_the_reservation: on(Mutant::LeadOnTheReservation),
                },
                watcher_stays: on(Mutant::WatcherStays),
                trust_the_notice: on(Mutant::TrustTheNotice),
            },
        }
    }

    /// Drives `campaign` to its end: how it ended, and the term it won.
    async fn run_campaign(
        &mut self,
        mut campaign: Machine,
        stop: &CancellationToken,
        may_lead: &mut (dyn FnMut() -> bool + Send),
    ) -> (End<Instant, StoreError>, Option<Term>) {
        let refill_late = self.mutant.on(Mutant::SlotRefillLate);
        let waker = self.waker.clone();
        let mut driver = Driver {
            grounds: ElectorGrounds {
                elector: self,
                kept: Kept::default(),
                refill_late,
            },
            flights: Vec::new(),
            placed: None,
            settling: None,
        };
        let mut input = Input::Start;
        loop {
            let mut next = None;
            let now = driver.grounds.elector.clock.now();
            for output in campaign.handle(now, input, &mut driver.grounds) {
                match driver.carry_out(output, may_lead).await {
                    Carried::Next(came) => next = Some(came),
                    Carried::End(end, won) => return (end, won),
                    Carried::Done => {}
                }
            }
            input = match next {
                Some(input) => input,
                None => driver.wait(&campaign.awaits(), stop, &waker).await,
            };
        }
    }
}

/// A request on its way, under its tag.
struct Flight {
    tag: Tag,
    request: Campaigned,
    /// When it was sent, on the lease clock (what its answer is reported with).
    sent: Instant,
    /// When it was sent, on the runtime's clock (how long its answer took).
    started: Instant,
    how: Sent,
}

impl Flight {
    fn poll(&mut self, cx: &mut Context<'_>) -> Poll<Came> {
        let failed = |e: tokio::task::JoinError| {
            Came::Failed(StoreError::Client(format!("a request's task failed: {e}")))
        };
        match &mut self.how {
            Sent::Acquire(task) => Pin::new(task).poll(cx).map(|joined| match joined {
                Ok(acquired) => Came::Acquired(acquired),
                Err(e) => Came::Acquired(Err(StoreError::Client(format!(
                    "the acquire request failed: {e}"
                )))),
            }),
            Sent::Task(task) => Pin::new(task)
                .poll(cx)
                .map(|joined| joined.unwrap_or_else(failed)),
            Sent::Here(future) => future.as_mut().poll(cx),
        }
    }
}

/// What carrying an output out came to.
enum Carried {
    /// The input it calls for at once.
    Next(Input),
    /// The campaign is over.
    End(End<Instant, StoreError>, Option<Term>),
    Done,
}

/// What ended a wait.
enum Ended {
    Answer(usize, Box<Came>),
    Input(Input),
}

/// The campaign's requests on their way, and the elector it runs in.
struct Driver<'a, S: LeaseStore> {
    grounds: ElectorGrounds<'a, S>,
    flights: Vec<Flight>,
    /// What a listing of the record keeper that places this instance next in line wakes,
    /// from [`Output::Listen`] to the pause it may cut short.
    placed: Option<Pin<Box<OwnedNotified>>>,
    /// The settling of the late acquire being sat out (dropped with the campaign, it goes on).
    settling: Option<JoinHandle<Settled>>,
}

impl<S: LeaseStore> Driver<'_, S> {
    async fn carry_out(
        &mut self,
        output: Output,
        may_lead: &mut (dyn FnMut() -> bool + Send),
    ) -> Carried {
        let e = &mut *self.grounds.elector;
        match output {
            Output::Send(send) => {
                let (sent, started) = (e.clock.now(), Instant::now());
                let how = self.grounds.send(&send.request);
                self.flights.push(Flight {
                    tag: send.tag,
                    request: send.request,
                    sent,
                    started,
                    how,
                });
            }
            // (A request in a task of its own goes on alone.)
            Output::Forget(tag) => self.flights.retain(|f| f.tag != tag),
            Output::SpendId => e.acquire_next_with(e.new_lease_id()),
            Output::Late(tag) => self.late(tag),
            Output::SitOut => self.settling = e.late.take().map(|late| late.settled),
            Output::Listen => {
                let m = e.membership.as_ref().expect("a member listens");
                let mut notified = Box::pin(m.placed_to_poll());
                notified.as_mut().enable();
                self.placed = Some(notified);
                return Carried::Next(Input::Listening);
            }
            Output::AskBody => return Carried::Next(Input::MayLead(may_lead())),
            Output::ShowLine => {
                if let Some(m) = &e.membership {
                    e.observer.line(&m.view());
                }
            }
            Output::Say(say) => e.say(say),
            Output::Rounded(failure) => e.last_failure = failure,
            Output::End(end) => {
                let won = match &end {
                    End::Won(won) => Some(self.term(*won)),
                    _ => None,
                };
                return Carried::End(end, won);
            }
        }
        Carried::Done
    }

    /// The acquire under `tag` got no answer in time: it is left to settle in the background
    /// ([`settle`]), and the campaign sits it out.
    fn late(&mut self, tag: Tag) {
        let Some(at) = self.flights.iter().position(|f| f.tag == tag) else {
            return;
        };
        let flight = self.flights.remove(at);
        let Sent::Acquire(request) = flight.how else {
            return;
        };
        let id = self.grounds.id();
        let e = &mut *self.grounds.elector;
        let timed_out = StoreError::TimedOut(e.timing.request_timeout());
        let took = flight.started.elapsed();
        e.observer
            .lease_op(LeaseOp::Acquire, took, Some(&timed_out));
        let store = e.store_of(self.grounds.kept.slot).clone();
        let settled = crate::spawn::spawn(settle(
            e.clock,
            store,
            e.observer.clone(),
            e.timing,
            id,
            flight.sent,
            request,
        ));
        e.late = Some(LateAcquire {
            sent: flight.sent,
            settled,
        });
    }

    /// The term `won`, from what the attempt's answers left.
    fn term(&self, won: Won<Instant>) -> Term {
        log_deadline(&won.deadline, won.epoch);
        let kept = &self.grounds.kept;
        Term {
            slot: won.slot,
            lease: self.grounds.id(),
            epoch: won.epoch,
            deadline: won.deadline,
            acquired_at: (kept.holder.as_ref())
                .map_or_else(|| self.grounds.elector.clock.wall(), |h| h.acquired_at),
            reserved: won.reserved,
            etag: kept.etag.clone(),
        }
    }

    /// Waits for what the campaign awaits: an answer it awaits (first), the late acquire's
    /// settling, `stop`, its timer, a placement, a wake-up, in that order when several came at
    /// once.
    async fn wait(
        &mut self,
        awaits: &Awaits<Instant>,
        stop: &CancellationToken,
        waker: &Waker,
    ) -> Input {
        let until = awaits.waiting.until;
        let clock = self.grounds.elector.clock;
        let timer = async {
            match until {
                Some(at) => clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let listened = match awaits.woken {
            true => self.placed.take().filter(|_| awaits.placed),
            false => None,
        };
        let placed = async {
            match listened {
                Some(notified) => notified.await,
                None => std::future::pending().await,
            }
        };
        let settling = &mut self.settling;
        let settled = async {
            match settling.as_mut().filter(|_| awaits.settled) {
                Some(task) => task.await.unwrap_or(Settled::MayHold),
                None => std::future::pending().await,
            }
        };
        let answers = &awaits.waiting.answers;
        let flights = &mut self.flights;
        let answer = poll_fn(|cx| {
            for (i, flight) in flights.iter_mut().enumerate() {
                if !answers.contains(&flight.tag) {
                    continue;
                }
                if let Poll::Ready(came) = flight.poll(cx) {
                    return Poll::Ready((i, came));
                }
            }
            Poll::Pending
        });
        let came = tokio::select! {
            biased;
            (i, came) = answer => Ended::Answer(i, Box::new(came)),
            settled = settled => Ended::Input(Input::Settled(settled)),
            () = stop.cancelled(), if awaits.stop => Ended::Input(Input::Stop),
            () = timer, if until.is_some() => Ended::Input(Input::Timer),
            () = placed => {
                tracing::debug!("next in line now: polling");
                Ended::Input(Input::Placed)
            }
            () = waker.woken(), if awaits.woken => {
                tracing::debug!("woken up: trying the acquire now");
                Ended::Input(Input::Woken)
            }
        };
        match came {
            Ended::Input(input @ Input::Settled(_)) => {
                self.settling = None;
                input
            }
            Ended::Input(input) => input,
            Ended::Answer(i, came) => {
                let flight = self.flights.remove(i);
                let answer = self.grounds.receive(&flight.request, *came, flight.started);
                Input::Answer(Answer {
                    tag: flight.tag,
                    sent: flight.sent,
                    answer,
                })
            }
        }
    }
}
