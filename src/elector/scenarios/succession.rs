//! Succession on paused time: instances of one group on the in-memory store, each through a
//! client of its own (which counts its requests and can be cut off).

use crate::elector::testing::{Arrives, Wakes};
use crate::elector::testing::{Cost, Instance, Life, Lives, joined, stop_all, timing};
use crate::store::GroupStore;
use crate::store::memory::{Behaviour, MemoryStore, Op};
use leasehold_core::Pace;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::time::{Instant, sleep};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A group of three on a store of its own: `a` leads, then `b` and `c` join (in that
/// order of identity, the same second) and settle.
async fn three() -> (Arc<MemoryStore>, Lives, Instance, Instance, Instance) {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    lives.nth(1).await;
    let b = Instance::start(&store, "b", &lives, None);
    let c = Instance::start(&store, "c", &lives, None);
    joined(&store, "b").await;
    joined(&store, "c").await;
    sleep(secs(20.0)).await;
    (store, lives, a, b, c)
}

/// Prints how long after `since` the task of `next` started, beside its bound, and
/// asserts the bound.
fn led_within(next: &Life, since: Instant, after: &str, bound: Duration) {
    let took = next.start - since;
    println!(
        "{} led {took:?} after {after} (bound {bound:?})",
        next.identity
    );
    assert!(took <= bound, "{took:?} > {bound:?}");
}

fn count(sent: &[Op], op: Op) -> usize {
    sent.iter().filter(|o| **o == op).count()
}

#[tokio::test(start_paused = true)]
async fn a_shutdown_hands_the_lease_to_the_first_in_line_after_its_task_is_gone() {
    let (store, lives, a, b, c) = three().await;
    let c_acquires = count(&c.client.sent(), Op::Acquire);
    let a_lease = store.lease_id().unwrap();
    let b_id = store.member("b").unwrap().member.acquires_with;
    a.stop().await;
    let gone = lives.gone(1).await;
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "b", "the first in line after the leader");
    let changes = store.calls(Op::Change);
    assert_eq!(changes.len(), 1);
    assert!(changes[0] >= gone, "changed only after the task was gone");
    assert_eq!(store.ids(Op::Change), vec![a_lease]);
    assert_eq!(
        store.lease_id(),
        Some(b_id),
        "b acquired with the id it published"
    );
    led_within(&next, changes[0], "the handoff", timing().longest_poll());
    assert!(
        store.ids(Op::Release).is_empty(),
        "handed over, not released"
    );
    assert!(
        store.member("a").is_none(),
        "a left the line: its record is deleted"
    );
    // c watched until then; once it saw b lead, it listed (it is next without a) and
    // found a gone: now the successor, it polls.
    let c_lists = count(&c.client.sent(), Op::List);
    assert!(
        count(&c.client.sent(), Op::Acquire) <= c_acquires + 1,
        "c did not poll while a led"
    );
    sleep(secs(30.0)).await;
    assert_eq!(count(&c.client.sent(), Op::List), c_lists + 1);
    assert!(count(&c.client.sent(), Op::Acquire) >= c_acquires + 20);
    lives.assert_one_at_a_time();
    // b hands over to c, the only member left.
    b.stop().await;
    assert_eq!(lives.nth(3).await.identity, "c");
    c.stop().await;
    lives.assert_one_at_a_time();
}

#[tokio::test(start_paused = true)]
async fn with_no_other_live_member_the_lease_is_released() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    lives.nth(1).await;
    sleep(secs(5.0)).await;
    a.stop().await;
    assert!(store.calls(Op::Change).is_empty());
    assert_eq!(store.calls(Op::Release).len(), 1);
    assert!(!store.is_leased());
    assert!(store.members().is_empty());
}

