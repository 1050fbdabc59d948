//! The members' lives in the synchronous world, as the tokio engine's world lives them
//! (src/sim/world.rs): a process started (again) with its record and its settings, SIGTERM,
//! SIGKILL (its body gone with it), a freeze of the daemon alone or of its whole machine and
//! its thaw, its exit and restart; the world's look at the line ([`What::Line`]); and how a
//! wake-up or a probe reaches the member serving the URL it names.

use super::driver::{Process, Sim};
use super::state::Small;
use super::state::{Event, Kind, Leg, Sent, Wake, Who};
use crate::crash_loop::CrashLoop;
use crate::secret::Secret;
use crate::sim::dice::{Dice, Stream};
use crate::sim::network::ms;
use crate::sim::trace::{InLine, MemberId, What};
use crate::sim::world::in_succession;
use crate::store::Shell;
use crate::store::{LeaseId, Member as Published, MemberRecord, StoreError};
use leasehold_core::Pace;
use leasehold_core::campaign;
use leasehold_core::confirmation::Wake as Woke;
use leasehold_core::exchange::Tag;
use leasehold_core::handoff::{Note, Outcome};
use leasehold_core::leading;
use leasehold_core::line::Found;
use leasehold_core::member::{Input, Member, Reply, Request, Say, Settings};
use leasehold_core::slots::WaitRequest;
use leasehold_core::wake::WakeAnswer;
use leasehold_core::watch;
use std::time::Duration;
use tokio::time::Instant;

impl Sim {
    /// Member `id`'s process starts (again), unless it runs.
    pub(super) fn start_member(&mut self, id: MemberId) {
        if self.running.len() <= id {
            self.running.resize_with(id + 1, || None);
            self.generations.resize(id + 1, 0);
        }
        while self.wakes.len() <= id {
            let member = self.wakes.len();
            self.wakes
                .push(Dice::new(self.shape.seed, Stream::Wakes(member)));
        }
        if self.running[id].is_some() {
            return;
        }
        self.generations[id] += 1;
        let generation = self.generations[id];
        let seed = self.shape.seed;
        let token = format!("{:032x}", self.rng.u128(..));
        let acquires_with = LeaseId::of_bits(self.rng.u128(..));
        let record_lease = LeaseId::of_bits(self.rng.u128(..));
        let set = self.set_of(id);
        let m = &mut self.cast[id];
        m.incarnation += 1;
        m.after_exit = None;
        m.restart_at = None;
        let advertise = m.url();
        let published = Published {
            identity: m.identity.clone(),
            priority: m.priority,
            acquires_with,
            wake_token: advertise.as_ref().map(|_| Secret::new(token.clone())),
            advertise,
            standby_until: None,
            slots: self.slots,
            settled: None,
        };
        let settings = Settings {
            timing: self.timing,
            slots: self.slots,
            me: m.identity.clone(),
            priority: m.priority,
            preempt_after: m.preempt_after,
            create_if_missing: true,
            set,
            one_term: false,
            authorized: false,
            mutants: self.mutants,
        };
        self.running[id] = Some(Box::new(Process {
            generation,
            core: Member::new(settings, published, acquires_with),
            record_lease,
            token,
            open: Small::default(),
            timer: None,
            round: 0,
            net: Dice::new(seed, Stream::Network(id, generation)),
            bodies: Dice::new(seed, Stream::Bodies(id, generation)),
            frozen: None,
            held: Vec::new(),
            body: None,
            stuck: None,
            body_round: 0,
            crash_loop: CrashLoop::default(),
            acquired: Small::default(),
            last_slot: 0,
            shutdown: false,
            preparing: None,
        }));
        let m = &self.cast[id];
        self.record(What::Up {
            member: id,
            identity: m.identity.clone(),
            priority: m.priority,
            slots: self.slots,
            url: m.url(),
            guarded: m.guarded,
        });
        self.prepare(Who { id, generation });
    }

    /// The start of member `id` that runs now.
    pub(super) fn who(&self, id: MemberId) -> Option<Who> {
        let p = self.running.get(id)?.as_ref()?;
        Some(Who {
            id,
            generation: p.generation,
        })
    }

