//! The candidate's transitions: each event in, the actions out.

use super::*;
use std::time::Instant;

/// A store error of the tests: only its kind.
#[derive(Debug, Clone)]
struct Fails(Failure);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
}

type Seen = super::Seen<Instant>;
type Event = super::Event<Fails>;
type Action = super::Action<Instant, Fails>;

fn timing() -> Timing {
    Timing::default()
}

/// Draws spread over `[0, 1)`, the same sequence for each step.
fn draws() -> impl FnMut() -> f64 {
    let mut x = 0.0_f64;
    move || {
        x = (x + 0.618_033_988_75) % 1.0;
        x
    }
}

/// A member in line, next in line (it polls), that knows who leads.
fn successor() -> Seen {
    Seen {
        late: false,
        lock_delay: None,
        mismatched: false,
        authorized: true,
        member: true,
        in_line: true,
        place: Place::Poll,
        leader_unknown: false,
    }
}

fn watcher() -> Seen {
    Seen {
        place: Place::Watch,
        ..successor()
    }
}

/// A watcher that sees the lease blob under a lock-delay until `until`.
fn under_lock_delay(until: Instant) -> Seen {
    Seen {
        lock_delay: Some(until),
        ..watcher()
    }
}

fn held() -> Event {
    Event::Round(Ok(Outcome::Held))
}

fn transient() -> Fails {
    Fails(Failure::Transient)
}

/// The actions of a step, without its log lines.
fn step(c: &mut Candidate<Instant>, event: Event, seen: &Seen) -> Vec<Action> {
    c.step(event, seen, &mut draws())
        .into_iter()
        .filter(|a| !matches!(a, Action::Say(_)))
        .collect()
}

/// The one action a step waits on.
fn then(c: &mut Candidate<Instant>, event: Event, seen: &Seen) -> Action {
    let mut actions = step(c, event, seen);
    assert_eq!(actions.len(), 1, "{actions:?}");
    actions.remove(0)
}

/// Asserts that the candidate asks the body, and tells it that it may lead.
fn asks_then_may_lead(c: &mut Candidate<Instant>, action: Action, seen: &Seen) -> Action {
    assert!(matches!(action, Action::AskBody), "{action:?}");
    assert_eq!(c.state(), State::Asking);
    then(c, Event::MayLead(true), seen)
}

fn follow(action: &Action) -> (Duration, bool) {
    match action {
        Action::Follow { pause, listening } => (*pause, *listening),
        other => panic!("not a pause between rounds: {other:?}"),
    }
}

/// The pause after a round that ended with `event`, seen as `seen` (also after listening).
fn pause_after(c: &mut Candidate<Instant>, event: Event, seen: &Seen) -> (Duration, bool) {
    match then(c, event, seen) {
        Action::Listen => follow(&then(c, Event::Listening, seen)),
        action => follow(&action),
    }
}

/// The first round is an acquire whatever the place (a free lease is taken at once); a
/// won round ends the candidate.
#[test]
fn the_first_round_acquires_and_a_win_ends_it() {
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &watcher());
    let round = asks_then_may_lead(&mut c, ask, &watcher());
    assert!(matches!(round, Action::Round(Round::Acquire)), "{round:?}");
    assert_eq!(c.state(), State::Polling);
    let end = then(&mut c, Event::Round(Ok(Outcome::Won)), &watcher());
    assert!(matches!(end, Action::End(End::Won)));
    assert_eq!(c.state(), State::Done);
}

