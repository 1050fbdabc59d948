//! The driver of the core's handoff (`leasehold_core::handoff`; docs/succession.md, "The
//! handoff"; docs/safety.md, "Recovery from anything", rule 3), from the successor chosen to the
//! lease handed, released or lost: it carries out the handoff's actions (the requests on the
//! store, the wake-up, the confirmation's pauses, the looks at the line) and reports what ended
//! each, with the instant it came. It judges by the line what the core asks of it: whether a
//! read of the blob shows the successor's epoch, whether its record still shows it the
//! successor. Also the handoff without a notice (a body that ended by itself, or with one slot
//! a stop), which reads nothing before its `change`: the read of its successor's record comes
//! with the confirmation's first read.

use super::handoff::{Action, Event, Outgoing, Surrender, notice_to, successor_in};
use super::instance::Elector;
use super::observe::{Handoff as Gave, LeaseOp};
use super::request::timed;
use super::term::Term;
use super::wake::{Reserved, WakeSent};
use crate::fmt::human;
use crate::store::{BlobState, ETag, Failure, Holder, LeaseStore, MemberRecord, StoreError};
use leasehold_core::confirmation::{self, Note, Read, Record, Wake};
use leasehold_core::handoff::{self, Handoff, Outcome};
use tokio::time::Instant;

/// A request of the core's handoff, of the shell's records and ETags.
type Request = handoff::Request<MemberRecord, ETag>;

impl<S: LeaseStore> Elector<S> {
    /// Drives the core's [`Handoff`] of `h.term` from `actions` to its end: carries out each
    /// of its actions and reports what ended it, with the instant it came.
    pub(super) async fn drive(
        &self,
        h: &mut Outgoing<'_>,
        mut handoff: Handoff<Instant, MemberRecord, ETag, StoreError>,
        mut actions: Vec<Action>,
    ) -> Surrender {
        loop {
            let mut event = None;
            for action in actions {
                match action {
                    Action::Say(note) => self.say_handoff(note),
                    Action::Depart => {
                        if let Some(m) = &self.membership {
                            m.depart();
                        }
                    }
                    Action::Refresh(to) => {
                        if let Some(m) = &self.membership {
                            m.with(|l| l.succession.refresh(to));
                        }
                    }
                    Action::DropPrepared => drop(h.prepared.take()),
                    Action::Done(surrendered) => return surrendered.into(),
                    action @ (Action::TakePrepared { .. }
                    | Action::Guess
                    | Action::Choose { .. }) => {
                        event = Some(self.carry_out_choice(h, action).await);
                    }
                    action => event = Some(self.carry_out(h.term, &h.holder, action).await),
                }
            }
            let event = event.expect("each step ends with an action that waits, or is done");
            actions = handoff.step(self.clock.now(), event);
        }
    }

