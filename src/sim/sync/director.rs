//! The director of a drawn history in the synchronous world: the tokio engine's director
//! (src/sim/director.rs: the same draws, by the same code, from the same streams, through its
//! [`Stage`]) played as events on the queue instead of sleeps. What it sets for later
//! ([`Later`]: thaws are the lives', these are the world's) comes back as events too: broken
//! deploys and their fixes, garbage repaired, forgers renewing their records, wake-up storms.

use super::driver::Sim;
use super::state::{Directing, Event, Forger, Later, Storm};
use crate::sim::dice::{Dice, Stream};
use crate::sim::director::{self as drawn, Planned, Stage};
use crate::sim::network::{LinkFaults, ms, secs};
use crate::sim::trace::{MemberId, What};
use crate::sim::world::{Member, Shape};
use crate::store::{Call, GroupStore, LeaseId, Member as Record, MemberKey};
use leasehold_core::member::Input;
use std::time::Duration;
use tokio::time::Instant;

impl Sim {
    /// Plays a drawn history: the hosts and broken deploys drawn, the members started within
    /// the first seconds, the director's first look queued (as `World::play_drawn`).
    pub(super) fn play_drawn(&mut self) {
        for id in 0..self.cast.len() {
            self.cast[id].guarded = drawn::draw_host(&*self);
        }
        drawn::draw_deploys(self);
        let mut at = self.t0;
        for id in 0..self.cast.len() {
            self.at(at, Event::Start(id));
            // Members come up within the first seconds, not all in one instant.
            at += self.dice.between(Duration::ZERO, ms(1500));
        }
        let end = self.t0 + self.shape.length;
        self.directing = Some(Directing {
            end,
            calm_from: end - self.shape.final_calm,
            next: at + self.dice.between(secs(5), secs(40)),
            storm_left: 0,
            planned: Vec::new(),
        });
        self.at(at, Event::Direct);
    }

    /// The director's look: what is planned and due, its next action, its next look.
    pub(super) fn direct(&mut self) {
        let Some(mut d) = self.directing.take() else {
            return;
        };
        let now = self.now;
        if now >= d.end {
            return;
        }
        for p in drawn::due_plans(&*self, &mut d.planned, now) {
            drawn::carry_out(self, p, now, &mut d.planned);
        }
        if now >= d.next {
            if now < d.calm_from {
                drawn::act(self, &mut d.planned);
            }
            // Storms of a few actions close together, then calms.
            d.next = if d.storm_left > 0 {
                d.storm_left -= 1;
                now + self.dice.between(Duration::ZERO, secs(8))
            } else {
                d.storm_left = self.dice.below(6);
                now + self.dice.between(secs(15), secs(90))
            };
        }
        // A planned refill is watched for every 100 ms.
        let watching = (d.planned.iter()).any(|(_, p)| matches!(p, Planned::CrashRefill(..)));
        let first = (d.planned.iter())
            .filter(|(_, p)| !matches!(p, Planned::CrashRefill(..)))
            .map(|(at, _)| *at)
            .min();
        let mut at = [Some(d.next), first, Some(d.end)]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(d.end);
        if watching {
            at = at.min(now + ms(100));
        }
        self.directing = Some(d);
        self.at(at, Event::Direct);
    }

    /// Something set for later comes.
    pub(super) fn later(&mut self, later: Later) {
        match later {
            Later::Break(id, long) => {
                if id < self.cast.len() {
                    let until = self.now + long;
                    *(self.cast[id].broken.lock()).unwrap_or_else(|e| e.into_inner()) = Some(until);
                    self.record(What::Broken {
                        member: id,
                        until: until - self.t0,
                    });
                }
            }
            Later::Repair => {
                self.store.repair();
                for i in 1..self.slots {
                    self.store.slot(i).repair();
                }
            }
            Later::Forge(i) => self.forger(i),
            Later::Storm(i) => self.storm_wake(i),
        }
    }

    /// A forger renews its records every 10 s until its end, then deletes them.
    fn forger(&mut self, i: usize) {
        let (now, wall) = (self.now, self.store_date());
        let Some(f) = self.forgers.get(i) else { return };
        let done = now >= f.until;
        for (key, lease) in f.records.clone() {
            let call = match done {
                false => Call::RenewMember { key, id: lease },
                true => Call::DeleteMember {
                    key,
                    lease: Some(lease),
                    etag: None,
                },
            };
            let _ = self.store.apply(&call, now, wall);
        }
        if !done {
            let at = (now + secs(10)).min(f.until);
            self.at(at, Event::Later(Later::Forge(i)));
        }
    }

    /// The next forged wake-up of storm `i`.
    fn storm_wake(&mut self, i: usize) {
        let now = self.now;
        let Some(s) = self.storms.get(i) else { return };
        if now >= s.until {
            return;
        }
        let who = s.wakers[s.dice.index(s.wakers.len())];
        let after = s.dice.between(ms(1), ms(10));
        if self.process(who).is_some_and(|p| p.frozen.is_none()) {
            let input = Input::Wake {
                token_matches: true,
                handoff: None,
            };
            self.step(who, input);
        }
        self.at(now + after, Event::Later(Later::Storm(i)));
    }
}

