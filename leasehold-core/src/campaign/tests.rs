//! The campaign's composition on virtual instants: the candidate's round, its attempt's
//! requests under their tags, answers out of order, an acquire without an answer in time, a
//! stop that waits for the attempt.

use super::*;
use crate::attempt::{self, Delay};
use crate::candidate::{Outcome, Place, Round, Seen};
use crate::epoch;
use crate::exchange::{Answer, Send, Tag};
use crate::failure::Failure;
use crate::late::Settled;
use crate::slots::{PollGrounds, WaitGrounds};
use crate::testing::Fails;
use crate::timing::Timing;
use crate::watch::{self, BlobWatch, Read};
use std::time::{Duration, Instant};

/// The member around a campaign: what it answers, and what it was told, in order.
#[derive(Default)]
struct Member {
    reserved: Option<u64>,
    /// A member of a line, and its place in it (else one without a line, which polls).
    line: Option<Place>,
    told: Vec<String>,
}

impl attempt::Grounds for Member {
    fn counts_otherwise(&mut self) -> bool {
        false
    }
    fn pass_over(&mut self) {}
    fn delayed(&mut self) -> bool {
        false
    }
    fn shutting_down(&self) -> bool {
        false
    }
    fn wall_ms(&mut self) -> u64 {
        1_000
    }
}

impl watch::Grounds<Instant, u32> for Member {
    fn is_successor(&mut self) -> bool {
        false
    }
    fn looked(&mut self) {}
    fn counts_otherwise(&mut self) -> bool {
        false
    }
    fn read(&mut self, _: &mut BlobWatch<Instant, u32>, _: Instant) -> Read {
        Read::Same
    }
    fn has_ahead(&mut self) -> bool {
        false
    }
    fn ahead_advertises(&mut self) -> bool {
        false
    }
    fn read_unheard(&mut self) -> bool {
        false
    }
}

impl PollGrounds for Member {
    fn order(&mut self, _: bool) -> Vec<u32> {
        vec![0, 1]
    }
    fn delayed(&mut self, _: u32) -> bool {
        false
    }
    fn look_due(&mut self, _: u32) -> bool {
        false
    }
    fn mismatched(&mut self) -> bool {
        false
    }
}

impl WaitGrounds<&'static str, u32> for Member {
    fn predecessor(&mut self) -> Option<&'static str> {
        None
    }
    fn listed(&mut self, _: &&'static str) -> Option<u32> {
        None
    }
    fn place(&mut self) -> Place {
        Place::Watch
    }
    fn members(&mut self) -> usize {
        0
    }
}

impl Grounds<Instant, &'static str, u32, u32> for Member {
    fn seen(&self) -> Seen<Instant> {
        Seen {
            late: false,
            lock_delay: None,
            mismatched: false,
            authorized: true,
            member: self.line.is_some(),
            in_line: self.line.is_some(),
            place: self.line.unwrap_or(Place::Poll),
            leader_unknown: false,
        }
    }
    fn draw(&mut self) -> f64 {
        0.5
    }
    fn begin(&mut self, slot: u32) {
        self.told.push(format!("begin {slot}"));
    }
    fn reserved(&mut self) -> Option<u64> {
        self.reserved.take()
    }
    fn delay(&mut self, slot: u32, delay: Delay) {
        self.told.push(format!("{delay:?} {slot}"));
    }
    fn authorized(&mut self) {
        self.told.push("authorized".into());
    }
    fn late_sent(&self) -> Option<Instant> {
        None
    }
    fn epoch_seen(&self) -> Option<u64> {
        None
    }
}

type C = Campaign<Instant, &'static str, u32, u32, Fails>;
type Out = Output<Instant, &'static str, Fails>;
type In = Input<Instant, u32, Fails>;

fn settings() -> Settings {
    Settings {
        timing: Timing::default(),
        slots: 1,
        create_if_missing: true,
        set: crate::quorum::ReplicaSet::one(),
        mutants: Mutants::default(),
    }
}

/// The requests among `out`, with their tags.
fn sent(out: &[Out]) -> Vec<(Tag, attempt::Request<Instant>)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Send(Send {
                tag,
                request: Request::Attempt { request, .. },
            }) => Some((*tag, *request)),
            _ => None,
        })
        .collect()
}

