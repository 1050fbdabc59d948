//! The attempt on the replicas, one test a rule, driven against a small world of accounts
//! (world.rs) whose requests each test carries out in the order it chooses.

use super::world::{Member, World, settings};
use crate::exchange::Tag;
use crate::quorum::{
    Failed, Input, Outcome, Output, ReplicaId, ReplicaSet, Reply, Request, Settings, Stamp, Unheld,
    Why, Won, split_pause,
};
use crate::timing::Deadline;
use std::time::{Duration, Instant};

/// The set of `n` accounts `a0`, `a1`, ...
fn set(n: usize) -> ReplicaSet {
    let accounts: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
    ReplicaSet::new(&accounts).unwrap()
}

/// Blobs stamped by `set`, ids 0, 1, ...
fn stamps(set: &ReplicaSet) -> Vec<Stamp> {
    (0..set.len())
        .map(|i| Stamp::new(set, ReplicaId(i as u128)))
        .collect()
}

/// A world of `n` accounts stamped by the set of `n`, and a member of that set at its start.
fn one_member(n: usize) -> (World, Member) {
    let s = set(n);
    let world = World::new(Instant::now(), stamps(&s));
    let member = Member::new(1, (0..n).collect(), settings(s));
    (world, member)
}

fn won(m: &Member) -> Option<&Won<Instant>> {
    m.ends.iter().find_map(|o| match o {
        Output::Won(w) => Some(w),
        _ => None,
    })
}

fn failed(m: &Member) -> Option<Failed> {
    m.ends.iter().find_map(|o| match o {
        Output::Failed(f) => Some(*f),
        _ => None,
    })
}

fn released(m: &Member) -> Vec<usize> {
    let mut places: Vec<usize> = (m.sent.iter())
        .filter_map(|r| match r {
            Request::Release { replica } => Some(*replica),
            _ => None,
        })
        .collect();
    places.sort();
    places
}

fn is_acquire(r: &Request<Instant>) -> bool {
    matches!(r, Request::Acquire { .. })
}

fn to(place: usize) -> impl Fn(&Request<Instant>) -> bool {
    move |r| r.replica() == place
}

/// Account `a` is held by member `m` until long after the test.
fn hold(world: &mut World, a: usize, m: u32) {
    let until = world.now + Duration::from_secs(3600);
    world.accounts[a].as_mut().unwrap().holder = Some((m, until));
}

/// The acquires go to every replica side by side, each cut at its own limit (`R` from its
/// send); a majority won, read and confirmed is a term whose epoch is the wall clock's on blobs
/// without one, its deadlines from the acquires' send.
#[test]
fn the_acquires_go_to_every_replica_at_once_each_with_its_own_limit() {
    let (mut world, mut m) = one_member(3);
    let t = world.now;
    m.feed(t, Input::Start);
    let limit = t + world.timing.request_timeout();
    let acquires: Vec<Request<Instant>> = (0..3)
        .map(|replica| Request::Acquire {
            replica,
            until: limit,
        })
        .collect();
    assert_eq!(m.sent, acquires, "all three at once, before any answer");
    let awaits = m.attempt.awaits();
    assert_eq!((awaits.answers.len(), awaits.until), (3, Some(limit)));
    m.settle(&mut world);
    let w = won(&m).expect("a term");
    let deadline = Deadline::from_sent(t, &world.timing);
    assert_eq!(w.epoch, 1000, "the wall clock on blobs without an epoch");
    assert_eq!(
        w.leases[..2],
        [Some(deadline); 2],
        "the first two confirmed"
    );
    assert_eq!(w.kill, deadline);
    assert!((0..3).all(|a| world.holder(a) == Some(1)));
    assert!(m.attempt.is_over() && m.attempt.awaits().answers.is_empty());
}

