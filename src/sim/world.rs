//! One simulated history's world: K members of a group, each a real [`Elector`] with a
//! simulated body, on one [`MemoryStore`] (Azure's lease rules on tokio's paused clock) over a
//! simulated network, and what happens to them: drawn from the seed by the director
//! (`director`), or scripted (`schedule`). It records everything into one trace; the checker
//! reads only that.
//!
//! This file owns the members' lives (start, SIGTERM, SIGKILL, a freeze of the daemon alone or
//! a pause of its whole machine, broken deploys, their exits), how a
//! wake-up reaches the member at a URL, and the world's look at the line ([`What::Line`]).

use super::body::{Broken, Host, Plans, SimBody};
use super::dice::{Dice, Stream};
use super::gate::Gate;
use super::network::{Faults, Link, LinkFaults, Owners, ms, secs};
use super::trace::{InLine, MemberId, Recorder, What};
use crate::clock::Clock;
use crate::config::Election;
use crate::elector::wake::{Sender, WakeSent};
use crate::elector::{Elector, Observer, WakeAnswer, Waker};
use crate::secret::Secret;
use crate::store::GroupStore;
use crate::store::memory::{MemoryStore, ServiceClock};
use crate::timing::Timing;
use leasehold_core::Pace;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep, sleep_until};
use tokio_util::sync::CancellationToken;

/// What a history is made of, besides its seed.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// The history's seed: every stream of the world's draws comes from it.
    pub seed: u64,
    /// Members at the start (a drawn history).
    pub members: usize,
    /// How long the history runs (virtual time).
    pub length: Duration,
    /// The calm it ends with.
    pub final_calm: Duration,
    /// Whether a script plays it (src/sim/schedule.rs) rather than the director's draws.
    pub scripted: bool,
    /// The rule its electors and guards break on purpose, if any.
    pub mutant: crate::mutant::Switch,
    /// The storage accounts its group leads on: 1, or a replica set of 3 or 5 (docs/quorum.md;
    /// the synchronous engine only).
    pub replicas: usize,
}

/// Who the world starts with, drawn (src/sim/director.rs) or scripted.
pub(crate) struct Cast {
    /// `[lease].slots`.
    pub slots: u32,
    pub members: Vec<Member>,
    pub plans: Plans,
    /// How much faster the service's clock runs than the members', in ppm.
    pub ppm: u32,
    /// A brand-new group: none of its blobs exists yet (a container no member used), and the
    /// first members' prepares create them plainly; else they are there from before any
    /// member's clock.
    pub brand_new: bool,
}

/// What a member's elector tells: the handoffs that landed.
struct Watcher {
    member: MemberId,
    recorder: Recorder,
    /// Where the world looks whether the member handed the lease still has a record.
    store: Arc<MemoryStore>,
}

impl Observer for Watcher {
    fn handed_over(&self, how: crate::elector::Handoff) {
        use crate::elector::Handoff;
        if matches!(
            how,
            Handoff::NoSuccessor | Handoff::Released | Handoff::Fallback
        ) {
            self.recorder.record(What::Released {
                member: self.member,
            });
        }
    }

    fn handed_to(&self, to: &str, slot: u32) {
        self.recorder.record(What::HandedTo {
            member: self.member,
            to: to.to_owned(),
            slot,
            record: self.store.has_live_record(to),
        });
    }
}

/// Where a wake-up to an advertised URL goes: the member serving it now.
#[derive(Clone)]
pub(super) struct WakeTarget {
    pub waker: Waker,
    pub gate: Arc<Gate>,
}

pub(super) type WakeTargets = Arc<Mutex<BTreeMap<String, WakeTarget>>>;

/// One member of the group, up or down.
pub(super) struct Member {
    pub identity: String,
    pub priority: i64,
    pub preempt_after: Option<Duration>,
    pub advertised: bool,
    /// A daemon, whose child has a guard that runs on while the daemon is frozen; or a member
    /// of the library, whose body is a task of its own process (no guard).
    pub guarded: bool,
    /// Its deploy, broken until an instant (its bodies fail at once) or not; it outlasts
    /// restarts, as a broken release does.
    pub broken: Broken,
    /// Restarts so far (a restart may take a new identity).
    pub incarnation: u32,
    /// Starts on another port so far: its URL's port (0: the URL it started with).
    pub port: u32,
    pub running: Option<Running>,
    /// When a member that is down starts again (`None`: it left, or a script starts it).
    pub restart_at: Option<Instant>,
    /// A stop was asked for; once it exits, it starts again after this long (`None`: it left).
    pub after_exit: Option<Option<Duration>>,
}

