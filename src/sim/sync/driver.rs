//! The synchronous driver ([`Sim`]): N core members and one [`MemoryStore`] on virtual
//! instants, with no runtime. One queue of events in time order (ties in the order they were
//! queued): each store call travels up for a drawn delay, is judged at its arrival
//! (`MemoryStore::apply`), and its return travels down for another; a call with no return by
//! its limit is answered with its timeout (docs/safety.md, rule 4), and a return after that is
//! dropped; each member's one timer comes from `awaits()`; its body starts at `StartBody` and
//! is gone a short while after `StopBody`; a wake-up goes to the member it names directly.
//! Every draw (delays, lease ids, a member's own draws) comes from one seeded
//! [`fastrand::Rng`]: a seed replays its history exactly.
//!
//! What it does not model yet: faults (lost, late or refused requests, pauses, crashes), the
//! checker's trace, the guard, and the handoff's own requests, which the core's translation
//! does not carry yet (they are answered as storage never answering them, at their limit).

use super::kinds::Shell;
use crate::store::{Call, LeaseId, Member as Published, MemoryStore, Return, StoreError};
use leasehold_core::Timing;
use leasehold_core::carry::{self, Carrying, Start, Step, View};
use leasehold_core::exchange::{Answer, Send, Tag};
use leasehold_core::leading::{self, Stop};
use leasehold_core::member::{Env, Input, Member, Mutants, Output, Reply, Request, Settings};
use leasehold_core::term::TermEnd;
use leasehold_core::wake::WakeAnswer;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// A core member on the shell's data.
type Core = Member<Instant, Shell, StoreError>;

/// How long a body takes to end once told to stop.
const BODY_STOPS_IN: Duration = Duration::from_millis(200);
/// The shortest and longest way of a call to the store, and of its return.
const WAY: (u64, u64) = (2, 40);
/// The wall clock at the start of every history (2026-01-01, as the tokio simulator's).
const WALL_START: OffsetDateTime = match OffsetDateTime::from_unix_timestamp(1_767_225_600) {
    Ok(start) => start,
    Err(_) => OffsetDateTime::UNIX_EPOCH,
};

/// What happened, for a test to read and a replay to compare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Happened {
    /// When, from the start of the history.
    pub(crate) at: Duration,
    /// To which member.
    pub(crate) member: usize,
    /// What.
    pub(crate) what: What,
}

/// What happened to a member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum What {
    /// It started.
    Started,
    /// A call of its reached the store, and was answered so (`ok`: without an error).
    Judged {
        /// The call's name.
        call: &'static str,
        /// Whether it succeeded.
        ok: bool,
    },
    /// Its body started, under the term of `epoch` on `slot`.
    BodyStarted {
        /// The term's epoch.
        epoch: u64,
        /// Its slot.
        slot: u32,
    },
    /// Its body is gone.
    BodyGone,
    /// It was asked to shut down.
    Shutdown,
    /// It is over.
    Over,
}

/// An event on the queue.
enum Event {
    /// The member starts.
    Start(usize),
    /// The member is asked to shut down.
    Shutdown(usize),
    /// A call reaches the store.
    Arrive {
        seat: usize,
        tag: Tag,
        way: u64,
        call: Call,
    },
    /// A call's return reaches its member.
    Back {
        seat: usize,
        tag: Tag,
        way: u64,
        ret: Return,
    },
    /// A call's limit came.
    Cut { seat: usize, tag: Tag, way: u64 },
    /// A reply given without the store (or the cut of a request not carried) reaches it.
    Reply {
        seat: usize,
        tag: Tag,
        reply: Reply<Shell, StoreError>,
    },
    /// A wake-up reaches member `to`; its answer goes back to `seat`'s request `tag`.
    Wake { seat: usize, tag: Tag, to: usize },
    /// The member's timer.
    Timer { seat: usize, round: u64 },
    /// The body may campaign.
    MayCampaign(usize),
    /// The body is gone.
    BodyGone { seat: usize, end: TermEnd },
}

/// A request of a member on its way: the translation carrying it, the call sent last, which
/// way it is on (a return of an earlier call is stale), when the request was sent.
struct Open {
    carrying: Option<Carrying<Instant, Shell>>,
    call: Option<Call>,
    way: u64,
    sent: Instant,
}

/// One member and what its shell keeps for it.
struct Seat {
    core: Core,
    record_lease: LeaseId,
    open: HashMap<Tag, Open>,
    /// The instant its timer is set for, and the timer's generation.
    timer: Option<Instant>,
    round: u64,
    /// Its body runs (and is not yet told to stop).
    body: Option<bool>,
}

