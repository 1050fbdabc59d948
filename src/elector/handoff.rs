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
use super::{Elector, Handoff, LeaseOp, Observer, Surrender, TermEnd, timed, wake};
use crate::clock;
use crate::store::{Holder, LeaseStore, MemberRecord, StoreError};
use crate::timing::Deadline;
use std::sync::Mutex;
use time::OffsetDateTime;
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
    let now = OffsetDateTime::now_utc();
    let taken =
        |r: &MemberRecord| slots > 1 && (r.member.slots != slots || l.holds_slot(r.identity()));
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
        store.write_notice(term.lease, holder, to),
    )
    .await
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
    let task = tokio::spawn(async move {
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
            TermEnd::Unhealthy { cooldown } => Some(OffsetDateTime::now_utc() + cooldown),
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
                    .change(term.lease, next.member.acquires_with),
            )
            .await;
        match changed {
            Ok(()) => {
                self.observer.handed_over(Handoff::HandedOver);
                if let Some(m) = &self.membership {
                    m.with(|l| {
                        if term.slot == 0 {
                            l.leader = Some(to.clone());
                            l.notice = Some(to.clone());
                        }
                        l.set_slot_holder(term.slot, Some(&to));
                    });
                }
                if let Some(url) = &next.member.advertise {
                    if self.wake_client.is_none() {
                        self.wake_client = wake::client();
                    }
                    if let Some(client) = &self.wake_client {
                        let sent = wake::send(client, url).await;
                        self.observer.wake_sent(sent);
                    }
                }
                Surrender::HandedTo(to)
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
