//! The handoff (docs/succession.md): at a voluntary end of a term the lease goes to the successor
//! with Lease Blob `change`, once the body is gone (rule 7); then the successor is woken.
//!
//! With one slot, a stop and a body that ended by itself hand over alike: no notice and no read
//! before the `change` to the line's successor (as the line was listed once the term began:
//! `Pace::TERM_START_QUIET` in members/record.rs); the wake-up reserves the next epoch with the ETag
//! of the term's own epoch write, and the successor's record is read after it, by the
//! confirmation, which passes the member over at once if it left since, and lists the members
//! if it rejoined.
//! While the body stops, only the stopping leader's record is deleted ([`prepare`]). Measured
//! on Azurite, which serves one request at a time: a notice written while a quick child
//! stopped (1-10 ms) was often still queued when the `change` went out (docs/performance.md).
//!
//! With slots (a member may have won a slot since it was listed, which only its record or a
//! listing shows), a preemption (it names its member), or a health step-down or a crash-loop
//! backoff (whose standby the record must say first), the successor is chosen before the
//! `change` and a handoff notice names it ([`choose`], the shell of the core's
//! `leasehold_core::choice`, which says how); when a stop is requested that is done while the
//! child stops.
//!
//! The order of the handoff's requests is the core's `leasehold_core::handoff`:
//! [`Elector::hand_over`] starts it, `drive` (confirm.rs) carries out its actions.

use super::instance::Elector;
use super::members::{self, Line};
use super::observe::{LeaseOp, Observer};
use super::request::timed;
use super::term::{Tenure, Term, TermEnd};
use crate::clock;
use crate::store::{ETag, Holder, LeaseStore, MemberRecord, Notice, Reservation, StoreError};
use crate::timing::Deadline;
use leasehold_core::{Pace, choice, epoch, handoff};
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

/// The successor a handoff chose ([`choose`]), and when (the lease clock): a choice older than
/// `acquire_interval` at the body's death is made again.
#[derive(Debug)]
pub(super) struct Chosen {
    at: Instant,
    choice: Choice,
}

/// The core's handoff of the shell's records, ETags and errors: what it asks
/// ([`Elector::drive`] carries it out) and what ended it.
pub(super) type Action = handoff::Action<Instant, MemberRecord, ETag, StoreError>;
pub(super) type Event = handoff::Event<Instant, MemberRecord, ETag, StoreError>;

/// What [`choose`] found: the core's choice of the shell's member record and notice.
type Choice = choice::Choice<MemberRecord, Noticed, StoreError>;

/// A handoff notice on the blob (docs/succession.md, "The handoff").
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
}

/// A handoff prepared in the background once a stop is requested.
pub(super) struct Preparing {
    stop: CancellationToken,
    task: JoinHandle<Option<Chosen>>,
    /// With one slot: the departure [`Pace::DEPART_AFTER`] into the stop, called off when the body
    /// is gone sooner (the confirmation departs then).
    departing: Option<JoinHandle<()>>,
}

impl Preparing {
    /// What was prepared: `None` when no stop was requested (the task is dropped: it had sent
    /// nothing under the lease, only its read of the successor's record), or the lease was no
    /// longer held when it was.
    async fn take(mut self, limit: Instant) -> Option<Chosen> {
        if let Some(departing) = self.departing.take() {
            departing.abort();
        }
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
        if let Some(departing) = &self.departing {
            departing.abort();
        }
    }
}

/// The successor a term hands its lease to: the first live member in line other than
/// `identity`, not in a cooldown (with slots: holding no slot and counting as many slots as we
/// do). A preemption names the member it hands to (`to`) while that one is still a live member.
pub(super) fn successor_in(
    l: &Line,
    identity: &str,
    slots: u32,
    to: Option<&str>,
) -> Option<MemberRecord> {
    let now = crate::clock::wall();
    let taken = |r: &MemberRecord| out_of_line(l, r, slots);
    let preferred = to.and_then(|to| {
        members::successor(&l.succession.members, Some(identity), now, |r| {
            taken(r) || r.identity() != to
        })
    });
    preferred
        .or_else(|| members::successor(&l.succession.members, Some(identity), now, taken))
        .cloned()
}

/// Whether `r` is no candidate for a handoff whatever its place: passed over, or (with slots)
/// holding a slot or counting other slots than we do.
fn out_of_line(l: &Line, r: &MemberRecord, slots: u32) -> bool {
    l.is_passed_over(r.identity())
        || slots > 1 && (r.member.slots != slots || l.succession.holds_slot(r.identity()))
}