    /// The members whose process runs and is not being stopped.
    pub(super) fn up_members(&self) -> Vec<MemberId> {
        (0..self.cast.len())
            .filter(|i| self.who(*i).is_some() && self.cast[*i].after_exit.is_none())
            .collect()
    }

    /// SIGTERM; once it has exited it starts again after `downtime` (`None`: it left).
    pub(super) fn stop_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        let Some(who) = self.who(id) else { return };
        self.cast[id].after_exit = Some(downtime);
        self.record(What::Stop { member: id });
        self.line();
        let Some(p) = self.process(who) else { return };
        if !p.shutdown {
            p.shutdown = true;
            self.at(self.now, Event::Shutdown(who));
        }
    }

    /// SIGKILL; it starts again after `downtime` (`None`: never by itself).
    pub(super) fn crash_member(&mut self, id: MemberId, downtime: Option<Duration>) {
        let Some(mut p) = self.running.get_mut(id).and_then(Option::take) else {
            return;
        };
        let m = &mut self.cast[id];
        m.after_exit = None;
        m.restart_at = downtime.map(|d| self.now + d);
        if let Some(at) = m.restart_at {
            self.at(at, Event::Start(id));
        }
        self.record(What::Crash { member: id });
        self.line();
        // Its guards see the daemon's pipe close and kill its children at once (a kill ends a
        // pause of its machine too); the library's task dies with its program.
        let mut notes = Vec::new();
        for body in [&mut p.body, &mut p.stuck].into_iter().flatten() {
            body.crash(self.now, id, &mut notes);
        }
        self.notes(notes);
    }

    /// Member `who`'s loop is over: it exits, and starts again after the downtime its stop
    /// gave, or (its body asked it to exit) after the service manager's restart delay.
    pub(super) fn exited(&mut self, who: Who) {
        self.record(What::Exit { member: who.id });
        let Some(mut p) = self.running[who.id].take() else {
            return;
        };
        let mut notes = Vec::new();
        for body in [&mut p.body, &mut p.stuck].into_iter().flatten() {
            body.crash(self.now, who.id, &mut notes);
        }
        self.notes(notes);
        let restart = match self.cast[who.id].after_exit.take() {
            Some(downtime) => downtime,
            None => Some(self.dice.between(ms(100), Duration::from_secs(10))),
        };
        self.cast[who.id].restart_at = restart.map(|d| self.now + d);
        if let Some(at) = self.cast[who.id].restart_at {
            self.at(at, Event::Start(who.id));
        }
    }

    /// SIGSTOP for `long`, then SIGCONT: of the daemon alone, or with `machine` of its whole
    /// machine (its children and their guards too).
    pub(super) fn freeze_member(&mut self, id: MemberId, long: Duration, machine: bool) {
        let Some(who) = self.who(id) else { return };
        let Some(p) = self.process(who) else { return };
        if p.frozen.is_some() {
            return;
        }
        p.frozen = Some(machine);
        self.record(What::Freeze {
            member: id,
            machine,
        });
        self.at(self.now + long, Event::Thaw(who));
    }

    /// A freeze ends: what came meanwhile is taken, in order, and the body looked at.
    pub(super) fn thaw(&mut self, who: Who) {
        self.record(What::Thaw { member: who.id });
        let Some(p) = self.process(who) else { return };
        p.frozen = None;
        let mut held = std::mem::take(&mut p.held);
        // All ready at once, they are taken in the order of the shell's biased `select!`
        // (src/elector/drive/driver.rs): answers, the body's, a shutdown, then the timer.
        held.sort_by_key(|event| match event {
            Event::Back { .. } | Event::Cut { .. } | Event::Reply { .. } => 0,
            Event::MayCampaign(_) => 1,
            Event::Shutdown(_) => 2,
            _ => 3,
        });
        for event in held {
            self.at(self.now, event);
        }
        self.body_tick(who);
    }

    /// Records the line as the world has it now.
    pub(super) fn line(&self) {
        self.record(What::Line {
            records: self.look(),
        });
    }

    /// The line as the world has it: the leased member records in succession order, each
    /// with the running member that holds it (none: its process is gone).
    pub(super) fn look(&self) -> Vec<InLine> {
        let wall = self.wall();
        let running = |w: &Who| self.who(w.id) == Some(*w);
        let mut records =
            (self.store).map_leased_records_at(self.now, |member, lease, created| InLine {
                identity: member.identity.clone(),
                priority: member.priority,
                owner: (self.owners.get(&lease))
                    .filter(|w| running(w))
                    .map(|w| w.id),
                advertised: member.advertise.is_some(),
                standby: member.in_standby(wall),
                joined: created.unix_timestamp(),
            });
        in_succession(&mut records);
        records
    }

    /// What `who`'s member says that the trace shows: a lease given up without a successor.
    pub(super) fn said(&mut self, who: Who, say: &Say<Instant, Shell, StoreError>) {
        if let Say::Leading(say) = say
            && let leading::Say::Handoff(Note::Gave(outcome)) = &**say
            && matches!(
                outcome,
                Outcome::NoSuccessor | Outcome::Released | Outcome::Fallback
            )
        {
            self.record(What::Released { member: who.id });
        }
    }

    /// A probe or a wake-up of `who`'s request `tag`, sent to the URL it names.
    pub(super) fn http(&mut self, who: Who, tag: Tag, request: &Request<Instant, Shell>) {
        let (kind, url, token, handoff, to) = match request {
            Request::Leading(leading::Request::Probe { to, url }) => {
                (Kind::Lookout, Some(url.clone()), None, None, to.clone())
            }
            Request::Leading(leading::Request::Wake { to, reserved }) => {
                self.handed(who, to);
                let token = to.member.wake_token.as_ref().map(|t| t.expose().to_owned());
                let handoff = reserved.as_ref().map(|r| r.to_header());
                let url = to.member.advertise.clone();
                if url.is_none() {
                    // No URL: the member finds the handoff by itself.
                    let reply = Reply::Leading(leading::Reply::Woke(Woke::Missed));
                    self.reply_at(self.now, who, tag, reply);
                    return;
                }
                (Kind::Wake, url, token, handoff, to.identity().to_owned())
            }
            Request::Campaign(campaign::Request::Wait(WaitRequest::Probe(key))) => {
                let record = self.store.published(key);
                let (url, token) = match record {
                    Some(r) => (
                        r.advertise.clone(),
                        r.wake_token.map(|t| t.expose().to_owned()),
                    ),
                    None => (None, None),
                };
                if url.is_none() || token.is_none() {
                    // No URL to probe: the member stands.
                    let reply = Reply::Probed(Found::NoAnswer);
                    self.reply_at(self.now, who, tag, reply);
                    return;
                }
                (Kind::Probe, url, token, None, String::new())
            }
            // A watcher's probe of the member ahead: at the URL, and with the token, of the
            // record its line has (the one it listed, not the store's now).
            Request::Campaign(campaign::Request::Watch(watch::Request::ProbeAhead)) => {
                let at = self.process(who).and_then(|p| {
                    let r = &p.core.kept().ahead.as_ref()?.member;
                    let token = r.wake_token.as_ref()?.expose().to_owned();
                    Some((r.advertise.clone()?, token))
                });
                let Some((url, token)) = at else {
                    // No URL to probe: the member stands.
                    self.reply_at(self.now, who, tag, Reply::Probed(Found::NoAnswer));
                    return;
                };
                (Kind::Probe, Some(url), Some(token), None, String::new())
            }
            _ => {
                let reply = Reply::Probed(Found::NoAnswer);
                self.reply_at(self.now, who, tag, reply);
                return;
            }
        };
        let url = url.unwrap_or_default();
        let to = match kind {
            Kind::Probe => url.trim_start_matches("sim://").to_owned(),
            _ => to,
        };
        let target = (0..self.cast.len()).find(|i| {
            let m = &self.cast[*i];
            m.url().as_deref() == Some(url.as_str()) && self.who(*i).is_some()
        });
        let dice = &self.wakes[who.id];
        let (after, leg) = match target.and_then(|i| self.who(i)) {
            // Nothing listens there: the connection is refused.
            None => (ms(1), Leg::Back(Sent::Unreachable)),
            Some(at)
                if self.running[at.id]
                    .as_ref()
                    .is_some_and(|p| p.frozen.is_some()) =>
            {
                (Pace::WAKE_SEND_TIMEOUT, Leg::Back(Sent::Failed))
            }
            Some(at) => {
                let travel = dice.between(Duration::from_micros(300), ms(2));
                (travel, Leg::There { at, travel })
            }
        };
        let wake = Wake {
            from: who,
            tag,
            kind,
            to,
            token,
            handoff,
            leg,
        };
        self.at(self.now + after, Event::Wake(Box::new(wake)));
    }

    /// The lease was handed to `to`: the trace says so, with whether its record was there (on
    /// a replica set, on any replica: the line is the union of theirs, docs/quorum.md).
    fn handed(&mut self, who: Who, to: &MemberRecord) {
        let slot = self.process(who).map_or(0, |p| p.last_slot);
        let (identity, now) = (to.identity(), self.now);
        let others = self.replicas.iter().flat_map(|r| r.stores.iter());
        let record = self.store.has_live_record_at(identity, now)
            || others
                .into_iter()
                .any(|s| s.has_live_record_at(identity, now));
        self.record(What::HandedTo {
            member: who.id,
            to: to.identity().to_owned(),
            slot,
            record,
        });
    }

    /// A wake-up or a probe reaches its member, or its answer its sender.
    pub(super) fn wake(&mut self, mut wake: Wake) {
        match wake.leg {
            Leg::There { at, travel } => {
                // A frozen process answers no connection: the sender's send times out, and the
                // member never takes it (as the tokio world's sender has it).
                if self.process(at).is_some_and(|p| p.frozen.is_some()) {
                    wake.leg = Leg::Back(Sent::Failed);
                    let after = Pace::WAKE_SEND_TIMEOUT.saturating_sub(travel);
                    return self.at(self.now + after, Event::Wake(Box::new(wake)));
                }
                let own = self.process(at).map(|p| p.token.clone());
                let matches = own.is_some() && own == wake.token;
                let sent = match (wake.kind, own.is_some()) {
                    (_, false) => Sent::Unreachable,
                    (Kind::Probe, _) => match matches {
                        true => Sent::Ok,
                        false => Sent::Refused,
                    },
                    _ if !matches => Sent::Refused,
                    _ => {
                        let input = Input::Wake {
                            token_matches: true,
                            handoff: wake.handoff.take(),
                        };
                        match self.step(at, input) {
                            Some(WakeAnswer::Accepted) => Sent::Ok,
                            Some(WakeAnswer::TooSoon) => Sent::Later,
                            _ => Sent::Refused,
                        }
                    }
                };
                // One in ten: the member took it, but its answer is lost.
                let probe = matches!(wake.kind, Kind::Probe);
                let lost = !probe && self.wakes[wake.from.id].below(10) == 0;
                let (after, sent) = match lost {
                    true => (Pace::WAKE_SEND_TIMEOUT.saturating_sub(travel), Sent::Failed),
                    false => (Duration::ZERO, sent),
                };
                wake.leg = Leg::Back(sent);
                self.at(self.now + after, Event::Wake(Box::new(wake)));
            }
            Leg::Back(sent) => self.woke(wake, sent),
        }
    }

    /// The answer of a wake-up or a probe reaches its sender.
    fn woke(&mut self, wake: Wake, sent: Sent) {
        let Wake {
            from,
            tag,
            kind,
            to,
            token,
            ..
        } = wake;
        if self.process(from).is_none() {
            return;
        }
        if !matches!(kind, Kind::Probe) {
            let answer = match sent {
                Sent::Ok => "accepted",
                Sent::Later => "too soon",
                Sent::Refused => "refused",
                Sent::Unreachable => "unreachable",
                Sent::Failed => "timeout",
            };
            self.record(What::Wake {
                member: from.id,
                to,
                answer,
                token: token.is_some(),
            });
        }
        let reply = match kind {
            Kind::Wake => Reply::Leading(leading::Reply::Woke(match sent {
                Sent::Ok => Woke::Accepted,
                Sent::Later | Sent::Failed => Woke::Missed,
                Sent::Unreachable => Woke::Unreachable,
                Sent::Refused => Woke::Refused,
            })),
            Kind::Lookout => Reply::Leading(leading::Reply::Probed(!matches!(
                sent,
                Sent::Failed | Sent::Unreachable
            ))),
            Kind::Probe => Reply::Probed(sent.found()),
        };
        self.reply_at(self.now, from, tag, reply);
    }
}
