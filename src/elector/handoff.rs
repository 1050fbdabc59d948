//! The handoff (design section 10): at a voluntary end of a term the lease goes to the
//! successor with Lease Blob `change`, once the body is gone (rule 7), after a handoff notice on
//! the blob that names it; then the successor is woken.
//!
//! Only the `change` must wait for the body's death. The listing that picks the successor is a
//! read, and the notice a metadata write under our own lease: both are harmless while the body
//! still runs (the notice only names who will be handed the lease; nobody can take it before the
//! change). So they are done ahead: when a stop is requested, while the child stops
//! ([`prepare`]); and when the body ended by itself, the notice to the successor of the last
//! listing goes out beside the new listing. After the body's death a handoff then costs the
//! `change` and the wake-up, which is what a handover with `advertise` waits for.

use super::campaign::count_to_record;
use super::instance::Elector;
use super::members::{self, Line};
use super::observe::{Handoff, LeaseOp, Observer};
use super::request::timed;
use super::term::{Tenure, Term, TermEnd};
use super::wake::Reserved;
use crate::clock;
use crate::fmt::human;
use crate::store::{
    BlobState, ETag, Holder, LeaseStore, MemberRecord, Notice, Reservation, StoreError,
};
use crate::timing::Deadline;
use std::sync::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// How a term gave its lease up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Surrender {
    /// Released (`true`: confirmed by storage).
    Released(bool),
    /// Handed to this member with Lease Blob `change`.
    HandedTo(String),
    /// Storage said it was no longer ours.
    Lost,
}

/// What was done ahead of a handoff while the body stopped.
#[derive(Debug)]
pub(super) struct Prepared {
    /// When the listing came back (the lease clock).
    listed_at: Instant,
    /// The notice written (and confirmed).
    noticed: Option<Noticed>,
}

/// A handoff notice on the blob (design sections 10, 17).
#[derive(Debug, Clone)]
pub(super) struct Noticed {
    /// The member it names.
    to: String,
    /// The epoch it reserved for that member, for the lease id it acquires with.
    reserved: Option<Reservation>,
    /// The blob's ETag after the notice.
    etag: ETag,
}

impl Noticed {
    /// Whether it names `next` and reserved the epoch for the lease id `next` acquires with.
    fn names(&self, next: &MemberRecord) -> bool {
        self.to == next.identity()
            && self
                .reserved
                .is_some_and(|r| r.lease == next.member.acquires_with)
    }

    /// What the wake-up to the member it names carries: the epoch it reserved and the ETag it
    /// left. With one slot only (a woken member with slots polls them all). (A notice that
    /// passes members over is never written here: the member would not learn of them, as it
    /// writes its epoch without reading the blob; that one's wake-up carries no epoch.)
    fn wake_hint(&self, slots: u32) -> Option<Reserved> {
        let r = self.reserved.filter(|_| slots == 1)?;
        Some(Reserved {
            epoch: r.epoch,
            etag: self.etag.clone(),
        })
    }
}

/// A handoff prepared in the background once a stop is requested.
pub(super) struct Preparing {
    stop: CancellationToken,
    task: JoinHandle<Option<Prepared>>,
}

impl Preparing {
    /// What was prepared: `None` when no stop was requested (the task is dropped: it had sent
    /// nothing) or the listing failed.
    async fn take(mut self, limit: Instant) -> Option<Prepared> {
        if !self.stop.is_cancelled() {
            self.task.abort();
            return None;
        }
        tokio::time::timeout_at(clock::timer_instant(limit), &mut self.task)
            .await
            .ok()
            .and_then(Result::ok)
            .flatten()
    }
}

