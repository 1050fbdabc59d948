//! The core member behind one lock ([`Shared`]), stepped by its driver and by its
//! [`Waker`](crate::elector::Waker) alike: a wake-up is answered in the caller's own step
//! (`Waker::wake` answers synchronously, in a user's HTTP handler and the daemon's), and
//! whatever else that step says joins the one queue of jobs the driver carries out, in the
//! order the member said it. Each request is started as the core's translation says
//! (`carry::carry`) in the step that sent it, on what the member knew right then; what people
//! see of the line is read then too.

use crate::clock::Clock;
use crate::elector::members::{LineView, view_at};
use crate::elector::term::Term;
use crate::elector::wake::{Reserved, Wakeable};
use crate::random;
use crate::secret::Secret;
use crate::store::Shell;
use crate::store::{BlobState, Call, Holder, LeaseId, LeaseState, MemberRecord, StoreError};
use leasehold_core::campaign;
use leasehold_core::carry::{self, Carrying, Start, View};
use leasehold_core::exchange::{Send, Tag};
use leasehold_core::leading;
use leasehold_core::member::{Awaits, Env, Input, Member, Output, Reply, Request, Say};
use leasehold_core::slots::WaitRequest;
use leasehold_core::wake::WakeAnswer;
use leasehold_core::watch;
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use time::OffsetDateTime;
use tokio::sync::Notify;
use tokio::time::Instant;

/// A core member on the shell's data.
pub(crate) type Core = Member<Instant, Shell, StoreError>;
/// What it says.
pub(crate) type Out = Output<Instant, Shell, StoreError>;
/// What it is told.
pub(crate) type In = Input<Instant, Shell, StoreError>;
/// What came back of one of its requests.
pub(crate) type Answered = Reply<Shell, StoreError>;

/// What the driver carries out, in the order the member said it.
pub(crate) enum Job {
    /// Send the request `tag`, as its translation starts it.
    Send { tag: Tag, sending: Box<Sending> },
    /// Start the body under this term.
    StartBody(Term),
    /// Show the line so (the observer's `/status`).
    Show(LineView),
    /// Any other output.
    Out(Box<Out>),
}

/// How a request goes out.
pub(crate) enum Sending {
    /// A store call; `own`: on the member records' own connections.
    Call {
        carrying: Box<Carrying<Instant, Shell>>,
        call: Call,
        own: bool,
    },
    /// Answered at once, nothing sent.
    Reply(Answered),
    /// Not translated yet: answered `cut` at `limit`, as storage never answering.
    NotCarried {
        limit: Option<Instant>,
        cut: Answered,
    },
    /// A probe of the member ahead, at its URL with its wake token (`None`: nothing to
    /// probe): a waiting member's or a watcher's.
    ProbeAhead { at: Option<(String, Secret)> },
    /// The preferred leader's lookout probes the member due at this URL.
    Probe(String),
    /// The member handed the lease on `slot` is woken.
    Wake {
        to: Box<MemberRecord>,
        reserved: Option<Reserved>,
        slot: u32,
    },
}

/// What people see beside the line: the last leader as read, the group's other count, a
/// preemption armed.
#[derive(Default)]
struct Shown {
    holder: Option<(Holder, OffsetDateTime)>,
    mismatch: Option<u32>,
    preempting: Option<(String, OffsetDateTime)>,
}

/// The member and what its shell keeps for it, under one lock.
pub(crate) struct Stepper {
    core: Core,
    /// The lease id of its member record, for the record's lifetime.
    record_lease: LeaseId,
    create_if_missing: bool,
    clock: Clock,
    random: random::Source,
    jobs: VecDeque<Job>,
    shown: Shown,
}

/// The member's draws, lease ids and wall clock, from the elector's sources.
struct Draws {
    random: random::Source,
    wall_ms: u64,
}

