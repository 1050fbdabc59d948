//! The term's end, in rule 7's order (docs/safety.md): nothing given up while the body may
//! run; what was prepared while it stopped awaited by the handoff until its limit, or called
//! off when no stop came; a body that outlived its kill outlasted before anything is given up;
//! a release after an involuntary end; a handoff to its confirmation; a preemption's member
//! handed the lease.

use super::*;
use crate::choice;
use crate::confirmation::{Read, Wake};
use crate::wake::Reserved;

/// A leader with a line, of a group with `slots` slots.
fn lined(slots: u32) -> Settings<u32> {
    Settings {
        lined: true,
        slots,
        ..settings(0, None)
    }
}

/// A line whose successor, and guess, is `b`.
fn line_of_b() -> Line {
    let b = member("b", 0, Some("http://b"));
    Line {
        successor: Some(b.clone()),
        guess: Some(b),
        ..Line::default()
    }
}

/// A term begun now with `settings` on `line`: the lead, the instant, its first outputs.
fn begun(settings: Settings<u32>, line: &mut Line) -> (Lead, Instant, Vec<Out>) {
    let start = Instant::now();
    let mut lead = Lead::new(settings, start, terms());
    let begin = Input::Start {
        line: vec![],
        listed: None,
        shutdown: false,
    };
    let out = asking(&mut lead, line, start, begin, &mut 0);
    (lead, start, out)
}

/// Whether `o` gives the lease up, or tells of it: a request on the lease blob, a wake-up, the
/// mutant's `change`, the step-down, the term's end.
fn gives_up(o: &Out) -> bool {
    matches!(
        o,
        Output::Send(Send {
            request: Request::Store { .. } | Request::Wake { .. } | Request::ChangeBeforeGone(_),
            ..
        }) | Output::SteppedDown { .. }
            | Output::End(_)
    )
}

/// The `change` among `out`: its tag, and the member it goes to.
fn change_in(out: &[Out]) -> Option<(Tag, String)> {
    sent(out).into_iter().find_map(|(tag, r)| match r {
        Request::Store { request, .. } => match *request {
            handoff::Request::Change { to, .. } => Some((tag, to.id)),
            _ => None,
        },
        _ => None,
    })
}

/// The choice's requests among `out`, with their tags.
fn choosing(out: &[Out]) -> Vec<(Tag, choice::Request<Rec>)> {
    sent(out)
        .into_iter()
        .filter_map(|(tag, r)| match r {
            Request::Choice { request, .. } => Some((tag, *request)),
            _ => None,
        })
        .collect()
}

/// Answers the notice and the read among `out` (the notice written, the record showing its
/// member still the successor), at `now`: the outputs of both.
fn chose(lead: &mut Lead, line: &mut Line, out: &[Out], now: Instant) -> Vec<Out> {
    let mut then = Vec::new();
    for (tag, request) in choosing(out) {
        let reply = match request {
            choice::Request::Notice(to) => choice::Reply::Noticed(Ok(to.id)),
            choice::Request::Read(member) => choice::Reply::Read(Some(member)),
            choice::Request::List => choice::Reply::Listed(Ok(())),
        };
        let input = answer(tag, now, Reply::Choice(Box::new(reply)));
        then.extend(asking(lead, line, now, input, &mut 0));
    }
    then
}