/// The term is won once a majority confirmed the epoch's write, without waiting for the last
/// replica, which joins once its write is confirmed.
#[test]
fn the_term_is_won_once_a_majority_confirmed_the_epoch() {
    let (mut world, mut m) = one_member(3);
    m.feed(world.now, Input::Start);
    let not_write = |r: &Request<Instant>| !matches!(r, Request::WriteEpoch { .. });
    m.carry(&mut world, not_write, |_| false);
    assert_eq!(m.queue.len(), 3, "the epoch goes to every replica held");
    m.carry(&mut world, to(0), |_| false);
    assert!(
        won(&m).is_none(),
        "one confirmation of three is no majority"
    );
    m.carry(&mut world, to(1), |_| false);
    let w = won(&m).expect("two of three confirmed").clone();
    assert_eq!(w.leases[2], None, "its write is still on its way");
    m.carry(&mut world, to(2), |_| false);
    let joined = Output::Joined {
        replica: 2,
        deadline: w.leases[0].unwrap(),
    };
    assert_eq!(m.ends.last(), Some(&joined));
}

/// An acquire whose answer is lost counts for nobody: once a majority counts, the attempt awaits
/// it as long again as the round took (not its whole limit `R`), then wins on the others and
/// releases the replica it may hold.
#[test]
fn an_answer_lost_counts_for_nobody_and_its_replica_is_released() {
    let (mut world, mut m) = one_member(3);
    let t = world.now;
    m.feed(t, Input::Start);
    world.now = t + Duration::from_millis(100);
    m.carry(&mut world, |_| true, |r| is_acquire(r) && r.replica() == 2);
    assert!(won(&m).is_none(), "it awaits the third acquire");
    let limit = m.attempt.awaits().until.unwrap();
    assert_eq!(
        limit,
        t + Duration::from_millis(200),
        "as long again as the round took"
    );
    world.now = limit;
    m.feed(limit, Input::Timer);
    m.settle(&mut world);
    let w = won(&m).expect("two of three");
    assert_eq!(w.leases[2], None);
    assert_eq!(released(&m), vec![2], "held perhaps: released");
    assert_eq!(world.holder(2), None);
    // Its leader may try to win it back only once its late answer can no longer come, nor
    // the release of a late success be on its way (the same lease id on one lease).
    let (l, r) = (world.timing.duration, world.timing.request_timeout());
    assert_eq!(w.unheld.from, [None, None, Some(world.now + l + r)]);
    assert_eq!(w.unheld.stamps[..2], stamps(&set(3))[..2], "as read");
    assert_eq!(w.unheld.stamps[2], Stamp::default(), "never read");
}

/// An acquire that answers about as fast as the majority's (within as long again as their round
/// took) joins the term: its replica is read and written, and counts.
#[test]
fn a_replica_answering_about_as_fast_as_the_majority_counts() {
    let (mut world, mut m) = one_member(3);
    let t = world.now;
    m.feed(t, Input::Start);
    world.now = t + Duration::from_millis(100);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    assert!(won(&m).is_none(), "it awaits the third acquire");
    world.now = t + Duration::from_millis(190);
    m.settle(&mut world);
    assert!(won(&m).is_some());
    // Its write confirmed last, after the term was won on the first two.
    let joined = |o: &Output<Instant>| matches!(o, Output::Joined { replica: 2, .. });
    assert!(m.ends.iter().any(joined), "replica 2 counts");
    assert!(released(&m).is_empty());
}

/// A replica refused (held by another member) may be tried again by the leader once the
/// attempt's requests there have surely been answered or cut: `2R` after the term was won.
#[test]
fn a_replica_refused_is_won_back_after_two_request_timeouts() {
    let (mut world, mut m) = one_member(3);
    let forever = world.now + Duration::from_secs(3600);
    world.accounts[1].as_mut().unwrap().holder = Some((9, forever));
    m.feed(world.now, Input::Start);
    m.settle(&mut world);
    let w = won(&m).expect("two of three");
    let r = world.timing.request_timeout();
    assert_eq!(w.unheld.from, [None, Some(world.now + 2 * r), None]);
}

/// An answer heard after its request's limit (before the timer said so) counts for nobody
/// either: a lease it says was won is released at once.
#[test]
fn an_answer_heard_after_its_limit_counts_for_nobody() {
    let (mut world, mut m) = one_member(3);
    let t = world.now;
    m.feed(t, Input::Start);
    m.carry(&mut world, |_| true, |r| is_acquire(r) && r.replica() == 2);
    world.now = t + world.timing.request_timeout() + Duration::from_millis(1);
    let late = m.lost.pop().unwrap();
    assert_eq!(late.answer, Reply::Done);
    m.feed(world.now, Input::Answer(late));
    m.settle(&mut world);
    let w = won(&m).expect("two of three");
    assert_eq!(w.leases[2], None);
    assert_eq!(released(&m), vec![2]);
    assert_eq!(world.holder(2), None);
}

