//! Winning a term: the successor acquires every jittered `acquire_interval` while someone else
//! leads, the other members watch the lease blob (`watch`); then epoch + 1 written under the
//! lease with `If-Match` ([`first_epoch`] on a blob without one). An acquire that got no answer
//! in time is never resent, and a late success is released (`LateAcquire`, `settle`).

use super::keep::log_deadline;
use super::members::{self, Place, RECORD_LEASE};
use super::wake::Reserved;
use super::{Elector, Error, LeaseOp, Observer, timed};
use crate::clock;
use crate::fmt::human;
use crate::mutant::Mutant;
use crate::store::{BlobState, ETag, Failure, Holder, LeaseId, LeaseState, LeaseStore, StoreError};
use crate::timing::{Deadline, POLL_JITTER, Timing};
use std::sync::Arc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep};
use tokio_util::sync::CancellationToken;

/// One won leadership.
#[derive(Debug, Clone)]
pub(crate) struct Term {
    /// The slot it holds (0: the group's blob; design section 12).
    pub slot: u32,
    pub lease: LeaseId,
    /// The fencing token confirmed in the blob's metadata before the child starts.
    pub epoch: u64,
    /// The deadline of the acquire itself.
    pub deadline: Deadline,
    /// Wall-clock time of the acquisition, for people.
    pub acquired_at: OffsetDateTime,
    /// Its epoch is the one a handoff reserved for it, written beside the acquire (design
    /// section 17).
    pub reserved: bool,
}

/// An acquire that got no answer within the request timeout. Its request may well have reached
/// the server and taken the lease there: answers can be slow while requests are not. Sending it
/// again would only renew that lease for another `L`, and an instance whose every answer comes
/// late would then hold the lease for ever without ever leading. So it is never resent: its
/// answer is awaited in the background ([`settle`]), a late success is released at once, and
/// the elector stays out of the election until what that request did is known, or until the
/// lease it may have taken has surely expired (`sent + L`).
pub(super) struct LateAcquire {
    /// When the request was sent: a lease it took cannot outlive `sent + L` on the server
    /// (unless the request itself reached the server late, and then it expires unrenewed `L`
    /// after it arrived).
    sent: Instant,
    /// Ends with what became of that lease.
    settled: JoinHandle<Settled>,
}

/// What a member that is not the successor saw of the lease blob so far.
#[derive(Debug, Default)]
struct Watch {
    /// The ETag of the last read: a new one means a new epoch or a handoff notice.
    etag: Option<ETag>,
    /// The last read found the lease held by nobody.
    unleased: bool,
    /// The last handoff notice read: a new leader it named was handed the lease; one it did not
    /// name took it after its predecessor crashed or lost it.
    notice: Option<String>,
    /// A listing put off until a crashed leader's record has surely expired.
    list_at: Option<Instant>,
    /// With slots: the record of the member ahead.
    slots: super::slots::SlotWatch,
}

/// What one round of a campaign came to.
enum Round {
    Won(Term),
    /// Someone else holds the lease: poll again.
    Held,
    /// Acquire now (the lease is free, or was handed to us).
    Acquire,
    /// Look again after this long.
    Wait(Duration),
}

