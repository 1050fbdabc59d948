//! The candidate's shell: does what the core's state machine
//! ([`leasehold_core::candidate`]) says, one action at a time, and reports what came of it with
//! what it sees then. The I/O is here (the rounds' requests, the timers, the wake-ups, the
//! record keeper's listings); the decisions are not.

use super::watch::Watches;
use crate::clock::Clock;
use crate::elector::error::Error;
use crate::elector::instance::Elector;
use crate::elector::members::{Place, Standing};
use crate::elector::term::Term;
use crate::elector::wake::Waker;
use crate::fmt::human;
use crate::mutant::Mutant;
use crate::store::{Failure, LeaseStore, StoreError};
use crate::timing::POLL_JITTER;
use leasehold_core::candidate::{Candidate, End, Outcome, Rest, Round};
use std::pin::Pin;
use std::time::Duration;
use tokio::sync::futures::OwnedNotified;
use tokio::time::Instant;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

type Action = leasehold_core::candidate::Action<Instant, StoreError>;
type Event = leasehold_core::candidate::Event<StoreError>;
type Note = leasehold_core::candidate::Note<Instant, StoreError>;
type Seen = leasehold_core::candidate::Seen<Instant>;

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
        let mut campaign = Candidate::new(self.timing, self.slots);
        let mut watch = Watches::default();
        let waker = self.waker.clone();
        // What a listing of the record keeper that places this instance next in line wakes,
        // from [`Action::Listen`] to the pause it may cut short.
        let mut placed: Option<Pin<Box<OwnedNotified>>> = None;
        let mut won = None;
        let mut event = Event::Start;
        loop {
            let seen = self.seen();
            let mut next = None;
            for action in campaign.step(event, &seen, &mut fastrand::f64) {
                next = Some(match action {
                    Action::Say(note) => {
                        self.say(note);
                        continue;
                    }
                    Action::Missing => {
                        self.vanished.missing(0, &self.timing);
                        continue;
                    }
                    Action::End(End::Won) => return Ok(won),
                    Action::End(End::Stopped) => return Ok(None),
                    Action::End(End::Denied(e)) => return Err(Error::Denied(e)),
                    Action::SitOut => {
                        let late = self.late.take().expect("a late acquire to sit out");
                        Event::SatOut(late.sit_out(self.clock, &self.timing, stop).await)
                    }
                    Action::Recreate => {
                        self.create_vanished(0).await;
                        Event::Recreated
                    }
                    Action::Look => {
                        self.look_at_vanished().await;
                        Event::Looked
                    }
                    Action::AskBody => Event::MayLead(may_lead()),
                    Action::CheckCount => Event::Counted(self.check_count().await),
                    Action::Round(round) => {
                        let outcome = self.round(round, &mut watch, &waker, &mut won).await;
                        self.last_failure = outcome.as_ref().err().cloned();
                        Event::Round(outcome)
                    }
                    Action::Listen => {
                        let m = self.membership.as_ref().expect("a member listens");
                        let mut notified = Box::pin(m.placed_to_poll());
                        notified.as_mut().enable();
                        placed = Some(notified);
                        Event::Listening
                    }
                    Action::Rest(how) => rest(self.clock, how, stop).await,
                    Action::Follow { pause, listening } => {
                        let listened = placed.take().filter(|_| listening);
                        follow(pause, listened, stop, &waker).await
                    }
                });
            }
            event = next.expect("every step ends with an action to wait for");
        }
    }

    /// What the campaign sees now: reads of shared state without side effects.
    fn seen(&self) -> Seen {
        let (member, in_line) = match &self.membership {
            Some(m) => (
                true,
                m.with(|l| {
                    l.succession.standing == Standing::Joined && l.succession.listed.is_some()
                }),
            ),
            None => (false, false),
        };
        Seen {
            late: self.late.is_some(),
            lock_delay: self.vanished.until(0),
            mismatched: self.mismatched(),
            authorized: self.authorized,
            member,
            in_line,
            place: self.place(),
            leader_unknown: self.leader_unknown(),
        }
    }

    /// One round; a won term goes to `won`.
    async fn round(
        &mut self,
        round: Round,
        watch: &mut Watches,
        waker: &crate::elector::wake::Waker,
        won: &mut Option<Term>,
    ) -> Result<Outcome, StoreError> {
        let acquired = match round {
            Round::Acquire => self.try_acquire().await,
            Round::Handed => {
                let reserved = waker.take_reserved();
                if self.mutant.on(Mutant::TrustTheNotice) {
                    self.trust_the_notice().await
                } else {
                    self.try_acquire_handed(reserved).await
                }
            }
            Round::Slots => self.poll_slots().await,
            // (The place it names is the one the campaign sees next.)
            Round::WatchSlots => {
                return self
                    .watch_slots(&mut watch.slots)
                    .await
                    .map(|_| Outcome::Look);
            }
            Round::Watch => return self.watch_blob(watch).await,
        }?;
        *won = acquired;
        Ok(match won {
            Some(_) => Outcome::Won,
            None => Outcome::Held,
        })
    }

    /// Logs what a transition calls for: a failure at WARN (storage refusing the credentials
    /// at ERROR), with its error; the rest at INFO (watching, which is the usual state of most
    /// members, at DEBUG).
    fn say(&self, note: Note) {
        let text = match note {
            Note::CountUnread(e) => {
                return say_failed(&e, "cannot read the group's blob; retrying");
            }
            Note::NoAnswer(e) => {
                let expires = self
                    .timing
                    .duration
                    .saturating_sub(self.timing.request_timeout());
                let text = format!(
                    "no answer to the acquire in time; not sending it again (it may have taken the lease on the server): waiting for its answer, or at most until that lease would have expired, in {}",
                    human(expires)
                );
                return say_failed(&e, &text);
            }
            Note::Retrying(e, pause) => {
                let what = match e.failure() {
                    Failure::Denied => "storage refused the credentials",
                    _ => "cannot acquire the lease",
                };
                return say_failed(&e, &format!("{what}; retrying in {}", human(pause)));
            }
            // (The period's range, not a draw: a log line must not take a random number, or a
            // simulated history would depend on the log level.)
            Note::Place(Place::Watch) => {
                let period = self.timing.acquire_interval * leasehold_core::pace::WATCH_PERIODS;
                let longest = human(period.mul_f64(1.0 + POLL_JITTER));
                let period = human(period);
                return tracing::debug!(
                    "not next in line: watching the lease blob every {period} to {longest}"
                );
            }
            Note::LockDelay(until) => format!(
                "waiting out the lock-delay of the deleted lease blob, {}",
                human(until.saturating_duration_since(self.clock.now()))
            ),
            Note::Place(Place::Poll) => {
                "next in line: polling the lease every acquire_interval".to_owned()
            }
            Note::Following => "another instance holds the lease; following".to_owned(),
        };
        tracing::info!(identity = %self.identity, "{text}");
    }

    /// Whether this instance is a member that has not yet read who leads.
    fn leader_unknown(&self) -> bool {
        self.membership
            .as_ref()
            .is_some_and(|m| m.with(|l| l.succession.leader.is_none()))
    }

    /// Where this instance stands now: the successor (or an instance without a line) polls,
    /// the others watch.
    pub(super) fn place(&self) -> Place {
        match &self.membership {
            Some(m) => m.with(|l| l.place()),
            None => Place::Poll,
        }
    }
}