fn answer(tag: Tag, sent: Instant, event: attempt::Event<Fails>) -> In {
    Input::Answer(Answer {
        tag,
        sent,
        answer: Reply::Attempt(event),
    })
}

/// A campaign begun, the body willing: the first round's acquire is on its way.
fn begun(c: &mut C, m: &mut Member, now: Instant) -> Vec<Out> {
    let asked = c.handle(now, Input::Start, m);
    assert!(matches!(asked[..], [Output::AskBody]), "{asked:?}");
    c.handle(now, Input::MayLead(true), m)
}

/// The first round acquires, reads and writes the epoch, each request under its own tag and
/// each answer awaited in turn (with a timer only for the acquire's); then the term is won.
#[test]
fn a_campaign_wins_by_its_attempts_requests_in_turn() {
    let (mut c, mut m, now) = (C::new(settings()), Member::default(), Instant::now());
    let rt = Timing::default().request_timeout();
    let acquire = sent(&begun(&mut c, &mut m, now));
    assert_eq!(acquire.len(), 1);
    let (tag, request) = acquire[0];
    assert_eq!(request, attempt::Request::Acquire);
    let waits = c.awaits();
    assert_eq!(waits.waiting.answers, [tag]);
    assert_eq!(waits.waiting.until, Some(now + rt));
    assert!(!waits.stop, "stop does not cut an attempt");
    let read = sent(&c.handle(
        now,
        answer(tag, now, attempt::Event::Acquired(Ok(()))),
        &mut m,
    ));
    let (read_tag, _) = read[0];
    assert_eq!(c.awaits().waiting.until, None);
    let write = c.handle(
        now,
        answer(read_tag, now, attempt::Event::Read(Ok(Some(7)))),
        &mut m,
    );
    let (write_tag, request) = sent(&write)[0];
    let epoch = epoch::next(Some(7), 1_000).unwrap();
    assert!(matches!(request, attempt::Request::WriteEpoch { epoch: e, .. } if e == epoch));
    let end = c.handle(
        now,
        answer(write_tag, now, attempt::Event::Written(Ok(()))),
        &mut m,
    );
    let won = end.iter().find_map(|o| match o {
        Output::End(End::Won(won)) => Some(won.clone()),
        _ => None,
    });
    assert_eq!(
        won.map(|w| (w.slot, w.epoch, w.reserved)),
        Some((0, epoch, false))
    );
    assert!(c.is_over());
    assert!(
        matches!(end[0], Output::SpendId),
        "the lease id is spent: {end:?}"
    );
    assert_eq!(m.told, ["begin 0", "Won 0"]);
}

/// After a wake-up with a reserved epoch, the write goes beside the acquire: its answer,
/// come first, is kept until the acquire's is in, then taken at once.
#[test]
fn an_answer_that_comes_before_it_is_awaited_is_kept() {
    let (mut c, mut m, now) = (C::new(settings()), Member::default(), Instant::now());
    let rt = Timing::default().request_timeout();
    let acquire = sent(&begun(&mut c, &mut m, now));
    // Refused: someone holds it; the candidate follows, and a wake-up ends the pause.
    let held = Fails(Failure::Held);
    let follow = c.handle(
        now,
        answer(acquire[0].0, now, attempt::Event::Acquired(Err(held))),
        &mut m,
    );
    assert!(matches!(follow[0], Output::Rounded(None)), "{follow:?}");
    assert!(c.awaits().woken && c.awaits().stop);
    m.reserved = Some(42);
    c.handle(now, Input::Woken, &mut m);
    let handed = sent(&c.handle(now, Input::MayLead(true), &mut m));
    let [(write, w), (acq, a)] = handed[..] else {
        panic!("{handed:?}")
    };
    assert_eq!(
        w,
        attempt::Request::WriteReserved {
            epoch: 42,
            until: now + rt
        }
    );
    assert_eq!(a, attempt::Request::Acquire);
    assert_eq!(
        c.awaits().waiting.answers,
        [acq],
        "the acquire's answer first"
    );
    let kept = c.handle(
        now,
        answer(write, now, attempt::Event::Written(Ok(()))),
        &mut m,
    );
    assert!(kept.is_empty(), "kept, not taken: {kept:?}");
    let end = c.handle(
        now,
        answer(acq, now, attempt::Event::Acquired(Ok(()))),
        &mut m,
    );
    assert!(
        end.iter()
            .any(|o| matches!(o, Output::End(End::Won(w)) if w.epoch == 42 && w.reserved)),
        "{end:?}"
    );
}

