//! The handover of a term held on three replicas (docs/quorum.md, Handover): the
//! confirmation's read of every replica as one, a leader elsewhere, a hand-on's `change` judged
//! by every replica's answer, and a notice moved past a handoff's replica that is no longer the
//! term's.

use super::lifetime::{Out, Req, Run};
use super::replicas::on_three;
use super::*;
use crate::leading;

/// The confirmation's read on a set is every replica's, as one read (docs/quorum.md,
/// Handover): a successor's epoch on any replica is the handoff taken (it won a majority
/// without the handoff's replica, where its acquire came before the `change`); else the blob
/// is the handoff's replica's, whose ETag a hand-on is conditional on. The successor's record
/// is the one a replica found, alive first; gone only where no replica found it and none
/// left it unanswered.
#[test]
fn a_confirmations_read_is_every_replicas_and_sees_the_successor_anywhere() {
    use super::lifetime::Fails;
    use crate::Failure;
    use crate::confirmation::read_of;
    use crate::member::Confirming;
    use crate::testing::Rec;
    let rec = crate::testing::record;
    let (mut run, _) = on_three();
    let b = rec("b", 0, 2, true);
    let part = |named: &str, etag: &str, record: Option<Result<Option<Rec>, Fails>>| {
        let blob = Blob {
            named: Some(named.into()),
            etag: etag.into(),
            ..Blob::default()
        };
        let read = Confirming::<Test, Fails> {
            blob: Ok(blob),
            record,
            led: false,
        };
        Reply::<Test, Fails>::Confirming(Box::new(read))
    };
    let merged = |run: &mut Run, came: Vec<(usize, Reply<Test, Fails>)>| {
        let Reply::Confirming(read) = run.m.confirmed_on(&b, came) else {
            unreachable!("a read of every replica is one read")
        };
        read
    };
    // The tests' blobs carry epoch 4: `b`'s is above a term of epoch 3, `a`'s is not its.
    run.m.kept.epoch = Some(3);
    let came = vec![
        (0, part("a", "e0", None)),
        (2, part("b", "e2", None)),
        (1, part("a", "e1", None)),
    ];
    let read = merged(&mut run, came);
    let blob = read.blob.as_ref().unwrap();
    assert_eq!(read_of(blob, "a", "b", 3), crate::confirmation::Read::Taken);
    // Not taken anywhere: the handoff's replica's blob, whatever came first.
    (run.m.kept.epoch, run.m.kept.anchor) = (Some(4), 1);
    let came = vec![
        (0, part("c", "e0", None)),
        (2, part("d", "e2", None)),
        (1, part("a", "e1", None)),
    ];
    let read = merged(&mut run, came);
    let blob = read.blob.as_ref().unwrap();
    assert_eq!(
        read_of(blob, "a", "b", 4),
        crate::confirmation::Read::Ours("e1".to_owned())
    );
    // The record: found alive first, then unanswered (it stands), then gone.
    let failed = |f| Some(Err(Fails(f)));
    let mut record_of = |records: [Option<Result<Option<Rec>, Fails>>; 3]| {
        let came = (records.into_iter().enumerate())
            .map(|(i, r)| (i, part("a", "e", r)))
            .collect();
        merged(&mut run, came).record
    };
    let dead = rec("b", 0, 2, false);
    let found = record_of([
        Some(Ok(None)),
        Some(Ok(Some(dead.clone()))),
        Some(Ok(Some(b.clone()))),
    ]);
    assert!(matches!(found, Some(Ok(Some(r))) if r.alive), "alive first");
    let found = record_of([
        Some(Ok(None)),
        Some(Ok(Some(dead))),
        failed(Failure::Missing),
    ]);
    assert!(
        matches!(found, Some(Ok(Some(_)))),
        "found on one: {found:?}"
    );
    let stands = record_of([Some(Ok(None)), failed(Failure::Transient), Some(Ok(None))]);
    assert!(matches!(stands, Some(Err(Fails(Failure::Transient)))));
    let gone = record_of([Some(Ok(None)), failed(Failure::Missing), Some(Ok(None))]);
    assert!(matches!(
        gone,
        Some(Ok(None)) | Some(Err(Fails(Failure::Missing)))
    ));
}