impl Drop for Preparing {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The successor a term hands its lease to: the first live member in line other than
/// `identity`, not in a cooldown (with slots: holding no slot and counting as many slots as we
/// do). A preemption names the member it hands to (`to`) while that one is still a live member.
fn successor_in(l: &Line, identity: &str, slots: u32, to: Option<&str>) -> Option<MemberRecord> {
    let now = crate::clock::wall();
    let taken = |r: &MemberRecord| {
        l.is_passed_over(r.identity())
            || slots > 1 && (r.member.slots != slots || l.holds_slot(r.identity()))
    };
    let preferred = to.and_then(|to| {
        members::successor(&l.members, Some(identity), now, |r| {
            taken(r) || r.identity() != to
        })
    });
    preferred
        .or_else(|| members::successor(&l.members, Some(identity), now, taken))
        .cloned()
}

/// The holder metadata a term's handoff notice is written with.
fn holder_of<S: LeaseStore>(elector: &Elector<S>, term: &Term) -> Holder {
    Holder {
        identity: elector.identity.clone(),
        epoch: term.epoch,
        acquired_at: term.acquired_at,
        lease: Some(term.lease),
        slots: count_to_record(elector.slots),
    }
}

/// The notice that hands the lease to `to`: it names `to` and reserves the next epoch for the
/// lease id `to` acquires with (design section 17), passing over `passed_over`.
fn notice_to(term: &Term, to: &MemberRecord, passed_over: Vec<String>) -> Notice {
    Notice {
        successor: to.identity().to_owned(),
        passed_over,
        reserved: term.epoch.checked_add(1).map(|epoch| Reservation {
            epoch,
            lease: to.member.acquires_with,
        }),
    }
}

/// Writes the handoff notice naming `to` under the term's lease.
async fn write_notice<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    term: &Term,
    holder: &Holder,
    to: &MemberRecord,
    limit: Instant,
) -> Result<Noticed, StoreError> {
    let notice = notice_to(term, to, Vec::new());
    timed(
        observer,
        LeaseOp::Notice,
        limit,
        store.write_notice(term.lease, holder, &notice, None),
    )
    .await
    .map(|etag| Noticed {
        to: notice.successor,
        reserved: notice.reserved,
        etag,
    })
}

/// Lists the line into `line` and, beside the listing, writes the notice naming `guess` (the
/// successor of the last listing, most likely still the one) under the term's lease. Returns
/// the listing's result, and the member the notice named once written (`None`: no guess).
#[allow(clippy::too_many_arguments)]
async fn list_and_notice<S: LeaseStore>(
    group: &S,
    store: &S,
    observer: &dyn Observer,
    line: &Mutex<Line>,
    guess: Option<MemberRecord>,
    term: &Term,
    holder: &Holder,
    limit: Instant,
) -> (Result<(), StoreError>, Option<Result<Noticed, StoreError>>) {
    tokio::join!(members::list(group, observer, line, limit), async {
        let to = guess?;
        Some(write_notice(store, observer, term, holder, &to, limit).await)
    })
}

/// The successor in `line` as it was last listed ([`successor_in`]).
fn guess(line: &Mutex<Line>, identity: &str, slots: u32, to: Option<&str>) -> Option<MemberRecord> {
    let l = line.lock().unwrap_or_else(|e| e.into_inner());
    successor_in(&l, identity, slots, to)
}

/// Starts preparing the handoff of `term`: once `stop` is cancelled (while the body stops),
/// lists the line and writes the notice ([`list_and_notice`]), while the keeper still holds the
/// lease (`tenure`): nothing goes out under it after our kill deadline, when the lease may be
/// someone else's. `None` for an instance without a line.
pub(super) fn prepare<S: LeaseStore>(
    elector: &Elector<S>,
    term: &Term,
    tenure: watch::Receiver<Tenure>,
    stop: &CancellationToken,
) -> Option<Preparing> {
    let m = elector.membership.as_ref()?;
    let line = m.line.clone();
    let group = elector.store.clone();
    let store = elector.store_of(term.slot).clone();
    let observer = elector.observer.clone();
    let (identity, slots) = (elector.identity.clone(), elector.slots);
    let holder = holder_of(elector, term);
    let term = term.clone();
    let timeout = elector.timing.request_timeout();
    let stop = stop.clone();
    let requested = stop.clone();
    let task = crate::spawn::spawn(async move {
        requested.cancelled().await;
        let Tenure::Held(deadline) = *tenure.borrow() else {
            return None;
        };
        let limit = (clock::now() + timeout).min(deadline.kill_at);
        let guess = guess(&line, &identity, slots, None);
        let (listed, noticed) = list_and_notice(
            &*group, &*store, &*observer, &line, guess, &term, &holder, limit,
        )
        .await;
        listed.ok()?;
        let listed_at = clock::now();
        let mut noticed = noticed.and_then(Result::ok);
        let next = {
            let l = line.lock().unwrap_or_else(|e| e.into_inner());
            successor_in(&l, &identity, slots, None)
        };
        if crate::mutant::on(crate::mutant::Mutant::ChangeBeforeGone) {
            // The lease handed on while the body still stops.
            if let Some(next) = &next {
                let _ = store
                    .change(term.lease, next.member.acquires_with, None)
                    .await;
            }
        }
        // The listing names another successor than the guess (or the line knew none: a member
        // that joined since the last listing): its notice too goes out while the body stops.
        if let Some(next) = next.filter(|n| !noticed.as_ref().is_some_and(|w| w.names(n))) {
            noticed = write_notice(&*store, &*observer, &term, &holder, &next, limit)
                .await
                .ok();
        }
        Some(Prepared { listed_at, noticed })
    });
    Some(Preparing { stop, task })
}

