//! The quorum model explored exhaustively: the rules hold for two and three members under
//! each fault, each broken rule is caught with a shortest counterexample, and each fault and
//! situation the rules must survive is reached.

use quorum_model::{Config, Fault, Mixed, Mutant, Outcome, Reached, Report, explore};

/// The search under `config`, printed.
fn run(name: &str, config: &Config) -> Report {
    let report = explore(config);
    println!(
        "{name}: {} members, horizon {}, {} states in {:.2?}",
        config.members, config.horizon, report.states, report.elapsed
    );
    report
}

/// The rules hold under `config`, over more than `at_least` states.
fn holds(name: &str, config: &Config, at_least: usize) -> Reached {
    let report = run(name, config);
    if let Outcome::Violated { violation, trace } = &report.outcome {
        for step in trace {
            println!("  {step}");
        }
        panic!("{name}: the rules broke: {violation}");
    }
    assert!(
        report.states > at_least,
        "{name}: only {} states explored (expected over {at_least})",
        report.states
    );
    report.reached
}

#[test]
fn the_rules_hold_for_two_members() {
    let reached = holds("no fault", &Config::new(2), 200_000);
    assert!(reached.bodies > 0, "no body ever started");
}

#[test]
fn the_rules_hold_for_two_members_with_a_replica_wiped() {
    let reached = holds("wipe", &Config::new(2).with_fault(Fault::Wipe), 1_000_000);
    assert!(reached.wipes > 0, "no replica was wiped");
}

#[test]
fn the_rules_hold_for_two_members_with_a_replica_restored() {
    let config = Config::new(2).with_fault(Fault::Rollback);
    let reached = holds("rollback", &config, 500_000);
    assert!(reached.rollbacks > 0, "no replica was restored");
}

#[test]
fn the_rules_hold_for_two_members_with_a_request_unanswered() {
    // To tick 4: a silence can fall on any request, which multiplies the states most.
    let config = Config {
        horizon: 4,
        ..Config::new(2).with_fault(Fault::Silence)
    };
    let reached = holds("silence", &config, 1_000_000);
    assert!(reached.lost_answers > 0, "no answer was lost");
    assert!(
        reached.unanswered > 0,
        "every request was applied or answered"
    );
}

#[test]
fn the_rules_hold_for_two_members_with_a_member_frozen() {
    let reached = holds("freeze", &Config::new(2).with_fault(Fault::Freeze), 500_000);
    assert!(reached.freezes > 0, "no member froze");
}

#[test]
fn the_rules_hold_for_three_members() {
    let three = Config::new(3);
    let none = holds("no fault", &three, 300_000);
    assert!(none.splits > 0, "no split vote happened");
    let freeze = holds("freeze", &three.with_fault(Fault::Freeze), 700_000);
    assert!(freeze.freezes > 0, "no member froze");
}

#[test]
fn the_rules_hold_with_a_member_of_another_set() {
    for mixed in [Mixed::Doubled, Mixed::Foreign] {
        let config = Config {
            mixed,
            ..Config::new(2)
        };
        let reached = holds(&format!("{mixed:?}"), &config, 10_000);
        assert!(
            reached.mixed_holds > 0,
            "{mixed:?}: its member never held a replica"
        );
    }
}

#[test]
fn each_broken_rule_is_caught() {
    let mut missed = Vec::new();
    // Three members to tick 5 as well: a broken rule is caught within a few thousand states,
    // long before the search would cover what the correct rules' runs must.
    for (members, mutant) in [2, 3].into_iter().flat_map(|n| Mutant::ALL.map(|m| (n, m))) {
        let config = Config {
            horizon: 5,
            ..Config::new(members).with_mutant(mutant)
        };
        let report = run(mutant.name(), &config);
        match report.outcome {
            Outcome::Holds => missed.push((members, mutant.name())),
            Outcome::Violated { violation, trace } => {
                println!("  {violation}, after {} steps:", trace.len());
                for step in trace {
                    println!("    {step}");
                }
            }
        }
    }
    assert!(
        missed.is_empty(),
        "broken rules not caught (members, rule): {missed:?}"
    );
}

/// Counting an account listed twice once is not what keeps one body when every member lists the
/// same set: a majority of the list weighs account 1 twice for everyone, and any two such
/// majorities still share an account. (It keeps the promise that one region down stops no
/// body: with `[r0, r1, r1]`, r1 down is two of three.)
#[test]
fn an_account_every_member_lists_twice_is_safe_counted_twice() {
    let config = Config {
        mixed: Mixed::AllDoubled,
        ..Config::new(2).with_mutant(Mutant::CountListedTwice)
    };
    let reached = holds("all doubled, counted twice", &config, 5_000);
    assert!(reached.bodies > 0, "no body ever started");
}

/// The violation the rules let through under `config`, printed.
fn broken(name: &str, config: &Config) -> String {
    let report = run(name, config);
    let Outcome::Violated { violation, trace } = report.outcome else {
        panic!("{name}: no violation found");
    };
    println!("  {violation}, after {} steps:", trace.len());
    for step in trace {
        println!("    {step}");
    }
    violation.to_string()
}

/// What the rules assume, shown by crossing it: the wall-clock floor covers a restored replica
/// only while the new leader's clock lags by less than the lock-delay (`L + M`).
#[test]
fn the_floor_needs_clocks_closer_than_the_lock_delay() {
    let skewed = Config {
        skew: quorum_model::rules::LOCK_DELAY,
        ..Config::new(2).with_fault(Fault::Rollback)
    };
    let violation = broken("skew of the lock-delay", &skewed);
    assert!(violation.contains("epoch"), "{violation}");
}

/// What the rules assume, shown by crossing it: the lock-delay covers a restored replica only
/// when the restore makes the blob young; one restored in place with its creation time kept
/// lets two bodies run.
#[test]
fn a_restore_that_keeps_the_creation_time_is_not_covered() {
    let in_place = Config::new(2).with_fault(Fault::RestoreInPlace);
    let violation = broken("restore in place", &in_place);
    assert!(violation.contains("two bodies"), "{violation}");
}

/// What the rules assume, shown by crossing it: the fingerprint keeps a member of another set
/// out only while the group's blobs carry the group's fingerprint. A replica wiped and created
/// again by that member carries its set's fingerprint, and with an account only its set lists it
/// is a majority of its own, beside the group's: two bodies at once (with the clocks together;
/// with the last member's 2 ticks behind, its epoch also falls below the group's). One set at a
/// time is the operator's promise (`check` says so), not a rule the replicas can keep.
#[test]
fn a_member_of_another_set_takes_a_wiped_replica() {
    let config = Config {
        mixed: Mixed::Foreign,
        skew: 0,
        ..Config::new(2).with_fault(Fault::Wipe)
    };
    let violation = broken("another set and a wipe", &config);
    assert!(violation.contains("two bodies"), "{violation}");
}