/// A change that gets no answer may or may not have landed: the leader releases with its
/// own id, which frees the lease if it did not land and is refused if it did. Either way
/// the successor leads, and never beside the old task.
#[tokio::test(start_paused = true)]
async fn a_handoff_without_an_answer_falls_back_to_a_release_with_the_leaders_own_id() {
    for applied in [false, true] {
        let (store, lives, a, b, c) = three().await;
        let a_lease = store.lease_id().unwrap();
        store.set(
            Op::Change,
            if applied {
                Behaviour::SlowAnswer(secs(10.0))
            } else {
                Behaviour::Hang
            },
        );
        let asked = Instant::now();
        a.stop().await;
        let next = lives.nth(2).await;
        assert_eq!(next.identity, "b", "applied: {applied}");
        assert_eq!(
            store.ids(Op::Release),
            vec![a_lease],
            "released with a's own id"
        );
        let waited = store.calls(Op::Release)[0] - asked;
        println!(
            "applied {applied}: released {waited:?} after the stop; b led {:?} after it",
            next.start - store.calls(Op::Release)[0]
        );
        assert!(
            waited >= timing().request_timeout(),
            "after the change's timeout"
        );
        lives.assert_one_at_a_time();
        store.set(Op::Change, Behaviour::Normal);
        stop_all([b, c]).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_woken_successor_takes_the_lease_at_once() {
    let (store, lives, a, b, c) = three().await;
    let (waker, watched) = (b.waker.clone(), store.clone());
    let wake = tokio::spawn(async move {
        while watched.calls(Op::Change).is_empty() {
            sleep(Duration::from_micros(100)).await;
        }
        let token = waker.token().expose().to_owned();
        assert_eq!(waker.wake(&token), crate::WakeAnswer::Accepted);
    });
    a.stop().await;
    wake.await.unwrap();
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "b");
    let change = store.calls(Op::Change)[0];
    led_within(&next, change, "the change, woken", Duration::from_millis(1));
    stop_all([b, c]).await;
}

/// The successor crashed just before the handoff (its record still looks alive): the leader hands
/// the lease to it, sees no epoch of it within the confirm window, and hands the lease on to the
/// next member (docs/safety.md, "Recovery from anything"), which learns it from the notice at its
/// next watch: within the confirm window, a watch period and a polling period, not a lease
/// duration.
#[tokio::test(start_paused = true)]
async fn a_successor_dead_at_the_handoff_is_passed_over_within_the_confirm_window() {
    let (store, lives, a, b, c) = three().await;
    b.kill();
    let asked = Instant::now();
    a.stop().await;
    assert_eq!(
        store.calls(Op::Change).len(),
        2,
        "handed to b, which looked alive, then on to c"
    );
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "c");
    let (t, bound) = (timing(), passed_over_bound());
    led_within(&next, asked, "a's stop", bound);
    assert!(bound < t.duration, "well within a lease duration");
    lives.assert_one_at_a_time();
    c.stop().await;
}

/// A member that joined after the leader's listing (200 ms into its term) is not in its line:
/// when the line's successor is passed over and the line names nobody else, the leader lists
/// the members once before it releases, and hands the lease on to the one that joined. (The
/// suite's succession tests under load: c joined after a's listing, b was killed after the
/// handoff, and a released, leaving c to find a free lease a poll after a watch.)
#[tokio::test(start_paused = true)]
async fn a_member_that_joined_after_the_leaders_listing_is_handed_the_lease_on() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    let began = lives.nth(1).await.start;
    let b = Instance::start(&store, "b", &lives, None);
    joined(&store, "b").await;
    // a lists Pace::TERM_START_QUIET into its term: b is in its line, c (joining after) is not.
    sleep((began + Pace::TERM_START_QUIET * 2).saturating_duration_since(Instant::now())).await;
    let c = Instance::start(&store, "c", &lives, None);
    joined(&store, "c").await;
    sleep(secs(10.0)).await;
    b.kill();
    let asked = Instant::now();
    a.stop().await;
    let next = lives.nth(2).await;
    let (changes, releases) = (
        store.calls(Op::Change).len(),
        store.calls(Op::Release).len(),
    );
    println!("{changes} change(s), {releases} release(s)");
    assert_eq!(next.identity, "c");
    assert_eq!(changes, 2, "handed to b, then on to c");
    assert_eq!(releases, 0, "not released: c was found by a listing");
    let bound = passed_over_bound();
    led_within(&next, asked, "a's stop", bound);
    lives.assert_one_at_a_time();
    c.stop().await;
}