/// The successor polls every jittered `acquire_interval`: a held lease is a polling
/// period of 1 to 1.2 s (saying once that it follows), then the next acquire.
#[test]
fn the_successor_polls_every_jittered_acquire_interval() {
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &successor());
    asks_then_may_lead(&mut c, ask, &successor());
    let actions = c.step(held(), &successor(), &mut draws());
    assert!(matches!(actions[0], Action::Say(Note::Following)));
    let (pause, listening) = match actions.last().unwrap() {
        Action::Listen => follow(&then(&mut c, Event::Listening, &successor())),
        action => follow(action),
    };
    assert!(pause >= Duration::from_secs(1) && pause <= Duration::from_millis(1200));
    assert!(!listening, "a polling period is not cut short by a listing");
    for _ in 0..3 {
        let ask = then(&mut c, Event::Rested, &successor());
        let round = asks_then_may_lead(&mut c, ask, &successor());
        assert!(matches!(round, Action::Round(Round::Acquire)), "{round:?}");
        let actions = c.step(held(), &successor(), &mut draws());
        assert!(
            !actions
                .iter()
                .any(|a| matches!(a, Action::Say(Note::Following))),
            "said once"
        );
        if let Action::Listen = actions.last().unwrap() {
            then(&mut c, Event::Listening, &successor());
        }
    }
}

/// A member that is not next in line reads the lease blob every watch period (5 to 6 s),
/// listening meanwhile for a listing that places it next in line; if one came between the
/// round and the pause, a polling period instead.
#[test]
fn a_watcher_reads_every_watch_period_and_listens_for_its_place() {
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &watcher());
    asks_then_may_lead(&mut c, ask, &watcher());
    // Its first round was an acquire: refused, a polling period.
    let (pause, _) = pause_after(&mut c, held(), &watcher());
    assert!(pause <= Duration::from_millis(1200));
    let ask = then(&mut c, Event::Rested, &watcher());
    let round = asks_then_may_lead(&mut c, ask, &watcher());
    assert!(matches!(round, Action::Round(Round::Watch)), "{round:?}");
    assert_eq!(c.state(), State::Watching);
    let (pause, listening) = pause_after(&mut c, Event::Round(Ok(Outcome::Look)), &watcher());
    assert!(pause >= Duration::from_secs(5) && pause <= Duration::from_secs(6));
    assert!(listening);
    let ask = then(&mut c, Event::Rested, &watcher());
    asks_then_may_lead(&mut c, ask, &watcher());
    let listen = then(&mut c, Event::Round(Ok(Outcome::Look)), &watcher());
    assert!(matches!(listen, Action::Listen));
    // Placed next in line meanwhile: it acquires at once.
    let ask = then(&mut c, Event::Listening, &successor());
    let round = asks_then_may_lead(&mut c, ask, &successor());
    assert!(matches!(round, Action::Round(Round::Acquire)), "{round:?}");
    // The listing itself cuts a watch period short, and the next round polls.
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &watcher());
    asks_then_may_lead(&mut c, ask, &watcher());
    pause_after(&mut c, held(), &watcher());
    let ask = then(&mut c, Event::Rested, &watcher());
    asks_then_may_lead(&mut c, ask, &watcher());
    then(&mut c, Event::Round(Ok(Outcome::Look)), &watcher());
    then(&mut c, Event::Listening, &watcher());
    let ask = then(&mut c, Event::Placed, &successor());
    let round = asks_then_may_lead(&mut c, ask, &successor());
    assert!(matches!(round, Action::Round(Round::Acquire)));
}

/// Refused by a holder it does not know, a member reads the lease blob at once (a pause of
/// zero), whatever its place: then it knows whether it is the successor.
#[test]
fn refused_by_an_unknown_holder_a_member_reads_at_once() {
    let unknown = Seen {
        leader_unknown: true,
        ..successor()
    };
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &unknown);
    asks_then_may_lead(&mut c, ask, &unknown);
    let (pause, _) = pause_after(&mut c, held(), &unknown);
    assert_eq!(pause, Duration::ZERO);
    let ask = then(&mut c, Event::Rested, &unknown);
    let round = asks_then_may_lead(&mut c, ask, &unknown);
    assert!(matches!(round, Action::Round(Round::Watch)), "{round:?}");
    // With slots, the pollers come from the listing: no read at once.
    let mut c = Candidate::new(timing(), 2);
    let ask = then(&mut c, Event::Start, &unknown);
    assert!(matches!(
        asks_then_may_lead(&mut c, ask, &unknown),
        Action::CheckCount
    ));
    then(&mut c, Event::Counted(Ok(false)), &unknown);
    let (pause, _) = pause_after(&mut c, held(), &unknown);
    assert!(pause >= Duration::from_secs(1));
}