/// A member's shell's draws, lease ids and wall clock, from the history's generator.
struct Draws<'a> {
    rng: &'a mut fastrand::Rng,
    wall_ms: u64,
}

impl Env<Shell> for Draws<'_> {
    fn draw(&mut self) -> f64 {
        self.rng.f64()
    }
    fn lease_id(&mut self) -> LeaseId {
        LeaseId::of_bits(self.rng.u128(..))
    }
    fn wall_ms(&mut self) -> u64 {
        self.wall_ms
    }
}

/// A history: the members, the store, the queue, what happened.
pub(crate) struct Sim {
    store: MemoryStore,
    t0: Instant,
    now: Instant,
    queue: BTreeMap<(Instant, u64), Event>,
    seq: u64,
    ways: u64,
    rng: fastrand::Rng,
    seats: Vec<Seat>,
    /// Bodies running now.
    running: usize,
    /// The most bodies ever running at once.
    pub(crate) most_bodies: usize,
    /// Everything that happened, in order.
    pub(crate) log: Vec<Happened>,
    /// The events taken off the queue.
    pub(crate) events: u64,
}

impl Sim {
    /// A history of the seed `seed`, with the members `names` (not started), on one slot.
    pub(crate) fn new(seed: u64, names: &[&str]) -> Self {
        let mut rng = fastrand::Rng::with_seed(seed);
        let timing = Timing::default();
        let seats = names
            .iter()
            .map(|me| {
                let id = LeaseId::of_bits(rng.u128(..));
                let settings = Settings {
                    timing,
                    slots: 1,
                    me: (*me).to_owned(),
                    priority: 0,
                    preempt_after: None,
                    create_if_missing: true,
                    one_term: false,
                    mutants: Mutants::default(),
                };
                let published = Published {
                    identity: (*me).to_owned(),
                    priority: 0,
                    acquires_with: id,
                    advertise: None,
                    wake_token: None,
                    standby_until: None,
                    slots: 1,
                    settled: None,
                };
                Seat {
                    core: Member::new(settings, published, id),
                    record_lease: LeaseId::of_bits(rng.u128(..)),
                    open: HashMap::new(),
                    timer: None,
                    round: 0,
                    body: None,
                }
            })
            .collect();
        let t0 = Instant::now();
        Self {
            store: MemoryStore::default(),
            t0,
            now: t0,
            queue: BTreeMap::new(),
            seq: 0,
            ways: 0,
            rng,
            seats,
            running: 0,
            most_bodies: 0,
            log: Vec::new(),
            events: 0,
        }
    }

    /// Member `seat` starts `after` the start of the history.
    pub(crate) fn start(&mut self, seat: usize, after: Duration) {
        self.at(self.t0 + after, Event::Start(seat));
    }

    /// Member `seat` is asked to shut down `after` the start of the history.
    pub(crate) fn shutdown(&mut self, seat: usize, after: Duration) {
        self.at(self.t0 + after, Event::Shutdown(seat));
    }