/// (a) From the stop request to the body's end nothing goes out to give the lease up, with one
/// slot or with slots (whose notice goes out meanwhile): renewing goes on, the record departs;
/// only the body's end steps the member down, and the `change` comes after it.
#[test]
fn nothing_is_given_up_while_the_body_may_run() {
    let t = Timing::default();
    for slots in [1, 2] {
        let mut line = line_of_b();
        let (mut lead, start, _) = begun(lined(slots), &mut line);
        let mut now = start + S;
        let mut out = asking(&mut lead, &mut line, now, Input::Shutdown, &mut 0);
        assert_eq!(out[0], Output::StopBody(Stop::Shutdown));
        out.extend(chose(&mut lead, &mut line, &out.clone(), now));
        let kill_at = Deadline::from_sent(start, &t).kill_at;
        while let Some(at) = lead.awaits().waiting.until.filter(|at| *at < kill_at) {
            now = at;
            let then = asking(&mut lead, &mut line, now, Input::Timer, &mut 0);
            for (tag, request) in sent(&then) {
                if let Request::Renew(_) = request {
                    let renewed = Reply::Renew(holder::Reply::Renewed);
                    out.extend(asking(
                        &mut lead,
                        &mut line,
                        now,
                        answer(tag, now, renewed),
                        &mut 0,
                    ));
                }
            }
            out.extend(then);
            assert!(lead.awaits().body, "the body may still run");
        }
        assert!(!out.iter().any(gives_up), "slots {slots}: {out:?}");
        assert!(out.contains(&Output::Depart), "slots {slots}: {out:?}");
        let out = asking(
            &mut lead,
            &mut line,
            now,
            Input::BodyGone(TermEnd::Shutdown),
            &mut 0,
        );
        let down = out
            .iter()
            .position(|o| matches!(o, Output::SteppedDown { .. }));
        let first = out.iter().position(gives_up);
        assert!(down.is_some() && down == first, "slots {slots}: {out:?}");
        if slots == 1 {
            assert_eq!(change_in(&out).map(|(_, to)| to).as_deref(), Some("b"));
        } else {
            // The choice prepared at the stop is older than an acquire interval: made again.
            assert_eq!(choosing(&out).len(), 2, "{out:?}");
        }
    }
}

/// (a') With one slot the record departs early only under a held lease: a stop that comes
/// with the lease lost, or a lease lost before the departure's instant, leaves the record in
/// place while the body may run (a group with no blob and no live record is brand-new, and
/// that body's record is what shows it lives).
#[test]
fn the_record_stays_while_a_body_runs_without_its_lease() {
    for lost_first in [true, false] {
        let mut line = line_of_b();
        let (mut lead, start, _) = begun(lined(1), &mut line);
        // The first renew goes out; its answer waits.
        let at = lead.awaits().waiting.until.expect("the renew's instant");
        let out = asking(&mut lead, &mut line, at, Input::Timer, &mut 0);
        let renew = (sent(&out).into_iter())
            .find_map(|(tag, r)| matches!(r, Request::Renew(_)).then_some(tag))
            .expect("a renew");
        let refused = || Reply::Renew(holder::Reply::Refused { missing: true });
        let mut out = Vec::new();
        if lost_first {
            out.extend(asking(
                &mut lead,
                &mut line,
                at,
                answer(renew, at, refused()),
                &mut 0,
            ));
        }
        out.extend(asking(&mut lead, &mut line, at, Input::Shutdown, &mut 0));
        if !lost_first {
            let then = at + Duration::from_millis(1);
            out.extend(asking(
                &mut lead,
                &mut line,
                then,
                answer(renew, at, refused()),
                &mut 0,
            ));
        }
        let kill_at = Deadline::from_sent(start, &Timing::default()).kill_at;
        while let Some(at) = lead.awaits().waiting.until.filter(|at| *at < kill_at) {
            out.extend(asking(&mut lead, &mut line, at, Input::Timer, &mut 0));
        }
        assert!(lead.awaits().body, "the body may still run");
        assert!(
            !out.contains(&Output::Depart),
            "lost first: {lost_first}: {out:?}"
        );
    }
}

