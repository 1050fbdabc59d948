//! The line's order, its successor, pass-overs and slots, on records of the tests' own.

use super::*;
use crate::testing::{L, Rec, Slot, line_of, record, records};
use std::time::{Duration, Instant};

fn names(line: &[Rec]) -> Vec<&str> {
    line.iter().map(Record::identity).collect()
}

#[test]
fn the_order_is_priority_then_seniority_then_identity() {
    let mut line = vec![
        record("c", 0, 5, true),
        record("b", 0, 5, true),
        record("a", 0, 9, true),
        record("low", -1, 0, true),
        record("high", 10, 20, true),
    ];
    order(&mut line);
    assert_eq!(names(&line), ["high", "b", "c", "a", "low"]);
}

#[test]
fn the_successor_is_the_first_live_member_in_line_that_does_not_lead_nor_rest() {
    let mut line: Vec<Rec> = (1..)
        .zip(["a", "b", "c", "d"])
        .map(|(joined, id)| record(id, 0, joined, id != "b"))
        .collect();
    let next = |line: &[Rec], leader, skip: &[&str], wall| {
        successor(line, leader, wall, |r| skip.contains(&r.identity())).map(|r| r.id.clone())
    };
    assert_eq!(next(&line, None, &[], 0).as_deref(), Some("a"));
    assert_eq!(
        next(&line, Some("a"), &[], 0).as_deref(),
        Some("c"),
        "b is dead"
    );
    assert_eq!(next(&line, Some("a"), &["c"], 0).as_deref(), Some("d"));
    assert_eq!(next(&line, Some("a"), &["c", "d"], 0), None);
    line[2].standby_until = Some(10);
    assert_eq!(
        next(&line, Some("a"), &[], 0).as_deref(),
        Some("d"),
        "c rests"
    );
    assert_eq!(
        next(&line, Some("a"), &[], 11).as_deref(),
        Some("c"),
        "over"
    );
}

/// A pass-over is of the record the line had: a member that joined again since (a new record,
/// a new process) stands in line; one passed over before this member had its record is passed
/// over as the next listing shows it.
#[test]
fn a_pass_over_is_of_a_record_and_lasts_its_time() {
    let now = Instant::now();
    let mut l = line_of("c", 2, now);
    l.pass_over("b", now);
    assert!(l.is_passed_over("b", now));
    l.listed(records(2), now, 100);
    assert!(l.is_passed_over("b", now), "the same record");
    l.listed(records(50), now, 100);
    assert!(!l.is_passed_over("b", now), "b joined again");
    // Passed over before its record was listed: of the record listed next.
    let mut l = line_of("c", 2, now);
    l.members.retain(|r| r.id != "b");
    l.pass_over("b", now);
    l.listed(records(2), now, 100);
    assert!(l.is_passed_over("b", now));
    let over = now + Pace::PASSED_OVER_FOR;
    assert!(!l.is_passed_over("b", over), "the mark ends");
    // Under a new record, passed over anew; never this member itself.
    l.listed(records(50), now, 100);
    l.pass_over("b", now);
    assert!(l.is_passed_over("b", now));
    l.pass_over("c", now);
    assert!(!l.is_passed_over("c", now));
}

/// With slots, a listing that shows a member passed over holding a slot shows it leading: it is
/// not passed over any more. Kept passed over, a member that took another slot a second after
/// it did not take this member's was skipped by its next handoff 90 s later, first in line and
/// polling, for members that did not take the slot (seed 14945 of the synchronous engine, in
/// the stream with the hop's last record read: rule (d)).
#[test]
fn a_member_listed_holding_a_slot_is_passed_over_no_more() {
    let now = Instant::now();
    let mut l = line_of("c", 2, now);
    l.pass_over("b", now);
    l.slots_listed(vec![
        Slot(0, true, Some("a".into())),
        Slot(1, false, Some("b".into())),
    ]);
    assert!(l.is_passed_over("b", now), "a slot it held before");
    l.slots_listed(vec![
        Slot(0, true, Some("a".into())),
        Slot(1, true, Some("b".into())),
    ]);
    assert!(!l.is_passed_over("b", now));
}

