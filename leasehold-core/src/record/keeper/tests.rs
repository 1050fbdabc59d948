use super::*;
use crate::exchange::Answer;
use std::time::{Duration, Instant};

/// A store error of a kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fails(Failure, bool);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
    fn lease_id_missing(&self) -> bool {
        self.1
    }
}

impl Display for Fails {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

const MISSING: Fails = Fails(Failure::Missing, false);
const LEASED: Fails = Fails(Failure::Permanent, true);
const HELD: Fails = Fails(Failure::Held, false);
const CONFLICT: Fails = Fails(Failure::LeaseLost, false);

/// The member's line as the keeper sees it; a record says a number.
struct Member {
    facts: Facts<Instant>,
    published: u32,
    standing: Standing,
    draws: u32,
}

impl Grounds<Instant, u32> for Member {
    fn facts(&self) -> Facts<Instant> {
        self.facts
    }
    fn draw(&mut self) -> f64 {
        self.draws += 1;
        0.5
    }
    fn published(&self) -> u32 {
        self.published
    }
    fn joining(&mut self) -> u32 {
        self.published
    }
    fn created(&mut self, _now: Instant) {}
    fn settle(&mut self, _now: Instant) {
        self.facts.settle_at = None;
        self.published += 1;
        self.facts.written = false;
    }
    fn wrote(&mut self, record: &u32) {
        self.facts.written = *record == self.published;
    }
    fn held(&mut self) {}
    fn stand(&mut self, standing: Standing) -> bool {
        self.facts.joined = standing == Standing::Joined;
        let changed = standing != self.standing;
        self.standing = standing;
        changed
    }
}

fn member() -> Member {
    Member {
        facts: Facts {
            joined: false,
            written: true,
            listed: None,
            leading: false,
            polls: false,
            slotted: false,
            terms_begun: 0,
            settle_at: None,
        },
        published: 7,
        standing: Standing::Joining,
        draws: 0,
    }
}

type Out = Vec<Output<u32, Fails>>;

/// The request the outputs end with, and its tag.
fn sent(out: &Out) -> (Tag, Request<u32>) {
    match out.last() {
        Some(Output::Send(send)) => (send.tag, send.request.clone()),
        other => panic!("no request sent: {other:?}"),
    }
}

/// The keeper, the member, and the request on its way.
struct Run {
    k: Keeper<Instant, u32>,
    m: Member,
    asked: Option<(Tag, Request<u32>)>,
    out: Out,
}

/// A keeper started now for a member in line, its line listed now.
fn in_line() -> (Instant, Run) {
    let t0 = Instant::now();
    let mut m = member();
    m.facts.joined = true;
    m.facts.listed = Some(t0);
    (t0, Run::new(t0, m))
}

impl Run {
    fn new(t0: Instant, m: Member) -> Self {
        let mut run = Self {
            k: Keeper::new(t0, 0.5),
            m,
            asked: None,
            out: Vec::new(),
        };
        run.input(t0, Input::Start);
        run
    }

    fn input(&mut self, now: Instant, input: Input<Instant, Fails>) {
        self.out = self.k.handle(now, input, &mut self.m);
        if let Some(Output::Send(_)) = self.out.last() {
            self.asked = Some(sent(&self.out));
        } else if self.k.awaits().waiting.answers.is_empty() {
            self.asked = None;
        }
    }

    /// The request on its way.
    fn asked(&self) -> Option<Request<u32>> {
        self.asked.as_ref().map(|(_, r)| r.clone())
    }

    fn answer(&mut self, now: Instant, answer: Result<(), Fails>) {
        let (tag, _) = self.asked.clone().expect("a request on its way");
        let answer = Answer {
            tag,
            sent: now,
            answer,
        };
        self.input(now, Input::Answer(answer));
    }

