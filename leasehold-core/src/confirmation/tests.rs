//! The confirmation's transitions: each event in, the actions out.

use super::*;
use std::time::Instant;

type C = Confirmation<Instant, &'static str, u32>;
type A = Action<&'static str, u32>;
type E = Event<&'static str, u32>;

const MS: Duration = Duration::from_millis(1);

fn timing() -> Timing {
    Timing::default()
}

/// A confirmation and its clock.
struct Run {
    c: C,
    now: Instant,
}

impl Run {
    fn begin(to: &'static str, wake: Wake, check: bool) -> (Self, Vec<A>) {
        let now = Instant::now();
        let (c, actions) = C::begin(&timing(), now, to, wake, check);
        (Self { c, now }, actions)
    }

    /// `event` comes `after` the last one.
    fn step(&mut self, after: Duration, event: E) -> Vec<A> {
        self.now += after;
        self.c.step(self.now, event)
    }

    /// Sleeps out each pause until a read, then answers it with `read` (and `record`, when
    /// asked); returns the pauses slept and the actions after the read.
    fn read(
        &mut self,
        first: &[A],
        read: Read<u32>,
        record: Option<Record<&'static str>>,
    ) -> (Vec<Duration>, Vec<A>) {
        let mut slept = Vec::new();
        let mut actions = first.to_vec();
        loop {
            match actions.last() {
                Some(A::Sleep(d)) => {
                    slept.push(*d);
                    actions = self.step(*d, E::Slept);
                }
                Some(A::Read { record: asked }) => {
                    let record = if *asked { record.clone() } else { None };
                    return (slept, self.step(MS, E::Read(read, record)));
                }
                other => panic!("expected a pause or a read, got {other:?}"),
            }
        }
    }

    /// Every read answered `read` until the window is over; returns the time waited.
    fn wait_out(&mut self, first: &[A], read: Read<u32>) -> (Duration, Vec<A>) {
        let start = self.now;
        let mut actions = first.to_vec();
        while matches!(actions.last(), Some(A::Sleep(_) | A::Read { .. })) {
            (_, actions) = self.read(&actions, read.clone(), Some(Record::Stands));
        }
        (self.now - start, actions)
    }
}

fn pace() -> Pace {
    Pace::new(&timing())
}

#[test]
fn a_woken_successor_that_takes_the_lease_confirms_the_handoff() {
    let (mut r, first) = Run::begin("a", Wake::Accepted, false);
    assert_eq!(first, vec![A::Sleep(Pace::CONFIRM_READ_LEAST)]);
    let (_, done) = r.read(&first, Read::Taken, None);
    assert_eq!(done, vec![A::Done(Confirmed::HandedTo("a"))]);
}

/// On several replicas, another member's epoch on a majority ends the handoff at the read
/// that shows it, not at the window's end: that member leads, and the holder is back in line
/// (rule (f): the first in line after a new leader asks for the lease within a watch and a
/// poll).
#[test]
fn a_leader_elsewhere_ends_the_confirmation_at_once() {
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    let (_, actions) = r.read(&first, Read::Ours(7), Some(Record::Stands));
    assert!(matches!(actions.last(), Some(A::Sleep(_))), "{actions:?}");
    let (_, done) = r.read(&actions, Read::Led, Some(Record::Stands));
    assert_eq!(done, vec![A::Done(Confirmed::HandedTo("a"))]);
}

#[test]
fn reads_double_their_pause_up_to_the_longest_never_past_the_window() {
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    let window = pace().confirm_window(false, true);
    let start = r.now;
    let mut pauses = Vec::new();
    let mut actions = first;
    while let Some(A::Sleep(_) | A::Read { .. }) = actions.last() {
        let (slept, next) = r.read(&actions, Read::Ours(7), Some(Record::Stands));
        pauses.extend(slept);
        actions = next;
    }
    assert_eq!(
        &pauses[..5],
        &[20 * MS, 40 * MS, 80 * MS, 160 * MS, 320 * MS]
    );
    assert!(pauses.iter().all(|p| *p <= Pace::CONFIRM_READ_LONGEST));
    let waited = r.now - start;
    assert!(waited >= window, "{waited:?} < {window:?}");
    assert!(waited <= window + Pace::CONFIRM_READ_LONGEST, "{waited:?}");
}

