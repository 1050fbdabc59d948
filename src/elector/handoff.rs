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
use super::members::{self, Departure, Line};
use super::observe::{LeaseOp, Observer};
use super::request::timed;
use super::term::{Tenure, Term, TermEnd};
use crate::clock::Clock;
use crate::mutant::Mutant;
use crate::store::{ETag, Holder, LeaseStore, MemberRecord, Notice, Reservation, StoreError};
use crate::timing::Deadline;
use leasehold_core::exchange::{Answer, Send};
use leasehold_core::handoff::preparation::{self, Take};
use leasehold_core::{choice, epoch, handoff};
use std::sync::{Arc, Mutex, MutexGuard};
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

/// What was prepared while the body stopped, and when it was chosen (the lease clock): a
/// choice older than `acquire_interval` at the body's death is made again.
type Prepared = (Instant, Choice);

/// The core's preparation of a handoff, of the shell's records, notices and errors.
type Preparation = handoff::Preparation<MemberRecord, Noticed, StoreError>;

/// A handoff prepared in the background once a stop is requested ([`prepare`]): the task that
/// carries out the core's [`Preparation`], which the handoff asks what to do with it once the
/// body is gone.
pub(super) struct Preparing {
    stop: CancellationToken,
    /// The elector's clocks.
    clock: Clock,
    machine: Arc<Mutex<Preparation>>,
    task: JoinHandle<Option<Prepared>>,
    /// With one slot: the departure on the core's timer, into the stop ([`departing`]).
    departing: Option<JoinHandle<()>>,
}

impl Preparing {
    /// What was prepared, waited for until `limit` if the core says so: `None` when it calls
    /// the preparation off (no stop was requested: the task had sent nothing under the lease,
    /// only its reads; or, with one slot, the departure still waited), or the lease was no
    /// longer held when the stop was.
    async fn take(mut self, limit: Instant) -> Option<Prepared> {
        let stopped = self.stop.is_cancelled();
        let take = lock(&self.machine).take(stopped);
        // The departure is called off (the core says so once asked): the confirmation departs.
        if let Some(departing) = self.departing.take() {
            departing.abort();
        }
        match take {
            // Dropped, the task is aborted.
            Take::CallOff => None,
            Take::Await => tokio::time::timeout_at(self.clock.timer_instant(limit), &mut self.task)
                .await
                .ok()
                .and_then(Result::ok)
                .flatten(),
        }
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

/// With one slot, the departure into the stop, on the core's timer: once `requested`, at the
/// instant the core says, unless the body went meanwhile.
async fn departing(
    clock: Clock,
    machine: Arc<Mutex<Preparation>>,
    requested: CancellationToken,
    departure: Departure,
) {
    requested.cancelled().await;
    let at = lock(&machine).depart_at(clock.now());
    clock.sleep_until(at).await;
    if lock(&machine).departure_due() {
        departure.depart();
    }
}

/// The lock of `m`, even if a panic poisoned it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The successor a term hands its lease to, now ([`Succession::handoff_successor`]): with
/// `to`, a preemption's member while it is still a candidate.
///
/// [`Succession::handoff_successor`]: leasehold_core::Line::handoff_successor
pub(super) fn successor_in(l: &Line, to: Option<&str>) -> Option<MemberRecord> {
    let (now, wall) = (l.clock.now(), l.clock.wall());
    l.succession.handoff_successor(to, now, wall).cloned()
}

/// Whether `fresh`, a read of the record of `listed`, shows that member still the successor,
/// now ([`leasehold_core::Line::still_successor`]).
fn still_successor(l: &Line, listed: &MemberRecord, fresh: &MemberRecord) -> bool {
    let (now, wall) = (l.clock.now(), l.clock.wall());
    l.succession.still_successor(listed, fresh, now, wall)
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
    clock: Clock,
    store: &S,
    observer: &dyn Observer,
    term: &Term,
    holder: &Holder,
    to: &MemberRecord,
    limit: Instant,
) -> Result<Noticed, StoreError> {
    let notice = notice_to(term, to, Vec::new());
    timed(
        clock,
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
struct ChoiceShell<'a, S> {
    /// The group's store (member records, listings).
    group: &'a S,
    /// The store of the term's slot (its notice).
    store: &'a S,
    observer: &'a dyn Observer,
    /// The elector's clocks.
    clock: Clock,
    line: &'a Mutex<Line>,
    /// A preemption's preferred member.
    to: Option<&'a str>,
    term: &'a Term,
    holder: &'a Holder,
}

/// The core's chooser of the shell's records, notices and errors.
type Chooser = choice::Chooser<MemberRecord, Noticed, StoreError>;

/// Chooses the successor and writes the notice naming it, under the term's lease (with slots,
/// for a preemption or a health step-down: handoffs without a notice do not come here): the
/// shell of the core's [`choice::Chooser`], which decides (see its module); this carries out its
/// requests, those given together side by side, and answers what it asks of the line.
async fn choose<S: LeaseStore>(c: ChoiceShell<'_, S>, limit: Instant) -> Choice {
    let guess = successor_in(&lock(c.line), c.to);
    let (mut chooser, mut out) = Chooser::begin(guess);
    loop {
        let mut sends = Vec::new();
        for output in out {
            match output {
                choice::Output::Say(note) => say(note),
                choice::Output::Refresh(fresh) => lock(c.line).succession.refresh(fresh),
                choice::Output::Send(send) => sends.push(send),
                choice::Output::Done(choice) => return choice,
            }
        }
        let sent = c.clock.now();
        // Side by side, polled as tokio's join! polls them (the simulator's histories depend on
        // the order of the requests' polls).
        let replies = match &sends[..] {
            [a, b] => {
                let (a, b) = tokio::join!(c.carry_out(a, limit), c.carry_out(b, limit));
                vec![a, b]
            }
            sends => futures::future::join_all(sends.iter().map(|s| c.carry_out(s, limit))).await,
        };
        let mut grounds = ChoiceGrounds {
            line: c.line,
            to: c.to,
        };
        out = Vec::new();
        for (send, answer) in sends.iter().zip(replies) {
            let answer = Answer {
                tag: send.tag,
                sent,
                answer,
            };
            out.extend(chooser.handle(answer, &mut grounds));
        }
    }
}

impl<S: LeaseStore> ChoiceShell<'_, S> {
    /// Carries out one of the chooser's requests, cut at `limit`: what came back.
    async fn carry_out(
        &self,
        send: &Send<choice::Request<MemberRecord>>,
        limit: Instant,
    ) -> choice::Reply<MemberRecord, Noticed, StoreError> {
        let (clock, observer) = (self.clock, self.observer);
        match &send.request {
            choice::Request::Notice(to) => choice::Reply::Noticed(
                write_notice(
                    clock,
                    self.store,
                    observer,
                    self.term,
                    self.holder,
                    to,
                    limit,
                )
                .await,
            ),
            choice::Request::Read(member) => {
                let read = self.group.read_record(&member.key);
                let read = timed(clock, observer, LeaseOp::MemberRead, limit, read).await;
                choice::Reply::Read(read.ok().flatten())
            }
            choice::Request::List => {
                let listed = members::list(self.group, observer, self.line, limit).await;
                choice::Reply::Listed(listed)
            }
        }
    }
}

/// What the chooser asks of the line, answered at the moment asked.
struct ChoiceGrounds<'a> {
    line: &'a Mutex<Line>,
    /// A preemption's preferred member.
    to: Option<&'a str>,
}

impl choice::Grounds<MemberRecord, Noticed> for ChoiceGrounds<'_> {
    fn successor(&mut self) -> Option<MemberRecord> {
        successor_in(&lock(self.line), self.to)
    }