    /// The sleep it waits out.
    fn sleeps(&self) -> Option<Instant> {
        let awaits = self.k.awaits();
        assert!(awaits.waiting.until.is_none() || awaits.stop);
        awaits.waiting.until
    }
}

/// A join: delete the old record (again with our lease id when it is leased), create it, take
/// its lease, then a first look at the line (a listing and a read of the lease blob); written
/// and listed, it sleeps until its renewal.
#[test]
fn a_join_deletes_creates_takes_the_lease_and_looks_at_the_line() {
    let t0 = Instant::now();
    let mut r = Run::new(t0, member());
    assert_eq!(r.asked(), Some(Request::DeleteOld { ours: false }));
    r.answer(t0, Err(LEASED));
    assert_eq!(r.asked(), Some(Request::DeleteOld { ours: true }));
    r.answer(t0, Err(MISSING));
    assert_eq!(
        r.asked(),
        Some(Request::Create(Box::new(7))),
        "what the join publishes"
    );
    r.answer(t0, Ok(()));
    assert_eq!(r.asked(), Some(Request::TakeLease));
    r.answer(t0, Ok(()));
    assert!(r.m.facts.joined, "joined");
    assert!(matches!(
        r.out[0],
        Output::Say(Say::Standing(Standing::Joined))
    ));
    assert_eq!(r.asked(), Some(Request::List));
    r.m.facts.listed = Some(t0);
    r.answer(t0, Ok(()));
    assert_eq!(
        r.asked(),
        Some(Request::Read),
        "a member that does not lead reads"
    );
    r.m.facts.polls = true;
    r.answer(t0, Ok(()));
    assert!(matches!(r.out[0], Output::Placed), "{:?}", r.out);
    assert_eq!(r.sleeps(), Some(t0 + Pace::RECORD_RENEW));
    assert_eq!(r.k.awaits().waiting.answers, []);
    // At the renewal: a renew, and nothing else due.
    let t1 = t0 + Pace::RECORD_RENEW;
    r.input(t1, Input::Timer);
    assert_eq!(r.asked(), Some(Request::Renew));
    r.answer(t1, Ok(()));
    assert_eq!(r.sleeps(), Some(t1 + Pace::RECORD_RENEW));
}

/// A join that another live instance of this identity holds: a duplicate, and the next try a
/// renew period later, without a first look.
#[test]
fn a_duplicate_tries_again_later() {
    let t0 = Instant::now();
    let mut r = Run::new(t0, member());
    r.answer(t0, Err(HELD));
    assert!(matches!(
        r.out[0],
        Output::Say(Say::Standing(Standing::Duplicate))
    ));
    assert_eq!(r.sleeps(), Some(t0 + Pace::RECORD_RENEW));
}

/// A renew that finds the record lease taken takes it back, and a renew that finds the record
/// gone says join again.
#[test]
fn a_renew_takes_the_lease_back_or_rejoins() {
    let (t0, mut r) = in_line();
    assert_eq!(r.asked(), Some(Request::Renew));
    r.answer(t0, Err(CONFLICT));
    assert_eq!(r.asked(), Some(Request::TakeLease));
    r.answer(t0, Ok(()));
    assert!(r.sleeps().is_some());
    let t1 = t0 + Pace::RECORD_RENEW;
    r.input(t1, Input::Poked);
    assert_eq!(r.asked(), Some(Request::Renew));
    r.answer(t1, Err(MISSING));
    assert!(matches!(r.out[0], Output::Say(Say::RecordGone)));
    assert!(!r.m.facts.joined, "joining again");
    assert_eq!(r.sleeps(), Some(t1 + Pace::RECORD_RETRY));
}

/// Settled and unwritten: the keeper settles, writes, and while the write has not gone through
/// looks again soon.
#[test]
fn a_record_due_to_settle_is_settled_and_written() {
    let (t0, mut r) = in_line();
    let t1 = t0 + Duration::from_secs(1);
    r.m.facts.settle_at = Some(t1);
    r.answer(t0, Ok(()));
    assert_eq!(r.sleeps(), Some(t1));
    r.input(t1, Input::Timer);
    assert_eq!(r.asked(), Some(Request::Write(Box::new(8))), "settled");
    r.answer(t1, Err(Fails(Failure::Transient, false)));
    assert!(matches!(r.out[0], Output::Say(Say::WriteFailed(_))));
    assert_eq!(r.sleeps(), Some(t1 + Pace::RECORD_RETRY), "unwritten: soon");
    let t2 = t1 + Pace::RECORD_RETRY;
    r.input(t2, Input::Timer);
    r.answer(t2, Ok(()));
    assert!(r.m.facts.written);
}

/// A leader lists `TERM_START_QUIET` into a term and tidies after the listing; with a fresh
/// listing by someone else since its last tidying, it tidies without listing.
#[test]
fn a_leader_lists_soon_into_a_term_and_tidies() {
    let (t0, mut r) = in_line();
    r.m.facts.leading = true;
    r.m.facts.terms_begun = 1;
    r.answer(t0, Ok(()));
    assert_eq!(r.asked(), Some(Request::Tidy));
    r.answer(t0, Ok(()));
    let quiet = t0 + Pace::TERM_START_QUIET;
    assert_eq!(r.sleeps(), Some(quiet));
    let draws = r.m.draws;
    r.input(quiet, Input::Timer);
    assert_eq!(r.asked(), Some(Request::List));
    assert_eq!(r.m.draws, draws + 1, "the next period is stretched anew");
    r.answer(quiet, Ok(()));
    assert_eq!(r.asked(), Some(Request::Tidy), "a leader does not read");
    r.m.facts.listed = Some(quiet);
    r.answer(quiet, Ok(()));
    assert!(r.sleeps().is_some_and(|at| at > quiet));
}

/// A stop is taken at a sleep, never mid-request: a member in line deletes its record, then
/// the keeper is done; one out of line is done at once.
#[test]
fn a_stop_leaves_at_the_sleep() {
    let (t0, mut r) = in_line();
    assert_eq!(r.asked(), Some(Request::Renew));
    assert!(!r.k.awaits().stop, "a request is never cut short");
    r.input(t0, Input::Stop);
    assert!(r.out.is_empty());
    r.answer(t0, Ok(()));
    assert_eq!(r.asked(), Some(Request::Leave), "left at the sleep");
    r.answer(t0, Ok(()));
    assert!(matches!(r.out[0], Output::Say(Say::Left(Ok(())))));
    assert!(matches!(r.out[1], Output::End));
    assert!(r.k.is_over());

    let mut r = Run::new(t0, member());
    r.answer(t0, Err(HELD));
    r.input(t0, Input::Stop);
    assert!(matches!(r.out[..], [Output::End]), "not in line");
}
