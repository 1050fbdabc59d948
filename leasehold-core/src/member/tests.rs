//! The record keeper's questions, answered from a member's facts.

use super::*;
use crate::attempt::{self, Delay};
use crate::blob::LeaseBlob;
use crate::line::Standing;
use crate::record::Grounds;
use crate::slots::PollGrounds;
use crate::testing::{L, line_of};
use crate::watch::{BlobWatch, Read};
use std::time::{Duration, Instant};

mod handing;
mod lifetime;
mod replicas;
mod sessions;
mod set_handover;
mod strays;

/// A record that says only how long its member has been one.
#[derive(Debug, Clone, PartialEq)]
struct Says(Option<Duration>);

impl Publish for Says {
    fn settled(&self) -> Option<Duration> {
        self.0
    }
    fn set_settled(&mut self, settled: Option<Duration>) {
        self.0 = settled;
    }
}

fn on_the_line<'a>(
    line: &'a mut L,
    own: &'a mut Own<Instant, Says>,
    now: Instant,
    draw: &'a mut dyn FnMut() -> f64,
) -> OnTheLine<'a, Instant, crate::testing::Rec, crate::testing::Slot, Says> {
    OnTheLine {
        line,
        own,
        now,
        wall: 100,
        settle_after: Some(Duration::from_secs(30)),
        draw,
    }
}

/// A join forgets how long the member was one; the record is settled `preempt_after` after
/// its creation, and says so only once written again.
#[test]
fn a_record_settles_after_its_creation_and_is_written_again() {
    let t0 = Instant::now();
    let mut line = line_of("b", 5, t0);
    let mut own = Own::new(Says(Some(Duration::from_secs(9))));
    own.written = true;
    let mut draws = 0;
    let mut draw = || {
        draws += 1;
        0.25
    };
    let mut g = on_the_line(&mut line, &mut own, t0, &mut draw);
    assert_eq!(g.joining(), Says(None), "a join starts a new membership");
    assert_eq!(g.facts().settle_at, None, "not created yet");
    g.created(t0);
    assert_eq!(g.facts().settle_at, Some(t0 + Duration::from_secs(30)));
    g.wrote(&Says(None));
    assert!(g.facts().written);
    g.settle(t0 + Duration::from_secs(31));
    assert_eq!(g.published(), Says(Some(Duration::from_secs(31))));
    assert!(!g.facts().written, "the record does not say it yet");
    assert_eq!(g.facts().settle_at, None, "settled once");
    g.wrote(&Says(Some(Duration::from_secs(31))));
    assert!(g.facts().written);
    assert_eq!(g.draw(), 0.25);
    assert_eq!(draws, 1, "each draw is the shell's");
}

/// The member's standing changes once; a member first in line that does not lead polls, one
/// further back does not.
#[test]
fn the_keeper_sees_the_standing_and_the_place() {
    let t0 = Instant::now();
    let mut draw = || 0.5;
    for (me, polls) in [("a", true), ("c", false)] {
        let mut line = line_of(me, 5, t0);
        let mut own = Own::new(Says(None));
        let mut g = on_the_line(&mut line, &mut own, t0, &mut draw);
        assert!(g.facts().joined);
        assert_eq!(g.facts().polls, polls, "{me}");
        assert!(g.stand(Standing::Joining));
        assert!(!g.stand(Standing::Joining), "no change the second time");
        assert!(!g.facts().joined && !g.facts().polls);
    }
}

/// A read of the lease blob in the tests: who it names, whether leased, its count, its
/// notice.
#[derive(Debug, Clone, Default)]
struct Blob {
    leased: bool,
    named: Option<String>,
    slots: Option<u32>,
    notice: Option<String>,
    passed_over: Vec<String>,
    recreated: bool,
    etag: String,
    age: Duration,
}

impl LeaseBlob for Blob {
    type ETag = String;
    fn leased(&self) -> bool {
        self.leased
    }
    fn etag(&self) -> &String {
        &self.etag
    }
    fn named(&self) -> Option<&str> {
        self.named.as_deref()
    }
    /// A blob named by a number carries it as its epoch (a later leader's), any other 4.
    fn epoch(&self) -> Option<u64> {
        self.named.as_ref().map(|n| n.parse().unwrap_or(4))
    }
    fn slots_recorded(&self) -> Option<u32> {
        self.slots
    }
    fn notice(&self) -> Option<&str> {
        self.notice.as_deref()
    }
    fn passed_over(&self) -> &[String] {
        &self.passed_over
    }
    fn recreated(&self) -> bool {
        self.recreated
    }
    fn age(&self) -> Duration {
        self.age
    }
}

/// The tests' store: records, slots and blobs of their own; ETags and lease ids are strings.
#[derive(Debug, Clone)]
struct Test;