impl Env<Shell> for Draws {
    fn draw(&mut self) -> f64 {
        fastrand::f64()
    }
    fn lease_id(&mut self) -> LeaseId {
        LeaseId::drawn(self.random)
    }
    fn wall_ms(&mut self) -> u64 {
        self.wall_ms
    }
}

impl Stepper {
    pub(crate) fn new(
        core: Core,
        record_lease: LeaseId,
        create_if_missing: bool,
        clock: Clock,
        random: random::Source,
    ) -> Self {
        Self {
            core,
            record_lease,
            create_if_missing,
            clock,
            random,
            jobs: VecDeque::new(),
            shown: Shown::default(),
        }
    }

    /// Steps the member with `input` now; its outputs join the queue. The answer to a wake-up
    /// it took, if any.
    fn step(&mut self, input: In) -> Option<WakeAnswer> {
        let (now, wall) = (self.clock.now(), self.clock.wall());
        let mut env = Draws {
            random: self.random,
            wall_ms: (wall.unix_timestamp_nanos() / 1_000_000) as u64,
        };
        let mut woken = None;
        for output in self.core.handle(now, wall, input, &mut env) {
            match output {
                Output::Woken(answer) => woken = Some(answer),
                Output::Send(Send { tag, request }) => {
                    let sending = Box::new(self.start(&request, now, wall));
                    self.jobs.push_back(Job::Send { tag, sending });
                }
                Output::StartBody(term) => {
                    let term = self.term(term);
                    self.jobs.push_back(Job::StartBody(term));
                }
                Output::ShowLine => {
                    let view = self.view();
                    self.jobs.push_back(Job::Show(view));
                }
                other => {
                    self.shown(&other, wall);
                    self.jobs.push_back(Job::Out(Box::new(other)));
                }
            }
        }
        woken
    }

    /// Starts `request` as the core's translation says, on what the member knows now.
    fn start(
        &self,
        request: &Request<Instant, Shell>,
        now: Instant,
        wall: OffsetDateTime,
    ) -> Sending {
        let view = View {
            known: self.core.known(),
            kept: self.core.kept(),
            next_id: self.core.next_id(),
            record_lease: &self.record_lease,
            create_if_missing: self.create_if_missing,
        };
        match carry::carry(&view, request, now, wall) {
            Start::Call(carrying, call) => Sending::Call {
                carrying: Box::new(carrying),
                call,
                own: own_connections(request),
            },
            Start::Reply(reply) => Sending::Reply(reply),
            Start::NotCarried { limit, cut } => Sending::NotCarried { limit, cut },
            Start::Http => self.http(request),
        }
    }

    /// A probe or a wake-up, for the HTTP client.
    fn http(&self, request: &Request<Instant, Shell>) -> Sending {
        match request {
            Request::Leading(leading::Request::Probe { url, .. }) => Sending::Probe(url.clone()),
            Request::Leading(leading::Request::Wake { to, reserved }) => Sending::Wake {
                to: to.clone(),
                reserved: reserved.clone(),
                slot: self.core.kept().slot,
            },
            Request::Campaign(campaign::Request::Wait(WaitRequest::Probe(ahead))) => {
                let line = &self.core.known().line;
                let record = line.members.iter().find(|r| &r.key == ahead);
                let at = record.and_then(|r| {
                    let url = r.member.advertise.clone()?;
                    Some((url, r.member.wake_token.clone()?))
                });
                Sending::ProbeAhead { at }
            }
            // A watcher's probe of the member ahead: the record its line has.
            Request::Campaign(campaign::Request::Watch(watch::Request::ProbeAhead)) => {
                let at = self.core.kept().ahead.as_ref().and_then(|r| {
                    let url = r.member.advertise.clone()?;
                    Some((url, r.member.wake_token.clone()?))
                });
                Sending::ProbeAhead { at }
            }
            _ => Sending::ProbeAhead { at: None },
        }
    }

