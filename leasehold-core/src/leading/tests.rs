//! The lead's order: renews and the lookout side by side, the body told to stop once, the end
//! only once the body is gone.

use super::*;
use crate::pace::Pace;
use crate::testing::{Rec, record};
use crate::timing::Deadline;
use std::time::Instant;

const S: Duration = Duration::from_secs(1);
const AFTER: Duration = Duration::from_secs(30);

type Lead = Leading<Instant, Rec>;

fn settings(slot: u32, preempt_after: Option<Duration>) -> Settings {
    Settings {
        timing: Timing::default(),
        preempt_after,
        priority: 0,
        me: "me".into(),
        slot,
        replicas: 1,
        mutants: holder::Mutants::default(),
    }
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

/// Handles `input` at `now` with a draw of 0, counting the draws.
fn handle(
    lead: &mut Lead,
    now: Instant,
    input: Input<Instant, Rec>,
    draws: &mut u32,
) -> Vec<Output<Instant>> {
    lead.handle(now, 0, input, &mut || {
        *draws += 1;
        0.0
    })
}

/// The requests among `out`, with their tags.
fn sent(out: &[Output<Instant>]) -> Vec<(Tag, Request<Instant>)> {
    (out.iter())
        .filter_map(|o| match o {
            Output::Send(s) => Some((s.tag, s.request.clone())),
            _ => None,
        })
        .collect()
}

fn answer(tag: Tag, sent: Instant, reply: Reply<Rec>) -> Input<Instant, Rec> {
    Input::Answer(exchange::Answer {
        tag,
        sent,
        answer: reply,
    })
}

/// A lead with `settings`, its term won now, started on a line never listed: the lead, the
/// instant, the draws taken, and its first outputs.
fn started(settings: &Settings) -> (Lead, Instant, u32, Vec<Output<Instant>>) {
    let (start, mut draws) = (Instant::now(), 0);
    let mut lead = Lead::new(settings, start);
    let unlisted = Input::Start {
        line: vec![],
        listed: None,
    };
    let out = handle(&mut lead, start, unlisted, &mut draws);
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
    assert_eq!(
        out,
        [Output::End(Ended {
            end: TermEnd::Lost,
            last: Tenure::Lost(renewed),
            preempted: None
        })]
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
    assert_eq!(
        out,
        [
            Output::Forget(tag),
            Output::End(Ended {
                end: TermEnd::Shutdown,
                last: held,
                preempted: None
            })
        ]
    );
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
    let [Output::End(ended)] = out.as_slice() else {
        panic!("{out:?}")
    };
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
    let [Output::End(ended)] = out.as_slice() else {
        panic!("{out:?}")
    };
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
    let (t, start, mut draws) = (Timing::default(), Instant::now(), 0);
    let mut lead = Lead::new(
        &Settings {
            replicas: 3,
            ..settings(0, None)
        },
        start,
    );
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