/// A late answer to a first acquire on a replica a split vote's retry has won since releases
/// nothing: the retry's lease is the one counted.
#[test]
fn a_late_answer_on_a_replica_won_since_releases_nothing() {
    let (mut world, mut m) = one_member(3);
    m.feed(world.now, Input::Start);
    // Replicas 1 and 2 won, their answers lost: [won, unknown, unknown] once they are cut at
    // `R`, and the first replica's holder retries both.
    m.carry(&mut world, |_| true, |r| is_acquire(r) && r.replica() != 0);
    world.now = m.attempt.awaits().until.unwrap();
    m.feed(world.now, Input::Timer);
    m.carry(&mut world, is_acquire, |_| false);
    let late = m.lost.pop().unwrap();
    m.feed(world.now, Input::Answer(late));
    assert!(released(&m).is_empty());
    m.settle(&mut world);
    assert!(won(&m).is_some());
    let joined = |o: &Output<Instant>| matches!(o, Output::Joined { replica: 2, .. });
    assert!(m.ends.iter().any(joined), "replica 2 counts");
    assert_eq!(world.holder(2), Some(1));
}

/// Refused by two replicas of three, an attempt cannot win whatever the third gets: it awaits
/// the third as long again as its round took, not `R`, then gives up and releases it (perhaps
/// held). One that answers as fast as the others is heard: refused everywhere.
#[test]
fn refused_by_a_majority_an_attempt_does_not_wait_out_a_silent_replica() {
    for silent in [true, false] {
        let (mut world, mut m) = one_member(3);
        hold(&mut world, 0, 9);
        hold(&mut world, 1, 9);
        hold(&mut world, 2, 9);
        let t = world.now;
        m.feed(t, Input::Start);
        world.now = t + Duration::from_millis(100);
        m.carry(&mut world, |r| r.replica() != 2, |_| false);
        let cut = t + Duration::from_millis(200);
        assert_eq!(m.attempt.awaits().until, Some(cut), "as long again");
        if !silent {
            world.now = t + Duration::from_millis(150);
            m.carry(&mut world, to(2), |_| false);
            assert_eq!(failed(&m).map(|f| f.why), Some(Why::NoneWon));
            assert!(m.attempt.outcomes().iter().all(|o| *o == Outcome::Refused));
            assert!(released(&m).is_empty(), "nothing held");
            continue;
        }
        world.now = cut;
        m.feed(cut, Input::Timer);
        assert_eq!(failed(&m).map(|f| f.why), Some(Why::NoneWon));
        assert_eq!(released(&m), vec![2], "held perhaps: released");
    }
}

/// The first replica's holder in a split vote, its third replica silent, retries the replica
/// that refused it once as long again as its round took, without waiting out the third; the
/// member that yielded to it released in that time, and the retry wins a majority.
#[test]
fn the_member_that_retries_does_not_wait_out_a_silent_replica() {
    let (mut world, mut m) = one_member(3);
    hold(&mut world, 1, 9);
    let t = world.now;
    m.feed(t, Input::Start);
    world.now = t + Duration::from_millis(100);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    assert!(failed(&m).is_none(), "it retries");
    let retry = t + Duration::from_millis(200);
    assert_eq!(m.attempt.awaits().until, Some(retry));
    // The member holding replica 1 yields (replica 0 refused it) and releases.
    world.accounts[1].as_mut().unwrap().holder = None;
    world.now = retry;
    m.feed(retry, Input::Timer);
    let retried = |r: &Request<Instant>| is_acquire(r) && r.replica() == 1;
    assert_eq!(m.sent.iter().filter(|r| retried(r)).count(), 2);
    world.now = t + Duration::from_millis(300);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    world.now = m.attempt.awaits().until.unwrap();
    assert!(world.now < t + world.timing.request_timeout(), "not `R`");
    m.feed(world.now, Input::Timer);
    m.settle(&mut world);
    let w = won(&m).expect("the retry's majority");
    assert_eq!(w.leases[2], None, "the silent one counts for nobody");
    assert_eq!(released(&m), vec![2]);
}

