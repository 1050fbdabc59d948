//! After the `change` of a handoff (design sections 16 and 17): the wake-up, and the
//! confirmation that the member handed the lease took it (its epoch on the blob) or, when it did
//! not within its window, the lease handed on to the next member under conditions that let
//! only one of them lead. Also the handoff without a notice (a body that ended by itself, or
//! with one slot a stop), which reads nothing before its `change`: the read of its successor's
//! record comes with the confirmation's first read.

use super::handoff::{Surrender, notice_to, still_in_place, still_successor, successor_in};
use super::instance::Elector;
use super::observe::{Handoff, LeaseOp};
use super::request::timed;
use super::term::{Term, TermEnd};
use super::wake::{Reserved, WakeSent};
use crate::clock;
use crate::fmt::human;
use crate::store::{BlobState, Failure, Holder, LeaseStore, MemberRecord, StoreError};
use leasehold_core::Pace;
use tokio::time::Instant;

impl<S: LeaseStore> Elector<S> {
    /// The handoff of a term whose body ended by itself, or (with one slot) was stopped
    /// ([`Elector::hand_over`]): no notice, and no read first, so only the `change` (to `guess`,
    /// the successor as last listed, at the latest just after the term began:
    /// `Pace::TERM_START_QUIET` in members/record.rs) stands between the body's death and the wake-up.
    /// The wake-up reserves the next epoch with the ETag of the term's own epoch write (the
    /// blob's, unless something wrote it since: then the successor's epoch write is refused
    /// and it reads the blob, as without a reservation). The read of `guess`'s record comes
    /// after, with the confirm's first read of the blob, off the handover's path: one that
    /// shows `guess` no longer the successor cuts the confirm window short ([`Elector::confirm`]).
    pub(super) async fn hand_over_unannounced(
        &self,
        term: &Term,
        end: TermEnd,
        holder: &Holder,
        guess: MemberRecord,
        kill_at: Instant,
    ) -> Surrender {
        let limit = (clock::now() + self.timing.request_timeout()).min(kill_at);
        let changed = self
            .call(
                LeaseOp::Change,
                limit,
                self.store_of(term.slot)
                    .change(term.lease, guess.member.acquires_with, None),
            )
            .await;
        match changed {
            Ok(()) => {}
            Err(e) if e.loses_lease() => {
                tracing::warn!(error = %e, "the lease is no longer ours; nothing to hand over");
                self.observer.handed_over(Handoff::Lost);
                return Surrender::Lost;
            }
            Err(e) => {
                tracing::warn!(
                    error = %e,
                    successor = guess.identity(),
                    "no answer to the handoff; releasing the lease with this instance's own id (refused if the handoff landed)"
                );
                self.observer.handed_over(Handoff::Fallback);
                return Surrender::Released(self.release_on(term.slot, term.lease).await);
            }
        }
        self.observer.handed_over(Handoff::HandedOver);
        let reserved = self.reserve_next(term);
        let woke = self.handed(term.slot, &guess, reserved.as_ref()).await;
        self.confirm(term, holder, guess, woke, true, &end).await
    }

    /// A leader that stops departs ([`Membership::depart`](super::members::Membership::depart))
    /// so that members listing while it confirms the handoff, the new leader first, do not
    /// count it in line. On a stop request whose body took longer than `Pace::DEPART_AFTER` to stop
    /// that was done while it stopped (`prepare` in handoff.rs; this is then a no-op); a body
    /// gone sooner, or that ended with `on_exit = "exit"` (no warning), departs here, with the
    /// confirmation's first read, so that the deletion of its record does not queue before
    /// the successor's acquire.
    fn depart_after(&self, end: &TermEnd) {
        if matches!(end, TermEnd::Shutdown | TermEnd::Exit(_))
            && let Some(m) = &self.membership
        {
            m.depart();
        }
    }

    /// What a wake-up after a handoff without a notice carries: the next epoch, with the ETag
    /// the term's epoch write left. With one slot only (a woken member with slots polls them
    /// all).
    fn reserve_next(&self, term: &Term) -> Option<Reserved> {
        let etag = term.etag.clone().filter(|_| self.slots == 1)?;
        Some(Reserved {
            epoch: term.epoch.checked_add(1)?,
            etag,
        })
    }

