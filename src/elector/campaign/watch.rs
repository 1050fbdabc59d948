//! The watch of a member that is not next in line (design section 10): one read of the lease
//! blob every watch period; a new ETag (a new epoch, or a handoff notice) placed in the line
//! as last listed, and the members listed again only when that is what places this instance.

use super::slots::SlotWatch;
use super::state::{MISMATCH_RECHECK, Outcome};
use crate::clock;
use crate::elector::instance::Elector;
use crate::elector::members::RECORD_LEASE;
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::store::{ETag, Failure, LeaseState, LeaseStore, StoreError};
use tokio::time::Instant;

/// What a member that is not the successor saw of the lease blob so far.
#[derive(Debug, Default)]
pub(super) struct Watch {
    /// The ETag of the last read: a new one means a new epoch or a handoff notice.
    pub(super) etag: Option<ETag>,
    /// The last read found the lease held by nobody.
    pub(super) unleased: bool,
    /// The last handoff notice read: a new leader it named was handed the lease; one it did not
    /// name took it after its predecessor crashed or lost it.
    pub(super) notice: Option<String>,
    /// A listing put off until a crashed leader's record has surely expired.
    pub(super) list_at: Option<Instant>,
    /// With slots: the record of the member ahead.
    pub(super) slots: SlotWatch,
}

impl<S: LeaseStore> Elector<S> {
    /// One round of a member that is not the successor: one read of the lease blob. A new
    /// ETag (a new epoch, or a handoff notice) is placed in the line as last listed; the
    /// members are listed again only when that makes this instance the successor or names a
    /// member the line does not know, so that a change of leader costs one listing, not one
    /// per member. A lease held by nobody is read once more a polling period later (the
    /// successor should have taken it meanwhile), and then acquired: that fallback bounds a
    /// dead successor, or a line that is out of date, to about a lease duration and a watch
    /// period.
    pub(super) async fn watch_blob(&mut self, w: &mut Watch) -> Result<Outcome, StoreError> {
        let Some(m) = &self.membership else {
            return Ok(Outcome::Acquire);
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
                return Ok(Outcome::Acquire);
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
            return Ok(Outcome::Wait(MISMATCH_RECHECK));
        }
        if state.lease != LeaseState::Leased && state.recreated.is_some() {
            // Created again after a deletion, and free: whoever takes it waits out the
            // lock-delay holding it, so it is taken now, whatever the line says.
            w.unleased = false;
            return Ok(Outcome::Acquire);
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
                return Ok(Outcome::Acquire);
            }
            if w.unleased {
                w.unleased = false;
                tracing::info!(
                    "the lease has been held by nobody for a polling period; acquiring it"
                );
                return Ok(Outcome::Acquire);
            }
            w.unleased = true;
            return Ok(Outcome::Wait(self.timing.longest_poll()));
        }
        w.unleased = false;
        if w.etag.as_ref() == Some(&state.etag) {
            return Ok(Outcome::Look);
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
            return Ok(Outcome::Acquire);
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
        Ok(Outcome::Look)
    }
}