/// A split vote the member was to retry is none once the acquire on its way wins it a
/// majority: nothing waits for the retry's time any more, and no retry goes out.
#[test]
fn a_retry_due_is_dropped_once_a_majority_is_won() {
    let (mut world, mut m) = one_member(3);
    hold(&mut world, 1, 9);
    let t = world.now;
    m.feed(t, Input::Start);
    world.now = t + Duration::from_millis(100);
    m.carry(
        &mut world,
        |r| r.replica() == 0 || is_acquire(r) && r.replica() == 1,
        |_| false,
    );
    assert_eq!(
        m.attempt.awaits().until,
        Some(t + Duration::from_millis(200))
    );
    world.now = t + Duration::from_millis(150);
    m.carry(&mut world, |r| is_acquire(r) && r.replica() == 2, |_| false);
    let read_limit = world.now + world.timing.request_timeout();
    assert_eq!(
        m.attempt.awaits().until,
        Some(read_limit),
        "the read of replica 2"
    );
    m.settle(&mut world);
    assert!(won(&m).is_some());
    let to_1 = |r: &&Request<Instant>| is_acquire(r) && r.replica() == 1;
    assert_eq!(m.sent.iter().filter(to_1).count(), 1, "no retry");
}

/// A member that gives up releases every replica it holds or may hold (a request of unknown
/// outcome reached it).
#[test]
fn giving_up_releases_every_replica_held_or_perhaps_held() {
    let (mut world, mut m) = one_member(3);
    hold(&mut world, 0, 9);
    m.feed(world.now, Input::Start);
    m.carry(&mut world, |r| is_acquire(r) && r.replica() < 2, |_| false);
    // [refused, won, on its way]: a replica before every one it won refused it, so it yields
    // at once, without awaiting the third acquire.
    assert_eq!(failed(&m).map(|f| f.why), Some(Why::Split));
    assert!(m.attempt.awaits().until.is_none(), "nothing awaited");
    m.carry(&mut world, |_| true, |r| is_acquire(r) && r.replica() == 2);
    assert_eq!(released(&m), vec![1, 2]);
    assert_eq!((world.holder(1), world.holder(2)), (None, None));
}

/// An acquire that lands after the attempt gave up (its release went first) and says it won is
/// released at once when its answer comes.
#[test]
fn a_late_answer_after_giving_up_is_released() {
    let (mut world, mut m) = one_member(3);
    hold(&mut world, 0, 9);
    hold(&mut world, 1, 9);
    m.feed(world.now, Input::Start);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    world.now = m.attempt.awaits().until.unwrap();
    m.feed(world.now, Input::Timer);
    assert_eq!(failed(&m).map(|f| f.why), Some(Why::NoneWon));
    // The release reaches replica 2 before the acquire does.
    m.carry(
        &mut world,
        |r| matches!(r, Request::Release { .. }),
        |_| false,
    );
    assert_eq!(released(&m), vec![2]);
    let acquire: Tag = m.queue[0].0.tag;
    assert_eq!(m.attempt.awaits().answers, vec![acquire], "still listening");
    m.carry(&mut world, is_acquire, |_| false);
    assert_eq!(world.holder(2), Some(1), "the acquire landed");
    m.settle(&mut world);
    assert_eq!(world.holder(2), None, "released again");
    assert!(m.attempt.awaits().answers.is_empty());
}

/// A replica whose blob is missing is created again and counts for nobody until it is `L + M`
/// old by its service's clock (and a second), even when a majority's leases are won.
#[test]
fn a_wiped_replica_counts_for_nobody_until_it_is_l_plus_m_old() {
    let s = set(3);
    let mut world = World::new(Instant::now(), stamps(&s));
    hold(&mut world, 0, 9);
    world.accounts[1] = None;
    let mut first = Member::new(1, vec![0, 1, 2], settings(s));
    first.feed(world.now, Input::Start);
    first.settle(&mut world);
    assert!(failed(&first).is_some());
    let create = Request::Create {
        replica: 1,
        fingerprint: s.fingerprint(),
    };
    assert!(first.sent.contains(&create));
    let created = world.now;

    world.now += Duration::from_secs(1);
    // Replica 0 refuses last: a refusal before every replica won would end the round at once.
    let mut again = Member::new(1, vec![0, 1, 2], settings(s));
    again.feed(world.now, Input::Start);
    again.carry(&mut world, |r| r.replica() != 0, |_| false);
    again.settle(&mut world);
    assert_eq!(
        failed(&again).map(|f| f.why),
        Some(Why::TooFew),
        "a1 is young"
    );

    let pace = crate::pace::Pace::new(&world.timing);
    world.now = created + pace.lock_delay() + crate::pace::Pace::SERVICE_CLOCK;
    let mut later = Member::new(1, vec![0, 1, 2], settings(s));
    later.feed(world.now, Input::Start);
    later.carry(&mut world, |r| r.replica() != 0, |_| false);
    later.settle(&mut world);
    let w = won(&later).expect("a1 is `L + M` old");
    assert_eq!(w.leases.iter().flatten().count(), 2);
}