    /// The confirm's look at the record of `to`, the member handed the lease without a notice
    /// ([`Elector::hand_over_unannounced`]): what `read` says of it.
    fn judge(&self, to: &MemberRecord, read: Result<Option<MemberRecord>, StoreError>) -> Judged {
        let Some(m) = &self.membership else {
            return Judged::Stands;
        };
        let (identity, slots) = (self.identity.as_str(), self.slots);
        match read {
            Ok(Some(fresh)) if m.with(|l| still_successor(l, to, &fresh, identity, slots)) => {
                m.with(|l| l.refresh(fresh));
                Judged::Stands
            }
            Ok(Some(fresh))
                if slots == 1 && m.with(|l| still_in_place(l, to, &fresh, identity, slots)) =>
            {
                Judged::Rekeyed(Box::new(fresh))
            }
            Ok(Some(fresh)) if fresh.key == to.key && fresh.joined != to.joined => {
                Judged::Rejoined(Box::new(fresh))
            }
            Ok(_) => Judged::Gone,
            Err(e) if e.failure() == Failure::Missing => Judged::Gone,
            // No answer: the listing's record stands, and the window catches a member gone.
            Err(e) => {
                tracing::debug!(error = %e, "could not read the successor's record");
                Judged::Stands
            }
        }
    }
}

/// What the wake-up after a `change` found at the successor's URL ([`Elector::handed`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Woke {
    /// It was accepted: the member tries its acquire now.
    Yes,
    /// No URL, no answer, or a wake-up came first (429): the member finds the handoff by
    /// itself.
    No,
    /// Nothing listens at its URL (the connection refused or reset): a member that died, or
    /// one alive whose URL is wrong. It has a first hop's window at most, whatever the hop: a
    /// live one polls, a dead one's record may stand for a record lease yet (rule (g) of
    /// docs/safety.md).
    Nobody,
    /// Refused: whoever answers at its URL does not hold the member's wake token (another
    /// process: not the member its record names).
    Stranger,
}

impl Woke {
    /// Whether the member took the wake-up: it tries its acquire now.
    pub(super) fn accepted(self) -> bool {
        self == Self::Yes
    }
}

/// What a read of a successor's record says of a handoff to it ([`Elector::judge`]).
enum Judged {
    /// Still the successor (or the read got no answer).
    Stands,
    /// Still the successor, but acquiring with another lease id than the one the lease was
    /// changed to: it led since it was listed (or the term began), and published a new one.
    Rekeyed(Box<MemberRecord>),
    /// It rejoined since it was listed: a new record (a new instance, at the back of its
    /// priority), so the line is stale. The member is not passed over; the members are listed.
    Rejoined(Box<MemberRecord>),
    /// No longer the successor: it left, or is no candidate now.
    Gone,
}

/// How long a leader that handed its lease over waits for the successor's epoch before it hands
/// the lease on (docs/succession.md), by how the successor learns of it: a member that answered
/// its wake-up tries at once; the member first in line polls, so it finds the handoff within a
/// polling period; a member the lease is handed on to after another did not take it only
/// watches the blob, and reads the notice naming it within a watch period. Each then needs its
/// acquire and its epoch write. The rows are the core's ([`Pace::confirm_window`]).
pub(crate) fn confirm_window(
    timing: &crate::timing::Timing,
    woken: bool,
    first: bool,
) -> std::time::Duration {
    Pace::new(timing).confirm_window(woken, first)
}