/// The confirmation's read when the handoff's replica is no longer as the term left it
/// (created again: no holder metadata) while another replica the term wrote still is: that
/// one's blob is judged, and it is the handoff's replica from then on (seed 8601 of
/// `simulate --replicas any`: judged "not the holder's to move", the handoff ended handed to a
/// member that had left, and the others kept the lease under its id until it ran out).
#[test]
fn a_confirmation_judges_another_replica_where_the_handoffs_was_created_again() {
    use crate::confirmation::{Read, read_of};

    let (mut run, _) = on_three();
    let b = crate::testing::record("b", 0, 2, true);
    (run.m.kept.epoch, run.m.kept.anchor) = (Some(4), 1);
    run.m.kept.replica_etags = vec![Some("e0".into()), Some("e1".into()), Some("e2".into())];
    let read = confirming;
    // The tests' blobs carry epoch 4, the term's.
    let came = vec![
        (1, read(None, "new")),
        (0, read(Some("c"), "e0")),
        (2, read(Some("a"), "e2")),
    ];
    let Reply::Confirming(judged) = run.m.confirmed_on(&b, came) else {
        unreachable!("a read of every replica is one read")
    };
    let blob = judged.blob.as_ref().unwrap();
    assert_eq!(read_of(blob, "a", "b", 4), Read::Ours("e2".to_owned()));
    assert_eq!(run.m.kept.anchor, 2);
    assert_eq!(run.m.kept.replica_etags[1], None, "not the term's any more");
    // As the term left it: the handoff's replica stays.
    let came = vec![(2, read(Some("a"), "e2")), (0, read(Some("a"), "e0"))];
    let Reply::Confirming(judged) = run.m.confirmed_on(&b, came) else {
        unreachable!("a read of every replica is one read")
    };
    let blob = judged.blob.as_ref().unwrap();
    assert_eq!(read_of(blob, "a", "b", 4), Read::Ours("e2".to_owned()));
    assert_eq!(run.m.kept.anchor, 2);
}

/// A replica the term wrote that carries neither the term's write nor a later leader's (wiped
/// and created again, rolled back to an older epoch) holds no lease of the term's: the
/// confirmation's read drops it from the replicas a hand-on's `change` is mirrored to, where
/// its refusal (the ETag the term wrote is gone, 412) would count as a successor's write and,
/// with another such replica, outweigh the handoff's replica that took the change (seeds
/// 14702, 21580, 22712 of `simulate --replicas any`: the hand-on judged refused, the lease left
/// under the id of a member that had left). A later leader's epoch keeps its replica: its
/// refusal is a successor's write.
#[test]
fn a_replica_no_longer_the_terms_gets_no_mirrored_change() {
    let (mut run, _) = on_three();
    let b = crate::testing::record("b", 0, 2, true);
    let read = confirming;
    let etags = || vec![Some("e0".into()), Some("e1".into()), Some("e2".into())];
    // The term's epoch is 4; a blob named by a number carries it as its epoch.
    for (other, kept) in [(None, false), (Some("2"), false), (Some("9"), true)] {
        (run.m.kept.epoch, run.m.kept.anchor) = (Some(4), 1);
        run.m.kept.replica_etags = etags();
        let came = vec![
            (1, read(Some("a"), "e1")),
            (0, read(other, "new")),
            (2, read(Some("a"), "e2")),
        ];
        run.m.confirmed_on(&b, came);
        let expected = match kept {
            true => etags(),
            false => vec![None, Some("e1".into()), Some("e2".into())],
        };
        assert_eq!(run.m.kept.replica_etags, expected, "{other:?}");
        assert_eq!(run.m.kept.anchor, 1);
    }
}

/// Another member's epoch above the term's on a majority of the replicas is a leader elsewhere
/// (docs/quorum.md, Handover): the confirmation's read says so, and the handoff is over at
/// once; on one replica of three it is not (that member may not lead), nor is the term's own.
#[test]
fn another_members_epoch_on_a_majority_is_a_leader_elsewhere() {
    use super::lifetime::Fails;
    use crate::member::Confirming;
    let (mut run, _) = on_three();
    let b = crate::testing::record("b", 0, 2, true);
    // The tests' blobs carry epoch 4, above the term's 3.
    run.m.kept.epoch = Some(3);
    let part = |named: &str| {
        let blob = Blob {
            named: Some(named.into()),
            etag: "e".into(),
            ..Blob::default()
        };
        let read = Confirming::<Test, Fails> {
            blob: Ok(blob),
            record: None,
            led: false,
        };
        Reply::<Test, Fails>::Confirming(Box::new(read))
    };
    let led = |run: &mut Run, names: [&str; 3]| {
        let came = names
            .iter()
            .enumerate()
            .map(|(i, n)| (i, part(n)))
            .collect();
        let Reply::Confirming(read) = run.m.confirmed_on(&b, came) else {
            unreachable!("a read of every replica is one read")
        };
        read.led
    };
    assert!(led(&mut run, ["c", "a", "c"]), "on two of three");
    assert!(led(&mut run, ["c", "d", "a"]), "two others' epochs");
    assert!(!led(&mut run, ["c", "a", "a"]), "on one of three");
    run.m.kept.epoch = Some(4);
    assert!(!led(&mut run, ["c", "c", "c"]), "not above the term's");
}