/// Two members whose replica sets differ (their fingerprints) never both win: a blob stamped by
/// one set counts for nobody of another, even when its lease is won.
#[test]
fn two_members_with_different_replica_sets_never_both_win() {
    let three = set(3);
    let five = set(5);
    let mut marks = stamps(&three);
    marks.extend(stamps(&five)[3..].iter().copied());
    let mut world = World::new(Instant::now(), marks);
    let mut small = Member::new(1, vec![0, 1, 2], settings(three));
    small.feed(world.now, Input::Start);
    // Its third account does not answer it: it leads on the first two.
    small.carry(&mut world, |r| r.replica() != 2, |_| false);
    world.now = small.attempt.awaits().until.unwrap();
    small.feed(world.now, Input::Timer);
    small.settle(&mut world);
    assert!(won(&small).is_some());

    let mut large = Member::new(2, vec![0, 1, 2, 3, 4], settings(five));
    large.feed(world.now, Input::Start);
    // It wins its last three before the first two refuse it (else it yields the split at once).
    large.carry(&mut world, |r| r.replica() >= 2, |_| false);
    large.settle(&mut world);
    assert_eq!(
        (world.holder(2), world.holder(3), world.holder(4)),
        (None, None, None),
        "it won three of five leases, and gave them back"
    );
    assert_eq!(failed(&large).map(|f| f.why), Some(Why::TooFew));
    assert!(won(&large).is_none());
}

/// One account listed twice counts once: its blob's id is the same in both places.
#[test]
fn one_account_listed_twice_counts_once() {
    let s = ReplicaSet::new(&["a0", "a0 again", "a1"]).unwrap();
    let marks = vec![Stamp::new(&s, ReplicaId(0)), Stamp::new(&s, ReplicaId(1))];
    let mut world = World::new(Instant::now(), marks);
    hold(&mut world, 1, 9);
    let mut m = Member::new(1, vec![0, 0, 1], settings(s));
    m.feed(world.now, Input::Start);
    m.settle(&mut world);
    assert_eq!(failed(&m).map(|f| f.why), Some(Why::TooFew));
    assert_eq!(world.holder(0), None);
}

/// The term's epoch is the largest of the counted replicas' largest + 1, what this member saw +
/// 1 and the wall clock, and is written to every replica held.
#[test]
fn the_epoch_is_the_largest_of_all_replicas_read_the_seen_and_the_wall_clock() {
    for (seen, wall, epoch) in [(None, 1, 10), (Some(20), 1, 21), (None, 5000, 5000)] {
        let s = set(3);
        let mut world = World::new(Instant::now(), stamps(&s));
        for (a, e) in [5, 9, 7].into_iter().enumerate() {
            world.accounts[a].as_mut().unwrap().epoch = Some(e);
        }
        let mut m = Member::new(
            1,
            vec![0, 1, 2],
            Settings {
                seen,
                ..settings(s)
            },
        );
        m.ground.wall_ms = wall;
        m.feed(world.now, Input::Start);
        m.settle(&mut world);
        assert_eq!(won(&m).map(|w| w.epoch), Some(epoch), "{seen:?} {wall}");
        let written = (0..3).map(|a| world.accounts[a].as_ref().unwrap().epoch);
        assert!(written.into_iter().all(|e| e == Some(epoch)));
    }
}

