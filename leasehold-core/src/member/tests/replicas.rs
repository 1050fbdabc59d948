//! A member of a group whose lease lives on three storage accounts (docs/quorum.md): it wins
//! a term on a majority with one region down, its epoch above every counted replica's and
//! written to each replica it holds, and renews each lease it holds on its own; a minority
//! won is given back.

use super::lifetime::{Out, Replica, Req, Run, Store, body_started, settings};
use super::*;
use crate::campaign::Request as C;
use crate::quorum::{self, ReplicaSet};
use crate::{holder, leading};

fn set() -> ReplicaSet {
    ReplicaSet::new(&["east", "west", "north"]).unwrap()
}

/// A member `a` of a group on three replicas, and its store.
pub(super) fn on_three() -> (Run, Store) {
    let set = set();
    let run = Run::of(Settings { set, ..settings() });
    let mut store = Store::of("a");
    store.replicas = (1..=3).map(|id| Replica::of(&set, id)).collect();
    (run, store)
}

/// The replica a request of the attempt on a majority goes to, and what it is.
pub(super) fn on_replica(r: &Req) -> Option<quorum::Request<Instant>> {
    match r {
        Req::Campaign(C::Replica(request)) => Some(*request),
        _ => None,
    }
}

/// The body gone at a shutdown: what the member sent until its term ended.
fn body_gone_at_shutdown(run: &mut Run, store: &mut Store) -> Vec<Req> {
    let from = run.said.len();
    run.step(Input::BodyGone(crate::term::TermEnd::Shutdown));
    let ended = |o: &Out| matches!(o, Output::Say(Say::TermEnded(_)));
    assert!(run.until(store, ended), "{:#?}", run.said);
    (run.said[from..].iter())
        .filter_map(|o| match o {
            Output::Send(s) => Some(s.request.clone()),
            _ => None,
        })
        .collect()
}

fn renews_of(run: &Run, replica: usize) -> usize {
    run.sent(
        |r| matches!(r, Req::Leading(leading::Request::Renew(renew)) if renew.replica == replica),
    )
}

/// One region down: the acquires go to every replica side by side, the term is won on the two
/// that answer, with an epoch above theirs and the wall clock's, written to both; the leader
/// then renews those two, each on its own, and never the one it does not hold; at its end it
/// releases every replica.
#[test]
fn a_term_is_won_on_a_majority_with_one_region_down_and_renewed_where_held() {
    let (mut run, mut store) = on_three();
    store.replicas[1].down = true;
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    let acquires: Vec<usize> = (run.said.iter())
        .filter_map(|o| match o {
            Output::Send(s) => on_replica(&s.request),
            _ => None,
        })
        .filter(|r| matches!(r, quorum::Request::Acquire { .. }))
        .map(|r| r.replica())
        .collect();
    assert_eq!(
        acquires,
        [0, 1, 2],
        "one acquire to each replica, side by side"
    );
    let writes: Vec<(usize, u64)> = (run.said.iter())
        .filter_map(|o| match o {
            Output::Send(s) => match on_replica(&s.request)? {
                quorum::Request::WriteEpoch { replica, epoch, .. } => Some((replica, epoch)),
                _ => None,
            },
            _ => None,
        })
        .collect();
    let start = run.said.iter().position(body_started).unwrap();
    let Output::StartBody(term) = &run.said[start] else {
        unreachable!()
    };
    // The replicas carry epoch 4; the wall clock says 100,000 ms: the larger wins.
    assert_eq!(term.epoch, 100_000);
    assert_eq!(writes, [(0, 100_000), (2, 100_000)], "written where held");
    assert!(store.replicas[0].blob.leased && store.replicas[2].blob.leased);
    // Four renewals on: each held lease renewed on its own, the one not held never; the
    // lease stays held.
    let renewed = |o: &Out| matches!(o, Output::Say(Say::Renewal(holder::Note::Renewed { .. })));
    for _ in 0..4 {
        assert!(run.until(&mut store, renewed), "{:#?}", run.said);
    }
    assert!(
        renews_of(&run, 0) >= 2 && renews_of(&run, 2) >= 2,
        "{:#?}",
        run.said
    );
    assert_eq!(renews_of(&run, 1), 0, "not held: never renewed");
    let lost = |o: &Out| matches!(o, Output::Tenure(t) if !t.is_held());
    assert!(!run.said.iter().any(lost), "the lease stays held");
    assert!(!run.said.iter().any(|o| matches!(o, Output::StopBody(_))));
    // At shutdown, once the body is gone, the term looks for a successor in the union of the
    // replicas' listings; a lone member finds none, and releases the first replica's lease
    // and, beside it, each other replica's.
    let out = run.step(Input::Shutdown);
    assert!(
        out.iter().any(|o| matches!(o, Output::StopBody(_))),
        "{out:?}"
    );
    let sent = body_gone_at_shutdown(&mut run, &mut store);
    let released = |r: &Req| match r {
        Req::Leading(leading::Request::ReleaseReplica { replica, .. }) => Some(*replica),
        Req::Leading(leading::Request::Store { request, .. })
            if matches!(**request, crate::handoff::Request::Release) =>
        {
            Some(0)
        }
        _ => None,
    };
    let mut replicas: Vec<usize> = sent.iter().filter_map(released).collect();
    replicas.sort_unstable();
    assert_eq!(replicas, [0, 1, 2], "{sent:?}");
    let listed = |r: &Req| {
        matches!(r, Req::OnReplica { request, .. }
            if matches!(**request, Req::Leading(leading::Request::Choice { .. })))
    };
    assert_eq!(sent.iter().filter(|r| listed(r)).count(), 3, "{sent:?}");
}