/// The log line of a failure: at ERROR when storage refused the credentials, else at WARN.
fn say_failed(e: &StoreError, text: &str) {
    match e.failure() {
        Failure::Denied => tracing::error!(error = %e, "{text}"),
        _ => tracing::warn!(error = %e, "{text}"),
    }
}

/// A pause that only `stop` cuts short ([`Action::Rest`]).
async fn rest(clock: Clock, how: Rest<Instant>, stop: &CancellationToken) -> Event {
    let rest = async {
        match how {
            Rest::For(pause) => sleep(pause).await,
            Rest::LeaseClock(pause) => clock.sleep_until(clock.now() + pause).await,
            Rest::UntilAtMost(at, most) => clock.sleep_until(at.min(clock.now() + most)).await,
        }
    };
    tokio::select! {
        biased;
        () = stop.cancelled() => Event::Stopped,
        () = rest => Event::Rested,
    }
}

/// The pause between rounds ([`Action::Follow`]): it ends when it runs out, at `stop`, at a
/// wake-up, or at a listing that places this instance next in line (`listened`, when it
/// listens).
async fn follow(
    pause: Duration,
    listened: Option<Pin<Box<OwnedNotified>>>,
    stop: &CancellationToken,
    waker: &Waker,
) -> Event {
    let placed = async {
        match listened {
            Some(notified) => notified.await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        biased;
        () = stop.cancelled() => Event::Stopped,
        () = sleep(pause) => Event::Rested,
        () = placed => {
            tracing::debug!("next in line now: polling");
            Event::Placed
        }
        () = waker.woken() => {
            tracing::debug!("woken up: trying the acquire now");
            Event::Woken
        }
    }
}
