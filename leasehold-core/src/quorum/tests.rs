//! The rules of a lease held on several storage accounts, one test a rule, with their
//! boundaries.

use super::*;
use crate::epoch;
use crate::exchange::Answer;
use crate::holder::{Holder, Mutants as HolderMutants, Reply};
use crate::pace::Pace;
use crate::timing::{Deadline, Timing};
use std::time::Duration;
use std::time::Instant;

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

fn timing() -> Timing {
    Timing::default()
}

/// The set of `n` accounts `a0`, `a1`, ...
fn set(n: usize) -> ReplicaSet {
    let accounts: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
    ReplicaSet::new(&accounts).unwrap()
}

/// Replica `i` of `set` as its blob carries it: the set's fingerprint and id `i`.
fn stamp(set: &ReplicaSet, i: u128) -> Stamp {
    Stamp::new(set, ReplicaId(i))
}

/// A replica of `set` won by an acquire sent at `sent` (heard at once) and read then: its epoch
/// `epoch`, its blob's id `id`.
fn won(set: &ReplicaSet, id: u128, sent: Instant, epoch: Option<u64>) -> Replica<Instant> {
    let mut r = Replica::default();
    r.won(sent, sent, &timing());
    r.read(sent, true, epoch, stamp(set, id));
    r
}

/// The replicas of a set of `n`, each won at `t0 + sends[i]` seconds with epoch `i + 1`.
fn won_at(n: usize, t0: Instant, sends: &[u64]) -> (ReplicaSet, Vec<Replica<Instant>>) {
    let s = set(n);
    let replicas = (0..n)
        .map(|i| won(&s, i as u128, t0 + secs(sends[i]), Some(i as u64 + 1)))
        .collect();
    (s, replicas)
}

fn count_at(s: &ReplicaSet, r: &[Replica<Instant>], now: Instant) -> Count<Instant> {
    count(s, r, None, now, Mutants::default())
}

fn places(c: &Count<Instant>) -> Vec<usize> {
    c.counted().iter().map(|c| c.place).collect()
}

#[test]
fn a_set_has_one_three_or_five_accounts_and_a_majority() {
    for (n, k) in [(1, 1), (3, 2), (5, 3)] {
        let s = set(n);
        assert_eq!((s.len(), s.majority(), s.is_empty()), (n, k, false));
    }
    for n in [0, 2, 4, 6] {
        let accounts = vec!["a"; n];
        assert_eq!(ReplicaSet::new(&accounts), Err(SetError(n)));
    }
    let message = SetError(2).to_string();
    assert!(message.starts_with("2 storage accounts: ") && !message.contains('\n'));
}

/// The fingerprint is a function of the accounts in order, the same on every machine and
/// version (pinned), and shown and read back as 16 hex digits.
#[test]
fn the_fingerprint_is_of_the_accounts_in_their_order() {
    let f = |accounts: &[&str]| Fingerprint::of(accounts);
    let group = f(&["a0", "a1", "a2"]);
    assert_eq!(group, set(3).fingerprint());
    assert_eq!(
        group.to_string(),
        "26f41068347597ac",
        "pinned: blobs carry it"
    );
    assert_ne!(group, f(&["a0", "a2", "a1"]), "another order");
    assert_ne!(group, f(&["a0", "a1", "a1"]), "an account listed twice");
    assert_ne!(group, f(&["a0", "a1", "a3"]), "another account");
    assert_ne!(f(&["ab", "c"]), f(&["a", "bc"]), "lengths are part of it");
    assert_eq!(group.to_string().parse::<Fingerprint>(), Ok(group));
    for bad in [
        "",
        "26F41068347597AC",
        "26f41068347597a",
        "26f41068347597acc",
        "+6f41068347597ac",
    ] {
        assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
    }
    let id = ReplicaId(0x0123_4567_89ab_cdef_0011_2233_4455_6677);
    assert_eq!(id.to_string(), "0123456789abcdef0011223344556677");
    assert_eq!(id.to_string().parse::<ReplicaId>(), Ok(id));
    assert!("0123".parse::<ReplicaId>().is_err());
}

