//! The synchronous world ([`Sim`]): the members of a history as core [`Member`]s and one
//! [`MemoryStore`] on virtual instants, with no runtime. One queue of events in time order
//! (ties in the order they were queued). Each store call travels up over its member's link (the
//! tokio engine's trips and faults: src/sim/network.rs), is judged at its arrival
//! (`MemoryStore::apply_seen`, traced as [`What::Applied`] whatever became of its sender), and
//! its return travels down ([`What::Answered`]); a call with no return by its limit is answered
//! with its timeout (docs/safety.md, rule 4), and a return after that is dropped. Each member's
//! one timer comes from `timer()`. Every draw of the protocol (a member's jitter, lease ids,
//! wake tokens) comes from one generator seeded with the history's seed; the world's draws
//! (network, bodies, director) from the same [`Dice`] streams as the tokio engine's: a seed
//! replays its history exactly.
//!
//! This file owns the queue, the stepping of members and the carrying of their store calls;
//! lives.rs their processes' lives and wake-ups, body.rs their bodies, director.rs the faults.

use super::body::Body;
use super::state::{Directing, Event, Forger, Replicas, Small, Storm, Trip, Who};
use crate::crash_loop::CrashLoop;
use crate::sim::check::STANDSTILL;
use crate::sim::dice::{Dice, Stream};
use crate::sim::network::{Faults, erased};
use crate::sim::trace::{MemberId, Trace, What};
use crate::sim::world::{Member as Cast, Shape};
use crate::store::Shell;
use crate::store::memory::{MemoryStore, op_of};
use crate::store::{Call, LeaseId, Op, Return, StoreError};
use leasehold_core::Timing;
use leasehold_core::carry::{self, Carrying, Start, Step, View};
use leasehold_core::exchange::{Answer, Send, Tag};
use leasehold_core::member::{Env, Input, Member, Mutants, Output, Reply, Request};
use std::cell::Cell;
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::rc::Rc;
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::Instant;

/// A core member on the shell's data.
pub(super) type Core = Member<Instant, Shell, StoreError>;

/// The wall clock at the start of every history (2026-01-01).
const WALL_START: OffsetDateTime = match OffsetDateTime::from_unix_timestamp(1_767_225_600) {
    Ok(start) => start,
    Err(_) => OffsetDateTime::UNIX_EPOCH,
};

/// The wall clock at the start of every history, in milliseconds since 1970.
const WALL_START_MS: u64 = 1_767_225_600_000;

/// The bits of a queue key that name an event's place in `queued` (a history's queue holds
/// about a hundred at most), and their mask.
const PLACE_BITS: u32 = 24;
const PLACES: usize = (1 << PLACE_BITS) - 1;

/// A request of a member on its way: the translation carrying it, the call sent last, which
/// way it is on (a return of an earlier call is stale), when the request was sent.
pub(super) struct Open {
    carrying: Option<Carrying<Instant, Shell>>,
    /// Shared with its arrival at the store (a call is copied nowhere).
    call: Option<Rc<Call>>,
    way: u64,
    sent: Instant,
    /// The store its calls go to (0 unless the group is on a replica set).
    store: usize,
}

