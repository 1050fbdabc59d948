//! The handoff's requests carried out: the choice's notice and read, the record's standby, the
//! `change`, a hand-on's notice, a conditional release, the confirmation's read (the
//! successor's record, then the blob, within one limit), the mutant's `change`; and what is left
//! not carried (a term with no epoch on record, a replica beyond the first).

use super::*;
use crate::choice;
use crate::handoff::Request as H;
use crate::line::Standing;
use crate::member::Confirming;
use leading::{Reply as L, Request as R};

/// The term `a` holds: slot 2, lease id `term`, epoch 7, begun at wall 50.
fn term() -> Kept<Test> {
    Kept {
        slot: 2,
        id: Some("term".into()),
        epoch: Some(7),
        wall: Some(50),
        ..Kept::default()
    }
}

/// Carries `request` with `known` and `kept`, at `now`; the record's lease is `rec`.
fn carried(
    known: &Known<Instant, Test>,
    kept: &Kept<Test>,
    request: R<Instant, Rec, String>,
    now: Instant,
) -> Start<Instant, Test> {
    let (next, rec) = ("next".to_owned(), "rec".to_owned());
    let view = View {
        known,
        kept,
        next_id: &next,
        record_lease: &rec,
        create_if_missing: true,
    };
    carry(&view, &Request::Leading(request), now, 100)
}

/// The member `b`, which acquires with lease `lease-4`.
fn b() -> Rec {
    Rec {
        acquires_with: 4,
        ..record("b", 0, 2, true)
    }
}

/// The one call `start` sends, its limit, and the reply to `ret`.
fn one(
    start: Start<Instant, Test>,
    ret: Return<Test>,
    now: Instant,
) -> (Call<Test>, Option<Instant>, Reply<Test, Fails>) {
    let Start::Call(mut carrying, call) = start else {
        panic!("not a call");
    };
    let limit = carrying.limit();
    let Step::Reply(reply) = carrying.answer(ret, now) else {
        panic!("more than one call");
    };
    (call, limit, reply)
}

/// The choice's notice names its member under the term's lease on the term's slot, on no
/// condition, with the term's holder metadata again, reserving the next epoch for that
/// member's lease id; written, it is the choice's notice with the blob's ETag after it.
#[test]
fn the_choices_notice_is_written_under_the_terms_lease_reserving_the_next_epoch() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let limit = t0 + Duration::from_secs(2);
    let notice = R::Choice {
        request: Box::new(choice::Request::Notice(b())),
        limit,
    };
    let ret = Return::WriteNotice(Ok("e2".into()));
    let (call, at, reply) = one(carried(&k, &term(), notice, t0), ret, t0);
    assert_eq!(
        call,
        Call::WriteNotice {
            slot: 2,
            id: "term".into(),
            holder: ("a".into(), 7),
            notice: "b over [] at Some(8)".into(),
            if_match: None,
        }
    );
    assert_eq!(at, Some(limit));
    assert!(
        matches!(&reply, Reply::Leading(L::Choice(c)) if matches!(&**c, choice::Reply::Noticed(Ok(n)) if n == "b at Some(8): e2")),
        "{reply:?}"
    );
}

/// The choice's read of a member's record: the record as read; gone or not read, none.
#[test]
fn the_choices_read_is_the_record_read_or_none() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let read = || R::Choice {
        request: Box::new(choice::Request::Read(b())),
        limit: t0,
    };
    for (ret, read_back) in [
        (Return::ReadRecord(Ok(Some(b()))), Some(b())),
        (Return::ReadRecord(Ok(None)), None),
        (Return::ReadRecord(Err(Fails(Failure::Transient))), None),
    ] {
        let (call, _, reply) = one(carried(&k, &term(), read(), t0), ret, t0);
        assert_eq!(call, Call::ReadRecord { key: "b".into() });
        let Reply::Leading(L::Choice(choice)) = reply else {
            panic!("{reply:?}");
        };
        let choice::Reply::Read(got) = *choice else {
            panic!("{choice:?}");
        };
        assert_eq!(got, read_back);
    }
}

