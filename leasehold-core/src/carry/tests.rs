//! The translation's sequences: a blob created again (marked or not, after a listing or not),
//! the keeper's tidying, a listing with slots or without, a call cut at its limit.

use super::*;
use crate::campaign::{self, Failed};
use crate::failure::Failure;
use crate::member::{Kept, Kinds, Known, Publish, Reply, Request};
use crate::pace::Pace;
use crate::store::{Call, Return, Types};
use crate::testing::Fails;
use crate::testing::{Rec, Slot, record};
use crate::timing::Timing;
use crate::{attempt, holder, leading, record};
use std::time::{Duration, Instant};

/// What a record says: nothing the translation reads.
#[derive(Debug, Clone, PartialEq)]
struct Says;

impl Publish for Says {
    fn settled(&self) -> Option<Duration> {
        None
    }
    fn set_settled(&mut self, _: Option<Duration>) {}
}

/// A read of a blob: its ETag.
#[derive(Debug, Clone)]
struct Blob(String);

impl crate::blob::LeaseBlob for Blob {
    type ETag = String;
    fn leased(&self) -> bool {
        false
    }
    fn etag(&self) -> &String {
        &self.0
    }
    fn named(&self) -> Option<&str> {
        None
    }
    fn epoch(&self) -> Option<u64> {
        None
    }
    fn slots_recorded(&self) -> Option<u32> {
        None
    }
    fn notice(&self) -> Option<&str> {
        None
    }
    fn passed_over(&self) -> &[String] {
        &[]
    }
    fn recreated(&self) -> bool {
        false
    }
    fn age(&self) -> Duration {
        Duration::ZERO
    }
}

/// The tests' store: strings and numbers.
#[derive(Debug, Clone, PartialEq)]
struct Test;

impl Kinds for Test {
    type Wall = u64;
    type Record = Rec;
    type Slot = Slot;
    type Published = Says;
    type Blob = Blob;
    type ETag = String;
    type LeaseId = String;
    type Notice = String;
    fn key_of(identity: &str) -> String {
        identity.to_owned()
    }
    fn record_etag(record: &Rec) -> &String {
        &record.id
    }
    fn names(_: &String, _: &Rec) -> bool {
        false
    }
    fn notice_etag(notice: String) -> String {
        notice
    }
    fn acquire_with(_: &mut Says, _: &String) -> bool {
        false
    }
    fn back_in_line(_: &mut Says) -> bool {
        false
    }
    fn stand_by(_: &mut Says, _: u64, _: Duration) {}
}

impl Types for Test {
    type LeaseId = String;
    type ETag = String;
    type Read = Blob;
    type Holder = (String, u64);
    type Notice = String;
    type LeaseState = bool;
    type Check = bool;
    type Key = String;
    type Record = Rec;
    type Publish = Says;
    type Slot = Slot;
    type Error = Fails;
}

impl Carry for Test {
    type Store = Test;
    fn holder(me: &str, epoch: u64, _: u64, _: &String, _: Option<u32>) -> (String, u64) {
        (me.to_owned(), epoch)
    }
    /// The stamp's id after the holder's name, so that a test sees which replica's it is.
    fn stamp(holder: &mut (String, u64), stamp: crate::quorum::Stamp) {
        if let Some(id) = stamp.id {
            holder.0 = format!("{}@{}", holder.0, id.0);
        }
    }
    fn leased(state: &bool) -> bool {
        *state
    }
    fn notice(to: &Rec, passed_over: Vec<String>, reserved: Option<u64>) -> String {
        format!("{} over {passed_over:?} at {reserved:?}", to.id)
    }
    fn noticed(to: &Rec, reserved: Option<u64>, etag: String) -> String {
        format!("{} at {reserved:?}: {etag}", to.id)
    }
    fn lease_of(record: &Rec) -> String {
        format!("lease-{}", record.acquires_with)
    }
}

/// What member `a` knows, of `slots` slots: the line `a`, `b` (alive or not), `c`, dead.
fn known(slots: u32, b_alive: bool, t0: Instant) -> Known<Instant, Test> {
    let mut k = Known::new(Timing::default(), slots, "a".into(), Says);
    let members = vec![
        record("a", 0, 1, true),
        record("b", 0, 2, b_alive),
        record("c", 0, 3, false),
    ];
    k.line.listed(members, t0, 100);
    k
}

