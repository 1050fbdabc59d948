//! The watcher's blob watch and its round, on the tests' own line and grounds.

use super::*;
use crate::testing::{L, line_of};
use std::time::{Duration, Instant};

/// A read of the blob, leased by `leader` (or free, naming it), with `notice`.
fn blob<'a>(
    leased: bool,
    leader: &'a str,
    notice: Option<&'a str>,
    etag: &'a u32,
) -> BlobRead<'a, u32> {
    BlobRead {
        leased,
        recreated: false,
        etag,
        seen: BlobSeen {
            leader: leased.then_some(leader),
            named: Some(leader),
            notice,
            passed_over: &[],
        },
    }
}

/// The line of `me` in `a`..`d`, `a` leading as a first read showed.
fn watching(me: &str, now: Instant) -> (BlobWatch<Instant, u32>, L) {
    let (mut w, mut l) = (BlobWatch::default(), line_of(me, 2, now));
    w.read(&mut l, blob(true, "a", None, &1), now, 100);
    (w, l)
}

/// Nothing new is nothing; a notice naming this member is acquired at once; a new leader
/// nobody announced makes only the member next without the old one list, now and once
/// more when a crashed leader's record has surely expired.
#[test]
fn a_watcher_lists_only_when_a_change_may_place_it() {
    let now = Instant::now();
    let (mut w, mut l) = watching("c", now);
    assert_eq!(
        w.read(&mut l, blob(true, "a", None, &1), now, 100),
        Read::Same
    );
    let named = blob(true, "a", Some("c"), &2);
    assert_eq!(w.read(&mut l, named, now, 100), Read::Acquire(Why::Named));
    let (mut w, mut l) = watching("c", now);
    let b_leads = blob(true, "b", None, &2);
    let moved = Read::Moved {
        list_now: true,
        list_later: true,
    };
    assert_eq!(w.read(&mut l, b_leads, now, 100), moved);
    let (mut w, mut d) = watching("d", now);
    let stays = Read::Moved {
        list_now: false,
        list_later: false,
    };
    assert_eq!(w.read(&mut d, b_leads, now, 100), stays, "c is next, not d");
    // The listing a moment later; then once more after a record lease, unless it placed c.
    let (mut w, mut l) = watching("c", now);
    w.read(&mut l, b_leads, now, 100);
    assert_eq!(w.list_soon(now, true), Pace::LIST_AFTER_A_CHANGE);
    assert!(!w.listing_due(now));
    let then = now + Pace::LIST_AFTER_A_CHANGE;
    assert!(w.listing_due(then));
    assert!(!w.listing_due(then), "once");
    w.listed(then, false);
    assert!(
        w.listing_due(then + Pace::RECORD_LEASE),
        "once more at expiry"
    );
    w.list_soon(now, true);
    assert!(w.listing_due(then));
    w.listed(then, true);
    assert!(!w.listing_due(then + Pace::RECORD_LEASE), "it placed c");
}

/// A free lease: the member next after the last leader acquires at once; another reads
/// once more a polling period later, then acquires; a recreated blob is acquired at once.
#[test]
fn a_free_lease_is_taken_by_the_next_in_line_or_after_a_poll() {
    let now = Instant::now();
    let free = blob(false, "a", None, &3);
    let (mut w, mut l) = watching("b", now);
    assert_eq!(
        w.read(&mut l, free, now, 100),
        Read::Acquire(Why::NextInLine)
    );
    let (mut w, mut l) = watching("c", now);
    assert_eq!(w.read(&mut l, free, now, 100), Read::Unleased);
    let later = now + Duration::from_secs(5);
    assert_eq!(
        w.read(&mut l, free, later, 100),
        Read::Acquire(Why::FreeForAPoll)
    );
    let recreated = BlobRead {
        recreated: true,
        ..free
    };
    assert_eq!(
        w.read(&mut l, recreated, later, 100),
        Read::Acquire(Why::Recreated)
    );
}