/// (b) A choice still on its way when the body is gone is waited for, until the handoff's
/// limit: the `change` goes out as soon as it comes; past the limit it is dropped (its requests
/// forgotten) and the successor chosen anew.
#[test]
fn a_preparation_in_flight_is_awaited_until_the_handoff_s_limit() {
    let t = Timing::default();
    let timeout = Pace::new(&t).request_timeout();
    for in_time in [true, false] {
        let mut line = line_of_b();
        let (mut lead, start, _) = begun(lined(2), &mut line);
        let stop = asking(&mut lead, &mut line, start + S, Input::Shutdown, &mut 0);
        let prepared = choosing(&stop);
        assert_eq!(prepared.len(), 2, "the notice and the read: {stop:?}");
        let gone = start + 2 * S;
        let out = asking(
            &mut lead,
            &mut line,
            gone,
            Input::BodyGone(TermEnd::Shutdown),
            &mut 0,
        );
        assert!(change_in(&out).is_none(), "{out:?}");
        let limit = (gone + timeout).min(Deadline::from_sent(start, &t).kill_at);
        let awaits = lead.awaits();
        assert_eq!(
            awaits.waiting.until,
            Some(limit),
            "the wait for what was prepared"
        );
        assert!(
            prepared
                .iter()
                .all(|(tag, _)| awaits.waiting.answers.contains(tag))
        );
        if in_time {
            let out = chose(&mut lead, &mut line, &stop, gone + S);
            assert!(out.contains(&Output::Depart), "{out:?}");
            assert_eq!(change_in(&out).map(|(_, to)| to).as_deref(), Some("b"));
        } else {
            let out = asking(&mut lead, &mut line, limit, Input::Timer, &mut 0);
            for (tag, _) in &prepared {
                assert!(out.contains(&Output::Forget(*tag)), "{out:?}");
            }
            let anew = choosing(&out);
            assert_eq!(anew.len(), 2, "chosen anew: {out:?}");
            assert!(anew.iter().all(|a| !prepared.iter().any(|p| p.0 == a.0)));
            assert!(change_in(&out).is_none(), "{out:?}");
        }
    }
}

/// (b) Without a stop nothing was prepared: the handoff calls the preparation off and does not
/// wait (a body that ended by itself hands the lease to the line's successor at once).
#[test]
fn a_preparation_without_a_stop_is_called_off() {
    let mut line = line_of_b();
    let (mut lead, start, _) = begun(lined(2), &mut line);
    let gone = start + S;
    let out = asking(
        &mut lead,
        &mut line,
        gone,
        Input::BodyGone(TermEnd::Released),
        &mut 0,
    );
    assert_eq!(
        change_in(&out).map(|(_, to)| to).as_deref(),
        Some("b"),
        "{out:?}"
    );
    assert_eq!(
        lead.awaits().waiting.until,
        None,
        "no wait for what was prepared"
    );
}

/// (c) A body still there after its kill is waited for, with nothing given up, until the lease
/// it was last renewed under has surely expired: gone before, the lease is released (an
/// involuntary end); still there then, nothing is given up and the term ends outlived.
#[test]
fn a_body_that_outlived_its_kill_is_outlasted_first() {
    let t = Timing::default();
    for gone_in_time in [true, false] {
        let mut line = line_of_b();
        let (mut lead, start, _) = begun(lined(1), &mut line);
        let deadline = Deadline::from_sent(start, &t);
        let (kill_at, expiry) = (deadline.kill_at, deadline.expiry(&t));
        let overran = Input::BodyGone(TermEnd::Overran);
        let out = asking(&mut lead, &mut line, kill_at + S, overran, &mut 0);
        let last = Tenure::Held(deadline);
        let stepped_down = Output::SteppedDown {
            end: TermEnd::Overran,
            last,
        };
        assert_eq!(
            out,
            [stepped_down, Output::Outlasting { kill_at, expiry }],
            "nothing given up yet"
        );
        let awaits = lead.awaits();
        assert!(awaits.stuck && !awaits.body);
        assert_eq!(awaits.waiting.until, Some(expiry));
        let early = asking(&mut lead, &mut line, expiry - S, Input::Timer, &mut 0);
        assert!(early.is_empty(), "{early:?}");
        if gone_in_time {
            let out = asking(&mut lead, &mut line, expiry - S, Input::StuckGone, &mut 0);
            assert!(
                change_in(&out).is_none(),
                "an overrun is not handed over: {out:?}"
            );
            let ended = released(&mut lead, &out, expiry - S);
            assert_eq!(ended.surrender, Surrender::Released(true));
            assert!(!ended.outlived);
        } else {
            let out = asking(&mut lead, &mut line, expiry, Input::Timer, &mut 0);
            assert!(sent(&out).is_empty(), "{out:?}");
            let ended = ended(&out).expect("the term is over");
            assert_eq!(ended.surrender, Surrender::Lost);
            assert!(ended.outlived);
        }
    }
}