/// Carries `request` with `known`, at `now`.
fn start(
    known: &Known<Instant, Test>,
    request: Request<Instant, Test>,
    now: Instant,
) -> Start<Instant, Test> {
    let (kept, id) = (Kept::default(), "id-1".to_owned());
    let view = View {
        known,
        kept: &kept,
        next_id: &id,
        record_lease: &id,
        create_if_missing: true,
    };
    carry(&view, &request, now, 100)
}

/// The calls a request makes when each returns what `answer` says, and its reply.
fn run(
    first: Start<Instant, Test>,
    now: Instant,
    mut answer: impl FnMut(&Call<Test>) -> Return<Test>,
) -> (Vec<Call<Test>>, Reply<Test, Fails>) {
    let Start::Call(mut carrying, mut call) = first else {
        panic!("no call");
    };
    let mut calls = Vec::new();
    loop {
        let ret = answer(&call);
        calls.push(call);
        match carrying.answer(ret, now) {
            Step::Call(next) => call = next,
            Step::Reply(reply) => return (calls, reply),
        }
    }
}

/// A store that answers every call with success, and lists the members given.
fn ok(members: Vec<Rec>) -> impl FnMut(&Call<Test>) -> Return<Test> {
    move |call| match call {
        Call::ListMembers => Return::ListMembers(Ok(members.clone())),
        Call::Recreate { .. } => Return::Recreate(Ok(())),
        Call::Prepare { .. } => Return::Prepare(Ok(())),
        Call::DeleteMember { .. } => Return::DeleteMember(Err(Fails(Failure::Missing))),
        other => panic!("unexpected {other:?}"),
    }
}

/// A blob found missing, never seen led: the members are listed first; another alive means
/// the blob is created again marked, none a brand-new group's blob, created plainly.
#[test]
fn a_missing_blob_is_created_marked_only_when_others_are_alive() {
    let t0 = Instant::now();
    for (b_alive, marked) in [(true, true), (false, false)] {
        let mut k = known(1, b_alive, t0);
        k.delays.missing(0, t0, Duration::from_secs(60));
        let first = start(
            &k,
            Request::Campaign(campaign::Request::Recreate { slot: 0 }),
            t0,
        );
        let members = k.line.members.clone();
        let (calls, reply) = run(first, t0, ok(members));
        assert_eq!(calls[0], Call::ListMembers);
        let create = match marked {
            true => Call::Recreate {
                slot: 0,
                by: "a".into(),
            },
            false => Call::Prepare {
                slot: 0,
                create: true,
            },
        };
        assert_eq!(calls[1..], [create], "b alive: {b_alive}");
        assert!(
            matches!(reply, Reply::Recreated(Some(Ok(m))) if m == marked),
            "{reply:?}"
        );
    }
}

/// A blob this member saw led is created again marked with no listing; a listing that fails
/// otherwise than denied fails the creation; one denied counts nobody alive.
#[test]
fn a_blob_seen_led_is_marked_at_once_and_a_failed_listing_ends_the_creation() {
    let t0 = Instant::now();
    let mut k = known(1, true, t0);
    k.delays.led(0, t0);
    let attempt = || {
        Request::Campaign(campaign::Request::Attempt {
            slot: 0,
            request: attempt::Request::Recreate,
        })
    };
    let (calls, reply) = run(start(&k, attempt(), t0), t0, ok(Vec::new()));
    assert_eq!(
        calls,
        [Call::Recreate {
            slot: 0,
            by: "a".into()
        }]
    );
    assert!(matches!(reply, Reply::Recreated(Some(Ok(true)))));
    let k = known(1, true, t0);
    for (failure, calls_made) in [(Failure::Transient, 1), (Failure::Denied, 2)] {
        let (calls, reply) = run(start(&k, attempt(), t0), t0, |call| match call {
            Call::ListMembers => Return::ListMembers(Err(Fails(failure))),
            _ => Return::Prepare(Ok(())),
        });
        assert_eq!(calls.len(), calls_made, "{failure:?}");
        match failure {
            Failure::Denied => assert!(matches!(reply, Reply::Recreated(Some(Ok(false))))),
            _ => assert!(matches!(reply, Reply::Recreated(Some(Err(_))))),
        }
    }
}