    fn still_successor(&mut self, listed: &MemberRecord, fresh: &MemberRecord) -> bool {
        still_successor(&lock(self.line), listed, fresh)
    }

    fn names(&mut self, notice: &Noticed, next: &MemberRecord) -> bool {
        notice.names(next)
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

/// Starts preparing the handoff of `term` while the body stops, once `stop` is cancelled: the
/// core's [`Preparation`] says what (with one slot, the departure
/// [`Pace::DEPART_AFTER`](leasehold_core::Pace::DEPART_AFTER) into the stop, on a timer of its
/// own: [`departing`]; with slots, the choice of the successor and its notice ([`choose`]), then
/// the departure, while the renew task still holds the lease, `tenure`); a task of its own
/// carries it out ([`Preparer`]). `None` for an instance without a line.
pub(super) fn prepare<S: LeaseStore>(
    elector: &Elector<S>,
    term: &Term,
    tenure: watch::Receiver<Tenure>,
    stop: &CancellationToken,
) -> Option<Preparing> {
    let m = elector.membership.as_ref()?;
    let mutants = preparation::Mutants {
        change_before_gone: elector.mutant.on(Mutant::ChangeBeforeGone),
    };
    let (machine, first) = Preparation::begin(&elector.timing, elector.slots, mutants);
    let machine = Arc::new(Mutex::new(machine));
    let preparer = Preparer {
        machine: machine.clone(),
        group: elector.store.clone(),
        store: elector.store_of(term.slot).clone(),
        observer: elector.observer.clone(),
        clock: elector.clock,
        line: m.line.clone(),
        departure: m.departure(),
        holder: holder_of(elector, term),
        term: term.clone(),
        tenure,
        requested: stop.clone(),
    };
    let departs = lock(&machine).departs_on_a_timer();
    let task = crate::spawn::spawn(preparer.run(first));
    let departing = departs.then(|| {
        let (machine, requested) = (machine.clone(), stop.clone());
        crate::spawn::spawn(departing(elector.clock, machine, requested, m.departure()))
    });
    Some(Preparing {
        stop: stop.clone(),
        clock: elector.clock,
        machine,
        task,
        departing,
    })
}

/// The task that carries out a [`Preparation`]'s actions, and what it works with.
struct Preparer<S> {
    machine: Arc<Mutex<Preparation>>,
    /// The group's store (member records, listings).
    group: Arc<S>,
    /// The store of the term's slot (its notice; the mutant's `change`).
    store: Arc<S>,
    observer: Arc<dyn Observer>,
    /// The elector's clocks.
    clock: Clock,
    line: Arc<Mutex<Line>>,
    departure: Departure,
    holder: Holder,
    term: Term,
    /// The renew task's hold on the lease.
    tenure: watch::Receiver<Tenure>,
    /// Cancelled once a stop is requested.
    requested: CancellationToken,
}

impl<S: LeaseStore> Preparer<S> {
    /// Carries out `actions` and those that follow, reporting what ended each, until the core
    /// says what was prepared.
    async fn run(
        self,
        mut actions: Vec<preparation::Action<Instant, MemberRecord, Noticed, StoreError>>,
    ) -> Option<Prepared> {
        loop {
            let mut event = None;
            for action in actions {
                event = match action {
                    preparation::Action::Done(prepared) => return prepared,
                    action => self.carry_out(action).await,
                };
            }
            let event = event.expect("the core's last action asks for an event");
            let mut grounds = Asked {
                tenure: &self.tenure,
                line: &self.line,
            };
            actions = lock(&self.machine).step(self.clock.now(), event, &mut grounds);
        }
    }

    /// Carries out one action: what ended it, if it waits.
    async fn carry_out(
        &self,
        action: preparation::Action<Instant, MemberRecord, Noticed, StoreError>,
    ) -> Option<preparation::Event<MemberRecord, Noticed, StoreError>> {
        use preparation::{Action, Event};
        match action {
            Action::AwaitStop => {
                self.requested.cancelled().await;
                Some(Event::Stopped)
            }
            Action::Choose { limit } => {
                let chooser = ChoiceShell {
                    group: &*self.group,
                    store: &*self.store,
                    observer: &*self.observer,
                    clock: self.clock,
                    line: &self.line,
                    to: None,
                    term: &self.term,
                    holder: &self.holder,
                };
                Some(Event::Chosen(choose(chooser, limit).await))
            }
            Action::Depart => {
                self.departure.depart();
                None
            }
            Action::Change(next) => {
                let to = next.member.acquires_with;
                let _ = self.store.change(self.term.lease, to, None).await;
                Some(Event::Changed)
            }
            Action::Done(_) => unreachable!("`run` returns it"),
        }
    }
}

/// What the preparation asks of the member, answered at the moment asked.
struct Asked<'a> {
    tenure: &'a watch::Receiver<Tenure>,
    line: &'a Mutex<Line>,
}

impl preparation::Grounds<Instant, MemberRecord> for Asked<'_> {
    fn held_until(&mut self) -> Option<Instant> {
        match *self.tenure.borrow() {
            Tenure::Held(deadline) => Some(deadline.kill_at),
            _ => None,
        }
    }

