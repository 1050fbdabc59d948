//! The director of a drawn history: what happens to the group, drawn from the seed (its own
//! stream, apart from the protocol's): crashes, freezes, graceful stops and restarts, joins
//! and leaves, storage cut off, blackholed, down, slow or losing answers, blobs and records
//! deleted, garbage metadata, forged member records, wake-up storms, daemons frozen alone and
//! whole machines paused, broken deploys (children that fail at once); and, weighted toward what
//! broke before (docs/testing.md), rolling restarts (two or three members dying within a record
//! lease), handovers quicker than a watch period, a member joining during a handoff, slot
//! holders crashing right after a refill, wipes of every record and slot blob.
//!
//! A history alternates storms (a few faults in quick succession) and calms (only the ordinary
//! life of a group), and ends with a calm, so that the liveness rules have quiet time to hold in.

use super::body::Plans;
use super::dice::{Dice, Stream};
use super::network::{Link, LinkFaults, ms, secs};
use super::trace::MemberId;
use super::world::{Cast, Due, Member, Shape, World};
use crate::random::Source;
use crate::store::{GroupStore, LeaseId, Member as Record, MemberKey};
use std::time::Duration;
use tokio::time::{Instant, sleep};

/// A member as the director draws it.
/// The cast of a drawn history of `members` members: the slots, each member, and how much
/// faster the service's clock runs (up to 500 ppm).
pub(super) fn draw_cast(dice: &Dice, seed: u64, members: usize) -> Cast {
    let slots = match dice.below(10) {
        0..8 => 1,
        8 => 2,
        _ => 3,
    };
    let ranked = dice.coin();
    let members = (0..members)
        .map(|i| draw_member(dice, format!("m{i}"), ranked))
        .collect();
    Cast {
        slots,
        members,
        plans: Plans::Drawn,
        ppm: dice.u64(0, 501) as u32,
        // From a stream of its own: the director's draws stay what they were.
        brand_new: Dice::new(seed, Stream::Birth).coin(),
    }
}

pub(super) fn draw_member(dice: &Dice, identity: String, ranked: bool) -> Member {
    let priority = if ranked { dice.u64(0, 3) as i64 } else { 0 };
    let preempt_after = match dice.below(4) {
        0 => None,
        _ => Some(secs(dice.u64(2, 40))),
    };
    Member {
        identity,
        priority,
        preempt_after,
        advertised: dice.coin(),
        // Drawn by the world from a stream of its own (`World::draw_host`).
        guarded: true,
        broken: Default::default(),
        incarnation: 0,
        port: 0,
        running: None,
        restart_at: None,
        after_exit: None,
    }
}

/// An action the director planned for later.
#[derive(Debug, Clone, Copy)]
pub(super) enum Planned {
    /// SIGKILL this member; it starts again after this long.
    Crash(MemberId, Duration),
    /// SIGTERM; it starts again after this long.
    Stop(MemberId, Duration),
    /// SIGTERM whoever leads slot 0 now; it starts again after this long.
    StopLeader(Duration),
    /// A new member joins.
    Join,
    /// SIGKILL whoever holds this slot once it is held again (a refill), this long after it
    /// started; it starts again a moment later. Given up at the instant given.
    CrashRefill(u32, Duration, Instant),
}

