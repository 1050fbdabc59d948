//! The lead's order: renews and the lookout side by side, the body told to stop once, renewing
//! stopped only once the body is gone. The term's end after it (the outlast, the release, the
//! handoff and what was prepared for it) is in tests/giving_up.rs.

use super::*;
use crate::exchange::{self, Send, Tag};
use crate::handoff::{self, Surrender};
use crate::holder::{self, Note, Tenure};
use crate::pace::Pace;
use crate::term::{Broken, TermEnd, Terms};
use crate::testing::Fails;
use crate::testing::{Rec, record};
use crate::timing::{Deadline, Timing};
use std::time::{Duration, Instant};

mod giving_up;

const S: Duration = Duration::from_secs(1);
const AFTER: Duration = Duration::from_secs(30);

/// The term's epoch, and the ETag of its own epoch write.
const EPOCH: u64 = 41;
const TERM_ETAG: u32 = 7;
/// The ETag a notice leaves.
const NOTICE_ETAG: u32 = 8;

/// Members are records; a notice is the identity it names; ETags are numbers.
type Lead = Leading<Instant, Rec, String, u32, Fails>;
type Out = Output<Instant, Rec, u32, Fails>;
type In = Input<Instant, Rec, String, u32, Fails>;
type Asked = Request<Instant, Rec, u32>;
type Answered = Reply<Rec, String, u32, Fails>;

/// The line as the tests set it: its successor (`named` first, while in `candidates`), its
/// guess, the successor after a pass-over; and what it was asked.
#[derive(Debug, Default)]
struct Line {
    successor: Option<Rec>,
    guess: Option<Rec>,
    candidates: Vec<Rec>,
    passed_over: Vec<String>,
}

impl Grounds<Rec, String, u32> for Line {
    fn successor(&mut self, named: Option<&str>) -> Option<Rec> {
        let named = named.and_then(|n| self.candidates.iter().find(|r| r.id == n));
        named.cloned().or_else(|| self.successor.clone())
    }

    fn still_successor(&mut self, listed: &Rec, fresh: &Rec) -> bool {
        listed.id == fresh.id
    }

    fn names(&mut self, notice: &String, next: &Rec) -> bool {
        *notice == next.id
    }

    fn etag(&mut self, _: String) -> u32 {
        NOTICE_ETAG
    }

    fn guess(&mut self) -> Option<Rec> {
        self.guess.clone()
    }

    fn pass_over(&mut self, member: Option<&Rec>) -> Option<Rec> {
        if let Some(m) = member {
            self.passed_over.push(m.id.clone());
        }
        self.successor = None;
        None
    }
}

fn settings(slot: u32, preempt_after: Option<Duration>) -> Settings<u32> {
    Settings {
        timing: Timing::default(),
        preempt_after,
        priority: 0,
        me: "me".into(),
        slot,
        slots: 1,
        epoch: EPOCH,
        etag: Some(TERM_ETAG),
        lined: false,
        set: crate::quorum::ReplicaSet::one(),
        mutants: Mutants::default(),
    }
}

/// A member's loop of terms, as a campaign leaves it.
fn terms() -> Terms<Instant> {
    Terms::new(Timing::default(), false, Broken::default())
}

/// A live, settled member of priority `priority` with `url` advertised.
fn member(id: &str, priority: i64, url: Option<&str>) -> Rec {
    Rec {
        age: Duration::from_secs(100),
        settled: Some(AFTER),
        advertise: url.map(str::to_owned),
        ..record(id, priority, 0, true)
    }
}

/// Handles `input` at `now` with a draw of 0, counting the draws, on a line that knows
/// nobody.
fn handle(lead: &mut Lead, now: Instant, input: In, draws: &mut u32) -> Vec<Out> {
    asking(lead, &mut Line::default(), now, input, draws)
}

/// Handles `input` at `now` with a draw of 0, counting the draws, with `line` as the grounds.
fn asking(lead: &mut Lead, line: &mut Line, now: Instant, input: In, draws: &mut u32) -> Vec<Out> {
    let mut draw = || {
        *draws += 1;
        0.0
    };
    lead.handle(now, 0, input, &mut draw, line)
}