/// A replica's answer to a hand-on's or a rekey's `change`: done (`None`) or failed so.
fn changed(answer: Option<crate::Failure>) -> Reply<Test, super::lifetime::Fails> {
    Reply::Leading(leading::Reply::Changed(match answer {
        None => Ok(()),
        Some(f) => Err(super::lifetime::Fails(f)),
    }))
}

/// The `change` answers the tests name: done; refused as written since (the tests' `Permanent`
/// is a 412); leased under another id (409); the blob gone (404).
const CHANGE_ANSWERS: [Option<crate::Failure>; 4] = [
    None,
    Some(crate::Failure::Permanent),
    Some(crate::Failure::LeaseLost),
    Some(crate::Failure::Missing),
];

/// A hand-on's (or a rekey's) `change` on a set is refused once more replicas than a
/// majority can spare refused it as written since the term's write (412: the successor wrote
/// its epoch there, and leads): the handoff's replica's success alone is then no hand-on.
/// Otherwise it is what the handoff's replica answered, decided as soon as no more refusals
/// could count. A replica leased under another id (409: another member's attempt holds it for
/// a moment, or the lease ran out), whose blob is gone, that did not answer or that the term
/// never wrote counts for no one.
#[test]
fn a_hand_on_is_refused_once_a_majority_was_written_since() {
    use crate::Failure;
    use crate::member::fan::on_a_majority;
    let [ok, written, taken, gone] = CHANGE_ANSWERS;
    let decide = |came: Vec<(usize, Option<Failure>)>, left, anchor| {
        let mut came = came.into_iter().map(|(i, a)| (i, changed(a))).collect();
        on_a_majority(&mut came, left, 3, anchor)
            .map(|reply| matches!(reply, Reply::Leading(leading::Reply::Changed(Ok(())))))
    };
    assert_eq!(
        decide(vec![(0, ok), (2, written), (1, written)], 0, 0),
        Some(false)
    );
    assert_eq!(
        decide(vec![(2, written), (1, written)], 1, 0),
        Some(false),
        "at once"
    );
    assert_eq!(
        decide(vec![(0, ok), (2, written)], 1, 0),
        None,
        "one more may refuse"
    );
    assert_eq!(decide(vec![(0, ok), (2, ok)], 1, 0), Some(true));
    assert_eq!(
        decide(vec![(0, ok), (2, gone), (1, written)], 0, 0),
        Some(true)
    );
    assert_eq!(
        decide(vec![(1, ok), (0, written), (2, ok)], 0, 1),
        Some(true)
    );
    assert_eq!(
        decide(vec![(1, gone), (2, ok)], 1, 1),
        Some(false),
        "the anchor's"
    );
    // Replica 0 never written by the term (a rolled-back one refuses too): no one's majority.
    assert_eq!(decide(vec![(1, ok), (2, written)], 0, 1), Some(true));
    assert_eq!(decide(vec![(1, ok)], 1, 1), Some(true), "decided");
    // Leased for a moment by a poller's attempt, beside one rolled back (seed 334 of
    // `--replicas any`): no sign of a leader, the lease moved on the handoff's replica.
    assert_eq!(
        decide(vec![(1, ok), (2, written), (0, taken)], 0, 1),
        Some(true)
    );
    assert_eq!(
        decide(vec![(0, ok), (1, taken), (2, taken)], 0, 0),
        Some(true)
    );
}

/// A hand-on's or a rekey's `change` refused on the handoff's replica because its lease there
/// is no longer the term's (409: it ran out and another member took it; 404: the blob is gone)
/// is judged by another replica that took it, which is the handoff's replica from then on (a
/// rekey judged refused by the anchor alone, in a history of `simulate --replicas any`, left
/// the lease changed on the other two under the new id while the notice that followed went
/// under the old one, refused everywhere; nobody led until those leases ran out). Until one
/// took it, the change waits; if none did, the anchor's answer stands.
#[test]
fn a_change_refused_where_the_lease_is_no_longer_the_terms_is_judged_by_another() {
    use crate::Failure;
    use crate::member::fan::judged_on;
    let [ok, written, taken, gone] = CHANGE_ANSWERS;
    let judge = |came: Vec<(usize, Option<Failure>)>, left| {
        let came: Vec<_> = came.into_iter().map(|(i, a)| (i, changed(a))).collect();
        judged_on(&came, left, 0)
    };
    assert_eq!(judge(vec![(1, ok), (0, taken)], 1), Some(1));
    assert_eq!(judge(vec![(0, gone), (2, ok)], 1), Some(2));
    assert_eq!(judge(vec![(0, taken)], 2), None, "another may take it");
    assert_eq!(
        judge(vec![(0, taken), (1, taken), (2, written)], 0),
        Some(0)
    );
    assert_eq!(
        judge(vec![(0, written), (1, ok)], 1),
        Some(0),
        "written since"
    );
    assert_eq!(judge(vec![(1, taken), (0, ok)], 1), Some(0));
}