impl Member {
    /// The URL it advertises, if it does: `sim://IDENTITY`, with a port once it started on
    /// another.
    pub fn url(&self) -> Option<String> {
        self.advertised.then(|| match self.port {
            0 => format!("sim://{}", self.identity),
            port => format!("sim://{}:{port}", self.identity),
        })
    }
}

/// A member's running process.
pub(super) struct Running {
    /// The daemon (or the program of the library's member): what SIGSTOP freezes.
    pub gate: Arc<Gate>,
    /// The rest of its machine: a daemon's children and their guards, which a freeze of the
    /// daemon alone leaves running and a pause of the whole machine freezes too.
    pub machine: Arc<Gate>,
    pub shutdown: CancellationToken,
    pub waker: Waker,
    _task: JoinHandle<()>,
}

/// A member whose elector returned, and which of its starts that was.
type Exited = (MemberId, u64);

/// Something the world must do at a given instant.
pub(super) enum Due {
    /// The end of a freeze: these gates run again.
    Thaw(MemberId, Vec<Arc<Gate>>),
    /// A broken deploy of this member for this long (a member that never joined: nothing).
    Break(MemberId, Duration),
    Repair,
}

/// The members whose process runs, by the start of theirs it is.
type Alive = Arc<Mutex<BTreeMap<MemberId, u64>>>;

/// The whole simulated world of one history.
pub(crate) struct World {
    pub(super) shape: Shape,
    pub(super) timing: Timing,
    pub(super) recorder: Recorder,
    pub(super) store: Arc<MemoryStore>,
    pub(super) slots: u32,
    pub(super) members: Vec<Member>,
    pub(super) faults: Arc<Mutex<Faults>>,
    pub(super) wakes: WakeTargets,
    /// The director's draws.
    pub(super) dice: Dice,
    /// What each member runs on, and how a freeze takes it (src/sim/director.rs).
    pub(super) hosts: Dice,
    /// How bodies live: drawn, or as the script says.
    plans: Plans,
    /// Members whose elector returned, and which start of theirs that was.
    exits: (
        mpsc::UnboundedSender<Exited>,
        mpsc::UnboundedReceiver<Exited>,
    ),
    pub(super) due: Vec<(Instant, Due)>,
    /// Starts of members, to tell a member's exit from its predecessor's.
    generation: Vec<u64>,
    /// Who holds each member record's lease (noted by the links).
    owners: Owners,
    /// The members whose process runs, with which start of theirs it is.
    alive: Alive,
    pub(super) start: Instant,
    /// The history's clocks, which its electors read: the wall clock starts with the world.
    clock: Clock,
}

/// The line as the world has it: the leased member records in succession order, each with the
/// running member that holds it (none: its process is gone).
fn look_at_the_line(
    store: &MemoryStore,
    owners: &Owners,
    alive: &Alive,
    clock: Clock,
) -> Vec<InLine> {
    let owners = owners.lock().unwrap_or_else(|e| e.into_inner());
    let alive = alive.lock().unwrap_or_else(|e| e.into_inner());
    let now = clock.wall();
    let mut records: Vec<InLine> = store.map_leased_records(|member, lease, created| InLine {
        identity: member.identity.clone(),
        priority: member.priority,
        owner: owners
            .get(&lease)
            .filter(|(m, start)| alive.get(m) == Some(start))
            .map(|(m, _)| *m),
        advertised: member.advertise.is_some(),
        standby: member.in_standby(now),
        joined: created.unix_timestamp(),
    });
    in_succession(&mut records);
    records
}

/// Member records in succession order: by priority, then by when they joined, then by name.
pub(super) fn in_succession(records: &mut [InLine]) {
    records.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then(a.joined.cmp(&b.joined))
            .then_with(|| a.identity.cmp(&b.identity))
    });
}