/// A wake-up cuts the pause short and the next round is an acquire, after a wake-up
/// (what the epoch write needs beside it) with one slot; a poller's round of slots with
/// several.
#[test]
fn a_wake_up_acquires_at_once() {
    for (slots, expected) in [(1, Round::Handed), (3, Round::Slots)] {
        let mut c = Candidate::new(timing(), slots);
        let ask = then(&mut c, Event::Start, &watcher());
        let first = asks_then_may_lead(&mut c, ask, &watcher());
        if slots > 1 {
            assert!(matches!(first, Action::CheckCount));
            then(&mut c, Event::Counted(Ok(false)), &watcher());
        }
        pause_after(&mut c, held(), &watcher());
        let ask = then(&mut c, Event::Woken, &watcher());
        let round = asks_then_may_lead(&mut c, ask, &watcher());
        assert_eq!(
            match round {
                Action::Round(r) => r,
                other => panic!("{other:?}"),
            },
            expected
        );
        // Once: the round after is the place's again.
        pause_after(&mut c, held(), &watcher());
        let ask = then(&mut c, Event::Rested, &watcher());
        let round = asks_then_may_lead(&mut c, ask, &watcher());
        assert!(matches!(
            round,
            Action::Round(Round::Watch | Round::WatchSlots)
        ));
    }
}

/// An acquire without an answer in time is not sent again: the candidate sits it out, then
/// pauses as long as what it did calls for (on the lease clock), and only then goes on.
#[test]
fn an_acquire_without_an_answer_is_sat_out() {
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &successor());
    asks_then_may_lead(&mut c, ask, &successor());
    let late = Seen {
        late: true,
        ..successor()
    };
    let timed_out = Event::Round(Err(Fails(Failure::Transient)));
    let actions = c.step(timed_out, &late, &mut draws());
    assert!(matches!(actions[0], Action::Say(Note::NoAnswer(_))));
    assert!(matches!(actions[1], Action::SitOut));
    assert_eq!(c.state(), State::SittingOut);
    let pause = Duration::from_secs(11);
    let rest = then(&mut c, Event::SatOut(Some(pause)), &successor());
    assert!(matches!(rest, Action::Rest(Rest::For(p)) if p == pause));
    let ask = then(&mut c, Event::Rested, &successor());
    assert!(matches!(ask, Action::AskBody));
    // A stop while it is sat out ends the candidate.
    let mut c = Candidate::new(timing(), 1);
    assert!(matches!(then(&mut c, Event::Start, &late), Action::SitOut));
    let end = then(&mut c, Event::SatOut(None), &successor());
    assert!(matches!(end, Action::End(End::Stopped)));
}

/// A deleted blob is created again at once, its lock-delay waited out, and then acquired.
/// With slots, a round skips the slots under one instead.
#[test]
fn a_lock_delay_is_waited_out_then_acquired() {
    let until = Instant::now() + Duration::from_secs(16);
    let deleted = under_lock_delay(until);
    let mut c = Candidate::new(timing(), 1);
    assert!(matches!(
        then(&mut c, Event::Start, &deleted),
        Action::Recreate
    ));
    assert_eq!(c.state(), State::Recreating { until });
    let actions = c.step(Event::Recreated, &deleted, &mut draws());
    assert!(matches!(actions[0], Action::Say(Note::LockDelay(u)) if u == until));
    assert!(matches!(actions[1], Action::Rest(Rest::UntilAtMost(u, _)) if u == until));
    // A look at the blob every watch period while the delay runs; said once.
    assert!(matches!(
        then(&mut c, Event::Rested, &deleted),
        Action::Look
    ));
    assert!(matches!(
        then(&mut c, Event::Looked, &deleted),
        Action::Recreate
    ));
    let actions = c.step(Event::Recreated, &deleted, &mut draws());
    assert!(
        matches!(actions[..], [Action::Rest(Rest::UntilAtMost(u, _))] if u == until),
        "{actions:?}"
    );
    let ask = then(&mut c, Event::Rested, &watcher());
    let round = asks_then_may_lead(&mut c, ask, &watcher());
    assert!(matches!(round, Action::Round(Round::Acquire)), "{round:?}");
    let mut c = Candidate::new(timing(), 2);
    assert!(matches!(
        then(&mut c, Event::Start, &deleted),
        Action::AskBody
    ));
}

