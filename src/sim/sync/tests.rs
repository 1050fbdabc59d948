//! Core members driven with no runtime: a lone member's life, a lease passed to the next in
//! line when its leader shuts down, a seed replayed exactly; and the rate of histories.

use super::driver::{Sim, What};
use std::time::{Duration, Instant as Wall};

/// A lone member joins, wins a term (its body starts once the epoch is on the blob), and on
/// shutdown stops its body, releases the lease and leaves the line.
#[test]
fn a_lone_member_leads_and_on_shutdown_releases_and_leaves() {
    let mut sim = Sim::new(1, &["a"]);
    sim.start(0, Duration::ZERO);
    sim.run_until(Duration::from_secs(30));
    let started = sim.log.iter().find_map(|h| match h.what {
        What::BodyStarted { epoch, .. } => Some(epoch),
        _ => None,
    });
    let epoch = started.expect("the lone member leads");
    let (on_blob, leased) = sim.blob();
    assert_eq!(
        on_blob,
        Some(epoch),
        "the body runs under the epoch on the blob"
    );
    assert!(leased);
    sim.shutdown(0, Duration::from_secs(31));
    sim.run_until(Duration::from_secs(120));
    assert!(
        sim.is_over(0),
        "{:#?}",
        &sim.log[sim.log.len().saturating_sub(30)..]
    );
    let (_, leased) = sim.blob();
    assert!(!leased, "released");
    let left = sim.log.iter().any(|h| {
        h.what
            == What::Judged {
                call: "DeleteMember",
                ok: true,
            }
    });
    assert!(left, "its record deleted");
    println!(
        "lone member: {:?} of virtual time, {} events",
        sim.elapsed(),
        sim.events
    );
}

/// Three members: `a` leads; it shuts down and hands the lease over to the next in line, `b`
/// (docs/succession.md, "The handoff"), which leads under a greater epoch; never two bodies at
/// once. Returns the events it took.
fn three(seed: u64) -> (Sim, u64) {
    let mut sim = Sim::new(seed, &["a", "b", "c"]);
    sim.start(0, Duration::ZERO);
    sim.start(1, Duration::from_secs(5));
    sim.start(2, Duration::from_secs(10));
    sim.shutdown(0, Duration::from_secs(40));
    sim.run_until(Duration::from_secs(120));
    let events = sim.events;
    (sim, events)
}

#[test]
fn the_lease_goes_to_the_next_in_line_when_its_leader_shuts_down() {
    let (sim, events) = three(2);
    let bodies: Vec<(usize, u64)> = (sim.log.iter())
        .filter_map(|h| match h.what {
            What::BodyStarted { epoch, .. } => Some((h.member, epoch)),
            _ => None,
        })
        .collect();
    assert!(bodies.len() >= 2, "{bodies:?}");
    assert_eq!(bodies[0].0, 0, "a leads first");
    assert_eq!(bodies[1].0, 1, "b, next in line, leads next: {bodies:?}");
    assert!(bodies[1].1 > bodies[0].1, "the epoch grows: {bodies:?}");
    assert_eq!(sim.most_bodies, 1, "never two bodies at once");
    assert!(sim.is_over(0));
    handed_over(&sim);
    let (on_blob, leased) = sim.blob();
    assert_eq!(on_blob, Some(bodies[1].1));
    assert!(leased);
    println!(
        "three members: {:?} of virtual time, {events} events",
        sim.elapsed()
    );
    let (runs, began) = (1000, Wall::now());
    for seed in 0..runs {
        let (sim, _) = three(seed);
        assert_eq!(sim.most_bodies, 1, "seed {seed}");
        handed_over(&sim);
    }
    let took = began.elapsed();
    println!(
        "{runs} histories of three members in {took:?}: {:.0} histories/minute",
        f64::from(runs as u32) * 60.0 / took.as_secs_f64()
    );
}

/// `a` handed the lease over after its body was gone: its `change` to `b`'s lease id landed,
/// and nothing of `a`'s released the lease after its term; `b`, woken, took it at once rather
/// than at its next poll (every `acquire_interval`, 1 s and a jitter).
fn handed_over(sim: &Sim) {
    let when = |member: usize, what: &What| {
        (sim.log.iter())
            .filter(|h| h.member == member && h.what == *what)
            .map(|h| h.at)
            .collect::<Vec<_>>()
    };
    let judged = |call, ok| What::Judged { call, ok };
    let gone = when(0, &What::BodyGone)[0];
    let changed = when(0, &judged("Change", true));
    assert_eq!(changed.len(), 1, "one change, landed: {:#?}", sim.log);
    assert!(changed[0] > gone, "the change once the body is gone");
    let released = (when(0, &judged("Release", true)).into_iter())
        .chain(when(0, &judged("Release", false)))
        .any(|at| at > gone);
    assert!(!released, "handed over, not released");
    let b_leads = (sim.log.iter())
        .find(|h| h.member == 1 && matches!(h.what, What::BodyStarted { .. }))
        .map(|h| h.at);
    let woken_in = b_leads.expect("b leads") - changed[0];
    assert!(
        woken_in < Duration::from_millis(500),
        "b, woken, leads at once: {woken_in:?} after the change"
    );
}

/// The same seed gives the same history, event for event.
#[test]
fn a_seed_replays_exactly() {
    let (a, _) = three(7);
    let (b, _) = three(7);
    assert_eq!(a.log, b.log);
    assert_eq!(a.events, b.events);
}