impl World {
    /// A world of `shape` with `cast`; `dice` is the director's stream the cast was drawn
    /// from, which goes on drawing its history.
    pub fn new(shape: Shape, cast: Cast, dice: Dice, timing: Timing, recorder: Recorder) -> Self {
        let Cast {
            slots,
            members,
            plans,
            ppm,
            brand_new,
        } = cast;
        let store = Arc::new(MemoryStore::on(ServiceClock::faster_by_ppm(ppm)));
        if brand_new {
            store.unborn(slots);
        }
        let owners = Owners::default();
        let alive = Alive::default();
        let clock = Clock::simulated();
        let look = (store.clone(), owners.clone(), alive.clone());
        recorder.look_at_the_line_with(Box::new(move || {
            look_at_the_line(&look.0, &look.1, &look.2, clock)
        }));
        Self {
            hosts: Dice::new(shape.seed, Stream::Hosts),
            shape,
            timing,
            recorder,
            store,
            slots,
            members,
            faults: Arc::default(),
            wakes: Arc::default(),
            dice,
            plans,
            exits: mpsc::unbounded_channel(),
            due: Vec::new(),
            generation: Vec::new(),
            owners,
            alive,
            start: Instant::now(),
            clock,
        }
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Waits until `at`, taking the members' exits and what is due meanwhile (restarts,
    /// thaws, repairs).
    pub(super) async fn run_until(&mut self, at: Instant) {
        loop {
            let due_at = self.due.iter().map(|(at, _)| *at).min();
            let restart_at = self.members.iter().filter_map(|m| m.restart_at).min();
            let wake_at = [Some(at), due_at, restart_at]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(at);
            tokio::select! {
                biased;
                exited = self.exits.1.recv() => {
                    if let Some((id, generation)) = exited {
                        self.exited(id, generation);
                    }
                    continue;
                }
                () = sleep_until(wake_at) => {}
            }
            let now = Instant::now();
            self.run_due(now);
            for id in 0..self.members.len() {
                if self.members[id].restart_at.is_some_and(|at| now >= at) {
                    self.members[id].restart_at = None;
                    self.start_member(id);
                }
            }
            if now >= at {
                return;
            }
        }
    }

    fn run_due(&mut self, now: Instant) {
        let (ready, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.due)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.due = later;
        for (_, due) in ready {
            match due {
                Due::Thaw(id, gates) => {
                    for gate in gates {
                        gate.thaw();
                    }
                    self.recorder.record(What::Thaw { member: id });
                }
                Due::Break(id, long) => {
                    if id < self.members.len() {
                        self.break_deploy(id, long);
                    }
                }
                Due::Repair => {
                    self.store.repair();
                    for i in 1..self.slots {
                        self.store.slot(i).repair();
                    }
                }
            }
        }
    }

    /// The members whose process runs and is not being stopped.
    pub(super) fn up(&self) -> Vec<MemberId> {
        (0..self.members.len())
            .filter(|i| self.members[*i].running.is_some() && self.members[*i].after_exit.is_none())
            .collect()
    }

    pub(super) fn fault(&self, kind: &'static str, detail: String, until: Option<Instant>) {
        self.recorder.record(What::Fault {
            kind,
            detail,
            until: until.map(|u| self.recorder.since_start(u)),
        });
    }

    pub(super) fn link(&self, id: MemberId, f: impl FnOnce(&mut LinkFaults)) {
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        f(faults.links.entry(id).or_default());
    }

    /// SIGSTOP for `long`, then SIGCONT: of the daemon alone (its children and their guards
    /// run on), or, with `machine`, a pause of the whole machine (a paused VM, `docker pause`:
    /// daemon, guards and children together).
    pub(super) fn freeze_member(&mut self, id: MemberId, long: Duration, machine: bool) {
        let Some(r) = &self.members[id].running else {
            return;
        };
        if r.gate.is_frozen() {
            return;
        }
        let gates = match machine {
            true => vec![r.gate.clone(), r.machine.clone()],
            false => vec![r.gate.clone()],
        };
        for gate in &gates {
            gate.freeze();
        }
        self.recorder.record(What::Freeze {
            member: id,
            machine,
        });
        self.due.push((Instant::now() + long, Due::Thaw(id, gates)));
    }

    /// Deletes `slot`'s blob.
    pub(super) fn delete_blob(&self, slot: u32) {
        match slot {
            0 => self.store.delete(),
            i => self.store.slot(i).delete(),
        }
        self.fault("deleted", format!("slot {slot}'s blob"), None);
    }

    /// Deletes the records of these identities (whoever holds their lease).
    pub(super) fn delete_records(&self, identities: &[String]) {
        let gone: Vec<&String> = identities
            .iter()
            .filter(|i| self.store.delete_record(i))
            .collect();
        self.fault("records deleted", format!("{gone:?}"), None);
    }

    /// Starts member `id` (again). `new_identity`: restarted elsewhere, as a new process with
    /// a new identity (a new pod).
    pub(super) fn start_member_as(&mut self, id: MemberId, new_identity: bool) {
        let m = &mut self.members[id];
        if m.incarnation > 0 && new_identity {
            let base = m.identity.split('.').next().unwrap_or("m").to_owned();
            m.identity = format!("{base}.{}", m.incarnation);
        }
        self.start_member(id);
    }

    pub(super) fn start_member(&mut self, id: MemberId) {
        if self.generation.len() <= id {
            self.generation.resize(id + 1, 0);
        }
        self.generation[id] += 1;
        let generation = self.generation[id];
        self.alive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, generation);
        let wake_sender = self.wake_sender(id);
        let seed = self.shape.seed;
        let m = &mut self.members[id];
        m.incarnation += 1;
        m.after_exit = None;
        let gate = Arc::new(Gate::default());
        let machine = Arc::new(Gate::default());
        let link = Link {
            member: Some(id),
            incarnation: generation,
            faults: self.faults.clone(),
            recorder: self.recorder.clone(),
            owners: self.owners.clone(),
            dice: Dice::new(seed, Stream::Network(id, generation)),
        };
        let client = Arc::new(self.store.client_on(Arc::new(link)));
        let client_for_prepare = client.clone();
        let advertise = m.url();
        let election = Election {
            priority: m.priority,
            advertise: advertise.clone(),
            preempt_after: m.preempt_after,
        };
        let watcher = Arc::new(Watcher {
            member: id,
            recorder: self.recorder.clone(),
            store: self.store.clone(),
        });
        let elector = Elector::new(client, m.identity.clone(), self.timing, true, watcher)
            .with_clock(self.clock)
            .with_random(crate::random::Source::Seed)
            .with_election(election)
            .with_slots(self.slots)
            .with_wake_sender(wake_sender)
            .with_mutant(self.shape.mutant);
        let waker = elector.waker();
        if let Some(url) = &advertise {
            self.wakes.lock().unwrap_or_else(|e| e.into_inner()).insert(
                url.clone(),
                WakeTarget {
                    waker: waker.clone(),
                    gate: gate.clone(),
                },
            );
        }
        let shutdown = CancellationToken::new();
        let mut body = SimBody::new(
            id,
            self.recorder.clone(),
            self.timing.stop_timeout,
            self.plans.clone(),
            Dice::new(seed, Stream::Bodies(id, generation)),
            Host {
                gate: match m.guarded {
                    true => machine.clone(),
                    false => gate.clone(),
                },
                guarded: m.guarded,
                broken: m.broken.clone(),
                mutant: self.shape.mutant,
            },
        );
        let (exits, stop, recorder) = (
            self.exits.0.clone(),
            shutdown.clone(),
            self.recorder.clone(),
        );
        let span = tracing::info_span!("member", m = id);
        let (store, timing, identity) = (client_for_prepare, self.timing, m.identity.clone());
        let slots = self.slots;
        let clock = self.clock;
        let task = gate.spawn(tracing::Instrument::instrument(
            async move {
                // As the daemon does before its first campaign: the blob (and slot blobs)
                // exist, created again under the lock-delay if they were deleted.
                let target = crate::store::StorageTarget::from_connection_string(
                    "UseDevelopmentStorage=true",
                    "sim",
                    "group",
                )
                .expect("a target");
                let prepared = crate::elector::prepare(
                    &*store,
                    &target,
                    (&identity, slots),
                    &timing,
                    clock,
                    &crate::elector::Unobserved,
                    Some(&stop),
                )
                .await;
                let mut elector = elector;
                if matches!(prepared, Ok(true)) {
                    let _ = elector.lead(&mut body, &stop).await;
                }
                recorder.record(What::Exit { member: id });
                let _ = exits.send((id, generation));
            },
            span,
        ));
        self.recorder.record(What::Up {
            member: id,
            identity: m.identity.clone(),
            priority: m.priority,
            slots: self.slots,
            url: m.url(),
            guarded: m.guarded,
        });
        m.running = Some(Running {
            gate,
            machine,
            shutdown,
            waker,
            _task: task,
        });
    }

