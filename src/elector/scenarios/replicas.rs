//! A group whose lease lives on three storage accounts (docs/quorum.md), on paused time,
//! through the shell's driver and three in-memory stores, one a region: one region down moves
//! no leadership and stops no body (the first account's too; member records live on each);
//! two down stop the body by its deadline and nobody leads; one back, and one leads again,
//! with a greater epoch; a leader wins back a region that returns; a handover changes the
//! lease on every replica held, with one region down too.

use crate::elector::instance::Elector;
use crate::elector::testing::{Instance, Life, Lives, timing};
use crate::store::memory::{Behaviour, MemoryStore, Op};
use leasehold_core::quorum::ReplicaSet;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::{Instant, sleep};

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

/// A region's storage account answers nothing (`down`), or again as usual.
fn region(store: &MemoryStore, down: bool) {
    for op in Op::ALL {
        let b = match down {
            true => Behaviour::Hang,
            false => Behaviour::Normal,
        };
        store.set(op, b);
    }
}

/// A group on three accounts (each a store whose blob was prepared as a replica of the set),
/// `a` leading its first term and `b` following.
struct OnThree {
    stores: Vec<Arc<MemoryStore>>,
    lives: Lives,
    first: Life,
    members: [Instance; 2],
}

async fn a_leads_on_three() -> OnThree {
    a_leads_on_three_with(None).await
}

/// As [`a_leads_on_three`], with the region of the replica `down` (if any) down from the start.
async fn a_leads_on_three_with(down: Option<usize>) -> OnThree {
    let set = ReplicaSet::new(&["east", "west", "north"]).unwrap();
    let stores: Vec<Arc<MemoryStore>> = (0..set.len())
        .map(|_| {
            let store = Arc::new(MemoryStore::default());
            store.stamp(set.fingerprint());
            store
        })
        .collect();
    if let Some(down) = down {
        region(&stores[down], true);
    }
    // Each instance's own store is the first's client; the others', its replicas.
    let on_the_set = || {
        let others = (stores[1..].iter())
            .map(|s| Arc::new(s.client(Duration::ZERO)))
            .collect();
        move |e: Elector<MemoryStore>| e.on_replicas(set, others)
    };
    let lives = Lives::default();
    let a = Instance::start_with(&stores[0], "a", &lives, None, on_the_set());
    let first = lives.nth(1).await;
    let b = Instance::start_with(&stores[0], "b", &lives, None, on_the_set());
    OnThree {
        stores,
        lives,
        first,
        members: [a, b],
    }
}

#[tokio::test(start_paused = true)]
async fn one_region_down_moves_no_leadership_and_two_stop_the_body() {
    let OnThree {
        stores,
        lives,
        first,
        members,
    } = a_leads_on_three().await;
    assert!(
        stores.iter().all(|s| s.is_leased()),
        "held on every replica"
    );
    // Member records live on every replica (docs/quorum.md).
    sleep(secs(1.0)).await;
    for (i, store) in stores.iter().enumerate() {
        for member in ["a", "b"] {
            assert!(
                store.has_live_record(member),
                "{member}'s record on replica {i}"
            );
        }
    }

    // One region (the second account) down for 60 s: no leadership moves, no body stops.
    region(&stores[1], true);
    sleep(secs(60.0)).await;
    let lives_now = lives.all();
    let renews: Vec<usize> = stores.iter().map(|s| s.calls(Op::Renew).len()).collect();
    assert_eq!(
        lives_now.len(),
        1,
        "{lives_now:?}, renews by replica {renews:?}"
    );
    assert!(lives_now[0].gone.is_none(), "the body runs on");
    region(&stores[1], false);
    sleep(secs(30.0)).await;

    // Two down: the body is stopped by its deadline (the k-th latest of the leases it holds:
    // `t_s + L - M` from the last renew of the second latest), and nobody leads a minority.
    let t = timing();
    region(&stores[1], true);
    region(&stores[2], true);
    let down = Instant::now();
    let gone = lives.gone(1).await;
    let took = gone - down;
    println!(
        "two regions down: the body gone after {took:?} (bound L - M = {:?})",
        t.duration - t.safety_margin
    );
    assert!(took <= t.duration - t.safety_margin, "{took:?}");
    sleep(secs(60.0)).await;
    assert_eq!(
        lives.all().len(),
        1,
        "nobody leads a minority: {:?}",
        lives.all()
    );

    // One region back: a majority answers, and one leads again, with a greater epoch.
    region(&stores[2], false);
    let back = Instant::now();
    let next = lives.nth(2).await;
    println!(
        "one region back: a body again after {:?}",
        next.start - back
    );
    assert!(next.epoch > first.epoch);
    lives.assert_one_at_a_time();
    members.into_iter().for_each(Instance::crash);
}

/// The first account's region down: the leader holds its majority on the other two, and no
/// leadership moves; the member records live on in the other two, each member's renewed.
#[tokio::test(start_paused = true)]
async fn the_first_region_down_moves_no_leadership() {
    let OnThree {
        stores,
        lives,
        members,
        ..
    } = a_leads_on_three().await;
    sleep(secs(10.0)).await;
    region(&stores[0], true);
    sleep(secs(120.0)).await;
    let renews: Vec<usize> = stores.iter().map(|s| s.calls(Op::Renew).len()).collect();
    let lives_now = lives.all();
    assert_eq!(
        lives_now.len(),
        1,
        "{lives_now:?}, renews by replica {renews:?}"
    );
    assert!(lives_now[0].gone.is_none(), "the body runs on");
    for store in &stores[1..] {
        assert!(store.has_live_record("a") && store.has_live_record("b"));
    }
    members.into_iter().for_each(Instance::crash);
}