impl<S: LeaseStore> Elector<S> {
    /// The handoff: the body is gone; while the lease is still ours (before the kill deadline
    /// `t_s + L - M`), list the members, and change the lease id to that of the successor
    /// ([`successor_in`]), after a handoff notice on the blob that names it; then wake it. From
    /// the change on, our lease id is dead: nothing is sent with it any more, but the release
    /// when the change got no answer (if it landed, that release is refused; if not, it frees
    /// the lease). No successor, or no listing: release. A listing taken while the body stopped
    /// (`prepared`) serves if it is younger than `acquire_interval`, and its notice if it named
    /// the same successor; otherwise the notice to the last listing's successor goes out beside
    /// the new listing.
    pub(super) async fn hand_over(
        &mut self,
        term: &Term,
        end: TermEnd,
        deadline: &Deadline,
        to: Option<&str>,
        prepared: Option<Preparing>,
    ) -> Surrender {
        let kill_at = deadline.kill_at;
        let timeout = self.timing.request_timeout();
        let limit = move || (clock::now() + timeout).min(kill_at);
        if self.membership.is_none() || clock::now() >= kill_at {
            drop(prepared);
            self.observer.handed_over(Handoff::Released);
            return Surrender::Released(self.release_on(term.slot, term.lease).await);
        }
        let prepared = match prepared {
            Some(p) => p.take(limit()).await,
            None => None,
        }
        .filter(|p| {
            clock::now().saturating_duration_since(p.listed_at) < self.timing.acquire_interval
        });
        let standby = match end {
            TermEnd::Unhealthy { cooldown } => Some(crate::clock::wall() + cooldown),
            _ => None,
        };
        let (identity, slots) = (self.identity.clone(), self.slots);
        let holder = holder_of(self, term);
        let (store, observer) = (&*self.store, &*self.observer);
        let term_store = &**self.store_of(term.slot);
        let Some(m) = &self.membership else {
            unreachable!("checked above")
        };
        let mut noticed = prepared.as_ref().and_then(|p| p.noticed.clone());
        if prepared.is_none() || standby.is_some() {
            // The successor of the last listing is most likely still the one: its notice goes
            // out beside the listing that confirms it. A member in a cooldown says so before
            // anyone could hand it the lease back.
            let guess = guess(&m.line, &identity, slots, to);
            let ((listed, written), ()) = tokio::join!(
                list_and_notice(
                    store,
                    term_store,
                    observer,
                    &m.line,
                    guess,
                    term,
                    &holder,
                    limit(),
                ),
                async {
                    if standby.is_some() {
                        m.standby(store, observer, standby, limit()).await;
                    }
                }
            );
            if let Err(e) = listed {
                tracing::warn!(error = %e, "cannot list the members to hand the lease over; releasing it");
                self.observer.handed_over(Handoff::Released);
                return Surrender::Released(self.release_on(term.slot, term.lease).await);
            }
            noticed = match written {
                Some(Ok(noticed)) => Some(noticed),
                Some(Err(e)) if e.loses_lease() => {
                    tracing::warn!(error = %e, "the lease is no longer ours; nothing to hand over");
                    self.observer.handed_over(Handoff::Lost);
                    return Surrender::Lost;
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "could not write the handoff notice beside the listing");
                    None
                }
                None => None,
            };
        }
        let Some(next) = m.with(|l| successor_in(l, &identity, slots, to)) else {
            tracing::info!("no other live member to hand the lease to; releasing it");
            self.observer.handed_over(Handoff::NoSuccessor);
            return Surrender::Released(self.release_on(term.slot, term.lease).await);
        };
        let to = next.identity().to_owned();
        if !noticed.as_ref().is_some_and(|n| n.names(&next)) {
            noticed = None;
            match write_notice(term_store, observer, term, &holder, &next, limit()).await {
                Ok(written) => noticed = Some(written),
                Err(e) if e.loses_lease() => {
                    tracing::warn!(error = %e, "the lease is no longer ours; nothing to hand over");
                    self.observer.handed_over(Handoff::Lost);
                    return Surrender::Lost;
                }
                Err(e) => {
                    tracing::warn!(error = %e, "could not write the handoff notice; handing over anyway")
                }
            }
        }
        let changed = self
            .call(
                LeaseOp::Change,
                limit(),
                self.store_of(term.slot)
                    .change(term.lease, next.member.acquires_with, None),
            )
            .await;
        match changed {
            Ok(()) => {
                self.observer.handed_over(Handoff::HandedOver);
                if matches!(end, TermEnd::Shutdown | TermEnd::Exit(_))
                    && let Some(m) = &self.membership
                {
                    m.depart();
                }
                let reserved = noticed.and_then(|n| n.wake_hint(slots));
                let woken = self.handed(term.slot, &next, reserved.as_ref()).await;
                self.confirm(term, &holder, next, woken).await
            }
            Err(e) if e.loses_lease() => {
                tracing::warn!(error = %e, "the lease is no longer ours; nothing to hand over");
                self.observer.handed_over(Handoff::Lost);
                Surrender::Lost
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    successor = %to,
                    "no answer to the handoff; releasing the lease with this instance's own id (refused if the handoff landed)"
                );
                self.observer.handed_over(Handoff::Fallback);
                Surrender::Released(self.release_on(term.slot, term.lease).await)
            }
        }
    }
}

