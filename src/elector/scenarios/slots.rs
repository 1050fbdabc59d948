//! Slots (docs/slots.md) on paused time: a poller's rounds, the group's count, crashes, handoffs
//! and preemption among holders, and what each role costs.

use crate::store::GroupStore;
use crate::store::memory::{MemoryStore, Op};
use leasehold_core::Pace;
use std::sync::Arc;
use std::time::Duration;

use crate::elector::testing::{Cost, Instance, Life, Lives, joined, stop_all, timing};
use crate::store::memory::Behaviour;
use tokio::time::{Instant, sleep};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// Each member wins a slot of its own, and the epochs of each slot grow on their own: slot 0
/// records the group's count, a slot given back and won again carries its next epoch.
#[tokio::test(start_paused = true)]
async fn members_take_distinct_slots_with_their_own_epochs() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_slots(3));
    let first = lives.nth(1).await;
    let b = Instance::start_with(&store, "b", &lives, Some(secs(1.0)), |e| e.with_slots(3));
    let second = lives.nth(2).await;
    assert_eq!((first.slot, second.slot), (0, 1));
    assert!(store.is_leased() && store.slot(1).is_leased());
    assert_eq!(
        store.holder().unwrap().slots,
        Some(3),
        "slot 0 records the count"
    );
    assert_eq!(store.slot(1).holder().unwrap().identity, "b");
    // b's term ends by itself and it wins slot 1 again: slot 1's epoch grows, slot 0's does not.
    let again = lives.nth(3).await;
    assert_eq!((again.identity.as_str(), again.slot), ("b", 1));
    assert_eq!(again.epoch, second.epoch + 1);
    assert_eq!(store.holder().unwrap().epoch, first.epoch);
    stop_all([b, a]).await;
}

/// A round stops at its first win: a member never holds two slots.
#[tokio::test(start_paused = true)]
async fn a_round_takes_one_slot_only() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_slots(4));
    assert_eq!(lives.nth(1).await.slot, 0);
    sleep(secs(30.0)).await;
    assert_eq!(store.calls(Op::Acquire).len(), 1);
    for i in 1..4 {
        assert!(
            store.slot(i).calls(Op::Acquire).is_empty(),
            "slot {i} untouched"
        );
    }
    a.stop().await;
}

/// A full group: a round costs one acquire per slot (N), and takes a slot that expired.
#[tokio::test(start_paused = true)]
async fn a_poller_round_tries_every_slot_and_takes_the_one_that_expired() {
    let store = Arc::new(MemoryStore::default());
    store.steal(60);
    store.slot(1).steal(60);
    store.slot(2).steal(15);
    let start = Instant::now();
    let lives = Lives::default();
    let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_slots(3));
    let term = lives.nth(1).await;
    assert_eq!(term.slot, 2);
    assert!(term.start >= start + secs(15.0), "once it expired");
    // Slot 0 is the group's blob itself.
    let mut sent = store.calls(Op::Acquire);
    for i in 1..3 {
        sent.extend(store.slot(i).calls(Op::Acquire));
    }
    sent.sort();
    let first = sent.iter().filter(|at| **at == sent[0]).count();
    assert_eq!(first, 3, "one acquire per slot in a round: {sent:?}");
    a.stop().await;
}

/// An instance counting other slots than its group (slot 0 records the group's count while
/// leased) does not lead any slot, however many are free; once the group's slot 0 is free
/// (the group stopped), the count may change.
#[tokio::test(start_paused = true)]
async fn an_instance_with_another_count_does_not_lead() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let leader = Instance::start_with(&store, "leader", &lives, None, |e| e.with_slots(2));
    assert_eq!(lives.nth(1).await.slot, 0);
    let other = Instance::start_with(&store, "other", &lives, None, |e| e.with_slots(3));
    sleep(secs(120.0)).await;
    assert_eq!(lives.all().len(), 1, "never led");
    assert!(store.slot(1).calls(Op::Acquire).is_empty());
    assert!(store.slot(2).calls(Op::Acquire).is_empty());
    leader.stop().await;
    let won = lives.nth(2).await;
    assert_eq!((won.identity.as_str(), won.slot), ("other", 0));
    assert_eq!(store.holder().unwrap().slots, Some(3));
    other.stop().await;
}

/// A group of one slot sends what it always sent: no count on the blob, no slot blob.
#[tokio::test(start_paused = true)]
async fn one_slot_records_nothing_new() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let a = Instance::start(&store, "a", &lives, None);
    assert_eq!(lives.nth(1).await.slot, 0);
    assert_eq!(
        store.holder().unwrap().slots,
        None,
        "no leasehold_slots key"
    );
    assert!(store.slot(1).calls(Op::Acquire).is_empty());
    a.stop().await;
}

