//! The one driver of a member ([`Elector::lead`], which both `leasehold run` and
//! [`Elector::run_while_leader`] run): the core's `Member` stepped with what happened (a
//! store call's return or its cut, its one timer, a wake-up, the body's end, shutdown, a
//! one-term campaign's stop) and each of its outputs carried out in order (a request sent, the
//! body started, fed, stopped or asked, a log line, what the observer and
//! [`Elector::watch`](crate::Elector::watch) show), until it ends. The decisions are the
//! core's; every ordering invariant of a term (rule 7) is its `Terms`.

use super::body::{Gone, Running};
use super::calls::Calls;
use super::step::{In, Job, Out, Shared, Stepper};
use super::voice::Voice;
use crate::elector::error::Error;
use crate::elector::instance::Elector;
use crate::elector::role::Role;
use crate::elector::term::{Body, TermEnd};
use crate::mutant::Mutant;
use crate::store::{LeaseStore, Member as Published, StoreError};
use leasehold_core::attempt;
use leasehold_core::campaign;
use leasehold_core::handoff::preparation;
use leasehold_core::holder;
use leasehold_core::leading::{self, Stop};
use leasehold_core::member::{Input, Member, Mutants, Output, Role as Part, Say, Settings};
use leasehold_core::term::{Broken, Done};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// How the loop ended without an error. (The library reads none of the values: only the
/// daemon's one-shot runs and `on_exit = "exit"` end with one.)
#[derive(Debug, Clone)]
#[cfg_attr(not(feature = "daemon"), allow(dead_code))]
pub(crate) enum Finish {
    /// Shutdown was asked for: the body is gone and the lease released.
    Shutdown,
    /// The body asked to end with this code (`on_exit = "exit"`); the lease is released.
    Exit(i32),
    /// One term only: the campaign gave up without winning. The last attempt's failure, or
    /// `None` when another instance held the lease.
    NotElected(Option<StoreError>),
    /// One term only: it ended before its body did (the lease lost or not renewed in time, the
    /// child unhealthy); the body was stopped and the lease given up as usual.
    CutShort(TermEnd),
}

impl<S: LeaseStore> Elector<S> {
    /// The member from its start to its end: it joins the line, campaigns, leads its terms
    /// with `body`, and leaves the line once the loop is over (at `shutdown`, or at the end
    /// the body or a one-term campaign calls for). Returns an error only for what cannot be
    /// retried: credentials refused before storage ever accepted them, or a body that could
    /// not be made to end before its lease expired.
    pub(crate) async fn lead<B: Body>(
        &mut self,
        body: &mut B,
        shutdown: &CancellationToken,
    ) -> Result<Finish, Error> {
        let core = Member::new(self.settings(), self.published(), self.next_id);
        let stepper = Stepper::new(
            core,
            self.new_lease_id(),
            self.create_if_missing,
            self.clock,
            self.random,
        );
        let shared = Arc::new(Shared::new(stepper));
        self.waker.attach(Some(shared.clone()));
        // The HTTP client wake-ups go out with is made now, not by the first handoff: making one
        // (its TLS settings) takes milliseconds that a handover would wait for.
        self.wake_sender.warm();
        let led = Driver::new(self, shared.clone(), body).run(shutdown).await;
        self.waker.attach(None);
        self.next_id = shared.next_id();
        self.authorized |= shared.authorized();
        led
    }

    /// What the member is given.
    fn settings(&self) -> Settings {
        let on = |mutant| self.mutant.on(mutant);
        Settings {
            timing: self.timing,
            slots: self.slots,
            me: self.identity.clone(),
            priority: self.election.priority,
            preempt_after: self.election.preempt_after,
            create_if_missing: self.create_if_missing,
            set: self.set,
            one_term: self.one_term.is_some(),
            authorized: self.authorized,
            mutants: Mutants {
                campaign: campaign::Mutants {
                    attempt: attempt::Mutants {
                        deadline_from_answer: on(Mutant::DeadlineFromAnswer),
                        start_before_epoch: on(Mutant::StartBeforeEpoch),
                        lead_on_the_reservation: on(Mutant::LeadOnTheReservation),
                    },
                    watcher_stays: on(Mutant::WatcherStays),
                    trust_the_notice: on(Mutant::TrustTheNotice),
                    quorum: leasehold_core::quorum::Mutants {
                        minority_leads: on(Mutant::MinorityLeads),
                        deadline_from_latest: on(Mutant::DeadlineFromLatest),
                        epoch_from_one: on(Mutant::EpochFromOne),
                        no_replica_lock_delay: on(Mutant::NoReplicaLockDelay),
                        count_unknown_outcome: on(Mutant::CountUnknownOutcome),
                    },
                },
                leading: leading::Mutants {
                    holder: holder::Mutants {
                        deadline_from_answer: on(Mutant::DeadlineFromAnswer),
                        minority_leads: on(Mutant::MinorityLeads),
                        deadline_from_latest: on(Mutant::DeadlineFromLatest),
                        count_unknown_outcome: on(Mutant::CountUnknownOutcome),
                    },
                    preparation: preparation::Mutants {
                        change_before_gone: on(Mutant::ChangeBeforeGone),
                    },
                    handoff: leasehold_core::handoff::Mutants {
                        hop_waits_out_refusal: on(Mutant::HopWaitsOutRefusal),
                    },
                },
                terms: Broken {
                    no_crash_backoff: on(Mutant::NoCrashBackoff),
                    release_the_stuck: on(Mutant::ReleaseTheStuck),
                },
                refill_late: on(Mutant::SlotRefillLate),
                create_unmarked: on(Mutant::CreateUnmarked),
                brand_new_slot_delayed: on(Mutant::BrandNewSlotDelayed),
            },
        }
    }