    /// The confirmation's look at the record of `to`, the member the lease is changed to, when
    /// it was not read since it was chosen or its wake-up doubts it: what `read` says of it
    /// ([`confirmation::judge`]).
    fn judge(
        &self,
        to: &MemberRecord,
        read: Result<Option<MemberRecord>, StoreError>,
    ) -> Record<MemberRecord> {
        let Some(m) = &self.membership else {
            return Record::Stands;
        };
        if let Err(e) = &read
            && e.failure() != Failure::Missing
        {
            tracing::debug!(error = %e, "could not read the successor's record");
        }
        let read = read.map_err(|e| e.failure());
        let (now, wall) = (self.clock.now(), self.clock.wall());
        m.with(|l| confirmation::judge(&mut l.succession, to, read, now, wall))
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
            WakeSent::Unreachable => Wake::Unreachable,
            WakeSent::Refused => Wake::Refused,
        }
    }

    /// Carries out one of the handoff's actions that waits: what ended it.
    async fn carry_out(&self, term: &Term, holder: &Holder, action: Action) -> Event {
        match action {
            Action::Send { request, limit } => self.send(term, holder, request, limit).await,
            Action::Wake { to, reserved } => {
                Event::Woke(self.handed(term.slot, &to, reserved.as_ref()).await)
            }
            Action::Sleep(until) => {
                self.clock.sleep_until(until).await;
                Event::Slept
            }
            Action::PassOver(member) => {
                let next = self.membership.as_ref().and_then(|m| {
                    m.with(|l| {
                        if let Some(member) = &member {
                            l.pass_over(member.identity());
                        }
                        successor_in(l, None)
                    })
                });
                Event::Successor(next)
            }
            Action::Relist { limit } => Event::Relisted(self.relist_for_successor(limit).await),
            _ => unreachable!("carried out by `drive` or `carry_out_choice`"),
        }
    }

    /// Sends one of the handoff's requests on the store of the term's slot, cut at `limit`.
    async fn send(&self, term: &Term, holder: &Holder, request: Request, limit: Instant) -> Event {
        let store = self.store_of(term.slot);
        match request {
            Request::Change { from, to, etag } => {
                let from = from.map_or(term.lease, |from| from.member.acquires_with);
                let changed = store.change(from, to.member.acquires_with, etag.as_ref());
                Event::Changed(self.call(LeaseOp::Change, limit, changed).await)
            }
            Request::Notice {
                from,
                to,
                passed_over,
                etag,
            } => {
                let passed_over = passed_over
                    .iter()
                    .map(|m| m.identity().to_owned())
                    .collect();
                let notice = notice_to(term, &to, passed_over);
                let id = from.member.acquires_with;
                let noticed = store.write_notice(id, holder, &notice, Some(&etag));
                Event::Noticed(self.call(LeaseOp::Notice, limit, noticed).await)
            }
            Request::Release => {
                Event::Released(self.release_until(term.slot, term.lease, limit).await)
            }
            Request::ReleaseIf { from, etag } => {
                let released = store.release_if(from.member.acquires_with, &etag);
                Event::Released(self.call(LeaseOp::Release, limit, released).await.is_ok())
            }
            Request::Read { successor, record } => {
                self.read_for_confirm(term, &successor, record, limit).await
            }
        }
    }

    /// A read of the blob, and with `record` of `to`'s record beside it, both cut at one
    /// limit: what they say of the handoff to `to`.
    async fn read_for_confirm(
        &self,
        term: &Term,
        to: &MemberRecord,
        record: bool,
        limit: Instant,
    ) -> Event {
        let record = async {
            match record {
                true => Some(
                    timed(
                        self.clock,
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

impl<S: LeaseStore> Elector<S> {
    /// Logs what the handoff says, and tells the observer how it gave the lease up: a lease
    /// that could not be handed at WARN, with its error (and the successor it was for).
    fn say_handoff(&self, note: handoff::Note<MemberRecord, StoreError>) {
        use handoff::Note as Said;
        let (e, successor, text) = match note {
            Said::Gave(outcome) => return self.observer.handed_over(outcome.into()),
            Said::Confirmation(note) => return say_confirmation(note),
            Said::Nobody => {
                return tracing::info!("no other live member to hand the lease to; releasing it");
            }
            Said::NotRekeyed(e) => {
                return say_unchanged(
                    &e,
                    "could not hand the lease to the successor's new lease id",
                );
            }
            Said::NotHandedOn(e) => return say_unchanged(&e, "the lease was not handed on"),
            Said::Unlisted(e) => (
                e,
                None,
                "cannot list the members to hand the lease over; releasing it",
            ),
            Said::Lost(e) => (e, None, "the lease is no longer ours; nothing to hand over"),
            Said::Unanswered(e, next) => (
                e,
                Some(next.identity().to_owned()),
                "no answer to the handoff; releasing the lease with this instance's own id (refused if the handoff landed)",
            ),
        };
        tracing::warn!(error = %e, successor = successor.as_deref(), "{text}");
    }
}

/// The log line of a handoff step that changed nothing (the confirmation goes on).
fn say_unchanged(e: &StoreError, text: &str) {
    tracing::debug!(error = %e, "{text}");
}

impl From<Outcome> for Gave {
    fn from(outcome: Outcome) -> Self {
        match outcome {
            Outcome::HandedOver => Self::HandedOver,
            Outcome::NoSuccessor => Self::NoSuccessor,
            Outcome::Fallback => Self::Fallback,
            Outcome::Lost => Self::Lost,
            Outcome::Released => Self::Released,
        }
    }
}

impl From<handoff::Surrender<MemberRecord>> for Surrender {
    fn from(surrendered: handoff::Surrender<MemberRecord>) -> Self {
        match surrendered {
            handoff::Surrender::Released(confirmed) => Self::Released(confirmed),
            handoff::Surrender::HandedTo(to) => Self::HandedTo(to.identity().to_owned()),
            handoff::Surrender::Lost => Self::Lost,
        }
    }
}

/// Logs what the confirmation says: a successor that did not take the lease as it should
/// have at WARN, the rest at INFO, each naming the successor.
fn say_confirmation(note: Note<MemberRecord>) {
    let (to, text) = match note {
        Note::TakenAtItsOwnPoll(to) => {
            return tracing::warn!(
                successor = to.identity(),
                url = to.member.advertise.as_deref().unwrap_or_default(),
                "the successor took the lease at its own poll: nothing listens at its advertised \
                 URL (check its [election].advertise)"
            );
        }
        Note::NotTaken {
            member,
            waited,
            window,
            wake,
        } => return say_not_taken(&member, waited, window, wake),
        Note::AnotherProcessAnswers(to) => (
            Some(to),
            "another process answers at the URL of the member handed the lease; passing it over",
        ),
        Note::Rejoined(to) => (
            Some(to),
            "the member handed the lease rejoined the line since it was listed",
        ),
        Note::LedSince(to) => (
            Some(to),
            "the member handed the lease led since it was listed and may hold a slot; listing the \
             members",
        ),
        Note::Left(to) => (
            Some(to),
            "the member handed the lease has left the line (its record is gone); passing it over",
        ),
        Note::NewLeaseId(to) => (
            Some(to),
            "handed the lease to the new lease id of the same successor",
        ),
        Note::NobodyElse => (None, "nobody else to hand the lease to; releasing it"),
        Note::HandedOn(to) => (Some(to), "handed the lease on"),
    };
    let successor = to.as_ref().map(MemberRecord::identity);
    tracing::info!(successor, "{text}");
}

/// The log line of a successor that did not take the lease within its window.
fn say_not_taken(
    member: &MemberRecord,
    waited: std::time::Duration,
    window: std::time::Duration,
    wake: Wake,
) {
    let wake = match wake {
        Wake::Accepted => "it took the wake-up",
        Wake::Missed => "not woken",
        Wake::Unreachable => "nothing listens at its URL",
        Wake::Refused => "another process answers at its URL",
    };
    tracing::warn!(
        successor = member.identity(),
        "the member handed the lease did not take it ({} of a {} window, {wake}); passing it over",
        human(waited),
        human(window)
    );
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
        Some(m.with(|l| successor_in(l, None)))
    }
}
