//! Leases a partition may have left on a replica (docs/quorum.md, *Leases left by a
//! partition*): the ids of acquires whose outcome was never heard are kept per replica, and
//! released there once it refuses an acquire as held.

use super::lifetime::{Out, Req, Run};
use super::replicas::{on_replica, on_three};
use super::*;
use crate::member::strays::KEPT_PER_REPLICA;
use crate::quorum;

/// The releases sent in `out` on `replica` with a lease id (none of the attempt's own
/// releases, which name no id).
fn stray_releases(out: &[Out], replica: usize) -> Vec<String> {
    (out.iter())
        .filter_map(|o| match o {
            Output::Send(s) => match &s.request {
                Req::Release { replica: r, id, .. } if *r == replica => id.clone(),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn acquires_on(run: &Run, replica: usize) -> usize {
    run.sent(|r| {
        matches!(on_replica(r), Some(quorum::Request::Acquire { replica: at, .. }) if at == replica)
    })
}

/// Replica 1 cut off for longer than `L` while the others are held: every attempt's acquire
/// there goes unanswered, and the first ones are let go. Then it answers again, refusing as
/// held (a lease one of those acquires took as the partition ended): the member releases
/// there, once each, the lease of every attempt whose acquire it let go, and never under the id
/// it acquires with now.
#[test]
fn the_leases_a_partition_may_have_left_are_released_once_the_replica_refuses_as_held() {
    let (mut run, mut store) = on_three();
    store.replicas[0].held = true;
    store.replicas[2].held = true;
    store.replicas[1].down = true;
    run.step(Input::Start);
    let t = crate::Timing::default();
    let start = run.now;
    let acquire = |r: &Req| matches!(on_replica(r), Some(quorum::Request::Acquire { .. }));
    let again = |o: &Out| matches!(o, Output::Send(s) if acquire(&s.request));
    while run.now < start + t.duration * 2 {
        assert!(run.until(&mut store, again), "{:#?}", run.said);
    }
    let cut = acquires_on(&run, 1);
    assert!(cut >= 3, "attempts cut off on replica 1: {cut}");
    assert!(
        stray_releases(&run.said, 1).is_empty(),
        "nothing released before the replica answers: {:#?}",
        run.said
    );
    // The replica answers again, held by a lease one of the acquires took.
    store.replicas[1].down = false;
    store.replicas[1].held = true;
    let from = run.said.len();
    let released = |o: &Out| matches!(o, Output::Send(s) if matches!(s.request, Req::Release { replica: 1, .. }));
    assert!(run.until(&mut store, released), "{:#?}", run.said);
    let now_id = run.m.kept().id.clone().expect("an attempt under way");
    let ids = stray_releases(&run.said[from..], 1);
    eprintln!(
        "{cut} acquires cut off on replica 1; released there under {ids:?}, acquiring under {now_id}"
    );
    assert!(!ids.contains(&now_id), "{ids:?} {now_id}");
    // The acquires let go (L after their send) are the older attempts', of the newest kept;
    // the later ones' answers were still awaited, and came (refused: they took nothing).
    let first: usize = ids
        .first()
        .and_then(|id| id.strip_prefix("id-")?.parse().ok())
        .unwrap_or(0);
    let let_go: Vec<String> = (first..first + ids.len())
        .map(|i| format!("id-{i}"))
        .collect();
    assert!(
        ids.len() >= 2 && ids == let_go && first + KEPT_PER_REPLICA + 1 >= cut,
        "the lease id of each attempt whose acquire was let go, once, of the newest \
         {KEPT_PER_REPLICA} kept: {ids:?} of {cut} acquires"
    );
    // Refused as held again: nothing is released twice.
    let from = run.said.len();
    let before = acquires_on(&run, 1);
    while acquires_on(&run, 1) < before + 2 {
        assert!(run.until(&mut store, again), "{:#?}", run.said);
    }
    assert!(
        stray_releases(&run.said[from..], 1).is_empty(),
        "released again: {:#?}",
        &run.said[from..]
    );
}

/// A term on three replicas loses two regions and ends by its stop deadline, its renews and
/// its releases there cut. One region answers again, held: a renew of the term held by the
/// partition took that replica's lapsed lease again as it ended, under the term's id, which
/// nobody renews or counts any more. The member releases it there once that replica refuses
/// its acquire as held, beside the leases its own cut acquires may have left.
#[test]
fn a_terms_lease_a_partition_may_have_renewed_is_released_once_the_replica_refuses_as_held() {
    let (mut run, mut store) = on_three();
    run.step(Input::Start);
    assert!(
        run.until(&mut store, super::lifetime::body_started),
        "{:#?}",
        run.said
    );
    let term_id = run.m.kept().id.clone().expect("the term's lease id");
    store.replicas[1].down = true;
    store.replicas[2].down = true;
    // The stop deadline: the body's own guard stops it then. (The record keeper's requests
    // to every replica take many steps: `until` is called again until it comes.)
    let stop = |o: &Out| matches!(o, Output::Tenure(crate::holder::Tenure::Expired(_)));
    let (from, start) = (run.said.len(), run.now);
    while !run.said[from..].iter().any(stop) {
        assert!(run.now < start + crate::Timing::default().duration * 2);
        run.until(&mut store, stop);
    }
    super::lifetime::ended(&mut run, &mut store, crate::term::TermEnd::Expired);
    // Replica 1 answers again, held under the term's id by its late renew.
    store.replicas[1].down = false;
    store.replicas[1].held = true;
    let from = run.said.len();
    let released = |o: &Out| matches!(o, Output::Send(s) if matches!(s.request, Req::Release { replica: 1, .. }));
    assert!(run.until(&mut store, released), "{:#?}", run.said);
    let ids = stray_releases(&run.said[from..], 1);
    eprintln!("the term's lease id {term_id}; released on replica 1 under {ids:?}");
    assert!(ids.contains(&term_id), "{ids:?} {term_id}");
    // Not on replica 2, which answers nothing yet, nor twice.
    assert!(stray_releases(&run.said[from..], 2).is_empty());
    assert_eq!(
        ids.iter().filter(|id| **id == term_id).count(),
        1,
        "{ids:?}"
    );
}