/// One start of a member's process, and what its shell keeps for it.
pub(super) struct Process {
    pub(super) generation: u64,
    pub(super) core: Core,
    pub(super) record_lease: LeaseId,
    /// Its wake token, which its record publishes.
    pub(super) token: String,
    pub(super) open: Small<Tag, Open>,
    /// The instant its timer is set for, and the timer's generation.
    pub(super) timer: Option<Instant>,
    pub(super) round: u64,
    /// Its network's draws (each request's trip), and its bodies'.
    pub(super) net: Dice,
    pub(super) bodies: Dice,
    /// Frozen: `Some(true)` its whole machine, `Some(false)` the daemon alone.
    pub(super) frozen: Option<bool>,
    /// What came for it while it was frozen, taken at its thaw in order.
    pub(super) held: Vec<Event>,
    /// Its body, and one that outlived its kill.
    pub(super) body: Option<Body>,
    pub(super) stuck: Option<Body>,
    pub(super) body_round: u64,
    /// Quick failures of its bodies in a row.
    pub(super) crash_loop: CrashLoop,
    /// The lease id of its last acquire of each slot: the lease a body runs under.
    pub(super) acquired: Small<u32, LeaseId>,
    /// The slot of its last term.
    pub(super) last_slot: u32,
    /// Asked to shut down.
    pub(super) shutdown: bool,
    /// Its start-up prepare, until every blob of its group exists (prepare.rs): its member
    /// takes no input before.
    pub(super) preparing: Option<Box<super::state::Preparing>>,
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

/// A history in the synchronous world.
pub(crate) struct Sim {
    pub(super) store: MemoryStore,
    pub(super) t0: Instant,
    pub(super) now: Instant,
    /// `now` since `t0`: what the trace, the queue and the wall clock count in, kept beside
    /// `now` rather than taken from it at every use (an instant's difference normalises
    /// seconds and nanoseconds, at every record and every queued event).
    since: Duration,
    /// The queue: each event's key ([`Sim::key`]: its instant, then its number, ties in the
    /// order queued, and its place in `queued`), one number to compare and to move.
    queue: BinaryHeap<Reverse<u128>>,
    queued: Vec<Option<Event>>,
    free: Vec<usize>,
    /// A member's outputs, empty between its inputs (kept for its room).
    outputs: Vec<Output<Instant, Shell, StoreError>>,
    seq: u64,
    pub(super) ways: u64,
    /// The wall clock at a whole second since the start, the last asked for.
    wall_at: Cell<(u64, OffsetDateTime)>,
    /// The protocol's draws.
    pub(super) rng: fastrand::Rng,
    /// The replica set the group leads on, its stores and regions (replicas.rs); `None`: one
    /// account, `store`.
    pub(super) replicas: Option<Box<Replicas>>,
    pub(super) recorder: Trace,
    pub(super) shape: Shape,
    pub(super) timing: Timing,
    pub(super) slots: u32,
    pub(super) mutants: Mutants,
    /// The mutant the history runs with (its guards' rules break it too).
    pub(super) mutant: Option<crate::mutant::Mutant>,
    /// Every member so far, as the director drew it.
    pub(super) cast: Vec<Cast>,
    /// Each member's running process, if it runs.
    pub(super) running: Vec<Option<Box<Process>>>,
    /// Each member's starts so far.
    pub(super) generations: Vec<u64>,
    /// Each member's wake-ups' draws as they travel.
    pub(super) wakes: Vec<Dice>,
    pub(super) faults: Faults,
    /// Who holds each member record's lease: the member and its start, by lease id.
    pub(super) owners: BTreeMap<LeaseId, Who>,
    /// The director's draws, and the hosts'.
    pub(super) dice: Dice,
    pub(super) hosts: Dice,
    /// The director's state between its looks, its forgers and its storms (director.rs).
    pub(super) directing: Option<Directing>,
    pub(super) forgers: Vec<Forger>,
    pub(super) storms: Vec<Storm>,
    /// A script's bodies: each stops within this of its stop signal, and ends by itself only
    /// when the script says (`None`: drawn bodies); the members whose next body ends at once,
    /// told so while none ran (script.rs).
    pub(super) scripted: Option<Duration>,
    pub(super) end_words: std::collections::BTreeSet<MemberId>,
    /// The events taken off the queue.
    pub(crate) events: u64,
    /// A world broken on purpose, for its test: a body starts as soon as its member sends an
    /// acquire, before the lease is won.
    #[cfg(test)]
    pub(super) early_bodies: bool,
}

impl Sim {
    /// The world of `shape` with `cast` drawn from the director's `dice`; nothing queued yet.
    pub(super) fn new(shape: Shape, cast: crate::sim::world::Cast, dice: Dice) -> Self {
        let t0 = Instant::now();
        let store = MemoryStore::on(crate::store::memory::ServiceClock::faster_by_ppm(cast.ppm));
        if cast.brand_new {
            // None of its blobs exists yet: the first members' start-up prepares create them.
            store.unborn(cast.slots);
        }
        Self {
            store,
            t0,
            now: t0,
            since: Duration::ZERO,
            queue: BinaryHeap::new(),
            queued: Vec::new(),
            free: Vec::new(),
            outputs: Vec::new(),
            seq: 0,
            ways: 0,
            wall_at: Cell::new((0, WALL_START)),
            rng: fastrand::Rng::with_seed(shape.seed),
            replicas: None,
            recorder: Trace::new(),
            hosts: Dice::new(shape.seed, Stream::Hosts),
            shape,
            timing: Timing::default(),
            slots: cast.slots,
            mutants: Mutants::default(),
            mutant: None,
            cast: cast.members,
            running: Vec::new(),
            generations: Vec::new(),
            wakes: Vec::new(),
            faults: Faults::default(),
            owners: BTreeMap::new(),
            dice,
            directing: None,
            forgers: Vec::new(),
            storms: Vec::new(),
            scripted: match cast.plans {
                crate::sim::body::Plans::Scripted { stops_in, .. } => Some(stops_in),
                crate::sim::body::Plans::Drawn => None,
            },
            end_words: Default::default(),
            events: 0,
            #[cfg(test)]
            early_bodies: false,
        }
    }

