//! Recovery from a vanished blob (docs/safety.md, "Recovery from anything"), against a real Azurite
//! with the real binary: the lease blob (or a slot blob) deleted under its leader with the lease id
//! its metadata records, as anyone who can read it could. The old leader's child lives at most
//! until its kill deadline; nobody starts a child on the re-created blob before the lock-delay
//! (`L + M` after the first member saw it missing), so children never overlap; the group leads
//! again within the liveness bound of docs/safety.md however often the blob goes; a brand-new
//! group still leads at once.
//!
//! The group runs the design's defaults: L = 15 s, R = 4 s, M = 1 s, acquire_interval = 1 s.

use leasehold_testkit::defaults::{L, M};
use leasehold_testkit::slots::{check_slots, next_start, running_now};
use leasehold_testkit::storage::BlobAdmin;
use leasehold_testkit::wait::pause;
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::time::Duration;

/// The liveness bound of docs/safety.md with one slot: the longest error backoff (10 s), a
/// renew interval, the lease, the margin, the longest poll, and a second for the last steps.
const LIVENESS: Duration = Duration::from_millis(10_000 + 4_000 + 15_000 + 1_000 + 1_200 + 1_000);

/// What the real binary may take beyond the bound on a loaded 2-core machine (starting the
/// child, the witness's first line).
const SLACK: Duration = Duration::from_secs(2);

/// A brand-new group leads at once; the blob deleted under its leader, and again under the
/// next leader as it is stopped, never gives two children at once, and the group leads again
/// within the liveness bound each time, no sooner than the lock-delay.
#[test]
fn a_blob_deleted_under_its_leader_twice_gives_no_overlap_and_a_leader_within_the_bound() {
    let group = Group::shared();
    let launched = mono_now();
    let a = group.member("a").launch();
    let first = group
        .wait_start_of("a", secs(15))
        .unwrap_or_else(|| panic!("a did not lead:\n{}", a.log()));
    let first_start = first.t - launched;
    println!(
        "a brand-new group: a's child started {} after its launch (no lock-delay without members)",
        figure(first_start)
    );
    assert!(
        first_start <= secs(3),
        "no lock-delay for a brand-new group"
    );
    let b = group.member("b").join();
    let c = group.member("c").join();
    b.assert_follows(secs(10));
    c.assert_follows(secs(10));

    // Deleted under a.
    let deleted = mono_now();
    group
        .admin()
        .delete_under_lease()
        .expect("delete under the lease");
    let next = group
        .wait_start_after(deleted, None, LIVENESS + SLACK + secs(10))
        .unwrap_or_else(|| panic!("nobody led after the deletion:\n{}", a.log()));
    let took = next.t - deleted;
    println!(
        "deleted under a: {} led {} later (at least the lock-delay L + M = {}; bound {} + {} slack)",
        next.identity,
        figure(took),
        figure(L + M),
        figure(LIVENESS),
        figure(SLACK)
    );
    assert!(
        took >= L + M,
        "a child started within the lock-delay: {took:?}"
    );
    assert!(took <= LIVENESS + SLACK, "{took:?}");
    assert!(
        next.epoch > first.epoch,
        "the epoch grows across the deletion"
    );
    let leader = [&a, &b, &c]
        .into_iter()
        .find(|d| d.identity == next.identity)
        .expect("a member led");
    assert!(
        [&a, &b, &c]
            .iter()
            .any(|d| d.log().contains("the lease blob was deleted")),
        "somebody saw the deletion"
    );

    // Deleted again under the new leader, which is stopped at the same moment: its handoff
    // finds no blob.
    let again = mono_now();
    group
        .admin()
        .delete_under_lease()
        .expect("delete under the lease");
    leader.signal(Signal::SIGTERM);
    let last = group
        .wait_start_after(again, Some(&leader.identity), LIVENESS + SLACK + secs(10))
        .unwrap_or_else(|| {
            panic!(
                "nobody led after the second deletion:\n{}\n{}\n{}",
                a.log(),
                b.log(),
                c.log()
            )
        });
    let took = last.t - again;
    println!(
        "deleted again under {}, stopped at once: {} led {} later (bound {} + {} slack)",
        leader.identity,
        last.identity,
        figure(took),
        figure(LIVENESS),
        figure(SLACK)
    );
    assert!(took >= L + M, "{took:?}");
    assert!(took <= LIVENESS + SLACK, "{took:?}");
    assert!(last.epoch > next.epoch);
    pause(secs(2));
    group.assert_safe(&[&a, &b, &c]);
}