/// A hand-on's notice refused on the handoff's replica as no longer the term's (wiped: 404,
/// rolled back: 412, its lease gone: 409) goes to the next replica the term wrote its epoch to,
/// conditional on that replica's ETag after the write, and that replica is the handoff's from
/// then on (seed 11019 of `--replicas any`: the lease changed on the others to a member that
/// had left ran out unclaimed). Each refused replica is tried once; a refusal of another kind,
/// or with no replica left, is the confirmation's to judge.
#[test]
fn a_notice_refused_on_a_replica_no_longer_the_terms_goes_to_the_next() {
    use super::lifetime::Fails;
    use crate::Failure;
    use crate::handoff::Request as H;
    use crate::member::machine::{Route, Who};
    use crate::member::replies::Asked;
    let rec = crate::testing::record;
    let (mut run, _) = on_three();
    run.m.kept.replica_etags = vec![Some("e0".into()), Some("e1".into()), Some("e2".into())];
    let tag = crate::exchange::Tags::default().fresh();
    let notice = |etag: &str| leading::Request::Store {
        request: Box::new(H::Notice {
            from: rec("b", 0, 2, true),
            to: rec("c", 0, 3, true),
            passed_over: vec![rec("b", 0, 2, true)],
            etag: etag.to_owned(),
        }),
        limit: run.t0,
    };
    let route = |asked| Route {
        who: Who::Leading,
        tag,
        asked: Asked::Leading(asked),
        sent: run.t0,
    };
    let refused = |f| Reply::Leading(leading::Reply::Noticed(Err(Fails(f))));
    let resent = |out: &Vec<Out>| {
        (out.iter()).find_map(|o| match o {
            Output::Send(s) => match &s.request {
                Req::OnReplica { replica, request } => match &**request {
                    Req::Leading(leading::Request::Store { request, .. }) => match &**request {
                        H::Notice { etag, to, .. } => Some((*replica, etag.clone(), to.id.clone())),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        })
    };
    let mut out = Vec::new();
    let now = run.t0;
    let transient = refused(Failure::Transient);
    assert!(
        !run.m
            .reanchor_notice(now, &route(notice("e0+")), &transient, &mut out)
    );
    assert!(out.is_empty() && run.m.kept.anchor == 0);
    // Rolled back: the notice goes to replica 1, on its ETag after the term's write.
    let written = refused(Failure::Permanent);
    assert!(
        run.m
            .reanchor_notice(now, &route(notice("e0+")), &written, &mut out)
    );
    assert_eq!(resent(&out), Some((1, "e1".to_owned(), "c".to_owned())));
    assert_eq!(run.m.kept.anchor, 1);
    assert_eq!(run.m.kept.replica_etags[0], None, "not the term's any more");
    // Its lease gone there too: replica 2; then none is left.
    out.clear();
    let taken = refused(Failure::LeaseLost);
    assert!(
        run.m
            .reanchor_notice(now, &route(notice("e1")), &taken, &mut out)
    );
    assert_eq!(
        resent(&out).map(|(r, e, _)| (r, e)),
        Some((2, "e2".to_owned()))
    );
    out.clear();
    let gone = refused(Failure::Missing);
    assert!(
        !run.m
            .reanchor_notice(now, &route(notice("e2")), &gone, &mut out)
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(run.m.kept.anchor, 2);
}

/// A replica's answer to a confirmation's read: its blob naming `named`, with `etag`, no record.
fn confirming(named: Option<&str>, etag: &str) -> Reply<Test, super::lifetime::Fails> {
    let blob = Blob {
        named: named.map(str::to_owned),
        etag: etag.into(),
        ..Blob::default()
    };
    let read = crate::member::Confirming::<Test, super::lifetime::Fails> {
        blob: Ok(blob),
        record: None,
        led: false,
    };
    Reply::Confirming(Box::new(read))
}