/// A leader that won its term with one region down keeps trying that replica at its renew
/// pace (docs/quorum.md, the rule *Renewing*); once the region is back, it wins it back (its
/// lease acquired, the term's epoch written there) and renews it. Then losing another region
/// moves no leadership and stops no body: the leader holds a majority on the two left.
#[tokio::test(start_paused = true)]
async fn a_leader_wins_back_a_region_that_returns() {
    let OnThree {
        stores,
        lives,
        first,
        members,
    } = a_leads_on_three_with(Some(2)).await;
    assert!(!stores[2].is_leased(), "won on the two that answer");
    sleep(secs(30.0)).await;
    region(&stores[2], false);
    let back = Instant::now();
    while !stores[2].is_leased() {
        assert!(Instant::now() - back < secs(30.0), "never won back");
        sleep(secs(0.5)).await;
    }
    println!(
        "the region back: won back after {:?}",
        Instant::now() - back
    );
    sleep(secs(10.0)).await;
    let holder = stores[2].holder().expect("the term's epoch written there");
    assert_eq!((holder.identity.as_str(), holder.epoch), ("a", first.epoch));
    let renews = stores[2].calls(Op::Renew).len();
    assert!(renews >= 1, "renewed like the others: {renews}");
    // Another region (the second account) down for 60 s: no leadership moves.
    region(&stores[1], true);
    sleep(secs(60.0)).await;
    let lives_now = lives.all();
    let renews: Vec<usize> = stores.iter().map(|s| s.calls(Op::Renew).len()).collect();
    assert_eq!(
        lives_now.len(),
        1,
        "{lives_now:?}, renews by replica {renews:?}"
    );
    assert!(lives_now[0].gone.is_none(), "the body runs on");
    assert_eq!(lives_now[0].epoch, first.epoch, "the same term");
    members.into_iter().for_each(Instance::crash);
}

/// A handover on three (docs/quorum.md, Handover): the leader that stops changes the lease to
/// its successor's lease id on every replica it holds (the first's under its notice, each
/// other's conditional on its own epoch write there), releasing none; the successor then
/// acquires a majority with its own lease id and leads next, with a greater epoch, never two
/// at once.
#[tokio::test(start_paused = true)]
async fn a_handover_changes_the_lease_on_every_replica() {
    let OnThree {
        stores,
        lives,
        first,
        members,
    } = a_leads_on_three().await;
    sleep(secs(5.0)).await;
    let [a, b] = members;
    a.stop().await;
    // Changed (to b's lease id, and again to the new one b published since: a rekey), never
    // released; b holds all three under one lease id.
    let held = stores[0].lease_id();
    for (i, store) in stores.iter().enumerate() {
        assert!(!store.calls(Op::Change).is_empty(), "replica {i} changed");
        assert!(
            store.calls(Op::Release).is_empty(),
            "replica {i} not released"
        );
        assert!(
            store.lease_id().is_some() && store.lease_id() == held,
            "replica {i}"
        );
    }
    let next = lives.nth(2).await;
    assert_eq!(next.identity, "b");
    assert!(next.epoch > first.epoch);
    lives.assert_one_at_a_time();
    b.crash();
}

/// A handover with one region down: the change there gets no answer, and goes on alone; the
/// successor acquires the majority it was handed and leads next, never two at once.
#[tokio::test(start_paused = true)]
async fn a_handover_with_one_region_down_still_hands_a_majority() {
    let OnThree {
        stores,
        lives,
        first,
        members,
    } = a_leads_on_three().await;
    sleep(secs(5.0)).await;
    region(&stores[2], true);
    let [a, b] = members;
    let stopped = Instant::now();
    a.stop().await;
    let next = lives.nth(2).await;
    println!(
        "one region down: b leads {:?} after a's stop began",
        next.start - stopped
    );
    assert_eq!(next.identity, "b");
    assert!(next.epoch > first.epoch);
    // The handoff's confirmation gave up on b, slow with a region down (its attempt awaits the
    // acquire there to its limit), and released under b's lease id, conditional on the ETags
    // a's own writes left: b had written its epoch since, so nothing was released.
    sleep(secs(30.0)).await;
    let all = lives.all();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all[1].gone.is_none(), "b leads on");
    assert!(stores[..2].iter().all(|s| s.is_leased()));
    lives.assert_one_at_a_time();
    b.crash();
}

/// A handover that writes its notice on the first replica (the leader stops before it listed
/// the line in its term, so it chooses its successor now): the notice keeps the replica's
/// stamp (a metadata write replaces every key), so the first replica still counts for the
/// successor, which then survives another region down.
#[tokio::test(start_paused = true)]
async fn a_handover_with_a_notice_keeps_the_first_replica() {
    let OnThree {
        stores,
        lives,
        first,
        members,
    } = a_leads_on_three().await;
    sleep(secs(0.1)).await;
    let [a, b] = members;
    a.stop().await;
    let next = lives.nth(2).await;
    let notices = stores[0].calls(Op::Notice).len();
    println!("notices on the first replica: {notices}");
    assert_eq!(next.identity, "b");
    assert!(next.epoch > first.epoch);
    sleep(secs(10.0)).await;
    region(&stores[1], true);
    sleep(secs(60.0)).await;
    let all = lives.all();
    assert_eq!(all.len(), 2, "{all:?}");
    assert!(all[1].gone.is_none(), "b leads on the first and the third");
    lives.assert_one_at_a_time();
    b.crash();
}
