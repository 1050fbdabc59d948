//! The handoff's sends: each event in, the actions out.

use super::*;
use crate::failure::Failure;
use std::time::{Duration, Instant};

/// A store error of the tests: only its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fails(Failure);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
}

const LOST: Fails = Fails(Failure::LeaseLost);
const SLOW: Fails = Fails(Failure::Transient);

/// Members are names, ETags numbers.
type H = Handoff<Instant, &'static str, u32, Fails>;
type A = Action<Instant, &'static str, u32, Fails>;
type E = Event<Instant, &'static str, u32, Fails>;

/// The ETag of the term's own epoch write, and of its notice.
const TERM_ETAG: u32 = 7;
const NOTICE_ETAG: u32 = 8;
const EPOCH: u64 = 41;

fn timing() -> Timing {
    Timing::default()
}

fn timeout() -> Duration {
    Pace::new(&timing()).request_timeout()
}

fn term(now: Instant, slots: u32, departs: bool) -> Term<Instant, u32> {
    Term {
        kill_at: now + Duration::from_secs(60),
        epoch: EPOCH,
        etag: Some(TERM_ETAG),
        slots,
        departs,
    }
}

fn begun(now: Instant, term: Term<Instant, u32>, ending: Ending, named: bool) -> H {
    let begin = Begin {
        ending,
        named,
        lined: true,
        mutants: Mutants::default(),
    };
    let limit = (now + timeout()).min(term.kill_at);
    let (mut h, first) = H::begin(&timing(), now, term, begin);
    assert_eq!(first, vec![A::TakePrepared { limit }]);
    assert_eq!(h.step(now, E::Prepared(None)), vec![A::Guess]);
    h
}

/// A handoff of a preemption begun at `now`, nothing prepared, whose choice came to `choice`.
fn chosen(
    now: Instant,
    term: Term<Instant, u32>,
    choice: Choice<&'static str, u32, Fails>,
) -> (H, Vec<A>) {
    let limit = (now + timeout()).min(term.kill_at);
    let mut h = begun(now, term, Ending::Preempted, true);
    assert_eq!(
        h.step(now, E::Guessed(Some("b"))),
        vec![A::Choose {
            standby: None,
            limit
        }]
    );
    let then = h.step(now, E::Chosen(choice));
    (h, then)
}

/// A handoff begun at `now` of a term whose body ended by itself, `guess` the line's successor.
fn unannounced(now: Instant, term: Term<Instant, u32>, guess: &'static str) -> (H, Vec<A>) {
    let mut h = begun(now, term, Ending::ByItself, false);
    let then = h.step(now, E::Guessed(Some(guess)));
    (h, then)
}

fn change(to: &'static str, limit: Instant) -> A {
    A::Send {
        request: Request::Change {
            from: None,
            to,
            etag: None,
        },
        limit,
    }
}

fn reserved(etag: u32) -> Option<Reserved<u32>> {
    Some(Reserved {
        epoch: EPOCH + 1,
        etag,
    })
}

/// A handoff to "b" named by a notice, changed and woken (`wake`) at `now`: its first
/// confirmation actions.
fn handed_to_b(now: Instant, slots: u32, wake: Wake) -> (H, Vec<A>) {
    let choice = Choice::To("b", Some(NOTICE_ETAG));
    let (mut h, first) = chosen(now, term(now, slots, false), choice);
    assert_eq!(first, vec![change("b", now + timeout())]);
    let woken = h.step(now, E::Changed(Ok(())));
    let reserved = if slots == 1 {
        reserved(NOTICE_ETAG)
    } else {
        None
    };
    assert_eq!(
        woken,
        vec![
            A::Say(Note::Gave(Outcome::HandedOver)),
            A::Wake { to: "b", reserved }
        ]
    );
    let then = h.step(now, E::Woke(wake));
    (h, then)
}

/// Sleeps and reads (each read answered `read`, the record standing) until something else
/// is asked; returns it and the instant it was asked at.
fn read_until_other(
    h: &mut H,
    mut now: Instant,
    mut actions: Vec<A>,
    read: Read<u32>,
) -> (Instant, Vec<A>) {
    loop {
        match actions.last() {
            Some(A::Sleep(until)) => {
                now = *until;
                actions = h.step(now, E::Slept);
            }
            Some(A::Send {
                request: Request::Read { record, .. },
                ..
            }) => {
                let record = record.then_some(Record::Stands);
                actions = h.step(now, E::Read(read.clone(), record));
            }
            _ => return (now, actions),
        }
    }
}