    /// What the member's record says first.
    fn published(&self) -> Published {
        let advertise = self.election.advertise.clone();
        Published {
            identity: self.identity.clone(),
            priority: self.election.priority,
            acquires_with: self.next_id,
            // Only a member that takes wake-ups needs one.
            wake_token: advertise.as_ref().map(|_| self.waker.token().clone()),
            advertise,
            standby_until: None,
            slots: self.slots,
            settled: None,
        }
    }
}

/// One member's driver.
struct Driver<'a, S: LeaseStore, B> {
    elector: &'a Elector<S>,
    shared: Arc<Shared>,
    calls: Calls<S>,
    body: Running<'a, B>,
    voice: Voice,
    /// Why the last round of the campaign failed (what a one-term campaign that gave up
    /// reports).
    last_failure: Option<StoreError>,
    /// Shutdown was told, a one-term campaign's stop was told.
    told: (bool, bool),
    /// How it ended.
    end: Option<Result<Finish, Error>>,
}

impl<'a, S: LeaseStore, B: Body> Driver<'a, S, B> {
    fn new(elector: &'a Elector<S>, shared: Arc<Shared>, body: &'a mut B) -> Self {
        let e = elector;
        Self {
            calls: Calls::new(
                e.store.clone(),
                e.replicas.clone(),
                e.clock,
                e.observer.clone(),
                e.wake_sender.clone(),
            ),
            shared,
            body: Running::new(body),
            voice: Voice {
                identity: e.identity.clone(),
                clock: e.clock,
                timing: e.timing,
                slots: e.slots,
                replicas: e.set.len(),
                body: B::BODY,
                body_ended: B::ENDED,
                epoch: 0,
            },
            elector,
            last_failure: None,
            told: (false, false),
            end: None,
        }
    }

    /// Starts the member and drives it to its end.
    async fn run(mut self, shutdown: &CancellationToken) -> Result<Finish, Error> {
        self.shared.step(Input::Start);
        let give_up = self.elector.one_term.clone();
        loop {
            while let Some(job) = self.shared.next_job() {
                self.carry_out(job);
            }
            if let Some(end) = self.end.take() {
                return end;
            }
            if let Some(input) = self.wait(shutdown, give_up.as_ref()).await {
                self.shared.step(input);
            }
        }
    }