/// The successor polls, the others watch; a notice naming a member makes it the successor; a
/// member passed over is no successor, and the one after it is.
#[test]
fn the_place_follows_the_leader_the_notice_and_the_pass_overs() {
    let now = Instant::now();
    let seen = |leader, notice| BlobSeen {
        leader,
        named: leader,
        notice,
        passed_over: &[],
    };
    let mut b = line_of("b", 2, now);
    b.read(seen(Some("a"), None), now);
    assert_eq!(b.place(now, 100), Place::Poll);
    let mut c = line_of("c", 2, now);
    c.read(seen(Some("a"), None), now);
    assert_eq!(c.place(now, 100), Place::Watch);
    assert_eq!(c.ahead(now, 100).map(Record::identity), Some("b"));
    assert!(c.is_successor_without("b", now, 100));
    c.read(seen(Some("a"), Some("c")), now);
    assert_eq!(c.place(now, 100), Place::Poll, "named by the notice");
    c.read(seen(Some("a"), None), now);
    c.pass_over("b", now);
    assert_eq!(c.place(now, 100), Place::Poll, "b passed over");
    let passed = [String::from("c")];
    let mut d = line_of("d", 2, now);
    d.read(
        BlobSeen {
            passed_over: &passed,
            ..seen(Some("a"), Some("b"))
        },
        now,
    );
    assert!(d.is_passed_over("c", now), "named by the notice");
    assert_eq!(d.between("a", "d"), ["b", "c"]);
    assert_eq!(d.position(), Some(4));
}

/// Dead records are deleted once dead for `Pace::DEAD_RECORD_AGE` as this member saw them.
#[test]
fn a_record_is_long_dead_after_its_age() {
    let now = Instant::now();
    let mut l = line_of("a", 2, now);
    let mut dead = records(2);
    dead[1].alive = false;
    l.listed(dead.clone(), now, 100);
    assert_eq!(l.long_dead(now).count(), 0);
    let later = now + Pace::DEAD_RECORD_AGE;
    l.listed(dead, later, 700);
    assert_eq!(
        names(&l.long_dead(later).cloned().collect::<Vec<_>>()),
        ["b"]
    );
    assert_eq!(l.dead_since.get("b"), Some(&100), "first seen dead");
    l.listed(records(2), later + Duration::from_secs(1), 701);
    assert!(l.dead_since.is_empty(), "alive again");
}

/// With slots: the first F waiting members poll (F = free slots, at least 1), the rest watch
/// the member just ahead of them; a round tries the free slots first.
#[test]
fn with_slots_the_first_free_slots_poll() {
    let now = Instant::now();
    let with = |slots| records(2).into_iter().map(move |r| Rec { slots, ..r });
    let mut l = L::new("d".into(), 3);
    l.standing = Standing::Joined;
    l.listed(with(3).collect(), now, 100);
    l.slots_listed(vec![Slot(0, true, Some("a".into())), Slot(1, false, None)]);
    assert_eq!(l.leader.as_deref(), Some("a"), "slot 0's holder");
    assert_eq!(l.free_slots(), 2);
    assert_eq!(l.waiting(100), ["b", "c", "d"]);
    assert_eq!(l.pollers(100), ["b", "c"]);
    assert_eq!(l.place(now, 100), Place::Watch);
    assert_eq!(l.predecessor(100), Some("c"));
    assert_eq!(l.round_order(3), [1, 2, 0]);
    l.set_slot_holder(2, Some("c"), 100);
    assert!(l.holds_slot("c"));
    assert_eq!(l.pollers(100), ["b"]);
    assert_eq!(l.predecessor(100), Some("b"));
    l.set_slot_holder(2, None, 100);
    assert!(!l.holds_slot("c"));
}

/// Slot 0's recorded count stands against this member's only while a live member other than
/// this one counts it.
#[test]
fn another_count_stands_only_while_a_live_member_counts_it() {
    let now = Instant::now();
    let mut l = L::new("me".into(), 3);
    let counting = |id: &str, slots: u32, alive: bool| Rec {
        slots,
        ..record(id, 0, 1, alive)
    };
    l.listed(
        vec![counting("me", 2, true), counting("dead", 2, false)],
        now,
        100,
    );
    assert_eq!(
        l.counts_otherwise(Some(2)),
        None,
        "only itself and the dead count 2"
    );
    assert_eq!(l.counts_otherwise(Some(3)), None, "the same count");
    assert_eq!(l.counts_otherwise(None), None, "no leader wrote a count");
    l.listed(vec![counting("other", 2, true)], now, 100);
    assert_eq!(l.counts_otherwise(Some(2)), Some(2));
}