/// The standby is written as the record says it now (the member set it when its term asked),
/// under the record's lease: written, the reply says what; a member out of line has no record
/// to write, and the choice goes on at once.
#[test]
fn the_standby_writes_the_record_as_it_says_now_unless_out_of_line() {
    let t0 = Instant::now();
    let mut k = known(1, true, t0);
    k.line.standing = Standing::Joined;
    let standby = || R::Standby {
        cooldown: Duration::from_secs(60),
        limit: t0,
    };
    let (call, _, reply) = one(
        carried(&k, &term(), standby(), t0),
        Return::WriteMember(Ok(())),
        t0,
    );
    assert_eq!(
        call,
        Call::WriteMember {
            key: "a".into(),
            id: "rec".into(),
            member: Says,
        }
    );
    assert!(
        matches!(&reply, Reply::Wrote(Ok(s)) if matches!(**s, Says)),
        "{reply:?}"
    );
    k.line.standing = Standing::Joining;
    let start = carried(&k, &term(), standby(), t0);
    assert!(matches!(start, Start::Reply(Reply::Leading(L::StoodBy))));
}

/// The `change` goes from the term's own lease id, or from the lease id of the member it was
/// changed to, to the successor's, on the condition given; a hand-on's notice is written
/// under the lease id the lease has now, only while the blob's ETag is the one the handoff
/// left, naming the members passed over; a conditional release goes under that lease id too.
#[test]
fn the_change_the_hand_on_and_the_conditional_release_go_under_the_lease_id_it_has_now() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let c = Rec {
        acquires_with: 9,
        ..record("c", 0, 3, true)
    };
    let store = |request| R::Store {
        request: Box::new(request),
        limit: t0,
    };
    let change = |from: Option<Rec>, etag: Option<&str>| {
        store(H::Change {
            from,
            to: c.clone(),
            etag: etag.map(Into::into),
        })
    };
    for (from, etag, id) in [(None, None, "term"), (Some(b()), Some("e3"), "lease-4")] {
        let (call, _, reply) = one(
            carried(&k, &term(), change(from, etag), t0),
            Return::Change(Ok(())),
            t0,
        );
        assert_eq!(
            call,
            Call::Change {
                slot: 2,
                id: id.into(),
                proposed: "lease-9".into(),
                if_match: etag.map(Into::into),
            }
        );
        assert!(matches!(reply, Reply::Leading(L::Changed(Ok(())))));
    }
    let hand_on = store(H::Notice {
        from: b(),
        to: c.clone(),
        passed_over: vec![b()],
        etag: "e3".into(),
    });
    let (call, _, reply) = one(
        carried(&k, &term(), hand_on, t0),
        Return::WriteNotice(Ok("e4".into())),
        t0,
    );
    assert_eq!(
        call,
        Call::WriteNotice {
            slot: 2,
            id: "lease-4".into(),
            holder: ("a".into(), 7),
            notice: "c over [\"b\"] at Some(8)".into(),
            if_match: Some("e3".into()),
        }
    );
    assert!(matches!(&reply, Reply::Leading(L::Noticed(Ok(e))) if e == "e4"));
    for (answer, confirmed) in [(Ok(()), true), (Err(Fails(Failure::Held)), false)] {
        let release = store(H::ReleaseIf {
            from: b(),
            etag: "e4".into(),
        });
        let (call, _, reply) = one(
            carried(&k, &term(), release, t0),
            Return::ReleaseIf(answer),
            t0,
        );
        assert_eq!(
            call,
            Call::ReleaseIf {
                slot: 2,
                id: "lease-4".into(),
                etag: "e4".into(),
            }
        );
        assert!(matches!(reply, Reply::Leading(L::Released(c)) if c.is_ok() == confirmed));
    }
}