/// The first replica down: the term leads on the other two, and its handoff goes through the
/// first of them, a lease it holds (docs/quorum.md, Handover): a lone member's release of the
/// lease blob goes to replica 1, each other replica's beside it, the first's included.
#[test]
fn a_handoff_goes_through_the_first_replica_the_term_holds() {
    let (mut run, mut store) = on_three();
    store.replicas[0].down = true;
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    run.step(Input::Shutdown);
    let sent = body_gone_at_shutdown(&mut run, &mut store);
    let blob = |r: &Req| matches!(r, Req::Leading(leading::Request::Store { .. }));
    let through = |r: &Req| match r {
        Req::OnReplica { replica, request } if blob(request) => Some(*replica),
        _ => None,
    };
    let on: Vec<usize> = sent.iter().filter_map(through).collect();
    assert_eq!(
        on,
        [1],
        "the release of the lease blob on replica 1: {sent:?}"
    );
    assert!(!sent.iter().any(blob), "none on the first: {sent:?}");
    let others = |r: &Req| match r {
        Req::Leading(leading::Request::ReleaseReplica { replica, .. }) => Some(*replica),
        _ => None,
    };
    let mut others: Vec<usize> = sent.iter().filter_map(others).collect();
    others.sort_unstable();
    assert_eq!(others, [0, 2], "{sent:?}");
}

/// Two of three replicas held by another member: no term; the one replica won is given back
/// at once (before the last acquire is answered), and the member campaigns again after a pause.
#[test]
fn a_minority_won_is_given_back() {
    let (mut run, mut store) = on_three();
    store.replicas[0].held = true;
    store.replicas[2].held = true;
    run.step(Input::Start);
    let released = |o: &Out| match o {
        Output::Send(s) => matches!(
            on_replica(&s.request),
            Some(quorum::Request::Release { replica: 1 })
        ),
        _ => false,
    };
    assert!(run.until(&mut store, released), "{:#?}", run.said);
    let acquire = |r: &Req| matches!(on_replica(r), Some(quorum::Request::Acquire { .. }));
    assert_eq!(run.sent(acquire), 3);
    // It campaigns again, on every replica, and (once its place in line settled) after a
    // pause each time.
    let campaigns = |o: &Out| matches!(o, Output::Send(s) if acquire(&s.request));
    assert!(run.until(&mut store, campaigns), "{:#?}", run.said);
    assert_eq!(run.sent(acquire), 6);
    let second = run.now;
    assert!(run.until(&mut store, campaigns), "{:#?}", run.said);
    assert_eq!(run.sent(acquire), 9);
    let pause = run.now - second;
    assert!(pause >= Duration::from_secs(1), "again after {pause:?}");
    // Refused by replica 0 before its win on replica 1 was read, it yields at once: replica 2's
    // acquire is still on its way, so that replica is released too (it may hold it); replica 0,
    // refused, never is.
    let on_the_first =
        |r: &Req| matches!(on_replica(r), Some(quorum::Request::Release { replica: 0 }));
    let on_the_won =
        |r: &Req| matches!(on_replica(r), Some(quorum::Request::Release { replica: 1 }));
    assert_eq!(
        run.sent(on_the_first),
        0,
        "a replica refused is not released"
    );
    assert_eq!(
        run.sent(on_the_won),
        2,
        "the replica won, once each attempt that ended"
    );
    assert!(
        !run.said.iter().any(body_started),
        "never a body on a minority"
    );
    assert_ne!(
        run.m.next_id(),
        "id-0",
        "a lease id that won a replica is spent"
    );
}