/// A member that crashed is dead once its record lease expires; the leader deletes its
/// record once it has seen it dead for ten minutes, whether or not the leader also lists
/// for preemption (whose listings keep the line fresh, so the record task never lists).
#[tokio::test(start_paused = true)]
async fn the_leader_deletes_a_record_dead_for_ten_minutes() {
    for preempt_after in [Some(secs(30.0)), None] {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let a = Instance::start_with(&store, "a", &lives, None, |e| {
            e.with_preempt_after(preempt_after)
        });
        lives.nth(1).await;
        let b = Instance::start(&store, "b", &lives, None);
        joined(&store, "b").await;
        sleep(secs(20.0)).await;
        b.crash();
        let crashed = Instant::now();
        while store.member("b").is_some() {
            assert!(
                crashed.elapsed() < Pace::DEAD_RECORD_AGE + secs(120.0),
                "b's record still there {:?} after its crash (preempt_after {preempt_after:?})",
                crashed.elapsed()
            );
            sleep(secs(1.0)).await;
        }
        println!(
            "b's record deleted {:?} after its crash (preempt_after {preempt_after:?})",
            crashed.elapsed()
        );
        assert!(crashed.elapsed() >= Pace::DEAD_RECORD_AGE);
        a.stop().await;
    }
}

/// How soon the next member leads when the lease went to a member that cannot take it: the
/// confirm window of the first in line, then the next member reads the notice within a watch
/// period and acquires within a poll.
fn passed_over_bound() -> Duration {
    let t = timing();
    leasehold_core::Pace::new(&t).confirm_window(false, true)
        + members_watch_max(&t)
        + t.longest_poll()
        + secs(0.5)
}

fn members_watch_max(t: &crate::Timing) -> Duration {
    (t.acquire_interval * leasehold_core::pace::WATCH_PERIODS)
        .mul_f64(1.0 + crate::timing::POLL_JITTER)
}

/// When a handoff went to a member that cannot take the lease, the next one leads within
/// a lease duration (the change does not restart its clock), a watch and a poll.
fn fallback_bound() -> Duration {
    let t = timing();
    t.duration + members_watch_max(&t) + t.longest_poll() + secs(0.5)
}

/// The successor is alive but cannot reach storage: same bound; and once it can again, it
/// is back in line.
#[tokio::test(start_paused = true)]
async fn a_successor_cut_off_from_storage_is_passed_over_by_the_fallback() {
    let (store, lives, a, b, c) = three().await;
    b.client.cut_off(true);
    let asked = Instant::now();
    a.stop().await;
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "c");
    led_within(&next, asked, "a's stop", fallback_bound());
    b.client.cut_off(false);
    sleep(secs(45.0)).await;
    assert!(store.member("b").unwrap().is_alive(), "b is back in line");
    c.stop().await;
    let back = lives.nth(3).await;
    assert_eq!(back.identity, "b");
    lives.assert_one_at_a_time();
    b.stop().await;
}

/// A crash hands nothing over: the successor, polling, takes the lease within
/// `L + 1.2 x acquire_interval` of the crashed leader's last renew, as without members.
#[tokio::test(start_paused = true)]
async fn a_crashed_leader_with_a_live_successor_fails_over_as_before() {
    let (store, lives, a, b, c) = three().await;
    // Its last renew: nothing runs before it is killed (no await between).
    let last_renew = *store.calls(Op::Renew).last().unwrap();
    a.kill();
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "b");
    let t = timing();
    led_within(
        &next,
        last_renew,
        "a's last renew",
        t.duration + t.longest_poll(),
    );
    stop_all([b, c]).await;
}