#[test]
fn a_chosen_successor_is_changed_to_then_woken_with_the_epoch_its_notice_reserved() {
    let now = Instant::now();
    let (_, first) = handed_to_b(now, 1, Wake::Accepted);
    // Woken, its record is not read again: a pause, then the first read.
    assert_eq!(first, vec![A::Sleep(now + Pace::CONFIRM_READ_LEAST)]);
}

#[test]
fn with_slots_the_wake_up_carries_no_epoch() {
    handed_to_b(Instant::now(), 3, Wake::Accepted);
}

#[test]
fn the_change_is_cut_at_the_kill_deadline() {
    let now = Instant::now();
    let mut t = term(now, 1, false);
    t.kill_at = now + Duration::from_millis(100);
    let (_, first) = chosen(now, t.clone(), Choice::To("b", None));
    assert_eq!(first, vec![change("b", t.kill_at)]);
}

#[test]
fn an_unannounced_handoff_reserves_with_the_terms_etag_and_reads_the_record_first() {
    let now = Instant::now();
    let (mut h, first) = unannounced(now, term(now, 1, true), "b");
    assert_eq!(first, vec![change("b", now + timeout())]);
    let woken = h.step(now, E::Changed(Ok(())));
    assert_eq!(
        woken.last(),
        Some(&A::Wake {
            to: "b",
            reserved: reserved(TERM_ETAG)
        })
    );
    let slept = h.step(now, E::Woke(Wake::Accepted));
    let at = now + Pace::CONFIRM_READ_LEAST;
    assert_eq!(slept, vec![A::Sleep(at)]);
    // A term that ended this instance departs with the first read, once.
    let read = A::Send {
        request: Request::Read {
            successor: "b",
            record: true,
        },
        limit: at + timeout(),
    };
    assert_eq!(h.step(at, E::Slept), vec![A::Depart, read]);
    let next = h.step(at, E::Read(Read::Ours(TERM_ETAG), Some(Record::Stands)));
    let later = at + Pace::CONFIRM_READ_LEAST * 2;
    assert_eq!(next, vec![A::Sleep(later)]);
    assert!(!h.step(later, E::Slept).contains(&A::Depart));
}

#[test]
fn a_change_without_an_answer_releases_under_the_terms_own_id() {
    let now = Instant::now();
    let (mut h, _) = chosen(now, term(now, 1, false), Choice::To("b", None));
    let later = now + Duration::from_secs(1);
    assert_eq!(
        h.step(later, E::Changed(Err(SLOW))),
        vec![
            A::Say(Note::Unanswered(SLOW, "b")),
            A::Say(Note::Gave(Outcome::Fallback)),
            A::Send {
                request: Request::Release,
                limit: later + timeout()
            }
        ]
    );
    assert_eq!(
        h.step(later, E::Released(true)),
        vec![A::Done(Surrender::Released(true))]
    );
}

#[test]
fn a_change_refused_for_the_lease_ends_the_handoff_lost() {
    let now = Instant::now();
    let (mut h, _) = chosen(now, term(now, 1, false), Choice::To("b", None));
    assert_eq!(
        h.step(now, E::Changed(Err(LOST))),
        vec![
            A::Say(Note::Lost(LOST)),
            A::Say(Note::Gave(Outcome::Lost)),
            A::Done(Surrender::Lost)
        ]
    );
}

#[test]
fn a_choice_without_a_successor_releases_or_ends() {
    let now = Instant::now();
    let release = A::Send {
        request: Request::Release,
        limit: now + timeout(),
    };
    let (_, nobody) = chosen(now, term(now, 1, false), Choice::Nobody);
    assert_eq!(
        nobody,
        vec![
            A::Say(Note::Nobody),
            A::Say(Note::Gave(Outcome::NoSuccessor)),
            release.clone()
        ]
    );
    let (_, unlisted) = chosen(now, term(now, 1, false), Choice::Unlisted(SLOW));
    assert_eq!(
        unlisted,
        vec![
            A::Say(Note::Unlisted(SLOW)),
            A::Say(Note::Gave(Outcome::Released)),
            release
        ]
    );
    let (_, lost) = chosen(now, term(now, 1, false), Choice::Lost(LOST));
    assert_eq!(lost.last(), Some(&A::Done(Surrender::Lost)));
}

/// A handoff to "b" that "b" did not take within its window, the blob as the handoff left it:
/// passed over, and "c" the line's successor.
fn passed_over_b() -> (H, Instant, Vec<A>) {
    let now = Instant::now();
    let (mut h, first) = handed_to_b(now, 1, Wake::Accepted);
    let (now, asked) = read_until_other(&mut h, now, first, Read::Ours(NOTICE_ETAG));
    assert_eq!(asked.last(), Some(&A::PassOver(Some("b"))));
    let then = h.step(now, E::Successor(Some("c")));
    (h, now, then)
}