    /// Runs the history until `until` after its start, or until nothing is left to happen, or
    /// until one instant took more than [`STANDSTILL`] events: then it ends there, time having
    /// stood still (rule (j)).
    pub(crate) fn run_until(&mut self, until: Duration) {
        let end = self.t0 + until;
        let last = until.as_nanos() as u64;
        let (mut instant, mut at_instant) = (u64::MAX, 0);
        while let Some(&Reverse(key)) = self.queue.peek() {
            let (at, place) = ((key >> 64) as u64, (key as usize) & PLACES);
            if at > last {
                break;
            }
            self.queue.pop();
            let event = self.queued[place].take();
            self.free.push(place);
            self.events += 1;
            (instant, at_instant) = match at == instant {
                true => (at, at_instant + 1),
                false => {
                    // The clock moves once an instant (an instant's arithmetic normalises).
                    self.since = Duration::from_nanos(at);
                    self.now = self.t0 + self.since;
                    (at, 1)
                }
            };
            if at_instant > STANDSTILL {
                let member = event.as_ref().and_then(Event::member);
                let events = at_instant;
                return self.record(What::StoodStill { events, member });
            }
            if let Some(event) = event {
                self.take(event);
            }
        }
        if end > self.now {
            (self.now, self.since) = (end, until);
        }
    }

    /// Queues `event` at `at` (never before now).
    pub(super) fn at(&mut self, at: Instant, event: Event) {
        let at = match at > self.now {
            true => (at - self.t0).as_nanos() as u64,
            false => self.since.as_nanos() as u64,
        };
        self.queue_at(at, event);
    }

    /// Queues `event` at `at` nanoseconds from the start (never before now).
    fn queue_at(&mut self, at: u64, event: Event) {
        self.seq += 1;
        let place = match self.free.pop() {
            Some(place) => {
                self.queued[place] = Some(event);
                place
            }
            None => {
                self.queued.push(Some(event));
                self.queued.len() - 1
            }
        };
        self.queue.push(Reverse(Self::key(at, self.seq, place)));
    }

    /// Queues `event` `d` from now: as [`Sim::at`] at `now + d`, without the instants'
    /// arithmetic (the queue counts from the start).
    pub(super) fn after(&mut self, d: Duration, event: Event) {
        self.queue_at((self.since + d).as_nanos() as u64, event);
    }

    /// The key of the event queued as `seq`-th at `at` (in nanoseconds since `t0`), in
    /// `place`: the instant in the high word, the number below it, the place in the lowest
    /// bits (which order nothing: numbers are unique).
    fn key(at: u64, seq: u64, place: usize) -> u128 {
        debug_assert!(place <= PLACES && seq < 1 << (64 - PLACE_BITS));
        (u128::from(at) << 64) | u128::from(seq << PLACE_BITS) | place as u128
    }

    /// The wall clock now.
    pub(super) fn wall(&self) -> OffsetDateTime {
        // Asked at each step and each send: the date's arithmetic done once a second, the
        // start being on a whole second.
        let wall = self
            .whole_second()
            .replace_nanosecond(self.since.subsec_nanos());
        wall.unwrap_or_else(|_| WALL_START + self.since)
    }

    /// The wall clock at the whole second of now (kept for the second last asked for).
    fn whole_second(&self) -> OffsetDateTime {
        let second = self.since.as_secs();
        let (at, wall) = self.wall_at.get();
        if at == second {
            return wall;
        }
        let wall = WALL_START + Duration::from_secs(second);
        self.wall_at.set((second, wall));
        wall
    }

    /// The store's date, in whole seconds as the memory store's clock (and the service's
    /// dates) keep it: a record's creation date orders members who joined in the same second
    /// by identity (`line::order`), as the world's line (`look`) orders them, which the checker
    /// judges by; a finer date would put the members' lines and the checker's at odds.
    pub(super) fn store_date(&self) -> OffsetDateTime {
        self.whole_second()
    }

    /// Since the history began.
    pub(super) fn since(&self) -> Duration {
        self.since
    }

    /// Records `what` now.
    pub(super) fn record(&self, what: What) {
        self.recorder.record_at(self.since(), what);
    }