/// The first replica's holder retries a split vote once; the kill deadline is the k-th latest
/// of the replicas that count, here the one won in the first round.
#[test]
fn the_kill_deadline_is_the_kth_latest_of_the_replicas_that_count() {
    let (mut world, mut m) = one_member(3);
    hold(&mut world, 1, 9);
    let t = world.now;
    m.feed(t, Input::Start);
    world.now = t + Duration::from_millis(100);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    // [won, refused, on its way]: it holds the first that answered, so it retries the replica
    // that refused it whatever the third gets, once as long again as the round took passed.
    let retry_at = m.attempt.awaits().until.unwrap();
    assert_eq!(retry_at, t + Duration::from_millis(200));
    world.now = retry_at;
    m.feed(retry_at, Input::Timer);
    let acquires = m.sent.iter().filter(|r| is_acquire(r));
    assert_eq!(acquires.count(), 3 + 1, "the one refused retried");
    world.accounts[1].as_mut().unwrap().holder = None;
    // Replica 2 stays silent: once two count, it is awaited as long again as the retry took.
    world.now = t + Duration::from_millis(300);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    assert_eq!(
        m.attempt.awaits().until,
        Some(t + Duration::from_millis(400))
    );
    world.now = m.attempt.awaits().until.unwrap();
    m.feed(world.now, Input::Timer);
    m.settle(&mut world);
    let w = won(&m).expect("two of three");
    let (early, late) = (
        Deadline::from_sent(t, &world.timing),
        Deadline::from_sent(retry_at, &world.timing),
    );
    assert_eq!(w.leases, vec![Some(early), Some(late), None]);
    assert_eq!(w.kill, early, "the 2nd latest, not the latest");
}

/// No term starts once the k-th latest deadline is less than `G` away: a write confirmed at
/// that stop deadline wins nothing (as on one lease), and the leases go back.
#[test]
fn no_term_starts_past_the_stop_deadline() {
    for (before, wins) in [(Duration::from_millis(1), true), (Duration::ZERO, false)] {
        let (mut world, mut m) = one_member(3);
        let t = world.now;
        let stop_at = Deadline::from_sent(t, &world.timing).stop_at;
        m.feed(t, Input::Start);
        // Slow answers, each just in time: the writes go out with little left.
        world.now = t + Duration::from_millis(3900);
        m.carry(&mut world, is_acquire, |_| false);
        world.now = t + Duration::from_millis(7800);
        m.carry(&mut world, |r| matches!(r, Request::Read { .. }), |_| false);
        for (send, _) in &m.queue {
            if let Request::WriteEpoch { until, .. } = send.request {
                assert_eq!(until, stop_at, "never waited for past the stop deadline");
            }
        }
        world.now = stop_at - before;
        m.settle(&mut world);
        assert_eq!(won(&m).is_some(), wins, "{before:?} before");
        if !wins {
            assert_eq!((0..3).filter_map(|a| world.holder(a)).count(), 0);
        }
    }
}

/// A majority confirmed only once the k-th latest stop deadline passed starts no body, even
/// though each write came within its own lease's limit.
#[test]
fn a_confirmation_past_the_kth_latest_stop_deadline_wins_nothing() {
    let (mut world, mut m) = one_member(3);
    hold(&mut world, 1, 9);
    let t = world.now;
    let at = |ms: u64| t + Duration::from_millis(ms);
    m.feed(t, Input::Start);
    // A slow round: the retry (of the replica refused, as long again as the round took after)
    // is due as the silent replica's acquire is cut, and goes to both.
    world.now = at(2000);
    m.carry(&mut world, |r| r.replica() != 2, |_| false);
    world.now = at(4000);
    m.feed(world.now, Input::Timer);
    let acquires = m.sent.iter().filter(|r| is_acquire(r));
    assert_eq!(acquires.count(), 3 + 2, "the two others retried");
    // The retry: replica 1, freed, answers slowly; replica 2 stays silent.
    world.accounts[1].as_mut().unwrap().holder = None;
    world.now = at(7900);
    m.carry(&mut world, |r| is_acquire(r) && r.replica() == 1, |_| false);
    world.now = at(8000);
    m.feed(world.now, Input::Timer);
    world.now = at(8500);
    m.carry(&mut world, |r| matches!(r, Request::Read { .. }), |_| false);
    m.carry(
        &mut world,
        |r| r.replica() == 0 && !is_acquire(r),
        |_| false,
    );
    // Replica 1's write comes within its own limit, past replica 0's stop deadline (t + 9 s).
    world.now = at(9500);
    m.carry(&mut world, |r| r.replica() == 1, |_| false);
    assert!(won(&m).is_none());
    assert_eq!(failed(&m).map(|f| f.why), Some(Why::PastStopDeadline));
}