/// A campaign's creation is asked only of a blob found missing, and only when the member is
/// to create it.
#[test]
fn nothing_is_created_unless_the_blob_was_found_missing() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let first = start(
        &k,
        Request::Campaign(campaign::Request::Recreate { slot: 0 }),
        t0,
    );
    assert!(matches!(first, Start::Reply(Reply::Recreated(None))));
}

/// The tidying deletes each record dead for long, conditional on its ETag as listed, whatever
/// each delete answered; then it is done. None dead for long: done at once.
#[test]
fn the_tidying_deletes_each_long_dead_record_conditionally() {
    let t0 = Instant::now();
    let k = known(1, false, t0);
    let tidy = || Request::Keeper(record::Request::Tidy);
    assert!(matches!(
        start(&k, tidy(), t0),
        Start::Reply(Reply::Done(Ok(())))
    ));
    let later = t0 + Pace::DEAD_RECORD_AGE;
    let (calls, reply) = run(start(&k, tidy(), later), later, ok(Vec::new()));
    let delete = |key: &str| Call::DeleteMember {
        key: key.into(),
        lease: None,
        etag: Some(key.into()),
    };
    assert_eq!(calls, [delete("b"), delete("c")]);
    assert!(matches!(reply, Reply::Done(Ok(()))));
}

/// A group of slots lists its slot blobs beside the records; a group of one lists the members.
#[test]
fn a_listing_covers_the_slots_only_in_a_group_of_slots() {
    let t0 = Instant::now();
    for (slots, call) in [(1, Call::ListMembers), (3, Call::ListGroup)] {
        let k = known(slots, true, t0);
        let Start::Call(mut carrying, sent) = start(&k, Request::Keeper(record::Request::List), t0)
        else {
            panic!("a listing is a call");
        };
        assert_eq!(sent, call);
        let answer = match slots {
            1 => Return::ListMembers(Ok(Vec::new())),
            _ => Return::ListGroup(Ok(crate::store::Listing {
                records: Vec::new(),
                slots: vec![Slot(0, false, None)],
            })),
        };
        let Step::Reply(Reply::Listed(Ok(listing))) = carrying.answer(answer, t0) else {
            panic!("a listing's reply");
        };
        assert_eq!(listing.slots.is_some(), slots > 1);
    }
}

/// A call is cut at its request's limit: its timeout is the call's own failure, read as the
/// reply of the request (a renew's: failed, to be retried, not refused).
#[test]
fn a_call_cut_at_its_limit_fails_as_a_timeout() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let (kept, id) = (
        Kept::<Test> {
            id: Some("id-1".into()),
            ..Kept::default()
        },
        "id-1".to_owned(),
    );
    let view = View {
        known: &k,
        kept: &kept,
        next_id: &id,
        record_lease: &id,
        create_if_missing: true,
    };
    let limit = t0 + Duration::from_secs(3);
    let renew = Request::Leading(leading::Request::Renew(holder::Renew { replica: 0, limit }));
    let Start::Call(mut carrying, call) = carry(&view, &renew, t0, 100) else {
        panic!("a renew is a call");
    };
    assert_eq!(carrying.limit(), Some(limit));
    let cut = call.failed(Fails::timed_out(Duration::from_secs(3)));
    let reply = carrying.answer(cut, limit);
    assert!(matches!(
        reply,
        Step::Reply(Reply::Leading(leading::Reply::Renew(holder::Reply::Failed)))
    ));
}

/// A late acquire's release goes to the replica its acquire went to, with the lease id that
/// acquire went out with (not the member's next).
#[test]
fn a_late_release_goes_to_its_replica_with_its_lease_id() {
    let t0 = Instant::now();
    let k = known(1, true, t0);
    let limit = t0 + Duration::from_secs(4);
    let release = Request::Release {
        slot: 0,
        replica: 2,
        id: Some("id-0".into()),
        limit,
    };
    let Start::Call(carrying, call) = start(&k, release, t0) else {
        panic!("a release is a call");
    };
    assert_eq!(carrying.replica(), 2);
    assert_eq!(carrying.limit(), Some(limit));
    assert_eq!(
        call,
        Call::Release {
            slot: 0,
            id: "id-0".into()
        }
    );
}

mod handoff;