#[test]
fn a_successor_that_does_not_take_the_lease_is_passed_over_and_the_lease_handed_on() {
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    let (waited, actions) = r.wait_out(&first, Read::Ours(7));
    assert!(waited >= pace().confirm_window(false, true));
    assert!(
        matches!(
            &actions[..],
            [
                A::Say(Note::NotTaken {
                    member: "a",
                    wake: Wake::Missed,
                    ..
                }),
                A::PassOver { member: Some("a") }
            ]
        ),
        "{actions:?}"
    );
    let actions = r.step(MS, E::Successor(Some("b")));
    assert_eq!(
        actions,
        vec![A::HandOn {
            from: "a",
            to: "b",
            passed_over: vec!["a"],
            etag: 7
        }]
    );
    let actions = r.step(MS, E::HandedOn(true));
    assert_eq!(
        actions,
        vec![
            A::Say(Note::HandedOn("b")),
            A::Wake {
                to: "b",
                reserve: false
            }
        ]
    );
    assert_eq!(*r.c.successor(), "b");
    // Not woken: its record is read with the first read, and a later hop's window is its.
    let actions = r.step(MS, E::Woke(Wake::Missed));
    assert_eq!(actions, vec![A::Sleep(Pace::CONFIRM_READ_LEAST)]);
    assert_eq!(
        r.step(Pace::CONFIRM_READ_LEAST, E::Slept),
        vec![A::Read { record: true }]
    );
    let actions = r.step(MS, E::Read(Read::Ours(8), Some(Record::Stands)));
    let (waited, actions) = r.wait_out(&actions, Read::Ours(8));
    let later = pace().confirm_window(false, false);
    assert!(waited + 21 * MS >= later, "{waited:?}");
    assert!(later > pace().confirm_window(false, true));
    assert!(
        matches!(actions.last(), Some(A::PassOver { member: Some("b") })),
        "{actions:?}"
    );
}

#[test]
fn a_member_nothing_answers_for_has_a_first_hop_s_window_whatever_the_hop() {
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    let (_, _) = r.wait_out(&first, Read::Ours(7));
    r.step(MS, E::Successor(Some("b")));
    r.step(MS, E::HandedOn(true));
    let actions = r.step(MS, E::Woke(Wake::Unreachable));
    let (waited, actions) = r.wait_out(&actions, Read::Ours(8));
    let first_hop = pace().confirm_window(false, true);
    assert!(
        waited >= first_hop && waited < first_hop + Pace::CONFIRM_READ_LONGEST,
        "{waited:?}"
    );
    assert!(
        matches!(
            &actions[..],
            [
                A::Say(Note::NotTaken {
                    member: "b",
                    wake: Wake::Unreachable,
                    ..
                }),
                A::PassOver { .. }
            ]
        ),
        "{actions:?}"
    );
}

#[test]
fn a_successor_whose_record_is_gone_is_passed_over_at_the_first_read() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (slept, actions) = r.read(&first, Read::Ours(7), Some(Record::Gone));
    assert_eq!(slept, vec![Pace::CONFIRM_READ_LEAST]);
    assert_eq!(
        actions,
        vec![A::Say(Note::Left("a")), A::PassOver { member: Some("a") }]
    );
}

#[test]
fn a_refused_wake_up_with_a_record_that_stands_passes_the_member_over_at_once() {
    let (mut r, first) = Run::begin("a", Wake::Refused, false);
    let (_, actions) = r.read(&first, Read::Ours(7), Some(Record::Stands));
    assert_eq!(actions[0], A::Say(Note::AnotherProcessAnswers("a")));
    assert!(matches!(
        actions.last(),
        Some(A::PassOver { member: Some("a") })
    ));
}

#[test]
fn a_member_that_rejoined_is_not_passed_over_and_the_members_are_listed() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (_, actions) = r.read(&first, Read::Ours(7), Some(Record::Rejoined));
    assert_eq!(
        actions,
        vec![A::Say(Note::Rejoined("a")), A::PassOver { member: None }]
    );
    // The line is stale: listed once, even though it names a successor.
    assert_eq!(r.step(MS, E::Successor(Some("a"))), vec![A::Relist]);
    let actions = r.step(MS, E::Relisted(Some(Some("c"))));
    assert_eq!(
        actions,
        vec![A::HandOn {
            from: "a",
            to: "c",
            passed_over: vec![],
            etag: 7
        }]
    );
}