/// Whether `fresh`, a read of the record of `listed` (the line's successor), shows that member
/// still the successor: alive, not in a cooldown, no candidate less, at the same place (the same
/// record, not one made again when the member rejoined: its seniority is its record's creation;
/// and its priority unchanged), and with the same lease id: a member publishes a new one after
/// each lease it wins, and one that won since it was listed may hold a slot now, which only a
/// listing shows. Its wake-up URL and token are then the fresh ones.
pub(super) fn still_successor(
    l: &Line,
    listed: &MemberRecord,
    fresh: &MemberRecord,
    identity: &str,
    slots: u32,
) -> bool {
    fresh.member.acquires_with == listed.member.acquires_with
        && still_in_place(l, listed, fresh, identity, slots)
}

/// [`still_successor`] but for the lease id: with one slot, a member that won the lease since
/// it was listed (it published a new lease id after its epoch) is still the successor, under
/// its new id: nobody acquires with the old one any more.
pub(super) fn still_in_place(
    l: &Line,
    listed: &MemberRecord,
    fresh: &MemberRecord,
    identity: &str,
    slots: u32,
) -> bool {
    fresh.key == listed.key
        && fresh.joined == listed.joined
        && fresh.member.priority == listed.member.priority
        && members::successor(
            std::slice::from_ref(fresh),
            Some(identity),
            crate::clock::wall(),
            |r| out_of_line(l, r, slots),
        )
        .is_some()
}

/// The holder metadata a term's handoff notice is written with.
fn holder_of<S: LeaseStore>(elector: &Elector<S>, term: &Term) -> Holder {
    Holder {
        identity: elector.identity.clone(),
        epoch: term.epoch,
        acquired_at: term.acquired_at,
        lease: Some(term.lease),
        slots: leasehold_core::slots::to_record(elector.slots),
    }
}