/// Only a blob with the set's fingerprint and an id counts; a set of one also takes a blob
/// without a stamp (today's), but not one another set stamped.
#[test]
fn a_stamp_matches_its_own_set_only() {
    let (three, one) = (set(3), set(1));
    let id = Some(ReplicaId(7));
    let own = Stamp::new(&three, ReplicaId(7));
    assert!(own.matches(&three));
    assert!(!own.matches(&one) && !own.matches(&set(5)));
    let no_id = Stamp { id: None, ..own };
    assert!(!no_id.matches(&three));
    assert!(!Stamp::default().matches(&three), "a blob no set stamped");
    assert!(Stamp::default().matches(&one));
    assert!(Stamp::new(&one, ReplicaId(1)).matches(&one));
    let fingerprint = Some(one.fingerprint());
    assert!(
        Stamp {
            fingerprint,
            id: None
        }
        .matches(&one)
    );
    assert!(!Stamp { fingerprint, id }.matches(&three));
}

/// A replica counts until its deadline `t_s + L - M`: not at it.
#[test]
fn a_replica_counts_until_its_deadline_not_at_it() {
    let t0 = Instant::now();
    let (s, r) = won_at(3, t0, &[0, 0, 0]);
    let kill = Deadline::from_sent(t0, &timing()).kill_at;
    assert_eq!(kill - t0, secs(14));
    let before = kill - Duration::from_nanos(1);
    assert_eq!(places(&count_at(&s, &r, before)), [0, 1, 2]);
    assert!(count_at(&s, &r, before).leads());
    assert!(
        count_at(&s, &r, kill).counted().is_empty(),
        "at the deadline"
    );
    assert!(!count_at(&s, &r, kill).leads());
}

/// The kill deadline is the k-th latest of the counted replicas' deadlines: the 2nd of 3, the
/// 3rd of 5, whatever their order in the set.
#[test]
fn the_kill_deadline_is_the_kth_latest() {
    let t0 = Instant::now();
    let at = |s| Deadline::from_sent(t0 + secs(s), &timing());
    let (s, r) = won_at(3, t0, &[2, 0, 1]);
    assert_eq!(count_at(&s, &r, t0 + secs(2)).kill_deadline(), Some(at(1)));
    let (s, r) = won_at(5, t0, &[4, 0, 3, 1, 2]);
    let c = count_at(&s, &r, t0 + secs(4));
    assert_eq!((c.majority(), c.kill_deadline()), (3, Some(at(2))));
    // Once the earliest has passed (at 14 s), the 3rd latest of the four left.
    let c = count_at(&s, &r, t0 + secs(14));
    assert_eq!(places(&c), [0, 2, 3, 4]);
    assert_eq!(c.kill_deadline(), Some(at(2)));
    // Two left of five: no lead, no deadline.
    let c = count_at(&s, &r, t0 + secs(16));
    assert_eq!(
        (places(&c), c.leads(), c.kill_deadline()),
        (vec![0, 2], false, None)
    );
    assert_eq!(kth_latest([at(1), at(3), at(2)], 3), Some(at(1)));
    assert_eq!(kth_latest([at(1), at(3)], 3), None);
    assert_eq!(kth_latest([at(1)], 0), None);
    // The latest of one: the first of those that end together.
    assert_eq!(kth_latest([at(1), at(3), at(2)], 1), Some(at(3)));
    let late = Deadline {
        stop_at: t0,
        ..at(3)
    };
    assert_eq!(kth_latest([at(1), late, at(3)], 1), Some(late));
    assert_eq!(kth_latest([], 1), None::<Deadline<Instant>>);
}

/// A request whose outcome is unknown never counts, but is released on giving up; a lease held
/// before keeps the deadline of its last heard success.
#[test]
fn an_unknown_outcome_never_counts_and_is_released() {
    let t0 = Instant::now();
    let (s, mut r) = won_at(3, t0, &[0, 0, 0]);
    r[1] = Replica::default();
    r[2] = Replica::default();
    r[2].unanswered();
    let c = count_at(&s, &r, t0);
    assert_eq!((places(&c), c.leads()), (vec![0], false));
    assert_eq!(to_release(&r), [0, 2]);
    // A renew of replica 0 without an answer: still counted, from its old send.
    r[0].unanswered();
    assert_eq!(places(&count_at(&s, &r, t0 + secs(13))), [0]);
    assert_eq!(to_release(&r), [0, 2]);
    r[0].released();
    r[2].released();
    assert_eq!(to_release(&r), Vec::<usize>::new());
}