/// What the director acts on: the world of either engine (tokio's [`World`], or the
/// synchronous one), so that both draw their faults by the same code from the same streams.
pub(super) trait Stage {
    /// The instant now.
    fn now(&self) -> Instant;
    /// The instant the history began.
    fn start(&self) -> Instant;
    /// `at` as time since the history began.
    fn since_start(&self, at: Instant) -> Duration;
    /// The history's shape.
    fn shape(&self) -> &Shape;
    /// `[lease].slots`.
    fn slots(&self) -> u32;
    /// The director's draws.
    fn dice(&self) -> &Dice;
    /// What each member runs on, and how a freeze takes it.
    fn hosts(&self) -> &Dice;
    /// Every member so far, up or down.
    fn members(&self) -> &[Member];
    /// The members whose process runs and is not being stopped.
    fn up(&self) -> Vec<MemberId>;
    /// The member whose body runs in `slot` now, and since when (by the trace).
    fn holder(&self, slot: u32) -> Option<(MemberId, Duration)>;
    /// `member` joins the group and starts.
    fn join_as(&mut self, member: Member);
    /// SIGTERM; once it has exited it starts again after `downtime` (`None`: it left).
    fn stop_member(&mut self, id: MemberId, downtime: Option<Duration>);
    /// SIGKILL; it starts again after `downtime`.
    fn crash_member(&mut self, id: MemberId, downtime: Option<Duration>);
    /// SIGSTOP for `long` (with `machine`: its whole machine), then SIGCONT.
    fn freeze_member(&mut self, id: MemberId, long: Duration, machine: bool);
    /// A fault on member `id`'s network.
    fn link(&mut self, id: MemberId, f: impl FnOnce(&mut LinkFaults));
    /// The service answers 503 to all until `until`.
    fn outage(&mut self, until: Instant);
    /// Records a fault of `kind`.
    fn fault(&self, kind: &'static str, detail: String, until: Option<Instant>);
    /// Deletes `slot`'s blob.
    fn delete_blob(&mut self, slot: u32);
    /// Deletes the records of these identities.
    fn delete_records(&mut self, identities: &[String]);
    /// Garbage in `slot`'s metadata `key`.
    fn write_garbage(&mut self, slot: u32, key: &'static str, value: &str);
    /// The garbage repaired at `at`.
    fn repair_at(&mut self, at: Instant);
    /// Member `who`'s deploy broken at `at` for `long`.
    fn break_at(&mut self, at: Instant, who: MemberId, long: Duration);
    /// Forged member records until `until`.
    fn forge(&mut self, until: Instant);
    /// Forged wake-ups until `until`.
    fn storm(&mut self, until: Instant);
}

impl World {
    /// Plays a drawn history to its end.
    pub(super) async fn play_drawn(&mut self) {
        for id in 0..self.members.len() {
            self.members[id].guarded = draw_host(&*self);
        }
        draw_deploys(self);
        for id in 0..self.members.len() {
            self.start_member(id);
            // Members come up within the first seconds, not all in one instant.
            sleep(self.dice.between(Duration::ZERO, ms(1500))).await;
        }
        let end = self.start + self.shape.length;
        let calm_from = end - self.shape.final_calm;
        let mut next = Instant::now() + self.dice.between(secs(5), secs(40));
        let mut storm_left = 0u32;
        let mut planned: Vec<(Instant, Planned)> = Vec::new();
        loop {
            // A planned refill is watched for every 100 ms.
            let watching = planned
                .iter()
                .any(|(_, p)| matches!(p, Planned::CrashRefill(..)));
            // (A refill's instant is when it was planned: it waits for the slot, not the time.)
            let first = planned
                .iter()
                .filter(|(_, p)| !matches!(p, Planned::CrashRefill(..)))
                .map(|(at, _)| *at)
                .min();
            let mut at = [Some(next), first, Some(end)]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(end);
            if watching {
                at = at.min(Instant::now() + ms(100));
            }
            self.run_until(at).await;
            let now = Instant::now();
            if now >= end {
                break;
            }
            for p in due_plans(&*self, &mut planned, now) {
                carry_out(self, p, now, &mut planned);
            }
            if now >= next {
                if now < calm_from {
                    act(self, &mut planned);
                }
                // Storms of a few actions close together, then calms.
                next = if storm_left > 0 {
                    storm_left -= 1;
                    now + self.dice.between(Duration::ZERO, secs(8))
                } else {
                    storm_left = self.dice.below(6);
                    now + self.dice.between(secs(15), secs(90))
                };
            }
        }
    }
}

/// The planned actions due at `now` (a refill is due once its slot is held again).
pub(super) fn due_plans<S: Stage>(
    s: &S,
    planned: &mut Vec<(Instant, Planned)>,
    now: Instant,
) -> Vec<Planned> {
    let mut due = Vec::new();
    planned.retain(|(at, p)| match p {
        Planned::CrashRefill(slot, after, give_up) => {
            let since = s.since_start(*at);
            match s.holder(*slot) {
                Some((_, started)) if started >= since => {
                    let due_at = s.start() + started + *after;
                    if now >= due_at {
                        due.push(*p);
                        false
                    } else {
                        true
                    }
                }
                _ => now < *give_up,
            }
        }
        _ if *at <= now => {
            due.push(*p);
            false
        }
        _ => true,
    });
    due
}

pub(super) fn carry_out<S: Stage>(
    s: &mut S,
    p: Planned,
    now: Instant,
    planned: &mut Vec<(Instant, Planned)>,
) {
    match p {
        Planned::Crash(id, downtime) => s.crash_member(id, Some(downtime)),
        Planned::Stop(id, downtime) => s.stop_member(id, Some(downtime)),
        Planned::StopLeader(downtime) => {
            if let Some((id, _)) = s.holder(0) {
                s.stop_member(id, Some(downtime));
            }
        }
        Planned::Join => join(s),
        Planned::CrashRefill(slot, _, _) => {
            if let Some((id, _)) = s.holder(slot) {
                s.crash_member(id, Some(s.dice().between(ms(10), secs(2))));
                // And once more, at the next refill, now and then.
                if s.dice().below(2) == 0 {
                    let after = s.dice().between(Duration::ZERO, secs(3));
                    planned.push((now, Planned::CrashRefill(slot, after, now + secs(60))));
                }
            }
        }
    }
}

fn pick_up<S: Stage>(s: &S) -> Option<MemberId> {
    let up = s.up();
    (!up.is_empty()).then(|| up[s.dice().index(up.len())])
}

/// A new member joins (up to three more than the group began with).
fn join<S: Stage>(s: &mut S) {
    if s.members().len() < s.shape().members + 3 {
        let ranked = s.members().iter().any(|m| m.priority != 0);
        let identity = format!("j{}", s.members().len());
        let mut member = draw_member(s.dice(), identity, ranked);
        member.guarded = draw_host(s);
        s.join_as(member);
    }
}

/// One action of the director, drawn from the seed.
pub(super) fn act<S: Stage>(s: &mut S, planned: &mut Vec<(Instant, Planned)>) {
    let now = s.now();
    match s.dice().below(110) {
        // The ordinary life of a group.
        0..10 => {
            if let Some(id) = pick_up(s) {
                let downtime = s.dice().between(Duration::ZERO, secs(20));
                s.stop_member(id, Some(downtime));
            }
        }
        10..14 => join(s),
        14..17 => {
            if s.up().len() > 2
                && let Some(id) = pick_up(s)
            {
                s.stop_member(id, None);
            }
        }
        // Faults.
        17..31 => {
            if let Some(id) = pick_up(s) {
                let downtime = s.dice().between(secs(1), secs(40));
                s.crash_member(id, Some(downtime));
            }
        }
        31..41 => {
            if let Some(id) = pick_up(s) {
                let long = s.dice().between(ms(200), secs(25));
                let machine = draw_pause(s);
                s.freeze_member(id, long, machine);
            }
        }
        41..48 => {
            if let Some(id) = pick_up(s) {
                let until = now + s.dice().between(secs(1), secs(30));
                s.link(id, |l| l.cut_until = Some(until));
                s.fault(
                    "cut off",
                    format!("m{id} cannot reach storage"),
                    Some(until),
                );
            }
        }
        48..53 => {
            if let Some(id) = pick_up(s) {
                let until = now + s.dice().between(secs(1), secs(20));
                s.link(id, |l| l.blackhole_until = Some(until));
                s.fault("blackhole", format!("m{id}'s requests vanish"), Some(until));
            }
        }
        53..57 => {
            let until = now + s.dice().between(secs(1), secs(20));
            s.outage(until);
            s.fault("outage", "storage answers 503 to all".into(), Some(until));
        }
        57..65 => {
            if let Some(id) = pick_up(s) {
                let until = now + s.dice().between(secs(2), secs(30));
                s.link(id, |l| l.lossy_until = Some(until));
                s.fault(
                    "lossy",
                    format!("m{id}'s answers lost (applied) or requests lost"),
                    Some(until),
                );
            }
        }
        65..71 => {
            if let Some(id) = pick_up(s) {
                let until = now + s.dice().between(secs(2), secs(30));
                let most = s.dice().between(ms(50), secs(5));
                s.link(id, |l| l.slow = Some((until, most)));
                s.fault(
                    "slow",
                    format!("m{id}'s answers up to {most:?} late"),
                    Some(until),
                );
            }
        }
        71..78 => {
            let slot = s.dice().below(s.slots());
            s.delete_blob(slot);
        }
        78..82 => {
            let count = s.dice().index(3) + 1;
            let identities: Vec<String> = (0..count)
                .map(|_| {
                    let id = s.dice().index(s.members().len());
                    s.members()[id].identity.clone()
                })
                .collect();
            s.delete_records(&identities);
        }
        82..86 => {
            let until = now + s.dice().between(secs(5), secs(60));
            let (key, value) = match s.dice().below(3) {
                0 => (crate::store::META_EPOCH, "twelve"),
                1 => (crate::store::META_ACQUIRED_AT, "yesterday"),
                _ => (crate::store::META_SLOTS, "many"),
            };
            let slot = s.dice().below(s.slots());
            s.write_garbage(slot, key, value);
            s.repair_at(until);
            s.fault(
                "garbage",
                format!("slot {slot}'s {key} = {value:?} until repaired"),
                Some(until),
            );
        }
        86..90 => {
            let until = now + s.dice().between(secs(10), secs(90));
            s.forge(until);
        }
        90..95 => {
            let until = now + s.dice().between(secs(1), secs(15));
            s.storm(until);
        }
        95..100 => {
            // A graceful restart of the leader, the commonest handover.
            if let Some((id, _)) = s.holder(0) {
                let downtime = s.dice().between(Duration::ZERO, secs(5));
                s.stop_member(id, Some(downtime));
            }
        }
        100..104 => rolling(s, now, planned),
        104..106 => {
            // Handovers quicker than a watch period: the leader, then the next, then
            // the next, each a moment after the last led.
            let count = s.dice().u64(2, 4) as u32;
            let mut at = now;
            for _ in 0..count {
                let downtime = s.dice().between(Duration::ZERO, secs(5));
                planned.push((at, Planned::StopLeader(downtime)));
                at += s.dice().between(ms(300), secs(4));
            }
        }
        106..107 => {
            // A member joins during a handoff.
            let downtime = s.dice().between(Duration::ZERO, secs(5));
            planned.push((now, Planned::StopLeader(downtime)));
            let join = s.dice().between(Duration::ZERO, secs(1));
            planned.push((now + join, Planned::Join));
        }
        107..109 if s.slots() > 1 => {
            // A slot holder crashes right after a refill.
            let slot = s.dice().below(s.slots());
            if let Some((id, _)) = s.holder(slot) {
                s.crash_member(id, Some(s.dice().between(ms(10), secs(2))));
                let after = s.dice().between(Duration::ZERO, secs(3));
                planned.push((now, Planned::CrashRefill(slot, after, now + secs(60))));
            }
        }
        _ if s.slots() > 1 => wipe(s),
        _ => rolling(s, now, planned),
    }
}

/// Whether a member is a daemon, whose children have a guard (four in five), or a program
/// that runs the library, whose body is a task of its own: from the hosts' stream, so that
/// the director's draws stay where they were.
pub(super) fn draw_host<S: Stage>(s: &S) -> bool {
    s.hosts().below(5) != 0
}

/// Whether a freeze pauses the whole machine (one in four: a paused VM, `docker pause`)
/// rather than the daemon alone (SIGSTOP, Ctrl-Z, a debugger; its children's guards run
/// on): from the hosts' stream.
fn draw_pause<S: Stage>(s: &S) -> bool {
    s.hosts().below(4) == 0
}

/// Broken deploys, fixed a while later (20 to 150 s): a member whose children fail at once
/// meanwhile; one every few minutes, before the final calm, from a stream of their own.
pub(super) fn draw_deploys<S: Stage>(s: &mut S) {
    let dice = Dice::new(s.shape().seed, Stream::Deploys);
    let calm_from = s.start() + s.shape().length - s.shape().final_calm;
    let mut at = s.start() + dice.between(secs(30), secs(240));
    while at < calm_from {
        let long = dice.between(secs(20), secs(150));
        // Among the members at the start and those that may join.
        let who = dice.index(s.members().len() + 3);
        s.break_at(at, who, long);
        at += dice.between(secs(60), secs(400));
    }
}

/// A rolling restart: two or three members die (crashed, or stopped) within a record
/// lease, each coming back a moment later; with the leader last, now and then.
fn rolling<S: Stage>(s: &mut S, now: Instant, planned: &mut Vec<(Instant, Planned)>) {
    let count = s.dice().u64(2, 4) as usize;
    let mut up = s.up();
    let leader = s.holder(0).map(|(id, _)| id);
    up.retain(|m| Some(*m) != leader);
    let mut at = now;
    for _ in 0..count.min(up.len()) {
        let id = up.remove(s.dice().index(up.len()));
        let downtime = s.dice().between(secs(1), secs(8));
        let action = match s.dice().coin() {
            true => Planned::Crash(id, downtime),
            false => Planned::Stop(id, downtime),
        };
        planned.push((at, action));
        at += s.dice().between(ms(300), secs(8));
    }
    if s.dice().coin() {
        let downtime = s.dice().between(secs(1), secs(8));
        planned.push((at, Planned::StopLeader(downtime)));
    }
}

/// Every member record and every slot blob deleted at once.
fn wipe<S: Stage>(s: &mut S) {
    let identities: Vec<String> = s.members().iter().map(|m| m.identity.clone()).collect();
    for slot in 0..s.slots() {
        s.delete_blob(slot);
    }
    s.delete_records(&identities);
}

impl Stage for World {
    fn now(&self) -> Instant {
        Instant::now()
    }
    fn start(&self) -> Instant {
        self.start
    }
    fn since_start(&self, at: Instant) -> Duration {
        self.recorder.since_start(at)
    }
    fn shape(&self) -> &Shape {
        &self.shape
    }
    fn slots(&self) -> u32 {
        self.slots
    }
    fn dice(&self) -> &Dice {
        &self.dice
    }
    fn hosts(&self) -> &Dice {
        &self.hosts
    }
    fn members(&self) -> &[Member] {
        &self.members
    }
    fn up(&self) -> Vec<MemberId> {
        World::up(self)
    }
    fn holder(&self, slot: u32) -> Option<(MemberId, Duration)> {
        World::holder(self, slot)
    }
    fn join_as(&mut self, member: Member) {
        self.members.push(member);
        self.start_member(self.members.len() - 1);
    }
    fn stop_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        World::stop_member(self, id, downtime);
    }
    fn crash_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        World::crash_member(self, id, downtime);
    }
    fn freeze_member(&mut self, id: MemberId, long: Duration, machine: bool) {
        World::freeze_member(self, id, long, machine);
    }
    fn link(&mut self, id: MemberId, f: impl FnOnce(&mut LinkFaults)) {
        World::link(self, id, f);
    }
    fn outage(&mut self, until: Instant) {
        self.faults
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .outage_until = Some(until);
    }
    fn fault(&self, kind: &'static str, detail: String, until: Option<Instant>) {
        World::fault(self, kind, detail, until);
    }
    fn delete_blob(&mut self, slot: u32) {
        World::delete_blob(self, slot);
    }
    fn delete_records(&mut self, identities: &[String]) {
        World::delete_records(self, identities);
    }
    fn write_garbage(&mut self, slot: u32, key: &'static str, value: &str) {
        match slot {
            0 => self.store.write_garbage(key, value),
            i => self.store.slot(i).write_garbage(key, value),
        }
    }
    fn repair_at(&mut self, at: Instant) {
        self.due.push((at, Due::Repair));
    }
    fn break_at(&mut self, at: Instant, who: MemberId, long: Duration) {
        self.due.push((at, Due::Break(who, long)));
    }
    fn forge(&mut self, until: Instant) {
        World::forge(self, until);
    }
    fn storm(&mut self, until: Instant) {
        World::storm(self, until);
    }
}