    /// Waits for what ends the member's wait: a return (first), jobs a wake-up queued, the
    /// body's end, shutdown, a one-term campaign's stop, the member's timer. `None`: nothing
    /// to tell the member (a call that follows another, jobs a wake-up queued).
    async fn wait(
        &mut self,
        shutdown: &CancellationToken,
        give_up: Option<&CancellationToken>,
    ) -> Option<In> {
        let until = self.shared.awaits().waiting.until;
        let clock = self.elector.clock;
        let timer = async {
            match until {
                Some(at) => clock.sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let given_up = async {
            match give_up {
                Some(token) => token.cancelled().await,
                None => std::future::pending().await,
            }
        };
        let (shutdown_told, give_up_told) = self.told;
        tokio::select! {
            biased;
            landed = self.calls.next() => self.calls.landed(landed, &self.shared).map(Input::Answer),
            () = self.shared.queued() => None,
            gone = self.body.gone() => Some(match gone {
                Gone::Ended(end) => Input::BodyGone(end),
                Gone::AtLast => Input::StuckGone,
            }),
            () = shutdown.cancelled(), if !shutdown_told => {
                self.told.0 = true;
                Some(Input::Shutdown)
            }
            () = given_up, if !give_up_told => {
                self.told.1 = true;
                Some(Input::GiveUp)
            }
            () = timer => Some(Input::Timer),
        }
    }

    /// Carries out one job of the member.
    fn carry_out(&mut self, job: Job) {
        match job {
            Job::Send { tag, sending } => self.calls.send(tag, *sending),
            Job::StartBody(term) => {
                let e = self.elector;
                e.observer
                    .acquired(term.epoch, term.slot, term.acquired_at, term.deadline);
                self.body.start(term, &e.identity);
            }
            Job::Show(view) => self.elector.observer.line(&view),
            Job::Out(output) => self.output(*output),
        }
    }

    /// Carries out one output of the member.
    fn output(&mut self, output: Out) {
        let e = self.elector;
        match output {
            Output::Forget(tag) => self.calls.forget(tag),
            Output::Tenure(tenure) => {
                if let leasehold_core::Tenure::Held(deadline) = tenure {
                    e.observer.renewed(deadline);
                }
                self.body.tenure(tenure);
            }
            Output::StopBody(stop) => self.stop_body(stop),
            Output::SteppedDown { .. } => e.observer.stepping_down(),
            Output::Role(part) => self.role(part),
            Output::AskBody => {
                let may = self.body.may_campaign();
                self.shared.step(Input::MayCampaign(may));
            }
            Output::Say(say) => self.say(say),
            Output::Note(note) => {
                if let leasehold_core::member::Note::Mismatch(recorded) = note {
                    e.observer.slot_mismatch(recorded);
                }
                self.voice.note(note);
            }
            Output::Rounded(failure) => self.last_failure = failure,
            // Back in the election after a rest: campaigning again.
            Output::Rested => e.observer.following(),
            Output::End(end) => self.end(end),
            // Taken in the step that made them.
            Output::Send(_) | Output::StartBody(_) | Output::ShowLine | Output::Woken(_) => {}
        }
    }

    /// The body is told to stop; for a preemption, the log and the observer say why.
    fn stop_body(&mut self, stop: Stop) {
        if let Stop::Preempted(p) = &stop {
            let epoch = self.voice.epoch;
            let body = self.voice.body;
            tracing::info!(epoch, "{p}; stopping {body} to hand the lease over");
            self.elector.observer.preempted();
        }
        self.body.stop();
    }

    /// The part it plays now, for [`Elector::watch`](crate::Elector::watch).
    fn role(&self, part: Part) {
        let role = match part {
            Part::Leader { epoch, slot } => Role::Leader { epoch, slot },
            Part::Follower => Role::Follower,
        };
        self.elector.role.send_replace(role);
    }

    /// A log line, and what the observer hears of it.
    fn say(&mut self, say: Say<tokio::time::Instant, crate::store::Shell, StoreError>) {
        let observer = &self.elector.observer;
        match say {
            Say::Leading(say) => {
                if let Some(gave) = self.voice.leading(*say) {
                    observer.handed_over(gave);
                }
            }
            Say::TermEnded(ended) => {
                self.voice.ended(&ended);
                observer.term_ended();
                if ended.outlived {
                    self.outlived();
                }
            }
            Say::Resting { why, until } => {
                self.voice.say(Say::Resting { why, until });
                observer.cooling_down(self.elector.clock.timer_instant(until));
            }
            say => self.voice.say(say),
        }
    }

    /// The body outlived its kill and its lease: the loop gives up, or with
    /// [`Body::WAITS_PAST_ITS_LEASE`] goes on without the lease, the body keeping it out of
    /// the election until it is gone.
    fn outlived(&mut self) {
        let epoch = self.voice.epoch;
        if !B::WAITS_PAST_ITS_LEASE {
            self.end = Some(Err(Error::TaskDidNotStop { epoch }));
            return;
        }
        if self.body.is_stuck() {
            tracing::error!(
                epoch,
                "{} is still there after its lease expired; not campaigning until it is gone",
                B::BODY
            );
        }
    }

    /// The member is over so.
    fn end(&mut self, end: Result<Done, StoreError>) {
        let finish = match end {
            Ok(Done::Shutdown) => Ok(Finish::Shutdown),
            Ok(Done::Exit(code)) => Ok(Finish::Exit(code)),
            Ok(Done::CutShort(end)) => Ok(Finish::CutShort(end)),
            Ok(Done::NotElected) => {
                // Only a one-term campaign ends without a shutdown: it gave up.
                let identity = self.elector.identity.as_str();
                tracing::info!(identity, "gave up campaigning: not elected");
                Ok(Finish::NotElected(self.last_failure.take()))
            }
            Err(e) => Err(Error::Denied(e)),
        };
        if self.end.is_none() {
            self.end = Some(finish);
        }
    }
}