/// A refusal drops a replica at once, whatever its deadline; a success heard late (of a
/// request sent before) does not bring it back, nor move a deadline back.
#[test]
fn a_refusal_after_a_win_drops_the_replica_at_once() {
    let t0 = Instant::now();
    let t = timing();
    let (s, mut r) = won_at(3, t0, &[0, 0, 0]);
    r[0].renewed(t0 + secs(4), &t);
    r[0].renewed(t0 + secs(2), &t);
    assert_eq!(
        r[0].lease.unwrap().deadline,
        Deadline::from_sent(t0 + secs(4), &t)
    );
    r[1].refused();
    let c = count_at(&s, &r, t0 + secs(5));
    assert_eq!((places(&c), c.leads()), (vec![0, 2], true));
    r[1].renewed(t0 + secs(5), &t);
    assert_eq!(r[1].lease, None, "a late success does not bring it back");
    r[2].refused();
    assert!(!count_at(&s, &r, t0 + secs(5)).leads());
}

/// A young replica counts for nobody until it is `lock_delay` old; a running lock-delay that
/// ends later is kept; a brand-new group's blob has none.
#[test]
fn a_young_replica_counts_only_once_it_is_old() {
    let t0 = Instant::now();
    let ld = Pace::new(&timing()).lock_delay();
    let (s, mut r) = won_at(3, t0, &[0, 0, 0]);
    r[1].aged(t0, secs(6), ld);
    assert_eq!(r[1].young_until, Some(t0 + secs(10)));
    r[1].aged(t0 + secs(1), secs(20), ld);
    assert_eq!(
        r[1].young_until,
        Some(t0 + secs(10)),
        "an older age ends nothing sooner"
    );
    let just_before = t0 + secs(10) - Duration::from_nanos(1);
    assert_eq!(places(&count_at(&s, &r, just_before)), [0, 2]);
    assert_eq!(places(&count_at(&s, &r, t0 + secs(10))), [0, 1, 2]);
    r[2].aged(t0, secs(20), ld);
    assert_eq!(places(&count_at(&s, &r, t0)), [0, 2], "old already");
    r[1].fresh();
    assert_eq!(places(&count_at(&s, &r, t0)), [0, 1, 2]);
    // Two replicas young: no majority, whatever their leases.
    r[0].aged(t0, Duration::ZERO, ld);
    r[2].aged(t0, Duration::ZERO, ld);
    assert!(!count_at(&s, &r, t0 + secs(13)).leads());
}

/// A blob without an epoch is one created again (or its metadata lost): its lock-delay, by its
/// age, is all that keeps it from counting. Once old it counts, adding no epoch (the wall clock
/// covers the one it forgot), so that a group whose replicas all lost their epochs still leads.
#[test]
fn a_blob_without_an_epoch_counts_once_it_is_old() {
    let t0 = Instant::now();
    let ld = Pace::new(&timing()).lock_delay();
    let s = set(3);
    let mut r: Vec<Replica<Instant>> = (0..3).map(|i| won(&s, i, t0, None)).collect();
    r[0].read(t0, true, Some(9), stamp(&s, 0));
    for young in &mut r[1..] {
        young.aged(t0, secs(3), ld);
    }
    assert_eq!(places(&count_at(&s, &r, t0 + secs(12))), [0]);
    let c = count_at(&s, &r, t0 + secs(13));
    assert_eq!(
        (places(&c), c.leads(), c.largest_epoch()),
        (vec![0, 1, 2], true, Some(9))
    );
    r[0].read(t0, true, None, stamp(&s, 0));
    let c = count_at(&s, &r, t0 + secs(13));
    assert_eq!((c.leads(), c.largest_epoch()), (true, None));
    assert_eq!(new_epoch(&s, c.largest_epoch(), None, 1_000), Some(1_000));
}

/// A replica stamped by another set does not count; one account listed twice counts once.
#[test]
fn only_matching_distinct_replicas_count() {
    let t0 = Instant::now();
    let s = set(3);
    let other = set(5);
    let mut r = vec![
        won(&s, 0, t0, Some(1)),
        won(&other, 1, t0, Some(1)),
        won(&s, 2, t0, Some(1)),
    ];
    assert_eq!(places(&count_at(&s, &r, t0)), [0, 2]);
    r[1].stamp.fingerprint = None;
    assert_eq!(places(&count_at(&s, &r, t0)), [0, 2], "no fingerprint");
    // [a0, a1, a1]: the second place is the first's blob, and counts once.
    r[1] = won(&s, 1, t0, Some(1));
    r[2] = r[1];
    let c = count_at(&s, &r, t0);
    assert_eq!((places(&c), c.leads()), (vec![0, 1], true));
    r[0].refused();
    let c = count_at(&s, &r, t0);
    assert_eq!(
        (places(&c), c.leads()),
        (vec![1], false),
        "one account is no majority"
    );
}