/// A split vote ends: of three members that won one replica each, the holder of the first
/// retries and wins once the others yielded, each with a pause that grows with the rounds.
#[test]
fn a_split_vote_ends() {
    let s = set(3);
    let mut world = World::new(Instant::now(), stamps(&s));
    let mut members: Vec<Member> = (0..3)
        .map(|id| Member::new(id, vec![0, 1, 2], settings(s)))
        .collect();
    for m in &mut members {
        m.feed(world.now, Input::Start);
    }
    world.now += Duration::from_millis(10);
    // Member i's acquire reaches replica i first.
    for (i, m) in members.iter_mut().enumerate() {
        m.carry(&mut world, |r| is_acquire(r) && r.replica() == i, |_| false);
    }
    for m in &mut members {
        m.carry(&mut world, is_acquire, |_| false);
    }
    members[1].settle(&mut world);
    members[2].settle(&mut world);
    members[0].settle(&mut world);
    assert!(won(&members[0]).is_some(), "the first replica's holder");
    let pace = crate::pace::Pace::new(&world.timing);
    for m in &members[1..] {
        let f = failed(m).expect("yielded");
        assert_eq!((f.why, f.split_round), (Why::Split, 1));
        assert_eq!(f.pause, Some(split_pause(&pace, 1, 0.5)));
    }
    let first = split_pause(&pace, 1, 0.99);
    assert!(split_pause(&pace, 3, 0.0) > first, "the pause grows");
}

/// A set of one is today's single lease: a blob without a stamp counts, the epoch is the one
/// after the blob's (not the seen's, not the wall clock's), the deadline from the acquire's send,
/// the lock-delay the member's own.
#[test]
fn a_set_of_one_is_the_single_lease() {
    let one = set(1);
    let mut world = World::new(Instant::now(), vec![Stamp::default()]);
    world.accounts[0].as_mut().unwrap().epoch = Some(41);
    let t = world.now;
    let mut m = Member::new(
        1,
        vec![0],
        Settings {
            seen: Some(100),
            ..settings(one)
        },
    );
    m.ground.wall_ms = 5000;
    m.feed(t, Input::Start);
    m.settle(&mut world);
    let deadline = Deadline::from_sent(t, &world.timing);
    let expected = Won {
        epoch: 42,
        leases: vec![Some(deadline)],
        kill: deadline,
        unheld: Unheld {
            stamps: vec![Stamp::default()],
            from: vec![None],
        },
    };
    assert_eq!(won(&m), Some(&expected));
    let requests: Vec<&str> = (m.sent.iter())
        .map(|r| match r {
            Request::Acquire { .. } => "acquire",
            Request::Read { .. } => "read",
            Request::WriteEpoch { .. } => "write",
            _ => "other",
        })
        .collect();
    assert_eq!(requests, ["acquire", "read", "write"], "as attempt.rs's");
}

/// A member shutting down spends no epoch: the leases it won go back before any write.
#[test]
fn a_member_shutting_down_writes_no_epoch() {
    let (mut world, mut m) = one_member(3);
    m.ground.shutting_down = true;
    m.feed(world.now, Input::Start);
    m.settle(&mut world);
    assert_eq!(failed(&m).map(|f| f.why), Some(Why::ShuttingDown));
    assert!(
        !m.sent
            .iter()
            .any(|r| matches!(r, Request::WriteEpoch { .. }))
    );
    assert_eq!(released(&m), vec![0, 1, 2]);
}