impl<S: LeaseStore> Elector<S> {
    /// The lease of `slot` was changed to `to`'s id: this instance's line says so, and `to` is
    /// woken.
    /// With `reserved`, the wake-up carries the epoch reserved for `to`.
    pub(super) async fn handed(
        &self,
        slot: u32,
        to: &MemberRecord,
        reserved: Option<&Reserved>,
    ) -> Woke {
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
            return Woke::No;
        };
        let sent = self
            .wake_sender
            .send(url, to.member.wake_token.as_ref(), reserved)
            .await;
        self.observer.wake_sent(sent);
        match sent {
            WakeSent::Ok => Woke::Yes,
            WakeSent::Later | WakeSent::Failed => Woke::No,
            WakeSent::Refused | WakeSent::Unreachable
                if crate::mutant::on(crate::mutant::Mutant::HopWaitsOutRefusal) =>
            {
                Woke::No
            }
            WakeSent::Unreachable => Woke::Nobody,
            WakeSent::Refused => Woke::Stranger,
        }
    }

    /// A handoff is confirmed (design section 16): the lease was changed to `to`'s id; within
    /// the [`confirm_window`] `to` must write its epoch on the blob. If it does not (it died
    /// just before, or never was a process: a forged record), the lease is handed on to the
    /// next member in line, `to` passed over, with a notice and a `change` both conditional on
    /// the blob's ETag being what it was: `to`'s epoch write changes the ETag and is itself
    /// conditional on the lease, so either `to` leads or the next one does, never both. When
    /// the line names nobody else, the members are listed once (a member that joined since the
    /// leader's last listing is not in it); with nobody left, the lease is released, on the same
    /// condition.
    ///
    /// With `check` (a handoff without a notice, whose successor was not read first), `to`'s
    /// record is read beside the first read of the blob ([`Elector::judge`]): no longer the
    /// successor, `to` is passed over at once; the same member with a new lease id is handed
    /// the lease again under that id, and woken again; the same member with a new record (it
    /// rejoined) is not passed over, but the line is stale: the members are listed, and the
    /// lease handed on to the listing's successor (the line as it is if the listing fails).
    ///
    /// A term that ended this instance (`end`: a stop, or `on_exit = "exit"`) departs with
    /// the first read, if it has not yet ([`Elector::depart_after`]).
    ///
    /// A wake-up refused ([`Woke::Stranger`]: another token, or not leasehold's answer) means
    /// the process at `to`'s URL is not the one its record names (a member killed, and a new
    /// one on its port, kept out of line while the dead one's record lease runs), so nobody
    /// acquires with that lease id: its record is read as with `check`, and unless it shows a
    /// new lease id, `to` is passed over at once instead of after its window. A wake-up that
    /// nothing answers ([`Woke::Nobody`]) gives `to` a first hop's window, whatever the hop: a
    /// live member polls within it, a dead one is passed over at its end (rule (g)). A member
    /// the lease was handed on to that was not woken whose record is gone is passed over at
    /// once.
    pub(super) async fn confirm(
        &self,
        term: &Term,
        holder: &Holder,
        mut to: MemberRecord,
        mut woke: Woke,
        mut check: bool,
        end: &TermEnd,
    ) -> Surrender {
        let store = self.store_of(term.slot).clone();
        let mut passed_over: Vec<String> = Vec::new();
        let mut relisted = false;
        // The member last handed the lease rejoined since it was listed (a new record).
        let mut rejoined = false;
        // Its record is gone: it left the line (a graceful stop deletes the record), which is
        // no cause for a warning.
        let mut left = false;
        loop {
            let woken = woke == Woke::Yes;
            check |= matches!(woke, Woke::Stranger | Woke::Nobody);
            let first = passed_over.is_empty() || woke == Woke::Nobody;
            let window = confirm_window(&self.timing, woken, first);
            let began = clock::now();
            let mut ends = began + window;
            let mut pause = Pace::CONFIRM_READ_LEAST;
            let mut last = None;
            // Read at 20, 60, 140 ms, ... until the window ends.
            loop {
                let wait = pause.min(ends.saturating_duration_since(clock::now()));
                tokio::time::sleep(wait).await;
                self.depart_after(end);
                pause = (pause * 2).min(Pace::CONFIRM_READ_LONGEST);
                let limit = clock::now() + self.timing.request_timeout();
                let record = async {
                    match std::mem::take(&mut check) {
                        true => Some(
                            timed(
                                &*self.observer,
                                LeaseOp::MemberRead,
                                limit,
                                self.store.read_record(&to.key),
                            )
                            .await,
                        ),
                        false => None,
                    }
                };
                let (read, record) =
                    tokio::join!(self.call(LeaseOp::Read, limit, store.read()), record);
                match read {
                    Ok(state) if taken(&state, to.identity(), term.epoch) => {
                        if woke == Woke::Nobody {
                            // It polled; a wake-up would have saved it that poll's wait.
                            tracing::warn!(
                                successor = to.identity(),
                                url = to.member.advertise.as_deref().unwrap_or_default(),
                                "the successor took the lease at its own poll: nothing listens \
                                 at its advertised URL (check its [election].advertise)"
                            );
                        }
                        return Surrender::HandedTo(to.identity().to_owned());
                    }
                    Ok(state) => last = Some(state),
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot read the blob to confirm the handoff")
                    }
                }
                match record.map(|r| self.judge(&to, r)) {
                    None => {}
                    Some(Judged::Stands) if woke == Woke::Stranger => {
                        tracing::info!(
                            successor = to.identity(),
                            "another process answers at the URL of the member handed the lease; passing it over"
                        );
                        ends = clock::now();
                    }
                    Some(Judged::Stands) => {}
                    Some(Judged::Rejoined(fresh)) => {
                        tracing::info!(
                            successor = to.identity(),
                            "the member handed the lease rejoined the line since it was listed"
                        );
                        if let Some(m) = &self.membership {
                            m.with(|l| l.refresh(*fresh));
                        }
                        rejoined = true;
                        ends = clock::now();
                    }
                    Some(Judged::Gone) => {
                        left = true;
                        ends = clock::now();
                    }
                    Some(Judged::Rekeyed(fresh)) => {
                        // Nobody acquires with the id the lease has now: it goes to the new one.
                        let limit = clock::now() + self.timing.request_timeout();
                        let changed =
                            store.change(to.member.acquires_with, fresh.member.acquires_with, None);
                        match self.call(LeaseOp::Change, limit, changed).await {
                            Ok(()) => {
                                tracing::info!(
                                    successor = fresh.identity(),
                                    "handed the lease to the new lease id of the same successor"
                                );
                                if let Some(m) = &self.membership {
                                    m.with(|l| l.refresh((*fresh).clone()));
                                }
                                to = *fresh;
                                let reserved = self.reserve_next(term);
                                woke = self.handed(term.slot, &to, reserved.as_ref()).await;
                                check = matches!(woke, Woke::Stranger | Woke::Nobody);
                                let window = confirm_window(
                                    &self.timing,
                                    woke == Woke::Yes,
                                    passed_over.is_empty() || woke == Woke::Nobody,
                                );
                                ends = clock::now() + window;
                                pause = Pace::CONFIRM_READ_LEAST;
                                continue;
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "could not hand the lease to the successor's new lease id");
                                ends = clock::now();
                            }
                        }
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
            // A member that rejoined is alive under its new record: not passed over, but the
            // line that named its old one is stale (chaos seed 2311 found a line whose three
            // members had all restarted since it was listed), so the members are listed.
            let rejoined = std::mem::take(&mut rejoined);
            if std::mem::take(&mut left) {
                tracing::info!(
                    successor = to.identity(),
                    "the member handed the lease has left the line (its record is gone); passing \
                     it over"
                );
                passed_over.push(to.identity().to_owned());
            } else if !rejoined {
                let wake = match woke {
                    Woke::Yes => "it took the wake-up",
                    Woke::No => "not woken",
                    Woke::Nobody => "nothing listens at its URL",
                    Woke::Stranger => "another process answers at its URL",
                };
                tracing::warn!(
                    successor = to.identity(),
                    "the member handed the lease did not take it ({} of a {} window, {wake}); \
                     passing it over",
                    human(clock::now().saturating_duration_since(began)),
                    human(window)
                );
                passed_over.push(to.identity().to_owned());
            }
            let next = self.membership.as_ref().and_then(|m| {
                m.with(|l| {
                    if !rejoined {
                        l.pass_over(to.identity());
                    }
                    successor_in(l, &self.identity, self.slots, None)
                })
            });
            let limit = || clock::now() + self.timing.request_timeout();
            // The line is the leader's last listing (200 ms into its term, then every 30-36 s):
            // a member that joined since is not in it. Before a release, or when the line is
            // stale, one listing.
            let next = match next {
                next if relisted || (next.is_some() && !rejoined) => next,
                stale => {
                    relisted = true;
                    // Without a listing, the line as it is (rather a stale line than a release).
                    self.relist_for_successor(limit()).await.unwrap_or(stale)
                }
            };
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
                    woke = self.handed(term.slot, &next, None).await;
                    // Not woken, its record is read with the hop's first read: a member gone
                    // since the line was listed (the demo's quit: the followers stop first) is
                    // passed over at once, not after a watch period and a poll.
                    check = woke != Woke::Yes;
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

impl<S: LeaseStore> Elector<S> {
    /// The members listed afresh into the line, when every member it named was passed over
    /// or one rejoined ([`Elector::confirm`]): the successor of the new listing (members passed
    /// over still are), `Some(None)` when it shows no other live member, `None` when there is
    /// no listing.
    async fn relist_for_successor(&self, limit: Instant) -> Option<Option<MemberRecord>> {
        let m = self.membership.as_ref()?;
        tracing::info!("listing the members to hand the lease on to the line's successor");
        if let Err(e) = m.list(&*self.store, &*self.observer, limit).await {
            tracing::warn!(error = %e, "cannot list the members to hand the lease on");
            return None;
        }
        Some(m.with(|l| successor_in(l, &self.identity, self.slots, None)))
    }
}

/// Whether the blob shows that `to` took the lease: it wrote its epoch, above ours.
fn taken(state: &BlobState, to: &str, ours: u64) -> bool {
    state
        .holder
        .as_ref()
        .is_some_and(|h| h.identity == to && h.epoch > ours)
}