/// How long a leader that handed its lease over waits for the successor's epoch before it hands
/// the lease on (design section 16), by how the successor learns of it: a member that answered
/// its wake-up tries at once (a second); the member first in line polls, so it finds the
/// handoff within a polling period; a member the lease is handed on to after another did not
/// take it only watches the blob, and reads the notice naming it within a watch period. Each
/// then needs its acquire and its epoch write.
pub(crate) fn confirm_window(
    timing: &crate::timing::Timing,
    woken: bool,
    first: bool,
) -> std::time::Duration {
    let requests = std::time::Duration::from_millis(300);
    if woken {
        return std::time::Duration::from_secs(1);
    }
    match first {
        true => timing.longest_poll() + requests,
        false => super::pace::watch_max(timing) + timing.longest_poll() + requests,
    }
}

impl<S: LeaseStore> Elector<S> {
    /// The lease of `slot` was changed to `to`'s id: this instance's line says so, and `to` is
    /// woken.
    /// With `reserved`, the wake-up carries the epoch the notice reserved for `to`.
    async fn handed(&self, slot: u32, to: &MemberRecord, reserved: Option<&Reserved>) -> bool {
        tracing::info!(
            successor = to.identity(),
            "handed the lease over; waiting for its epoch"
        );
        self.observer.handed_to(to.identity(), slot);
        if let Some(m) = &self.membership {
            m.with(|l| {
                if slot == 0 {
                    l.leader = Some(to.identity().to_owned());
                    l.notice = Some(to.identity().to_owned());
                }
                l.set_slot_holder(slot, Some(to.identity()));
            });
        }
        let Some(url) = &to.member.advertise else {
            return false;
        };
        let sent = self
            .wake_sender
            .send(url, to.member.wake_token.as_ref(), reserved)
            .await;
        self.observer.wake_sent(sent);
        sent == super::wake::WakeSent::Ok
    }

