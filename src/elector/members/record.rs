//! This instance's member record (docs/succession.md), kept by a task of its own ([`Membership`]):
//! joined under a lease of its own (its liveness), renewed, rewritten when what it says changes,
//! deleted when the instance leaves; the line listed every [`Pace::LIST_EVERY`] (the leader and a
//! poller every [`Pace::LEADER_LIST_EVERY`]), and a leader deletes the records of members long
//! dead. When each is due, and what each answer means, is the core's (`leasehold_core::record`);
//! this task carries the requests out.

use super::line::{Line, Place, Standing};
use super::rows::{LineView, view};
use crate::clock::Clock;
use crate::config::Election;
use crate::elector::observe::{LeaseOp, Observer};
use crate::elector::request::timed;
use crate::fmt::human;
use crate::store::{Failure, LeaseId, LeaseStore, Member, MemberKey, SlotRecord, StoreError};
use crate::timing::Timing;
use leasehold_core::Pace;
use leasehold_core::record::{Action, Facts, Keep, Keeper, Kept, Outcome, Reply, Request};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// This instance as a member: its record, kept by a task of its own, and the line as last
/// listed. Dropping it stops the task (the record then expires within [`Pace::RECORD_LEASE`]);
/// [`Membership::leave`] deletes the record first.
pub(crate) struct Membership {
    pub line: Arc<Mutex<Line>>,
    /// The elector's clocks.
    clock: Clock,
    key: MemberKey,
    /// The lease on our record.
    record_lease: LeaseId,
    poke: Arc<Notify>,
    /// Told when a listing by the record keeper makes this instance poll (next in line), so
    /// that a campaign that is waiting out a watch period polls at once.
    placed: Arc<Notify>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Drop for Membership {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

/// What the record keeper works with.
struct RecordKeeper<S> {
    store: Arc<S>,
    observer: Arc<dyn Observer>,
    timing: Timing,
    /// The elector's clocks.
    clock: Clock,
    line: Arc<Mutex<Line>>,
    key: MemberKey,
    record_lease: LeaseId,
    poke: Arc<Notify>,
    placed: Arc<Notify>,
    /// `[election].preempt_after`: when the record says it is settled.
    settle_after: Option<Duration>,
}

impl Membership {
    /// Joins the line (in the background) as `identity`, acquiring the group's lease with
    /// `acquires_with` until told otherwise, holding its record's lease with `record_lease`,
    /// and (with `advertise`) taking wake-ups that carry `wake_token`.
    #[allow(clippy::too_many_arguments)]
    pub fn start<S: LeaseStore>(
        store: Arc<S>,
        observer: Arc<dyn Observer>,
        timing: Timing,
        clock: Clock,
        identity: &str,
        election: &Election,
        acquires_with: LeaseId,
        record_lease: LeaseId,
        wake_token: &crate::secret::Secret,
        slots: u32,
    ) -> Self {
        let line = Arc::new(Mutex::new(Line::new(
            Member {
                identity: identity.to_owned(),
                priority: election.priority,
                acquires_with,
                advertise: election.advertise.clone(),
                // Only a member that takes wake-ups needs one.
                wake_token: election.advertise.as_ref().map(|_| wake_token.clone()),
                standby_until: None,
                slots,
                settled: None,
            },
            clock,
        )));
        let key = MemberKey::of(identity);
        let poke = Arc::new(Notify::new());
        let placed = Arc::new(Notify::new());
        let stop = CancellationToken::new();
        let keeper = RecordKeeper {
            store,
            observer,
            timing,
            clock,
            line: line.clone(),
            key: key.clone(),
            record_lease,
            poke: poke.clone(),
            placed: placed.clone(),
            settle_after: election.preempt_after,
        };
        let task = crate::spawn::spawn(keeper.run(stop.clone()));
        Self {
            line,
            clock,
            key,
            record_lease,
            poke,
            placed,
            stop,
            task: Some(task),
        }
    }

    /// Told when a listing of the record keeper finds this instance next in line (a member
    /// that joined while its campaign had begun a watch period, say: the leader may be handing
    /// it the lease right now, and waits for it only the confirm window). Only futures waiting
    /// at that moment are told: enable it, then check [`Line::place`], then wait.
    pub fn placed_to_poll(&self) -> tokio::sync::futures::OwnedNotified {
        self.placed.clone().notified_owned()
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut Line) -> T) -> T {
        f(&mut self.line.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// From now on the group's lease is acquired with `id`: the record says so at once.
    pub fn acquire_with(&self, id: LeaseId) {
        self.with(|l| {
            if l.published.acquires_with != id {
                l.published.acquires_with = id;
                l.written = false;
            }
        });
        self.poke.notify_one();
    }

    /// This instance leads the term with `epoch` since `since` (`None`: no longer leads).
    pub fn leading(&self, term: Option<(u64, OffsetDateTime, LeaseId)>) {
        self.with(|l| {
            l.succession.leading = term.is_some();
            l.succession.terms_begun += u64::from(term.is_some());
            if term.is_none()
                && l.succession.leader.as_deref() == Some(l.published.identity.as_str())
            {
                // No longer ours: whoever leads now is learnt from the blob, not assumed to be this
                // instance still (docs/safety.md, "Recovery from anything").
                l.succession.leader = None;
            }
            if let Some((epoch, acquired_at, lease)) = term {
                l.succession.leader = Some(l.published.identity.clone());
                l.succession.notice = None;
                l.holder = Some((
                    crate::store::Holder {
                        identity: l.published.identity.clone(),
                        epoch,
                        acquired_at,
                        lease: Some(lease),
                        slots: None,
                    },
                    l.clock.wall(),
                ));
            }
        });
        // The keeper lists on the leader's cadence from now on (or the follower's again), and
        // lists soon after a term began: poked once the line says so (poked before, it could
        // look at the line first and miss the term).
        self.poke.notify_one();
    }

    /// This instance holds slot `slot` now (`None`: none).
    pub fn holding(&self, slot: Option<u32>) {
        self.with(|l| {
            let me = l.published.identity.clone();
            match slot {
                Some(i) => l.set_slot_holder(i, Some(&me)),
                None => {
                    // Unless it was handed on meanwhile (the handoff named the next holder).
                    let mine = |r: &SlotRecord| r.holder.as_ref().is_some_and(|h| h.identity == me);
                    if let Some(i) = l.succession.holding
                        && l.succession
                            .slot_states
                            .iter()
                            .any(|r| r.slot == i && mine(r))
                    {
                        l.set_slot_holder(i, None);
                    }
                }
            }
            l.succession.holding = slot;
        });
    }

    /// Out of the election until `until` (`None`: back in): the record says so; awaited, so
    /// that no leader hands this instance the lease meanwhile.
    pub async fn standby<S: LeaseStore>(
        &self,
        store: &S,
        observer: &dyn Observer,
        until: Option<OffsetDateTime>,
        limit: Instant,
    ) {
        let member = self.with(|l| {
            l.published.standby_until = until;
            l.written = false;
            (l.succession.standing == Standing::Joined).then(|| l.published.clone())
        });
        let Some(member) = member else { return };
        let written = timed(
            self.clock,
            observer,
            LeaseOp::MemberWrite,
            limit,
            store.write_member(&self.key, self.record_lease, &member),
        )
        .await;
        match written {
            Ok(()) => self.with(|l| l.written = l.published == member),
            Err(e) => {
                tracing::warn!(error = %e, "could not mark this instance's member record; the record keeper tries again");
                self.poke.notify_one();
            }
        }
    }

    /// Back from a cooldown: the record no longer says standby.
    pub fn back_in_line(&self) {
        let changed = self.with(|l| {
            let changed = l.published.standby_until.take().is_some();
            l.written &= !changed;
            changed
        });
        if changed {
            self.poke.notify_one();
        }
    }

    /// Lists the line now; `Err` leaves the line as it was.
    pub async fn list<S: LeaseStore>(
        &self,
        store: &S,
        observer: &dyn Observer,
        limit: Instant,
    ) -> Result<(), StoreError> {
        list(store, observer, &self.line, limit).await
    }

    /// Starts leaving the line without waiting: the record task deletes the record in the
    /// background ([`Membership::leave`] then waits for it). A leader that stops departs before
    /// its successor leads, so that the members that list while it confirms the handoff (the
    /// new leader first) do not count it in line.
    pub fn depart(&self) {
        self.stop.cancel();
    }

    /// What [`Membership::depart`]s from another task: a stopping leader's handoff, once its
    /// notice is written.
    pub fn departure(&self) -> Departure {
        Departure(self.stop.clone())
    }

    /// Leaves the line: stops keeping the record and deletes it (under its lease), so that no
    /// leader hands this instance the lease any more.
    pub async fn leave(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }

    /// The elector's clocks, at which the line is judged.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// What `status` shows of the line.
    pub fn view(&self) -> LineView {
        self.with(|l| view(l))
    }
}

/// [`Membership::depart`], from another task ([`Membership::departure`]).
pub(crate) struct Departure(CancellationToken);

impl Departure {
    pub fn depart(&self) {
        self.0.cancel();
    }
}

/// Lists the members into `line`, and tells the observer.
pub(crate) async fn list<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    line: &Mutex<Line>,
    limit: Instant,
) -> Result<(), StoreError> {
    let (slotted, clock) = {
        let l = line.lock().unwrap_or_else(|e| e.into_inner());
        (l.succession.slots > 1, l.clock)
    };
    let (records, slots) = if slotted {
        let (records, slots) =
            timed(clock, observer, LeaseOp::List, limit, store.list_group()).await?;
        (records, Some(slots))
    } else {
        let records = timed(clock, observer, LeaseOp::List, limit, store.list_members()).await?;
        (records, None)
    };
    let view = {
        let mut l = line.lock().unwrap_or_else(|e| e.into_inner());
        l.listed(records);
        if let Some(slots) = slots {
            l.succession.slots_listed(slots);
        }
        view(&l)
    };
    observer.line(&view);
    Ok(())
}

impl<S: LeaseStore> RecordKeeper<S> {
    fn with<T>(&self, f: impl FnOnce(&mut Line) -> T) -> T {
        f(&mut self.line.lock().unwrap_or_else(|e| e.into_inner()))
    }

    fn limit(&self) -> Instant {
        self.clock.now() + self.timing.request_timeout()
    }

    fn set_standing(&self, standing: Standing) {
        let changed = self.with(|l| {
            let changed = l.succession.standing != standing;
            l.succession.standing = standing.clone();
            changed
        });
        if !changed {
            return;
        }
        match &standing {
            Standing::Joined => tracing::info!("joined the line of members"),
            Standing::Duplicate => tracing::warn!(
                record = %self.key,
                "another instance holds the member record of this identity (another instance \
                 with this identity, or this instance before a restart whose record lease has \
                 not expired yet, within {}): this instance stays out of line (it still takes \
                 a lease nobody holds) and tries again every {}",
                human(Pace::RECORD_LEASE),
                human(Pace::RECORD_RENEW)
            ),
            Standing::Refused(why) => tracing::warn!(
                "{why}; this instance has no member record and polls the lease every \
                 acquire_interval as without members; trying again every {}",
                human(Pace::LIST_EVERY)
            ),
            Standing::Joining => {}
        }
        let view = self.with(|l| view(l));
        self.observer.line(&view);
    }

    /// The record task: join, renew every [`Pace::RECORD_RENEW`], write what changed, list every
    /// [`Pace::LIST_EVERY`] (a leader then deletes long-dead records), and at the end leave.
    /// The core's [`Keeper`] says what to do and when; this carries it out.
    async fn run(self, stop: CancellationToken) {
        let mut keeper = Keeper::new(Instant::now(), fastrand::f64());
        // What the join (or the take back of the record's lease) publishes.
        let mut member = None;
        loop {
            let facts = self.facts();
            match keeper.next(Instant::now(), &facts, &mut fastrand::f64) {
                Action::BeginJoin => {
                    member = Some(self.begin_join());
                    keeper.done(Instant::now());
                }
                Action::Settle => {
                    self.settle();
                    keeper.done(Instant::now());
                }
                Action::Send(Request::Write) => {
                    self.write().await;
                    keeper.done(Instant::now());
                }
                Action::Send(Request::List) => {
                    let _ = self.list_now().await;
                    keeper.done(Instant::now());
                }
                Action::Send(Request::Tidy) => {
                    self.tidy().await;
                    keeper.done(Instant::now());
                }
                Action::Keep(request) => self.keep(&mut keeper, request, &mut member).await,
                Action::Sleep(until) => {
                    tokio::select! {
                        biased;
                        () = stop.cancelled() => break,
                        () = self.poke.notified() => {}
                        () = tokio::time::sleep_until(until) => {}
                    }
                    keeper.woke();
                }
            }
        }
        self.leave().await;
    }

    /// What the keeper reads of the line, now.
    fn facts(&self) -> Facts<Instant> {
        let settle_at = self.settle_at();
        self.with(|l| {
            let joined = l.succession.standing == Standing::Joined;
            Facts {
                joined,
                written: l.written,
                listed: l.succession.listed,
                leading: l.succession.leading,
                // A member that polls lists as often as the leader (the core's Keeper says why).
                polls: joined && l.place() == Place::Poll,
                terms_begun: l.succession.terms_begun,
                settle_at,
            }
        })
    }

    /// List, and read the lease blob for its holder: pollers learn of leaders this way.
    async fn list_now(&self) -> Result<(), StoreError> {
        let listed = self.list_and_read().await;
        let polls = self.with(|l| {
            l.succession.standing == Standing::Joined
                && !l.succession.leading
                && l.place() == Place::Poll
        });
        if polls {
            // A campaign in a watch period polls at once; one that polls already is not
            // waiting for this, and no permit is left for later.
            self.placed.notify_waiters();
        }
        listed
    }

    async fn list_and_read(&self) -> Result<(), StoreError> {
        list(&*self.store, &*self.observer, &self.line, self.limit()).await?;
        if self.with(|l| l.succession.slots > 1) {
            // The listing showed the slot blobs, slot 0 (the group's blob) among them.
            return Ok(());
        }
        if self.with(|l| l.succession.leading) {
            return Ok(());
        }
        let read = timed(
            self.clock,
            &*self.observer,
            LeaseOp::Read,
            self.limit(),
            self.store.read(),
        )
        .await;
        if let Ok(state) = read {
            let view = self.with(|l| {
                // A leader knows better (it may have begun leading meanwhile).
                (!l.succession.leading).then(|| {
                    l.read(&state);
                    view(l)
                })
            });
            if let Some(view) = view {
                self.observer.line(&view);
            }
        }
        Ok(())
    }

    /// When our record is to say it is settled (`preempt_after` after its creation), while it
    /// does not yet.
    fn settle_at(&self) -> Option<Instant> {
        let after = self.settle_after?;
        self.with(|l| {
            let unsettled =
                l.succession.standing == Standing::Joined && l.published.settled.is_none();
            l.created.filter(|_| unsettled).map(|c| c + after)
        })
    }

    /// The record says how long this instance has been a member: from now on a leader of lower
    /// priority may hand over to it (docs/preferred.md).
    fn settle(&self) {
        self.with(|l| {
            if let Some(created) = l.created {
                l.published.settled = Some(Instant::now().saturating_duration_since(created));
                l.written = false;
            }
        });
    }

    /// A join begins: the record is created anew (so that its creation time is this join),
    /// under a lease of ours; it will be settled again only `preempt_after` from now. Returns
    /// what it publishes.
    fn begin_join(&self) -> Member {
        self.with(|l| {
            l.published.settled = None;
            l.created = None;
            l.published.clone()
        })
    }

    /// Sends a join's or a renew's `request` and reports its answer to the keeper; sets the
    /// standing by how the attempt ended. `member`: what the join (or the take back of the
    /// record's lease) publishes.
    async fn keep(&self, keeper: &mut Keeper<Instant>, request: Keep, member: &mut Option<Member>) {
        let (result, what) = self.send(request, member.as_ref()).await;
        let answer = keeper.answered(Instant::now(), reply_of(&result));
        match (request, answer) {
            // Created: its lease next.
            (Keep::Create, None) => self.with(|l| l.created = Some(Instant::now())),
            // Our record lease lapsed and was taken: taken back with what we publish now.
            (Keep::Renew, None) => *member = Some(self.with(|l| l.published.clone())),
            (Keep::TakeLease, Some(Outcome::Joined)) => self.with(|l| {
                l.written = member.as_ref() == Some(&l.published);
                l.succession.own_record_held();
            }),
            // (A renew of a lapsed lease that nobody took succeeds too.)
            (Keep::Renew, Some(Outcome::Joined)) => {
                self.with(|l| l.succession.own_record_held());
                return;
            }
            (Keep::Renew, Some(Outcome::Rejoin)) => {
                tracing::warn!("this instance's member record is gone; joining again");
                self.ended(Outcome::Rejoin, None, what);
                return;
            }
            _ => {}
        }
        if let Some(outcome) = answer {
            self.ended(outcome, result.err(), what);
        }
    }

    /// Sends a join's or a renew's `request` (`member`: what the join publishes); its result,
    /// and what it does, for the log.
    async fn send(
        &self,
        request: Keep,
        member: Option<&Member>,
    ) -> (Result<(), StoreError>, &'static str) {
        let key = &self.key;
        let limit = self.limit();
        match request {
            Keep::DeleteOld { ours } => {
                let lease = ours.then_some(self.record_lease);
                let delete = self.store.delete_member(key, lease, None);
                let op = LeaseOp::MemberDelete;
                let deleted = timed(self.clock, &*self.observer, op, limit, delete).await;
                (deleted, "delete the old member record")
            }
            Keep::Create => {
                let published = || self.with(|l| l.published.clone());
                let member = member.cloned().unwrap_or_else(published);
                let create = self.store.create_member(key, &member);
                let created = timed(
                    self.clock,
                    &*self.observer,
                    LeaseOp::MemberCreate,
                    limit,
                    create,
                )
                .await;
                (created, "create the member record")
            }
            Keep::TakeLease => {
                let seconds = Pace::RECORD_LEASE.as_secs() as u8;
                let acquire = self.store.acquire_member(key, self.record_lease, seconds);
                let op = LeaseOp::MemberAcquire;
                let taken = timed(self.clock, &*self.observer, op, limit, acquire).await;
                (taken, "take the member record's lease")
            }
            Keep::Renew => {
                let renew = self.store.renew_member(key, self.record_lease);
                let op = LeaseOp::MemberRenew;
                let renewed = timed(self.clock, &*self.observer, op, limit, renew).await;
                (renewed, "renew the member record's lease")
            }
        }
    }

    async fn write(&self) {
        let member = self.with(|l| l.published.clone());
        let written = timed(
            self.clock,
            &*self.observer,
            LeaseOp::MemberWrite,
            self.limit(),
            self.store
                .write_member(&self.key, self.record_lease, &member),
        )
        .await;
        match written {
            Ok(()) => self.with(|l| l.written = l.published == member),
            Err(e) if e.failure() == Failure::Missing || e.failure() == Failure::LeaseLost => {
                // The renew sorts out what became of the record.
                tracing::debug!(error = %e, "could not write the member record");
            }
            Err(e) => tracing::debug!(error = %e, "could not write the member record; again soon"),
        }
    }

    /// Where an attempt that came to `outcome` leaves this instance's standing, and when the
    /// keeper tries again; `error` (the request's, if it failed) and `what` for the log.
    fn ended(&self, outcome: Outcome, error: Option<StoreError>, what: &str) -> Kept {
        match outcome {
            Outcome::Joined => self.set_standing(Standing::Joined),
            Outcome::Duplicate => self.set_standing(Standing::Duplicate),
            Outcome::Rejoin => self.set_standing(Standing::Joining),
            Outcome::Refused => {
                let e = error.map_or_else(String::new, |e| e.to_string());
                self.set_standing(Standing::Refused(format!(
                    "storage refused this instance's member record ({e}): member records need \
                     the credentials to list, create, write and delete blobs in the container \
                     (a SAS with sp=rwdlc on the container)"
                )));
            }
            Outcome::TakeBack | Outcome::Retry => {
                if let Some(e) = error {
                    tracing::debug!(error = %e, "could not {what}; trying again");
                }
            }
        }
        outcome.kept()
    }

    /// A leader deletes the records of members dead for over [`Pace::DEAD_RECORD_AGE`] (only if
    /// they did not change since the listing: a member that came back keeps its record).
    async fn tidy(&self) {
        let (leading, dead) = self.with(|l| (l.succession.leading, l.long_dead()));
        if !leading {
            return;
        }
        for (key, etag) in dead {
            let deleted = timed(
                self.clock,
                &*self.observer,
                LeaseOp::MemberDelete,
                self.limit(),
                self.store.delete_member(&key, None, Some(&etag)),
            )
            .await;
            match deleted {
                Ok(()) => {
                    tracing::info!(record = %key, "deleted the record of a member dead for over {}", human(Pace::DEAD_RECORD_AGE))
                }
                Err(e) => {
                    tracing::debug!(record = %key, error = %e, "did not delete a dead member's record")
                }
            }
        }
    }

    /// Deletes our record under its lease: no leader hands us the lease any more.
    async fn leave(&self) {
        if self.with(|l| l.succession.standing != Standing::Joined) {
            return;
        }
        let deleted = timed(
            self.clock,
            &*self.observer,
            LeaseOp::MemberDelete,
            self.limit(),
            self.store
                .delete_member(&self.key, Some(self.record_lease), None),
        )
        .await;
        match deleted {
            Ok(()) => tracing::info!("left the line of members"),
            Err(e) => tracing::warn!(
                error = %e,
                "could not delete this instance's member record; it counts as dead within {}",
                human(Pace::RECORD_LEASE)
            ),
        }
    }
}

/// What a request on this instance's record came to, as the core's keeper tells them apart.
fn reply_of(result: &Result<(), StoreError>) -> Reply {
    let Err(e) = result else {
        return Reply::Done;
    };
    if e.code() == Some("LeaseIdMissing") {
        return Reply::LeasedElsewhere;
    }
    match e.failure() {
        Failure::Missing => Reply::Missing,
        Failure::Held => Reply::Held,
        Failure::LeaseLost => Reply::Conflict,
        Failure::Denied => Reply::Denied,
        _ => Reply::Failed,
    }
}