/// An acquire without an answer in time is left to settle (the answer beside it forgotten),
/// sat out, and the next attempt comes after the pause that settling called for.
#[test]
fn an_acquire_without_an_answer_is_sat_out_then_tried_again() {
    let (mut c, mut m, now) = (C::new(settings()), Member::default(), Instant::now());
    let acquire = sent(&begun(&mut c, &mut m, now));
    let at = c.awaits().waiting.until.unwrap();
    let late = c.handle(at, Input::Timer, &mut m);
    assert!(
        matches!(late[0], Output::SpendId),
        "its lease id is spent: {late:?}"
    );
    let left = matches!(late[1], Output::Late(tag) if tag == acquire[0].0);
    assert!(left, "left to settle: {late:?}");
    assert!(matches!(late.last(), Some(Output::SitOut)), "{late:?}");
    let waits = c.awaits();
    assert!(waits.settled && waits.stop, "{waits:?}");
    let expired = now + Timing::default().duration;
    assert_eq!(
        waits.waiting.until,
        Some(expired),
        "at most until its lease expired"
    );
    // Refused: a polling period (drawn now) before the next attempt.
    let refused = c.handle(at, Input::Settled(Settled::NotTaken), &mut m);
    assert!(refused.is_empty(), "{refused:?}");
    let pause = crate::Pace::new(&Timing::default()).poll(0.5);
    assert_eq!(c.awaits().waiting.until, Some(at + pause));
    let asked = c.handle(at + pause, Input::Timer, &mut m);
    assert!(matches!(asked[..], [Output::AskBody]), "{asked:?}");
    let again = sent(&c.handle(at + pause, Input::MayLead(true), &mut m));
    assert_eq!(again.len(), 1);
    assert_ne!(again[0].0, acquire[0].0, "a tag of its own");
}

/// A stop during an attempt does not cut it: the attempt goes on, and the pause after it
/// ends the campaign at once.
#[test]
fn a_stop_waits_for_the_attempt_and_ends_the_next_pause() {
    let (mut c, mut m, now) = (C::new(settings()), Member::default(), Instant::now());
    let acquire = sent(&begun(&mut c, &mut m, now));
    assert!(c.handle(now, Input::Stop, &mut m).is_empty());
    assert_eq!(c.awaits().waiting.answers, [acquire[0].0], "still awaited");
    let held = Fails(Failure::Held);
    let end = c.handle(
        now,
        answer(acquire[0].0, now, attempt::Event::Acquired(Err(held))),
        &mut m,
    );
    assert!(
        matches!(end.last(), Some(Output::End(End::Stopped))),
        "{end:?}"
    );
}

/// A campaign of one round on slots tries them in turn and ends with what the round came to.
#[test]
fn one_round_of_slots_ends_with_the_round() {
    let s = Settings {
        slots: 2,
        ..settings()
    };
    let (mut c, mut m, now) = (
        C::one_round(s, Round::Slots),
        Member::default(),
        Instant::now(),
    );
    let held = || attempt::Event::Acquired(Err(Fails(Failure::Held)));
    let first = c.handle(now, Input::Start, &mut m);
    let second = c.handle(now, answer(sent(&first)[0].0, now, held()), &mut m);
    let end = c.handle(now, answer(sent(&second)[0].0, now, held()), &mut m);
    assert!(
        matches!(end.last(), Some(Output::End(End::Round(Ok(Outcome::Held))))),
        "{end:?}"
    );
    assert_eq!(m.told, ["begin 0", "Led 0", "begin 1", "Led 1"]);
}