/// (d) An involuntary end under a held lease (no renew in time) releases it, with the term's
/// own id, within a request's time; nothing is handed over.
#[test]
fn an_involuntary_end_releases_the_lease() {
    let t = Timing::default();
    let mut line = line_of_b();
    let (mut lead, start, _) = begun(lined(1), &mut line);
    let gone = start + S;
    let out = asking(
        &mut lead,
        &mut line,
        gone,
        Input::BodyGone(TermEnd::Expired),
        &mut 0,
    );
    assert!(change_in(&out).is_none(), "{out:?}");
    // Said at once, not after the release's answer (which may take a request's time).
    assert!(
        (out.iter()).any(|o| matches!(o, Output::Renewal(crate::holder::Note::Expired { .. }))),
        "{out:?}"
    );
    let [(tag, release)] = &sent(&out)[..] else {
        panic!("{out:?}")
    };
    let limit = gone + t.request_timeout();
    let released = Request::Store {
        request: Box::new(handoff::Request::Release),
        limit,
    };
    assert_eq!(*release, released);
    let out = asking(
        &mut lead,
        &mut line,
        gone + S,
        answer(
            *tag,
            gone,
            Reply::Released(Err(Fails(crate::failure::Failure::Transient))),
        ),
        &mut 0,
    );
    let ended = ended(&out).expect("the term is over");
    assert_eq!(ended.surrender, Surrender::Released(false));
    assert_eq!(ended.end, TermEnd::Expired);
}

/// Carries a handoff from its `change` (among `out`) to its end, at `now`: the change lands,
/// the successor takes the wake-up, the confirmation's read finds its epoch. The wake-up's
/// request, how the term ended, and what went out as it did.
fn confirmed(
    lead: &mut Lead,
    line: &mut Line,
    out: &[Out],
    now: Instant,
) -> (Asked, Ended<Instant, Rec>, Vec<Out>) {
    let (change, _) = change_in(out).unwrap_or_else(|| panic!("{out:?}"));
    let out = asking(
        lead,
        line,
        now,
        answer(change, now, Reply::Changed(Ok(()))),
        &mut 0,
    );
    let gave = handoff::Note::Gave(handoff::Outcome::HandedOver);
    assert!(
        out.contains(&Output::Say(Box::new(Say::Handoff(gave)))),
        "{out:?}"
    );
    let [(wake, woke)] = &sent(&out)[..] else {
        panic!("{out:?}")
    };
    let out = asking(
        lead,
        line,
        now,
        answer(*wake, now, Reply::Woke(Wake::Accepted)),
        &mut 0,
    );
    assert!(sent(&out).is_empty(), "it pauses before it reads: {out:?}");
    let at = lead.awaits().waiting.until.expect("the pause's end");
    let out = asking(lead, line, at, Input::Timer, &mut 0);
    let [(read, Request::Store { request, .. })] = &sent(&out)[..] else {
        panic!("{out:?}")
    };
    assert!(
        matches!(**request, handoff::Request::Read { .. }),
        "{request:?}"
    );
    let out = asking(
        lead,
        line,
        at,
        answer(*read, at, Reply::Read(Read::Taken, None)),
        &mut 0,
    );
    let ended = ended(&out).unwrap_or_else(|| panic!("{out:?}"));
    (woke.clone(), ended, out)
}

/// (e) A body that ended by itself hands the lease to the line's successor: the `change`, the
/// wake-up with the epoch reserved on the term's own ETag, the confirmation's read; the term
/// ends handed to it.
#[test]
fn a_handoff_ends_handed_to_its_successor_once_confirmed() {
    let t = Timing::default();
    let mut line = line_of_b();
    let (mut lead, start, _) = begun(lined(1), &mut line);
    let gone = start + S;
    let out = asking(
        &mut lead,
        &mut line,
        gone,
        Input::BodyGone(TermEnd::Released),
        &mut 0,
    );
    let b = line.successor.clone().expect("b");
    let limit = (gone + t.request_timeout()).min(Deadline::from_sent(start, &t).kill_at);
    let change = Request::Store {
        request: Box::new(handoff::Request::Change {
            from: None,
            to: b.clone(),
            etag: None,
        }),
        limit,
    };
    assert!(sent(&out).iter().any(|(_, r)| *r == change), "{out:?}");
    let (woke, ended, _) = confirmed(&mut lead, &mut line, &out, gone + S);
    let reserved = Reserved {
        epoch: EPOCH + 1,
        etag: TERM_ETAG,
    };
    assert_eq!(
        woke,
        Request::Wake {
            to: Box::new(b.clone()),
            reserved: Some(reserved)
        }
    );
    assert_eq!(ended.surrender, Surrender::HandedTo(b));
    assert_eq!(ended.end, TermEnd::Released);
}