/// A member whose line is out of date (it never saw the successor die) is named by the
/// handoff notice, and takes the lease within a watch period without listing.
#[tokio::test(start_paused = true)]
async fn a_member_with_an_old_line_learns_of_its_handoff_from_the_notice() {
    let (store, lives, a, b, c) = three().await;
    b.kill();
    // b's record expires; c, watching, has no sign of it.
    sleep(Pace::RECORD_LEASE + secs(1.0)).await;
    assert!(!store.member("b").unwrap().is_alive());
    let lists = count(&c.client.sent(), Op::List);
    let asked = Instant::now();
    a.stop().await;
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "c");
    assert_eq!(
        store.successor(),
        None,
        "c's epoch write removed the notice"
    );
    // Within a watch period of the notice that names it; or, when that period ends after
    // a's confirm window (a passes c over, and releases: there is nobody else), of the
    // lease found free.
    let bound = passed_over_bound();
    led_within(&next, asked, "a's stop", bound);
    // (As the leader, c then lists on the leader's cadence.)
    let sent = c.client.sent();
    let won = sent.iter().rposition(|o| *o == Op::Acquire).unwrap();
    assert_eq!(
        count(&sent[..won], Op::List),
        lists,
        "no listing needed to take the lease"
    );
    lives.assert_one_at_a_time();
    c.stop().await;
}

/// After a handoff, the member that is next only if the old leader left the line lists
/// once, at its first sight of the new leader (the others do not): a leader that stopped
/// cleanly is gone, so the next handoff finds it polling, not watching.
#[tokio::test(start_paused = true)]
async fn after_a_handoff_the_member_next_without_the_old_leader_lists_once_and_polls() {
    let (store, lives, a, b, c) = three().await;
    let d = Instance::start(&store, "d", &lives, None);
    joined(&store, "d").await;
    sleep(secs(20.0)).await;
    let lists = |i: &Instance| count(&i.client.sent(), Op::List);
    let (c_lists, d_lists) = (lists(&c), lists(&d));
    a.stop().await;
    assert_eq!(lives.nth(2).await.identity, "b");
    // c sees b lead within a watch period, lists, acquires at once (placed next in line, it
    // may be handed the lease any moment), and polls from then on.
    let c_acquires = count(&c.client.sent(), Op::Acquire);
    while lists(&c) == c_lists {
        sleep(secs(0.01)).await;
    }
    sleep(secs(0.05)).await;
    assert_eq!(
        count(&c.client.sent(), Op::Acquire),
        c_acquires + 1,
        "c acquired at once after its listing"
    );
    sleep(timing().longest_poll()).await;
    assert_eq!(
        count(&c.client.sent(), Op::Acquire),
        c_acquires + 2,
        "c polled a polling period later"
    );
    // Every watcher has read the new epoch by now.
    sleep(leasehold_core::pace::WATCH_PERIODS * timing().acquire_interval * 2).await;
    assert_eq!(lists(&c), c_lists + 1, "c, next without a, listed once");
    assert_eq!(lists(&d), d_lists, "d did not list");
    let c_acquires = count(&c.client.sent(), Op::Acquire);
    sleep(secs(10.0)).await;
    assert!(
        count(&c.client.sent(), Op::Acquire) >= c_acquires + 8,
        "c polls the lease now"
    );
    let asked = Instant::now();
    b.stop().await;
    let next = lives.nth(3).await;
    assert_eq!(next.identity, "c");
    let a_poll = timing().longest_poll() + secs(0.1);
    led_within(&next, asked, "b's stop", a_poll);
    lives.assert_one_at_a_time();
    stop_all([c, d]).await;
}

