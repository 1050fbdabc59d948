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
use super::network::{Link, ms, secs};
use super::trace::MemberId;
use super::world::{Cast, Member, World};
use crate::random::Source;
use crate::store::{GroupStore, LeaseId, Member as Record, MemberKey};
use std::time::Duration;
use tokio::time::{Instant, sleep};

/// A member as the director draws it.
/// The cast of a drawn history of `members` members: the slots, each member, and how much
/// faster the service's clock runs (up to 500 ppm).
pub(super) fn draw_cast(dice: &Dice, members: usize) -> Cast {
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

impl World {
    /// Plays a drawn history to its end.
    pub(super) async fn play_drawn(&mut self) {
        for id in 0..self.members.len() {
            self.members[id].guarded = self.draw_host();
        }
        self.draw_deploys();
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
            for p in self.due_plans(&mut planned, now) {
                self.carry_out(p, now, &mut planned);
            }
            if now >= next {
                if now < calm_from {
                    self.act(&mut planned);
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

    /// The planned actions due at `now` (a refill is due once its slot is held again).
    fn due_plans(&self, planned: &mut Vec<(Instant, Planned)>, now: Instant) -> Vec<Planned> {
        let mut due = Vec::new();
        planned.retain(|(at, p)| match p {
            Planned::CrashRefill(slot, after, give_up) => {
                let since = self.recorder.since_start(*at);
                match self.holder(*slot) {
                    Some((_, started)) if started >= since => {
                        let due_at = self.start + started + *after;
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

    fn carry_out(&mut self, p: Planned, now: Instant, planned: &mut Vec<(Instant, Planned)>) {
        match p {
            Planned::Crash(id, downtime) => self.crash_member(id, Some(downtime)),
            Planned::Stop(id, downtime) => self.stop_member(id, Some(downtime)),
            Planned::StopLeader(downtime) => {
                if let Some((id, _)) = self.holder(0) {
                    self.stop_member(id, Some(downtime));
                }
            }
            Planned::Join => self.join(),
            Planned::CrashRefill(slot, _, _) => {
                if let Some((id, _)) = self.holder(slot) {
                    self.crash_member(id, Some(self.dice.between(ms(10), secs(2))));
                    // And once more, at the next refill, now and then.
                    if self.dice.below(2) == 0 {
                        let after = self.dice.between(Duration::ZERO, secs(3));
                        planned.push((now, Planned::CrashRefill(slot, after, now + secs(60))));
                    }
                }
            }
        }
    }

    fn pick_up(&self) -> Option<MemberId> {
        let up = self.up();
        (!up.is_empty()).then(|| up[self.dice.index(up.len())])
    }

    /// A new member joins (up to three more than the group began with).
    fn join(&mut self) {
        if self.members.len() < self.shape.members + 3 {
            let ranked = self.members.iter().any(|m| m.priority != 0);
            let identity = format!("j{}", self.members.len());
            let mut member = draw_member(&self.dice, identity, ranked);
            member.guarded = self.draw_host();
            self.members.push(member);
            self.start_member(self.members.len() - 1);
        }
    }

    /// One action of the director, drawn from the seed.
    fn act(&mut self, planned: &mut Vec<(Instant, Planned)>) {
        let now = Instant::now();
        match self.dice.below(110) {
            // The ordinary life of a group.
            0..10 => {
                if let Some(id) = self.pick_up() {
                    let downtime = self.dice.between(Duration::ZERO, secs(20));
                    self.stop_member(id, Some(downtime));
                }
            }
            10..14 => self.join(),
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
                    let downtime = self.dice.between(secs(1), secs(40));
                    self.crash_member(id, Some(downtime));
                }
            }
            31..41 => {
                if let Some(id) = self.pick_up() {
                    let long = self.dice.between(ms(200), secs(25));
                    let machine = self.draw_pause();
                    self.freeze_member(id, long, machine);
                }
            }
            41..48 => {
                if let Some(id) = self.pick_up() {
                    let until = now + self.dice.between(secs(1), secs(30));
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
                    let until = now + self.dice.between(secs(1), secs(20));
                    self.link(id, |l| l.blackhole_until = Some(until));
                    self.fault("blackhole", format!("m{id}'s requests vanish"), Some(until));
                }
            }
            53..57 => {
                let until = now + self.dice.between(secs(1), secs(20));
                self.faults
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .outage_until = Some(until);
                self.fault("outage", "storage answers 503 to all".into(), Some(until));
            }
            57..65 => {
                if let Some(id) = self.pick_up() {
                    let until = now + self.dice.between(secs(2), secs(30));
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
                    let until = now + self.dice.between(secs(2), secs(30));
                    let most = self.dice.between(ms(50), secs(5));
                    self.link(id, |l| l.slow = Some((until, most)));
                    self.fault(
                        "slow",
                        format!("m{id}'s answers up to {most:?} late"),
                        Some(until),
                    );
                }
            }
            71..78 => self.delete_blob(self.dice.below(self.slots)),
            78..82 => {
                let count = self.dice.index(3) + 1;
                let identities: Vec<String> = (0..count)
                    .map(|_| {
                        let id = self.dice.index(self.members.len());
                        self.members[id].identity.clone()
                    })
                    .collect();
                self.delete_records(&identities);
            }
            82..86 => {
                let until = now + self.dice.between(secs(5), secs(60));
                let (key, value) = match self.dice.below(3) {
                    0 => (crate::store::META_EPOCH, "twelve"),
                    1 => (crate::store::META_ACQUIRED_AT, "yesterday"),
                    _ => (crate::store::META_SLOTS, "many"),
                };
                let slot = self.dice.below(self.slots);
                match slot {
                    0 => self.store.write_garbage(key, value),
                    i => self.store.slot(i).write_garbage(key, value),
                }
                self.due.push((until, super::world::Due::Repair));
                self.fault(
                    "garbage",
                    format!("slot {slot}'s {key} = {value:?} until repaired"),
                    Some(until),
                );
            }
            86..90 => {
                let until = now + self.dice.between(secs(10), secs(90));
                self.forge(until);
            }
            90..95 => {
                let until = now + self.dice.between(secs(1), secs(15));
                self.storm(until);
            }
            95..100 => {
                // A graceful restart of the leader, the commonest handover.
                if let Some((id, _)) = self.holder(0) {
                    let downtime = self.dice.between(Duration::ZERO, secs(5));
                    self.stop_member(id, Some(downtime));
                }
            }
            100..104 => self.rolling(now, planned),
            104..106 => {
                // Handovers quicker than a watch period: the leader, then the next, then
                // the next, each a moment after the last led.
                let count = self.dice.u64(2, 4) as u32;
                let mut at = now;
                for _ in 0..count {
                    let downtime = self.dice.between(Duration::ZERO, secs(5));
                    planned.push((at, Planned::StopLeader(downtime)));
                    at += self.dice.between(ms(300), secs(4));
                }
            }
            106..107 => {
                // A member joins during a handoff.
                let downtime = self.dice.between(Duration::ZERO, secs(5));
                planned.push((now, Planned::StopLeader(downtime)));
                let join = self.dice.between(Duration::ZERO, secs(1));
                planned.push((now + join, Planned::Join));
            }
            107..109 if self.slots > 1 => {
                // A slot holder crashes right after a refill.
                let slot = self.dice.below(self.slots);
                if let Some((id, _)) = self.holder(slot) {
                    self.crash_member(id, Some(self.dice.between(ms(10), secs(2))));
                    let after = self.dice.between(Duration::ZERO, secs(3));
                    planned.push((now, Planned::CrashRefill(slot, after, now + secs(60))));
                }
            }
            _ if self.slots > 1 => self.wipe(),
            _ => self.rolling(now, planned),
        }
    }

    /// Whether a member is a daemon, whose children have a guard (four in five), or a program
    /// that runs the library, whose body is a task of its own: from the hosts' stream, so that
    /// the director's draws stay where they were.
    fn draw_host(&self) -> bool {
        self.hosts.below(5) != 0
    }

    /// Whether a freeze pauses the whole machine (one in four: a paused VM, `docker pause`)
    /// rather than the daemon alone (SIGSTOP, Ctrl-Z, a debugger; its children's guards run
    /// on): from the hosts' stream.
    fn draw_pause(&self) -> bool {
        self.hosts.below(4) == 0
    }

    /// Broken deploys, fixed a while later (20 to 150 s): a member whose children fail at once
    /// meanwhile; one every few minutes, before the final calm, from a stream of their own.
    fn draw_deploys(&mut self) {
        let dice = Dice::new(self.shape.seed, Stream::Deploys);
        let calm_from = self.start + self.shape.length - self.shape.final_calm;
        let mut at = self.start + dice.between(secs(30), secs(240));
        while at < calm_from {
            let long = dice.between(secs(20), secs(150));
            // Among the members at the start and those that may join.
            let who = dice.index(self.members.len() + 3);
            self.due.push((at, super::world::Due::Break(who, long)));
            at += dice.between(secs(60), secs(400));
        }
    }

    /// A rolling restart: two or three members die (crashed, or stopped) within a record
    /// lease, each coming back a moment later; with the leader last, now and then.
    fn rolling(&mut self, now: Instant, planned: &mut Vec<(Instant, Planned)>) {
        let count = self.dice.u64(2, 4) as usize;
        let mut up = self.up();
        let leader = self.holder(0).map(|(id, _)| id);
        up.retain(|m| Some(*m) != leader);
        let mut at = now;
        for _ in 0..count.min(up.len()) {
            let id = up.remove(self.dice.index(up.len()));
            let downtime = self.dice.between(secs(1), secs(8));
            let action = match self.dice.coin() {
                true => Planned::Crash(id, downtime),
                false => Planned::Stop(id, downtime),
            };
            planned.push((at, action));
            at += self.dice.between(ms(300), secs(8));
        }
        if self.dice.coin() {
            let downtime = self.dice.between(secs(1), secs(8));
            planned.push((at, Planned::StopLeader(downtime)));
        }
    }

    /// Every member record and every slot blob deleted at once.
    fn wipe(&mut self) {
        let identities: Vec<String> = self.members.iter().map(|m| m.identity.clone()).collect();
        for slot in 0..self.slots {
            self.delete_blob(slot);
        }
        self.delete_records(&identities);
    }

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
