//! This instance's member record (docs/succession.md), kept by a task of its own ([`Membership`]):
//! joined under a lease of its own (its liveness), renewed, rewritten when what it says changes,
//! deleted when the instance leaves; the line listed every [`Pace::LIST_EVERY`](leasehold_core::Pace::LIST_EVERY) (the
//! leader and a poller every [`Pace::LEADER_LIST_EVERY`](leasehold_core::Pace::LEADER_LIST_EVERY)), and a leader deletes the records of members long
//! dead. When each is due, and what each answer means, is the core's (`leasehold_core::record`);
//! the task (members/keeper.rs) carries the requests out. Here: what the rest of the elector
//! tells the member and asks of it.

use super::keeper::{RecordKeeper, list};
use super::line::{Line, Standing};
use super::rows::{LineView, view};
use crate::clock::Clock;
use crate::config::Election;
use crate::elector::observe::{LeaseOp, Observer};
use crate::elector::request::timed;
use crate::store::{LeaseId, LeaseStore, Member, MemberKey, SlotRecord, StoreError};
use crate::timing::Timing;
use std::sync::{Arc, Mutex};
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// This instance as a member: its record, kept by a task of its own, and the line as last
/// listed. Dropping it stops the task (the record then expires within
/// [`Pace::RECORD_LEASE`](leasehold_core::Pace::RECORD_LEASE));
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
            if l.own.published.acquires_with != id {
                l.own.published.acquires_with = id;
                l.own.written = false;
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
                && l.succession.leader.as_deref() == Some(l.own.published.identity.as_str())
            {
                // No longer ours: whoever leads now is learnt from the blob, not assumed to be this
                // instance still (docs/safety.md, "Recovery from anything").
                l.succession.leader = None;
            }
            if let Some((epoch, acquired_at, lease)) = term {
                l.succession.leader = Some(l.own.published.identity.clone());
                l.succession.notice = None;
                l.holder = Some((
                    crate::store::Holder {
                        identity: l.own.published.identity.clone(),
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
            let me = l.own.published.identity.clone();
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
            l.own.published.standby_until = until;
            l.own.written = false;
            (l.succession.standing == Standing::Joined).then(|| l.own.published.clone())
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
            Ok(()) => self.with(|l| l.own.written = l.own.published == member),
            Err(e) => {
                tracing::warn!(error = %e, "could not mark this instance's member record; the record keeper tries again");
                self.poke.notify_one();
            }
        }
    }

    /// Back from a cooldown: the record no longer says standby.
    pub fn back_in_line(&self) {
        let changed = self.with(|l| {
            let changed = l.own.published.standby_until.take().is_some();
            l.own.written &= !changed;
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