/// The requests among `out`, with their tags.
fn sent(out: &[Out]) -> Vec<(Tag, Asked)> {
    (out.iter())
        .filter_map(|o| match o {
            Output::Send(s) => Some((s.tag, s.request.clone())),
            _ => None,
        })
        .collect()
}

fn answer(tag: Tag, sent: Instant, reply: Answered) -> In {
    Input::Answer(exchange::Answer {
        tag,
        sent,
        answer: reply,
    })
}

/// How the term ended, if `out` says.
fn ended(out: &[Out]) -> Option<Ended<Instant, Rec>> {
    out.iter().find_map(|o| match o {
        Output::End(ended) => Some((**ended).clone()),
        _ => None,
    })
}

/// The release among `out`, answered at `now`: how the term ended.
fn released(lead: &mut Lead, out: &[Out], now: Instant) -> Ended<Instant, Rec> {
    let released = sent(out).into_iter().find_map(|(tag, r)| match r {
        Request::Store { request, .. } if matches!(*request, handoff::Request::Release) => {
            Some(tag)
        }
        _ => None,
    });
    let tag = released.unwrap_or_else(|| panic!("no release: {out:?}"));
    let out = handle(lead, now, answer(tag, now, Reply::Released(Ok(()))), &mut 0);
    ended(&out).unwrap_or_else(|| panic!("{out:?}"))
}

/// A lead with `settings`, its term won now, started on a line never listed: the lead, the
/// instant, the draws taken, and its first outputs.
fn started(settings: &Settings<u32>) -> (Lead, Instant, u32, Vec<Out>) {
    let (start, mut draws) = (Instant::now(), 0);
    let mut lead = Lead::new(settings.clone(), start, terms());
    let unlisted = Input::Start {
        line: vec![],
        listed: None,
        shutdown: false,
    };
    let out = handle(&mut lead, start, unlisted, &mut draws);
    assert_eq!(out.first(), Some(&Output::StartBody), "{out:?}");
    (lead, start, draws, out)
}