    /// The process of `who`, if that start of it runs, to read.
    pub(super) fn running_process(&self, who: Who) -> Option<&Process> {
        (self.running.get(who.id)?.as_deref()).filter(|p| p.generation == who.generation)
    }

    /// The process of `who`, if that start of it runs.
    pub(super) fn process(&mut self, who: Who) -> Option<&mut Process> {
        (self.running.get_mut(who.id)?.as_deref_mut()).filter(|p| p.generation == who.generation)
    }

    /// One event.
    fn take(&mut self, event: Event) {
        match event {
            Event::Start(id) => self.start_member(id),
            Event::Direct => self.direct(),
            Event::Later(later) => self.later(later),
            Event::Arrive {
                who,
                tag,
                way,
                call,
                sent,
                down,
                store,
            } => self.arrive(who, tag, way, &call, sent, down, store),
            Event::Wake(wake) => self.wake(*wake),
            Event::Body { who, round } => {
                if self.process(who).is_some_and(|p| p.body_round == round) {
                    self.body_tick(who);
                }
            }
            Event::Thaw(who) => self.thaw(who),
            Event::Regions => self.regions_look(),
            event => self.for_member(event),
        }
    }

    /// An event for a member's process (held while it is frozen).
    fn for_member(&mut self, event: Event) {
        let who = match &event {
            Event::Back { who, .. }
            | Event::Cut { who, .. }
            | Event::Reply { who, .. }
            | Event::Timer { who, .. }
            | Event::Shutdown(who)
            | Event::MayCampaign(who) => *who,
            _ => return,
        };
        // Taken only while its process runs, and held while it is frozen until its thaw (the
        // event moved into the list only then).
        match self.process(who) {
            None => return,
            Some(p) if p.frozen.is_some() => return p.held.push(event),
            Some(_) => {}
        }
        match event {
            Event::Back {
                who,
                tag,
                way,
                ret,
                sent,
                kind,
                store,
            } => {
                if let Some((op, lease)) = kind {
                    self.record_on(
                        store,
                        What::Answered {
                            member: who.id,
                            op,
                            lease,
                            sent: sent - self.t0,
                            ok: ret.is_ok(),
                        },
                    );
                }
                self.returned(who, tag, way, ret);
            }
            Event::Cut { who, tag, way } => {
                let now = self.now;
                if self.prepare_cut(who, way) {
                    return;
                }
                let Some(p) = self.process(who) else { return };
                let open = p.open.get(&tag);
                let Some(call) = open.filter(|o| o.way == way).and_then(|o| o.call.as_ref()) else {
                    return;
                };
                let span = now - open.map_or(now, |o| o.sent);
                let ret = call.failed(StoreError::TimedOut(span));
                self.returned(who, tag, way, Box::new(ret));
            }
            Event::Reply { who, tag, reply } => self.reply(who, tag, *reply),
            Event::Timer { who, round } => {
                let Some(p) = self.process(who) else { return };
                if p.round == round {
                    p.timer = None;
                    match p.preparing.is_some() {
                        true => self.prepare_attempt(who),
                        false => _ = self.step(who, Input::Timer),
                    }
                }
            }
            Event::Shutdown(who) if self.prepare_shutdown(who) => {}
            Event::Shutdown(who) => {
                self.step(who, Input::Shutdown);
            }
            Event::MayCampaign(who) => {
                let may = self.process(who).is_some_and(|p| p.stuck.is_none());
                self.step(who, Input::MayCampaign(may));
            }
            _ => {}
        }
    }

    /// A call of `who` reaches the store `store`: judged, traced, its return sent back after
    /// `down` (unless its answer is lost).
    #[allow(clippy::too_many_arguments)]
    fn arrive(
        &mut self,
        who: Who,
        tag: Tag,
        way: u64,
        call: &Call,
        sent: Instant,
        down: Option<Duration>,
        store: usize,
    ) {
        let date = self.store_date();
        let (ret, seen) = self.store_at(store).apply_seen(call, self.now, date);
        if let Some((op, lease)) = op_of(call) {
            let ok = ret.is_ok();
            if op == Op::MemberAcquire
                && ok
                && let Some(lease) = lease
            {
                self.owners.insert(lease, who);
            }
            self.record_on(
                store,
                What::Applied {
                    member: who.id,
                    op,
                    lease,
                    sent: sent - self.t0,
                    ok,
                    epoch: seen.epoch.filter(|_| op == Op::WriteEpoch),
                    led: seen.led,
                },
            );
            if op == Op::List && ok {
                // The line the member is told of.
                self.line();
            }
            // A replica's blob created again is stamped, and counts for nobody until it is
            // old: no group on a set is brand-new (docs/quorum.md).
            if let Some(slot) = seen.created.filter(|_| self.replicas.is_none())
                && let Some(erased) = erased(&self.look(), slot, who.id)
            {
                self.record(erased);
            }
        }
        if let Some(down) = down {
            let back = Event::Back {
                who,
                tag,
                way,
                ret,
                sent,
                kind: op_of(call),
                store,
            };
            self.after(down, back);
        }
    }