    /// A handoff is confirmed (design section 16): the lease was changed to `to`'s id; within
    /// the [`confirm_window`] `to` must write its epoch on the blob. If it does not (it died
    /// just before, or never was a process: a forged record), the lease is handed on to the
    /// next member in line, `to` passed over, with a notice and a `change` both conditional on
    /// the blob's ETag being what it was: `to`'s epoch write changes the ETag and is itself
    /// conditional on the lease, so either `to` leads or the next one does, never both. With
    /// nobody left, the lease is released, on the same condition.
    async fn confirm(
        &self,
        term: &Term,
        holder: &Holder,
        mut to: MemberRecord,
        mut woken: bool,
    ) -> Surrender {
        let store = self.store_of(term.slot).clone();
        let mut passed_over: Vec<String> = Vec::new();
        loop {
            let window = confirm_window(&self.timing, woken, passed_over.is_empty());
            let ends = clock::now() + window;
            let mut pause = std::time::Duration::from_millis(20);
            let mut last = None;
            // Read at 20, 60, 140 ms, ... until the window ends.
            loop {
                let wait = pause.min(ends.saturating_duration_since(clock::now()));
                tokio::time::sleep(wait).await;
                pause = (pause * 2).min(std::time::Duration::from_millis(400));
                let limit = clock::now() + self.timing.request_timeout();
                match self.call(LeaseOp::Read, limit, store.read()).await {
                    Ok(state) if taken(&state, to.identity(), term.epoch) => {
                        return Surrender::HandedTo(to.identity().to_owned());
                    }
                    Ok(state) => last = Some(state),
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot read the blob to confirm the handoff")
                    }
                }
                if clock::now() >= ends {
                    break;
                }
            }
            // Not taken. Handed on only while the blob is as this instance's handoff left it:
            // its own holder metadata, this term's epoch. Anything else (no read of it, a newer
            // leader's epoch or notice: this instance may have been paused past the lease)
            // means it is not ours to move; the lease expires on its own.
            let ours = |state: &BlobState| {
                state
                    .holder
                    .as_ref()
                    .is_some_and(|h| h.identity == self.identity && h.epoch == term.epoch)
            };
            let Some(state) = last.filter(ours) else {
                return Surrender::HandedTo(to.identity().to_owned());
            };
            tracing::warn!(
                successor = to.identity(),
                "the member handed the lease did not take it within {}; passing it over",
                human(window)
            );
            passed_over.push(to.identity().to_owned());
            let next = self.membership.as_ref().and_then(|m| {
                m.with(|l| {
                    l.pass_over(to.identity());
                    successor_in(l, &self.identity, self.slots, None)
                })
            });
            let limit = || clock::now() + self.timing.request_timeout();
            let Some(next) = next else {
                tracing::info!("nobody else to hand the lease to; releasing it");
                self.observer.handed_over(Handoff::NoSuccessor);
                let released = self
                    .call(
                        LeaseOp::Release,
                        limit(),
                        store.release_if(to.member.acquires_with, &state.etag),
                    )
                    .await;
                return Surrender::Released(released.is_ok());
            };
            let notice = notice_to(term, &next, passed_over.clone());
            // Under `to`'s lease id, which is the active one: only if nothing was written since.
            let noticed = self
                .call(
                    LeaseOp::Notice,
                    limit(),
                    store.write_notice(to.member.acquires_with, holder, &notice, Some(&state.etag)),
                )
                .await;
            let handed_on = match noticed {
                Ok(etag) => {
                    self.call(
                        LeaseOp::Change,
                        limit(),
                        store.change(
                            to.member.acquires_with,
                            next.member.acquires_with,
                            Some(&etag),
                        ),
                    )
                    .await
                }
                Err(e) => Err(e),
            };
            match handed_on {
                Ok(()) => {
                    tracing::info!(successor = next.identity(), "handed the lease on");
                    // No epoch in the wake-up: the member must read the members passed over.
                    woken = self.handed(term.slot, &next, None).await;
                    to = next;
                }
                Err(e) => {
                    // Refused: the blob changed (the successor wrote its epoch at the last
                    // moment), or the lease is someone else's. Either way, not ours to move.
                    tracing::debug!(error = %e, "the lease was not handed on");
                    return Surrender::HandedTo(to.identity().to_owned());
                }
            }
        }
    }
}

/// Whether the blob shows that `to` took the lease: it wrote its epoch, above ours.
fn taken(state: &BlobState, to: &str, ours: u64) -> bool {
    state
        .holder
        .as_ref()
        .is_some_and(|h| h.identity == to && h.epoch > ours)
}
