//! An attempt's transitions: each answer in, the requests and the end out.

use super::*;
use std::time::Instant;

/// A store error of the tests: its kind, and whether a condition failed.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fails(Failure, bool);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
    fn condition_failed(&self) -> bool {
        self.1
    }
}

type Action = super::Action<Instant, Fails>;
type Event = super::Event<Fails>;

/// The member around an attempt: its answers, and the questions asked, in order.
#[derive(Default)]
struct Asked {
    other_count: bool,
    delayed: bool,
    shutting_down: bool,
    questions: Vec<&'static str>,
}

impl Grounds for Asked {
    fn counts_otherwise(&mut self) -> bool {
        self.questions.push("count");
        self.other_count
    }
    fn pass_over(&mut self) {
        self.questions.push("pass over");
    }
    fn delayed(&mut self) -> bool {
        self.questions.push("delayed");
        self.delayed
    }
    fn shutting_down(&self) -> bool {
        self.shutting_down
    }
    fn wall_ms(&mut self) -> u64 {
        self.questions.push("wall");
        1_000
    }
}

fn attempt(slot: u32, sent: Instant, beside: Beside) -> Attempt<Instant, Fails> {
    Attempt::new(
        slot,
        sent,
        Timing::default(),
        beside,
        true,
        Mutants::default(),
    )
}

fn rt() -> Duration {
    Timing::default().request_timeout()
}

fn released(end: Outcome<Instant, Fails>) -> Vec<Action> {
    vec![Action::Done(end)]
}

fn gives_back() -> Vec<Action> {
    vec![
        Action::SpendId,
        Action::Send(Request::Release),
        Action::Await(Awaited::Sent),
    ]
}

#[test]
fn a_term_is_won_once_the_epoch_after_the_last_is_written() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::Nothing);
    let mut g = Asked::default();
    let acquire = a.step(t0, Event::Start, &mut g);
    assert_eq!(
        acquire,
        [
            Action::Send(Request::Acquire),
            Action::Await(Awaited::Acquire(t0 + rt()))
        ]
    );
    let t1 = t0 + Duration::from_millis(10);
    let read = a.step(t1, Event::Acquired(Ok(())), &mut g);
    assert_eq!(
        read,
        [
            Action::Send(Request::Read { until: t1 + rt() }),
            Action::Await(Awaited::Sent)
        ]
    );
    let write = a.step(t1, Event::Read(Ok(Some(5_000))), &mut g);
    assert_eq!(
        write,
        [
            Action::Send(Request::WriteEpoch {
                epoch: 5_001,
                until: Some(t1 + rt())
            }),
            Action::Await(Awaited::Sent)
        ]
    );
    assert_eq!(g.questions, ["count", "pass over", "delayed", "wall"]);
    let won = a.step(t1, Event::Written(Ok(())), &mut g);
    let deadline = Deadline::from_sent(t0, &Timing::default());
    assert_eq!(
        won,
        [
            Action::SpendId,
            Action::Delay(Delay::Won),
            Action::Done(Outcome::Won {
                deadline,
                epoch: 5_001,
                reserved: false
            })
        ]
    );
}

#[test]
fn a_lease_someone_holds_ends_the_attempt_and_keeps_the_lease_id() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::Nothing);
    let mut g = Asked::default();
    a.step(t0, Event::Start, &mut g);
    let held = a.step(
        t0,
        Event::Acquired(Err(Fails(Failure::Held, false))),
        &mut g,
    );
    assert_eq!(
        held,
        [Action::Delay(Delay::Led), Action::Done(Outcome::Held)]
    );
}

#[test]
fn an_acquire_with_no_answer_spends_its_lease_id_and_goes_on_late() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::Nothing);
    let mut g = Asked::default();
    a.step(t0, Event::Start, &mut g);
    let late = a.step(t0 + rt(), Event::NoAnswer, &mut g);
    assert_eq!(late, [Action::SpendId, Action::Done(Outcome::NoAnswer)]);
}

#[test]
fn a_missing_blob_is_created_again_and_the_attempt_fails() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::Nothing);
    let mut g = Asked::default();
    a.step(t0, Event::Start, &mut g);
    let missing = Fails(Failure::Missing, false);
    let recreate = a.step(t0, Event::Acquired(Err(missing.clone())), &mut g);
    assert_eq!(
        recreate,
        [
            Action::Delay(Delay::Missing),
            Action::Send(Request::Recreate),
            Action::Await(Awaited::Sent)
        ]
    );
    let end = a.step(t0, Event::Recreated(Ok(())), &mut g);
    assert_eq!(end, released(Outcome::Failed(Why::Store(missing))));
}