/// With `[lease].slots = 3` and four members, a slot blob deleted under its holder: never more
/// than three children, never two on one slot; the slot is held again within the liveness
/// bound for slots.
#[test]
fn a_slot_blob_deleted_under_its_holder_gives_no_fourth_child() {
    let group = Group::shared();
    let start = |identity: &str| super::slots::start(&group, identity, 3);
    let daemons: Vec<Daemon> = ["a", "b", "c", "d"].into_iter().map(start).collect();
    let three = wait_until_some(secs(40), || {
        let now = running_now(&group, 3, mono_now(), secs(2));
        (now.len() == 3).then_some(now)
    })
    .expect("three slots held");
    let (slot, holder) = three
        .iter()
        .find(|(s, _)| *s > 0)
        .cloned()
        .expect("a holder of slot 1 or 2");
    println!("slot {slot} held by {}", holder.identity);

    let admin = BlobAdmin::new(
        &group.connection_string,
        &group.container,
        &format!("{}.slots/{slot}", group.blob),
    );
    let deleted = mono_now();
    admin.delete_under_lease().expect("delete the slot blob");
    // Liveness with slots: the lock-delay, then the slot found free by a member listing the
    // slots (every RECORD_LEASE = 30 s at most) and its watch (6 s): the bound of
    // docs/safety.md for slots.
    let bound = LIVENESS + secs(30) + secs(6) + secs(1);
    let next = next_start(&group, slot, deleted, bound + SLACK + secs(10))
        .expect("the slot is held again");
    let took = next.t - deleted;
    println!(
        "slot {slot} held again by {} {} after its blob was deleted (lock-delay {}; bound {} + {} slack)",
        next.identity,
        figure(took),
        figure(L + M),
        figure(bound),
        figure(SLACK)
    );
    assert!(took >= L + M, "{took:?}");
    assert!(took <= bound + SLACK, "{took:?}");
    pause(secs(2));
    let deadlines: Deadlines = daemons.iter().map(|d| d.deadlines()).collect();
    let verdict = check_slots(&group, 3, &deadlines);
    println!("{verdict}");
    println!("at most {} children at once", verdict.most_at_once);
    verdict.assert_safe(3);
}

/// Every blob of a group with `[lease].slots = 3` deleted at once (the member records, then the
/// slot blobs, each lease broken first), five times, each a little later in the renew period
/// than the last: a holder that finds its slot's blob gone, and another slot's blob missing,
/// must not take that slot beside its live holder (a group whose blobs vanish is not a new
/// group to a member that saw them led). Never two children on one slot, and the three slots
/// held again after each wipe. A long run: `cargo test --test it -- --ignored`.
#[test]
#[ignore = "a long run: five wipes, about 4 minutes"]
fn every_blob_of_a_slot_group_wiped_five_times_never_gives_two_children_of_one_slot() {
    let group = Group::shared();
    let start = |identity: &str| super::slots::start(&group, identity, 3);
    let mut daemons: Vec<Daemon> = ["a", "b", "c", "d", "e"].into_iter().map(start).collect();
    let three_held = wait_until(secs(40), || {
        running_now(&group, 3, mono_now(), secs(2)).len() == 3
    });
    assert!(three_held, "three slots held");
    // The lock-delay, then the slots found free at a listing and a watch: the bound the
    // slot-blob test above holds, for every slot at once.
    let refill = LIVENESS + secs(30) + secs(6) + secs(1) + SLACK;
    let azurite = Azurite::shared();
    for wipe in 0..5u32 {
        // Each wipe 0.9 s later in the renew period (R = 4 s) than the one before.
        pause(secs(2) + Duration::from_millis(900) * wipe);
        let mut blobs: Vec<String> = azurite
            .list_blobs(&group.container)
            .expect("list the container")
            .into_iter()
            .filter(|name| name.starts_with(&group.blob))
            .collect();
        // The member records first (`<blob>.members/...`), then the slots, the lease blob last.
        blobs.sort_by_key(|name| (!name.contains(".members/"), name.len() == group.blob.len()));
        let wiped = mono_now();
        for name in &blobs {
            BlobAdmin::new(&group.connection_string, &group.container, name)
                .break_and_delete()
                .unwrap_or_else(|e| panic!("delete {name}: {e}"));
        }
        let took = mono_now() - wiped;
        assert!(
            blobs.iter().any(|b| b.contains(".slots/"))
                && blobs.iter().any(|b| b.contains(".members/")),
            "slot blobs and member records were there to wipe: {blobs:?}"
        );
        // Each slot's next child after the wipe (its holder's child dies at its renew, which
        // finds the blob gone; nobody starts one before the lock-delay).
        let back: Vec<Option<Duration>> = (0..3)
            .map(|slot| next_start(&group, slot, wiped, refill).map(|e| e.t - wiped))
            .collect();
        let shown: Vec<String> = back
            .iter()
            .map(|b| b.map_or("never".into(), figure))
            .collect();
        println!(
            "wipe {}: {} blobs deleted in {}; slots 0, 1, 2 held again {} after it (bound {})",
            wipe + 1,
            blobs.len(),
            figure(took),
            shown.join(", "),
            figure(refill)
        );
        assert!(
            back.iter().all(Option::is_some),
            "three slots held again after wipe {}",
            wipe + 1
        );
    }
    pause(secs(2));
    for daemon in &daemons {
        daemon.signal(Signal::SIGTERM);
    }
    for daemon in &mut daemons {
        assert!(
            daemon.wait_exit(secs(20)).is_some(),
            "{} exits",
            daemon.identity
        );
    }
    let deadlines: Deadlines = daemons.iter().map(|d| d.deadlines()).collect();
    let verdict = check_slots(&group, 3, &deadlines);
    println!("{verdict}");
    assert!(
        verdict.lives_of(1).len() >= 6,
        "slot 1 was held before and after each wipe"
    );
    verdict.assert_safe(3);
}