/// A blob deleted again during its lock-delay moves the delay on, and says so again.
#[test]
fn a_blob_deleted_again_moves_its_lock_delay_on() {
    let until = Instant::now() + Duration::from_secs(16);
    let deleted = under_lock_delay(until);
    let mut c = Candidate::new(timing(), 1);
    then(&mut c, Event::Start, &deleted);
    c.step(Event::Recreated, &deleted, &mut draws());
    let later = until + Duration::from_secs(6);
    let again = under_lock_delay(later);
    assert!(matches!(then(&mut c, Event::Rested, &again), Action::Look));
    assert!(matches!(
        then(&mut c, Event::Looked, &again),
        Action::Recreate
    ));
    let actions = c.step(Event::Recreated, &again, &mut draws());
    assert!(matches!(actions[0], Action::Say(Note::LockDelay(u)) if u == later));
    let ask = then(&mut c, Event::Rested, &watcher());
    let round = asks_then_may_lead(&mut c, ask, &watcher());
    assert!(matches!(round, Action::Round(Round::Acquire)), "{round:?}");
}

/// A body that could not start keeps the candidate out for a polling period: winning spends
/// an epoch.
#[test]
fn a_body_that_could_not_start_keeps_it_out() {
    let mut c = Candidate::new(timing(), 1);
    then(&mut c, Event::Start, &successor());
    let rest = then(&mut c, Event::MayLead(false), &successor());
    assert!(
        matches!(rest, Action::Rest(Rest::For(p)) if p >= Duration::from_secs(1) && p <= Duration::from_millis(1200))
    );
    assert_eq!(c.state(), State::Barred);
    assert!(matches!(
        then(&mut c, Event::Rested, &successor()),
        Action::AskBody
    ));
}

/// With slots, the group's count is read before the first acquire; an instance that counts
/// otherwise looks again every minute and never acquires; a missing blob counts nothing.
#[test]
fn with_slots_the_count_is_read_first() {
    let mut c = Candidate::new(timing(), 3);
    let ask = then(&mut c, Event::Start, &successor());
    assert!(matches!(
        asks_then_may_lead(&mut c, ask, &successor()),
        Action::CheckCount
    ));
    let rest = then(&mut c, Event::Counted(Ok(true)), &successor());
    assert!(matches!(rest, Action::Rest(Rest::For(p)) if p == Pace::MISMATCH_RECHECK));
    assert_eq!(c.state(), State::Mismatched);
    let mismatched = Seen {
        mismatched: true,
        ..successor()
    };
    let ask = then(&mut c, Event::Rested, &mismatched);
    assert!(matches!(
        asks_then_may_lead(&mut c, ask, &mismatched),
        Action::CheckCount
    ));
    let missing = Fails(Failure::Missing);
    let actions = step(&mut c, Event::Counted(Err(missing)), &successor());
    assert!(matches!(actions[0], Action::Missing));
    assert!(matches!(actions[1], Action::Round(Round::Slots)));
    // Read once: the next rounds do not read it again while the counts agree.
    pause_after(&mut c, held(), &successor());
    let ask = then(&mut c, Event::Rested, &successor());
    assert!(matches!(
        asks_then_may_lead(&mut c, ask, &successor()),
        Action::Round(Round::Slots)
    ));
    // An unreadable count is read again after a backoff.
    let mut c = Candidate::new(timing(), 3);
    let ask = then(&mut c, Event::Start, &successor());
    asks_then_may_lead(&mut c, ask, &successor());
    let rest = then(&mut c, Event::Counted(Err(transient())), &successor());
    assert!(matches!(rest, Action::Rest(Rest::For(_))));
    assert_eq!(c.state(), State::Unread);
}