    fn successor(&mut self) -> Option<MemberRecord> {
        successor_in(&lock(self.line), None)
    }
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
        &self,
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
            mutants: handoff::Mutants {
                hop_waits_out_refusal: self.mutant.on(Mutant::HopWaitsOutRefusal),
            },
        };
        let term_of = self.handoff_term(term, &end, deadline.kill_at);
        let (machine, actions) =
            handoff::Handoff::begin(&self.timing, self.clock.now(), term_of, begin);
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
    /// request whose body took longer than
    /// [`Pace::DEPART_AFTER`](leasehold_core::Pace::DEPART_AFTER) to stop that was done while
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
                let prepared = prepared.map(|(at, choice)| (at, choice.map_notice(|n| n.etag)));
                Event::Prepared(prepared)
            }
            Action::Guess => Event::Guessed(
                m.with(|l| {
                    l.succession
                        .listed_this_term()
                        .then(|| successor_in(l, None))
                })
                .flatten(),
            ),
            Action::Choose { standby, limit } => {
                // A member in a cooldown says so before anyone could hand it the lease back.
                let standby = standby.map(|cooldown| self.clock.wall() + cooldown);
                let (store, observer) = (&*self.store, &*self.observer);
                let chooser = ChoiceShell {
                    group: store,
                    store: &**self.store_of(h.term.slot),
                    observer,
                    clock: self.clock,
                    line: &m.line,
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
