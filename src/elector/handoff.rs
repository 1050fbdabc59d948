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

use super::campaign::Term;
use super::keep::Tenure;
use super::members::{self, Line};
use super::wake::Reserved;
use super::{Elector, Handoff, LeaseOp, Observer, Surrender, TermEnd, timed};
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
        slots: (elector.slots != 1).then_some(elector.slots),
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
        false => super::members::watch_max(timing) + timing.longest_poll() + requests,
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

/// Handoffs on paused time: instances of one group on the in-memory store.
#[cfg(test)]
mod tests {
    use crate::elector::testing::{Instance, Lives, Shape, Wakes, joined, stop_all};
    use crate::store::memory::{Behaviour, Fate, MemoryStore, Network, Op, Trip};
    use crate::store::{LeaseId, StoreError};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    use tokio::time::{Instant, sleep};

    /// `a` leads with a task shaped `shape`; `b` and `c` follow, in that order, answered
    /// `b_answers_in` late; after 20 s the line is settled.
    async fn group(
        shape: Shape,
        b_answers_in: Duration,
    ) -> (Arc<MemoryStore>, Lives, Instance, Instance, Instance) {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let a = Instance::start_as(&store, "a", &lives, shape, |e| e);
        lives.nth(1).await;
        let b_shape = Shape {
            answers_in: b_answers_in,
            ..Shape::default()
        };
        let b = Instance::start_as(&store, "b", &lives, b_shape, |e| e);
        let c = Instance::start(&store, "c", &lives, None);
        joined(&store, "b").await;
        joined(&store, "c").await;
        sleep(Duration::from_secs(20)).await;
        (store, lives, a, b, c)
    }

    /// The requests of `op` the store got from `from` on.
    fn since(store: &MemoryStore, op: Op, from: Instant) -> Vec<Instant> {
        store.calls(op).into_iter().filter(|t| *t >= from).collect()
    }

    /// Wakes `b` once the store got a change (as `advertise` would, right after it).
    fn wake_on_change(store: &Arc<MemoryStore>, b: &Instance) -> tokio::task::JoinHandle<()> {
        let (store, waker) = (store.clone(), b.waker.clone());
        let from = Instant::now();
        tokio::spawn(async move {
            while since(&store, Op::Change, from).is_empty() {
                sleep(Duration::from_micros(100)).await;
            }
            let token = waker.token().expose().to_owned();
            assert_eq!(waker.wake(&token), crate::WakeAnswer::Accepted);
        })
    }

    /// On a stop, the listing and the notice go out while the task stops (500 ms here, less
    /// than `acquire_interval`: a listing older than that is taken again), and after its end
    /// the handoff is the change alone: the woken successor leads at once.
    #[tokio::test(start_paused = true)]
    async fn a_stop_lists_and_writes_the_notice_while_the_task_stops() {
        let shape = Shape {
            stops_in: Duration::from_millis(500),
            ..Shape::default()
        };
        let (store, lives, a, b, c) = group(shape, Duration::ZERO).await;
        let asked = Instant::now();
        let woken = wake_on_change(&store, &b);
        let stopping = tokio::spawn(a.stop());
        let gone = lives.gone(1).await;
        let next = lives.nth(2).await;
        stopping.await.unwrap();
        woken.await.unwrap();
        let after = |ts: Vec<Instant>| -> Vec<Duration> { ts.iter().map(|t| *t - asked).collect() };
        let (lists, notices) = (
            since(&store, Op::List, asked),
            since(&store, Op::Notice, asked),
        );
        let changes = since(&store, Op::Change, asked);
        println!(
            "after the stop request: listed at {:?}, notice at {:?}, task gone at {:?}, changed at {:?}, b led at {:?}",
            after(lists.clone()),
            after(notices.clone()),
            gone - asked,
            after(changes.clone()),
            next.start - asked
        );
        assert_eq!(next.identity, "b");
        assert_eq!(changes.len(), 1, "one handoff");
        assert!(changes[0] >= gone, "changed only after the task was gone");
        assert!(!lists.is_empty(), "listed");
        assert!(
            lists.iter().all(|t| *t < gone),
            "no listing after the task's end"
        );
        assert_eq!(notices.len(), 1, "one notice: {notices:?}");
        assert!(
            notices[0] < gone,
            "the notice went out while the task stopped"
        );
        assert!(next.start - gone < Duration::from_millis(5), "led at once");
        lives.assert_one_at_a_time();
        stop_all([b, c]).await;
    }