impl Stage for Sim {
    fn now(&self) -> Instant {
        self.now
    }
    fn start(&self) -> Instant {
        self.t0
    }
    fn since_start(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.t0)
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
        &self.cast
    }
    fn up(&self) -> Vec<MemberId> {
        self.up_members()
    }
    fn holder(&self, slot: u32) -> Option<(MemberId, Duration)> {
        self.recorder.holder(slot)
    }
    fn join_as(&mut self, member: Member) {
        self.cast.push(member);
        self.start_member(self.cast.len() - 1);
    }
    fn stop_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        Sim::stop_member(self, id, downtime);
    }
    fn crash_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        Sim::crash_member(self, id, downtime);
    }
    fn freeze_member(&mut self, id: MemberId, long: Duration, machine: bool) {
        Sim::freeze_member(self, id, long, machine);
    }
    fn link(&mut self, id: MemberId, f: impl FnOnce(&mut LinkFaults)) {
        f(self.faults.links.entry(id).or_default());
    }
    fn outage(&mut self, until: Instant) {
        self.faults.outage_until = Some(until);
    }
    fn fault(&self, kind: &'static str, detail: String, until: Option<Instant>) {
        self.record(What::Fault {
            kind,
            detail,
            until: until.map(|u| u.saturating_duration_since(self.t0)),
        });
    }
    fn delete_blob(&mut self, slot: u32) {
        match slot {
            0 => self.store.delete(),
            i => self.store.slot(i).delete(),
        }
        self.fault("deleted", format!("slot {slot}'s blob"), None);
    }
    fn delete_records(&mut self, identities: &[String]) {
        let gone: Vec<&String> = (identities.iter())
            .filter(|i| self.store.delete_record(i))
            .collect();
        self.fault("records deleted", format!("{gone:?}"), None);
    }
    fn write_garbage(&mut self, slot: u32, key: &'static str, value: &str) {
        match slot {
            0 => self.store.write_garbage(key, value),
            i => self.store.slot(i).write_garbage(key, value),
        }
    }
    fn repair_at(&mut self, at: Instant) {
        self.at(at, Event::Later(Later::Repair));
    }
    fn break_at(&mut self, at: Instant, who: MemberId, long: Duration) {
        self.at(at, Event::Later(Later::Break(who, long)));
    }

    /// Forged member records until `until`, as the tokio engine's forger: one to five live
    /// records of priority 100 that say they are settled, advertising URLs where nothing
    /// answers or a real member's, renewed every 10 s, deleted at the end.
    fn forge(&mut self, until: Instant) {
        let (now, wall) = (self.now, self.store_date());
        let count = self.dice.index(5) + 1;
        let urls: std::collections::BTreeSet<String> = (0..self.cast.len())
            .filter(|i| self.who(*i).is_some())
            .filter_map(|i| self.cast[i].url())
            .collect();
        let urls: Vec<String> = urls.into_iter().collect();
        let mut records = Vec::new();
        for i in 0..count {
            let identity = format!("forged-{}-{i}", self.since().as_millis());
            let advertise = match (self.dice.coin(), urls.is_empty()) {
                (true, false) => Some(urls[self.dice.index(urls.len())].clone()),
                _ => Some(format!("sim://{identity}")),
            };
            let record = Record {
                identity: identity.clone(),
                priority: 100,
                acquires_with: LeaseId::of_bits(self.rng.u128(..)),
                advertise,
                wake_token: None,
                standby_until: None,
                slots: self.slots,
                settled: Some(secs(3600)),
            };
            let key = MemberKey::of(&identity);
            let lease = LeaseId::of_bits(self.rng.u128(..));
            let create = Call::CreateMember {
                key: key.clone(),
                member: record,
            };
            let _ = self.store.apply(&create, now, wall);
            let acquire = Call::AcquireMember {
                key: key.clone(),
                id: lease,
                seconds: 30,
            };
            let _ = self.store.apply(&acquire, now, wall);
            records.push((key, lease));
        }
        self.fault(
            "forged records",
            format!("{count} live records of priority 100"),
            Some(until),
        );
        self.forgers.push(Forger { records, until });
        let i = self.forgers.len() - 1;
        self.at((now + secs(10)).min(until), Event::Later(Later::Forge(i)));
    }

    /// Forged wake-ups until `until`: every few milliseconds, to a member at random, with its
    /// wake token.
    fn storm(&mut self, until: Instant) {
        self.fault(
            "wake storm",
            "forged wake-ups every 1-10 ms".into(),
            Some(until),
        );
        let wakers: Vec<_> = (0..self.cast.len()).filter_map(|i| self.who(i)).collect();
        if wakers.is_empty() {
            return;
        }
        let since = self.since().as_nanos() as u64;
        let dice = Dice::new(self.shape.seed ^ since, Stream::Mischief);
        self.storms.push(Storm {
            wakers,
            until,
            dice,
        });
        let i = self.storms.len() - 1;
        self.at(self.now, Event::Later(Later::Storm(i)));
    }
}