/// On three replicas, a term handed over releases its lease on each replica beyond the first
/// too: one the hand-on did not change (won back as the term ended, or written by another
/// member since) would keep it until it runs out, and the successor could not win a majority
/// before then; one it changed refuses the release (found by `simulate --replicas any`).
#[test]
fn a_term_handed_over_on_three_replicas_releases_the_others() {
    let three = crate::quorum::ReplicaSet::new(&["a", "b", "c"]).unwrap();
    let mut line = line_of_b();
    let (mut lead, start, _) = begun(
        Settings {
            set: three,
            ..lined(1)
        },
        &mut line,
    );
    let gone = start + S;
    let out = asking(
        &mut lead,
        &mut line,
        gone,
        Input::BodyGone(TermEnd::Released),
        &mut 0,
    );
    let (_, ended, out) = confirmed(&mut lead, &mut line, &out, gone + S);
    assert!(matches!(ended.surrender, Surrender::HandedTo(_)));
    let mut released: Vec<usize> = (sent(&out).into_iter())
        .filter_map(|(_, r)| match r {
            Request::ReleaseReplica { replica, .. } => Some(replica),
            _ => None,
        })
        .collect();
    released.sort_unstable();
    assert_eq!(released, [1, 2], "{out:?}");
}

/// (f) A preemption's member is who the lease goes to, not the line's successor: the choice
/// names it, the `change` goes to it, its wake-up carries the epoch its notice reserved.
#[test]
fn a_preemption_hands_the_lease_to_its_member() {
    let high = member("high", 5, None);
    let mut line = Line {
        candidates: vec![high.clone()],
        ..line_of_b()
    };
    let settings = Settings {
        preempt_after: Some(AFTER),
        ..lined(1)
    };
    let (mut lead, start, out) = begun(settings, &mut line);
    let [(list, Request::List { .. })] = &sent(&out)[..] else {
        panic!("{out:?}")
    };
    let listed = Reply::Listed(Some(vec![high.clone()]));
    let out = asking(
        &mut lead,
        &mut line,
        start,
        answer(*list, start, listed),
        &mut 0,
    );
    let [Output::StopBody(Stop::Preempted(p))] = out.as_slice() else {
        panic!("{out:?}")
    };
    let p = p.clone();
    let gone = start + S;
    let out = asking(
        &mut lead,
        &mut line,
        gone,
        Input::BodyGone(TermEnd::Shutdown),
        &mut 0,
    );
    let asked = choosing(&out);
    assert_eq!(
        asked.iter().map(|(_, r)| r.clone()).collect::<Vec<_>>(),
        [
            choice::Request::Notice(high.clone()),
            choice::Request::Read(high.clone())
        ],
        "{out:?}"
    );
    let out = chose(&mut lead, &mut line, &out, gone);
    assert!(
        out.contains(&Output::Refresh(Box::new(high.clone()))),
        "{out:?}"
    );
    assert_eq!(change_in(&out).map(|(_, to)| to).as_deref(), Some("high"));
    let (woke, ended, _) = confirmed(&mut lead, &mut line, &out, gone + S);
    let reserved = Reserved {
        epoch: EPOCH + 1,
        etag: NOTICE_ETAG,
    };
    assert_eq!(
        woke,
        Request::Wake {
            to: Box::new(high.clone()),
            reserved: Some(reserved)
        }
    );
    assert_eq!(ended.surrender, Surrender::HandedTo(high));
    assert_eq!(ended.end, TermEnd::Preempted);
    assert_eq!(ended.preempted, Some(p));
}
