use super::*;
use std::time::{Duration, Instant};

fn facts() -> Facts<Instant> {
    Facts {
        joined: false,
        written: true,
        listed: None,
        leading: false,
        polls: false,
        terms_begun: 0,
        settle_at: None,
    }
}

fn half() -> impl FnMut() -> f64 {
    || 0.5
}

/// A join: delete the old record (again with our lease id when it is leased), create it, take
/// its lease, then a first look at the line; written and listed, it sleeps until its renewal.
#[test]
fn a_join_deletes_creates_takes_the_lease_and_looks_at_the_line() {
    let t0 = Instant::now();
    let mut k = Keeper::new(t0, 0.5);
    let mut f = facts();
    assert_eq!(k.next(t0, &f, &mut half()), Action::BeginJoin);
    k.done(t0);
    let old = Keep::DeleteOld { ours: false };
    assert_eq!(k.next(t0, &f, &mut half()), Action::Keep(old));
    assert_eq!(k.answered(t0, Reply::LeasedElsewhere), None);
    let ours = Keep::DeleteOld { ours: true };
    assert_eq!(k.next(t0, &f, &mut half()), Action::Keep(ours));
    assert_eq!(k.answered(t0, Reply::Missing), None);
    assert_eq!(k.next(t0, &f, &mut half()), Action::Keep(Keep::Create));
    assert_eq!(k.answered(t0, Reply::Done), None);
    assert_eq!(k.next(t0, &f, &mut half()), Action::Keep(Keep::TakeLease));
    assert_eq!(k.answered(t0, Reply::Done), Some(Outcome::Joined));
    assert_eq!(k.next(t0, &f, &mut half()), Action::Send(Request::List));
    k.done(t0);
    f.joined = true;
    f.listed = Some(t0);
    assert_eq!(
        k.next(t0, &f, &mut half()),
        Action::Sleep(t0 + Pace::RECORD_RENEW)
    );
    k.woke();
    // At the renewal: a renew, and nothing else due.
    let t1 = t0 + Pace::RECORD_RENEW;
    assert_eq!(k.next(t1, &f, &mut half()), Action::Keep(Keep::Renew));
    assert_eq!(k.answered(t1, Reply::Done), Some(Outcome::Joined));
    assert_eq!(
        k.next(t1, &f, &mut half()),
        Action::Sleep(t1 + Pace::RECORD_RENEW)
    );
}

/// A join that another live instance of this identity holds: a duplicate, and the next try a
/// renew period later, without a first look.
#[test]
fn a_duplicate_tries_again_later() {
    let t0 = Instant::now();
    let mut k = Keeper::new(t0, 0.0);
    let f = facts();
    assert_eq!(k.next(t0, &f, &mut half()), Action::BeginJoin);
    k.done(t0);
    k.next(t0, &f, &mut half());
    assert_eq!(k.answered(t0, Reply::Held), Some(Outcome::Duplicate));
    match k.next(t0, &f, &mut half()) {
        Action::Sleep(at) => assert_eq!(at, t0 + Pace::RECORD_RENEW),
        other => panic!("{other:?}"),
    }
}

/// A renew that finds the record lease taken takes it back, and a renew that finds the record
/// gone says join again.
#[test]
fn a_renew_takes_the_lease_back_or_rejoins() {
    let t0 = Instant::now();
    let mut k = Keeper::new(t0, 0.0);
    let mut f = facts();
    f.joined = true;
    f.listed = Some(t0);
    assert_eq!(k.next(t0, &f, &mut half()), Action::Keep(Keep::Renew));
    assert_eq!(k.answered(t0, Reply::Conflict), None);
    assert_eq!(k.next(t0, &f, &mut half()), Action::Keep(Keep::TakeLease));
    assert_eq!(k.answered(t0, Reply::Done), Some(Outcome::Joined));
    assert!(matches!(k.next(t0, &f, &mut half()), Action::Sleep(_)));
    k.woke();
    let t1 = t0 + Pace::RECORD_RENEW;
    assert_eq!(k.next(t1, &f, &mut half()), Action::Keep(Keep::Renew));
    assert_eq!(k.answered(t1, Reply::Missing), Some(Outcome::Rejoin));
    match k.next(t1, &f, &mut half()) {
        Action::Sleep(at) => assert_eq!(at, t1 + Pace::RECORD_RETRY),
        other => panic!("{other:?}"),
    }
}

/// Settled and unwritten: the keeper settles, writes, and while the write has not gone through
/// looks again soon.
#[test]
fn a_record_due_to_settle_is_settled_and_written() {
    let t0 = Instant::now();
    let mut k = Keeper::new(t0, 0.0);
    let mut f = facts();
    f.joined = true;
    f.listed = Some(t0);
    k.next(t0, &f, &mut half());
    k.answered(t0, Reply::Done);
    let t1 = t0 + Duration::from_secs(1);
    f.settle_at = Some(t1);
    assert!(matches!(k.next(t0, &f, &mut half()), Action::Sleep(at) if at == t1));
    k.woke();
    assert_eq!(k.next(t1, &f, &mut half()), Action::Settle);
    k.done(t1);
    f.settle_at = None;
    f.written = false;
    assert_eq!(k.next(t1, &f, &mut half()), Action::Send(Request::Write));
    k.done(t1);
    assert_eq!(
        k.next(t1, &f, &mut half()),
        Action::Sleep(t1 + Pace::RECORD_RETRY),
        "unwritten: again soon"
    );
}

/// A leader lists `TERM_START_QUIET` into a term and tidies after the listing; with a fresh
/// listing by someone else since its last tidying, it tidies without listing.
#[test]
fn a_leader_lists_soon_into_a_term_and_tidies() {
    let t0 = Instant::now();
    let mut k = Keeper::new(t0, 0.0);
    let mut f = facts();
    f.joined = true;
    f.listed = Some(t0);
    k.next(t0, &f, &mut half());
    k.answered(t0, Reply::Done);
    f.leading = true;
    f.terms_begun = 1;
    let quiet = t0 + Pace::TERM_START_QUIET;
    assert_eq!(k.next(t0, &f, &mut half()), Action::Send(Request::Tidy));
    k.done(t0);
    assert!(matches!(k.next(t0, &f, &mut half()), Action::Sleep(at) if at == quiet));
    k.woke();
    let mut draws = 0;
    let mut draw = || {
        draws += 1;
        0.0
    };
    assert_eq!(k.next(quiet, &f, &mut draw), Action::Send(Request::List));
    assert_eq!(draws, 1, "the next period is stretched anew");
    k.done(quiet);
    assert_eq!(k.next(quiet, &f, &mut half()), Action::Send(Request::Tidy));
    k.done(quiet);
    f.listed = Some(quiet);
    match k.next(quiet, &f, &mut half()) {
        Action::Send(request) => panic!("{request:?}"),
        Action::Sleep(at) => assert!(at > quiet),
        other => panic!("{other:?}"),
    }
}