/// The member ahead moved if its record is gone, dead, made anew or standing by.
#[test]
fn the_member_ahead_moved_when_its_record_says_so() {
    let l = line_of("c", 2, Instant::now());
    let b = l.record_of("b").unwrap();
    assert!(!ahead_moved(b, Some(b), 100));
    assert!(ahead_moved(b, None, 100), "gone");
    let mut fresh = b.clone();
    fresh.alive = false;
    assert!(ahead_moved(b, Some(&fresh), 100), "dead");
    let mut fresh = b.clone();
    fresh.joined = 50;
    assert!(ahead_moved(b, Some(&fresh), 100), "joined again");
    let mut fresh = b.clone();
    fresh.standby_until = Some(200);
    assert!(ahead_moved(b, Some(&fresh), 100), "standing by");
}

/// A store error of the round's tests: only its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fails(Failure);

impl StoreFailure for Fails {
    fn failure(&self) -> Failure {
        self.0
    }
}

/// The member around a round: the read it scripts, and whether someone is ahead.
struct Around {
    read: Read,
    ahead: bool,
    asked: Vec<&'static str>,
}

impl Around {
    /// Scripting `read`, with someone ahead or not, asked nothing yet.
    fn new(read: Read, ahead: bool) -> Self {
        Self {
            read,
            ahead,
            asked: Vec::new(),
        }
    }
}

/// A round begun at `now` around `g` (`watcher_stays`: the mutant's), on a watch that saw
/// nothing yet.
fn begun(now: Instant, g: &mut Around, watcher_stays: bool) -> (BlobWatch<Instant, u32>, Round) {
    let mut w = BlobWatch::default();
    let mut r = Round::new(&Timing::default(), watcher_stays);
    r.step(now, Event::<Fails>::Start, &mut w, g);
    (w, r)
}

impl Grounds<Instant, u32> for Around {
    fn is_successor(&mut self) -> bool {
        self.asked.push("successor");
        false
    }
    fn looked(&mut self) {
        self.asked.push("looked");
    }
    fn counts_otherwise(&mut self) -> bool {
        self.asked.push("count");
        false
    }
    fn read(&mut self, _: &mut BlobWatch<Instant, u32>, _: Instant) -> Read {
        self.asked.push("read");
        self.read
    }
    fn ahead_advertises(&mut self) -> bool {
        self.asked.push("advertises");
        self.ahead
    }
    fn has_ahead(&mut self) -> bool {
        self.asked.push("ahead");
        self.ahead
    }
    fn read_unheard(&mut self) -> bool {
        self.asked.push("unheard");
        self.ahead
    }
}

type Action = super::Action<Instant, Fails>;

fn moved(list_now: bool) -> Read {
    Read::Moved {
        list_now,
        list_later: false,
    }
}

/// A round reads the blob (after the listing put off, when it is due); a new term whose
/// read calls for no listing reads the record ahead, and a record ahead that moved calls
/// for one a moment later.
#[test]
fn a_round_lists_when_due_reads_the_blob_then_the_record_ahead() {
    let now = Instant::now();
    let rt = Timing::default().request_timeout();
    let mut w = BlobWatch::<Instant, u32>::default();
    w.list_soon(now, false);
    let mut g = Around::new(moved(false), true);
    let mut r = Round::new(&Timing::default(), false);
    let at = now + Pace::LIST_AFTER_A_CHANGE;
    let list = r.step(at, Event::<Fails>::Start, &mut w, &mut g);
    assert_eq!(list, [Action::Send(Request::List { until: at + rt })]);
    let read = r.step(at, Event::Listed, &mut w, &mut g);
    assert_eq!(read, [Action::Send(Request::ReadBlob { until: at + rt })]);
    let ahead = r.step(at, Event::BlobRead(Ok(())), &mut w, &mut g);
    assert_eq!(
        ahead,
        [
            Action::Authorized,
            Action::ShowLine,
            Action::Send(Request::ReadAhead { until: at + rt })
        ]
    );
    assert_eq!(g.asked, ["successor", "looked", "count", "read", "ahead"]);
    let end = r.step(at, Event::AheadRead(Ok(true)), &mut w, &mut g);
    let pause = Pace::LIST_AFTER_A_CHANGE;
    assert_eq!(end, [Action::Done(Ok(Outcome::Wait(pause)))]);
}