/// Every replica held by another member: each attempt is refused everywhere, holds its lease
/// id nowhere, and the member keeps it (as one account's refused acquire does), so that a
/// handoff to the id its record publishes finds it at its next acquire.
#[test]
fn an_attempt_refused_everywhere_keeps_its_lease_id() {
    let (mut run, mut store) = on_three();
    for r in &mut store.replicas {
        r.held = true;
    }
    run.step(Input::Start);
    let acquire = |r: &Req| matches!(on_replica(r), Some(quorum::Request::Acquire { .. }));
    let campaigns = |o: &Out| matches!(o, Output::Send(s) if acquire(&s.request));
    for _ in 0..3 {
        assert!(run.until(&mut store, campaigns), "{:#?}", run.said);
    }
    assert!(run.sent(acquire) >= 9, "three attempts at least");
    assert_eq!(
        run.m.next_id(),
        "id-0",
        "refused everywhere: the lease id is kept"
    );
}

/// The open acquire on `replica`, by its tag.
fn open_acquire(run: &Run, replica: usize) -> Option<crate::exchange::Tag> {
    (run.open.iter()).find_map(|(tag, r)| match on_replica(r) {
        Some(quorum::Request::Acquire { replica: at, .. }) if at == replica => Some(*tag),
        _ => None,
    })
}

