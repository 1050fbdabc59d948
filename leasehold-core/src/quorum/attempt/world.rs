//! A small world for the attempt's tests: storage accounts that keep one lease blob each (its
//! lease, epoch, stamp and creation instant, as Azure would), and members running attempts
//! whose requests are carried out in an order each test chooses.

use crate::exchange::{Answer, Send};
use crate::quorum::{
    Attempt, Grounds, Input, Mutants, Output, ReplicaId, ReplicaSet, Reply, Request, Settings,
    Stamp,
};
use crate::timing::Timing;
use std::time::{Duration, Instant};

/// One account's lease blob.
#[derive(Debug, Clone)]
pub struct Blob {
    /// The member holding its lease, until when (the server's expiry).
    pub holder: Option<(u32, Instant)>,
    pub epoch: Option<u64>,
    pub stamp: Stamp,
    pub created: Instant,
}

/// The accounts, and the lease clock (one clock for all here).
pub struct World {
    pub now: Instant,
    pub accounts: Vec<Option<Blob>>,
    pub timing: Timing,
}

impl World {
    /// `n` accounts whose blobs `stamps` stamped, created long ago, no epoch, no lease.
    pub fn new(t0: Instant, stamps: Vec<Stamp>) -> Self {
        let long_ago = t0;
        let accounts = (stamps.into_iter())
            .map(|stamp| {
                Some(Blob {
                    holder: None,
                    epoch: None,
                    stamp,
                    created: long_ago,
                })
            })
            .collect();
        Self {
            now: t0 + Duration::from_secs(3600),
            accounts,
            timing: Timing::default(),
        }
    }

    /// What account `a` answers member `m`'s `request` (`create`: the stamp a create writes).
    pub fn apply(&mut self, m: u32, a: usize, request: &Request<Instant>, create: Stamp) -> Reply {
        let now = self.now;
        let lease = self.timing.duration;
        let Some(blob) = &mut self.accounts[a] else {
            if let Request::Create { .. } = request {
                self.accounts[a] = Some(Blob {
                    holder: None,
                    epoch: None,
                    stamp: create,
                    created: now,
                });
                return Reply::Done;
            }
            return Reply::Missing;
        };
        let free = blob.holder.is_none_or(|(h, until)| h == m || until <= now);
        let ours = blob.holder.is_some_and(|(h, until)| h == m && until > now);
        match request {
            Request::Acquire { .. } if free => {
                blob.holder = Some((m, now + lease));
                Reply::Done
            }
            Request::Acquire { .. } => Reply::Refused,
            Request::Read { .. } => Reply::Read {
                epoch: blob.epoch,
                stamp: blob.stamp,
                age: now - blob.created,
                same_etag: false,
            },
            Request::WriteEpoch { epoch, .. } if ours => {
                blob.epoch = Some(*epoch);
                Reply::Done
            }
            Request::WriteEpoch { .. } => Reply::Refused,
            Request::Create { .. } => Reply::Refused,
            Request::Release { .. } => {
                if ours {
                    blob.holder = None;
                }
                Reply::Done
            }
        }
    }

    /// Who holds account `a`'s lease now.
    pub fn holder(&self, a: usize) -> Option<u32> {
        let blob = self.accounts[a].as_ref()?;
        blob.holder.filter(|(_, u)| *u > self.now).map(|(h, _)| h)
    }
}

/// The member's answers: its wall clock; a set of one without a lock-delay of its own.
pub struct Ground {
    pub wall_ms: u64,
    pub shutting_down: bool,
}

impl Grounds<Instant> for Ground {
    fn wall_ms(&mut self) -> u64 {
        self.wall_ms
    }

    fn shutting_down(&self) -> bool {
        self.shutting_down
    }

    fn single_lock_delay(&mut self, _: Option<u64>, _: Duration, _: Instant) -> Option<Instant> {
        None
    }
}

/// A member running an attempt over `places` (the account of each place of its set).
pub struct Member {
    pub id: u32,
    pub places: Vec<usize>,
    pub set: ReplicaSet,
    pub attempt: Attempt<Instant>,
    /// Requests not carried out yet, with their send instant.
    pub queue: Vec<(Send<Request<Instant>>, Instant)>,
    /// Every output but the sends, in order.
    pub ends: Vec<Output<Instant>>,
    /// Every request sent, in order.
    pub sent: Vec<Request<Instant>>,
    pub ground: Ground,
    /// The answers lost on their way, for a test to deliver late.
    pub lost: Vec<Answer<Instant, Reply>>,
}

/// The settings of an attempt of a member of `set` (nothing seen, no lock-delay known).
pub fn settings(set: ReplicaSet) -> Settings<Instant> {
    Settings {
        set,
        timing: Timing::default(),
        seen: None,
        young_until: vec![None; set.len()],
        brand_new: false,
        create_if_missing: true,
        split_round: 0,
        split_draw: 0.5,
        mutants: Mutants::default(),
    }
}

impl Member {
    pub fn new(id: u32, places: Vec<usize>, settings: Settings<Instant>) -> Self {
        Self {
            id,
            places,
            set: settings.set,
            attempt: Attempt::new(settings),
            queue: Vec::new(),
            ends: Vec::new(),
            sent: Vec::new(),
            ground: Ground {
                wall_ms: 1000,
                shutting_down: false,
            },
            lost: Vec::new(),
        }
    }

    /// Feeds `input` at `now`, queueing what it sends.
    pub fn feed(&mut self, now: Instant, input: Input<Instant>) {
        for output in self.attempt.handle(now, input, &mut self.ground) {
            match output {
                Output::Send(send) => {
                    self.sent.push(send.request);
                    self.queue.push((send, now));
                }
                other => self.ends.push(other),
            }
        }
    }

    /// Carries out the queued requests to the places `to` picks, in order, each answered at once
    /// (`lost`: the answers of the places it picks are lost); repeats until none is left.
    pub fn carry(
        &mut self,
        world: &mut World,
        to: impl Fn(&Request<Instant>) -> bool,
        lost: impl Fn(&Request<Instant>) -> bool,
    ) {
        while let Some(at) = self.queue.iter().position(|(s, _)| to(&s.request)) {
            let dropped = lost(&self.queue[at].0.request);
            self.carry_one(world, at, dropped);
        }
    }

    /// Carries out the queued request at `at`, its answer heard at once or, if `lost`, kept in
    /// [`Member::lost`].
    pub fn carry_one(&mut self, world: &mut World, at: usize, lost: bool) {
        let (send, sent) = self.queue.remove(at);
        let place = send.request.replica();
        let create = Stamp::new(&self.set, ReplicaId(100 + place as u128));
        let reply = world.apply(self.id, self.places[place], &send.request, create);
        let answer = Answer {
            tag: send.tag,
            sent,
            answer: reply,
        };
        match lost {
            true => self.lost.push(answer),
            false => self.feed(world.now, Input::Answer(answer)),
        }
    }

    /// Carries out everything queued, every answer heard.
    pub fn settle(&mut self, world: &mut World) {
        self.carry(world, |_| true, |_| false);
    }
}