/// A split start as three members reaching one replica each at once and the two others 300 ms
/// late play it, from the first replica's holder: its round wins replica 0 (read at once) and is
/// refused on 1 and 2, held by the members that reached them first; those yield and release, and
/// its retry wins 1 and 2 as they go. Read there, the three count: the epoch is written to all
/// three and the term is won, its kill deadline the retried leases' (the k-th latest). Were the
/// blobs stamped by another set (a member listing other endpoints, however they reach the same
/// accounts; the rule *One replica set*), the same answers would count for nothing: no epoch
/// written, all three released, and each named as another set's.
#[test]
fn a_split_starts_retry_wins_on_the_replicas_the_others_yielded() {
    let late = Duration::from_millis(300);
    let ours = set(3);
    let other = ReplicaSet::new(&["a0 elsewhere", "a1 elsewhere", "a2 elsewhere"]).unwrap();
    for (stamped, wins) in [(ours, true), (other, false)] {
        let mut world = World::new(Instant::now(), stamps(&stamped));
        let mut m = Member::new(1, vec![0, 1, 2], settings(ours));
        hold(&mut world, 1, 2);
        hold(&mut world, 2, 3);
        let t = world.now;
        m.feed(t, Input::Start);
        world.now = t + Duration::from_millis(5);
        m.carry(&mut world, to(0), |_| false);
        assert!(m.queue.iter().all(|(s, _)| is_acquire(&s.request)), "read");
        world.now = t + late;
        // The first round's two acquires still queued, refused.
        m.carry_one(&mut world, 0, false);
        m.carry_one(&mut world, 0, false);
        let retried = |r: &Request<Instant>| is_acquire(r) && r.replica() != 0;
        assert_eq!(
            m.queue.iter().filter(|(s, _)| retried(&s.request)).count(),
            2
        );
        // The two others yielded and released.
        world.accounts[1].as_mut().unwrap().holder = None;
        world.accounts[2].as_mut().unwrap().holder = None;
        world.now = t + late * 2;
        m.carry(&mut world, is_acquire, |_| false);
        world.now = t + late * 3;
        m.carry(&mut world, |r| matches!(r, Request::Read { .. }), |_| false);
        let writes = (m.queue.iter())
            .filter(|(s, _)| matches!(s.request, Request::WriteEpoch { .. }))
            .count();
        assert_eq!(writes, if wins { 3 } else { 0 }, "{wins}");
        m.settle(&mut world);
        let written = (0..3).filter(|&a| world.accounts[a].as_ref().unwrap().epoch.is_some());
        match wins {
            true => {
                let w = won(&m).expect("the retry's majority");
                let (first, retry) = (
                    Deadline::from_sent(t, &world.timing),
                    Deadline::from_sent(t + late, &world.timing),
                );
                // Won on the first two writes confirmed; the third joins.
                assert_eq!(w.leases, vec![Some(first), Some(retry), None]);
                let joined = |o: &Output<Instant>| matches!(o, Output::Joined { replica: 2, .. });
                assert!(m.ends.iter().any(joined));
                assert_eq!(written.count(), 3);
                assert!(released(&m).is_empty());
                assert!((0..3).all(|a| world.holder(a) == Some(1)));
            }
            false => {
                let failed = failed(&m).expect("failed");
                assert_eq!(failed.why, Why::TooFew);
                let foreign: Vec<usize> = failed.foreign_places().collect();
                assert_eq!(foreign, [0, 1, 2], "each named another set's");
                assert_eq!(written.count(), 0);
                assert_eq!(released(&m), vec![0, 1, 2]);
            }
        }
    }
}

/// Without `[storage].create_if_missing`, a replica whose blob is missing is never created: it
/// counts for nobody, and an attempt left without a majority by it names it; with it, the same
/// replicas are created, stamped for the set.
#[test]
fn without_create_if_missing_a_missing_replica_is_named_not_created() {
    let s = set(3);
    for create in [false, true] {
        let mut world = World::new(Instant::now(), stamps(&s));
        world.accounts[1] = None;
        world.accounts[2] = None;
        let settings = Settings {
            create_if_missing: create,
            ..settings(s)
        };
        let mut m = Member::new(1, vec![0, 1, 2], settings);
        m.feed(world.now, Input::Start);
        m.settle(&mut world);
        let f = failed(&m).expect("no majority counts at once");
        let missing: Vec<usize> = f.missing_places().collect();
        let created = world.accounts[1].is_some() && world.accounts[2].is_some();
        match create {
            false => {
                assert_eq!(missing, [1, 2], "named");
                assert!(world.accounts[1].is_none() && world.accounts[2].is_none());
            }
            true => assert!(missing.is_empty() && created, "created: {missing:?}"),
        }
    }
}