    /// A task that ends by itself: the notice to the last listing's successor goes out beside
    /// the listing (answered 100 ms late here), not after its answer; the change follows.
    #[tokio::test(start_paused = true)]
    async fn a_task_that_ends_by_itself_writes_the_notice_beside_the_listing() {
        let shape = Shape {
            runs: Some(Duration::from_secs(40)),
            ..Shape::default()
        };
        let (store, lives, a, b, c) = group(shape, Duration::ZERO).await;
        let slow = Duration::from_millis(100);
        store.set(Op::List, Behaviour::SlowAnswer(slow));
        let gone = lives.gone(1).await;
        let next = lives.nth(2).await;
        let list = since(&store, Op::List, gone)[0];
        let notice = since(&store, Op::Notice, gone)[0];
        let change = since(&store, Op::Change, gone)[0];
        println!(
            "after the task's end: listed at {:?}, notice at {:?}, changed at {:?} (listings answered {slow:?} late)",
            list - gone,
            notice - gone,
            change - gone
        );
        assert_eq!(next.identity, "b");
        assert!(
            notice < list + slow,
            "the notice did not wait for the listing's answer"
        );
        assert!(change >= list + slow, "the change waited for it");
        stop_all([a, b, c]).await;
    }

    /// `a` leads; `b` (on `b_client`) and `c` follow, in that order, after 20 s a settled line;
    /// `b` advertises a URL, and `a`'s wake-ups reach it in memory with what they carry passed
    /// through `carried`.
    async fn woken_group(
        b_client: impl FnOnce(&Arc<MemoryStore>) -> Arc<MemoryStore>,
        carried: impl Fn(Option<String>) -> Option<String> + Send + Sync + 'static,
    ) -> (Arc<MemoryStore>, Lives, Instance, Instance, Instance) {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let wakes = Wakes::default();
        let sender = wakes.sender(carried);
        let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_wake_sender(sender));
        lives.nth(1).await;
        let b = Instance::start_on(b_client(&store), "b", &lives, Shape::default(), |e| {
            e.with_advertise("http://b:9464")
        });
        wakes.serve("http://b:9464", &b.waker);
        let c = Instance::start(&store, "c", &lives, None);
        joined(&store, "b").await;
        joined(&store, "c").await;
        sleep(Duration::from_secs(20)).await;
        (store, lives, a, b, c)
    }

    /// Design section 17: the wake-up carries the epoch the notice reserved for `b` and the
    /// ETag it left; `b` writes that epoch beside its acquire. With its answers 50 ms late it
    /// leads one answer after the change (two without the reservation, three before).
    #[tokio::test(start_paused = true)]
    async fn a_woken_successor_writes_its_reserved_epoch_beside_its_acquire() {
        let late = Duration::from_millis(50);
        let (store, lives, a, b, c) = woken_group(|s| Arc::new(s.client(late)), |h| h).await;
        let first = lives.nth(1).await;
        a.stop().await;
        let change = *store.calls(Op::Change).last().unwrap();
        let next = lives.nth(2).await;
        let took = next.start - change;
        println!(
            "b led {took:?} after the change, its answers {late:?} late (bound: 1 answer, {:?})",
            late + late / 2
        );
        assert_eq!(next.identity, "b");
        assert_eq!(next.epoch, first.epoch + 1, "the epoch reserved");
        assert!(took >= late, "{took:?}");
        assert!(took < late + late / 2, "{took:?}: more than one answer");
        assert_eq!(store.holder().map(|h| h.identity), Some("b".to_owned()));
        assert_eq!(store.successor(), None, "the notice is gone");
        lives.assert_one_at_a_time();
        stop_all([b, c]).await;
    }

    /// A reservation that no longer matches the blob (its ETag is not the blob's: something
    /// wrote it since the notice) is refused, and `b` reads the blob and writes the next epoch
    /// as without one: three answers after the change, the same epoch.
    #[tokio::test(start_paused = true)]
    async fn a_stale_reservation_is_refused_and_the_epoch_read_again() {
        let late = Duration::from_millis(50);
        let stale =
            |h: Option<String>| h.map(|v| format!("{} \"0x0stale\"", v.split_once(' ').unwrap().0));
        let (store, lives, a, b, c) = woken_group(|s| Arc::new(s.client(late)), stale).await;
        let first = lives.nth(1).await;
        a.stop().await;
        let change = *store.calls(Op::Change).last().unwrap();
        let next = lives.nth(2).await;
        let took = next.start - change;
        println!(
            "b led {took:?} after the change, its answers {late:?} late (3 answers: write refused, read, write)"
        );
        assert_eq!(next.identity, "b");
        assert_eq!(next.epoch, first.epoch + 1);
        assert!(took >= 3 * late, "{took:?}: led on a refused write");
        assert!(took < 3 * late + late / 2, "{took:?}");
        lives.assert_one_at_a_time();
        stop_all([b, c]).await;
    }

    /// Each request of its client arrives `up` late once `on` is set (its answers come back at
    /// once).
    struct Arrives {
        on: AtomicBool,
        up: Duration,
    }

    impl Network for Arrives {
        fn trip(&self, _: Op, _: Option<LeaseId>) -> Trip {
            let up = match self.on.load(Ordering::SeqCst) {
                true => self.up,
                false => Duration::ZERO,
            };
            Trip {
                up,
                down: Duration::ZERO,
                fate: Fate::Deliver,
            }
        }
        fn applied(
            &self,
            _: Op,
            _: Option<LeaseId>,
            _: Instant,
            _: Result<(), &StoreError>,
            _: Option<u64>,
        ) {
        }
        fn answered(&self, _: Op, _: Option<LeaseId>, _: Instant, _: Result<(), &StoreError>) {}
    }

    /// A successor that loses the race to write: `b` is woken with its reserved epoch, but its
    /// acquire and epoch write reach storage 1.5 s later, after `a`'s confirm window (1 s for a
    /// member that answered its wake-up): `a` hands the lease on to `c`, conditional on the
    /// ETag its notice left, which `b` had not changed. `b`'s write, conditional on that same
    /// ETag, is then refused, and its acquire too: `c` leads with the next epoch, `b` never.
    #[tokio::test(start_paused = true)]
    async fn a_successor_that_loses_the_race_to_write_does_not_lead() {
        let network = Arc::new(Arrives {
            on: AtomicBool::new(false),
            up: Duration::from_millis(1500),
        });
        let b_network = network.clone();
        let (store, lives, a, b, c) =
            woken_group(move |s| Arc::new(s.client_on(b_network)), |h| h).await;
        let first = lives.nth(1).await;
        network.on.store(true, Ordering::SeqCst);
        a.stop().await;
        let next = lives.nth(2).await;
        let gone = lives.all()[0].gone.expect("a's task ended");
        let changes: Vec<Duration> = since(&store, Op::Change, gone)
            .iter()
            .map(|t| *t - gone)
            .collect();
        let b_writes: Vec<Duration> = since(&store, Op::WriteEpoch, gone)
            .iter()
            .map(|t| *t - gone)
            .collect();
        println!(
            "{} led with epoch {} ({} before); after a's task ended: changes at {changes:?}, epoch writes arrived at {b_writes:?}, {} led at {:?}",
            next.identity,
            next.epoch,
            first.epoch,
            next.identity,
            next.start - gone
        );
        assert_eq!(next.identity, "c", "b lost the race: {:?}", lives.all());
        assert_eq!(next.epoch, first.epoch + 1);
        assert_eq!(changes.len(), 2, "handed to b, then on to c");
        assert!(
            b_writes.iter().any(|t| *t > changes[1]),
            "b's write arrived after the hand-on: {b_writes:?}"
        );
        sleep(Duration::from_secs(3)).await;
        assert!(
            lives.all().iter().all(|l| l.identity != "b"),
            "b never led: {:?}",
            lives.all()
        );
        assert_eq!(store.holder().map(|h| h.identity), Some("c".to_owned()));
        lives.assert_one_at_a_time();
        network.on.store(false, Ordering::SeqCst);
        stop_all([b, c]).await;
    }

    /// A woken successor sends the read beside its acquire: with every answer 50 ms late, it
    /// leads two answers after the wake-up (acquire and read, then the epoch write), not three.
    #[tokio::test(start_paused = true)]
    async fn a_woken_successor_reads_beside_its_acquire() {
        let late = Duration::from_millis(50);
        let (store, lives, a, b, c) = group(Shape::default(), late).await;
        // The stop goes out just after one of b's polls has been answered: had a poll of its
        // own been in flight when the wake-up came, b would have sent the woken acquire only
        // after that poll's answer (1 run in 40 with the polls' jitter: 125-150 ms).
        let records = crate::store::GroupStore::list_members(&*store)
            .await
            .unwrap();
        let b_id = records
            .iter()
            .find(|r| r.member.identity == "b")
            .map(|r| r.member.acquires_with)
            .expect("b's record");
        let polls = |store: &MemoryStore| {
            store
                .ids(Op::Acquire)
                .iter()
                .filter(|id| **id == b_id)
                .count()
        };
        let polled = polls(&store);
        while polls(&store) == polled {
            sleep(Duration::from_millis(1)).await;
        }
        sleep(late + Duration::from_millis(1)).await;
        let woken = wake_on_change(&store, &b);
        a.stop().await;
        woken.await.unwrap();
        let change = *store.calls(Op::Change).last().unwrap();
        let next = lives.nth(2).await;
        let took = next.start - change;
        println!(
            "b led {took:?} after the change, its answers {late:?} late (bound: 2 answers, {:?})",
            2 * late + late / 2
        );
        assert_eq!(next.identity, "b");
        assert!(took >= 2 * late, "{took:?}");
        assert!(
            took < 2 * late + late / 2,
            "{took:?}: the read waited for the acquire"
        );
        lives.assert_one_at_a_time();
        stop_all([b, c]).await;
    }
}