/// With the blob unchanged, the member ahead is probed when it advertises a URL; whatever
/// the probe finds, the round ends for the candidate to look at this member's place (the
/// answer has already placed it).
#[test]
fn an_unchanged_blob_probes_the_member_ahead() {
    let now = Instant::now();
    let mut g = Around::new(Read::Same, true);
    let (mut w, mut r) = begun(now, &mut g, false);
    let probe = r.step(now, Event::BlobRead(Ok(())), &mut w, &mut g);
    assert_eq!(
        probe,
        [Action::Authorized, Action::Send(Request::ProbeAhead)]
    );
    assert_eq!(g.asked, ["looked", "count", "read", "advertises"]);
    let end = r.step(now, Event::Probed(Found::Another), &mut w, &mut g);
    assert_eq!(end, [Action::Done(Ok(Outcome::Look))]);
    // Nobody ahead with a URL: no probe.
    g.ahead = false;
    (w, r) = begun(now, &mut g, false);
    let end = r.step(now, Event::BlobRead(Ok(())), &mut w, &mut g);
    assert_eq!(end, [Action::Authorized, Action::Done(Ok(Outcome::Look))]);
    // The mutant `watcher-stays` does not probe.
    g.ahead = true;
    (w, r) = begun(now, &mut g, true);
    let end = r.step(now, Event::BlobRead(Ok(())), &mut w, &mut g);
    assert_eq!(end, [Action::Authorized, Action::Done(Ok(Outcome::Look))]);
}

/// Nothing listening at the URL of the member ahead: the round reads its record, and lists
/// a moment later when it ran out or was made anew; a record that lives on stands (a live
/// member whose URL is wrong).
#[test]
fn nothing_listening_ahead_reads_its_record() {
    let now = Instant::now();
    let until = now + Timing::default().request_timeout();
    for (moved, end) in [
        (true, Outcome::Wait(Pace::LIST_AFTER_A_CHANGE)),
        (false, Outcome::Look),
    ] {
        let mut g = Around::new(Read::Same, true);
        let (mut w, mut r) = begun(now, &mut g, false);
        r.step(now, Event::<Fails>::BlobRead(Ok(())), &mut w, &mut g);
        let read = r.step(now, Event::Probed(Found::Nothing), &mut w, &mut g);
        assert_eq!(read, [Action::Send(Request::ReadAhead { until })]);
        let done = r.step(now, Event::AheadRead(Ok(moved)), &mut w, &mut g);
        assert_eq!(done, [Action::Done(Ok(end))], "moved: {moved}");
    }
}

/// A blob found missing: the lock-delay begins and the member campaigns for it.
#[test]
fn a_missing_blob_is_campaigned_for() {
    let now = Instant::now();
    let mut g = Around::new(Read::Same, false);
    let (mut w, mut r) = begun(now, &mut g, false);
    let missing = Event::BlobRead(Err(Fails(Failure::Missing)));
    assert_eq!(
        r.step(now, missing, &mut w, &mut g),
        [
            Action::Authorized,
            Action::Missing,
            Action::Done(Ok(Outcome::Acquire))
        ]
    );
    assert!(g.asked.is_empty(), "nothing asked of a blob not read");
}

/// The mutant `watcher-stays` neither reads ahead nor lists after a new term.
#[test]
fn a_watcher_that_stays_looks_again_only() {
    let now = Instant::now();
    for read in [moved(false), moved(true)] {
        let mut g = Around::new(read, true);
        let (mut w, mut r) = begun(now, &mut g, true);
        let end = r.step(now, Event::BlobRead(Ok(())), &mut w, &mut g);
        assert_eq!(end.last(), Some(&Action::Done(Ok(Outcome::Look))));
        assert!(!g.asked.contains(&"ahead"));
    }
}
