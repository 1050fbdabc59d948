//! The one loop of leadership, which both `leasehold run` and [`Elector::run_while_leader`]
//! drive ([`Elector::lead`]): campaign -> keep -> run the term's body -> the body is gone ->
//! stop renewing -> end of term (a voluntary end hands the lease to the successor, else it is
//! released) -> the pause its end calls for -> campaign again, until shutdown.
//!
//! Every ordering invariant of the safety model is kept here, once: the lease is never given up
//! while the body may run (rule 7); a new term's body starts only after the old one is gone, and
//! only under a held lease with time left before its stop deadline; a stop never cuts an acquire
//! in flight (the campaign's own rule).

use super::error::Error;
use super::handoff::{self, Surrender};
use super::instance::Elector;
use super::members::Membership;
use super::preempt;
use super::role::Role;
use super::term::{Body, Tenure, Term, TermEnd, term_span};
use crate::clock::Clock;
use crate::fmt::human;
use crate::mutant::Mutant;
use crate::store::{LeaseStore, StoreError};
use leasehold_core::term::{Broken, Done, GiveUp, Rest, Stage, Terms};
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

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
    /// The loop ([`Elector::lead_terms`]) as a member: this instance joins the line first and
    /// leaves it (deleting its record) once the loop is over, whatever ended it.
    pub(crate) async fn lead<B: Body>(
        &mut self,
        body: &mut B,
        shutdown: &CancellationToken,
    ) -> Result<Finish, Error> {
        self.membership = Some(Membership::start(
            self.store.with_own_connections(),
            self.observer.clone(),
            self.timing,
            self.clock,
            &self.identity,
            &self.election,
            self.next_id,
            self.new_lease_id(),
            self.waker.token(),
            self.slots,
        ));
        // The HTTP client wake-ups go out with is made now, not by the first handoff: making one
        // (its TLS settings) takes milliseconds that a handover would wait for.
        self.wake_sender.warm();
        let led = self.lead_terms(body, shutdown).await;
        if let Some(m) = self.membership.take() {
            m.leave().await;
        }
        led
    }

    /// The loop: campaign, keep, run `body`, end the term, pause, again, until `shutdown` (or
    /// until the body asks to end). Returns an error only for what cannot be retried:
    /// credentials refused before storage ever accepted them, or a body that could not be made
    /// to end before its lease expired.
    async fn lead_terms<B: Body>(
        &mut self,
        body: &mut B,
        shutdown: &CancellationToken,
    ) -> Result<Finish, Error> {
        self.shutdown = Some(shutdown.clone());
        let broken = Broken {
            no_crash_backoff: self.mutant.on(Mutant::NoCrashBackoff),
            release_the_stuck: self.mutant.on(Mutant::ReleaseTheStuck),
        };
        let mut terms = Terms::new(self.timing, self.one_term.is_some(), broken);
        loop {
            let stop = self.one_term.clone().unwrap_or_else(|| shutdown.clone());
            let won = self.campaign(&stop, &mut || body.may_campaign()).await?;
            match won {
                Some(term) => self.lead_term(body, &term, shutdown, &mut terms).await?,
                None => {
                    terms.not_won(shutdown.is_cancelled());
                    if shutdown.is_cancelled() {
                        tracing::info!(identity = self.identity.as_str(), "stopped as a follower");
                    }
                }
            }
            match terms.step(shutdown.is_cancelled()) {
                Stage::Rest(rest) => {
                    let done = self.rest(rest, shutdown).await;
                    terms.rested(done);
                    if let Some(done) = done {
                        return Ok(self.finish(done));
                    }
                }
                Stage::Done(done) => return Ok(self.finish(done)),
                stage => unreachable!("a term ended at {stage:?}"),
            }
        }
    }

    /// How the loop ends, as [`Finish`] tells it, with its log line.
    fn finish(&mut self, done: Done) -> Finish {
        let identity = self.identity.as_str();
        match done {
            Done::Shutdown => Finish::Shutdown,
            Done::Exit(code) => Finish::Exit(code),
            Done::CutShort(end) => Finish::CutShort(end),
            Done::NotElected => {
                // Only a one-term campaign ends without a shutdown: it gave up.
                tracing::info!(identity, "gave up campaigning: not elected");
                Finish::NotElected(self.last_failure.take())
            }
        }
    }

    /// One term, from the won lease to its end, in the order `terms` keeps (rule 7): keep the
    /// lease, run `body`, and once the body is gone stop renewing, then hand the lease on or
    /// release it.
    async fn lead_term<B: Body>(
        &mut self,
        body: &mut B,
        term: &Term,
        shutdown: &CancellationToken,
        terms: &mut Terms<Instant>,
    ) -> Result<(), Error> {
        let epoch = term.epoch;
        self.begin_term(term);
        let renewing = self.keep(term);
        let tenure = *renewing.tenure().borrow();
        terms.won(self.clock.now(), &tenure, shutdown.is_cancelled());
        let mut preempted = None;
        // From a stop request on, the handoff's listing and notice go on while the body
        // stops.
        let prepared = handoff::prepare(self, term, renewing.tenure(), shutdown);
        let end = match terms.step(shutdown.is_cancelled()) {
            Stage::Lead {
                unstarted: Some(end),
            } => end,
            _ => {
                self.role.send_replace(Role::Leader {
                    epoch,
                    slot: term.slot,
                });
                self.run_body(body, term, renewing.tenure(), shutdown, &mut preempted)
                    .instrument(term_span(&self.identity, epoch))
                    .await
            }
        };
        // The body is gone (or could not be made to go): only now may the lease go (rule 7).
        self.role.send_replace(Role::Follower);
        self.observer.stepping_down();
        // A standby is counted from here, as the record's `standby_until`, which the
        // handoff writes first: counted after the handoff's confirmation instead, this
        // member sat out up to a confirm window after its record said it was back, and a
        // leader that handed it the lease then passed it over.
        let end = terms.body_gone(end, self.clock.now());
        // A wake-up that came while leading is stale; one that comes from here on is not:
        // the member this one hands the lease to may hand it back before the handover is
        // confirmed (rule (g) of docs/safety.md), and the pause after the term ends at it.
        self.waker.forget();
        let last = renewing.stop().await;
        terms.renewing_stopped(last);
        let mut outlived = false;
        if terms.step(shutdown.is_cancelled()) == Stage::Outlast {
            let gone = self.outlast(body, &last, epoch).await?;
            outlived = !gone;
            terms.outlasted(gone);
        }
        let surrender = match terms.step(shutdown.is_cancelled()) {
            Stage::GiveUp(give) => {
                self.end_term(term, end, give, preempted.as_ref(), prepared)
                    .await
            }
            // The lease has expired on the server with the body still there: nothing to hand
            // on or release.
            _ => Surrender::Lost,
        };
        terms.given_up();
        if let Some(m) = &self.membership {
            m.leading(None);
            m.holding(None);
            self.observer.line(&m.view());
        }
        self.observer.term_ended();
        say_ended::<B>(&self.identity, epoch, end, outlived, &surrender);
        Ok(())
    }

    /// A term was won: the log, the line and the observer say so.
    fn begin_term(&self, term: &Term) {
        let (identity, epoch) = (self.identity.as_str(), term.epoch);
        if self.slots > 1 {
            tracing::info!(identity, epoch, slot = term.slot, "acquired leadership");
        } else if term.reserved {
            tracing::info!(
                identity,
                epoch,
                "acquired leadership, on the epoch its handoff reserved"
            );
        } else {
            tracing::info!(identity, epoch, "acquired leadership");
        }
        if let Some(m) = &self.membership {
            m.leading(Some((epoch, term.acquired_at, term.lease)));
            m.holding(Some(term.slot));
            self.observer.line(&m.view());
        }
        self.observer
            .acquired(epoch, term.slot, term.acquired_at, term.deadline);
    }

    /// The pause before campaigning again, as the end of the term calls for
    /// (`leasehold_core::term::rest`). `Some` when the loop is over instead.
    async fn rest(&mut self, rest: Rest<Instant>, shutdown: &CancellationToken) -> Option<Done> {
        let (rejoin, wakeable) = match rest {
            Rest::Done(None) => return Some(Done::Shutdown),
            Rest::Done(Some(code)) => return Some(Done::Exit(code)),
            Rest::Now => return None,
            Rest::Yield(pause) => {
                let waker = self.waker.clone();
                tokio::select! {
                    biased;
                    () = shutdown.cancelled() => return Some(Done::Shutdown),
                    () = waker.woken() => return None,
                    () = sleep(pause) => return None,
                }
            }
            Rest::Until {
                until,
                wakeable,
                why,
            } => {
                say_resting(self.clock, self.identity.as_str(), why, until);
                (until, wakeable)
            }
        };
        self.observer.cooling_down(self.clock.timer_instant(rejoin));
        let waker = self.waker.clone();
        tokio::select! {
            biased;
            () = shutdown.cancelled() => return Some(Done::Shutdown),
            () = waker.woken(), if wakeable => {}
            () = self.clock.sleep_until(rejoin) => {}
        }
        if let Some(m) = &self.membership {
            m.back_in_line();
        }
        self.observer.following();
        None
    }

    /// Runs the body of `term` until it is gone. Meanwhile, as leader, watches the line for a
    /// member of higher priority (docs/preferred.md, `preempt`); when one is due, logs why, tells
    /// the body to stop (as at shutdown: through a token of this term only) and, once it is gone,
    /// says [`TermEnd::Preempted`] (unless the body ended otherwise meanwhile, or shutdown came).
    async fn run_body<B: Body>(
        &self,
        body: &mut B,
        term: &Term,
        tenure: tokio::sync::watch::Receiver<Tenure>,
        shutdown: &CancellationToken,
        preempted: &mut Option<preempt::Preemption>,
    ) -> TermEnd {
        let stop = shutdown.child_token();
        let run = body.run(term, tenure, &stop);
        tokio::pin!(run);
        let Some(m) = &self.membership else {
            return run.await;
        };
        let watch = preempt::watch(
            &*self.store,
            &*self.observer,
            m,
            &self.timing,
            self.election.preempt_after,
            self.election.priority,
            preempt::Listing::for_slot(term.slot),
            &self.wake_sender,
        );
        let end = tokio::select! {
            biased;
            end = &mut run => {
                m.with(|l| l.preempting = None);
                return end;
            }
            p = watch => {
                tracing::info!(epoch = term.epoch, "{p}; stopping {} to hand the lease over", B::BODY);
                self.observer.preempted();
                *preempted = Some(p);
                stop.cancel();
                run.await
            }
        };
        m.with(|l| l.preempting = None);
        match end {
            TermEnd::Shutdown if !shutdown.is_cancelled() => TermEnd::Preempted,
            end => end,
        }
    }

    /// End of term: the body is gone and the lease is no longer renewed. Gives the lease up as
    /// `give` says (`leasehold_core::term::give_up`): a voluntary end (the body ended by itself,
    /// shutdown, a health step-down) hands it to the successor ([`Elector::hand_over`]); an
    /// involuntary one (no renew in time, a body that overran its kill) releases it; a lost
    /// lease is left alone.
    async fn end_term(
        &mut self,
        term: &Term,
        end: TermEnd,
        give: GiveUp<Instant>,
        preempted: Option<&preempt::Preemption>,
        prepared: Option<handoff::Preparing>,
    ) -> Surrender {
        match give {
            GiveUp::Nothing => Surrender::Lost,
            GiveUp::HandOver(ending, deadline) => {
                let to = preempted.map(|p| p.to.as_str());
                self.hand_over(term, end, ending, &deadline, to, prepared)
                    .await
            }
            GiveUp::Release => Surrender::Released(self.release_on(term.slot, term.lease).await),
        }
    }

    /// A body that outlived its kill: it is not renewed for any more (it may run on, unbounded),
    /// nor released while it may run. If it ends before the lease it was last renewed under has
    /// surely expired, the term ends as usual (true); if not, another instance may lead beside
    /// it, and the loop gives up, or with [`Body::WAITS_PAST_ITS_LEASE`] goes on without the
    /// lease (false).
    async fn outlast<B: Body>(
        &self,
        body: &mut B,
        last: &Tenure,
        epoch: u64,
    ) -> Result<bool, Error> {
        let expiry = last.deadline().expiry(&self.timing);
        let kill_at = last.deadline().kill_at;
        tracing::error!(
            epoch,
            "{} did not end when killed; no longer renewing its lease, which expires in {} at \
             the latest",
            B::BODY,
            human(expiry.saturating_duration_since(self.clock.now()))
        );
        tokio::select! {
            biased;
            () = body.gone() => {
                tracing::warn!(
                    epoch,
                    "{} ended {} after its kill deadline",
                    B::BODY,
                    human(self.clock.now().saturating_duration_since(kill_at))
                );
                Ok(true)
            }
            () = self.clock.sleep_until(expiry) => past_its_lease::<B>(epoch),
        }
    }
}