/// With slots, a member handed the lease whose record shows a new lease id led since it was
/// listed and may hold a slot now: not passed over, the members are listed and the lease goes
/// to the listing's successor (docs/slots.md, "Failover and handoffs"). Passed over at once
/// instead, the lease went on to the stale line's next member, one waiting behind the poller
/// that never reads the notice naming it (the synchronous engine's seeds 1224, 5517, 7159,
/// 7507, 9635: rule (d)).
#[test]
fn with_slots_a_member_that_led_since_it_was_listed_is_not_passed_over_and_the_members_are_listed()
{
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (_, actions) = r.read(&first, Read::Ours(7), Some(Record::LedSince));
    assert_eq!(
        actions,
        vec![A::Say(Note::LedSince("a")), A::PassOver { member: None }]
    );
    assert_eq!(r.step(MS, E::Successor(Some("b"))), vec![A::Relist]);
    let actions = r.step(MS, E::Relisted(Some(Some("a2"))));
    assert_eq!(
        actions,
        vec![A::HandOn {
            from: "a",
            to: "a2",
            passed_over: vec![],
            etag: 7
        }]
    );
}

/// The window's last read reads the successor's record again: with slots, a member that won
/// another slot during its window (by another holder's handoff) is not passed over, and the
/// members are listed. Passed over at the window's end instead, the slot went on down the stale
/// line to a member waiting behind the poller, which never reads the notice naming it, and
/// waited out a later hop's window for nothing (seed 16429: rule (d)).
#[test]
fn the_window_s_last_read_reads_the_successor_s_record_again() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (start, window) = (r.now, pace().confirm_window(false, true));
    let (_, mut actions) = r.read(&first, Read::Ours(7), Some(Record::Stands));
    // Every read before the last asks for the blob alone.
    loop {
        let Some(A::Sleep(d)) = actions.last().cloned() else {
            panic!("a pause before each read: {actions:?}");
        };
        actions = r.step(d, E::Slept);
        let last = r.now >= start + window;
        assert_eq!(
            actions,
            vec![A::Read { record: last }],
            "at {:?}",
            r.now - start
        );
        if last {
            break;
        }
        actions = r.step(MS, E::Read(Read::Ours(7), None));
    }
    let actions = r.step(MS, E::Read(Read::Ours(7), Some(Record::LedSince)));
    assert_eq!(
        actions,
        vec![A::Say(Note::LedSince("a")), A::PassOver { member: None }]
    );
    assert_eq!(r.step(MS, E::Successor(Some("b"))), vec![A::Relist]);
    let actions = r.step(MS, E::Relisted(Some(Some("c"))));
    assert!(
        matches!(&actions[..], [A::HandOn { to: "c", passed_over, .. }] if passed_over.is_empty()),
        "{actions:?}"
    );
}

#[test]
fn with_nobody_else_in_line_the_members_are_listed_once_then_the_lease_released() {
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    let (_, _) = r.wait_out(&first, Read::Ours(7));
    assert_eq!(r.step(MS, E::Successor(None)), vec![A::Relist]);
    let actions = r.step(MS, E::Relisted(Some(None)));
    assert_eq!(
        actions,
        vec![A::Say(Note::NobodyElse), A::Release { from: "a", etag: 7 }]
    );
    assert_eq!(
        r.step(MS, E::Released(true)),
        vec![A::Done(Confirmed::Released(true))]
    );
}

#[test]
fn without_a_listing_the_line_as_it_is_is_used() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (_, _) = r.read(&first, Read::Ours(7), Some(Record::Rejoined));
    r.step(MS, E::Successor(Some("b")));
    let actions = r.step(MS, E::Relisted(None));
    assert!(
        matches!(&actions[..], [A::HandOn { to: "b", .. }]),
        "{actions:?}"
    );
}

#[test]
fn a_blob_not_as_the_handoff_left_it_is_not_moved() {
    for last in [Read::Other, Read::Unanswered] {
        let (mut r, first) = Run::begin("a", Wake::Missed, false);
        let (_, actions) = r.wait_out(&first, last);
        assert_eq!(actions, vec![A::Done(Confirmed::HandedTo("a"))]);
    }
    // An unanswered read leaves the last answer standing.
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    let (_, actions) = r.read(&first, Read::Ours(7), None);
    let (_, actions) = r.wait_out(&actions, Read::Unanswered);
    assert!(
        matches!(actions.last(), Some(A::PassOver { .. })),
        "{actions:?}"
    );
}