/// Instances `names` of a group of `n` slots, joined in that order.
async fn group(store: &Arc<MemoryStore>, lives: &Lives, n: u32, names: &[&str]) -> Vec<Instance> {
    let mut all = Vec::new();
    for name in names {
        all.push(Instance::start_with(store, name, lives, None, |e| {
            e.with_slots(n)
        }));
        joined(store, name).await;
    }
    all
}

/// The tasks running at `t`.
fn running_at(lives: &[Life], t: Instant) -> Vec<&Life> {
    lives
        .iter()
        .filter(|l| l.start <= t && l.gone.is_none_or(|g| g > t))
        .collect()
}

/// Never more than `n` tasks at once, never two on one slot (each slot's tasks one after
/// the other with growing epochs), never one member on two slots. A crashed member's task
/// ends with it (a daemon's child would: its guard and parent-death signal see to that).
fn assert_slots_safe(lives: &Lives, n: usize, crashed: &[(&str, Instant)]) {
    let mut all = lives.all();
    for l in all.iter_mut().filter(|l| l.gone.is_none()) {
        if let Some((_, at)) = crashed.iter().find(|(id, _)| *id == l.identity) {
            l.gone = Some(*at);
        }
    }
    for l in &all {
        let now = running_at(&all, l.start);
        assert!(now.len() <= n, "more than {n} at once: {now:?}");
        let mut slots: Vec<u32> = now.iter().map(|l| l.slot).collect();
        slots.sort();
        slots.dedup();
        assert_eq!(slots.len(), now.len(), "two on one slot: {now:?}");
        let mut who: Vec<&str> = now.iter().map(|l| l.identity.as_str()).collect();
        who.sort();
        who.dedup();
        assert_eq!(who.len(), now.len(), "one member on two slots: {now:?}");
    }
    for slot in 0..n as u32 {
        let on: Vec<&Life> = all.iter().filter(|l| l.slot == slot).collect();
        for w in on.windows(2) {
            assert!(
                w[0].gone.is_some_and(|g| g <= w[1].start),
                "slot {slot}: {on:?}"
            );
            assert!(w[1].epoch > w[0].epoch, "slot {slot} epochs: {on:?}");
        }
    }
}

/// Four members, two slots: the first two lead, one slot each; a crashed holder's slot is
/// taken by the first member holding none within L + 1.2 x acquire_interval; a holder that
/// stops hands its slot to the first member holding none.
#[tokio::test(start_paused = true)]
async fn two_slots_four_members_crash_and_handoff() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let mut g = group(&store, &lives, 2, &["a", "b", "c", "d"]).await;
    let (first, second) = (lives.nth(1).await, lives.nth(2).await);
    assert_eq!(
        (
            first.identity.as_str(),
            first.slot,
            second.identity.as_str(),
            second.slot
        ),
        ("a", 0, "b", 1)
    );
    sleep(secs(30.0)).await;
    assert_eq!(lives.all().len(), 2, "nobody else leads: {:?}", lives.all());
    // b crashes holding slot 1: c (first holding none) takes it once its lease expired.
    let crashed = Instant::now();
    let b = g.remove(1);
    b.client.cut_off(true);
    b.crash();
    let third = lives.nth(3).await;
    let bound = timing().duration + timing().longest_poll();
    println!(
        "slot {} taken by {} {:?} after the crash (bound L + 1.2 x acquire_interval = {bound:?})",
        third.slot,
        third.identity,
        third.start - crashed
    );
    assert_eq!((third.identity.as_str(), third.slot), ("c", 1));
    assert!(third.start - crashed <= bound);
    // Once b's record has expired too (a crashed member looks alive for up to a record
    // lease, and may be handed a slot meanwhile: that costs a lease duration), a stops: its
    // slot goes to d, the first holding none, within a poll (a handoff).
    sleep(Pace::RECORD_LEASE).await;
    let asked = Instant::now();
    g.remove(0).stop().await;
    let fourth = lives.nth(4).await;
    println!(
        "slot 0 handed to {} in {:?}",
        fourth.identity,
        fourth.start - asked
    );
    assert_eq!((fourth.identity.as_str(), fourth.slot), ("d", 0));
    assert!(fourth.start - asked <= timing().longest_poll() + secs(0.1));
    assert_eq!(
        store.slot(0).calls(Op::Acquire).len(),
        0,
        "slot 0 is the group's blob"
    );
    assert_slots_safe(&lives, 2, &[("b", crashed)]);
    for i in g {
        i.stop().await;
    }
}