/// An epoch counts only if read at or after this member's acquire there; until then the
/// replica does not count at all.
#[test]
fn an_epoch_read_before_the_acquire_does_not_count() {
    let t0 = Instant::now();
    let (s, mut r) = won_at(3, t0, &[0, 0, 0]);
    let t = timing();
    r[0].won(t0 + secs(1), t0 + secs(2), &t);
    assert_eq!(
        places(&count_at(&s, &r, t0 + secs(2))),
        [1, 2],
        "not read yet"
    );
    r[0].read(t0 + secs(1), false, Some(9), stamp(&s, 0));
    assert_eq!(
        r[0].lease.unwrap().read,
        Read::Unread,
        "sent before the acquire was heard"
    );
    r[0].read(t0 + secs(1), true, Some(9), stamp(&s, 0));
    assert_eq!(
        r[0].lease.unwrap().read,
        Read::Epoch(9),
        "the acquire's ETag"
    );
    r[0].read(t0 + secs(2), false, None, stamp(&s, 0));
    assert_eq!(r[0].lease.unwrap().read, Read::NoEpoch, "sent after it");
    let c = count_at(&s, &r, t0 + secs(2));
    assert_eq!((places(&c), c.largest_epoch()), (vec![0, 1, 2], Some(3)));
}

/// Once the term has its epoch, a replica counts only where that epoch's write was confirmed;
/// the body starts once a majority confirmed it, while its deadline is at least `G` away.
#[test]
fn the_epoch_is_written_to_a_majority_before_the_body_starts() {
    let t0 = Instant::now();
    let (s, mut r) = won_at(3, t0, &[0, 0, 0]);
    let epoch = new_epoch(&s, count_at(&s, &r, t0).largest_epoch(), None, 5).unwrap();
    assert_eq!(epoch, 5, "the wall clock, above 3 + 1");
    let with = |r: &[Replica<Instant>], now| count(&s, r, Some(epoch), now, Mutants::default());
    assert!(!with(&r, t0).leads() && !with(&r, t0).may_start(t0));
    assert_eq!(to_write(&r, epoch, t0), [0, 1, 2]);
    r[2].written(epoch);
    assert_eq!(to_write(&r, epoch, t0), [0, 1]);
    assert!(
        !with(&r, t0).leads() && !with(&r, t0).confirmed(),
        "one confirmed"
    );
    r[0].written(epoch);
    r[1].refused();
    assert_eq!(to_write(&r, epoch, t0), Vec::<usize>::new());
    let c = with(&r, t0);
    assert_eq!((places(&c), c.largest_epoch()), (vec![0, 2], Some(epoch)));
    assert!(
        c.confirmed() && !count_at(&s, &r, t0).confirmed(),
        "with the term's epoch only"
    );
    // The deadline 14 s on, G = 5 s: a body may start until 9 s, at 9 s, not after.
    let stop_at = c.kill_deadline().unwrap().stop_at;
    assert_eq!(stop_at - t0, secs(9));
    assert!(with(&r, stop_at).may_start(stop_at));
    let late = stop_at + Duration::from_nanos(1);
    assert!(!with(&r, late).may_start(late));
    // A replica won later, with an older write there: due, and not counted until written.
    r[1].won(t0 + secs(1), t0 + secs(1), &timing());
    r[1].read(t0 + secs(1), true, Some(epoch - 1), stamp(&s, 1));
    r[1].lease.as_mut().unwrap().written = Some(epoch - 1);
    assert_eq!(to_write(&r, epoch, t0 + secs(1)), [1]);
    assert_eq!(places(&with(&r, t0 + secs(1))), [0, 2]);
}

/// The epoch of several replicas: the largest of the counted replicas' + 1, the largest seen + 1
/// and the wall clock; of one, the single lease's.
#[test]
fn the_new_epoch_is_the_largest_of_three() {
    let three = set(3);
    assert_eq!(new_epoch(&three, Some(7), Some(3), 5), Some(8));
    assert_eq!(new_epoch(&three, Some(7), Some(12), 5), Some(13));
    assert_eq!(new_epoch(&three, Some(7), Some(12), 1_000), Some(1_000));
    assert_eq!(new_epoch(&three, None, None, 0), Some(1));
    assert_eq!(new_epoch(&three, Some(u64::MAX), None, 0), None);
    let one = set(1);
    for (read, wall) in [
        (Some(7), 1_000),
        (None, 1_000),
        (Some(u64::MAX), 0),
        (None, 0),
    ] {
        assert_eq!(
            new_epoch(&one, read, Some(100), wall),
            epoch::next(read, wall)
        );
    }
}

