//! The choice's transitions: each event in, the actions out.

use super::*;
use crate::failure::Failure;

/// A store error of the tests: only its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fails(Failure);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
}

/// Members are names; a notice is the name it carries.
type Choosing = super::Choosing<&'static str, &'static str>;
type Action = super::Action<&'static str, &'static str, Fails>;
type Event = super::Event<&'static str, &'static str, Fails>;

const LOST: Fails = Fails(Failure::LeaseLost);
const SLOW: Fails = Fails(Failure::Transient);

fn begin(guess: Option<&'static str>) -> (Choosing, Vec<Action>) {
    Choosing::begin::<Fails>(guess)
}

/// A choice that guessed "b", told what its notice and the read of b's record came to.
fn guessed_b(
    notice: Result<&'static str, Fails>,
    fresh: Option<&'static str>,
) -> (Choosing, Vec<Action>) {
    let (mut c, first) = begin(Some("b"));
    assert_eq!(first, vec![Action::NoticeAndRead("b")]);
    let then = c.step(Event::NoticedAndRead { notice, fresh });
    (c, then)
}

#[test]
fn a_guess_confirmed_by_its_record_and_its_notice_is_chosen_without_a_listing() {
    let (_, then) = guessed_b(Ok("b"), Some("b"));
    assert_eq!(
        then,
        vec![
            Action::Refresh("b"),
            Action::Done(Choice::To("b", Some("b")))
        ]
    );
}

#[test]
fn a_line_that_knows_nobody_is_listed_first() {
    let (mut c, first) = begin(None);
    assert_eq!(first, vec![Action::List]);
    assert_eq!(
        c.step(Event::Listed(Ok(None))),
        vec![Action::Done(Choice::Nobody)]
    );
}

#[test]
fn a_guess_whose_record_no_longer_shows_it_the_successor_is_listed_and_the_listing_noticed() {
    let (mut c, then) = guessed_b(Ok("b"), None);
    assert_eq!(
        then,
        vec![Action::Say(Note::NotConfirmed("b")), Action::List]
    );
    assert_eq!(c.noticed(), Some(&"b"));
    // The listing shows another successor: a notice names it.
    assert_eq!(
        c.step(Event::Listed(Ok(Some(("c", false))))),
        vec![Action::Notice("c")]
    );
    assert_eq!(
        c.step(Event::Noticed(Ok("c"))),
        vec![Action::Done(Choice::To("c", Some("c")))]
    );
}

#[test]
fn a_listing_whose_successor_the_notice_already_names_writes_no_second_one() {
    // The notice was written, but the read got no answer.
    let (mut c, _) = guessed_b(Ok("b"), None);
    assert_eq!(
        c.step(Event::Listed(Ok(Some(("b", true))))),
        vec![Action::Done(Choice::To("b", Some("b")))]
    );
}

#[test]
fn a_notice_not_written_is_not_a_confirmation_even_with_the_record_read() {
    let (_, then) = guessed_b(Err(SLOW), Some("b"));
    assert_eq!(
        then,
        vec![
            Action::Say(Note::NoticeFailed(SLOW)),
            Action::Say(Note::NotConfirmed("b")),
            Action::List
        ]
    );
}

#[test]
fn a_notice_refused_for_the_lease_ends_the_choice_at_once() {
    let (_, then) = guessed_b(Err(LOST), Some("b"));
    assert_eq!(then, vec![Action::Done(Choice::Lost(LOST))]);
    let (mut c, _) = begin(None);
    c.step(Event::Listed(Ok(Some(("c", false)))));
    assert_eq!(
        c.step(Event::Noticed(Err(LOST))),
        vec![Action::Done(Choice::Lost(LOST))]
    );
}

#[test]
fn the_listing_successor_is_handed_the_lease_even_when_its_notice_fails() {
    let (mut c, _) = begin(None);
    c.step(Event::Listed(Ok(Some(("c", false)))));
    assert_eq!(
        c.step(Event::Noticed(Err(SLOW))),
        vec![
            Action::Say(Note::HandingOverWithoutNotice(SLOW)),
            Action::Done(Choice::To("c", None))
        ]
    );
}

#[test]
fn members_that_cannot_be_listed_end_the_choice() {
    let (mut c, _) = begin(None);
    assert_eq!(
        c.step(Event::Listed(Err(SLOW))),
        vec![Action::Done(Choice::Unlisted(SLOW))]
    );
}

#[test]
#[should_panic(expected = "the choice waits for")]
fn an_event_that_answers_nothing_asked_is_a_fault_of_the_shell() {
    let (mut c, _) = begin(None);
    c.step(Event::Noticed(Ok("c")));
}

#[test]
fn a_change_lost_refused_or_unanswered_says_which() {
    assert_eq!(Changed::of(Ok::<(), Fails>(())), Changed::Handed);
    assert_eq!(Changed::of(Err(LOST)), Changed::Lost(LOST));
    for kind in [Failure::Missing, Failure::Held] {
        assert_eq!(Changed::of(Err(Fails(kind))), Changed::Lost(Fails(kind)));
    }
    assert_eq!(Changed::of(Err(SLOW)), Changed::Unanswered(SLOW));
}

fn handing(ending: Ending, slots: u32, prepared: bool) -> Handing<&'static str> {
    Handing {
        ending,
        named: false,
        slots,
        prepared,
        guess: Some("b"),
    }
}

#[test]
fn with_one_slot_a_stop_or_an_end_by_itself_hands_over_unannounced() {
    for ending in [Ending::ByItself, Ending::Stop] {
        assert_eq!(
            handing(ending, 1, false).begin(),
            Handover::Unannounced("b")
        );
    }
    // With slots, only a body that ended by itself (nothing was prepared for it).
    assert_eq!(
        handing(Ending::ByItself, 3, false).begin(),
        Handover::Unannounced("b")
    );
    assert_eq!(
        handing(Ending::Stop, 3, false).begin(),
        Handover::Choose { standby: None }
    );
}