    /// The virtual time since the start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.now - self.t0
    }

    /// Whether member `seat` is over.
    pub(crate) fn is_over(&self, seat: usize) -> bool {
        self.seats[seat].core.is_over()
    }

    /// The lease blob as the store has it now: its holder's epoch and whether it is leased.
    pub(crate) fn blob(&self) -> (Option<u64>, bool) {
        let wall = self.wall();
        match self.store.apply(&Call::Read { slot: 0 }, self.now, wall) {
            Return::Read(Ok(read)) => (
                read.holder.map(|h| h.epoch),
                read.lease == crate::store::LeaseState::Leased,
            ),
            _ => (None, false),
        }
    }

    /// Runs the history until `until` after its start, or until nothing is left to happen.
    pub(crate) fn run_until(&mut self, until: Duration) {
        let end = self.t0 + until;
        while let Some(entry) = self.queue.first_entry() {
            if entry.key().0 > end {
                break;
            }
            let ((at, _), event) = entry.remove_entry();
            self.now = at;
            self.events += 1;
            self.take(event);
        }
        self.now = self
            .now
            .max(end.min(self.queue.keys().next().map_or(end, |k| k.0)));
    }

    /// Queues `event` at `at`.
    fn at(&mut self, at: Instant, event: Event) {
        self.seq += 1;
        self.queue.insert((at, self.seq), event);
    }

    /// The wall clock now.
    fn wall(&self) -> OffsetDateTime {
        WALL_START + (self.now - self.t0)
    }

    /// A drawn way to or from the store.
    fn way(&mut self) -> Duration {
        Duration::from_millis(self.rng.u64(WAY.0..=WAY.1))
    }

    fn note(&mut self, member: usize, what: What) {
        let at = self.now - self.t0;
        self.log.push(Happened { at, member, what });
    }

    /// One event.
    fn take(&mut self, event: Event) {
        match event {
            Event::Start(seat) => {
                self.note(seat, What::Started);
                self.step(seat, Input::Start);
            }
            Event::Shutdown(seat) => {
                self.note(seat, What::Shutdown);
                self.step(seat, Input::Shutdown);
            }
            Event::Arrive {
                seat,
                tag,
                way,
                call,
            } => {
                let ret = self.store.apply(&call, self.now, self.wall());
                let ok = ret.is_ok();
                self.note(
                    seat,
                    What::Judged {
                        call: ret.name(),
                        ok,
                    },
                );
                let back = self.now + self.way();
                self.at(
                    back,
                    Event::Back {
                        seat,
                        tag,
                        way,
                        ret,
                    },
                );
            }
            Event::Back {
                seat,
                tag,
                way,
                ret,
            } => self.returned(seat, tag, way, ret),
            Event::Cut { seat, tag, way } => {
                let open = self.seats[seat].open.get(&tag);
                let Some(call) = open.filter(|o| o.way == way).and_then(|o| o.call.as_ref()) else {
                    return;
                };
                let span = self.now - open.map_or(self.now, |o| o.sent);
                let ret = call.failed(StoreError::TimedOut(span));
                self.returned(seat, tag, way, ret);
            }
            Event::Reply { seat, tag, reply } => self.reply(seat, tag, reply),
            Event::Wake { seat, tag, to } => {
                let woken = self.step(
                    to,
                    Input::Wake {
                        token_matches: true,
                        handoff: None,
                    },
                );
                let wake = match woken {
                    Some(WakeAnswer::Accepted) => leasehold_core::confirmation::Wake::Accepted,
                    _ => leasehold_core::confirmation::Wake::Missed,
                };
                self.reply(seat, tag, Reply::Leading(leading::Reply::Woke(wake)));
            }
            Event::Timer { seat, round } => {
                if self.seats[seat].round == round {
                    self.seats[seat].timer = None;
                    self.step(seat, Input::Timer);
                }
            }
            Event::MayCampaign(seat) => {
                self.step(seat, Input::MayCampaign(true));
            }
            Event::BodyGone { seat, end } => {
                self.seats[seat].body = None;
                self.running -= 1;
                self.note(seat, What::BodyGone);
                self.step(seat, Input::BodyGone(end));
            }
        }
    }

    /// A call's return (or its cut) for `seat`'s request `tag`, on way `way`.
    fn returned(&mut self, seat: usize, tag: Tag, way: u64, ret: Return) {
        let now = self.now;
        let Some(open) = self.seats[seat].open.get_mut(&tag) else {
            return;
        };
        if open.way != way {
            return;
        }
        let Some(carrying) = open.carrying.as_mut() else {
            return;
        };
        match carrying.answer(ret, now) {
            Step::Call(next) => self.send_call(seat, tag, next),
            Step::Reply(reply) => self.reply(seat, tag, reply),
        }
    }

    /// The reply to `seat`'s request `tag`, unless it was forgotten.
    fn reply(&mut self, seat: usize, tag: Tag, reply: Reply<Shell, StoreError>) {
        let Some(open) = self.seats[seat].open.remove(&tag) else {
            return;
        };
        let answer = Answer {
            tag,
            sent: open.sent,
            answer: reply,
        };
        self.step(seat, Input::Answer(answer));
    }

    /// Sends `call` for `seat`'s request `tag`: up to the store, cut at its limit.
    fn send_call(&mut self, seat: usize, tag: Tag, call: Call) {
        self.ways += 1;
        let way = self.ways;
        let Some(open) = self.seats[seat].open.get_mut(&tag) else {
            return;
        };
        open.way = way;
        open.call = Some(call.clone());
        let limit = open.carrying.as_ref().and_then(Carrying::limit);
        if let Some(limit) = limit {
            self.at(limit, Event::Cut { seat, tag, way });
        }
        let arrive = self.now + self.way();
        let event = Event::Arrive {
            seat,
            tag,
            way,
            call,
        };
        self.at(arrive, event);
    }

    /// Steps member `seat` with `input` and carries out what it says; the answer to a wake-up
    /// it took, if any.
    fn step(
        &mut self,
        seat: usize,
        input: Input<Instant, Shell, StoreError>,
    ) -> Option<WakeAnswer> {
        let (now, wall) = (self.now, self.wall());
        let wall_ms = (wall.unix_timestamp_nanos() / 1_000_000) as u64;
        let mut env = Draws {
            rng: &mut self.rng,
            wall_ms,
        };
        let outputs = self.seats[seat].core.handle(now, wall, input, &mut env);
        let mut woken = None;
        for output in outputs {
            if let Output::Woken(answer) = output {
                woken = Some(answer);
            } else {
                self.output(seat, output);
            }
        }
        self.set_timer(seat);
        woken
    }

    /// Sets `seat`'s one timer as its member awaits it.
    fn set_timer(&mut self, seat: usize) {
        let until = self.seats[seat].core.awaits().waiting.until;
        let s = &mut self.seats[seat];
        if until == s.timer {
            return;
        }
        s.round += 1;
        s.timer = until;
        let round = s.round;
        if let Some(until) = until {
            self.at(until.max(self.now), Event::Timer { seat, round });
        }
    }

    /// Carries out one output of member `seat`.
    fn output(&mut self, seat: usize, output: Output<Instant, Shell, StoreError>) {
        match output {
            Output::Send(Send { tag, request }) => self.send(seat, tag, &request),
            Output::Forget(tag) => {
                self.seats[seat].open.remove(&tag);
            }
            Output::StartBody(term) => {
                self.seats[seat].body = Some(true);
                self.running += 1;
                self.most_bodies = self.most_bodies.max(self.running);
                let (epoch, slot) = (term.epoch, term.slot);
                self.note(seat, What::BodyStarted { epoch, slot });
            }
            Output::StopBody(stop) => {
                if self.seats[seat].body == Some(true) {
                    self.seats[seat].body = Some(false);
                    let end = match stop {
                        Stop::Shutdown => TermEnd::Shutdown,
                        Stop::Preempted(_) => TermEnd::Released,
                    };
                    self.at(self.now + BODY_STOPS_IN, Event::BodyGone { seat, end });
                }
            }
            Output::AskBody => self.at(self.now, Event::MayCampaign(seat)),
            Output::End(_) => self.note(seat, What::Over),
            Output::Tenure(_)
            | Output::SteppedDown { .. }
            | Output::Role(_)
            | Output::Woken(_)
            | Output::ShowLine
            | Output::Say(_)
            | Output::Note(_)
            | Output::Rounded(_) => {}
        }
    }

    /// Sends `seat`'s request `tag`: its first call, a reply at once, a wake-up or a probe
    /// answered here, or the cut of a request not carried at its limit.
    fn send(&mut self, seat: usize, tag: Tag, request: &Request<Instant, Shell>) {
        let (now, wall) = (self.now, self.wall());
        let s = &self.seats[seat];
        let view = View {
            known: s.core.known(),
            kept: s.core.kept(),
            next_id: s.core.next_id(),
            record_lease: &s.record_lease,
            create_if_missing: true,
        };
        let start = carry::carry(&view, request, now, wall);
        let open = |carrying| Open {
            carrying,
            call: None,
            way: 0,
            sent: now,
        };
        match start {
            Start::Call(carrying, call) => {
                self.seats[seat].open.insert(tag, open(Some(carrying)));
                self.send_call(seat, tag, call);
            }
            Start::Reply(reply) => {
                self.seats[seat].open.insert(tag, open(None));
                self.at(now, Event::Reply { seat, tag, reply });
            }
            Start::NotCarried { limit, cut } => {
                self.seats[seat].open.insert(tag, open(None));
                if let Some(limit) = limit {
                    self.at(
                        limit,
                        Event::Reply {
                            seat,
                            tag,
                            reply: cut,
                        },
                    );
                }
            }
            Start::Http => {
                self.seats[seat].open.insert(tag, open(None));
                self.http(seat, tag, request);
            }
        }
    }

    /// A probe or a wake-up: members advertise no URL here, so a waiting member's probe finds
    /// its member standing; a leader's probe finds a member that is not over; a wake-up goes
    /// to the member it names.
    fn http(&mut self, seat: usize, tag: Tag, request: &Request<Instant, Shell>) {
        let seat_of = |sim: &Self, identity: &str| {
            (sim.seats.iter()).position(|s| s.core.known().line.me == identity)
        };
        let reply = match request {
            Request::Leading(leading::Request::Probe { to, .. }) => {
                let alive = seat_of(self, to).is_some_and(|i| !self.is_over(i));
                Reply::Leading(leading::Reply::Probed(alive))
            }
            Request::Leading(leading::Request::Wake { to, .. }) => {
                if let Some(to) = seat_of(self, to.identity()) {
                    let at = self.now + self.way();
                    self.at(at, Event::Wake { seat, tag, to });
                    return;
                }
                Reply::Leading(leading::Reply::Woke(
                    leasehold_core::confirmation::Wake::Unreachable,
                ))
            }
            // A waiting member's probe of the member ahead: no URL, so it stands.
            _ => Reply::Probed(false),
        };
        self.at(self.now, Event::Reply { seat, tag, reply });
    }
}