/// A set of one is the single lease: `k = 1`, its deadline the holder's, lost at the first
/// refusal, a blob without a stamp counted, the epoch `epoch::next`'s.
#[test]
fn a_set_of_one_is_the_single_lease() {
    let t0 = Instant::now();
    let t = timing();
    let s = set(1);
    let mut r = [Replica::default()];
    r[0].won(t0, t0, &t);
    r[0].read(t0, true, Some(41), Stamp::default());
    let mut holder = Holder::new(&t, t0, 1, HolderMutants::default());
    let c = count_at(&s, &r, t0);
    assert_eq!(c.majority(), 1);
    assert_eq!(c.kill_deadline(), Some(holder.tenure().deadline()));
    assert_eq!(new_epoch(&s, c.largest_epoch(), None, 1_000), Some(42));
    // Renewed at 4 s: both move on.
    let at = t0 + secs(4);
    let renew = holder.poll_request(at).unwrap();
    let answer = |reply| Answer {
        tag: renew.tag,
        sent: at,
        answer: reply,
    };
    holder.handle_answer(at, answer(Reply::Renewed), || 0.0);
    r[0].renewed(at, &t);
    assert_eq!(
        count_at(&s, &r, at).kill_deadline(),
        Some(holder.tenure().deadline())
    );
    let stop_at = holder.tenure().deadline().stop_at;
    assert!(count_at(&s, &r, stop_at).may_start(stop_at));
    // Refused at 8 s: both lose it at once.
    let at = t0 + secs(8);
    let renew = holder.poll_request(at).unwrap();
    let refused = Answer {
        tag: renew.tag,
        sent: at,
        answer: Reply::Refused { missing: false },
    };
    holder.handle_answer(at, refused, || 0.0);
    r[0].refused();
    assert!(!holder.tenure().is_held());
    assert!(!count_at(&s, &r, at).leads());
}

/// The member whose won replica comes first among those that answered retries, once; every
/// other member that won a minority yields.
#[test]
fn a_split_vote_is_retried_by_the_first_replica_s_holder_only() {
    use Outcome::{Refused, Unknown, Won};
    let three = set(3);
    assert_eq!(
        split_vote(&three, &[Won, Refused, Refused], false),
        Some(Split::Retry)
    );
    assert_eq!(
        split_vote(&three, &[Won, Refused, Refused], true),
        Some(Split::Yield)
    );
    assert_eq!(
        split_vote(&three, &[Refused, Won, Refused], false),
        Some(Split::Yield)
    );
    assert_eq!(
        split_vote(&three, &[Refused, Refused, Won], false),
        Some(Split::Yield)
    );
    // The first replica down: the second decides.
    assert_eq!(
        split_vote(&three, &[Unknown, Won, Refused], false),
        Some(Split::Retry)
    );
    assert_eq!(
        split_vote(&three, &[Unknown, Refused, Won], false),
        Some(Split::Yield)
    );
    // A majority, or nothing won: no split for this member.
    assert_eq!(split_vote(&three, &[Won, Refused, Won], false), None);
    assert_eq!(
        split_vote(&three, &[Refused, Unknown, Refused], false),
        None
    );
    let five = set(5);
    let two_of_five = [Refused, Won, Won, Refused, Refused];
    assert_eq!(split_vote(&five, &two_of_five, false), Some(Split::Yield));
}