/// A rolling restart: the leader stops and comes back (at the back of the line), again and
/// again. Each time the member next in line is polling by the next stop, a watch period
/// later, although its listing (minutes old) still shows the restarted leaders' old
/// records ahead of it: every handover takes at most a polling period, not a watch period.
#[tokio::test(start_paused = true)]
async fn a_rolling_restart_finds_each_successor_polling() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let names = ["a", "b", "c", "d", "e"];
    let mut group: Vec<Instance> = Vec::new();
    for name in names {
        group.push(Instance::start(&store, name, &lives, None));
        if name == "a" {
            lives.nth(1).await;
        }
        joined(&store, name).await;
    }
    sleep(secs(40.0)).await;
    let bound = timing().longest_poll() + secs(0.1);
    for step in 1..=4 {
        let leader = lives.nth(step).await.identity;
        let at = group.iter().position(|i| i.identity == leader).unwrap();
        let asked = Instant::now();
        group.remove(at).stop().await;
        group.push(Instance::start(&store, &leader, &lives, None));
        let next = lives.nth(step + 1).await;
        println!("step {step}:");
        led_within(&next, asked, &format!("{leader}'s stop"), bound);
        // More than a watch period: time for the next in line to learn it is.
        sleep(timing().acquire_interval * (leasehold_core::pace::WATCH_PERIODS + 2)).await;
    }
    lives.assert_one_at_a_time();
    stop_all(group).await;
}

/// A member that joins with a higher priority just before the handoff is not in the leader's
/// line yet (a leader lists every 30-36 s, and a handoff goes to the line's successor unless
/// the read of its record after the change shows it gone): b gets the lease, and d leads by
/// preemption once it has been a member for `preempt_after` (30 s) and b's listing shows it.
/// A member that leaves just before a handoff does not keep the lease: its record is gone.
#[tokio::test(start_paused = true)]
async fn members_joining_and_leaving_during_handoffs() {
    let (store, lives, a, b, c) = three().await;
    let d = Instance::start_with(&store, "d", &lives, None, |e| e.with_priority(5));
    joined(&store, "d").await;
    let joined_at = Instant::now();
    a.stop().await;
    assert_eq!(
        lives.nth(2).await.identity,
        "b",
        "the line's successor: d joined after the leader's last listing"
    );
    let third = lives.nth(3).await;
    assert_eq!(third.identity, "d", "the higher priority, by preemption");
    led_within(
        &third,
        joined_at,
        "d's join",
        secs(30.0) + Pace::LEADER_LIST_EVERY.mul_f64(1.2) + secs(2.0),
    );
    // b, first in line behind d, leaves just as d hands over.
    let leaving = tokio::spawn(b.stop());
    d.stop().await;
    leaving.await.unwrap();
    assert_eq!(lives.nth(4).await.identity, "c");
    lives.assert_one_at_a_time();
    c.stop().await;
}

/// Over a simulated hour, with the lease held by `a`: the successor `b` polls, the
/// follower `c` watches. Counting a List as ten requests, the follower costs at most a
/// third of the successor (the target); the figures are printed by price class.
#[tokio::test(start_paused = true)]
async fn a_follower_costs_at_most_a_third_of_the_successor() {
    let (_store, lives, a, b, c) = three().await;
    let before: Vec<Vec<Op>> = [&a, &b, &c].iter().map(|i| i.client.sent()).collect();
    sleep(Duration::from_secs(3600)).await;
    assert_eq!(lives.all().len(), 1, "a led throughout");
    let mut units = Vec::new();
    for (i, instance) in [&a, &b, &c].into_iter().enumerate() {
        let sent = instance.client.sent()[before[i].len()..].to_vec();
        let cost = Cost::of(&sent);
        println!("{}: per minute: {}", instance.identity, cost.per_minute());
        units.push(cost.units());
    }
    assert!(
        units[1] > 50 * 60,
        "the successor polls every ~1.1 s: {units:?}"
    );
    assert!(
        3 * units[2] <= units[1],
        "follower {} > successor {} / 3",
        units[2],
        units[1]
    );
    stop_all([a, b, c]).await;
}

