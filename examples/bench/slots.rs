//! (7) A group with slots (docs/slots.md): ten daemons with `[lease].slots = 3`,
//! what the group asks of storage once settled (from each daemon's own `/metrics`, by its part: the
//! three holders, the poller, the members waiting behind it), and how long a slot stays empty after
//! its holder is SIGKILLed, several times, beside the bound `L + 1.2 x acquire_interval`.

use crate::fleet::{Env, Fleet, LeaseOps, Workload};
use leasehold_testkit::slots::{check_slots, next_start, running_now};
use leasehold_testkit::wait::pause;
use leasehold_testkit::{Daemon, Deadlines, mono_now, secs, wait_until};
use nix::sys::signal::Signal;
use std::time::Duration;

/// One daemon's part in the slots group, and what it sent in the window.
#[derive(Debug, Clone)]
pub struct SlotPart {
    pub identity: String,
    /// `holder of slot i`, `poller` (the member holding no slot that sent the most) or
    /// `waiting`.
    pub role: String,
    pub ops: LeaseOps,
}

/// One refill: a holder SIGKILLed, and its slot's next child.
#[derive(Debug, Clone)]
pub struct Refill {
    pub slot: u32,
    pub killed: String,
    /// From the SIGKILL to the first line of the next child on that slot; `None`: none within
    /// the wait.
    pub took: Option<Duration>,
    pub by: Option<String>,
}

/// What the slots phase measured.
#[derive(Debug, Clone)]
pub struct Slots {
    pub members: usize,
    pub slots: u32,
    pub window: Duration,
    pub parts: Vec<SlotPart>,
    pub refills: Vec<Refill>,
    /// Two children on one slot at once, over the whole phase.
    pub overlaps: usize,
    /// The most children alive at once, all slots.
    pub most_at_once: usize,
}

impl Slots {
    /// The parts' requests per second in the window: all of them, and a List counted as ten.
    pub fn per_second(&self, role: impl Fn(&str) -> bool) -> (f64, f64) {
        let s = self.window.as_secs_f64();
        self.parts
            .iter()
            .filter(|p| role(&p.role))
            .fold((0.0, 0.0), |(all, weighted), p| {
                let lists = p.ops.0.get("list_members").copied().unwrap_or(0.0);
                (
                    all + p.ops.total() / s,
                    weighted + (p.ops.total() + 9.0 * lists) / s,
                )
            })
    }
}

/// Runs the phase: `members` daemons, `slots` slots, a `window` of requests once settled, then
/// `trials` holders SIGKILLed one after the other (each started again, at the back of the
/// line, before the next).
pub fn slots(env: &Env, members: usize, slots: u32, window: Duration, trials: usize) -> Slots {
    let mut fleet = Fleet::new(env, "slots", Workload::Slots(slots));
    let mut daemons: Vec<Daemon> = (1..=members)
        .map(|i| fleet.spawn_until(&format!("slots-{i}"), "joined the line of members"))
        .collect();
    let holders =
        |fleet: &Fleet, fresh: Duration| running_now(&fleet.group, slots, mono_now(), fresh);
    assert!(
        wait_until(secs(30), || holders(&fleet, secs(2)).len()
            == slots as usize),
        "{slots} children did not run; see {}",
        fleet.dir()
    );
    // Settled: every member marked its record (`preempt_after`, 30 s, after joining: that
    // write makes the member watching it list once) and the line knows who polls.
    pause(secs(35));
    let ops0: Vec<LeaseOps> = daemons
        .iter()
        .map(|d| LeaseOps::of(d).expect("/metrics"))
        .collect();
    let began = std::time::Instant::now();
    pause(window);
    let window = began.elapsed();
    let ops1: Vec<LeaseOps> = daemons
        .iter()
        .map(|d| LeaseOps::of(d).expect("/metrics"))
        .collect();
    let held = holders(&fleet, secs(3));
    let mut parts: Vec<SlotPart> = daemons
        .iter()
        .zip(ops1.iter().zip(&ops0))
        .map(|(d, (after, before))| SlotPart {
            identity: d.identity.clone(),
            role: held
                .iter()
                .find(|(_, l)| l.identity == d.identity)
                .map_or("waiting".to_owned(), |(slot, _)| {
                    format!("holder of slot {slot}")
                }),
            ops: after.since(before),
        })
        .collect();
    if let Some(poller) = parts
        .iter_mut()
        .filter(|p| p.role == "waiting")
        .max_by(|a, b| a.ops.total().total_cmp(&b.ops.total()))
    {
        poller.role = "poller".into();
    }
    parts.sort_by(|a, b| a.role.cmp(&b.role).then(a.identity.cmp(&b.identity)));

    let mut refills = Vec::new();
    for trial in 0..trials {
        let slot = trial as u32 % slots;
        let Some(victim) = holders(&fleet, secs(2))
            .into_iter()
            .find(|(s, _)| *s == slot)
            .map(|(_, l)| l.identity)
        else {
            refills.push(Refill {
                slot,
                killed: "nobody (the slot was empty)".into(),
                took: None,
                by: None,
            });
            continue;
        };
        let at = daemons
            .iter()
            .position(|d| d.identity == victim)
            .expect("the holder is one of ours");
        let killed = mono_now();
        daemons[at].signal(Signal::SIGKILL);
        let within = env.timing.duration + env.timing.acquire_interval.mul_f64(1.2) + secs(10);
        let next = next_start(&fleet.group, slot, killed, within);
        refills.push(Refill {
            slot,
            killed: victim.clone(),
            took: next.as_ref().map(|e| e.t - killed),
            by: next.map(|e| e.identity),
        });
        // Started again (at the back of the line), and the line settled: the next poller has
        // learnt that it polls (a watch period and a listing).
        daemons[at].wait_exit(secs(5));
        daemons[at] = fleet.spawn_until(&victim, "joined the line of members");
        wait_until(secs(30), || {
            holders(&fleet, secs(2)).len() == slots as usize
        });
        pause(secs(10));
    }
    let verdict = check_slots(&fleet.group, slots, &Deadlines::default());
    let overlaps = verdict.slots.iter().map(|v| v.overlaps.len()).sum();
    drop(daemons);
    Slots {
        members,
        slots,
        window,
        parts,
        refills,
        overlaps,
        most_at_once: verdict.most_at_once,
    }
}