    /// A call's return (or its cut) for `who`'s request `tag`, on way `way` (boxed until it is
    /// taken: a return is the largest thing a history moves).
    fn returned(&mut self, who: Who, tag: Tag, way: u64, ret: Box<Return>) {
        let now = self.now;
        let Some(p) = self.process(who) else { return };
        if p.preparing.as_ref().is_some_and(|s| s.way == way) {
            return self.prepare_answer(who, *ret);
        }
        let Some(open) = p.open.get_mut(&tag) else {
            return;
        };
        if open.way != way {
            return;
        }
        let Some(carrying) = open.carrying.as_mut() else {
            return;
        };
        match carrying.answer(*ret, now) {
            Step::Call(next) => self.send_call(who, tag, next),
            Step::Reply(reply) => self.reply(who, tag, reply),
        }
    }

    /// The reply to `who`'s request `tag`, unless it was forgotten.
    /// Queues `reply` to `who`'s request `tag` at `at`, a reply given without the store.
    pub(super) fn reply_at(
        &mut self,
        at: Instant,
        who: Who,
        tag: Tag,
        reply: Reply<Shell, StoreError>,
    ) {
        let reply = Box::new(reply);
        self.at(at, Event::Reply { who, tag, reply });
    }

    pub(super) fn reply(&mut self, who: Who, tag: Tag, reply: Reply<Shell, StoreError>) {
        let Some(p) = self.process(who) else { return };
        let Some(open) = p.open.remove(&tag) else {
            return;
        };
        let answer = Answer {
            tag,
            sent: open.sent,
            answer: reply,
        };
        self.step(who, Input::Answer(answer));
    }

    /// Sends `call` for `who`'s request `tag` over its link: up to the store (or refused, or
    /// lost, as the link's faults say), cut at its limit.
    fn send_call(&mut self, who: Who, tag: Tag, call: Call) {
        self.ways += 1;
        let way = self.ways;
        let Some(p) = self.process(who) else { return };
        let Some(open) = p.open.get_mut(&tag) else {
            return;
        };
        let call = Rc::new(call);
        open.way = way;
        open.call = Some(call.clone());
        let store = open.store;
        let limit = open.carrying.as_ref().and_then(Carrying::limit);
        if let Call::Acquire { slot, id, .. } = &*call {
            p.acquired.insert(*slot, *id);
            #[cfg(test)]
            if self.early_bodies {
                let (slot, lease) = (*slot, *id);
                let epoch = 1;
                self.record(What::BodyStart {
                    member: who.id,
                    slot,
                    epoch,
                    lease,
                });
            }
        }
        self.carry(who, tag, way, call, limit, store);
    }

    /// Carries `call` of `who`'s request `tag`, on way `way`, over its link: up to the store
    /// `store` (or refused, or lost, as the link's and its region's faults say), cut at
    /// `limit`.
    pub(super) fn carry(
        &mut self,
        who: Who,
        tag: Tag,
        way: u64,
        call: Rc<Call>,
        limit: Option<Instant>,
        store: usize,
    ) {
        let now = self.now;
        let kind = op_of(&call);
        let trip = self.trip(who, kind.map(|(op, _)| op), store);
        let trip = self.region_trip(store, trip);
        // The cut at the limit, unless the return comes back before it (a cut that could only
        // find its request answered is not queued: a third of all events).
        let back = match &trip {
            Trip::Deliver {
                up,
                down: Some(down),
            } => Some(now + (*up + *down)),
            Trip::Refuse { after, .. } => Some(now + *after),
            _ => None,
        };
        if let Some(limit) = limit
            && back.is_none_or(|back| back >= limit)
        {
            self.at(limit, Event::Cut { who, tag, way });
        }
        match trip {
            Trip::Deliver { up, down } => {
                let arrive = Event::Arrive {
                    who,
                    tag,
                    way,
                    call,
                    sent: now,
                    down,
                    store,
                };
                self.after(up, arrive);
            }
            Trip::Refuse { after, error } => {
                let ret = call.failed(error);
                let back = Event::Back {
                    who,
                    tag,
                    way,
                    ret: Box::new(ret),
                    sent: now,
                    kind,
                    store,
                };
                self.after(after, back);
            }
            Trip::Hang => {}
        }
    }

