//! One simulated history: K members of a group, each a real [`Elector`] with a simulated body,
//! on one [`MemoryStore`] (Azure's lease rules on tokio's paused clock) over a simulated
//! network, and a director that draws from the seed what happens to them: crashes, freezes,
//! graceful stops and restarts, joins and leaves, storage cut off, blackholed, down, slow or
//! losing answers, blobs and records deleted, garbage metadata, forged member records, wake-up
//! storms. It records everything into one trace; the checker reads only that.
//!
//! A history alternates storms (a few faults in quick succession) and calms (only the ordinary
//! life of a group), and ends with a calm, so that the liveness rules have quiet time to hold in.

use super::body::SimBody;
use super::gate::Gate;
use super::network::{Faults, Link, LinkFaults, between, ms, secs};
use super::trace::{MemberId, Recorder, What};
use crate::config::Election;
use crate::elector::wake::{SEND_TIMEOUT, Sender, WakeSent};
use crate::elector::{Elector, Observer, WakeAnswer, Waker};
use crate::secret::Secret;
use crate::store::memory::MemoryStore;
use crate::store::{GroupStore, LeaseId, Member as Record, MemberKey};
use crate::timing::Timing;
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
    /// Members at the start.
    pub members: usize,
    /// How long the history runs (virtual time).
    pub length: Duration,
    /// The calm it ends with.
    pub final_calm: Duration,
}

/// What a member's elector tells: the handoffs that landed.
struct Watcher {
    member: MemberId,
    recorder: Recorder,
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
        });
    }
}

/// Where a wake-up to an advertised URL goes: the member serving it now.
#[derive(Clone)]
struct WakeTarget {
    waker: Waker,
    gate: Arc<Gate>,
}

type WakeTargets = Arc<Mutex<BTreeMap<String, WakeTarget>>>;

/// One member of the group, up or down.
struct Member {
    identity: String,
    priority: i64,
    preempt_after: Option<Duration>,
    advertised: bool,
    /// Restarts so far (a restart may take a new identity).
    incarnation: u32,
    running: Option<Running>,
    /// When a member that is down starts again (`None`: it left for good).
    restart_at: Option<Instant>,
    /// A stop was asked for; once it exits, it starts again after this long (`None`: it left).
    after_exit: Option<Option<Duration>>,
}

/// A member's running process.
struct Running {
    gate: Arc<Gate>,
    shutdown: CancellationToken,
    waker: Waker,
    _task: JoinHandle<()>,
}

/// A member whose elector returned, and which of its starts that was.
type Exited = (MemberId, u64);

/// Something the director must do at a given instant.
enum Due {
    Thaw(MemberId, Arc<Gate>),
    Repair,
}

/// The whole simulated world of one history.
pub(crate) struct World {
    shape: Shape,
    timing: Timing,
    recorder: Recorder,
    store: Arc<MemoryStore>,
    slots: u32,
    members: Vec<Member>,
    faults: Arc<Mutex<Faults>>,
    wakes: WakeTargets,
    /// Members whose elector returned, and which start of theirs that was.
    exits: (
        mpsc::UnboundedSender<Exited>,
        mpsc::UnboundedReceiver<Exited>,
    ),
    due: Vec<(Instant, Due)>,
    /// Starts of members, to tell a member's exit from its predecessor's.
    generation: Vec<u64>,
    start: Instant,
}