/// A poller's round: free slots first, then the rest; after a listing of its own, only the
/// free ones and one handed to this member; the mutant slot-refill-late takes only as many as
/// the last look showed free.
#[test]
fn a_poller_tries_the_free_slots_first_or_only() {
    let mut l = L::new("me".into(), 4);
    l.slots_listed(vec![
        Slot(0, true, Some("a".into())),
        Slot(1, false, None),
        Slot(2, true, Some("b".into())),
    ]);
    assert_eq!(l.slots_to_try(4, false, false), [1, 3, 0, 2]);
    assert_eq!(l.slots_to_try(4, false, true), [1, 3], "two free");
    assert_eq!(l.slots_to_try(4, true, false), [1, 3]);
}

/// A handoff goes to the first candidate in line but the leader itself: a passed-over member
/// is skipped, and a preemption's member goes first while it is a candidate.
#[test]
fn the_handoff_successor_skips_the_passed_over_and_prefers_a_preemptions_member() {
    let now = Instant::now();
    let mut l = line_of("a", 2, now);
    let next = |l: &L, to| l.handoff_successor(to, now, 100).map(|r| r.id.clone());
    assert_eq!(next(&l, None).as_deref(), Some("b"), "not a itself");
    assert_eq!(
        next(&l, Some("d")).as_deref(),
        Some("d"),
        "the preemption's member"
    );
    l.pass_over("b", now);
    assert_eq!(next(&l, None).as_deref(), Some("c"), "b is passed over");
    l.pass_over("d", now);
    assert_eq!(
        next(&l, Some("d")).as_deref(),
        Some("c"),
        "d is no candidate now"
    );
    let later = now + crate::pace::Pace::PASSED_OVER_FOR;
    assert_eq!(
        l.handoff_successor(None, later, 100).map(|r| r.id.as_str()),
        Some("b")
    );
}

/// A fresh read of the successor's record keeps it the successor only as the same record, of
/// the same priority, alive, and (for `still_successor`) acquiring with the same lease id.
#[test]
fn a_fresh_record_keeps_the_successor_only_in_the_same_place() {
    let now = Instant::now();
    let l = line_of("a", 2, now);
    let listed = l.record_of("b").expect("b is in line").clone();
    let same = |fresh: &Rec| {
        (
            l.still_successor(&listed, fresh, now, 100),
            l.still_in_place(&listed, fresh, now, 100),
        )
    };
    assert_eq!(same(&listed), (true, true));
    let won_since = Rec {
        acquires_with: 7,
        ..listed.clone()
    };
    assert_eq!(same(&won_since), (false, true), "a new lease id");
    let rejoined = Rec {
        joined: 50,
        ..listed.clone()
    };
    assert_eq!(same(&rejoined), (false, false), "a record made again");
    let reprioritised = Rec {
        priority: 3,
        ..listed.clone()
    };
    assert_eq!(same(&reprioritised), (false, false));
    let dead = Rec {
        alive: false,
        ..listed.clone()
    };
    assert_eq!(same(&dead), (false, false));
}

/// Nothing listening at the URL of the record ahead: it is read at every round until a record
/// lease, a renew's way and a watch have passed since nothing first answered there, then no
/// more; an answer there, or another record ahead (made anew), starts the count again.
#[test]
fn a_record_whose_url_has_nothing_listening_is_read_for_a_record_lease_and_a_watch() {
    let now = Instant::now();
    let (way, watch) = (Duration::from_secs(4), Duration::from_secs(6));
    let mut l = line_of("c", 2, now);
    let b = record("b", 0, 2, true);
    let window = Pace::RECORD_LEASE + way + watch;
    assert!(l.read_unheard(&b, now, way, watch));
    assert!(l.read_unheard(&b, now + window, way, watch));
    let past = now + window + Duration::from_millis(1);
    assert!(
        !l.read_unheard(&b, past, way, watch),
        "a live member, its URL wrong"
    );
    let anew = record("b", 0, 3, true);
    assert!(l.read_unheard(&anew, past, way, watch), "made anew");
    l.heard();
    assert!(
        l.read_unheard(&anew, past + window, way, watch),
        "heard, then nothing again"
    );
}
