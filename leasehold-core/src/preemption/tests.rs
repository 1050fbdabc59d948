//! The preferred leader's rules: who is due, when the leader lists, whom it may hand over to.

use super::*;
use crate::pace::Pace;
use crate::testing::{L, Rec, Slot, record};
use std::time::Duration;
use std::time::Instant;

/// A live member of priority `priority`, its record `age` s old, settled after `settled` s.
fn member(id: &str, priority: i64, age: u64, settled: Option<u64>) -> Rec {
    Rec {
        age: Duration::from_secs(age),
        settled: settled.map(Duration::from_secs),
        ..record(id, priority, 0, true)
    }
}

#[test]
fn only_a_settled_member_of_higher_priority_is_due() {
    let after = Duration::from_secs(30);
    let mut w = PreemptionWatch::new(after, 0, "me");
    let now = Instant::now();
    let line = vec![
        member("high", 10, 5, None),
        member("me", 0, 100, Some(30)),
        member("equal", 0, 100, Some(30)),
        member("low", -1, 100, Some(30)),
    ];
    w.listed(&line, now);
    assert_eq!(w.due(&line, now, 0), None, "not settled");
    assert_eq!(
        w.first(now).map(|(_, at)| at - now),
        Some(Duration::from_secs(25))
    );
    // The probing starts a second before it may be eligible.
    let cadence = Duration::from_secs(15);
    assert_eq!(w.next_list(now, cadence), now + cadence);
    let soon = now + Duration::from_secs(24);
    assert_eq!(w.next_list(soon, cadence), soon + Pace::PROBE);
    let mut settled = line.clone();
    settled[0].settled = Some(after);
    let due = w.due(&settled, soon, 0).expect("settled");
    assert_eq!(due.to, "high");
    assert_eq!(
        due.to_string(),
        "preempted by high (priority 10 > 0, a member for 30s)"
    );
    // Dead, or in a cooldown: not due.
    let mut dead = settled.clone();
    dead[0].alive = false;
    w.listed(&dead, soon);
    assert_eq!(w.due(&dead, soon, 0), None);
    assert!(w.first(soon).is_none(), "its timer is gone");
    let mut resting = settled.clone();
    resting[0].standby_until = Some(60);
    w.listed(&resting, soon);
    assert_eq!(w.due(&resting, soon, 0), None);
    // A mark for a shorter window than ours counts only once the service's age agrees.
    let mut w = PreemptionWatch::new(after, 0, "me");
    let short = vec![member("high", 10, 12, Some(10))];
    w.listed(&short, now);
    assert_eq!(w.due(&short, now, 0), None);
    assert!(w.due(&short, now + Duration::from_secs(18), 0).is_some());
}

/// A record older than `preempt_after` is eligible at once and never probed for, however old
/// (an age from before any instant is no overflow).
#[test]
fn an_old_record_is_eligible_at_once() {
    let after = Duration::from_secs(30);
    let mut w = PreemptionWatch::new(after, 0, "me");
    let now = Instant::now();
    let old = vec![member("high", 10, u64::MAX / 4, Some(30))];
    w.listed(&old, now);
    assert!(w.first(now).is_none());
    let cadence = Duration::from_secs(15);
    assert_eq!(w.next_list(now, cadence), now + cadence);
    assert!(w.due(&old, now, 0).is_some());
    assert_eq!(
        cadence_of(after),
        (Duration::from_millis(12_000), Duration::from_secs(15))
    );
}

/// The cadence's shortest and longest: `preempt_after / 2`, up to 20 % shorter.
fn cadence_of(after: Duration) -> (Duration, Duration) {
    (cadence(after, 1.0), cadence(after, 0.0))
}

/// With slots, only the holder last in line may be preempted, and only for members that count
/// its slots and hold none; nobody passed over.
#[test]
fn with_slots_only_the_last_holder_hands_over_to_a_waiting_member() {
    let now = Instant::now();
    let mut l = L::new("b".into(), 2);
    let mut line: Vec<Rec> = ["a", "b", "c", "d"]
        .into_iter()
        .zip(1..)
        .map(|(id, joined)| Rec {
            slots: 2,
            ..record(id, 0, joined, true)
        })
        .collect();
    line[3].slots = 3;
    l.listed(line, now, 100);
    l.slot_states = vec![Slot(0, true, Some("a".into()))];
    l.holding = Some(1);
    let names = |v: Vec<Rec>| v.into_iter().map(|r| r.id).collect::<Vec<_>>();
    assert_eq!(names(candidates(&l, now)), ["c"], "a holds one; d counts 3");
    l.pass_over("c", now);
    assert!(candidates(&l, now).is_empty(), "passed over");
    // Not the holder last in line: no candidates.
    let mut a = L::new("a".into(), 2);
    a.listed(l.members.clone(), now, 100);
    a.slot_states = vec![Slot(1, true, Some("b".into()))];
    a.holding = Some(0);
    assert!(candidates(&a, now).is_empty());
}
