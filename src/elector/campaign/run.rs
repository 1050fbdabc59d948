//! The campaign's loop: rounds until a term is won (or `stop`), the pauses between them.

use super::slots::MISMATCH_RECHECK;
use super::watch::Watch;
use crate::clock;
use crate::elector::error::Error;
use crate::elector::instance::Elector;
use crate::elector::members::{self, Place};
use crate::elector::pace;
use crate::elector::term::Term;
use crate::mutant::Mutant;
use crate::store::{Failure, LeaseStore};
use crate::timing::POLL_JITTER;
use std::time::Duration;
use tokio::time::sleep;
use tokio_util::sync::CancellationToken;

/// What one round of a campaign came to.
pub(super) enum Round {
    Won(Term),
    /// Someone else holds the lease: poll again.
    Held,
    /// Acquire now (the lease is free, or was handed to us).
    Acquire,
    /// Look again after this long.
    Wait(Duration),
}

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
        let mut backoff = pace::error_backoff(&self.timing);
        let mut following = false;
        let mut watch = Watch::default();
        // The first attempt is an acquire, whatever this instance's place: a free lease is
        // taken at once.
        let mut acquire_now = true;
        // A member refused by the lease's holder, who does not know who that is, reads the
        // lease blob at once: until it knows the leader it cannot tell whether it is the
        // successor (who polls), and a joiner that is next in line would otherwise wait a
        // whole poll and a read before it starts polling.
        let mut read_now = false;
        // A wake-up: the next acquire most likely finds the lease handed to us.
        let mut woken = false;
        // The place last computed, for the line an operator (or a test) sees when this member
        // becomes next in line.
        let mut last_place = None;
        let waker = self.waker.clone();
        // With slots, the group's count is checked before the first acquire (slot i > 0 could
        // be won before slot 0 said what the group counts).
        let mut count_checked = self.slots == 1 && !self.mismatched();
        loop {
            if let Some(late) = self.late.take() {
                let Some(pause) = late.sit_out(&self.timing, stop).await else {
                    return Ok(None);
                };
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return Ok(None),
                    () = clock::sleep_until(clock::now() + pause) => {}
                }
            }
            // A blob found deleted is not acquired before its lock-delay is over (design
            // section 16; `vanish`). With slots, a round skips the slots under one.
            if self.slots == 1
                && let Some(until) = self.vanished.until(0)
            {
                self.create_vanished(0).await;
                tracing::info!(
                    "waiting out the lock-delay of the deleted lease blob, {}",
                    crate::human(until.saturating_duration_since(clock::now()))
                );
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return Ok(None),
                    () = clock::sleep_until(until) => {}
                }
                acquire_now = true;
            }
            // Winning spends an epoch; a term whose body could not start would spend it for
            // nothing (the body says why, once).
            if !may_lead() {
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return Ok(None),
                    () = sleep(pace::poll_interval(&self.timing)) => continue,
                }
            }
            if !count_checked || self.mismatched() {
                match self.check_count().await {
                    Ok(false) => count_checked = true,
                    // The group's blob is gone: it records no count (design section 16: it is
                    // created again under a lock-delay, by this campaign's rounds).
                    Err(e) if e.failure() == Failure::Missing => {
                        self.vanished.missing(0, &self.timing);
                        count_checked = true;
                    }
                    Ok(true) => {
                        tokio::select! {
                            biased;
                            () = stop.cancelled() => return Ok(None),
                            () = sleep(MISMATCH_RECHECK) => continue,
                        }
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot read the group's blob; retrying");
                        tokio::select! {
                            biased;
                            () = stop.cancelled() => return Ok(None),
                            () = sleep(backoff.next().unwrap_or(self.timing.acquire_interval)) => continue,
                        }
                    }
                }
            }
            let place = match (acquire_now, read_now) {
                (true, _) => Place::Poll,
                (false, true) if self.membership.is_some() => Place::Watch,
                _ => self.place(),
            };
            acquire_now = false;
            let won = |won: Option<Term>| match won {
                Some(term) => Round::Won(term),
                None => Round::Held,
            };
            let in_line = self.membership.as_ref().is_some_and(|m| {
                m.with(|l| l.standing == members::Standing::Joined && l.listed.is_some())
            });
            if in_line {
                let computed = self.place();
                if last_place != Some(computed) {
                    match computed {
                        Place::Poll => {
                            tracing::info!("next in line: polling the lease every acquire_interval")
                        }
                        // (The period's range, not a draw: a log line must not take a random
                        // number, or a simulated history would depend on the log level.)
                        Place::Watch => tracing::debug!(
                            "not next in line: watching the lease blob every {} to {}",
                            crate::human(self.timing.acquire_interval * pace::WATCH_PERIODS),
                            crate::human(
                                (self.timing.acquire_interval * pace::WATCH_PERIODS)
                                    .mul_f64(1.0 + POLL_JITTER)
                            )
                        ),
                    }
                    last_place = Some(computed);
                }
            }
            let round = match place {
                Place::Poll if self.slots > 1 => self.poll_slots().await.map(won),
                Place::Poll if std::mem::take(&mut woken) => {
                    let reserved = waker.take_reserved();
                    if crate::mutant::on(Mutant::TrustTheNotice) {
                        self.trust_the_notice().await.map(won)
                    } else {
                        self.try_acquire_handed(reserved).await.map(won)
                    }
                }
                Place::Poll => self.try_acquire().await.map(won),
                Place::Watch if self.slots > 1 => {
                    self.watch_slots(&mut watch.slots)
                        .await
                        .map(|place| match place {
                            Place::Poll => Round::Wait(pace::poll_interval(&self.timing)),
                            Place::Watch => Round::Wait(pace::watch_interval(&self.timing)),
                        })
                }
                Place::Watch => self.watch(&mut watch).await,
            };
            self.last_failure = round.as_ref().err().cloned();
            // With slots the pollers come from the listing (who holds which slot), not from
            // knowing one leader: no extra read.
            read_now = self.slots == 1 && matches!(round, Ok(Round::Held)) && self.leader_unknown();
            let pause = match round {
                Ok(Round::Won(term)) => return Ok(Some(term)),
                Ok(Round::Acquire) => {
                    acquire_now = true;
                    continue;
                }
                Ok(Round::Held | Round::Wait(_)) if !following => {
                    tracing::info!(identity = %self.identity, "another instance holds the lease; following");
                    following = true;
                    backoff = pace::error_backoff(&self.timing);
                    match round {
                        Ok(Round::Wait(d)) => d,
                        _ => pace::poll_interval(&self.timing),
                    }
                }
                Ok(Round::Held) => {
                    backoff = pace::error_backoff(&self.timing);
                    pace::poll_interval(&self.timing)
                }
                Ok(Round::Wait(d)) => {
                    backoff = pace::error_backoff(&self.timing);
                    d
                }
                Err(e) if self.late.is_some() => {
                    tracing::warn!(
                        error = %e,
                        "no answer to the acquire in time; not sending it again (it may have taken the lease on the server): waiting for its answer, or at most until that lease would have expired, in {}",
                        crate::human(self.timing.duration.saturating_sub(self.timing.request_timeout()))
                    );
                    continue;
                }
                Err(e) => {
                    let pause = backoff.next().unwrap_or(self.timing.acquire_interval);
                    match e.failure() {
                        Failure::Denied if !self.authorized => {
                            return Err(Error::Denied(e));
                        }
                        Failure::Denied => tracing::error!(
                            error = %e,
                            "storage refused the credentials; retrying in {}",
                            crate::human(pause)
                        ),
                        _ => tracing::warn!(
                            error = %e,
                            "cannot acquire the lease; retrying in {}",
                            crate::human(pause)
                        ),
                    }
                    pause
                }
            };
            let mut pause = if read_now { Duration::ZERO } else { pause };
            // While it watches, a listing of the record keeper that makes this instance next
            // in line ends the watch period (it may be handed the lease any moment). Enabled
            // before the place is checked, so that a listing in between is not missed; not
            // listened to during a polling period, which a listing need not cut short.
            let watching = pause > pace::poll_interval(&self.timing);
            let mut placed = std::pin::pin!(
                self.membership
                    .as_ref()
                    .filter(|_| watching)
                    .map(|m| m.placed_to_poll())
            );
            if let Some(notified) = placed.as_mut().as_pin_mut() {
                notified.enable();
                if self.place() == Place::Poll {
                    pause = pace::poll_interval(&self.timing);
                    placed.set(None);
                }
            }
            let placed = async {
                match placed.as_mut().as_pin_mut() {
                    Some(notified) => notified.await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                () = stop.cancelled() => return Ok(None),
                () = sleep(pause) => {}
                () = placed => tracing::debug!("next in line now: polling"),
                () = waker.woken() => {
                    tracing::debug!("woken up: trying the acquire now");
                    acquire_now = true;
                    woken = self.slots == 1;
                }
            }
        }
    }

    /// Whether this instance is a member that has not yet read who leads.
    fn leader_unknown(&self) -> bool {
        self.membership
            .as_ref()
            .is_some_and(|m| m.with(|l| l.leader.is_none()))
    }

    /// Where this instance stands now: the successor (or an instance without a line) polls,
    /// the others watch.
    pub(super) fn place(&self) -> Place {
        match &self.membership {
            Some(m) => m.with(|l| l.place()),
            None => Place::Poll,
        }
    }

    /// How long a watcher waits before its next round: a watch period, or a polling period if
    /// what it learned meanwhile (its own listing, or the record keeper's) made it the
    /// successor.
    pub(super) fn next_look(&self) -> Duration {
        match self.place() {
            Place::Poll => pace::poll_interval(&self.timing),
            Place::Watch => pace::watch_interval(&self.timing),
        }
    }
}