impl World {
    /// A world drawn from the seed (already set on this thread's RNG).
    pub fn new(shape: Shape, timing: Timing, recorder: Recorder) -> Self {
        let slots = match fastrand::u32(0..10) {
            0..8 => 1,
            8 => 2,
            _ => 3,
        };
        let ranked = fastrand::bool();
        let members = (0..shape.members)
            .map(|i| Self::draw_member(format!("m{i}"), ranked))
            .collect();
        // The service's clock runs up to 500 ppm faster than the members'.
        crate::store::memory::server_clock_ppm(fastrand::u32(0..=500));
        Self {
            shape,
            timing,
            recorder,
            store: Arc::new(MemoryStore::default()),
            slots,
            members,
            faults: Arc::default(),
            wakes: Arc::default(),
            exits: mpsc::unbounded_channel(),
            due: Vec::new(),
            generation: Vec::new(),
            start: Instant::now(),
        }
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    fn draw_member(identity: String, ranked: bool) -> Member {
        let priority = if ranked { fastrand::i64(0..3) } else { 0 };
        let preempt_after = match fastrand::u32(0..4) {
            0 => None,
            _ => Some(secs(fastrand::u64(2..40))),
        };
        Member {
            identity,
            priority,
            preempt_after,
            advertised: fastrand::bool(),
            incarnation: 0,
            running: None,
            restart_at: None,
            after_exit: None,
        }
    }

    /// Plays the history to its end.
    pub async fn play(mut self) {
        for id in 0..self.members.len() {
            self.start_member(id);
            // Members come up within the first seconds, not all in one instant.
            sleep(between(Duration::ZERO, ms(1500))).await;
        }
        let end = self.start + self.shape.length;
        let calm_from = end - self.shape.final_calm;
        let mut next = Instant::now() + between(secs(5), secs(40));
        let mut storm_left = 0u32;
        loop {
            let due_at = self.due.iter().map(|(at, _)| *at).min();
            let restart_at = self.members.iter().filter_map(|m| m.restart_at).min();
            let wake_at = [Some(next), due_at, restart_at, Some(end)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
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
            if now >= end {
                break;
            }
            self.run_due(now);
            for id in 0..self.members.len() {
                if self.members[id].restart_at.is_some_and(|at| now >= at) {
                    self.members[id].restart_at = None;
                    self.start_member(id);
                }
            }
            if now >= next {
                if now < calm_from {
                    self.act();
                }
                // Storms of a few actions close together, then calms.
                next = if storm_left > 0 {
                    storm_left -= 1;
                    now + between(Duration::ZERO, secs(8))
                } else {
                    storm_left = fastrand::u32(0..6);
                    now + between(secs(15), secs(90))
                };
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
                Due::Thaw(id, gate) => {
                    gate.thaw();
                    self.recorder.record(What::Thaw { member: id });
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
    fn up(&self) -> Vec<MemberId> {
        (0..self.members.len())
            .filter(|i| self.members[*i].running.is_some() && self.members[*i].after_exit.is_none())
            .collect()
    }

    fn pick_up(&self) -> Option<MemberId> {
        let up = self.up();
        (!up.is_empty()).then(|| up[fastrand::usize(0..up.len())])
    }

    fn fault(&self, kind: &'static str, detail: String, until: Option<Instant>) {
        self.recorder.record(What::Fault {
            kind,
            detail,
            until: until.map(|u| self.recorder.since_start(u)),
        });
    }

    /// After a deletion: each slot whose blob is missing while no member record is leased
    /// ([`What::Erased`]), for the checker.
    fn erased(&self) {
        if self.store.leased_records() > 0 {
            return;
        }
        for slot in 0..self.slots {
            let exists = match slot {
                0 => self.store.exists(),
                i => self.store.slot(i).exists(),
            };
            if !exists {
                self.recorder.record(What::Erased { slot });
            }
        }
    }

    fn link(&self, id: MemberId, f: impl FnOnce(&mut LinkFaults)) {
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        f(faults.links.entry(id).or_default());
    }

    /// One action of the director, drawn from the seed.
    fn act(&mut self) {
        let now = Instant::now();
        match fastrand::u32(0..100) {
            // The ordinary life of a group.
            0..10 => {
                if let Some(id) = self.pick_up() {
                    let downtime = between(Duration::ZERO, secs(20));
                    self.stop_member(id, Some(downtime));
                }
            }
            10..14 => {
                if self.members.len() < self.shape.members + 3 {
                    let ranked = self.members.iter().any(|m| m.priority != 0);
                    let identity = format!("j{}", self.members.len());
                    self.members.push(Self::draw_member(identity, ranked));
                    self.start_member(self.members.len() - 1);
                }
            }
            14..17 => {
                if self.up().len() > 2
                    && let Some(id) = self.pick_up()
                {
                    self.stop_member(id, None);
                }
            }
            // Faults.
            17..31 => {
                if let Some(id) = self.pick_up() {
                    self.crash_member(id, between(secs(1), secs(40)));
                }
            }
            31..41 => {
                if let Some(id) = self.pick_up() {
                    let long = between(ms(200), secs(25));
                    let gate = self.members[id].running.as_ref().map(|r| r.gate.clone());
                    if let Some(gate) = gate.filter(|g| !g.is_frozen()) {
                        gate.freeze();
                        self.recorder.record(What::Freeze { member: id });
                        self.due.push((now + long, Due::Thaw(id, gate)));
                    }
                }
            }
            41..48 => {
                if let Some(id) = self.pick_up() {
                    let until = now + between(secs(1), secs(30));
                    self.link(id, |l| l.cut_until = Some(until));
                    self.fault(
                        "cut off",
                        format!("m{id} cannot reach storage"),
                        Some(until),
                    );
                }
            }
            48..53 => {
                if let Some(id) = self.pick_up() {
                    let until = now + between(secs(1), secs(20));
                    self.link(id, |l| l.blackhole_until = Some(until));
                    self.fault("blackhole", format!("m{id}'s requests vanish"), Some(until));
                }
            }
            53..57 => {
                let until = now + between(secs(1), secs(20));
                self.faults
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .outage_until = Some(until);
                self.fault("outage", "storage answers 503 to all".into(), Some(until));
            }
            57..65 => {
                if let Some(id) = self.pick_up() {
                    let until = now + between(secs(2), secs(30));
                    self.link(id, |l| l.lossy_until = Some(until));
                    self.fault(
                        "lossy",
                        format!("m{id}'s answers lost (applied) or requests lost"),
                        Some(until),
                    );
                }
            }
            65..71 => {
                if let Some(id) = self.pick_up() {
                    let until = now + between(secs(2), secs(30));
                    let most = between(ms(50), secs(5));
                    self.link(id, |l| l.slow = Some((until, most)));
                    self.fault(
                        "slow",
                        format!("m{id}'s answers up to {most:?} late"),
                        Some(until),
                    );
                }
            }
            71..78 => {
                let slot = fastrand::u32(0..self.slots);
                match slot {
                    0 => self.store.delete(),
                    i => self.store.slot(i).delete(),
                }
                self.fault("deleted", format!("slot {slot}'s blob"), None);
                self.erased();
            }
            78..82 => {
                let count = fastrand::usize(1..4);
                let mut gone = Vec::new();
                for _ in 0..count {
                    let id = fastrand::usize(0..self.members.len());
                    if self.store.delete_record(&self.members[id].identity) {
                        gone.push(self.members[id].identity.clone());
                    }
                }
                self.fault("records deleted", format!("{gone:?}"), None);
                self.erased();
            }
            82..86 => {
                let until = now + between(secs(5), secs(60));
                let (key, value) = match fastrand::u32(0..3) {
                    0 => (crate::store::META_EPOCH, "twelve"),
                    1 => (crate::store::META_ACQUIRED_AT, "yesterday"),
                    _ => (crate::store::META_SLOTS, "many"),
                };
                let slot = fastrand::u32(0..self.slots);
                match slot {
                    0 => self.store.write_garbage(key, value),
                    i => self.store.slot(i).write_garbage(key, value),
                }
                self.due.push((until, Due::Repair));
                self.fault(
                    "garbage",
                    format!("slot {slot}'s {key} = {value:?} until repaired"),
                    Some(until),
                );
            }
            86..90 => self.forge(now + between(secs(10), secs(90))),
            90..95 => self.storm(now + between(secs(1), secs(15))),
            _ => {
                // A graceful restart of the leader, the commonest handover.
                if let Some(id) = self.pick_up() {
                    self.stop_member(id, Some(between(Duration::ZERO, secs(5))));
                }
            }
        }
    }

    fn start_member(&mut self, id: MemberId) {
        let wake_sender = self.wake_sender();
        let m = &mut self.members[id];
        if m.incarnation > 0 && fastrand::u32(0..10) < 3 {
            // Restarted elsewhere: a new process with a new identity (a new pod).
            let base = m.identity.split('.').next().unwrap_or("m").to_owned();
            m.identity = format!("{base}.{}", m.incarnation);
        }
        m.incarnation += 1;
        m.after_exit = None;
        let gate = Arc::new(Gate::default());
        let link = Link {
            member: Some(id),
            faults: self.faults.clone(),
            recorder: self.recorder.clone(),
        };
        let client = Arc::new(self.store.client_on(Arc::new(link)));
        let client_for_prepare = client.clone();
        let advertise = m.advertised.then(|| format!("sim://{}", m.identity));
        let election = Election {
            priority: m.priority,
            advertise: advertise.clone(),
            preempt_after: m.preempt_after,
        };
        let watcher = Arc::new(Watcher {
            member: id,
            recorder: self.recorder.clone(),
        });
        let elector = Elector::new(client, m.identity.clone(), self.timing, true, watcher)
            .with_election(election)
            .with_slots(self.slots)
            .with_wake_sender(wake_sender);
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
        let mut body = SimBody::new(id, self.recorder.clone(), self.timing.stop_timeout);
        if self.generation.len() <= id {
            self.generation.resize(id + 1, 0);
        }
        self.generation[id] += 1;
        let generation = self.generation[id];
        let (exits, stop, recorder) = (
            self.exits.0.clone(),
            shutdown.clone(),
            self.recorder.clone(),
        );
        let span = tracing::info_span!("member", m = id);
        let (store, timing, identity) = (client_for_prepare, self.timing, m.identity.clone());
        let slots = self.slots;
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
            advertised: m.advertised,
        });
        m.running = Some(Running {
            gate,
            shutdown,
            waker,
            _task: task,
        });
    }

    /// SIGTERM; once it has exited it starts again after `downtime` (`None`: it left).
    fn stop_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        let m = &mut self.members[id];
        if let Some(r) = &m.running {
            r.shutdown.cancel();
            m.after_exit = Some(downtime);
            self.recorder.record(What::Stop { member: id });
        }
    }

    fn crash_member(&mut self, id: MemberId, downtime: Duration) {
        let m = &mut self.members[id];
        if let Some(r) = m.running.take() {
            r.gate.kill();
            self.wakes
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .retain(|_, t| !Arc::ptr_eq(&t.gate, &r.gate));
            m.after_exit = None;
            m.restart_at = Some(Instant::now() + downtime);
            self.recorder.record(What::Crash { member: id });
        }
    }

    /// Member `id`'s elector returned (its `generation`th start).
    fn exited(&mut self, id: MemberId, generation: u64) {
        if self.generation.get(id) != Some(&generation) {
            return;
        }
        let m = &mut self.members[id];
        let Some(r) = m.running.take() else { return };
        self.wakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|_, t| !Arc::ptr_eq(&t.gate, &r.gate));
        m.restart_at = match m.after_exit.take() {
            // A stop: back after its downtime, or never.
            Some(downtime) => downtime.map(|d| Instant::now() + d),
            // The body asked to exit: the service manager starts it again.
            None => Some(Instant::now() + between(ms(100), secs(10))),
        };
    }

    /// How a member's wake-ups reach the member serving the URL they name: at once if it runs
    /// (refused without its wake token; one in ten taken but its answer lost), after the send
    /// timeout if it is frozen (a connection nobody answers), failed if none.
    fn wake_sender(&self) -> Sender {
        let wakes = self.wakes.clone();
        Sender::Simulated(Arc::new(
            move |url: &str, token: Option<&Secret>, handoff: Option<String>| {
                let target = wakes
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(url)
                    .cloned();
                let token = token.map_or_else(String::new, |t| t.expose().to_owned());
                Box::pin(async move {
                    match target {
                        None => {
                            sleep(ms(1)).await;
                            WakeSent::Failed
                        }
                        Some(t) if t.gate.is_frozen() => {
                            sleep(SEND_TIMEOUT).await;
                            WakeSent::Failed
                        }
                        Some(t) => {
                            let travel = between(ms(0) + Duration::from_micros(300), ms(2));
                            sleep(travel).await;
                            // As POST /wake answers: 202, 429 within the wake interval, 401
                            // without the member's token.
                            let answer = match t.waker.wake_handed(&token, handoff.as_deref()) {
                                WakeAnswer::Accepted => WakeSent::Ok,
                                WakeAnswer::TooSoon => WakeSent::Later,
                                WakeAnswer::WrongToken => WakeSent::Refused,
                            };
                            // One in ten: the member took it, but its answer is lost: the
                            // sender thinks it failed (and gives the member a poll's window).
                            if fastrand::u32(0..10) == 0 {
                                sleep(SEND_TIMEOUT.saturating_sub(travel)).await;
                                return WakeSent::Failed;
                            }
                            answer
                        }
                    }
                })
            },
        ))
    }

    /// Forged member records until `until`: one to five live records of high priority that
    /// say they are settled, held by a forger who renews their leases (anyone who can write to
    /// the container can), advertising URLs where nothing answers or a real member's.
    fn forge(&mut self, until: Instant) {
        let link = Link {
            member: None,
            faults: self.faults.clone(),
            recorder: self.recorder.clone(),
        };
        let forger = Arc::new(self.store.client_on(Arc::new(link)));
        let count = fastrand::usize(1..6);
        let urls: Vec<String> = self
            .wakes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        let records: Vec<(MemberKey, LeaseId, Record)> = (0..count)
            .map(|i| {
                let identity = format!("forged-{}-{i}", self.recorder.now().as_millis());
                let advertise = match (fastrand::bool(), urls.is_empty()) {
                    (true, false) => Some(urls[fastrand::usize(0..urls.len())].clone()),
                    _ => Some(format!("sim://{identity}")),
                };
                let record = Record {
                    identity: identity.clone(),
                    priority: 100,
                    acquires_with: LeaseId::random(),
                    advertise,
                    // Nor a token: a wake-up to a real member's URL on its behalf is refused.
                    wake_token: None,
                    standby_until: None,
                    slots: self.slots,
                    settled: Some(secs(3600)),
                };
                (MemberKey::of(&identity), LeaseId::random(), record)
            })
            .collect();
        self.fault(
            "forged records",
            format!("{count} live records of priority 100"),
            Some(until),
        );
        tokio::spawn(async move {
            for (key, lease, record) in &records {
                let _ = forger.create_member(key, record).await;
                let _ = forger.acquire_member(key, *lease, 30).await;
            }
            while Instant::now() < until {
                sleep(secs(10).min(until.saturating_duration_since(Instant::now()))).await;
                for (key, lease, _) in &records {
                    let _ = forger.renew_member(key, *lease).await;
                }
            }
            for (key, lease, _) in &records {
                let _ = forger.delete_member(key, Some(*lease), None).await;
            }
        });
    }

    /// Forged wake-ups until `until`: every few milliseconds, to a member at random, with its
    /// wake token (the worst case: anyone who can read the container can read the records;
    /// those without it are refused before anything else).
    fn storm(&mut self, until: Instant) {
        self.fault(
            "wake storm",
            "forged wake-ups every 1-10 ms".into(),
            Some(until),
        );
        let wakers: Vec<Waker> = self
            .members
            .iter()
            .filter_map(|m| m.running.as_ref().map(|r| r.waker.clone()))
            .collect();
        if wakers.is_empty() {
            return;
        }
        tokio::spawn(async move {
            while Instant::now() < until {
                let waker = &wakers[fastrand::usize(0..wakers.len())];
                waker.wake(waker.token().expose());
                sleep(between(ms(1), ms(10))).await;
            }
        });
    }
}
