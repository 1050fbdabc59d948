//! After the `change` of a handoff (docs/succession.md, "The handoff"; docs/safety.md, "Recovery
//! from anything", rule 3): the wake-up, and the shell of the core's [`Confirmation`], which
//! confirms that the member handed the lease took it (its epoch on the blob) or, when it did not
//! within its window, hands the lease on to the next member under conditions that let only one of
//! them lead. Also the handoff without a notice (a body that ended by itself, or with one slot a
//! stop), which reads nothing before its `change`: the read of its successor's record comes with
//! the confirmation's first read.

use super::handoff::{Surrender, notice_to, still_in_place, still_successor, successor_in};
use super::instance::Elector;
use super::observe::{Handoff, LeaseOp};
use super::request::timed;
use super::term::{Term, TermEnd};
use super::wake::{Reserved, WakeSent};
use crate::clock;
use crate::fmt::human;
use crate::store::{BlobState, ETag, Failure, Holder, LeaseStore, MemberRecord, StoreError};
use leasehold_core::confirmation::{
    Action, Confirmation, Confirmed, Event, Note, Read, Record, Wake,
};
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
        if let Err(surrendered) = self.change_to(term, &guess, kill_at).await {
            return surrendered;
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
            epoch: leasehold_core::epoch::after(term.epoch)?,
            etag,
        })
    }

    /// The confirmation's look at the record of `to`, the member the lease is changed to, when
    /// it was not read since it was chosen or its wake-up doubts it: what `read` says of it.
    fn judge(
        &self,
        to: &MemberRecord,
        read: Result<Option<MemberRecord>, StoreError>,
    ) -> Record<MemberRecord> {
        let Some(m) = &self.membership else {
            return Record::Stands;
        };
        let (identity, slots) = (self.identity.as_str(), self.slots);
        match read {
            Ok(Some(fresh)) if m.with(|l| still_successor(l, to, &fresh, identity, slots)) => {
                m.with(|l| l.succession.refresh(fresh));
                Record::Stands
            }
            Ok(Some(fresh))
                if slots == 1 && m.with(|l| still_in_place(l, to, &fresh, identity, slots)) =>
            {
                Record::NewLeaseId(fresh)
            }
            Ok(Some(fresh)) if fresh.key == to.key && fresh.joined != to.joined => {
                // It is alive under its new record: the line takes it.
                m.with(|l| l.succession.refresh(fresh));
                Record::Rejoined
            }
            Ok(_) => Record::Gone,
            Err(e) if e.failure() == Failure::Missing => Record::Gone,
            // No answer: the listing's record stands, and the window catches a member gone.
            Err(e) => {
                tracing::debug!(error = %e, "could not read the successor's record");
                Record::Stands
            }
        }
    }
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
    ) -> Wake {
        tracing::info!(
            successor = to.identity(),
            "handed the lease over; waiting for its epoch"
        );
        self.observer.handed_to(to.identity(), slot);
        if let Some(m) = &self.membership {
            m.with(|l| {
                if slot == 0 {
                    l.succession.leader = Some(to.identity().to_owned());
                    l.succession.notice = Some(to.identity().to_owned());
                }
                l.set_slot_holder(slot, Some(to.identity()));
            });
        }
        let Some(url) = &to.member.advertise else {
            return Wake::Missed;
        };
        let sent = self
            .wake_sender
            .send(url, to.member.wake_token.as_ref(), reserved)
            .await;
        self.observer.wake_sent(sent);
        match sent {
            WakeSent::Ok => Wake::Accepted,
            WakeSent::Later | WakeSent::Failed => Wake::Missed,
            WakeSent::Refused | WakeSent::Unreachable
                if self.mutant.on(crate::mutant::Mutant::HopWaitsOutRefusal) =>
            {
                Wake::Missed
            }
            WakeSent::Unreachable => Wake::Unreachable,
            WakeSent::Refused => Wake::Refused,
        }
    }

    /// A handoff is confirmed: the lease was changed to `to`'s id, and the core's
    /// [`Confirmation`] says what follows (docs/succession.md): reads of the blob until `to`'s
    /// epoch shows there, and, when it does not within its window, the lease handed on to the
    /// next member in line, `to` passed over, or released with nobody left. This carries out
    /// its actions and reports their ends.
    ///
    /// With `check` (a successor not read since it was chosen), `to`'s record is read beside
    /// the first read of the blob ([`Elector::judge`]). A term that ended this instance (`end`:
    /// a stop, or `on_exit = "exit"`) departs with the first read, if it has not yet
    /// ([`Elector::depart_after`]).
    pub(super) async fn confirm(
        &self,
        term: &Term,
        holder: &Holder,
        to: MemberRecord,
        wake: Wake,
        check: bool,
        end: &TermEnd,
    ) -> Surrender {
        let (mut confirmation, mut actions) =
            Confirmation::begin(&self.timing, clock::now(), to, wake, check);
        loop {
            let mut event = None;
            for action in actions {
                match action {
                    Action::Say(note) => say(note),
                    Action::Done(Confirmed::HandedTo(to)) => {
                        return Surrender::HandedTo(to.identity().to_owned());
                    }
                    Action::Done(Confirmed::Released(confirmed)) => {
                        return Surrender::Released(confirmed);
                    }
                    action => {
                        let to = confirmation.successor();
                        event = Some(self.carry_out(term, holder, to, end, action).await);
                    }
                }
            }
            let event = event.expect("each step ends with an action that waits, or is done");
            actions = confirmation.step(clock::now(), event);
        }
    }

    /// Carries out one of the confirmation's actions; `to` is the member the lease is changed
    /// to now.
    async fn carry_out(
        &self,
        term: &Term,
        holder: &Holder,
        to: &MemberRecord,
        end: &TermEnd,
        action: Action<MemberRecord, ETag>,
    ) -> Event<MemberRecord, ETag> {
        let store = self.store_of(term.slot);
        let limit = || clock::now() + self.timing.request_timeout();
        match action {
            Action::Sleep(pause) => {
                tokio::time::sleep(pause).await;
                Event::Slept
            }
            Action::Read { record } => {
                self.depart_after(end);
                self.read_for_confirm(term, to, record).await
            }
            Action::Rekey { from, to } => {
                let changed =
                    store.change(from.member.acquires_with, to.member.acquires_with, None);
                match self.call(LeaseOp::Change, limit(), changed).await {
                    Ok(()) => {
                        if let Some(m) = &self.membership {
                            m.with(|l| l.succession.refresh(to));
                        }
                        Event::Rekeyed(true)
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "could not hand the lease to the successor's new lease id");
                        Event::Rekeyed(false)
                    }
                }
            }
            Action::Wake { to, reserve } => {
                let reserved = reserve.then(|| self.reserve_next(term)).flatten();
                Event::Woke(self.handed(term.slot, &to, reserved.as_ref()).await)
            }
            Action::PassOver { member } => {
                let next = self.membership.as_ref().and_then(|m| {
                    m.with(|l| {
                        if let Some(member) = &member {
                            l.pass_over(member.identity());
                        }
                        successor_in(l, &self.identity, self.slots, None)
                    })
                });
                Event::Successor(next)
            }
            Action::Relist => Event::Relisted(self.relist_for_successor(limit()).await),
            Action::HandOn {
                from,
                to,
                passed_over,
                etag,
            } => {
                let handed_on = self
                    .hand_on(term, holder, &from, &to, &passed_over, etag)
                    .await;
                Event::HandedOn(handed_on)
            }
            Action::Release { from, etag } => {
                self.observer.handed_over(Handoff::NoSuccessor);
                let released = store.release_if(from.member.acquires_with, &etag);
                Event::Released(self.call(LeaseOp::Release, limit(), released).await.is_ok())
            }
            Action::Say(_) | Action::Done(_) => unreachable!("carried out by `confirm`"),
        }
    }

    /// A read of the blob, and with `record` of `to`'s record beside it, both cut at one
    /// limit: what they say of the handoff to `to`.
    async fn read_for_confirm(
        &self,
        term: &Term,
        to: &MemberRecord,
        record: bool,
    ) -> Event<MemberRecord, ETag> {
        let limit = clock::now() + self.timing.request_timeout();
        let record = async {
            match record {
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
        let store = self.store_of(term.slot);
        let (read, record) = tokio::join!(self.call(LeaseOp::Read, limit, store.read()), record);
        let read = match read {
            Ok(state) => self.judge_blob(term, to, state),
            Err(e) => {
                tracing::debug!(error = %e, "cannot read the blob to confirm the handoff");
                Read::Unanswered
            }
        };
        // A successor that took the lease is not judged: the line stays as listed.
        let record = record.filter(|_| read != Read::Taken);
        Event::Read(read, record.map(|r| self.judge(to, r)))
    }

    /// Hands the lease on from `from` to `to`: a notice naming `to` and the members passed
    /// over, then the `change`, each conditional on the blob being as the last write left it
    /// (`etag`, then the notice's). Whether both were done.
    async fn hand_on(
        &self,
        term: &Term,
        holder: &Holder,
        from: &MemberRecord,
        to: &MemberRecord,
        passed_over: &[MemberRecord],
        etag: ETag,
    ) -> bool {
        let store = self.store_of(term.slot);
        let limit = || clock::now() + self.timing.request_timeout();
        let passed_over = passed_over
            .iter()
            .map(|m| m.identity().to_owned())
            .collect();
        let notice = notice_to(term, to, passed_over);
        // Under `from`'s lease id, which is the active one: only if nothing was written since.
        let id = from.member.acquires_with;
        let noticed = store.write_notice(id, holder, &notice, Some(&etag));
        let handed_on = match self.call(LeaseOp::Notice, limit(), noticed).await {
            Ok(etag) => {
                let changed = store.change(id, to.member.acquires_with, Some(&etag));
                self.call(LeaseOp::Change, limit(), changed).await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = &handed_on {
            tracing::debug!(error = %e, "the lease was not handed on");
        }
        handed_on.is_ok()
    }

    /// What a read of the blob says of the handoff to `to`: taken when `to` wrote its epoch,
    /// above the term's; the holder's to move only while it is as the handoff left it (this
    /// instance's holder metadata, this term's epoch).
    fn judge_blob(&self, term: &Term, to: &MemberRecord, state: BlobState) -> Read<ETag> {
        match &state.holder {
            Some(h) if h.identity == to.identity() && h.epoch > term.epoch => Read::Taken,
            Some(h) if h.identity == self.identity && h.epoch == term.epoch => {
                Read::Ours(state.etag)
            }
            _ => Read::Other,
        }
    }
}

/// Logs what the confirmation says.
fn say(note: Note<MemberRecord>) {
    match note {
        Note::TakenAtItsOwnPoll(to) => tracing::warn!(
            successor = to.identity(),
            url = to.member.advertise.as_deref().unwrap_or_default(),
            "the successor took the lease at its own poll: nothing listens at its advertised URL \
             (check its [election].advertise)"
        ),
        Note::AnotherProcessAnswers(to) => tracing::info!(
            successor = to.identity(),
            "another process answers at the URL of the member handed the lease; passing it over"
        ),
        Note::Rejoined(to) => tracing::info!(
            successor = to.identity(),
            "the member handed the lease rejoined the line since it was listed"
        ),
        Note::Left(to) => tracing::info!(
            successor = to.identity(),
            "the member handed the lease has left the line (its record is gone); passing it over"
        ),
        Note::NotTaken {
            member,
            waited,
            window,
            wake,
        } => {
            let wake = match wake {
                Wake::Accepted => "it took the wake-up",
                Wake::Missed => "not woken",
                Wake::Unreachable => "nothing listens at its URL",
                Wake::Refused => "another process answers at its URL",
            };
            tracing::warn!(
                successor = member.identity(),
                "the member handed the lease did not take it ({} of a {} window, {wake}); \
                 passing it over",
                human(waited),
                human(window)
            );
        }
        Note::NewLeaseId(to) => tracing::info!(
            successor = to.identity(),
            "handed the lease to the new lease id of the same successor"
        ),
        Note::NobodyElse => tracing::info!("nobody else to hand the lease to; releasing it"),
        Note::HandedOn(to) => tracing::info!(successor = to.identity(), "handed the lease on"),
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