/// The releases of a late acquire's lease sent in `out`: the replica and the lease id.
fn late_releases(out: &[Out]) -> Vec<(usize, Option<String>)> {
    (out.iter())
        .filter_map(|o| match o {
            Output::Send(s) => match &s.request {
                Req::Release { replica, id, .. } => Some((*replica, id.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The rule *Counting*: an acquire still unanswered when its attempt ended (here, won on the
/// two other replicas) is awaited by the member; answered a success, its lease is released at
/// once on that replica with the attempt's lease id, the release going on alone; and the
/// acquire's outcome unknown, the attempt released that replica already when it won.
#[test]
fn an_acquire_answered_after_its_attempt_won_is_released() {
    let (mut run, mut store) = on_three();
    store.replicas[1].down = true;
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    let released_at_once =
        |r: &Req| matches!(on_replica(r), Some(quorum::Request::Release { replica: 1 }));
    assert_eq!(run.sent(released_at_once), 1, "an unknown outcome released");
    let late = open_acquire(&run, 1).expect("the late acquire is still awaited");
    assert!(run.m.awaits().waiting.answers.contains(&late));
    let out = run.answer(late, Reply::Acquired(Ok(())));
    assert_eq!(
        late_releases(&out),
        [(1, Some("id-0".to_owned()))],
        "{out:?}"
    );
    let Some(Output::Send(release)) = out.iter().find(|o| matches!(o, Output::Send(_))) else {
        unreachable!()
    };
    assert!(
        (out.iter()).any(|o| matches!(o, Output::Forget(tag) if *tag == release.tag)),
        "the release goes on alone: {out:?}"
    );
    assert!(!run.said.iter().any(|o| matches!(o, Output::StopBody(_))));
}

/// An acquire unanswered when its attempt failed stays awaited across the next attempt, which
/// goes out with a new lease id; a late success is released with the first attempt's id. One
/// that never answers is let go once the lease it may have taken has surely expired.
#[test]
fn a_late_acquire_outlives_its_attempt_and_keeps_its_lease_id() {
    let (mut run, mut store) = on_three();
    store.replicas[0].held = true;
    store.replicas[2].held = true;
    store.replicas[1].down = true;
    run.step(Input::Start);
    let acquire = |r: &Req| matches!(on_replica(r), Some(quorum::Request::Acquire { .. }));
    let again = |o: &Out| matches!(o, Output::Send(s) if acquire(&s.request));
    assert!(run.until(&mut store, again), "{:#?}", run.said);
    let first = open_acquire(&run, 1).expect("sent");
    let sent = run.now;
    assert!(run.until(&mut store, again), "{:#?}", run.said);
    assert_eq!(run.sent(acquire), 6, "a second attempt");
    assert!(run.m.awaits().waiting.answers.contains(&first));
    assert_eq!(
        run.m.kept().id.as_deref(),
        Some("id-1"),
        "the next attempt's"
    );
    let out = run.answer(first, Reply::Acquired(Ok(())));
    assert_eq!(
        late_releases(&out),
        [(1, Some("id-0".to_owned()))],
        "{out:?}"
    );
    // The second attempt's acquire on replica 1 never answers: let go at its send + L.
    let second = open_acquire(&run, 1).expect("the second attempt's acquire");
    let t = crate::Timing::default();
    let until = |o: &Out| matches!(o, Output::Forget(tag) if *tag == second);
    assert!(run.until(&mut store, until), "{:#?}", run.said);
    assert!(run.now >= sent + t.duration, "{:?}", run.now - sent);
    assert!(!run.m.awaits().waiting.answers.contains(&second));
}

/// The requests of winning back a replica sent so far: (replica, what).
fn won_back(run: &Run) -> Vec<(usize, &'static str)> {
    (run.said.iter())
        .filter_map(|o| match o {
            Output::Send(s) => match &s.request {
                Req::Leading(leading::Request::WinBack(q)) => Some((
                    q.replica(),
                    match q {
                        quorum::Request::Acquire { .. } => "acquire",
                        quorum::Request::Read { .. } => "read",
                        quorum::Request::WriteEpoch { .. } => "write",
                        quorum::Request::Release { .. } => "release",
                        quorum::Request::Create { .. } => "create",
                    },
                )),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The rule *Renewing*: a leader that won on two of three with the third region down keeps
/// trying the third at its renew pace (first once the attempt's requests there surely
/// settled); once it answers, its lease is acquired, its blob read, the term's epoch written
/// there, and it is renewed like the others. Then the first region down moves nothing: the
/// leader holds a majority on the other two.
#[test]
fn a_leader_wins_back_a_replica_that_returns() {
    let (mut run, mut store) = on_three();
    store.replicas[1].down = true;
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    let won = run.now;
    let t = crate::Timing::default();
    let tried = |o: &Out| matches!(o, Output::Send(s) if matches!(s.request, Req::Leading(leading::Request::WinBack(_))));
    assert!(run.until(&mut store, tried), "{:#?}", run.said);
    assert!(
        run.now >= won + t.duration + t.request_timeout(),
        "first tried {:?} after the win",
        run.now - won
    );
    // Down still: tried again at the renew pace, and never renewed.
    let first = run.now;
    assert!(run.until(&mut store, tried), "{:#?}", run.said);
    assert_eq!(run.now - first, t.request_timeout(), "the renew pace");
    assert_eq!(renews_of(&run, 1), 0);
    // Back: acquired, read, written with the term's epoch; then renewed.
    store.replicas[1].down = false;
    let renewed_1 = |o: &Out| {
        matches!(o, Output::Send(s) if matches!(&s.request,
            Req::Leading(leading::Request::Renew(r)) if r.replica == 1))
    };
    assert!(run.until(&mut store, renewed_1), "{:#?}", run.said);
    let tries = won_back(&run);
    assert_eq!(
        tries[tries.len() - 3..],
        [(1, "acquire"), (1, "read"), (1, "write")],
        "{tries:?}"
    );
    let term = run.said.iter().find_map(|o| match o {
        Output::StartBody(term) => Some(term.epoch),
        _ => None,
    });
    let written = run.said.iter().rev().find_map(|o| match o {
        Output::Send(s) => match &s.request {
            Req::Leading(leading::Request::WinBack(quorum::Request::WriteEpoch {
                epoch, ..
            })) => Some(*epoch),
            _ => None,
        },
        _ => None,
    });
    assert_eq!(written, term, "the term's epoch");
    assert!(store.replicas[1].blob.leased);
    // The first region down: the leader holds on the other two, its body runs on.
    store.replicas[0].down = true;
    let start = run.now;
    while run.now < start + Duration::from_secs(60) {
        assert!(run.until(&mut store, renewed_1), "{:#?}", run.said);
    }
    let lost = |o: &Out| matches!(o, Output::Tenure(t) if !t.is_held());
    assert!(!run.said.iter().any(lost), "the lease stays held");
    assert!(!run.said.iter().any(|o| matches!(o, Output::StopBody(_))));
}

/// The rule *Epochs*: a member's next term's epoch is above every epoch it has written or
/// read, even where the replicas it counts now carry none above it and its wall clock has not
/// moved on (a replica wiped or rolled back, a clock set back): the epochs of its terms grow.
#[test]
fn a_members_next_epoch_is_above_the_last_it_wrote() {
    let (mut run, mut store) = on_three();
    let epochs = |run: &Run| -> Vec<u64> {
        (run.said.iter())
            .filter_map(|o| match o {
                Output::StartBody(term) => Some(term.epoch),
                _ => None,
            })
            .collect()
    };
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    for r in &mut store.replicas {
        // Rolled back to a copy from before the term: the epoch it wrote is gone.
        r.blob.named = Some("old".into());
    }
    super::lifetime::ended(&mut run, &mut store, crate::term::TermEnd::Released);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    let [first, second] = epochs(&run)[..] else {
        panic!("two terms: {:?}", epochs(&run));
    };
    // The shell's wall clock says 100,000 ms throughout.
    assert_eq!(first, 100_000);
    assert!(second > first, "epochs {first}, then {second}");
}

/// A leader trying to win back a replica, that then loses its majority, stops trying: until
/// its body is gone, every instant its timer names lies ahead of the one it came at (a try
/// still named but no longer sent would wake it at that instant again and again).
#[test]
fn a_term_that_lost_its_majority_names_no_try_to_win_back() {
    let (mut run, mut store) = on_three();
    store.replicas[1].down = true;
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    store.replicas[0].down = true;
    store.replicas[2].down = true;
    let lost = |o: &Out| matches!(o, Output::Tenure(t) if !t.is_held());
    assert!(run.until(&mut store, lost), "{:#?}", run.said);
    let (stop, mut timers) = (run.now, 0);
    while let Some(at) = run.m.awaits().waiting.until {
        run.now = run.now.max(at);
        run.step(Input::Timer);
        timers += 1;
        let next = run.m.awaits().waiting.until;
        assert!(
            next.is_none_or(|next| next > run.now),
            "woken at {:?} after the expiry, and named that instant again",
            run.now - stop
        );
        if run.now > stop + Duration::from_secs(60) {
            break;
        }
    }
    assert!(timers > 0, "its timer came while the body was stopping");
}

/// A replica won back whose blob is young (created again within `L + M`), or carries a later
/// epoch than the term's, is not written: it is given back, and tried again later.
#[test]
fn a_young_replica_or_a_later_epoch_is_given_back() {
    for young in [true, false] {
        let (mut run, mut store) = on_three();
        store.replicas[1].down = true;
        run.step(Input::Start);
        assert!(run.until(&mut store, body_started), "{:#?}", run.said);
        store.replicas[1].down = false;
        match young {
            true => store.replicas[1].blob.age = Duration::from_secs(2),
            false => store.replicas[1].blob.named = Some("200000".into()),
        }
        let released = |o: &Out| {
            matches!(o, Output::Send(s) if matches!(&s.request,
                Req::Leading(leading::Request::WinBack(quorum::Request::Release { replica: 1 }))))
        };
        assert!(run.until(&mut store, released), "{:#?}", run.said);
        let tries = won_back(&run);
        assert_eq!(
            tries,
            [(1, "acquire"), (1, "read"), (1, "release")],
            "young {young}: never written"
        );
    }
}

/// The record requests sent to replica `replica`, by what they ask.
fn record_requests(run: &Run, replica: usize) -> Vec<String> {
    (run.said.iter())
        .filter_map(|o| match o {
            Output::Send(s) => match &s.request {
                Req::OnReplica {
                    replica: r,
                    request,
                } if *r == replica => match &**request {
                    Req::Keeper(k) => Some(format!("{k:?}").split([' ', '(']).next()?.to_owned()),
                    Req::Leading(l) => Some(format!("{l:?}").split([' ', '(']).next()?.to_owned()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// Member records live on every replica (docs/quorum.md): a member's record requests and its
/// listings go to every replica side by side, each answered on its own; the line is the union
/// of what the replicas that answered list, so a member whose record one replica alone shows
/// (the others down, or its write there lost) is in line, and one region down (the first
/// too) takes nothing from it.
#[test]
fn member_records_live_on_every_replica_and_the_line_is_their_union() {
    let (mut run, mut store) = on_three();
    store.replicas[0].down = true;
    store.replicas[2].records = Some(vec![
        crate::testing::record("a", 0, 1, true),
        crate::testing::record("b", 0, 2, true),
    ]);
    run.step(Input::Start);
    assert!(run.until(&mut store, body_started), "{:#?}", run.said);
    for replica in 0..3 {
        let asked = record_requests(&run, replica);
        assert!(
            asked.iter().any(|a| a == "Create") && asked.iter().any(|a| a == "List"),
            "replica {replica}: {asked:?}"
        );
    }
    let line = &run.m.known().line;
    let members: Vec<&str> = line.members.iter().map(|r| r.id.as_str()).collect();
    assert!(members.contains(&"b"), "the union: {members:?}");
    assert!(members.contains(&"a"), "{members:?}");
    assert_eq!(members.len(), 2, "each member once: {members:?}");
}

/// The union keeps a member alive if any replica shows its record leased, and fails only if
/// no replica answered; a record request is done if any replica did it.
#[test]
fn the_union_of_listings_and_records_done_anywhere() {
    use super::lifetime::{self, Fails};
    use crate::member::fan::merge;
    let rec = crate::testing::record;
    let listed = |records| {
        Reply::<Test, Fails>::Listed(Ok(Listing {
            records,
            slots: None,
        }))
    };
    let failed = || Reply::<Test, Fails>::Listed(Err(lifetime::Fails(crate::Failure::Transient)));
    let merged = merge(vec![
        failed(),
        listed(vec![rec("a", 0, 1, false), rec("b", 0, 2, true)]),
        listed(vec![rec("a", 0, 1, true), rec("c", 0, 3, false)]),
    ]);
    let Reply::Listed(Ok(union)) = merged else {
        panic!("{merged:?}")
    };
    let seen: Vec<(&str, bool)> = (union.records.iter())
        .map(|r| (r.id.as_str(), r.alive))
        .collect();
    assert_eq!(seen, [("a", true), ("b", true), ("c", false)]);
    assert!(matches!(
        merge(vec![failed(), failed()]),
        Reply::Listed(Err(_))
    ));
    let done = |ok: bool| match ok {
        true => Reply::<Test, Fails>::Done(Ok(())),
        false => Reply::Done(Err(lifetime::Fails(crate::Failure::Transient))),
    };
    assert!(matches!(
        merge(vec![done(false), done(true), done(false)]),
        Reply::Done(Ok(()))
    ));
    assert!(matches!(
        merge(vec![done(false), done(false)]),
        Reply::Done(Err(_))
    ));
    // A successor's record read: the one a replica found, alive first.
    let read = |r: Option<crate::testing::Rec>| {
        Reply::<Test, Fails>::Leading(leading::Reply::Choice(Box::new(
            crate::choice::Reply::Read(r),
        )))
    };
    let merged = merge(vec![
        read(None),
        read(Some(rec("b", 0, 2, false))),
        read(Some(rec("b", 0, 2, true))),
    ]);
    let Reply::Leading(leading::Reply::Choice(chosen)) = merged else {
        panic!("{merged:?}")
    };
    let alive = matches!(*chosen, crate::choice::Reply::Read(Some(ref b)) if b.alive);
    assert!(alive, "{chosen:?}");
}

/// A request sent to every replica is one answer for its role once every replica answered:
/// the record keeper's first request goes to the three side by side, and the keeper goes on
/// only after the third answer, whatever the first two said.
#[test]
fn the_keeper_goes_on_once_every_replica_answered() {
    let (mut run, mut store) = on_three();
    let out = run.step(Input::Start);
    let parts: Vec<(crate::exchange::Tag, usize, Req)> = (out.iter())
        .filter_map(|o| match o {
            Output::Send(s) => match &s.request {
                Req::OnReplica { replica, request } => Some((s.tag, *replica, (**request).clone())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(parts.iter().map(|p| p.1).collect::<Vec<_>>(), [0, 1, 2]);
    assert!(
        parts
            .iter()
            .all(|p| format!("{:?}", p.2) == format!("{:?}", parts[0].2)
                && matches!(p.2, Req::Keeper(_)))
    );
    let keeper_sends = |out: &[Out]| {
        (out.iter())
            .any(|o| matches!(o, Output::Send(s) if matches!(&s.request, Req::OnReplica { .. })))
    };
    for (i, (tag, replica, request)) in parts.iter().enumerate() {
        let failed = Reply::Done(Err(super::lifetime::Fails(crate::Failure::Transient)));
        let reply = match *replica {
            1 => store
                .answer(&Req::OnReplica {
                    replica: 1,
                    request: Box::new(request.clone()),
                })
                .unwrap(),
            _ => failed,
        };
        let out = run.answer(*tag, reply);
        assert_eq!(keeper_sends(&out), i == 2, "answer {i}: {out:?}");
    }
}