/// What became of the lease a late acquire may have taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settled {
    /// The acquire was refused: it took nothing.
    NotTaken,
    /// It had taken the lease, and the release that followed was confirmed.
    Released,
    /// Unknown (no answer before `sent + L`, an answer that may or may not mean it was applied,
    /// or a release that got no answer): the lease may be held until `sent + L`.
    MayHold,
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
        let mut backoff = self.error_backoff();
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
                let Some(pause) = self.sit_out(late, stop).await else {
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
                    human(until.saturating_duration_since(clock::now()))
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
                    () = sleep(self.poll_interval()) => continue,
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
                            () = sleep(super::slots::MISMATCH_RECHECK) => continue,
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
                            human(self.timing.acquire_interval * members::WATCH_PERIODS),
                            human(
                                (self.timing.acquire_interval * members::WATCH_PERIODS)
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
                            Place::Poll => Round::Wait(self.poll_interval()),
                            Place::Watch => Round::Wait(members::watch_interval(&self.timing)),
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
                    backoff = self.error_backoff();
                    match round {
                        Ok(Round::Wait(d)) => d,
                        _ => self.poll_interval(),
                    }
                }
                Ok(Round::Held) => {
                    backoff = self.error_backoff();
                    self.poll_interval()
                }
                Ok(Round::Wait(d)) => {
                    backoff = self.error_backoff();
                    d
                }
                Err(e) if self.late.is_some() => {
                    tracing::warn!(
                        error = %e,
                        "no answer to the acquire in time; not sending it again (it may have taken the lease on the server): waiting for its answer, or at most until that lease would have expired, in {}",
                        human(self.timing.duration.saturating_sub(self.timing.request_timeout()))
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
                            human(pause)
                        ),
                        _ => tracing::warn!(
                            error = %e,
                            "cannot acquire the lease; retrying in {}",
                            human(pause)
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
            let watching = pause > self.poll_interval();
            let mut placed = std::pin::pin!(
                self.membership
                    .as_ref()
                    .filter(|_| watching)
                    .map(|m| m.placed_to_poll())
            );
            if let Some(notified) = placed.as_mut().as_pin_mut() {
                notified.enable();
                if self.place() == Place::Poll {
                    pause = self.poll_interval();
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
    fn place(&self) -> Place {
        match &self.membership {
            Some(m) => m.with(|l| l.place()),
            None => Place::Poll,
        }
    }

    /// One round of a member that is not the successor: one read of the lease blob. A new
    /// ETag (a new epoch, or a handoff notice) is placed in the line as last listed; the
    /// members are listed again only when that makes this instance the successor or names a
    /// member the line does not know, so that a change of leader costs one listing, not one
    /// per member. A lease held by nobody is read once more a polling period later (the
    /// successor should have taken it meanwhile), and then acquired: that fallback bounds a
    /// dead successor, or a line that is out of date, to about a lease duration and a watch
    /// period.
    async fn watch(&mut self, w: &mut Watch) -> Result<Round, StoreError> {
        let Some(m) = &self.membership else {
            return Ok(Round::Acquire);
        };
        if w.list_at.is_some_and(|at| Instant::now() >= at) {
            w.list_at = None;
            let limit = clock::now() + self.timing.request_timeout();
            let _ = m.list(&*self.store, &*self.observer, limit).await;
        }
        let limit = clock::now() + self.timing.request_timeout();
        let state = match timed(&*self.observer, LeaseOp::Read, limit, self.store.read()).await {
            Ok(state) => state,
            // Nobody watches a leader that is gone (design section 16): the blob was deleted,
            // and whoever leads next does so under the lock-delay.
            Err(e) if e.failure() == Failure::Missing => {
                self.authorized = true;
                self.vanished.missing(0, &self.timing);
                tracing::info!("the lease blob is gone; campaigning for it");
                return Ok(Round::Acquire);
            }
            Err(e) => return Err(e),
        };
        self.authorized = true;
        if state.recreated.is_some() {
            self.vanished.marked(0, state.age, &self.timing);
        } else if state.holder.is_some() {
            self.vanished.over(0);
        }
        if self.note_count(state.lease, state.holder.as_ref()) {
            return Ok(Round::Wait(super::slots::MISMATCH_RECHECK));
        }
        if state.lease != LeaseState::Leased && state.recreated.is_some() {
            // Created again after a deletion, and free: whoever takes it waits out the
            // lock-delay holding it, so it is taken now, whatever the line says.
            w.unleased = false;
            return Ok(Round::Acquire);
        }
        if state.lease != LeaseState::Leased {
            // Released with nobody to hand it to (a member that joined just after the leader's
            // last listing): the member next in line after the last leader takes it at once;
            // the others wait a polling period for it, as below.
            let next = m.with(|l| {
                let next = match l.leader.clone() {
                    Some(old) => l.is_successor_without(&old),
                    None => l.is_successor(),
                };
                l.read(&state);
                next
            });
            w.etag = None;
            if next {
                tracing::info!("the lease is free and this instance is next in line; acquiring it");
                w.unleased = false;
                return Ok(Round::Acquire);
            }
            if w.unleased {
                w.unleased = false;
                tracing::info!(
                    "the lease has been held by nobody for a polling period; acquiring it"
                );
                return Ok(Round::Acquire);
            }
            w.unleased = true;
            return Ok(Round::Wait(self.timing.longest_poll()));
        }
        w.unleased = false;
        if w.etag.as_ref() == Some(&state.etag) {
            return Ok(Round::Wait(self.next_look()));
        }
        w.etag = Some(state.etag.clone());
        let me = self.identity.as_str();
        let handed = w.notice.clone();
        w.notice = state.successor.clone();
        let (named_me, list_now, list_later) = m.with(|l| {
            let before = l.leader.clone();
            l.read(&state);
            let named_me = l.notice.as_deref() == Some(me) && l.leader.as_deref() != Some(me);
            let unknown = l
                .leader
                .iter()
                .chain(l.notice.iter())
                .any(|id| id != me && !l.knows(id));
            // A new leader: whether the old one is still in line is what decides who is next
            // now (a clean stop deleted its record, a release kept it, a crash left it to
            // expire), and this instance's line cannot tell. Only the member that would be
            // next without it lists, at once: one listing per change of leader. A new leader
            // that no notice named (the notice lasts only until the new epoch is written, so
            // this is what a watcher usually sees; or the old leader crashed) may have left a
            // record that has not expired yet: that member looks again once it surely has.
            let next_without_old = match (&before, &l.leader) {
                (Some(old), Some(new)) if old != new => {
                    l.gave_up(old);
                    l.is_successor_without(old)
                }
                _ => false,
            };
            let unannounced = match (&before, &l.leader) {
                (Some(_), Some(new)) => handed.as_deref() != Some(new.as_str()),
                _ => false,
            };
            (
                named_me,
                l.is_successor() || unknown || next_without_old,
                unannounced && next_without_old,
            )
        });
        self.observer.line(&m.view());
        if named_me {
            tracing::info!("the leader is handing the lease to this instance; acquiring it");
            return Ok(Round::Acquire);
        }
        if list_now {
            let limit = clock::now() + self.timing.request_timeout();
            if let Err(e) = m.list(&*self.store, &*self.observer, limit).await {
                tracing::debug!(error = %e, "could not list the members");
            }
        }
        if list_later && !m.with(|l| l.is_successor()) {
            w.list_at = Some(Instant::now() + RECORD_LEASE);
        }
        Ok(Round::Wait(self.next_look()))
    }

    /// Creates the blob of `slot` again if this instance found it gone and does not know it to
    /// exist again: at once, so that its lock-delay (which counts from its creation for the
    /// members that find it marked) is not started only once this instance's own is over.
    /// Failures are left to the campaign's next attempts.
    pub(crate) async fn create_vanished(&self, slot: u32) {
        if !self.create_if_missing || !self.vanished.to_create(slot) {
            return;
        }
        let created = self.recreate(slot).await;
        match created {
            Ok(true) => self.vanished.created(slot),
            Ok(false) => self.vanished.fresh(slot),
            Err(e) => tracing::debug!(error = %e, slot, "could not create the deleted blob again"),
        }
    }

    /// Creates slot `slot`'s blob again, marked when this instance saw it led or other members
    /// are listed ([`super::vanish::create`]); whether it was marked.
    async fn recreate(&self, slot: u32) -> Result<bool, StoreError> {
        super::vanish::create(
            &*self.store,
            &**self.store_of(slot),
            &self.identity,
            self.vanished.was_led(slot),
            &self.timing,
            &*self.observer,
        )
        .await
    }

    /// How long a watcher waits before its next round: a watch period, or a polling period if
    /// what it learned meanwhile (its own listing, or the record keeper's) made it the
    /// successor.
    fn next_look(&self) -> Duration {
        match self.place() {
            Place::Poll => self.poll_interval(),
            Place::Watch => members::watch_interval(&self.timing),
        }
    }

    /// Waits until what `late` did to the lease is known or no longer matters; returns the pause
    /// before the next attempt: a polling period after a refusal, a full one (as after any
    /// release) after a late success was released, and otherwise what is left until the lease
    /// it may hold has expired. `None` when `stop` came.
    async fn sit_out(&self, late: LateAcquire, stop: &CancellationToken) -> Option<Duration> {
        let LateAcquire { sent, mut settled } = late;
        let expired = sent + self.timing.duration;
        let outcome = tokio::select! {
            biased;
            joined = &mut settled => joined.unwrap_or(Settled::MayHold),
            // The background task ends by itself soon after (it stops waiting at this same
            // instant, or is releasing a success that came just now).
            () = clock::sleep_until(expired) => Settled::MayHold,
            () = stop.cancelled() => {
                // Exiting now would leave a late success held by nobody; its answer usually
                // comes soon after the timeout, and the release then takes one request.
                let grace = 2 * self.timing.request_timeout();
                if tokio::time::timeout(grace, &mut settled).await.is_err() {
                    tracing::warn!(
                        "stopping without the answer to an earlier acquire; if it took the lease, the lease expires unrenewed within {}",
                        human(expired.saturating_duration_since(clock::now()))
                    );
                }
                return None;
            }
        };
        Some(match outcome {
            Settled::NotTaken => self.poll_interval(),
            Settled::Released => self.yield_interval(),
            Settled::MayHold => expired.saturating_duration_since(clock::now()),
        })
    }

    /// The follower's polling period: `acquire_interval`, stretched by up to 20 % at random so
    /// that followers started together do not poll in lock-step (and never poll faster than
    /// once per `acquire_interval`).
    pub(crate) fn poll_interval(&self) -> Duration {
        self.timing
            .acquire_interval
            .mul_f64(1.0 + POLL_JITTER * fastrand::f64())
    }

    /// How long a daemon that released the lease by choice waits before competing again: one
    /// full follower polling period, so that every follower polls at least once meanwhile.
    pub(crate) fn yield_interval(&self) -> Duration {
        self.timing.longest_poll()
    }

    fn error_backoff(&self) -> impl Iterator<Item = Duration> + use<S> {
        crate::retry::backoff(
            self.timing.acquire_interval,
            super::longest_error_backoff(&self.timing),
        )
    }

    /// One acquisition attempt. `Ok(None)`: someone else holds the lease. An attempt that gets
    /// no answer within the request timeout returns [`StoreError::TimedOut`] and is left to
    /// settle in the background (a `LateAcquire`); [`Elector::campaign`] waits for that
    /// before its next attempt.
    pub(crate) async fn try_acquire(&mut self) -> Result<Option<Term>, StoreError> {
        self.try_acquire_slot(0).await
    }

    /// One acquisition attempt on slot `slot` (0: the group's blob), as [`Elector::try_acquire`].
    pub(crate) async fn try_acquire_slot(&mut self, slot: u32) -> Result<Option<Term>, StoreError> {
        self.acquire_slot(slot, None).await
    }

    /// An acquisition attempt after a wake-up, which most likely finds the lease handed to us.
    /// What the epoch write needs goes out beside the acquire instead of after it, which saves
    /// a round trip of the handover:
    ///
    /// * With the epoch the handoff `reserved` for us (design section 17), the epoch write
    ///   itself: under our own lease id, which is the active one once the lease was changed to
    ///   it, and conditional on the blob's ETag being the one the notice left. It goes through
    ///   only if nothing wrote the blob since, so the epoch is the last one + 1; and it changes
    ///   the ETag, so that the old leader can no longer hand the lease on to the next member
    ///   (its `change` is conditional on the ETag it left): either we lead or the next one
    ///   does, never both (section 16). Refused, the epoch is written as without it.
    /// * Without, the read the epoch write is conditional on: a read taken before the acquire
    ///   landed serves only if nothing wrote the blob since (if something did, the blob is read
    ///   again).
    ///
    /// A wake-up carries no authority: a refused acquire only wasted a request, and we never
    /// lead without our own acquire.
    pub(crate) async fn try_acquire_handed(
        &mut self,
        reserved: Option<Reserved>,
    ) -> Result<Option<Term>, StoreError> {
        let beside = match reserved {
            Some(r) if self.slots == 1 => Beside::Epoch(r),
            _ => Beside::Read,
        };
        self.acquire_slot(0, Some(beside)).await
    }

    async fn acquire_slot(
        &mut self,
        slot: u32,
        beside: Option<Beside>,
    ) -> Result<Option<Term>, StoreError> {
        let id = self.next_id;
        let sent = clock::now();
        let limit = sent + self.timing.request_timeout();
        let seconds = self.timing.lease_seconds();
        let store = self.store_of(slot).clone();
        let observer = self.observer.clone();
        let beside = beside.map(|beside| match beside {
            Beside::Read => {
                let store = store.clone();
                BesideTask::Read(crate::spawn::spawn(async move {
                    timed(&*observer, LeaseOp::Read, limit, store.read()).await
                }))
            }
            Beside::Epoch(reserved) => {
                let holder = Holder {
                    identity: self.identity.clone(),
                    epoch: reserved.epoch,
                    acquired_at: crate::clock::wall(),
                    lease: Some(id),
                    slots: None,
                };
                let store = store.clone();
                BesideTask::Epoch(
                    holder.clone(),
                    crate::spawn::spawn(async move {
                        let write = store.write_holder(id, &reserved.etag, &holder);
                        timed(&*observer, LeaseOp::WriteEpoch, limit, write).await
                    }),
                )
            }
        });
        // A task of its own, so that the request goes on when we stop waiting for it.
        let mut request = crate::spawn::spawn(async move { store.acquire(id, seconds).await });
        let started = Instant::now();
        let acquired =
            match tokio::time::timeout_at(clock::timer_instant(limit), &mut request).await {
                Ok(joined) => joined.unwrap_or_else(|e| {
                    Err(StoreError::Client(format!(
                        "the acquire request failed: {e}"
                    )))
                }),
                Err(_) => {
                    let e = StoreError::TimedOut(limit - sent);
                    self.observer
                        .lease_op(LeaseOp::Acquire, started.elapsed(), Some(&e));
                    self.acquire_next_with(LeaseId::random());
                    self.late = Some(LateAcquire {
                        sent,
                        settled: crate::spawn::spawn(settle(
                            self.store_of(slot).clone(),
                            self.observer.clone(),
                            self.timing,
                            id,
                            sent,
                            request,
                        )),
                    });
                    return Err(e);
                }
            };
        self.observer
            .lease_op(LeaseOp::Acquire, started.elapsed(), acquired.as_ref().err());
        // Any answer but a refusal proves the credentials; no answer proves nothing.
        match &acquired {
            Err(StoreError::Unreachable(_) | StoreError::TimedOut(_)) => {}
            Err(e) if e.failure() == Failure::Denied => {}
            _ => self.authorized = true,
        }
        match acquired {
            Ok(()) => {}
            Err(e) if e.failure() == Failure::Held => return Ok(None),
            Err(e) if e.failure() == Failure::Missing && self.create_if_missing => {
                self.vanished.missing(slot, &self.timing);
                tracing::warn!(error = %e, "the lease blob is missing; creating it");
                let marked = self.recreate(slot).await?;
                match marked {
                    true => self.vanished.created(slot),
                    // A brand-new group's blob: no body ran on it.
                    false => self.vanished.fresh(slot),
                }
                return Err(e);
            }
            Err(e) => return Err(e),
        }

        // We hold the lease since `sent`. The epoch must be confirmed before the stop deadline
        // of this very lease, or the child would have no time to run.
        let counted_from = match crate::mutant::on(Mutant::DeadlineFromAnswer) {
            true => clock::now(),
            false => sent,
        };
        let deadline = Deadline::from_sent(counted_from, &self.timing);
        let (written, reserved) = match beside {
            Some(BesideTask::Epoch(holder, write)) => {
                self.reserved_epoch(slot, id, deadline, holder, write).await
            }
            Some(BesideTask::Read(read)) => {
                let read = read.await.ok().and_then(Result::ok);
                (self.write_epoch(slot, id, deadline, read).await, false)
            }
            None => (self.write_epoch(slot, id, deadline, None).await, false),
        };
        // This id is spent: the next acquire goes out with a new one, which the member record
        // publishes only now, after the epoch (with slots, a member waiting behind this one
        // takes the record's change for this win: a listing that saw the new record saw the
        // epoch that names this instance the slot's holder).
        self.acquire_next_with(LeaseId::random());
        match written {
            Ok(None) => {
                // Another count of slots leads this group, or the blob is under a lock-delay:
                // no body, and the slot back at once.
                self.release_on(slot, id).await;
                Ok(None)
            }
            Ok(Some(holder)) => {
                log_deadline(&deadline, holder.epoch);
                self.vanished.led(slot);
                Ok(Some(Term {
                    slot,
                    lease: id,
                    epoch: holder.epoch,
                    deadline,
                    acquired_at: holder.acquired_at,
                    reserved,
                }))
            }
            Err(e) => {
                self.release_on(slot, id).await;
                Err(e)
            }
        }
    }

    /// The mutant `trust-the-notice` (design section 15; never switched on outside the
    /// simulator): a woken member that reads a handoff notice naming it leads at once, with the
    /// next epoch, without an acquire of its own and without writing that epoch.
    async fn trust_the_notice(&mut self) -> Result<Option<Term>, StoreError> {
        let sent = clock::now();
        let limit = sent + self.timing.request_timeout();
        let state = self.call(LeaseOp::Read, limit, self.store.read()).await?;
        if state.successor.as_deref() != Some(self.identity.as_str()) {
            return self.try_acquire_handed(None).await;
        }
        let lease = self.next_id;
        self.acquire_next_with(LeaseId::random());
        Ok(Some(Term {
            slot: 0,
            lease,
            epoch: state.holder.map_or(1, |h| h.epoch.saturating_add(1)),
            deadline: Deadline::from_sent(sent, &self.timing),
            acquired_at: clock::wall(),
            reserved: false,
        }))
    }

    /// The epoch reserved for us, written beside our acquire ([`Elector::try_acquire_handed`]):
    /// ours once that write is confirmed (rule 6); refused (the blob changed since the notice,
    /// or the lease was not ours when it arrived), the epoch is read and written after the
    /// acquire as without a reservation. The mutants `start-before-epoch` and
    /// `lead-on-the-reservation` lead without waiting for it. Also says whether the reserved
    /// epoch was the one written.
    async fn reserved_epoch(
        &mut self,
        slot: u32,
        id: LeaseId,
        deadline: Deadline,
        holder: Holder,
        write: JoinHandle<Result<(), StoreError>>,
    ) -> (Result<Option<Holder>, StoreError>, bool) {
        let leads_at_once = crate::mutant::on(Mutant::StartBeforeEpoch)
            || crate::mutant::on(Mutant::LeadOnTheReservation);
        let written = match leads_at_once {
            true => Ok(()),
            false => write.await.unwrap_or_else(|e| {
                Err(StoreError::Client(format!("the epoch write failed: {e}")))
            }),
        };
        match written {
            Ok(()) if clock::now() < deadline.stop_at => {
                tracing::debug!(
                    epoch = holder.epoch,
                    "wrote the epoch the handoff reserved for this instance"
                );
                // The notice that reserved it was a leader's epoch write: no lock-delay.
                self.vanished.over(slot);
                (Ok(Some(holder)), true)
            }
            Ok(()) => (
                Err(StoreError::TimedOut(deadline.stop_at - deadline.sent)),
                false,
            ),
            Err(e) => {
                tracing::debug!(error = %e, "the reserved epoch was not written; reading the blob");
                (self.write_epoch(slot, id, deadline, None).await, false)
            }
        }
    }

    /// Reads the last epoch and writes epoch + 1 under our lease on `slot`, conditional on the
    /// ETag read. `Ok(None)`: the group counts other slots than we do (slot 0 records it): no
    /// epoch written, and the caller gives the slot back.
    async fn write_epoch(
        &mut self,
        slot: u32,
        id: LeaseId,
        deadline: Deadline,
        read: Option<BlobState>,
    ) -> Result<Option<Holder>, StoreError> {
        if let Some(state) = read {
            match self.write_epoch_on(slot, id, deadline, state).await {
                Err(e) if e.code() == Some("ConditionNotMet") => tracing::debug!(
                    "the blob changed after the read sent beside the acquire; reading it again"
                ),
                written => return written,
            }
        }
        let limit = (clock::now() + self.timing.request_timeout()).min(deadline.stop_at);
        let store = self.store_of(slot).clone();
        let state = self.call(LeaseOp::Read, limit, store.read()).await?;
        self.write_epoch_on(slot, id, deadline, state).await
    }

    /// Writes epoch + 1 over what `state` read, conditional on its ETag ([`Elector::write_epoch`]).
    async fn write_epoch_on(
        &mut self,
        slot: u32,
        id: LeaseId,
        deadline: Deadline,
        state: BlobState,
    ) -> Result<Option<Holder>, StoreError> {
        let limit = || (clock::now() + self.timing.request_timeout()).min(deadline.stop_at);
        let store = self.store_of(slot).clone();
        if slot == 0 {
            // Slot 0 was free (or handed to us): its last count stands only while a live member
            // still counts it (a group stopped and restarted with another count takes the new).
            let recorded = super::slots::recorded_count(state.holder.as_ref());
            let counted = |n: u32| {
                self.membership.as_ref().is_some_and(|m| {
                    m.with(|l| {
                        l.members.iter().any(|r| {
                            r.is_alive() && r.member.slots == n && r.identity() != self.identity
                        })
                    })
                })
            };
            if let Some(n) = recorded.filter(|n| *n != self.slots && counted(*n)) {
                self.note_count(LeaseState::Leased, state.holder.as_ref());
                tracing::debug!(
                    recorded = n,
                    "released slot 0: the group counts other slots"
                );
                return Ok(None);
            }
        } else {
            let zero = self.call(LeaseOp::Read, limit(), self.store.read()).await?;
            if self.note_count(zero.lease, zero.holder.as_ref()) {
                return Ok(None);
            }
        }
        // Members a handoff passed over are passed over here too (design section 16).
        if let Some(m) = &self.membership
            && !state.passed_over.is_empty()
        {
            m.with(|l| state.passed_over.iter().for_each(|p| l.pass_over(p)));
        }
        // A blob created again after a deletion starts a lock-delay (design section 16): no
        // epoch is written on it, and so no body starts, before this instance's delay is over;
        // until then the lease is given back (the campaign waits out the delay). An epoch that a
        // leader wrote on it since ends the delay for everyone.
        if state.recreated.is_some() {
            self.vanished.marked(slot, state.age, &self.timing);
            if self.vanished.until(slot).is_some() {
                return Ok(None);
            }
        } else if state.holder.is_some() {
            self.vanished.over(slot);
        }
        let now = crate::clock::wall();
        let epoch = match &state.holder {
            Some(last) => last
                .epoch
                .checked_add(1)
                .ok_or_else(|| StoreError::BadMetadata {
                    key: crate::store::META_EPOCH,
                    value: last.epoch.to_string(),
                })?,
            None => first_epoch(now),
        };
        let holder = Holder {
            identity: self.identity.clone(),
            epoch,
            acquired_at: now,
            lease: Some(id),
            slots: (self.slots != 1).then_some(self.slots),
        };
        if crate::mutant::on(Mutant::StartBeforeEpoch) {
            // The body starts while the write is on its way, whatever becomes of it.
            let (store, etag, written) = (store.clone(), state.etag.clone(), holder.clone());
            crate::spawn::spawn(async move { store.write_holder(id, &etag, &written).await });
            return Ok(Some(holder));
        }
        self.call(
            LeaseOp::WriteEpoch,
            limit(),
            store.write_holder(id, &state.etag, &holder),
        )
        .await?;
        if clock::now() >= deadline.stop_at {
            return Err(StoreError::TimedOut(deadline.stop_at - deadline.sent));
        }
        Ok(Some(holder))
    }
}

/// What an acquire after a wake-up sends beside it ([`Elector::try_acquire_handed`]).
enum Beside {
    /// The read the epoch write needs.
    Read,
    /// The epoch write of the epoch reserved for us.
    Epoch(Reserved),
}

/// A [`Beside`] request on its way.
enum BesideTask {
    Read(JoinHandle<Result<BlobState, StoreError>>),
    Epoch(Holder, JoinHandle<Result<(), StoreError>>),
}

/// The epoch of the first leadership of a blob that has none (new, re-created after a deletion,
/// or with its metadata removed): the wall clock in milliseconds since 1970. Every later
/// leadership adds 1, and a blob sees far fewer than 1000 leaderships a second (each takes at
/// least three requests in a row), so this is above every epoch handed out before on that name
/// as long as the clock of the instance writing it is not behind, by more than the blob's
/// lifetime, the clock of the one that wrote the previous first epoch (design section 13).
pub fn first_epoch(now: OffsetDateTime) -> u64 {
    let ms = now.unix_timestamp_nanos() / 1_000_000;
    u64::try_from(ms).unwrap_or(0).max(1)
}

/// Awaits the answer to an acquire that got none in time (`request`), at most until the lease it
/// may have taken would have expired (`sent + L`), and releases that lease at once if it was
/// taken: this instance could not have led anyway, since it learnt of its lease too late to
/// write the epoch before its own stop deadline.
async fn settle<S: LeaseStore>(
    store: Arc<S>,
    observer: Arc<dyn Observer>,
    timing: Timing,
    id: LeaseId,
    sent: Instant,
    mut request: JoinHandle<Result<(), StoreError>>,
) -> Settled {
    let answer = tokio::select! {
        biased;
        joined = &mut request => joined.unwrap_or_else(|e| Err(StoreError::Client(e.to_string()))),
        () = clock::sleep_until(sent + timing.duration) => {
            request.abort();
            tracing::debug!("no answer to the late acquire within the lease duration");
            return Settled::MayHold;
        }
    };
    let late = human(clock::now().saturating_duration_since(sent));
    match answer {
        Ok(()) => {
            tracing::warn!(
                late = %late,
                "the acquire that got no answer in time had taken the lease; releasing it at once (storage answers this instance too late for it to lead)"
            );
            let limit = clock::now() + timing.request_timeout();
            match timed(&*observer, LeaseOp::Release, limit, store.release(id)).await {
                Ok(()) => Settled::Released,
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "no answer to that release either; if it did not reach storage, the lease expires unrenewed within {}",
                        human((sent + timing.duration).saturating_duration_since(clock::now()))
                    );
                    Settled::MayHold
                }
            }
        }
        // An error status other than a transient one means the request was refused, not applied.
        Err(e @ StoreError::Status { .. }) if e.failure() != Failure::Transient => {
            tracing::debug!(late = %late, error = %e, "the late acquire was refused");
            Settled::NotTaken
        }
        Err(e) => {
            tracing::debug!(late = %late, error = %e, "the late acquire may have been applied");
            Settled::MayHold
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::Unobserved;
    use crate::elector::testing::{elector, timing, transient};
    use crate::store::memory::{Behaviour, MemoryStore, Op};
    use std::future::Future;

    /// The first epoch on a blob without one: the wall clock in milliseconds, read around `f`.
    async fn floor_around<T>(f: impl Future<Output = T>) -> (u64, T, u64) {
        let before = first_epoch(crate::clock::wall());
        let t = f.await;
        (before, t, first_epoch(crate::clock::wall()))
    }

    #[tokio::test(start_paused = true)]
    async fn epochs_increase_per_term() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let (before, first, after) = floor_around(e.win(&CancellationToken::new())).await;
        let first = first.unwrap().unwrap();
        assert!(
            (before..=after).contains(&first.epoch),
            "the first epoch of a blob is the wall clock in ms: {before} <= {} <= {after}",
            first.epoch
        );
        assert!(e.release(first.lease).await);
        let second = e.win(&CancellationToken::new()).await.unwrap().unwrap();
        assert_eq!(second.epoch, first.epoch + 1);
        assert_ne!(first.lease, second.lease, "each term has its own lease id");
        let holder = store.holder().unwrap();
        assert_eq!(holder.identity, "me");
        assert_eq!(holder.lease, Some(second.lease), "the lease id is recorded");
    }

    /// Issue 15: a blob deleted and created again (no metadata) must not hand out an epoch that
    /// was handed out before, nor a smaller one.
    #[tokio::test(start_paused = true)]
    async fn epochs_keep_growing_when_the_blob_loses_its_metadata() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let mut epochs = Vec::new();
        for _ in 0..3 {
            let term = e.try_acquire().await.unwrap().unwrap();
            epochs.push(term.epoch);
            assert!(e.release(term.lease).await);
        }
        store.recreate();
        // Real time must pass for the wall clock to move: 3 leaderships took no paused time.
        std::thread::sleep(Duration::from_millis(5));
        let term = e.try_acquire().await.unwrap().unwrap();
        assert!(
            epochs.iter().all(|earlier| term.epoch > *earlier),
            "{epochs:?} then {} after the blob was re-created",
            term.epoch
        );
    }

    #[tokio::test(start_paused = true)]
    async fn tampered_epochs_keep_the_instance_from_leading() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        let holder = |epoch| Holder {
            identity: "someone".into(),
            epoch,
            acquired_at: OffsetDateTime::UNIX_EPOCH,
            lease: None,
            slots: None,
        };
        // An epoch that cannot grow: refused, naming the key, and the lease is given back.
        store.set_holder(Some(holder(u64::MAX)));
        let err = e.try_acquire().await.unwrap_err();
        assert!(err.to_string().contains(crate::store::META_EPOCH), "{err}");
        assert!(!store.is_leased(), "released");
        // A large but growable one carries on.
        store.set_holder(Some(holder(u64::MAX - 1)));
        assert_eq!(e.try_acquire().await.unwrap().unwrap().epoch, u64::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn a_follower_polls_at_the_jittered_interval() {
        let store = Arc::new(MemoryStore::default());
        store.steal(15);
        let mut e = elector(&store);
        let start = Instant::now();
        let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
        let attempts = store.calls(Op::Acquire);
        let gaps: Vec<Duration> = attempts.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(
            gaps.iter()
                .all(|g| *g >= Duration::from_secs(1) && *g <= Duration::from_millis(1200)),
            "{gaps:?}"
        );
        assert!(
            Instant::now() - start >= Duration::from_secs(15),
            "waited for the expiry"
        );
        assert!(term.epoch > 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_stop_request_never_cuts_an_acquire_in_flight() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Acquire, Behaviour::SlowAnswer(Duration::from_secs(2)));
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        tokio::spawn(async move {
            sleep(Duration::from_secs(1)).await;
            stopper.cancel();
        });
        // The stop came while the (successful) acquire was in flight: the term is returned, so
        // that the caller can release it instead of leaving the lease held by nobody.
        let term = e.win(&stop).await.unwrap().expect("the won term");
        assert_eq!(store.lease_id(), Some(term.lease));
        // Between attempts, a stop ends the campaign at once.
        store.steal(15);
        store.set(Op::Acquire, Behaviour::Normal);
        let began = Instant::now();
        assert!(e.win(&stop).await.unwrap().is_none());
        assert!(Instant::now() - began < Duration::from_secs(1));
    }

    /// Issue 12, item 2. A crashed leader's lease expires at t0 + 15. A slow instance, whose
    /// answers all come R + 0.5 s late, takes it with its next acquire (the request lands at
    /// once). A healthy instance, started then, must lead within the slow one's answer delay +
    /// one poll, and keep leading: the slow instance must never send an acquire id twice (a
    /// resend renews the lease it took), and must release the lease its late success took.
    #[tokio::test(start_paused = true)]
    async fn an_instance_whose_answers_come_too_late_gives_the_lease_up_at_once() {
        let store = Arc::new(MemoryStore::default());
        store.steal(15);
        let crashed_lease_ends = Instant::now() + Duration::from_secs(15);
        let answer_delay = timing().request_timeout() + Duration::from_millis(500);
        let slow_client = Arc::new(store.client(answer_delay));
        let mut slow = Elector::new(
            slow_client,
            "slow".into(),
            timing(),
            true,
            Arc::new(Unobserved),
        );
        let slow_campaign = tokio::spawn(async move {
            let term = slow.win(&CancellationToken::new()).await;
            (slow, term)
        });
        // The slow instance's first acquire after the expiry takes the lease.
        while Instant::now() <= crashed_lease_ends || !store.is_leased() {
            sleep(Duration::from_millis(10)).await;
            assert!(
                Instant::now() < crashed_lease_ends + Duration::from_secs(30),
                "the slow instance never took the expired lease"
            );
        }
        let taken = Instant::now();
        let slow_lease = store.lease_id().unwrap();
        assert!(store.ids(Op::Acquire).contains(&slow_lease));

        let mut healthy = elector(&store);
        let won = tokio::time::timeout(
            Duration::from_secs(60),
            healthy.win(&CancellationToken::new()),
        )
        .await
        .expect("the healthy instance leads (the slow one keeps renewing with late acquires)")
        .unwrap()
        .unwrap();
        let bound = answer_delay + timing().acquire_interval.mul_f64(1.0 + POLL_JITTER);
        assert!(
            Instant::now() - taken <= bound,
            "healthy led {:?} after the slow instance took the lease (bound {bound:?})",
            Instant::now() - taken
        );
        assert!(
            store.ids(Op::Release).contains(&slow_lease),
            "the slow instance released the lease its late acquire took"
        );

        // Two lease durations later the healthy instance still leads, and the slow one has
        // kept trying with a new id each time.
        let keeper = healthy.keep(&won);
        sleep(Duration::from_secs(30)).await;
        assert!(keeper.tenure().borrow().is_held());
        assert_eq!(store.lease_id(), Some(won.lease));
        assert!(
            !slow_campaign.is_finished(),
            "the slow instance never leads"
        );
        let slow_ids: Vec<LeaseId> = store
            .ids(Op::Acquire)
            .into_iter()
            .filter(|id| *id != won.lease)
            .collect();
        let distinct: std::collections::HashSet<_> = slow_ids.iter().collect();
        assert!(slow_ids.len() >= 4, "{slow_ids:?}");
        assert_eq!(
            distinct.len(),
            slow_ids.len(),
            "an acquire id was sent twice"
        );
        keeper.stop().await;
        slow_campaign.abort();
    }

    /// An acquire that never gets an answer (nor, as far as we know, reached the server) keeps
    /// the instance out until the lease it may have taken has expired: `sent + L`.
    #[tokio::test(start_paused = true)]
    async fn an_unanswered_acquire_keeps_the_instance_out_until_its_lease_would_have_expired() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Acquire, Behaviour::Hang);
        let healer = store.clone();
        tokio::spawn(async move {
            sleep(Duration::from_secs(5)).await;
            healer.set(Op::Acquire, Behaviour::Normal);
        });
        let start = Instant::now();
        let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
        let attempts = store.calls(Op::Acquire);
        assert_eq!(attempts.len(), 2, "{attempts:?}");
        assert_eq!(
            attempts[1],
            start + timing().duration,
            "not before sent + L"
        );
        let ids = store.ids(Op::Acquire);
        assert_ne!(ids[0], ids[1], "a new id");
        assert_eq!(term.lease, ids[1]);
    }

    /// A stop that comes while a timed-out acquire's answer is still awaited waits for it, and
    /// for the release of the lease it took, so that the lease is not left held by nobody.
    #[tokio::test(start_paused = true)]
    async fn a_stop_waits_for_a_late_acquire_and_releases_what_it_took() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(
            Op::Acquire,
            Behaviour::SlowAnswer(timing().request_timeout() + Duration::from_millis(500)),
        );
        let stop = CancellationToken::new();
        let stopper = stop.clone();
        tokio::spawn(async move {
            sleep(Duration::from_millis(4200)).await;
            stopper.cancel();
        });
        let start = Instant::now();
        assert!(e.win(&stop).await.unwrap().is_none());
        assert_eq!(
            Instant::now(),
            start + Duration::from_millis(4500),
            "returned when the late answer came and its lease was released"
        );
        assert!(
            !store.is_leased(),
            "the lease the late acquire took was released"
        );
        assert_eq!(store.ids(Op::Release), store.ids(Op::Acquire));
    }

    /// A retry after an answered failure (a 5xx that may have been applied) keeps its id, so
    /// that it still wins if the first attempt did take the lease.
    #[tokio::test(start_paused = true)]
    async fn an_answered_failure_is_retried_with_the_same_id() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::Acquire, Behaviour::Fail(transient()));
        assert!(e.try_acquire().await.is_err());
        store.set(Op::Acquire, Behaviour::Normal);
        let term = e.try_acquire().await.unwrap().unwrap();
        let ids = store.ids(Op::Acquire);
        assert_eq!(ids, vec![term.lease, term.lease]);
    }

    #[tokio::test(start_paused = true)]
    async fn refused_credentials_stop_the_campaign_only_before_the_first_accepted_request() {
        let store = Arc::new(MemoryStore::default());
        let denied = StoreError::Status {
            status: 403,
            code: Some("AuthorizationFailure".into()),
        };
        store.set(Op::Acquire, Behaviour::Fail(denied.clone()));
        let mut e = elector(&store);
        assert!(matches!(
            e.win(&CancellationToken::new()).await,
            Err(Error::Denied(_))
        ));

        // Once storage has accepted us, a refusal is retried (a rotated key, an expired SAS).
        store.set(Op::Acquire, Behaviour::Normal);
        let term = e.win(&CancellationToken::new()).await.unwrap().unwrap();
        e.release(term.lease).await;
        store.set(Op::Acquire, Behaviour::Fail(denied));
        let never = CancellationToken::new();
        let campaign = tokio::time::timeout(Duration::from_secs(60), e.win(&never)).await;
        assert!(campaign.is_err(), "kept trying");
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_epoch_write_releases_and_does_not_lead() {
        let store = Arc::new(MemoryStore::default());
        let mut e = elector(&store);
        store.set(Op::WriteEpoch, Behaviour::Fail(transient()));
        assert!(e.try_acquire().await.is_err());
        assert!(!store.is_leased(), "released after the failed write");
        store.set(Op::WriteEpoch, Behaviour::Normal);
        assert!(e.try_acquire().await.unwrap().unwrap().epoch > 1);
        assert_eq!(store.calls(Op::WriteEpoch).len(), 2);
    }
}