impl World {
    /// Forged member records until `until`: one to five live records of high priority that
    /// say they are settled, held by a forger who renews their leases (anyone who can write to
    /// the container can), advertising URLs where nothing answers or a real member's.
    fn forge(&mut self, until: Instant) {
        let link = Link {
            member: None,
            incarnation: 0,
            faults: self.faults.clone(),
            recorder: self.recorder.clone(),
            owners: Default::default(),
            dice: Dice::new(self.shape.seed, Stream::Mischief),
        };
        let forger = std::sync::Arc::new(self.store.client_on(std::sync::Arc::new(link)));
        let count = self.dice.index(5) + 1;
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
                let advertise = match (self.dice.coin(), urls.is_empty()) {
                    (true, false) => Some(urls[self.dice.index(urls.len())].clone()),
                    _ => Some(format!("sim://{identity}")),
                };
                let record = Record {
                    identity: identity.clone(),
                    priority: 100,
                    acquires_with: LeaseId::drawn(Source::Seed),
                    advertise,
                    // Nor a token: a wake-up to a real member's URL on its behalf is refused.
                    wake_token: None,
                    standby_until: None,
                    slots: self.slots,
                    settled: Some(secs(3600)),
                };
                (
                    MemberKey::of(&identity),
                    LeaseId::drawn(Source::Seed),
                    record,
                )
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
        let wakers: Vec<crate::elector::Waker> = self
            .members
            .iter()
            .filter_map(|m| m.running.as_ref().map(|r| r.waker.clone()))
            .collect();
        if wakers.is_empty() {
            return;
        }
        let dice = Dice::new(
            self.shape.seed ^ self.recorder.now().as_nanos() as u64,
            Stream::Mischief,
        );
        tokio::spawn(async move {
            while Instant::now() < until {
                let waker = &wakers[dice.index(wakers.len())];
                waker.wake(waker.token().expose());
                sleep(dice.between(ms(1), ms(10))).await;
            }
        });
    }
}