/// A member not next in line reads the lease blob under a tag of its own; nothing new, the
/// watch period after it listens for a listing that places it, and a wake-up ends it too.
#[test]
fn a_watchers_round_then_a_watch_period_that_a_placement_ends() {
    let (mut c, now) = (C::new(settings()), Instant::now());
    let mut m = Member {
        line: Some(Place::Watch),
        ..Member::default()
    };
    let acquire = sent(&begun(&mut c, &mut m, now));
    let held = attempt::Event::Acquired(Err(Fails(Failure::Held)));
    c.handle(now, answer(acquire[0].0, now, held), &mut m);
    let pause = c.awaits().waiting.until.expect("a polling period");
    assert!(
        !c.awaits().placed,
        "a polling period is not cut short by a listing"
    );
    c.handle(pause, Input::Timer, &mut m);
    let read = c.handle(pause, Input::MayLead(true), &mut m);
    let tag = match read.last() {
        Some(Output::Send(Send {
            tag,
            request: Request::Watch(watch::Request::ReadBlob { .. }),
        })) => *tag,
        _ => panic!("{read:?}"),
    };
    let same = Input::Answer(Answer {
        tag,
        sent: pause,
        answer: Reply::Watch(watch::Event::BlobRead(Ok(()))),
    });
    let listen = c.handle(pause, same, &mut m);
    assert!(matches!(listen.last(), Some(Output::Listen)), "{listen:?}");
    assert!(m.told.contains(&"authorized".to_owned()));
    assert!(c.handle(pause, Input::Listening, &mut m).is_empty());
    let waits = c.awaits();
    assert!(waits.placed && waits.woken && waits.stop, "{waits:?}");
    let asked = c.handle(pause, Input::Placed, &mut m);
    assert!(matches!(asked[..], [Output::AskBody]), "{asked:?}");
}

/// The mutant `trust-the-notice`: a woken member reads the blob, and a notice naming it is a
/// term at once, with the next epoch and a deadline from the read's send, no acquire of its
/// own.
#[test]
fn the_mutant_trust_the_notice_leads_on_a_read() {
    let mut s = settings();
    s.mutants.trust_the_notice = true;
    let (mut c, mut m, now) = (C::new(s), Member::default(), Instant::now());
    let acquire = sent(&begun(&mut c, &mut m, now));
    let held = attempt::Event::Acquired(Err(Fails(Failure::Held)));
    c.handle(now, answer(acquire[0].0, now, held), &mut m);
    c.handle(now, Input::Woken, &mut m);
    let read = c.handle(now, Input::MayLead(true), &mut m);
    let tag = match &read[..] {
        [
            Output::Send(Send {
                tag,
                request: Request::Notice,
            }),
        ] => *tag,
        _ => panic!("{read:?}"),
    };
    let later = now + Duration::from_secs(1);
    let named = Input::Answer(Answer {
        tag,
        sent: now,
        answer: Reply::Notice(Ok(Some(Some(7)))),
    });
    let end = c.handle(later, named, &mut m);
    let Some(Output::End(End::Won(won))) = end.last() else {
        panic!("{end:?}")
    };
    assert_eq!((won.epoch, won.deadline.sent), (8, now));
}

/// A stop while a late acquire is sat out waits `2R` more for it to settle (a late success is
/// released then), and then ends the campaign, saying so.
#[test]
fn a_stop_while_sitting_out_gives_the_late_acquire_a_grace() {
    let (mut c, mut m, now) = (C::new(settings()), Member::default(), Instant::now());
    begun(&mut c, &mut m, now);
    let at = c.awaits().waiting.until.unwrap();
    c.handle(at, Input::Timer, &mut m);
    assert!(c.handle(at, Input::Stop, &mut m).is_empty());
    let waits = c.awaits();
    let grace = at + 2 * Timing::default().request_timeout();
    assert!(waits.settled && !waits.stop, "{waits:?}");
    assert_eq!(waits.waiting.until, Some(grace));
    let end = c.handle(grace, Input::Timer, &mut m);
    assert!(matches!(end[0], Output::Say(Say::Unsettled(_))), "{end:?}");
    assert!(
        matches!(end.last(), Some(Output::End(End::Stopped))),
        "{end:?}"
    );
}
