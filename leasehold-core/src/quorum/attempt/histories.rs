//! Random histories of three members making attempts on three replicas in the small world
//! (world.rs): requests carried out in any order and late, answers lost or heard late, time
//! jumping, blobs wiped. Whatever happens, no two members' terms overlap (a term from its win to
//! its kill deadline), and each term's epoch is above every earlier term's.

use super::world::{Member, World, settings};
use crate::exchange::Answer;
use crate::quorum::{Input, Output, ReplicaId, ReplicaSet, Reply, Stamp};
use std::time::{Duration, Instant};

/// A small deterministic generator (xorshift64*), so that a failing seed can be replayed.
struct Draws(u64);

impl Draws {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// A term won: by whom, from when until its kill deadline, with which epoch.
#[derive(Debug, Clone, Copy)]
struct Term {
    member: u32,
    from: Instant,
    until: Instant,
    epoch: u64,
}

/// One member: its attempts (each under a lease id of its own: the member spends its id once an
/// attempt is over), when it may start the next, and its split rounds.
struct Candidate {
    attempts: Vec<Member>,
    next_start: Instant,
    split_round: u32,
    leads_until: Option<Instant>,
    lost: Vec<(usize, Answer<Instant, Reply>)>,
}

/// The terms won in the history of `seed`.
fn history(seed: u64) -> Vec<Term> {
    let s = ReplicaSet::new(&["a0", "a1", "a2"]).unwrap();
    let stamps = (0..3).map(|i| Stamp::new(&s, ReplicaId(i))).collect();
    let world = World::new(Instant::now(), stamps);
    let t0 = world.now;
    let mut h = History {
        set: s,
        world,
        t0,
        draws: Draws(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
        candidates: (0..3)
            .map(|_| Candidate {
                attempts: Vec::new(),
                next_start: t0,
                split_round: 0,
                leads_until: None,
                lost: Vec::new(),
            })
            .collect(),
        terms: Vec::new(),
    };
    for _ in 0..300 {
        h.step();
        h.collect();
    }
    h.terms
}

/// One history as it goes.
struct History {
    set: ReplicaSet,
    world: World,
    t0: Instant,
    draws: Draws,
    candidates: Vec<Candidate>,
    terms: Vec<Term>,
}

impl History {
    /// One random step.
    fn step(&mut self) {
        let (world, draws) = (&mut self.world, &mut self.draws);
        let now = world.now;
        let m = draws.below(3) as usize;
        let c = &mut self.candidates[m];
        match draws.below(10) {
            // Time passes; timers fire.
            0 | 1 => {
                world.now += Duration::from_millis(draws.below(3000));
                for a in self.candidates.iter_mut().flat_map(|c| &mut c.attempts) {
                    if a.attempt.awaits().until.is_some_and(|u| u <= world.now) {
                        a.feed(world.now, Input::Timer);
                    }
                }
            }
            // A blob is wiped.
            2 if draws.chance(3) => world.accounts[draws.below(3) as usize] = None,
            // A member whose last attempt is over, and that does not lead, tries again.
            2 | 3 => {
                let idle = c.attempts.last().is_none_or(|a| a.attempt.is_over());
                let leading = c.leads_until.is_some_and(|u| u > now);
                if idle && !leading && now >= c.next_start {
                    let mut settings = settings(self.set);
                    settings.split_round = c.split_round;
                    settings.split_draw = draws.below(1000) as f64 / 1000.0;
                    let id = (m as u32) * 1000 + c.attempts.len() as u32;
                    let mut a = Member::new(id, vec![0, 1, 2], settings);
                    a.ground.wall_ms = 1_000_000 + (now - self.t0).as_millis() as u64;
                    a.feed(now, Input::Start);
                    c.attempts.push(a);
                }
            }
            // A late answer is heard at last.
            4 if !c.lost.is_empty() => {
                let (i, answer) = c.lost.remove(draws.below(c.lost.len() as u64) as usize);
                c.attempts[i].feed(now, Input::Answer(answer));
            }
            // One request is carried out, in any order; its answer may be lost.
            _ => {
                let busy: Vec<usize> = (0..c.attempts.len())
                    .filter(|i| !c.attempts[*i].queue.is_empty())
                    .collect();
                if busy.is_empty() {
                    return;
                }
                let i = busy[draws.below(busy.len() as u64) as usize];
                let a = &mut c.attempts[i];
                let pick = draws.below(a.queue.len() as u64) as usize;
                a.carry_one(world, pick, draws.chance(10));
                c.lost.extend(a.lost.drain(..).map(|answer| (i, answer)));
            }
        }
    }

    /// What the attempts said: terms won, pauses after failures.
    fn collect(&mut self) {
        let now = self.world.now;
        for (m, c) in self.candidates.iter_mut().enumerate() {
            for end in c.attempts.iter_mut().flat_map(|a| a.ends.drain(..)) {
                match end {
                    Output::Won(won) => {
                        c.leads_until = Some(won.kill.kill_at);
                        self.terms.push(Term {
                            member: m as u32,
                            from: now,
                            until: won.kill.kill_at,
                            epoch: won.epoch,
                        });
                    }
                    Output::Failed(failed) => {
                        c.split_round = failed.split_round;
                        c.next_start = now + failed.pause.unwrap_or(Duration::ZERO);
                    }
                    _ => {}
                }
            }
        }
    }
}

#[test]
fn no_two_terms_overlap_and_epochs_grow() {
    let mut won = 0;
    for seed in 0..400 {
        let terms = history(seed);
        won += terms.len();
        for (i, a) in terms.iter().enumerate() {
            for b in &terms[i + 1..] {
                let overlap = a.member != b.member && b.from < a.until && a.from < b.until;
                assert!(!overlap, "seed {seed}: {a:?} and {b:?} overlap");
                assert!(b.epoch > a.epoch, "seed {seed}: {b:?} after {a:?}");
            }
        }
    }
    // Enough terms that the histories say something (185 of 400 seeds' histories win one or
    // more: time moves only between steps here, so "as long again as the round took" is often
    // at once, before answers that a real round would have heard).
    assert!(won > 150, "histories where terms are won: {won}");
}