    /// The body's term, as the member won it.
    fn term(&mut self, term: leasehold_core::member::Term<Instant, OffsetDateTime>) -> Term {
        let wall = self.clock.wall();
        let lease = (self.core.kept().id).unwrap_or(*self.core.next_id());
        let acquired_at = term.acquired.unwrap_or(wall);
        let holder = Holder {
            identity: self.core.known().line.me.clone(),
            epoch: term.epoch,
            acquired_at,
            lease: Some(lease),
            slots: None,
            stamp: Default::default(),
        };
        self.shown.holder = Some((holder, wall));
        Term {
            slot: term.slot,
            lease,
            epoch: term.epoch,
            deadline: term.deadline,
            acquired_at,
        }
    }

    /// What an output changes of what people see beside the line.
    fn shown(&mut self, output: &Out, wall: OffsetDateTime) {
        match output {
            Output::Note(leasehold_core::member::Note::Mismatch(recorded)) => {
                self.shown.mismatch = *recorded;
            }
            Output::Say(Say::Pending(pending)) => {
                self.shown.preempting = pending.as_ref().map(|(to, within)| {
                    (
                        to.clone(),
                        wall + time::Duration::try_from(*within).unwrap_or_default(),
                    )
                });
            }
            Output::Role(_) => self.shown.preempting = None,
            _ => {}
        }
    }

    /// What `/status` shows of the line now.
    fn view(&self) -> LineView {
        let known = self.core.known();
        view_at(
            &known.line,
            self.shown.holder.as_ref(),
            self.shown.mismatch,
            self.shown.preempting.as_ref(),
            (self.clock.now(), self.clock.wall()),
        )
    }
}

/// The member behind its lock, and the bell the driver listens for when a step of the Waker
/// queued jobs.
pub(crate) struct Shared {
    stepper: Mutex<Stepper>,
    queued: Notify,
}

impl Shared {
    pub(crate) fn new(stepper: Stepper) -> Self {
        Self {
            stepper: Mutex::new(stepper),
            queued: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Stepper> {
        self.stepper.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Steps the member with `input` now.
    pub(crate) fn step(&self, input: In) -> Option<WakeAnswer> {
        self.lock().step(input)
    }

    /// The next job, in the order the member said them.
    pub(crate) fn next_job(&self) -> Option<Job> {
        self.lock().jobs.pop_front()
    }

    /// What ends the member's wait now.
    pub(crate) fn awaits(&self) -> Awaits<Instant> {
        self.lock().core.awaits()
    }

    /// Resolves once a step from outside the driver queued jobs (at once if one did since).
    pub(crate) async fn queued(&self) {
        self.queued.notified().await;
    }

    /// The lease id the next acquire goes out with.
    pub(crate) fn next_id(&self) -> LeaseId {
        *self.lock().core.next_id()
    }

    /// Whether storage has accepted the credentials.
    pub(crate) fn authorized(&self) -> bool {
        self.lock().core.known().authorized
    }

    /// A read of the lease blob: its holder, while leased, is the leader people see.
    pub(crate) fn read(&self, state: &BlobState) {
        let mut s = self.lock();
        // A leader knows better: the blob names it, or a successor it is handing to.
        if s.core.known().line.leading {
            return;
        }
        let wall = s.clock.wall();
        s.shown.holder = (state.holder.clone())
            .filter(|_| state.lease == LeaseState::Leased)
            .map(|h| (h, wall));
    }
}

impl Wakeable for Shared {
    fn wake(&self, token_matches: bool, handoff: Option<&str>) -> WakeAnswer {
        let input = Input::Wake {
            token_matches,
            handoff: handoff.map(str::to_owned),
        };
        let answer = self.step(input);
        self.queued.notify_one();
        answer.unwrap_or(WakeAnswer::TooSoon)
    }
}

/// Whether `request` goes over the member records' own connections: the record keeper's, on
/// whichever replica it goes to (a member on several replicas keeps its record on each).
fn own_connections(request: &Request<Instant, Shell>) -> bool {
    match request {
        Request::Keeper(_) => true,
        Request::OnReplica { request, .. } => own_connections(request),
        _ => false,
    }
}