impl Kinds for Test {
    type Wall = u64;
    type Record = crate::testing::Rec;
    type Slot = crate::testing::Slot;
    type Published = Says;
    type Blob = Blob;
    type ETag = String;
    type LeaseId = String;
    type Notice = String;
    fn key_of(identity: &str) -> String {
        identity.to_owned()
    }
    fn record_etag(record: &crate::testing::Rec) -> &String {
        &record.id
    }
    fn names(notice: &String, next: &crate::testing::Rec) -> bool {
        *notice == next.id
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

/// What `me` knows: in the line `a`-`d`, joined, listed at `now`, of `slots` slots.
fn known(me: &str, slots: u32, now: Instant) -> Known<Instant, Test> {
    let mut k = Known::new(crate::Timing::default(), slots, me.into(), Says(None));
    k.line = line_of(me, 5, now);
    k.line.slots = slots;
    k
}

/// Steps `f` with the campaign's questions answered from `known` and `kept`, at `now`;
/// returns what it returned and the notes.
fn campaigning<T>(
    known: &mut Known<Instant, Test>,
    kept: &mut Kept<Test>,
    now: Instant,
    f: impl FnOnce(&mut Campaigning<'_, Instant, Test>) -> T,
) -> (T, Vec<Note>) {
    let (mut notes, mut draw) = (Vec::new(), || 0.5);
    let mut c = Campaigning {
        facts: known,
        kept,
        next_id: &"id-1".to_owned(),
        now,
        wall: 100,
        wall_ms: 100_000,
        draw: &mut draw,
        notes: &mut notes,
        refill_late: false,
    };
    let out = f(&mut c);
    (out, notes)
}

/// A member in line once joined and listed; one that has not read who leads knows it; a
/// blob found missing puts it under a lock-delay it sees, and says so once.
#[test]
fn the_campaign_sees_the_line_and_the_lock_delay() {
    use crate::campaign::Grounds;
    let t0 = Instant::now();
    let mut k = known("b", 1, t0);
    let seen = k.seen(t0, 100);
    assert!(seen.in_line && seen.leader_unknown && seen.lock_delay.is_none());
    k.line.standing = Standing::Joining;
    assert!(!k.seen(t0, 100).in_line, "not joined");
    let mut kept = Kept::default();
    let ((), notes) = campaigning(&mut k, &mut kept, t0, |c| c.delay(0, Delay::Missing));
    assert!(
        matches!(notes[..], [Note::LockDelay { slot: 0, .. }]),
        "{notes:?}"
    );
    let until = k.seen(t0, 100).lock_delay.expect("a lock-delay");
    assert!(until > t0);
    let (delayed, _) = campaigning(&mut k, &mut kept, t0, |c| PollGrounds::delayed(c, 0));
    assert!(delayed);
}

/// An attempt begins with the next lease id and keeps the reservation a wake-up left until
/// it is written.
#[test]
fn an_attempt_keeps_the_reservation_of_a_wake_up() {
    use crate::campaign::Grounds;
    let t0 = Instant::now();
    let mut k = known("b", 1, t0);
    assert_eq!(
        k.wakes.wake(true, t0, Some("8 etag-7")),
        crate::wake::WakeAnswer::Accepted
    );
    let mut kept = Kept::default();
    let (epoch, _) = campaigning(&mut k, &mut kept, t0, |c| {
        let epoch = c.reserved();
        c.begin(0);
        epoch
    });
    assert_eq!(epoch, Some(8));
    assert_eq!(kept.reservation.as_deref(), Some("etag-7"));
    assert_eq!(kept.id.as_deref(), Some("id-1"));
    let (again, _) = campaigning(&mut k, &mut kept, t0, |c| c.reserved());
    assert_eq!(again, None, "taken once");
}

/// Slot 0 found free, recording another count that a live member still counts: the group
/// counts otherwise, which is noted once and keeps this member out; a count nobody alive
/// counts is not.
#[test]
fn slot_0_free_with_another_count_counts_otherwise_while_a_member_counts_it() {
    let t0 = Instant::now();
    for (others_count, expected) in [(3, true), (2, false)] {
        let mut k = known("b", 2, t0);
        for r in k.line.members.iter_mut().filter(|r| r.id != "b") {
            r.slots = others_count;
        }
        let mut kept = Kept {
            read: Some(Blob {
                named: Some("a".into()),
                slots: Some(3),
                ..Blob::default()
            }),
            ..Kept::default()
        };
        let (otherwise, notes) = campaigning(&mut k, &mut kept, t0, |c| {
            attempt::Grounds::counts_otherwise(c)
        });
        assert_eq!(otherwise, expected, "others count {others_count}");
        assert_eq!(k.count.mismatched(), expected);
        if expected {
            assert_eq!(notes, [Note::Mismatch(Some(3)), Note::CountsOtherwise(3)]);
        } else {
            assert!(notes.is_empty());
        }
    }
}

/// A watcher's read of a notice naming it calls for an acquire; a read that passes members
/// over passes them over in the line.
#[test]
fn a_watcher_reads_through_what_it_knows() {
    use crate::watch::{Grounds, Why};
    let t0 = Instant::now();
    let mut k = known("c", 1, t0);
    let mut kept = Kept {
        blob: Some(Blob {
            leased: true,
            named: Some("a".into()),
            notice: Some("c".into()),
            etag: "1".into(),
            ..Blob::default()
        }),
        ..Kept::default()
    };
    let mut watch = BlobWatch::default();
    let (read, _) = campaigning(&mut k, &mut kept, t0, |c| c.read(&mut watch, t0));
    assert_eq!(read, Read::Acquire(Why::Named));
    kept.read = Some(Blob {
        passed_over: vec!["b".into()],
        ..Blob::default()
    });
    campaigning(&mut k, &mut kept, t0, |c| attempt::Grounds::pass_over(c));
    assert!(k.line.is_passed_over("b", t0));
}