/// A body still there when the lease it was last renewed under has surely expired: another
/// instance may lead beside it. The loop gives up, or with [`Body::WAITS_PAST_ITS_LEASE`] goes
/// on without the lease (false).
fn past_its_lease<B: Body>(epoch: u64) -> Result<bool, Error> {
    if !B::WAITS_PAST_ITS_LEASE {
        return Err(Error::TaskDidNotStop { epoch });
    }
    tracing::error!(
        epoch,
        "{} is still there after its lease expired; not campaigning until it is gone",
        B::BODY
    );
    Ok(false)
}

/// The log line of a term's end: how it ended (`outlived`: its body outlived its kill and its
/// lease), and what became of the lease.
fn say_ended<B: Body>(
    identity: &str,
    epoch: u64,
    end: TermEnd,
    outlived: bool,
    surrender: &Surrender,
) {
    let gave = match surrender {
        Surrender::HandedTo(next) => format!("handed the lease to {next}"),
        Surrender::Released(true) => "released the lease".to_owned(),
        Surrender::Released(false) => {
            "the lease was not released; it expires on its own".to_owned()
        }
        Surrender::Lost => "the lease was no longer ours".to_owned(),
    };
    let (ended, body) = (B::ENDED, B::BODY);
    let line = match end {
        TermEnd::Exit(code) => {
            return tracing::info!(
                identity,
                epoch,
                code,
                "released leadership: {ended}; {gave}; exiting with its code"
            );
        }
        TermEnd::Overran if outlived => {
            return tracing::warn!(
                identity,
                epoch,
                "lost leadership: {body} outlived its kill and its lease; {gave}"
            );
        }
        TermEnd::Released => format!("released leadership: {ended}; {gave}"),
        TermEnd::Lost => "lost leadership: the lease is no longer ours".to_owned(),
        TermEnd::Expired => {
            format!("lost leadership: no renew succeeded before the stop deadline; {gave}")
        }
        TermEnd::Shutdown => format!("released leadership: shutting down; {gave}"),
        TermEnd::Unhealthy { .. } => format!("stepped down: child unhealthy; {gave}"),
        TermEnd::CrashLoop { .. } => format!("stepped down: child crash-looping; {gave}"),
        TermEnd::Preempted => format!("stepped down for a preferred leader; {gave}"),
        TermEnd::Overran => {
            format!("released leadership: {ended} after its kill deadline; {gave}")
        }
    };
    tracing::info!(identity, epoch, "{line}");
}

/// The log line of a pause after a term that ended for `end`, until `rejoin`.
fn say_resting(clock: Clock, identity: &str, end: TermEnd, rejoin: Instant) {
    match end {
        TermEnd::Unhealthy { cooldown } => {
            tracing::info!(
                identity,
                "staying out of the election for {}",
                human(cooldown)
            )
        }
        TermEnd::CrashLoop { backoff } => tracing::info!(
            identity,
            "staying out of the election for {} (crash-loop backoff)",
            human(backoff)
        ),
        _ => tracing::info!(
            identity,
            "staying out of the election until the lease this instance last renewed has surely expired, for {}",
            human(rejoin.saturating_duration_since(clock.now()))
        ),
    }
}