#[test]
fn a_successor_with_a_new_lease_id_is_handed_the_lease_again_and_woken() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (_, actions) = r.read(&first, Read::Ours(7), Some(Record::NewLeaseId("a2")));
    assert_eq!(
        actions,
        vec![A::Rekey {
            from: "a",
            to: "a2"
        }]
    );
    assert_eq!(
        r.step(MS, E::Rekeyed(true)),
        vec![
            A::Say(Note::NewLeaseId("a2")),
            A::Wake {
                to: "a2",
                reserve: true
            }
        ]
    );
    let actions = r.step(MS, E::Woke(Wake::Accepted));
    assert_eq!(actions, vec![A::Sleep(Pace::CONFIRM_READ_LEAST)]);
    let (waited, actions) = r.wait_out(&actions, Read::Ours(7));
    assert!(waited >= Pace::CONFIRM_WOKEN, "{waited:?}");
    assert!(
        matches!(&actions[0], A::Say(Note::NotTaken { member: "a2", .. })),
        "{actions:?}"
    );
}

/// A successor rekeyed whose wake-up was not accepted (no URL, too soon) has its record read
/// with the first read, as after a hand-on: one that left as it was rekeyed is passed over at
/// once, not after the hop's window (rule (g) of docs/safety.md). Woken, it is not read.
#[test]
fn a_successor_rekeyed_and_not_woken_has_its_record_read_at_once() {
    for (wake, asked) in [(Wake::Missed, true), (Wake::Accepted, false)] {
        let (mut r, first) = Run::begin("a", Wake::Missed, true);
        r.read(&first, Read::Ours(7), Some(Record::NewLeaseId("a2")));
        r.step(MS, E::Rekeyed(true));
        let actions = r.step(MS, E::Woke(wake));
        let (_, actions) = r.read(&actions, Read::Ours(7), Some(Record::Gone));
        match asked {
            true => assert!(
                matches!(&actions[..], [A::Say(Note::Left("a2")), A::PassOver { .. }]),
                "{wake:?}: {actions:?}"
            ),
            false => assert_eq!(actions, vec![A::Sleep(2 * Pace::CONFIRM_READ_LEAST)]),
        }
    }
}

#[test]
fn a_rekey_refused_ends_the_hop() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    r.read(&first, Read::Ours(7), Some(Record::NewLeaseId("a2")));
    let actions = r.step(MS, E::Rekeyed(false));
    assert!(
        matches!(actions.last(), Some(A::PassOver { member: Some("a") })),
        "{actions:?}"
    );
}

#[test]
fn a_hand_on_refused_leaves_the_lease_where_it_is() {
    let (mut r, first) = Run::begin("a", Wake::Missed, false);
    r.wait_out(&first, Read::Ours(7));
    r.step(MS, E::Successor(Some("b")));
    assert_eq!(
        r.step(MS, E::HandedOn(false)),
        vec![A::Done(Confirmed::HandedTo("a"))]
    );
}

#[test]
fn a_member_nothing_answered_for_that_took_the_lease_is_told_of() {
    let (mut r, first) = Run::begin("a", Wake::Unreachable, false);
    assert_eq!(r.c.window, pace().confirm_window(false, true));
    let (_, actions) = r.read(&first, Read::Taken, None);
    assert_eq!(
        actions,
        vec![
            A::Say(Note::TakenAtItsOwnPoll("a")),
            A::Done(Confirmed::HandedTo("a"))
        ]
    );
}

#[test]
#[should_panic(expected = "the confirmation waits for")]
fn an_event_out_of_turn_is_a_fault_of_the_shell() {
    let (mut r, _) = Run::begin("a", Wake::Accepted, false);
    r.step(MS, E::Released(true));
}

/// What a read of the successor's record says: the line takes a fresh record of the same
/// member; with one slot a new lease id is the same member; a record made again is a rejoin;
/// no record, a dead one, or a 404 is gone; a read that failed otherwise leaves it standing.
#[test]
fn a_read_of_the_successors_record_is_judged_by_the_line() {
    use crate::testing::{Rec, line_of};
    let now = Instant::now();
    let mut l = line_of("a", 2, now);
    let b = l.record_of("b").expect("b is in line").clone();
    let mut judged = |read: Result<Option<Rec>, Failure>| judge(&mut l, &b, read, now, 100);
    let settled = Rec {
        settled: Some(Duration::from_secs(1)),
        ..b.clone()
    };
    assert_eq!(judged(Ok(Some(settled.clone()))), Record::Stands);
    let new_id = Rec {
        acquires_with: 9,
        ..b.clone()
    };
    assert_eq!(judged(Ok(Some(new_id.clone()))), Record::NewLeaseId(new_id));
    let rejoined = Rec {
        joined: 60,
        ..b.clone()
    };
    assert_eq!(judged(Ok(Some(rejoined.clone()))), Record::Rejoined);
    let dead = Rec {
        alive: false,
        ..b.clone()
    };
    assert_eq!(judged(Ok(Some(dead))), Record::Gone);
    assert_eq!(judged(Ok(None)), Record::Gone);
    assert_eq!(judged(Err(Failure::Missing)), Record::Gone);
    assert_eq!(judged(Err(Failure::Transient)), Record::Stands);
    assert_eq!(
        l.record_of("b"),
        Some(&rejoined),
        "the line took the last fresh record"
    );
}