#[test]
fn a_reserved_epoch_written_in_time_wins_without_a_read() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::ReservedEpoch(9));
    let mut g = Asked::default();
    let sent = a.step(t0, Event::Start, &mut g);
    assert_eq!(
        sent,
        [
            Action::Send(Request::WriteReserved {
                epoch: 9,
                until: t0 + rt()
            }),
            Action::Send(Request::Acquire),
            Action::Await(Awaited::Acquire(t0 + rt()))
        ]
    );
    let beside = a.step(t0, Event::Acquired(Ok(())), &mut g);
    assert_eq!(beside, [Action::Await(Awaited::Beside)]);
    let won = a.step(t0, Event::Written(Ok(())), &mut g);
    assert_eq!(won[0], Action::Delay(Delay::Over));
    assert!(matches!(
        won.last(),
        Some(Action::Done(Outcome::Won {
            epoch: 9,
            reserved: true,
            ..
        }))
    ));
    assert!(g.questions.is_empty(), "asked {:?}", g.questions);
}

#[test]
fn a_refused_reservation_reads_and_writes_the_epoch_as_without_one() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::ReservedEpoch(9));
    let mut g = Asked::default();
    a.step(t0, Event::Start, &mut g);
    a.step(t0, Event::Acquired(Ok(())), &mut g);
    let refused = Fails(Failure::LeaseLost, true);
    let read = a.step(t0, Event::Written(Err(refused)), &mut g);
    assert_eq!(read[0], Action::Send(Request::Read { until: t0 + rt() }));
}

#[test]
fn an_epoch_confirmed_past_the_stop_deadline_gives_the_lease_back() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::Nothing);
    let mut g = Asked::default();
    a.step(t0, Event::Start, &mut g);
    a.step(t0, Event::Acquired(Ok(())), &mut g);
    a.step(t0, Event::Read(Ok(None)), &mut g);
    let deadline = Deadline::from_sent(t0, &Timing::default());
    let late = a.step(deadline.stop_at, Event::Written(Ok(())), &mut g);
    assert_eq!(late, gives_back());
    let end = a.step(deadline.stop_at, Event::Released, &mut g);
    let span = deadline.stop_at - t0;
    assert_eq!(end, released(Outcome::Failed(Why::PastStopDeadline(span))));
}

#[test]
fn a_blob_under_a_lock_delay_or_a_shutdown_gives_the_lease_back_for_no_term() {
    for (delayed, shutting_down, why) in [
        (true, false, GaveBack::LockDelay),
        (false, true, GaveBack::ShuttingDown),
    ] {
        let t0 = Instant::now();
        let mut a = attempt(0, t0, Beside::Nothing);
        let mut g = Asked {
            delayed,
            shutting_down,
            ..Asked::default()
        };
        a.step(t0, Event::Start, &mut g);
        a.step(t0, Event::Acquired(Ok(())), &mut g);
        let back = a.step(t0, Event::Read(Ok(Some(3))), &mut g);
        assert_eq!(back, gives_back());
        let end = a.step(t0, Event::Released, &mut g);
        assert_eq!(end, released(Outcome::GaveBack(why)));
    }
}

#[test]
fn another_slot_reads_the_groups_count_before_its_epoch() {
    let t0 = Instant::now();
    let mut a = attempt(2, t0, Beside::Nothing);
    let mut g = Asked::default();
    a.step(t0, Event::Start, &mut g);
    a.step(t0, Event::Acquired(Ok(())), &mut g);
    let count = a.step(t0, Event::Read(Ok(Some(3))), &mut g);
    assert_eq!(
        count,
        [
            Action::Send(Request::ReadCount { until: t0 + rt() }),
            Action::Await(Awaited::Sent)
        ]
    );
    assert!(g.questions.is_empty(), "slot 0's read answers the count");
    let back = a.step(t0, Event::Counted(Ok(true)), &mut g);
    assert_eq!(back, gives_back());
    let end = a.step(t0, Event::Released, &mut g);
    assert_eq!(end, released(Outcome::GaveBack(GaveBack::OtherCount)));
}

#[test]
fn a_blob_changed_after_the_read_beside_the_acquire_is_read_again() {
    let t0 = Instant::now();
    let mut a = attempt(0, t0, Beside::Read);
    let mut g = Asked::default();
    let sent = a.step(t0, Event::Start, &mut g);
    assert_eq!(
        sent[0],
        Action::Send(Request::ReadBeside { until: t0 + rt() })
    );
    assert_eq!(
        a.step(t0, Event::Acquired(Ok(())), &mut g),
        [Action::Await(Awaited::Beside)]
    );
    a.step(t0, Event::Read(Ok(Some(3))), &mut g);
    let changed = Fails(Failure::LeaseLost, true);
    let again = a.step(t0, Event::Written(Err(changed.clone())), &mut g);
    assert_eq!(again[0], Action::Send(Request::Read { until: t0 + rt() }));
    // Read again, a second refusal is the attempt's failure.
    a.step(t0, Event::Read(Ok(Some(4))), &mut g);
    let back = a.step(t0, Event::Written(Err(changed.clone())), &mut g);
    assert_eq!(back, gives_back());
    let end = a.step(t0, Event::Released, &mut g);
    assert_eq!(end, released(Outcome::Failed(Why::Store(changed))));
}