    /// Steps `who` with `input` and carries out what it says; the answer to a wake-up it
    /// took, if any.
    pub(super) fn step(
        &mut self,
        who: Who,
        input: Input<Instant, Shell, StoreError>,
    ) -> Option<leasehold_core::wake::WakeAnswer> {
        let (now, wall) = (self.now, self.wall());
        let wall_ms = (WALL_START_MS + self.since().as_millis() as u64)
            .saturating_add_signed(self.skew(who.id));
        let p = (self.running.get_mut(who.id)?.as_mut())
            .filter(|p| p.generation == who.generation && p.preparing.is_none())?;
        let mut env = Draws {
            rng: &mut self.rng,
            wall_ms,
        };
        let mut outputs = std::mem::take(&mut self.outputs);
        p.core.handle_into(now, wall, input, &mut env, &mut outputs);
        let mut woken = None;
        // Carried out where they lie: an output moved out of the list is copied whole.
        for output in &outputs {
            if let Output::Woken(answer) = output {
                woken = Some(*answer);
            } else {
                self.output(who, output);
            }
        }
        outputs.clear();
        leasehold_core::room::put_back(&mut self.outputs, outputs);
        self.set_timer(who);
        woken
    }

    /// Sets `who`'s one timer as its member awaits it.
    fn set_timer(&mut self, who: Who) {
        let now = self.now;
        let Some(p) = self.process(who) else { return };
        let until = p.core.timer();
        if until == p.timer {
            return;
        }
        p.round += 1;
        p.timer = until;
        let round = p.round;
        if let Some(until) = until {
            self.at(until.max(now), Event::Timer { who, round });
        }
    }

    /// Carries out one output of `who`'s member.
    fn output(&mut self, who: Who, output: &Output<Instant, Shell, StoreError>) {
        match output {
            Output::Send(Send { tag, request }) => self.send(who, *tag, request),
            Output::Forget(tag) => {
                if let Some(p) = self.process(who) {
                    p.open.remove(tag);
                }
            }
            Output::StartBody(term) => self.start_body(who, term),
            Output::Tenure(tenure) => self.tenure(who, *tenure),
            Output::StopBody(stop) => self.stop_body(who, stop),
            Output::AskBody => self.at(self.now, Event::MayCampaign(who)),
            Output::End(_) => self.exited(who),
            Output::Say(say) => self.said(who, say),
            Output::SteppedDown { .. }
            | Output::Role(_)
            | Output::Woken(_)
            | Output::ShowLine
            | Output::Note(_)
            | Output::Rounded(_)
            | Output::Rested => {}
        }
    }

    /// Sends `who`'s request `tag`: its first call, a reply at once, a wake-up or a probe, or
    /// the cut of a request not carried at its limit.
    fn send(&mut self, who: Who, tag: Tag, request: &Request<Instant, Shell>) {
        let (now, wall) = (self.now, self.wall());
        let Some(p) = self.process(who) else { return };
        let view = View {
            known: p.core.known(),
            kept: p.core.kept(),
            next_id: p.core.next_id(),
            record_lease: &p.record_lease,
            create_if_missing: true,
        };
        let start = carry::carry(&view, request, now, wall);
        let open = |carrying, store| Open {
            carrying,
            call: None,
            way: 0,
            sent: now,
            store,
        };
        match start {
            Start::Call(carrying, call) => {
                // To its replica's store, as the shell's `Calls` sends it.
                let store = self.store_of(who.id, carrying.replica());
                let Some(p) = self.process(who) else { return };
                p.open.insert(tag, open(Some(carrying), store));
                self.send_call(who, tag, call);
            }
            Start::Reply(reply) => {
                p.open.insert(tag, open(None, 0));
                self.reply_at(now, who, tag, reply);
            }
            Start::NotCarried { limit, cut } => {
                p.open.insert(tag, open(None, 0));
                if let Some(limit) = limit {
                    self.reply_at(limit, who, tag, cut);
                }
            }
            Start::Http => {
                p.open.insert(tag, open(None, 0));
                self.http(who, tag, request);
            }
        }
    }
}