/// With slots, a fresh record of the same member in its place but with a new lease id is a
/// member that led since it was listed (it may hold a slot now, which only a listing shows),
/// not one gone; the line takes the fresh record, and counts that member holding a slot until
/// a listing: no candidate, and not waiting. Counted waiting, it stayed the member ahead of the
/// holder once that one waited for a slot again, whose watch of a record that no longer
/// changed never listed, and nobody polled while a slot stood free (seed 12693 of the stream
/// with the hop's last record read: rule (d)); and it was the successor again for every hop.
#[test]
fn with_slots_a_new_lease_id_is_a_member_that_led_since_it_was_listed() {
    use crate::line::Standing;
    use crate::testing::{L, Rec, records};
    let now = Instant::now();
    let mut l = L::new("a".into(), 2);
    l.standing = Standing::Joined;
    let two = |r: Rec| Rec { slots: 2, ..r };
    l.listed(records(2).into_iter().map(two).collect(), now, 100);
    let b = l.record_of("b").expect("b is in line").clone();
    let new_id = Rec {
        acquires_with: 9,
        ..b.clone()
    };
    let judged = judge(&mut l, &b, Ok(Some(new_id.clone())), now, 100);
    assert_eq!(judged, Record::LedSince);
    assert_eq!(
        l.record_of("b"),
        Some(&new_id),
        "the line took the fresh record"
    );
    assert!(l.holds_slot("b"), "b counts as holding a slot");
    assert!(!l.waiting(100).contains(&"b"), "b is not waiting");
    assert!(
        l.handoff_successor(None, now, 100)
            .is_none_or(|r| crate::line::Record::identity(r) != "b"),
        "b is no candidate"
    );
    l.listed(records(2).into_iter().map(two).collect(), now, 100);
    assert!(!l.holds_slot("b"), "until a listing");
    let dead = Rec {
        alive: false,
        ..b.clone()
    };
    assert_eq!(judge(&mut l, &b, Ok(Some(dead)), now, 100), Record::Gone);
    // Rejoined since the listing, it may have won a slot since, too (seed 5508 of the
    // synchronous engine, in the same stream: the holder watched it as the member ahead).
    l.listed(records(2).into_iter().map(two).collect(), now, 100);
    let rejoined = Rec {
        joined: 60,
        ..b.clone()
    };
    let judged = judge(&mut l, &b, Ok(Some(rejoined)), now, 100);
    assert_eq!(judged, Record::Rejoined);
    assert!(l.holds_slot("b"), "until a listing");
}

/// With slots, a member handed the lease that led since it was listed (two holders handing
/// over at once, both to the poller) leaves the lease to the listing's next member, which stood
/// behind it and learns that it polls only at its watch: a later hop's window, though nobody
/// was passed over. With a first hop's it was passed over, and the slot went on to a watcher
/// that never took it (the synchronous engine's seed 19024: rule (d)).
#[test]
fn a_hop_after_a_fresh_listing_is_a_later_hop() {
    let (mut r, first) = Run::begin("a", Wake::Missed, true);
    let (_, _) = r.read(&first, Read::Ours(7), Some(Record::LedSince));
    r.step(MS, E::Successor(Some("b")));
    r.step(MS, E::Relisted(Some(Some("c"))));
    r.step(MS, E::HandedOn(true));
    let actions = r.step(MS, E::Woke(Wake::Missed));
    let (waited, actions) = r.wait_out(&actions, Read::Ours(8));
    let later_hop = pace().confirm_window(false, false);
    assert!(
        waited >= later_hop && waited < later_hop + Pace::CONFIRM_READ_LONGEST,
        "{waited:?}"
    );
    assert!(
        matches!(
            &actions[..],
            [
                A::Say(Note::NotTaken { member: "c", .. }),
                A::PassOver { .. }
            ]
        ),
        "{actions:?}"
    );
}
