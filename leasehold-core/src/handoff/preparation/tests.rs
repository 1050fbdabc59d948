//! What a handoff prepares while the body stops: each event in, the actions out.

use super::*;
use std::time::{Duration, Instant};

/// Members are names, notices numbers, errors text.
type P = Preparation<&'static str, u32, &'static str>;
type A = Action<Instant, &'static str, u32, &'static str>;

/// The renew task's tenure and the line, as the shell would answer them; and what was asked.
struct Facts {
    held_until: Option<Instant>,
    successor: Option<&'static str>,
    asked: Vec<&'static str>,
}

impl Facts {
    fn held(until: Instant) -> Self {
        Self {
            held_until: Some(until),
            successor: Some("b"),
            asked: Vec::new(),
        }
    }
}

impl Grounds<Instant, &'static str> for Facts {
    fn held_until(&mut self) -> Option<Instant> {
        self.asked.push("held_until");
        self.held_until
    }

    fn successor(&mut self) -> Option<&'static str> {
        self.asked.push("successor");
        self.successor
    }
}

const MUTANT: Mutants = Mutants {
    change_before_gone: true,
};

fn timing() -> Timing {
    Timing::default()
}

fn begun(slots: u32, mutants: Mutants) -> P {
    let (p, first) = P::begin::<Instant>(&timing(), slots, mutants);
    assert_eq!(first, vec![A::AwaitStop]);
    p
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn one_slot_departs_into_the_stop_and_chooses_nothing() {
    let t0 = Instant::now();
    let mut facts = Facts::held(t0 + ms(60_000));
    let mut p = begun(1, Mutants::default());
    assert!(p.departs_on_a_timer());
    assert_eq!(p.step(t0, Event::Stopped, &mut facts), vec![A::Done(None)]);
    assert_eq!(p.depart_at(t0), t0 + Pace::DEPART_AFTER);
    assert!(p.departure_due());
    // Neither the tenure nor the line is asked about.
    assert!(facts.asked.is_empty());
    assert_eq!(p.take(true), Take::Await);
}

#[test]
fn one_slot_body_gone_sooner_calls_the_departure_off() {
    let t0 = Instant::now();
    let mut facts = Facts::held(t0 + ms(60_000));
    let mut p = begun(1, Mutants::default());
    p.step(t0, Event::Stopped, &mut facts);
    assert_eq!(p.take(true), Take::Await);
    // The confirmation departs instead.
    assert!(!p.departure_due());
}

#[test]
fn no_stop_requested_calls_it_off() {
    for slots in [1, 3] {
        let mut p = begun(slots, Mutants::default());
        assert_eq!(p.take(false), Take::CallOff);
    }
}

#[test]
fn a_stop_not_yet_seen_is_waited_for() {
    let t0 = Instant::now();
    let mut facts = Facts::held(t0 + ms(60_000));
    // With slots the choice is made all the same, and waited for.
    let mut p = begun(3, Mutants::default());
    assert!(!p.departs_on_a_timer());
    assert_eq!(p.take(true), Take::Await);
    let limit = t0 + timing().request_timeout();
    let chose = p.step(t0, Event::Stopped, &mut facts);
    assert_eq!(chose, vec![A::Choose { limit }]);
}

#[test]
fn slots_choose_within_the_kill_deadline_then_depart() {
    let t0 = Instant::now();
    let timeout = Pace::new(&timing()).request_timeout();
    for (kill_at, limit) in [(t0 + ms(60_000), t0 + timeout), (t0 + ms(5), t0 + ms(5))] {
        let mut facts = Facts::held(kill_at);
        let mut p = begun(3, Mutants::default());
        let chose = p.step(t0, Event::Stopped, &mut facts);
        assert_eq!(chose, vec![A::Choose { limit }]);
        assert_eq!(facts.asked, vec!["held_until"]);
        let at = t0 + ms(40);
        let choice = Choice::To("b", Some(8));
        let done = p.step(at, Event::Chosen(choice.clone()), &mut facts);
        assert_eq!(done, vec![A::Depart, A::Done(Some((at, choice)))]);
    }
}

#[test]
fn slots_choose_nothing_once_the_lease_is_not_held() {
    let t0 = Instant::now();
    let mut facts = Facts::held(t0);
    facts.held_until = None;
    let mut p = begun(3, Mutants::default());
    assert_eq!(p.step(t0, Event::Stopped, &mut facts), vec![A::Done(None)]);
}

#[test]
fn slots_depart_whatever_the_choice() {
    let t0 = Instant::now();
    for choice in [
        Choice::Nobody,
        Choice::Unlisted("down"),
        Choice::Lost("lost"),
    ] {
        let mut facts = Facts::held(t0 + ms(60_000));
        let mut p = begun(3, MUTANT);
        p.step(t0, Event::Stopped, &mut facts);
        // The mutant changes only to a member chosen.
        let done = p.step(t0, Event::Chosen(choice.clone()), &mut facts);
        assert_eq!(done, vec![A::Depart, A::Done(Some((t0, choice)))]);
    }
}

#[test]
fn the_mutant_hands_on_to_the_member_chosen() {
    let t0 = Instant::now();
    let mut facts = Facts::held(t0 + ms(60_000));
    let mut p = begun(3, MUTANT);
    p.step(t0, Event::Stopped, &mut facts);
    let choice = Choice::To("c", None);
    let changing = p.step(t0 + ms(10), Event::Chosen(choice.clone()), &mut facts);
    assert_eq!(changing, vec![A::Depart, A::Change("c")]);
    assert_eq!(p.take(true), Take::Await);
    let at = t0 + ms(30);
    let done = p.step(at, Event::Changed, &mut facts);
    assert_eq!(done, vec![A::Done(Some((at, choice)))]);
}

#[test]
fn the_mutant_hands_on_to_the_lines_successor_with_one_slot() {
    let t0 = Instant::now();
    let mut facts = Facts::held(t0 + ms(60_000));
    let mut p = begun(1, MUTANT);
    let changing = p.step(t0, Event::Stopped, &mut facts);
    assert_eq!(changing, vec![A::Change("b")]);
    assert_eq!(facts.asked, vec!["successor"]);
    // The departure's timer runs beside the change, from the stop.
    assert_eq!(p.depart_at(t0), t0 + Pace::DEPART_AFTER);
    assert!(p.departure_due());
    assert_eq!(p.take(true), Take::Await);
    let done = p.step(t0 + ms(30), Event::Changed, &mut facts);
    assert_eq!(done, vec![A::Done(None)]);
    // Nobody in line: nothing to change to.
    let mut facts = Facts::held(t0 + ms(60_000));
    facts.successor = None;
    let mut p = begun(1, MUTANT);
    assert_eq!(p.step(t0, Event::Stopped, &mut facts), vec![A::Done(None)]);
}

#[test]
#[should_panic(expected = "the preparation waits for the stop")]
fn an_event_out_of_turn_is_the_shells_fault() {
    let mut facts = Facts::held(Instant::now());
    let mut p = begun(3, Mutants::default());
    p.step(Instant::now(), Event::Changed, &mut facts);
}