/// A holder's line is as it last listed: a member waiting for a slot may have won one since
/// (simulator seed 6161). The handoff's read of that member's record shows a new lease id (a
/// member publishes one after each win), so the holder lists, and hands its slot to the next
/// member that holds none: not first to the one that cannot take a second slot, which would
/// be passed over only after the confirm window. (The next member takes it at its next poll:
/// it polls once its watch of the record ahead of it saw that member win.)
#[tokio::test(start_paused = true)]
async fn a_slot_is_not_handed_to_a_member_that_won_another_since_the_last_listing() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let mut g = group(&store, &lives, 2, &["a", "b", "c", "d"]).await;
    let (first, second) = (lives.nth(1).await, lives.nth(2).await);
    assert_eq!(
        (first.identity.as_str(), second.identity.as_str()),
        ("a", "b")
    );
    sleep(secs(40.0)).await;
    // b stops: its slot goes to c, the first holding none. a's line still shows c waiting.
    g.remove(1).stop().await;
    let third = lives.nth(3).await;
    assert_eq!((third.identity.as_str(), third.slot), ("c", 1));
    sleep(secs(0.5)).await;
    let asked = Instant::now();
    g.remove(0).stop().await;
    let fourth = lives.nth(4).await;
    println!(
        "slot 0 handed to {} in {:?}",
        fourth.identity,
        fourth.start - asked
    );
    assert_eq!((fourth.identity.as_str(), fourth.slot), ("d", 0));
    let changes = store.calls(Op::Change).len();
    assert_eq!(changes, 1, "slot 0 handed once, to d only");
    let t = timing();
    assert!(
        fourth.start - asked <= leasehold_core::Pace::new(&t).watch_longest() + t.longest_poll()
    );
    assert_slots_safe(&lives, 2, &[]);
    for i in g {
        i.stop().await;
    }
}

/// Slot 0's blob and every member record deleted at once (simulator seed 16491): the member
/// that polls the slots finds the blob gone and no other record, which is what a brand-new
/// group looks like; but its acquires were refused by a holder, so it knows the blob was led,
/// and creates it again under the lock-delay: never two bodies on slot 0.
#[tokio::test(start_paused = true)]
async fn a_slot_blob_deleted_with_every_member_record_is_still_a_lock_delay() {
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let g = group(&store, &lives, 2, &["a", "b", "c"]).await;
    lives.nth(2).await;
    sleep(secs(20.0)).await;
    let deleted = Instant::now();
    for name in ["a", "b", "c"] {
        assert!(store.delete_record(name), "{name}'s record");
    }
    store.delete();
    let next = lives.nth(3).await;
    let t = timing();
    println!(
        "slot {} led by {} {:?} after the deletion",
        next.slot,
        next.identity,
        next.start - deleted
    );
    assert_eq!(next.slot, 0);
    assert!(next.start - deleted >= t.duration + t.safety_margin);
    assert_slots_safe(&lives, 2, &[]);
    for i in g {
        i.stop().await;
    }
}

/// An acquire on a slot that gets no answer in time ends the round: nothing else is tried
/// until it settled, and its late success is released; the member never holds two slots.
#[tokio::test(start_paused = true)]
async fn a_late_success_on_a_slot_is_released_and_no_second_slot_is_taken() {
    let store = Arc::new(MemoryStore::default());
    store.steal(60);
    let one = store.slot(1);
    one.set(
        Op::Acquire,
        Behaviour::SlowAnswer(timing().request_timeout() + secs(0.5)),
    );
    let healer = one.clone();
    tokio::spawn(async move {
        sleep(secs(3.0)).await;
        healer.set(Op::Acquire, Behaviour::Normal);
    });
    let lives = Lives::default();
    let a = Instance::start_with(&store, "a", &lives, None, |e| e.with_slots(3));
    let term = lives.nth(1).await;
    let ids = one.ids(Op::Acquire);
    assert!(
        one.ids(Op::Release).contains(&ids[0]),
        "the late success was released"
    );
    let late_answered = store.calls(Op::Acquire)[0] + timing().request_timeout() + secs(0.5);
    assert!(
        store
            .slot(2)
            .calls(Op::Acquire)
            .iter()
            .all(|t| *t >= late_answered),
        "no other slot tried while the late acquire was unsettled"
    );
    assert!(term.slot == 1 || term.slot == 2, "{}", term.slot);
    let held = [one.is_leased(), store.slot(2).is_leased()];
    assert_eq!(held.iter().filter(|h| **h).count(), 1, "one slot only");
    a.stop().await;
}

