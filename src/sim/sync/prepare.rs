//! Each process's start-up prepare in the synchronous world, as the daemon's (and the tokio
//! engine's members') before the first campaign: the steps of the daemon's own
//! [`Startup`](crate::elector::Startup) (every blob of the group looked at, a missing one
//! created plainly in a brand-new group, marked under the lock-delay when others have records),
//! each call carried over the member's link, an attempt cut at its limit and tried again after a
//! pause; its member takes its start once every blob exists. A SIGTERM during a pause ends the
//! process; during an attempt, once it is over (as `elector::prepare` takes it). A member of a
//! replica set prepares nothing, as the daemon's.

use super::driver::Sim;
use super::state::{Event, Preparing, Who};
use crate::elector::{Startup, StartupStep};
use crate::store::{Return, StoreError};
use leasehold_core::Pace;
use leasehold_core::backoff::Backoff;
use leasehold_core::exchange::{Tag, Tags};
use leasehold_core::member::Input;

/// The tag a start-up call travels under: its way tells it from the member's own requests,
/// which begin only after it.
fn tag() -> Tag {
    Tags::default().fresh()
}

impl Sim {
    /// `who`'s process starts its start-up prepare; a member of a replica set starts at once,
    /// as the daemon's (`prepare` is for one account): its campaign creates a missing replica's
    /// blob stamped, where a plain one made here would count for nobody.
    pub(super) fn prepare(&mut self, who: Who) {
        if self.replicas.is_some() {
            return self.prepared(who);
        }
        let now = self.now;
        let Some(p) = self.process(who) else { return };
        p.preparing = Some(Box::new(Preparing {
            startup: None,
            until: now,
            way: 0,
            call: None,
            sent: now,
            backoff: Backoff::new(Pace::PREPARE_RETRY_LEAST, Pace::PREPARE_RETRY_LONGEST),
        }));
        self.prepare_attempt(who);
    }

    /// An attempt begins: its first call.
    pub(super) fn prepare_attempt(&mut self, who: Who) {
        let (now, slots) = (self.now, self.slots);
        let limit = Pace::new(&self.timing).prepare_request();
        let me = self.cast[who.id].identity.clone();
        let Some(s) = self.process(who).and_then(|p| p.preparing.as_mut()) else {
            return;
        };
        let (startup, next) = Startup::attempt(&me, slots, true);
        s.startup = Some(startup);
        s.until = now + limit;
        self.prepare_next(who, next);
    }

    /// Carries out the attempt's next step.
    fn prepare_next(&mut self, who: Who, next: StartupStep) {
        let now = self.now;
        let request_timeout = self.timing.request_timeout();
        self.ways += 1;
        let way = self.ways;
        let Some(s) = self.process(who).and_then(|p| p.preparing.as_mut()) else {
            return;
        };
        match next {
            StartupStep::Call { call, own } => {
                // Cut at the attempt's limit, or at the call's own (`request_timeout`).
                let limit = match own {
                    Some(_) => s.until.min(now + request_timeout),
                    None => s.until,
                };
                s.way = way;
                s.call = Some(call.clone());
                s.sent = now;
                self.carry(who, tag(), way, std::rc::Rc::new(call), Some(limit), 0);
            }
            StartupStep::Over(Ok(())) => self.prepared(who),
            StartupStep::Over(Err(e)) => self.prepare_failed(who, &e),
        }
    }

    /// The return of the start-up call on its way.
    pub(super) fn prepare_answer(&mut self, who: Who, ret: Return) {
        let Some(s) = self.process(who).and_then(|p| p.preparing.as_mut()) else {
            return;
        };
        if s.call.take().is_none() {
            return;
        }
        let Some(startup) = s.startup.as_mut() else {
            return;
        };
        let next = startup.answer(ret);
        self.prepare_next(who, next);
    }

    /// The cut of way `way` of `who`: the start-up call on it, if it is that, gets its timeout.
    /// Whether it was.
    pub(super) fn prepare_cut(&mut self, who: Who, way: u64) -> bool {
        let now = self.now;
        let Some(s) = self.process(who).and_then(|p| p.preparing.as_mut()) else {
            return false;
        };
        if s.way != way {
            return false;
        }
        if let Some(call) = &s.call {
            let ret = call.failed(StoreError::TimedOut(now - s.sent));
            self.prepare_answer(who, ret);
        }
        true
    }

    /// Every blob exists: the member starts, and takes a SIGTERM that came meanwhile.
    fn prepared(&mut self, who: Who) {
        let Some(p) = self.process(who) else { return };
        p.preparing = None;
        let shutdown = p.shutdown;
        self.step(who, Input::Start);
        if shutdown {
            self.at(self.now, Event::Shutdown(who));
        }
    }

    /// An attempt failed with `error`: the process exits on an error no retry mends (refused
    /// credentials, a blob that may not be created) or when asked to stop; else it pauses, and
    /// tries again.
    fn prepare_failed(&mut self, who: Who, error: &StoreError) {
        let draw = self.rng.f64();
        let now = self.now;
        let Some(p) = self.process(who) else { return };
        if Startup::fatal(error) || p.shutdown {
            return self.exited(who);
        }
        let Some(s) = p.preparing.as_mut() else {
            return;
        };
        s.startup = None;
        let pause = s.backoff.next_pause(draw);
        p.round += 1;
        p.timer = Some(now + pause);
        let round = p.round;
        self.at(now + pause, Event::Timer { who, round });
    }

    /// A SIGTERM reaches `who` while it prepares: between two attempts it exits at once.
    /// Whether it was preparing.
    pub(super) fn prepare_shutdown(&mut self, who: Who) -> bool {
        let Some(p) = self.process(who) else {
            return false;
        };
        let Some(s) = p.preparing.as_ref() else {
            return false;
        };
        if s.startup.is_none() {
            self.exited(who);
        }
        true
    }
}