/// The confirmation's read: when asked, the successor's record first, then the term's blob,
/// the blob's read cut at the request's one limit (none sent once it passed, and counted
/// unanswered); both come back as read, for the member to judge. The record first: a successor
/// that published a new lease id by then had written its epoch, which the blob then shows.
#[test]
fn the_confirmations_read_is_the_record_then_the_blob_within_one_limit() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let limit = t0 + Duration::from_secs(3);
    let read = |record| R::Store {
        request: Box::new(H::Read {
            successor: b(),
            record,
        }),
        limit,
    };
    let blob = || Return::Read(Ok(Blob("e5".into())));
    // Without the record: one read of the term's slot.
    let (call, at, reply) = one(carried(&k, &term(), read(false), t0), blob(), t0);
    assert_eq!((call, at), (Call::Read { slot: 2 }, Some(limit)));
    assert!(
        matches!(&reply, Reply::Confirming(c) if matches!(&**c, Confirming { blob: Ok(Blob(e)), record: None, led: false } if e == "e5")),
        "{reply:?}"
    );
    // With it: the record, then the blob within the same limit.
    let Start::Call(mut carrying, call) = carried(&k, &term(), read(true), t0) else {
        panic!("a read is a call");
    };
    assert_eq!(call, Call::ReadRecord { key: "b".into() });
    let soon = t0 + Duration::from_millis(10);
    let Step::Call(next) = carrying.answer(Return::ReadRecord(Ok(Some(b()))), soon) else {
        panic!("the blob is read next");
    };
    assert_eq!(next, Call::Read { slot: 2 });
    assert_eq!(carrying.limit(), Some(limit), "one limit for both");
    let Step::Reply(reply) = carrying.answer(blob(), soon) else {
        panic!("done");
    };
    assert!(
        matches!(&reply, Reply::Confirming(c) if matches!(&**c, Confirming { blob: Ok(_), record: Some(Ok(Some(r))), led: false } if *r == b())),
        "{reply:?}"
    );
    // The record's read took the whole limit: no blob read, and none answered.
    let Start::Call(mut carrying, _) = carried(&k, &term(), read(true), t0) else {
        panic!("a read is a call");
    };
    let cut = Call::<Test>::ReadRecord { key: "b".into() }.failed(Fails(Failure::Transient));
    let Step::Reply(reply) = carrying.answer(cut, limit) else {
        panic!("no blob read past the limit");
    };
    assert!(
        matches!(
            &reply,
            Reply::Confirming(c) if matches!(&**c, Confirming {
                blob: Err(_),
                record: Some(Err(_)),
                led: false,
            })
        ),
        "{reply:?}"
    );
}

/// The mutant `change-before-gone` changes the lease under the term's own lease id to its
/// successor's, and waits for the answer with no limit.
#[test]
fn the_mutants_change_goes_under_the_terms_lease_with_no_limit() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let (call, limit, reply) = one(
        carried(&k, &term(), R::ChangeBeforeGone(Box::new(b())), t0),
        Return::Change(Err(Fails(Failure::Held))),
        t0,
    );
    assert_eq!(
        call,
        Call::Change {
            slot: 2,
            id: "term".into(),
            proposed: "lease-4".into(),
            if_match: None,
        }
    );
    assert_eq!(limit, None);
    assert!(matches!(reply, Reply::Leading(L::Changed(Err(_)))));
}

/// What is not carried: the handoff's requests of a term with no epoch on record (a driver's
/// mistake: a term won has one), cut at their limit as storage never answering. A renew of a
/// replica beyond the first is carried, to that replica.
#[test]
fn a_term_without_its_epoch_is_not_carried_and_a_renew_goes_to_its_replica() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let no_epoch = Kept {
        epoch: None,
        ..term()
    };
    let change = R::Store {
        request: Box::new(H::Change {
            from: None,
            to: b(),
            etag: None,
        }),
        limit: t0,
    };
    let start = carried(&k, &no_epoch, change, t0);
    assert!(matches!(
        start,
        Start::NotCarried {
            limit: Some(_),
            cut: Reply::Leading(L::Changed(Err(_)))
        }
    ));
    let renew = R::Renew(holder::Renew {
        replica: 1,
        limit: t0,
    });
    let Start::Call(carrying, Call::Renew { slot: 2, .. }) = carried(&k, &term(), renew, t0) else {
        panic!("a renew of the second replica is a renew");
    };
    assert_eq!(carrying.replica(), 1, "sent to the second replica");
}

/// On several replicas, a hand-on's notice is written on the handoff's replica and carries that
/// replica's own stamp, whichever place it has: a metadata write replaces every key, and a
/// replica left with another's id counts once for both (docs/quorum.md, *One replica set*).
#[test]
fn a_notice_on_a_set_carries_the_stamp_of_the_replica_it_is_written_on() {
    use crate::quorum::{ReplicaId, ReplicaSet, Stamp};
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let set = ReplicaSet::new(&["one", "two", "three"]).expect("a set of three");
    let stamped = |id| Some((Blob("e".into()), Stamp::new(&set, ReplicaId(id))));
    for anchor in [0, 1, 2] {
        let kept = Kept {
            replicas: vec![stamped(10), stamped(11), stamped(12)],
            anchor,
            ..term()
        };
        let hand_on = R::Store {
            request: Box::new(H::Notice {
                from: b(),
                to: b(),
                passed_over: Vec::new(),
                etag: "e3".into(),
            }),
            limit: t0,
        };
        let (call, _, _) = one(
            carried(&k, &kept, hand_on, t0),
            Return::WriteNotice(Ok("e4".into())),
            t0,
        );
        let Call::WriteNotice { holder, .. } = call else {
            panic!("not a notice: {call:?}");
        };
        assert_eq!(holder, (format!("a@{}", 10 + anchor), 7), "anchor {anchor}");
    }
}
