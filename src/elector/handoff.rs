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
use super::{Elector, Handoff, LeaseOp, Observer, Surrender, TermEnd, timed};
use crate::clock;
use crate::fmt::human;
use crate::store::{BlobState, Holder, LeaseStore, MemberRecord, Notice, StoreError};
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
    /// The member the notice named (written and confirmed).
    noticed: Option<String>,
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

/// Writes the handoff notice naming `to` under the term's lease.
async fn write_notice<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    term: &Term,
    holder: &Holder,
    to: &str,
    limit: Instant,
) -> Result<(), StoreError> {
    timed(
        observer,
        LeaseOp::Notice,
        limit,
        store.write_notice(term.lease, holder, &Notice::to(to), None),
    )
    .await
    .map(drop)
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
    guess: Option<String>,
    term: &Term,
    holder: &Holder,
    limit: Instant,
) -> (Result<(), StoreError>, Option<Result<String, StoreError>>) {
    tokio::join!(members::list(group, observer, line, limit), async {
        let to = guess?;
        Some(
            write_notice(store, observer, term, holder, &to, limit)
                .await
                .map(|()| to),
        )
    })
}

/// The successor in `line` as it was last listed ([`successor_in`]), by identity.
fn guess(line: &Mutex<Line>, identity: &str, slots: u32, to: Option<&str>) -> Option<String> {
    let l = line.lock().unwrap_or_else(|e| e.into_inner());
    successor_in(&l, identity, slots, to).map(|r| r.identity().to_owned())
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
        if crate::mutant::on(crate::mutant::Mutant::ChangeBeforeGone) {
            // The lease handed on while the body still stops.
            let next = {
                let l = line.lock().unwrap_or_else(|e| e.into_inner());
                successor_in(&l, &identity, slots, None)
            };
            if let Some(next) = next {
                let _ = store
                    .change(term.lease, next.member.acquires_with, None)
                    .await;
            }
        }
        Some(Prepared {
            listed_at: clock::now(),
            noticed: noticed.and_then(Result::ok),
        })
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
                Some(Ok(to)) => Some(to),
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
        if noticed.as_deref() != Some(to.as_str()) {
            match write_notice(term_store, observer, term, &holder, &to, limit()).await {
                Ok(()) => {}
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
                let woken = self.handed(term.slot, &next).await;
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
    async fn handed(&self, slot: u32, to: &MemberRecord) -> bool {
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
            .send(url, to.member.wake_token.as_ref())
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
            let notice = Notice {
                successor: next.identity().to_owned(),
                passed_over: passed_over.clone(),
            };
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
                    woken = self.handed(term.slot, &next).await;
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
    use crate::elector::testing::{Instance, Lives, Shape, joined, stop_all};
    use crate::store::memory::{Behaviour, MemoryStore, Op};
    use std::sync::Arc;
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

    /// A woken successor sends the read beside its acquire: with every answer 50 ms late, it
    /// leads two answers after the wake-up (acquire and read, then the epoch write), not three.
    #[tokio::test(start_paused = true)]
    async fn a_woken_successor_reads_beside_its_acquire() {
        let late = Duration::from_millis(50);
        let (store, lives, a, b, c) = group(Shape::default(), late).await;
        // The stop goes out just after one of b's polls has been answered: had a poll of its
        // own been in flight when the wake-up came, b would have sent the woken acquire only
        // after that poll's answer (1 run in 40 with the polls' jitter: 125-150 ms).
        let records = crate::store::LeaseStore::list_members(&*store)
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