#[tokio::test(start_paused = true)]
async fn the_memory_store_keeps_member_records_as_azure_does() {
    use crate::store::{LeaseId, Member, MemberKey};
    let store = MemoryStore::default();
    let key = MemberKey::of("m");
    let member = Member {
        identity: "m".into(),
        priority: 0,
        acquires_with: LeaseId::random(),
        advertise: None,
        wake_token: None,
        standby_until: None,
        slots: 1,
        settled: None,
    };
    let (mine, other) = (LeaseId::random(), LeaseId::random());
    let code = |r: Result<(), crate::store::StoreError>| r.unwrap_err().code().map(str::to_owned);
    assert_eq!(
        code(store.acquire_member(&key, mine, 30).await).as_deref(),
        Some("BlobNotFound")
    );
    store.create_member(&key, &member).await.unwrap();
    assert_eq!(
        code(store.create_member(&key, &member).await).as_deref(),
        Some("BlobAlreadyExists")
    );
    store.acquire_member(&key, mine, 30).await.unwrap();
    assert_eq!(
        code(store.acquire_member(&key, other, 30).await).as_deref(),
        Some("LeaseAlreadyPresent")
    );
    assert_eq!(
        code(store.delete_member(&key, None, None).await).as_deref(),
        Some("LeaseIdMissing")
    );
    assert_eq!(
        code(store.write_member(&key, other, &member).await).as_deref(),
        Some("LeaseIdMismatchWithBlobOperation")
    );
    store.write_member(&key, mine, &member).await.unwrap();
    let listed = store.list_members().await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].is_alive());
    // Expired: renewable by its holder while nobody took it, deletable without a lease.
    sleep(secs(31.0)).await;
    assert!(!store.list_members().await.unwrap()[0].is_alive());
    store.renew_member(&key, mine).await.unwrap();
    assert!(store.list_members().await.unwrap()[0].is_alive());
    sleep(secs(31.0)).await;
    let etag = store.list_members().await.unwrap()[0].etag.clone();
    store.delete_member(&key, None, Some(&etag)).await.unwrap();
    assert!(store.list_members().await.unwrap().is_empty());
}

/// Whether `i` polls the lease within `bound` from now: an acquire of its within some 1.3 s
/// (a polling period is at most 1.2 s). Returns how long after now it was seen polling.
async fn polls_within(i: &Instance, bound: Duration) -> Option<Duration> {
    let from = Instant::now();
    let mut before = count(&i.client.sent(), Op::Acquire);
    while from.elapsed() < bound {
        sleep(secs(1.3)).await;
        let now = count(&i.client.sent(), Op::Acquire);
        if now > before {
            return Some(from.elapsed());
        }
        before = now;
    }
    None
}

