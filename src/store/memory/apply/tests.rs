use super::super::state::Shared;
use super::super::store::MemoryStore;
use crate::secret::Secret;
use crate::store::blob::{ETag, Holder, LeaseId, Notice, Reservation};
use crate::store::call::{Call, Return, carry_out};
use crate::store::lease::GroupStore;
use crate::store::member::{Member, MemberKey};
use std::time::Duration;
use tokio::time::Instant;

/// The blob, its slot blobs and the requests each got, as the test compares them.
fn state(store: &MemoryStore) -> String {
    fn one(shared: &Shared) -> String {
        format!(
            "{:?}\n{:?}",
            shared.blob.lock().unwrap(),
            shared.calls.lock().unwrap()
        )
    }
    let slots = store.shared.slots.lock().unwrap();
    let mut all = one(&store.shared);
    for (i, slot) in slots.iter() {
        all += &format!("\nslot {i}: {}", one(slot));
    }
    all
}

/// Whether the answer is `Ok`.
fn ok(r: &Return) -> bool {
    let debug = format!("{r:?}");
    debug
        .split_once('(')
        .is_some_and(|(_, a)| a.starts_with("Ok("))
}

/// Every call, each once at least, most both answered and refused, on the lease blob, slot
/// blobs and a member record: what the synchronous `apply` answers and leaves is what the same
/// call carried out on the async store answers and leaves.
#[tokio::test(start_paused = true)]
async fn every_call_applied_at_once_does_what_it_does_carried_out() {
    let (one, two, three) = (LeaseId::random(), LeaseId::random(), LeaseId::random());
    let holder = Holder {
        identity: "a".into(),
        epoch: 7,
        acquired_at: time::OffsetDateTime::UNIX_EPOCH,
        lease: Some(one),
        slots: None,
        stamp: Default::default(),
    };
    let notice = Notice {
        successor: "b".into(),
        passed_over: vec!["c".into()],
        reserved: Some(Reservation {
            epoch: 8,
            lease: two,
        }),
    };
    let key = MemberKey::of("b/1");
    let member = Member {
        identity: "b/1".into(),
        priority: 2,
        acquires_with: two,
        advertise: Some("http://b:9".into()),
        wake_token: Some(Secret::new("t".into())),
        standby_until: None,
        slots: 1,
        settled: None,
    };
    let settled = Member {
        settled: Some(Duration::from_secs(30)),
        ..member.clone()
    };
    let etag = |e: &str| ETag::from(e);
    let set = leasehold_core::quorum::ReplicaSet::new(&["east", "west", "north"]).unwrap();
    let stamped = Call::CreateStamped {
        slot: 4,
        fingerprint: set.fingerprint(),
    };
    // (the call, whether it is answered Ok, whether the clock moves 20 s first)
    let script: Vec<(Call, bool, bool)> = vec![
        (
            Call::Prepare {
                slot: 0,
                create: false,
            },
            true,
            false,
        ),
        (
            Call::Acquire {
                slot: 0,
                id: one,
                seconds: 15,
            },
            true,
            false,
        ),
        (
            Call::Acquire {
                slot: 0,
                id: two,
                seconds: 15,
            },
            false,
            false,
        ),
        (Call::Read { slot: 0 }, true, false),
        (
            Call::WriteHolder {
                slot: 0,
                id: one,
                etag: etag("9"),
                holder: holder.clone(),
            },
            false,
            false,
        ),
        (
            Call::WriteHolder {
                slot: 0,
                id: one,
                etag: etag("0"),
                holder: holder.clone(),
            },
            true,
            false,
        ),
        (Call::ReadStamped { slot: 0 }, true, false),
        (Call::CheckLease { slot: 0, id: one }, true, false),
        (
            Call::Change {
                slot: 0,
                id: one,
                proposed: two,
                if_match: Some(etag("0")),
            },
            false,
            false,
        ),
        (
            Call::Change {
                slot: 0,
                id: one,
                proposed: two,
                if_match: Some(etag("1")),
            },
            true,
            false,
        ),
        (Call::CheckLease { slot: 0, id: one }, true, false),
        (Call::Renew { slot: 0, id: one }, false, false),
        (Call::Renew { slot: 0, id: two }, true, false),
        (
            Call::WriteNotice {
                slot: 0,
                id: one,
                holder: holder.clone(),
                notice: notice.clone(),
                if_match: None,
            },
            false,
            false,
        ),
        (
            Call::WriteNotice {
                slot: 0,
                id: two,
                holder: holder.clone(),
                notice: notice.clone(),
                if_match: Some(etag("1")),
            },
            true,
            false,
        ),
        (Call::Read { slot: 0 }, true, false),
        (
            Call::ReleaseIf {
                slot: 0,
                id: two,
                etag: etag("1"),
            },
            false,
            false,
        ),
        (
            Call::ReleaseIf {
                slot: 0,
                id: two,
                etag: etag("2"),
            },
            true,
            false,
        ),
        (Call::Release { slot: 0, id: two }, false, false),
        (
            Call::Acquire {
                slot: 1,
                id: three,
                seconds: 15,
            },
            true,
            false,
        ),
        (Call::Read { slot: 1 }, true, true),
        (
            Call::Acquire {
                slot: 1,
                id: one,
                seconds: 20,
            },
            true,
            false,
        ),
        (Call::Renew { slot: 1, id: one }, true, false),
        (Call::Release { slot: 1, id: one }, true, false),
        (
            Call::Acquire {
                slot: 2,
                id: three,
                seconds: 60,
            },
            true,
            false,
        ),
        (
            Call::BreakLease {
                slot: 2,
                period: Duration::ZERO,
            },
            true,
            false,
        ),
        (Call::Renew { slot: 2, id: three }, false, false),
        (
            Call::Change {
                slot: 2,
                id: three,
                proposed: one,
                if_match: None,
            },
            false,
            false,
        ),
        (
            Call::Recreate {
                slot: 0,
                by: "a".into(),
            },
            true,
            false,
        ),
        (
            Call::Prepare {
                slot: 3,
                create: false,
            },
            false,
            false,
        ),
        (
            Call::Recreate {
                slot: 3,
                by: "a".into(),
            },
            true,
            true,
        ),
        (Call::Read { slot: 3 }, true, false),
        (Call::ReadMember { key: key.clone() }, false, false),
        (
            Call::CreateMember {
                key: key.clone(),
                member: member.clone(),
            },
            true,
            true,
        ),
        (
            Call::CreateMember {
                key: key.clone(),
                member: member.clone(),
            },
            false,
            false,
        ),
        (
            Call::WriteMember {
                key: key.clone(),
                id: one,
                member: settled.clone(),
            },
            false,
            false,
        ),
        (
            Call::AcquireMember {
                key: key.clone(),
                id: one,
                seconds: 15,
            },
            true,
            false,
        ),
        (
            Call::AcquireMember {
                key: key.clone(),
                id: two,
                seconds: 15,
            },
            false,
            false,
        ),
        (
            Call::RenewMember {
                key: key.clone(),
                id: one,
            },
            true,
            true,
        ),
        (
            Call::WriteMember {
                key: key.clone(),
                id: one,
                member: settled.clone(),
            },
            true,
            false,
        ),
        (Call::ReadMember { key: key.clone() }, true, false),
        (Call::ReadRecord { key: key.clone() }, true, false),
        (Call::ListGroup, true, false),
        (Call::ListMembers, true, false),
        (
            Call::DeleteMember {
                key: key.clone(),
                lease: None,
                etag: None,
            },
            false,
            false,
        ),
        (
            Call::DeleteMember {
                key: key.clone(),
                lease: None,
                etag: Some(etag("1")),
            },
            false,
            true,
        ),
        (
            Call::DeleteMember {
                key: key.clone(),
                lease: None,
                etag: Some(etag("2")),
            },
            true,
            false,
        ),
        (Call::ReadRecord { key: key.clone() }, false, false),
        (Call::ListGroup, true, false),
        // A replica's blob, missing, created stamped once (the id drawn from the thread's
        // source, seeded alike for both at each step).
        (stamped.clone(), true, false),
        (Call::ReadStamped { slot: 4 }, true, false),
        (stamped, true, false),
        (Call::ReadStamped { slot: 4 }, true, false),
    ];
    let (carried, applied) = (MemoryStore::default(), MemoryStore::default());
    // Slot 3's blob, and slot 4's, were deleted.
    for store in [&carried, &applied] {
        GroupStore::slot(store, 3).delete();
        GroupStore::slot(store, 4).delete();
    }
    for (i, (call, answered, later)) in script.iter().enumerate() {
        if *later {
            tokio::time::advance(Duration::from_secs(20)).await;
        }
        fastrand::seed(i as u64);
        let by_carrying = carry_out(&carried, call).await;
        fastrand::seed(i as u64);
        // The service's wall clock as the async request on that blob reads it at its send (each
        // blob of the memory store starts its own at its first request).
        let wall = match call.slot() {
            Some(n) if n > 0 => GroupStore::slot(&applied, n).wall_now(),
            _ => applied.wall_now(),
        };
        let by_applying = applied.apply(call, Instant::now(), wall);
        assert_eq!(
            format!("{by_applying:?}"),
            format!("{by_carrying:?}"),
            "step {i}: {call:?}"
        );
        assert_eq!(ok(&by_applying), *answered, "step {i}: {by_applying:?}");
        assert_eq!(state(&applied), state(&carried), "step {i}: {call:?}");
    }
    let Return::ReadStamped(Ok((_, stamp))) =
        carry_out(&carried, &Call::ReadStamped { slot: 4 }).await
    else {
        panic!("slot 4 read");
    };
    assert_eq!(
        stamp.fingerprint,
        Some(set.fingerprint()),
        "stamped with its set"
    );
    assert!(stamp.id.is_some(), "and an id of its own");
}