/// Before a round settled, a member acts at once where no answer still on its way changes
/// what it does: it yields, retries the replicas that refused it, or cuts what is on its way;
/// it waits where an answer on its way may still win it a majority or decide who retries.
#[test]
fn a_round_is_decided_before_it_settled_where_no_answer_on_its_way_changes_it() {
    use Outcome::{Refused, Unknown, Won};
    let three = set(3);
    let (o, x) = (false, true);
    // A round so far, the acquires on their way, whether it is a retry, and what it does.
    type Case<'a> = (&'a [Outcome], &'a [bool], bool, Option<Early>);
    let cases: [Case; 9] = [
        // A majority won: the attempt goes on (its own rule for the rest).
        (&[Won, Won, Unknown], &[o, o, x], false, None),
        // A replica before the one it won refused it: it yields.
        (
            &[Refused, Won, Unknown],
            &[o, o, x],
            false,
            Some(Early::Yield),
        ),
        // The first replica's holder retries the one refused, whatever the third gets.
        (
            &[Won, Refused, Unknown],
            &[o, o, x],
            false,
            Some(Early::Retry),
        ),
        (
            &[Won, Unknown, Refused],
            &[o, x, o],
            false,
            Some(Early::Retry),
        ),
        // Its retry refused again, and nothing on its way can make a majority (a read is): it
        // yields.
        (
            &[Won, Refused, Refused],
            &[o, o, o],
            true,
            Some(Early::Yield),
        ),
        // ... but an answer on its way still might: it waits.
        (&[Won, Refused, Unknown], &[o, o, x], true, None),
        // Refused by two: the third cannot make a majority; it is cut after the round's time.
        (
            &[Refused, Refused, Unknown],
            &[o, o, x],
            false,
            Some(Early::Cut),
        ),
        // The first replica's answer is on its way: it decides who retries.
        (&[Unknown, Won, Refused], &[x, o, o], false, None),
        // Nothing answered yet.
        (&[Unknown, Unknown, Unknown], &[x, x, x], false, None),
    ];
    for (round, on_way, retried, early) in cases {
        assert_eq!(
            before_settled(&three, round, on_way, retried),
            early,
            "{round:?} {on_way:?} retried {retried}"
        );
    }
    // Of five: one won first, three refused, one on its way: no majority can come; it retries.
    let five = set(5);
    let round = [Won, Refused, Refused, Refused, Unknown];
    let on_way = [o, o, o, o, x];
    assert_eq!(
        before_settled(&five, &round, &on_way, false),
        Some(Early::Retry)
    );
    // One won first, the others on their way or missing (no blob): cut once none can win it.
    let round = [Won, Unknown, Unknown, Unknown, Unknown];
    let on_way = [o, o, o, o, x];
    assert_eq!(
        before_settled(&five, &round, &on_way, false),
        Some(Early::Cut)
    );
    let on_way = [o, x, o, o, x];
    assert_eq!(before_settled(&five, &round, &on_way, false), None);
}

/// The pause after a split vote grows with each round, up to the longest poll, each a random
/// half to whole.
#[test]
fn the_pause_after_a_split_grows_with_each_round() {
    let pace = Pace::new(&timing());
    let ms = |d: Duration| d.as_millis();
    let whole: Vec<u128> = (1..=5).map(|n| ms(split_pause(&pace, n, 1.0))).collect();
    assert_eq!(whole, [200, 400, 800, 1200, 1200]);
    assert_eq!(ms(split_pause(&pace, 1, 0.0)), 100);
    assert_eq!(ms(split_pause(&pace, 2, 0.5)), 300);
    assert_eq!(
        split_pause(&pace, u32::MAX, 1.0),
        pace.split_pause_longest()
    );
}

/// A group is brand-new only if every replica answered empty.
#[test]
fn a_group_is_brand_new_only_if_every_replica_is_empty() {
    use Looked::{Empty, Unanswered, Used};
    let three = set(3);
    assert!(brand_new(&three, &[Empty, Empty, Empty]));
    assert!(!brand_new(&three, &[Empty, Empty, Used]));
    assert!(!brand_new(&three, &[Empty, Unanswered, Empty]));
    assert!(!brand_new(&three, &[Empty, Empty]));
    assert!(brand_new(&set(1), &[Empty]));
}

/// The broken rules, switched on: a member leads on one of three; its deadline is the latest.
#[test]
fn the_mutants_break_what_they_say() {
    let t0 = Instant::now();
    let (s, mut r) = won_at(3, t0, &[0, 2, 1]);
    let at = |s| Deadline::from_sent(t0 + secs(s), &timing());
    let latest = Mutants {
        deadline_from_latest: true,
        ..Mutants::default()
    };
    assert_eq!(count(&s, &r, None, t0, latest).kill_deadline(), Some(at(2)));
    r[1].refused();
    r[2].refused();
    let minority = Mutants {
        minority_leads: true,
        ..Mutants::default()
    };
    let c = count(&s, &r, None, t0, minority);
    assert_eq!(
        (c.majority(), c.leads(), c.kill_deadline()),
        (1, true, Some(at(0)))
    );
    assert!(!count_at(&s, &r, t0).leads());
}