    /// SIGTERM; once it has exited it starts again after `downtime` (`None`: it left).
    pub(super) fn stop_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        let m = &mut self.members[id];
        if let Some(r) = &m.running {
            r.shutdown.cancel();
            m.after_exit = Some(downtime);
            self.recorder.record(What::Stop { member: id });
            self.recorder.line();
        }
    }

    /// SIGKILL; it starts again after `downtime` (`None`: a script starts it).
    pub(super) fn crash_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        let m = &mut self.members[id];
        if let Some(r) = m.running.take() {
            r.gate.kill();
            // A kill ends a pause of its machine too: its guards see the daemon's pipe close
            // and kill its children at once.
            r.machine.thaw();
            self.wakes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, t| !Arc::ptr_eq(&t.gate, &r.gate));
            m.after_exit = None;
            m.restart_at = downtime.map(|d| Instant::now() + d);
            self.alive
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&id);
            self.recorder.record(What::Crash { member: id });
            self.recorder.line();
        }
    }

    /// Member `id`'s elector returned (its `generation`th start).
    fn exited(&mut self, id: MemberId, generation: u64) {
        if self.generation.get(id) != Some(&generation) {
            return;
        }
        let scripted = self.shape.scripted;
        let m = &mut self.members[id];
        let Some(r) = m.running.take() else { return };
        self.alive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
        self.wakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, t| !Arc::ptr_eq(&t.gate, &r.gate));
        m.restart_at = match m.after_exit.take() {
            // A stop: back after its downtime, or never.
            Some(downtime) => downtime.map(|d| Instant::now() + d),
            // The body asked to exit: the service manager starts it again (a script says when).
            None if scripted => None,
            None => Some(Instant::now() + self.dice.between(ms(100), secs(10))),
        };
    }

    /// How a member's wake-ups reach the member serving the URL they name: at once if it runs
    /// (refused without its wake token; one in ten taken but its answer lost), after the send
    /// timeout if it is frozen (a connection nobody answers), refused at once if nothing
    /// listens there.
    fn wake_sender(&self, member: MemberId) -> Sender {
        let wakes = self.wakes.clone();
        let recorder = self.recorder.clone();
        let dice = Arc::new(Dice::new(self.shape.seed, Stream::Wakes(member)));
        Sender::Simulated(Arc::new(
            move |url: &str, token: Option<&Secret>, handoff: Option<String>, probe: bool| {
                let target = wakes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(url)
                    .cloned();
                let with_token = token.is_some();
                let token = token.map_or_else(String::new, |t| t.expose().to_owned());
                // The identity: a URL's port (a start on another port) is not part of it.
                let to = url.trim_start_matches("sim://");
                let to = to.split(':').next().unwrap_or(to).to_owned();
                let (recorder, dice) = (recorder.clone(), dice.clone());
                Box::pin(async move {
                    let sent = match target {
                        // Nothing listens there: the connection is refused.
                        None => {
                            sleep(ms(1)).await;
                            WakeSent::Unreachable
                        }
                        Some(t) if t.gate.is_frozen() => {
                            sleep(Pace::WAKE_SEND_TIMEOUT).await;
                            WakeSent::Failed
                        }
                        Some(t) if probe => {
                            sleep(dice.between(Duration::from_micros(300), ms(2))).await;
                            match t.waker.probe(&token) {
                                WakeAnswer::Accepted => WakeSent::Ok,
                                _ => WakeSent::Refused,
                            }
                        }
                        Some(t) => {
                            let travel = dice.between(Duration::from_micros(300), ms(2));
                            sleep(travel).await;
                            // As POST /wake answers: 202, 429 within the wake interval, 401
                            // without the member's token.
                            let answer = match t.waker.wake_handed(&token, handoff.as_deref()) {
                                WakeAnswer::Accepted => WakeSent::Ok,
                                WakeAnswer::TooSoon => WakeSent::Later,
                                // Without the member's token.
                                _ => WakeSent::Refused,
                            };
                            // One in ten: the member took it, but its answer is lost: the
                            // sender thinks it failed (and gives the member a poll's window).
                            if dice.below(10) == 0 {
                                sleep(Pace::WAKE_SEND_TIMEOUT.saturating_sub(travel)).await;
                                WakeSent::Failed
                            } else {
                                answer
                            }
                        }
                    };
                    let answer = match sent {
                        WakeSent::Ok => "accepted",
                        WakeSent::Later => "too soon",
                        WakeSent::Refused => "refused",
                        WakeSent::Unreachable => "unreachable",
                        WakeSent::Failed => "timeout",
                    };
                    if !probe {
                        recorder.record(What::Wake {
                            member,
                            to,
                            answer,
                            token: with_token,
                        });
                    }
                    sent
                })
            },
        ))
    }

    /// The body member `id` runs now ends by itself (a scripted history's bodies only).
    pub(super) fn end_body(&self, id: MemberId) {
        if let Plans::Scripted { ends, .. } = &self.plans {
            ends.end(id);
        }
    }

    /// Member `id`'s deploy is broken for `long` (its bodies fail at once), then fixed.
    pub(super) fn break_deploy(&self, id: MemberId, long: Duration) {
        let until = Instant::now() + long;
        *self.members[id]
            .broken
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(until);
        // Not a fault of the protocol's world: rule (d) holds throughout, the member standing
        // by after each failure (src/sim/check/crash.rs holds its backoff).
        self.recorder.record(What::Broken {
            member: id,
            until: self.recorder.since_start(until),
        });
    }

    /// The member whose body runs in `slot` now, and since when (by the trace).
    pub(super) fn holder(&self, slot: u32) -> Option<(MemberId, Duration)> {
        self.recorder.holder(slot)
    }
}