/// Failures back off from `acquire_interval` up to 10 s; refused credentials end the
/// campaign only before storage ever accepted them.
#[test]
fn failures_back_off_and_refused_credentials_end_it_only_at_first() {
    let denied = || Fails(Failure::Denied);
    let unproven = Seen {
        authorized: false,
        ..successor()
    };
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &unproven);
    asks_then_may_lead(&mut c, ask, &unproven);
    let end = then(&mut c, Event::Round(Err(denied())), &unproven);
    assert!(matches!(end, Action::End(End::Denied(_))));
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &successor());
    asks_then_may_lead(&mut c, ask, &successor());
    let mut pauses = Vec::new();
    for _ in 0..8 {
        let actions = c.step(Event::Round(Err(denied())), &successor(), &mut draws());
        assert!(matches!(actions[0], Action::Say(Note::Retrying(..))));
        pauses.push(match actions.last().unwrap() {
            Action::Listen => follow(&then(&mut c, Event::Listening, &watcher())).0,
            action => follow(action).0,
        });
        let ask = then(&mut c, Event::Rested, &successor());
        asks_then_may_lead(&mut c, ask, &successor());
    }
    assert!(pauses[0] >= Duration::from_millis(500) && pauses[0] <= Duration::from_secs(1));
    assert!(
        pauses.iter().all(|p| *p <= Duration::from_secs(10)),
        "{pauses:?}"
    );
    assert!(pauses[7] >= Duration::from_secs(5), "{pauses:?}");
}

/// `stop` ends a candidate in every pause.
#[test]
fn a_stop_ends_every_pause() {
    let mut c = Candidate::new(timing(), 1);
    let ask = then(&mut c, Event::Start, &successor());
    asks_then_may_lead(&mut c, ask, &successor());
    pause_after(&mut c, held(), &successor());
    assert_eq!(c.state(), State::Following);
    let end = then(&mut c, Event::Stopped, &successor());
    assert!(matches!(end, Action::End(End::Stopped)));
    let mut c = Candidate::new(timing(), 1);
    then(&mut c, Event::Start, &successor());
    then(&mut c, Event::MayLead(false), &successor());
    let end = then(&mut c, Event::Stopped, &successor());
    assert!(matches!(end, Action::End(End::Stopped)));
}

/// The place is said when it changes: the first time as where the member begins, after that
/// as a move (a member that was next in line and is no more says so as loudly as it said it
/// was).
#[test]
fn a_place_is_said_once_and_then_as_a_move() {
    let places = |c: &mut Candidate<Instant>, event: Event, seen: &Seen| -> Vec<(Place, bool)> {
        (c.step(event, seen, &mut draws()).into_iter())
            .filter_map(|a| match a {
                Action::Say(Note::Place { place, moved }) => Some((place, moved)),
                _ => None,
            })
            .collect()
    };
    let mut c = Candidate::new(timing(), 1);
    assert!(places(&mut c, Event::Start, &successor()).is_empty());
    assert_eq!(
        places(&mut c, Event::MayLead(true), &successor()),
        [(Place::Poll, false)]
    );
    pause_after(&mut c, held(), &watcher());
    places(&mut c, Event::Rested, &watcher());
    assert_eq!(
        places(&mut c, Event::MayLead(true), &watcher()),
        [(Place::Watch, true)]
    );
}