#[test]
fn a_hand_on_is_a_notice_then_a_change_each_on_the_etag_the_last_write_left() {
    let (mut h, now, then) = passed_over_b();
    assert_eq!(
        then,
        vec![A::Send {
            request: Request::Notice {
                from: "b",
                to: "c",
                passed_over: vec!["b"],
                etag: NOTICE_ETAG
            },
            limit: now + timeout()
        }]
    );
    let later = now + Duration::from_millis(30);
    assert_eq!(
        h.step(later, E::Noticed(Ok(9))),
        vec![A::Send {
            request: Request::Change {
                from: Some("b"),
                to: "c",
                etag: Some(9)
            },
            limit: later + timeout()
        }]
    );
    // The member handed on to must read the members passed over: no epoch in its wake-up.
    assert_eq!(
        h.step(later, E::Changed(Ok(()))),
        vec![
            A::Say(Note::Confirmation(confirmation::Note::HandedOn("c"))),
            A::Wake {
                to: "c",
                reserved: None
            }
        ]
    );
}

#[test]
fn a_hand_on_whose_notice_is_refused_leaves_the_lease_where_it_is() {
    let (mut h, now, _) = passed_over_b();
    assert_eq!(
        h.step(now, E::Noticed(Err(LOST))),
        vec![
            A::Say(Note::NotHandedOn(LOST)),
            A::Done(Surrender::HandedTo("b"))
        ]
    );
}

#[test]
fn nobody_left_after_a_listing_releases_on_the_etag_the_handoff_left() {
    let (mut h, now, _) = passed_over_b_nobody();
    assert_eq!(
        h.step(now, E::Released(false)),
        vec![A::Done(Surrender::Released(false))]
    );
}

/// As [`passed_over_b`], the line knowing nobody else: the members are listed first.
fn passed_over_b_nobody() -> (H, Instant, Vec<A>) {
    let now = Instant::now();
    let (mut h, first) = handed_to_b(now, 1, Wake::Accepted);
    let (now, _) = read_until_other(&mut h, now, first, Read::Ours(NOTICE_ETAG));
    let relist = h.step(now, E::Successor(None));
    assert_eq!(
        relist,
        vec![A::Relist {
            limit: now + timeout()
        }]
    );
    let then = h.step(now, E::Relisted(Some(None)));
    assert_eq!(
        then,
        vec![
            A::Say(Note::Confirmation(confirmation::Note::NobodyElse)),
            A::Say(Note::Gave(Outcome::NoSuccessor)),
            A::Send {
                request: Request::ReleaseIf {
                    from: "b",
                    etag: NOTICE_ETAG
                },
                limit: now + timeout()
            }
        ]
    );
    (h, now, then)
}

#[test]
fn a_successor_under_a_new_lease_id_is_changed_to_and_woken_with_the_terms_reservation() {
    let now = Instant::now();
    let (mut h, first) = handed_to_b(now, 1, Wake::Refused);
    let at = now + Pace::CONFIRM_READ_LEAST;
    assert_eq!(first, vec![A::Sleep(at)]);
    assert_eq!(
        h.step(at, E::Slept),
        vec![A::Send {
            request: Request::Read {
                successor: "b",
                record: true
            },
            limit: at + timeout()
        }]
    );
    let rekey = h.step(
        at,
        E::Read(Read::Ours(NOTICE_ETAG), Some(Record::NewLeaseId("b2"))),
    );
    assert_eq!(
        rekey,
        vec![A::Send {
            request: Request::Change {
                from: Some("b"),
                to: "b2",
                etag: None
            },
            limit: at + timeout()
        }]
    );
    assert_eq!(
        h.step(at, E::Changed(Ok(()))),
        vec![
            A::Refresh("b2"),
            A::Say(Note::Confirmation(confirmation::Note::NewLeaseId("b2"))),
            A::Wake {
                to: "b2",
                reserved: reserved(TERM_ETAG)
            }
        ]
    );
}

#[test]
fn a_successor_that_writes_its_epoch_ends_the_handoff_handed() {
    let now = Instant::now();
    let (mut h, first) = handed_to_b(now, 1, Wake::Accepted);
    let (_, done) = read_until_other(&mut h, now, first, Read::Taken);
    assert_eq!(done, vec![A::Done(Surrender::HandedTo("b"))]);
}