#[test]
fn a_line_not_listed_this_term_or_a_named_member_is_chosen_for_with_a_notice() {
    let unlisted = Handing {
        guess: None,
        ..handing(Ending::ByItself, 1, false)
    };
    assert_eq!(unlisted.begin(), Handover::Choose { standby: None });
    let named = Handing {
        named: true,
        ..handing(Ending::ByItself, 1, false)
    };
    assert_eq!(named.begin(), Handover::Choose { standby: None });
}

#[test]
fn a_prepared_choice_serves_unless_the_record_must_say_a_cooldown_first() {
    assert_eq!(handing(Ending::Stop, 3, true).begin(), Handover::Prepared);
    assert_eq!(
        handing(Ending::Preempted, 1, true).begin(),
        Handover::Prepared
    );
    let cooldown = std::time::Duration::from_secs(30);
    for (slots, prepared) in [(3, true), (1, false)] {
        assert_eq!(
            handing(Ending::StandAside(cooldown), slots, prepared).begin(),
            Handover::Choose {
                standby: Some(cooldown)
            }
        );
    }
}

/// What the line answers a [`Chooser`](super::Chooser) in these tests.
struct Line {
    successor: Option<&'static str>,
    still: bool,
    names: bool,
}

impl Grounds<&'static str, &'static str> for Line {
    fn successor(&mut self) -> Option<&'static str> {
        self.successor
    }
    fn still_successor(&mut self, _: &&'static str, _: &&'static str) -> bool {
        self.still
    }
    fn names(&mut self, notice: &&'static str, next: &&'static str) -> bool {
        self.names && notice == next
    }
}

type Chooser = super::Chooser<&'static str, &'static str, Fails>;
type Output = super::Output<&'static str, &'static str, Fails>;
type Reply = super::Reply<&'static str, &'static str, Fails>;

/// The requests among `out`.
fn sends(out: &[Output]) -> Vec<(Tag, Request<&'static str>)> {
    (out.iter())
        .filter_map(|o| match o {
            Output::Send(s) => Some((s.tag, s.request.clone())),
            _ => None,
        })
        .collect()
}

fn answer(tag: Tag, reply: Reply) -> Answer<u32, Reply> {
    Answer {
        tag,
        sent: 0,
        answer: reply,
    }
}

/// A guess goes out as its notice and the read of its record side by side; the choice waits
/// for both, in whichever order they come, and takes the fresh record when the line says it
/// still shows the successor.
#[test]
fn a_chooser_sends_the_notice_and_the_read_side_by_side() {
    let mut line = Line {
        successor: Some("b"),
        still: true,
        names: false,
    };
    let (mut c, out) = Chooser::begin(Some("b"));
    let [(notice, Request::Notice("b")), (read, Request::Read("b"))] = sends(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(c.awaits(), [notice, read]);
    let out = c.handle(answer(read, Reply::Read(Some("b"))), &mut line);
    assert!(out.is_empty(), "the notice is still awaited: {out:?}");
    assert_eq!(c.awaits(), [notice]);
    let out = c.handle(answer(notice, Reply::Noticed(Ok("b"))), &mut line);
    assert_eq!(
        out,
        [
            Output::Refresh("b"),
            Output::Done(Choice::To("b", Some("b")))
        ]
    );
    assert!(c.awaits().is_empty());
}

/// A guess the line no longer holds the successor is followed by a listing; the listing's
/// successor gets a notice of its own unless the first one named it already.
#[test]
fn a_chooser_lists_when_the_guess_is_not_confirmed() {
    for names in [false, true] {
        let mut line = Line {
            successor: Some("b"),
            still: false,
            names,
        };
        let (mut c, out) = Chooser::begin(Some("b"));
        let [(notice, _), (read, _)] = sends(&out)[..] else {
            panic!("{out:?}")
        };
        c.handle(answer(notice, Reply::Noticed(Ok("b"))), &mut line);
        let out = c.handle(answer(read, Reply::Read(Some("b"))), &mut line);
        assert_eq!(out[0], Output::Say(Note::NotConfirmed("b")));
        let [(list, Request::List)] = sends(&out)[..] else {
            panic!("{out:?}")
        };
        let out = c.handle(answer(list, Reply::Listed(Ok(()))), &mut line);
        if names {
            assert_eq!(out, [Output::Done(Choice::To("b", Some("b")))]);
            continue;
        }
        let [(again, Request::Notice("b"))] = sends(&out)[..] else {
            panic!("{out:?}")
        };
        let stale = c.handle(answer(list, Reply::Listed(Ok(()))), &mut line);
        assert!(stale.is_empty(), "an answer to no request awaited");
        let out = c.handle(answer(again, Reply::Noticed(Err(SLOW))), &mut line);
        assert_eq!(
            out,
            [
                Output::Say(Note::HandingOverWithoutNotice(SLOW)),
                Output::Done(Choice::To("b", None))
            ]
        );
    }
}

/// Without a guess the chooser lists first; a listing that failed ends the choice.
#[test]
fn a_chooser_without_a_guess_lists_first() {
    let mut line = Line {
        successor: None,
        still: false,
        names: false,
    };
    let (mut c, out) = Chooser::begin(None);
    let [(list, Request::List)] = sends(&out)[..] else {
        panic!("{out:?}")
    };
    let out = c.handle(answer(list, Reply::Listed(Err(SLOW))), &mut line);
    assert_eq!(out, [Output::Done(Choice::Unlisted(SLOW))]);
}