/// Without preemption the lead only renews: every `R` from the last success's send, each
/// success published as the new tenure; a refusal publishes the lease lost at once, and the
/// body's end ends the lead with it.
#[test]
fn it_renews_every_r_and_publishes_each_change() {
    let t = Timing::default();
    let (mut lead, start, mut draws, out) = started(&settings(0, None));
    assert!(sent(&out).is_empty(), "nothing due yet: {out:?}");
    assert_eq!(lead.awaits().waiting.until, Some(start + t.renew_interval));
    let at = start + t.renew_interval;
    let out = handle(&mut lead, at, Input::Timer, &mut draws);
    let [(tag, Request::Renew(renew))] = sent(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(renew.limit, at + t.request_timeout());
    assert_eq!(lead.awaits().waiting.answers, [tag]);
    let out = handle(
        &mut lead,
        at + S,
        answer(tag, at, Reply::Renew(holder::Reply::Renewed)),
        &mut draws,
    );
    let renewed = Deadline::from_sent(at, &t);
    assert!(
        out.contains(&Output::Tenure(Tenure::Held(renewed))),
        "{out:?}"
    );
    assert!(matches!(out[0], Output::Renewal(Note::Renewed { .. })));
    let next = at + t.renew_interval;
    assert_eq!(lead.awaits().waiting.until, Some(next));
    let out = handle(&mut lead, next, Input::Timer, &mut draws);
    let [(tag, _)] = sent(&out)[..] else {
        panic!("{out:?}")
    };
    let refused = Reply::Renew(holder::Reply::Refused { missing: false });
    let out = handle(&mut lead, next, answer(tag, next, refused), &mut draws);
    assert!(
        out.contains(&Output::Tenure(Tenure::Lost(renewed))),
        "{out:?}"
    );
    assert_eq!(lead.awaits().waiting.until, None, "nothing more is renewed");
    let out = handle(
        &mut lead,
        next + S,
        Input::BodyGone(TermEnd::Lost),
        &mut draws,
    );
    let last = Tenure::Lost(renewed);
    let end = TermEnd::Lost;
    assert_eq!(
        out,
        [
            Output::SteppedDown { end, last },
            Output::End(Box::new(Ended {
                end,
                last,
                preempted: None,
                outlived: false,
                surrender: Surrender::Lost,
            }))
        ],
        "a lost lease is not given up"
    );
    assert!(!lead.awaits().body);
    assert_eq!(draws, 0);
}

/// A shutdown tells the body to stop, once; renewing goes on while it stops; its end stops
/// renewing: the renew on its way is forgotten, and its late answer changes nothing.
#[test]
fn a_shutdown_stops_the_body_and_renewing_stops_only_once_it_is_gone() {
    let t = Timing::default();
    let (mut lead, start, mut draws, _) = started(&settings(0, None));
    let out = handle(&mut lead, start + S, Input::Shutdown, &mut draws);
    assert_eq!(out, [Output::StopBody(Stop::Shutdown)]);
    assert!(handle(&mut lead, start + S, Input::Shutdown, &mut draws).is_empty());
    let at = start + t.renew_interval;
    let out = handle(&mut lead, at, Input::Timer, &mut draws);
    let [(tag, _)] = sent(&out)[..] else {
        panic!("still renewing: {out:?}")
    };
    let out = handle(
        &mut lead,
        at + S,
        Input::BodyGone(TermEnd::Shutdown),
        &mut draws,
    );
    let held = Tenure::Held(Deadline::from_sent(start, &t));
    let stepped_down = Output::SteppedDown {
        end: TermEnd::Shutdown,
        last: held,
    };
    assert_eq!(out[..2], [Output::Forget(tag), stepped_down], "{out:?}");
    let late = handle(
        &mut lead,
        at + 2 * S,
        answer(tag, at, Reply::Renew(holder::Reply::Renewed)),
        &mut draws,
    );
    assert!(late.is_empty(), "{late:?}");
    assert_eq!(lead.tenure(), held);
}

/// A leader whose line was never listed lists at once beside its renews; a settled member of
/// higher priority without a URL stops the body, and its end reads as a preemption.
#[test]
fn a_due_member_stops_the_body_and_the_end_reads_preempted() {
    let t = Timing::default();
    let (mut lead, start, mut draws, out) = started(&settings(0, Some(AFTER)));
    let [(tag, Request::List { limit })] = sent(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!(limit, start + t.request_timeout());
    let awaits = lead.awaits();
    assert_eq!(awaits.waiting.answers, [tag]);
    assert_eq!(
        awaits.waiting.until,
        Some(start + t.renew_interval),
        "the renew's timer"
    );
    let line = vec![member("high", 5, None)];
    let out = handle(
        &mut lead,
        start + S,
        answer(tag, start, Reply::Listed(Some(line))),
        &mut draws,
    );
    let [Output::StopBody(Stop::Preempted(p))] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(p.to, "high");
    let p = p.clone();
    let out = handle(
        &mut lead,
        start + 2 * S,
        Input::BodyGone(TermEnd::Shutdown),
        &mut draws,
    );
    assert!(
        matches!(
            out[0],
            Output::SteppedDown {
                end: TermEnd::Preempted,
                ..
            }
        ),
        "{out:?}"
    );
    let ended = released(&mut lead, &out, start + 2 * S);
    assert_eq!(ended.end, TermEnd::Preempted);
    assert_eq!(ended.preempted, Some(p));
}

/// A shutdown that comes while the body stops for a preemption leaves the end a shutdown's;
/// the lease still goes to the member due.
#[test]
fn a_shutdown_during_a_preemption_ends_as_a_shutdown() {
    let (mut lead, start, mut draws, out) = started(&settings(0, Some(AFTER)));
    let [(tag, _)] = sent(&out)[..] else {
        panic!("{out:?}")
    };
    let line = vec![member("high", 5, None)];
    handle(
        &mut lead,
        start,
        answer(tag, start, Reply::Listed(Some(line))),
        &mut draws,
    );
    assert!(
        handle(&mut lead, start + S, Input::Shutdown, &mut draws).is_empty(),
        "told once"
    );
    let out = handle(
        &mut lead,
        start + S,
        Input::BodyGone(TermEnd::Shutdown),
        &mut draws,
    );
    let ended = released(&mut lead, &out, start + S);
    assert_eq!(ended.end, TermEnd::Shutdown);
    assert!(ended.preempted.is_some());
}

/// A due member with a URL is probed; one that does not answer is passed over and the lookout
/// sleeps until its next listing, which the timer then names when it comes before the renew.
#[test]
fn a_due_member_that_does_not_answer_its_probe_is_passed_over() {
    let t = Timing::default();
    let (mut lead, start, mut draws, out) = started(&settings(0, Some(AFTER)));
    let [(tag, _)] = sent(&out)[..] else {
        panic!("{out:?}")
    };
    let line = vec![member("high", 5, Some("http://high"))];
    let out = handle(
        &mut lead,
        start,
        answer(tag, start, Reply::Listed(Some(line))),
        &mut draws,
    );
    let [(probe, Request::Probe { to, url })] = &sent(&out)[..] else {
        panic!("{out:?}")
    };
    assert_eq!((to.as_str(), url.as_str()), ("high", "http://high"));
    let out = handle(
        &mut lead,
        start + S,
        answer(*probe, start, Reply::Probed(false)),
        &mut draws,
    );
    assert_eq!(out[0], Output::PassOver("high".into()));
    assert_eq!(out[1], Output::Pending(None));
    assert_eq!(draws, 1, "the next listing's cadence");
    let next_list = start + S + AFTER / 2;
    let renew_at = start + t.renew_interval;
    assert_eq!(lead.awaits().waiting.until, Some(renew_at.min(next_list)));
}

/// A holder of another slot than 0 lists nothing for preemption: it looks at the line as the
/// record keeper lists it, every [`Pace::BORROWED_LISTING_LOOK`].
#[test]
fn a_holder_of_another_slot_looks_at_the_line_instead_of_listing() {
    let (mut lead, start, mut draws, out) = started(&settings(1, Some(AFTER)));
    assert!(sent(&out).is_empty(), "{out:?}");
    let look_at = start + Pace::BORROWED_LISTING_LOOK;
    assert_eq!(lead.awaits().waiting.until, Some(look_at));
    let out = handle(&mut lead, look_at, Input::Timer, &mut draws);
    assert_eq!(out, [Output::Look]);
    assert!(lead.awaits().look);
    let line = vec![member("high", 5, None)];
    let looked = Input::Looked {
        line,
        listed: Some(look_at),
    };
    let out = handle(&mut lead, look_at, looked, &mut draws);
    assert!(
        matches!(out.as_slice(), [Output::StopBody(Stop::Preempted(_))]),
        "{out:?}"
    );
}

/// With three replicas the lead renews each, and the lease is lost only once a majority
/// refused.
#[test]
fn three_replicas_are_renewed_side_by_side() {
    let t = Timing::default();
    let (mut lead, start, mut draws, _) = started(&Settings {
        set: crate::quorum::ReplicaSet::new(&["a", "b", "c"]).unwrap(),
        ..settings(0, None)
    });
    let at = start + t.renew_interval;
    let out = handle(&mut lead, at, Input::Timer, &mut draws);
    let renews = sent(&out);
    assert_eq!(renews.len(), 3, "{out:?}");
    let refused = Reply::Renew(holder::Reply::Refused { missing: false });
    let out = handle(
        &mut lead,
        at,
        answer(renews[0].0, at, refused.clone()),
        &mut draws,
    );
    assert!(
        !out.iter().any(|o| matches!(o, Output::Tenure(_))),
        "{out:?}"
    );
    let out = handle(&mut lead, at, answer(renews[1].0, at, refused), &mut draws);
    assert!(
        out.iter()
            .any(|o| matches!(o, Output::Tenure(Tenure::Lost(_)))),
        "{out:?}"
    );
}