#[test]
#[should_panic(expected = "the handoff waits for the change")]
fn an_event_that_answers_nothing_asked_is_a_fault_of_the_shell() {
    let now = Instant::now();
    let (mut h, _) = chosen(now, term(now, 1, false), Choice::To("b", None));
    h.step(now, E::Slept);
}

#[test]
fn without_a_line_or_past_the_kill_deadline_the_lease_is_released_at_once() {
    let now = Instant::now();
    let released = vec![
        A::DropPrepared,
        A::Say(Note::Gave(Outcome::Released)),
        A::Send {
            request: Request::Release,
            limit: now + timeout(),
        },
    ];
    let begin = Begin {
        ending: Ending::Stop,
        named: false,
        lined: false,
        mutants: Mutants::default(),
    };
    let (_, first) = H::begin(&timing(), now, term(now, 1, true), begin);
    assert_eq!(first, released);
    let mut late = term(now, 1, true);
    late.kill_at = now;
    let lined = Begin {
        lined: true,
        ..begin
    };
    let (_, first) = H::begin(&timing(), now, late, lined);
    assert_eq!(first, released);
}

#[test]
fn a_member_standing_aside_chooses_with_its_cooldown_said_beside() {
    let now = Instant::now();
    let cooldown = Duration::from_secs(30);
    let mut h = begun(
        now,
        term(now, 1, false),
        Ending::StandAside(cooldown),
        false,
    );
    assert_eq!(
        h.step(now, E::Guessed(Some("b"))),
        vec![A::Choose {
            standby: Some(cooldown),
            limit: now + timeout()
        }]
    );
}

#[test]
fn a_choice_prepared_while_the_body_stopped_serves_while_it_is_fresh() {
    let now = Instant::now();
    let fresh_for = timing().acquire_interval;
    let begin = Begin {
        ending: Ending::Stop,
        named: false,
        lined: true,
        mutants: Mutants::default(),
    };
    let prepared = |at| Some((at, Choice::To("b", Some(NOTICE_ETAG))));
    // Fresh: the change to the member it chose, at once.
    let (mut h, _) = H::begin(&timing(), now, term(now, 3, true), begin);
    assert_eq!(
        h.step(now, E::Prepared(prepared(now - fresh_for / 2))),
        vec![A::Guess]
    );
    assert_eq!(
        h.step(now, E::Guessed(Some("c"))),
        vec![change("b", now + timeout())]
    );
    // Stale: chosen again.
    let (mut h, _) = H::begin(&timing(), now, term(now, 3, true), begin);
    h.step(now, E::Prepared(prepared(now - fresh_for)));
    let again = h.step(now, E::Guessed(Some("c")));
    assert!(
        matches!(again.as_slice(), [A::Choose { standby: None, .. }]),
        "{again:?}"
    );
}

/// What a handoff asks up to its first read and after it, that read answered `answer`.
fn after_first_read(h: &mut H, first: Vec<A>, answer: &E) -> Vec<A> {
    let [A::Sleep(at)] = first[..] else {
        panic!("{first:?}")
    };
    let mut seen = first;
    seen.extend(h.step(at, E::Slept));
    seen.extend(h.step(at, answer.clone()));
    seen
}

/// The mutant `hop-waits-out-refusal` takes a refused wake-up, or one nothing listened for, for
/// one merely missed: the confirmation goes on as after a missed wake-up (a refused member's
/// record that stands does not pass it over; a member taking the lease is not said to have
/// found it at its own poll).
#[test]
fn the_mutant_takes_a_refused_wake_up_for_a_missed_one() {
    let now = Instant::now();
    let stands = E::Read(Read::Ours(NOTICE_ETAG), Some(Record::Stands));
    let taken = E::Read(Read::Taken, None);
    for (wake, answer) in [(Wake::Refused, stands), (Wake::Unreachable, taken)] {
        let (mut h, first) = handed_to_b(now, 1, Wake::Missed);
        let missed = after_first_read(&mut h, first, &answer);
        let (mut h, first) = handed_to_b(now, 1, wake);
        let honest = after_first_read(&mut h, first, &answer);
        assert_ne!(honest, missed, "{wake:?} is not a missed wake-up");
        let choice = Choice::To("b", Some(NOTICE_ETAG));
        let (mut h, _) = chosen(now, term(now, 1, false), choice);
        h.mutants.hop_waits_out_refusal = true;
        h.step(now, E::Changed(Ok(())));
        let first = h.step(now, E::Woke(wake));
        assert_eq!(after_first_read(&mut h, first, &answer), missed, "{wake:?}");
    }
}