/// The bench's stalled line: `a` leads, `b` (woken) and `c` follow. `a` stops with a task
/// gone at once, so its record is deleted with its confirmation's first read, 20 ms after the
/// change; `c`'s watch read lands 10 ms after the handover, shows `b`'s epoch, and `c` (next
/// without `a`) lists. Listed at once, the line still showed `a`'s record alive and ahead of
/// `c`, so `c` took `a` for the successor and watched on until a crashed leader's record
/// would have expired (30 s; the bench saw a member still watching 17 s after it moved up).
/// `c` must poll within two watch periods of the handover.
#[tokio::test(start_paused = true)]
async fn a_member_that_reads_the_handover_as_it_happens_moves_up() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let wakes = Wakes::default();
    let sender = wakes.sender(|h| h);
    let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_wake_sender(sender));
    lives.nth(1).await;
    let b = Instance::start_with(&store, "b", &lives, None, |e| {
        e.with_advertise("http://b:9464")
    });
    wakes.serve("http://b:9464", &b.waker);
    // c's next read of the blob, once armed, arrives 10 ms late.
    let network = Arc::new(Arrives::next(Op::Read, Duration::from_millis(10)));
    let client = Arc::new(store.client_on(network.clone()));
    let c = Instance::start_on(client, "c", &lives, Default::default(), |e| e);
    joined(&store, "b").await;
    joined(&store, "c").await;
    sleep(secs(20.0)).await;
    let c_lists = count(&c.client.sent(), Op::List);
    network.on.store(true, Ordering::SeqCst);
    while !network.sent.load(Ordering::SeqCst) {
        sleep(Duration::from_micros(100)).await;
    }
    let asked = Instant::now();
    a.stop().await;
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "b");
    let bound = leasehold_core::Pace::new(&timing()).watch_longest() * 2 + secs(1.3);
    let polled = polls_within(&c, bound).await;
    let handover = next.start - asked;
    println!(
        "b led {handover:?} after a's stop; c polled {polled:?} after that ({} listing(s) of c's \
         since), bound {bound:?}",
        count(&c.client.sent(), Op::List) - c_lists
    );
    assert!(
        handover < Duration::from_millis(10),
        "{handover:?}: b led after c's read arrived, which then missed the race"
    );
    assert!(
        polled.is_some(),
        "c still watches {bound:?} after it moved up"
    );
    lives.assert_one_at_a_time();
    stop_all([b, c]).await;
}

/// The bench's 50-daemon stall: a watcher's reads (every 5-6 s) can miss a whole term when
/// handovers come quicker than that. `a` leads, `b`, `c`, `d` follow; `a` stops, `b` leads,
/// and `b` stops within a second, so `c` leads; `d` reads the blob only then, and sees `c`
/// after `a`: judged without `a` alone, its line (listed long before) still has `b`'s record
/// alive ahead of it, so it took `b` for the successor and never listed (a follower lists every
/// 5-6 minutes). The lease went from `a` to `c` through the members between them in line,
/// so `d` is next: it must poll within two watch periods of `c`'s term.
#[tokio::test(start_paused = true)]
async fn a_watcher_whose_reads_miss_a_term_still_moves_up() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let wakes = Wakes::default();
    let start = |name: &str| {
        let url = format!("http://{name}:9464");
        let sender = wakes.sender(|h| h);
        let i = Instance::start_with(&store, name, &lives, None, |e| {
            e.with_advertise(&url).with_wake_sender(sender)
        });
        wakes.serve(&url, &i.waker);
        i
    };
    let a = start("a");
    lives.nth(1).await;
    let (b, c) = (start("b"), start("c"));
    let d = Instance::start(&store, "d", &lives, None);
    for name in ["b", "c", "d"] {
        joined(&store, name).await;
    }
    sleep(secs(20.0)).await;
    // Just after one of d's reads: its next comes 5-6 s on.
    let reads = count(&d.client.sent(), Op::Read);
    while count(&d.client.sent(), Op::Read) == reads {
        sleep(Duration::from_millis(10)).await;
    }
    a.stop().await;
    assert_eq!(lives.nth(2).await.identity, "b");
    b.stop().await;
    let next = lives.nth(3).await;
    assert_eq!(next.identity, "c");
    let reads_between = count(&d.client.sent(), Op::Read) - reads - 1;
    let bound = leasehold_core::Pace::new(&timing()).watch_longest() * 2 + secs(1.3);
    let polled = polls_within(&d, bound).await;
    println!(
        "d read the blob {reads_between} time(s) while b led; d polled {polled:?} after c led \
         (bound {bound:?})"
    );
    assert_eq!(reads_between, 0, "d saw b lead: the term was not missed");
    assert!(
        polled.is_some(),
        "d still watches {bound:?} after it moved up"
    );
    lives.assert_one_at_a_time();
    stop_all([c, d]).await;
}