/// The requests of each role over a simulated hour, for N = 1 and N = 3 (two members
/// waiting behind the poller; `preempt_after` as by default): only slot 0's holder lists
/// for preemption, a holder of another slot lists only at the leader's period; a member
/// waiting behind the poller costs at most a third of the poller, whatever N is.
#[tokio::test(start_paused = true)]
async fn request_counts_by_role_over_an_hour() {
    const HOUR: Duration = Duration::from_secs(3600);
    let mut watcher_costs = Vec::new();
    for n in [1u32, 3] {
        let store = Arc::new(MemoryStore::default());
        let lives = Lives::default();
        let names = ["a", "b", "c", "d", "e", "f"];
        let members = n as usize + 3;
        let g = group(&store, &lives, n, &names[..members]).await;
        sleep(secs(60.0)).await;
        let before: Vec<usize> = g.iter().map(|i| i.client.sent().len()).collect();
        sleep(HOUR).await;
        let costs: Vec<Cost> = (0..members)
            .map(|i| Cost::of(&g[i].client.sent()[before[i]..]))
            .collect();
        let held: Vec<(String, u32)> = lives
            .all()
            .iter()
            .map(|l| (l.identity.clone(), l.slot))
            .collect();
        let expected: Vec<(String, u32)> =
            (0..n).map(|i| (names[i as usize].to_owned(), i)).collect();
        assert_eq!(held, expected, "the holders kept their slots");
        let role = |i: usize| match i {
            0 => "holder of slot 0".to_owned(),
            i if i < n as usize => format!("holder of slot {i}"),
            i if i == n as usize => "poller".to_owned(),
            _ => "waiting".to_owned(),
        };
        println!("slots = {n}, {members} members, per minute over an hour:");
        for (i, c) in costs.iter().enumerate() {
            println!("  {:<17} {}", role(i), c.per_minute());
        }
        // The leader's period, stretched by up to a fifth: at most this many listings an
        // hour from the member record task.
        let leader_lists =
            (HOUR.as_secs_f64() / Pace::LEADER_LIST_EVERY.as_secs_f64()).ceil() as usize + 1;
        assert!(
            costs[0].list > leader_lists,
            "slot 0's holder lists for preemption: {} listings, the leader's period alone {leader_lists}",
            costs[0].list
        );
        for (i, c) in costs.iter().enumerate().take(n as usize).skip(1) {
            assert!(
                c.list <= leader_lists,
                "the holder of slot {i} lists for preemption: {} listings an hour, the leader's period allows {leader_lists}",
                c.list
            );
        }
        let poller = costs[n as usize].units();
        for w in &costs[n as usize + 1..] {
            assert!(
                3 * w.units() <= poller,
                "a waiting member costs at most a third of the poller: {} vs {poller}",
                w.units()
            );
        }
        watcher_costs.push(costs[members - 1].units());
        for i in g {
            i.stop().await;
        }
    }
    assert!(
        watcher_costs[1] <= watcher_costs[0] + watcher_costs[0] / 10,
        "a waiting member's cost does not grow with the slots: {watcher_costs:?}"
    );
}

/// Preemption with slots: a member of higher priority takes the slot of the holder last in
/// line, which sees it from the listings its record task makes anyway (within a leader's
/// listing period of the moment); the other holders keep theirs.
#[tokio::test(start_paused = true)]
async fn the_last_holder_in_line_yields_to_a_preferred_member() {
    const AFTER: Duration = Duration::from_secs(30);
    let store = Arc::new(MemoryStore::default());
    let lives = Lives::default();
    let mut all = group(&store, &lives, 2, &["a", "b"]).await;
    assert_eq!(
        (
            lives.nth(2).await.identity.as_str(),
            lives.nth(2).await.slot
        ),
        ("b", 1)
    );
    let joined_at = Instant::now();
    all.push(Instance::start_with(&store, "c", &lives, None, |e| {
        e.with_slots(2)
            .with_priority(10)
            .with_preempt_after(Some(AFTER))
    }));
    let third = lives.nth(3).await;
    let bound = AFTER
        + Pace::LEADER_LIST_EVERY.mul_f64(1.0 + crate::timing::POLL_JITTER)
        + timing().longest_poll()
        + secs(2.0);
    println!(
        "c took slot {} {:?} after joining (bound preempt_after + a leader's listing period + a poll = {bound:?})",
        third.slot,
        third.start - joined_at
    );
    assert_eq!((third.identity.as_str(), third.slot), ("c", 1));
    assert!(third.start - joined_at >= AFTER);
    assert!(third.start - joined_at <= bound);
    sleep(secs(120.0)).await;
    let now: Vec<(String, u32)> = lives
        .all()
        .iter()
        .filter(|l| l.gone.is_none())
        .map(|l| (l.identity.clone(), l.slot))
        .collect();
    assert_eq!(
        now,
        [("a".to_owned(), 0), ("c".to_owned(), 1)],
        "a kept slot 0"
    );
    assert_eq!(lives.all().len(), 3, "one handoff: {:?}", lives.all());
    for i in all {
        i.stop().await;
    }
}
