//! What a member takes in of its term's handoff before the term hears of it: the
//! confirmation's read judged by the member's own line (which takes a fresh record of the
//! successor), and its standby's write.

use super::*;
use crate::Failure;
use crate::confirmation::{Read as Seen, Record as Judged};
use crate::handoff::Request as H;
use crate::leading::{Reply as L, Request as R};
use crate::member::Confirming;
use crate::member::replies::Taking;
use crate::testing::{Fails, Rec};

/// What `a` knows while it hands over its term of epoch `epoch`; `f` takes what `asked` came
/// to, with the member's own notes and flags.
fn taking<T>(
    known: &mut Known<Instant, Test>,
    epoch: u64,
    now: Instant,
    f: impl FnOnce(&mut Taking<'_, Instant, Test>) -> T,
) -> (T, bool) {
    let mut kept = Kept::<Test> {
        epoch: Some(epoch),
        ..Kept::default()
    };
    let (mut etag, mut notes) = (None, Vec::new());
    let mut t = Taking {
        known,
        kept: &mut kept,
        etag: &mut etag,
        now,
        wall: 100,
        notes: &mut notes,
        show: false,
        ghost: None,
        poke: false,
    };
    let got = f(&mut t);
    (got, t.poke)
}

/// The confirmation's read of `b`, with its record read as `record`.
fn read_of_b(b: &Rec) -> R<Instant, Rec, String> {
    R::Store {
        request: Box::new(H::Read {
            successor: b.clone(),
            record: true,
        }),
        limit: Instant::now(),
    }
}

/// The blob as the member reads it: its own holder metadata of the term's epoch is the
/// handoff's to move (with its ETag), `b`'s epoch above the term's is the lease taken (and
/// `b`'s record then is not judged), anything else is not ours, no read unanswered. A fresh
/// record that shows `b` still the successor goes into the line; none is `b` gone.
#[test]
fn the_confirmations_read_is_judged_by_the_members_line() {
    let t0 = Instant::now();
    let mut k = known("a", 1, t0);
    let b = (k.line.members.iter())
        .find(|r| r.id == "b")
        .cloned()
        .unwrap();
    let fresh = Rec {
        age: Duration::from_secs(3),
        ..b.clone()
    };
    let blob = |named: &str| Blob {
        named: Some(named.into()),
        etag: "e7".into(),
        ..Blob::default()
    };
    // The blobs of the tests carry epoch 4.
    // (`led`: on several replicas, another member's epoch on a majority, which the successor's
    // own outweighs)
    for (named, epoch, led, seen) in [
        ("a", 4, false, Seen::Ours("e7".to_owned())),
        ("b", 3, false, Seen::Taken),
        ("b", 4, false, Seen::Other),
        ("a", 3, false, Seen::Other),
        ("a", 4, true, Seen::Led),
        ("c", 3, true, Seen::Led),
        ("b", 3, true, Seen::Taken),
    ] {
        let came: Reply<Test, Fails> = Reply::Confirming(Box::new(Confirming {
            blob: Ok(blob(named)),
            record: Some(Ok(Some(fresh.clone()))),
            led,
        }));
        let (reply, _) = taking(&mut k, epoch, t0, |t| t.leading(&read_of_b(&b), came));
        let judged = (seen != Seen::Taken).then_some(Judged::Stands);
        assert_eq!(
            reply,
            Some(L::Read(seen, judged.map(Box::new))),
            "{named} at {epoch}"
        );
    }
    let in_line = (k.line.members.iter()).find(|r| r.id == "b").unwrap();
    assert_eq!(in_line.age, fresh.age, "the line took the fresh record");
    let came: Reply<Test, Fails> = Reply::Confirming(Box::new(Confirming {
        blob: Err(Fails(Failure::Transient)),
        record: Some(Ok(None)),
        led: false,
    }));
    let (reply, _) = taking(&mut k, 4, t0, |t| t.leading(&read_of_b(&b), came));
    assert_eq!(
        reply,
        Some(L::Read(Seen::Unanswered, Some(Box::new(Judged::Gone))))
    );
}

/// A standby written is what the record says if it says nothing newer since; one not written
/// is the record keeper's to write (it is poked); the choice goes on either way.
#[test]
fn a_standby_written_is_the_records_word_and_one_not_written_the_keepers() {
    let t0 = Instant::now();
    let mut k = known("a", 1, t0);
    let standby = R::Standby {
        cooldown: Duration::from_secs(60),
        limit: t0,
    };
    for (wrote, written, poked) in [
        (Ok(Says(None)), true, false),
        (Ok(Says(Some(Duration::from_secs(1)))), false, false),
        (Err(Fails(Failure::Transient)), false, true),
    ] {
        k.own.written = false;
        let (reply, poke) = taking(&mut k, 4, t0, |t| {
            t.leading(&standby, Reply::Wrote(wrote.map(Box::new)))
        });
        assert_eq!(reply, Some(L::StoodBy));
        assert_eq!((k.own.written, poke), (written, poked));
    }
}