/// The notice that hands the lease to `to`: it names `to` and reserves the next epoch for the
/// lease id `to` acquires with (docs/succession.md, "The handoff"), passing over `passed_over`.
pub(super) fn notice_to(term: &Term, to: &MemberRecord, passed_over: Vec<String>) -> Notice {
    Notice {
        successor: to.identity().to_owned(),
        passed_over,
        reserved: epoch::after(term.epoch).map(|epoch| Reservation {
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

/// What [`choose`] works with: where to write and read, and who asks.
struct Chooser<'a, S> {
    /// The group's store (member records, listings).
    group: &'a S,
    /// The store of the term's slot (its notice).
    store: &'a S,
    observer: &'a dyn Observer,
    line: &'a Mutex<Line>,
    identity: &'a str,
    slots: u32,
    /// A preemption's preferred member.
    to: Option<&'a str>,
    term: &'a Term,
    holder: &'a Holder,
}

/// Chooses the successor and writes the notice naming it, under the term's lease (with slots,
/// for a preemption or a health step-down: handoffs without a notice do not come here): the
/// shell of the core's [`choice::Choosing`], which decides (see its module); this carries out its
/// requests and judges by the line what it asks ([`still_successor`], whether the notice
/// written names the listing's successor).
async fn choose<S: LeaseStore>(c: Chooser<'_, S>, limit: Instant) -> Choice {
    let successor = || {
        let l = c.line.lock().unwrap_or_else(|e| e.into_inner());
        successor_in(&l, c.identity, c.slots, c.to)
    };
    let (mut choosing, mut actions): (choice::Choosing<MemberRecord, Noticed>, _) =
        choice::Choosing::begin(successor());
    loop {
        let mut event = None;
        for action in actions {
            event = match action {
                choice::Action::Say(note) => {
                    say(note);
                    None
                }
                choice::Action::Refresh(fresh) => {
                    c.line
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .succession
                        .refresh(fresh);
                    None
                }
                choice::Action::NoticeAndRead(guess) => {
                    let (notice, read) = tokio::join!(
                        write_notice(c.store, c.observer, c.term, c.holder, &guess, limit),
                        timed(
                            c.observer,
                            LeaseOp::MemberRead,
                            limit,
                            c.group.read_record(&guess.key)
                        )
                    );
                    let fresh = read.ok().flatten().filter(|fresh| {
                        let l = c.line.lock().unwrap_or_else(|e| e.into_inner());
                        still_successor(&l, &guess, fresh, c.identity, c.slots)
                    });
                    Some(choice::Event::NoticedAndRead { notice, fresh })
                }
                choice::Action::List => {
                    let listed = members::list(c.group, c.observer, c.line, limit).await;
                    let next = listed.map(|()| {
                        successor().map(|next| {
                            let named = choosing.noticed().is_some_and(|n| n.names(&next));
                            (next, named)
                        })
                    });
                    Some(choice::Event::Listed(next))
                }
                choice::Action::Notice(next) => Some(choice::Event::Noticed(
                    write_notice(c.store, c.observer, c.term, c.holder, &next, limit).await,
                )),
                choice::Action::Done(choice) => return choice,
            };
        }
        let event = event.expect("the core's last action asks for an event");
        actions = choosing.step(event);
    }
}

/// Logs what the choice says.
fn say(note: choice::Note<MemberRecord, StoreError>) {
    match note {
        choice::Note::NoticeFailed(e) => {
            tracing::debug!(error = %e, "could not write the handoff notice");
        }
        choice::Note::NotConfirmed(guess) => tracing::debug!(
            successor = guess.identity(),
            "its record or the notice did not confirm it the successor; listing the members"
        ),
        choice::Note::HandingOverWithoutNotice(e) => {
            tracing::warn!(error = %e, "could not write the handoff notice; handing over anyway");
        }
    }
}

/// Starts preparing the handoff of `term`: with slots, once `stop` is cancelled (while the body
/// stops), chooses the successor and writes the notice ([`choose`]), then deletes this
/// instance's record, while the renew task still holds the lease (`tenure`): nothing goes out under
/// it after our kill deadline, when the lease may be someone else's. With one slot only the
/// record is deleted, [`Pace::DEPART_AFTER`] into the stop. `None` for an instance without a line.
pub(super) fn prepare<S: LeaseStore>(
    elector: &Elector<S>,
    term: &Term,
    tenure: watch::Receiver<Tenure>,
    stop: &CancellationToken,
) -> Option<Preparing> {
    let m = elector.membership.as_ref()?;
    let line = m.line.clone();
    let departure = m.departure();
    let group = elector.store.clone();
    let store = elector.store_of(term.slot).clone();
    let observer = elector.observer.clone();
    let (identity, slots) = (elector.identity.clone(), elector.slots);
    let holder = holder_of(elector, term);
    let term = term.clone();
    let timeout = elector.timing.request_timeout();
    let stop = stop.clone();
    let requested = stop.clone();
    let mutant = elector.mutant;
    let task = crate::spawn::spawn(async move {
        requested.cancelled().await;
        // With one slot nothing is chosen ahead: the handoff after the body's death is the
        // `change` to the line's successor alone, as after a body that ended by itself.
        let choice = match slots {
            // A stop request ends this instance: its record goes while the body stops
            // (`departing` below), so that members listing from the handoff on (the new
            // leader, members that see it lead) do not count it in line. (Deleted once the
            // handoff was confirmed instead, it was still there for a member listing
            // meanwhile, which then took it for the successor and watched: 7 in 20 of the
            // bench's graceful handovers without wake-ups left nobody polling.)
            1 => None,
            _ => {
                let Tenure::Held(deadline) = *tenure.borrow() else {
                    return None;
                };
                let limit = (clock::now() + timeout).min(deadline.kill_at);
                let chooser = Chooser {
                    group: &*group,
                    store: &*store,
                    observer: &*observer,
                    line: &line,
                    identity: &identity,
                    slots,
                    to: None,
                    term: &term,
                    holder: &holder,
                };
                let choice = choose(chooser, limit).await;
                // A stop request ends this instance: with a notice written, its record goes
                // now, while the body stops, so that it is not in the line the new holder
                // lists as it begins.
                departure.depart();
                Some(choice)
            }
        };
        if mutant.on(crate::mutant::Mutant::ChangeBeforeGone) {
            // The lease handed on while the body still stops.
            let next = match &choice {
                None => successor_in(
                    &line.lock().unwrap_or_else(|e| e.into_inner()),
                    &identity,
                    1,
                    None,
                )
                .map(|next| next.member.acquires_with),
                Some(Choice::To(next, _)) => Some(next.member.acquires_with),
                Some(_) => None,
            };
            if let Some(next) = next {
                let _ = store.change(term.lease, next, None).await;
            }
        }
        choice.map(|choice| Chosen {
            at: clock::now(),
            choice,
        })
    });
    let departing = (slots == 1).then(|| {
        let (departure, requested) = (m.departure(), stop.clone());
        crate::spawn::spawn(async move {
            requested.cancelled().await;
            tokio::time::sleep(Pace::DEPART_AFTER).await;
            departure.depart();
        })
    });
    Some(Preparing {
        stop,
        task,
        departing,
    })
}

impl<S: LeaseStore> Elector<S> {
    /// The handoff: the body is gone; while the lease is still ours (before the kill deadline
    /// `t_s + L - M`), choose the successor ([`choose`]), and change the lease id to its own,
    /// after a handoff notice on the blob that names it; then wake it. From the change on, our
    /// lease id is dead: nothing is sent with it any more, but the release when the change got
    /// no answer (if it landed, that release is refused; if not, it frees the lease). No
    /// successor, or no listing: release. The core's
    /// [`Handoff`](leasehold_core::handoff::Handoff) says what to send and when, from how it
    /// begins (unannounced, with the choice made while the body stopped if younger than
    /// `acquire_interval`, or choosing now) to its confirmation; this drives it.
    pub(super) async fn hand_over(
        &mut self,
        term: &Term,
        end: TermEnd,
        ending: choice::Ending,
        deadline: &Deadline,
        to: Option<&str>,
        prepared: Option<Preparing>,
    ) -> Surrender {
        let begin = handoff::Begin {
            ending,
            named: to.is_some(),
            lined: self.membership.is_some(),
        };
        let term_of = self.handoff_term(term, &end, deadline.kill_at);
        let (machine, actions) =
            handoff::Handoff::begin(&self.timing, clock::now(), term_of, begin);
        let mut outgoing = Outgoing {
            term,
            holder: holder_of(self, term),
            to,
            prepared,
        };
        self.drive(&mut outgoing, machine, actions).await
    }

    /// What the core's handoff of `term` starts from. A term that ended this instance (`end`:
    /// a stop, or `on_exit = "exit"`) departs with the confirmation's first read: on a stop
    /// request whose body took longer than [`Pace::DEPART_AFTER`] to stop that was done while
    /// it stopped ([`prepare`]; this is then a no-op); a body gone sooner, or that ended with
    /// `on_exit = "exit"` (no warning), departs then, so that the deletion of its record does
    /// not queue before the successor's acquire. A leader that stops departs
    /// ([`Membership::depart`](super::members::Membership::depart)) so that members listing
    /// while it confirms the handoff, the new leader first, do not count it in line.
    fn handoff_term(
        &self,
        term: &Term,
        end: &TermEnd,
        kill_at: Instant,
    ) -> handoff::Term<Instant, ETag> {
        handoff::Term {
            kill_at,
            epoch: term.epoch,
            etag: term.etag.clone(),
            slots: self.slots,
            departs: matches!(end, TermEnd::Shutdown | TermEnd::Exit(_)),
        }
    }

    /// Carries out one of the handoff's actions before its `change`: what was prepared while
    /// the body stopped, the line's successor, the choice made now (beside the record's
    /// standby, when the core asks for it). What ended it.
    pub(super) async fn carry_out_choice(&self, h: &mut Outgoing<'_>, action: Action) -> Event {
        let Some(m) = self.membership.as_ref() else {
            unreachable!("a handoff without a line releases at once")
        };
        match action {
            Action::TakePrepared { limit } => {
                let prepared = match h.prepared.take() {
                    Some(p) => p.take(limit).await,
                    None => None,
                };
                let prepared = prepared.map(|p| (p.at, p.choice.map_notice(|n| n.etag)));
                Event::Prepared(prepared)
            }
            Action::Guess => Event::Guessed(
                m.with(|l| {
                    l.succession
                        .listed_this_term()
                        .then(|| successor_in(l, &self.identity, self.slots, None))
                })
                .flatten(),
            ),
            Action::Choose { standby, limit } => {
                // A member in a cooldown says so before anyone could hand it the lease back.
                let standby = standby.map(|cooldown| crate::clock::wall() + cooldown);
                let (store, observer) = (&*self.store, &*self.observer);
                let chooser = Chooser {
                    group: store,
                    store: &**self.store_of(h.term.slot),
                    observer,
                    line: &m.line,
                    identity: &self.identity,
                    slots: self.slots,
                    to: h.to,
                    term: h.term,
                    holder: &h.holder,
                };
                let (choice, ()) = tokio::join!(choose(chooser, limit), async {
                    if standby.is_some() {
                        m.standby(store, observer, standby, limit).await;
                    }
                });
                Event::Chosen(choice.map_notice(|n| n.etag))
            }
            _ => unreachable!("a choice's action"),
        }
    }
}

/// The outgoing term, and what its handoff's driver works with beside the elector.
pub(super) struct Outgoing<'a> {
    /// The term whose lease is handed over.
    pub term: &'a Term,
    /// The holder metadata its notices are written with.
    pub holder: Holder,
    /// A preemption's preferred member.
    pub to: Option<&'a str>,
    /// What is being prepared while the body stops, until the handoff takes it (or drops it).
    pub prepared: Option<Preparing>,
}
