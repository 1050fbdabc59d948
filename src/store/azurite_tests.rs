//! The store's requests against a real Azurite (the test kit's, which the integration tests
//! share): member records, the handoff's notice with its reserved epoch and the `change`, the
//! conditional release, a blob created again. What the elector relies on of the service's
//! answers (which error code, which ETag, when), proven on the service the in-memory store
//! imitates. Needs Node and npm, as `cargo test` does (the kit installs the pinned Azurite).

use super::blob::{Notice, Reservation};
use super::{
    AzureStore, GroupStore, Holder, LeaseId, LeaseState, LeaseStore, Member, MemberKey,
    MemberRecord, Secret, StorageTarget, StoreError,
};
use leasehold_testkit::{Azurite, Group};
use std::time::Duration;

/// The lease blob and member records of a group, through leasehold's own store.
fn store_of(group: &Group) -> AzureStore {
    let target = StorageTarget::from_connection_string(
        &group.connection_string,
        &group.container,
        &group.blob,
    )
    .expect("a target");
    AzureStore::new(&target).expect("a store")
}

/// Waits until `store` reaches the Azurite this unit test binary just started: on a loaded
/// machine (the simulator's histories run beside it) a fresh Azurite has reset the first
/// connection (`Connection reset by peer`) though it had said it listens.
///
/// Once (in a fresh clone's CI, the pinned Azurite just installed) it reset the first
/// connection and then refused every one for 20 s: it had died after saying it listens. So a
/// refusal asks the kit for the shared Azurite again, which starts a dead one again on the same
/// port and prints its log (this runs before the test has put anything in storage).
async fn answering(store: &AzureStore) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match store.prepare(true).await {
            Err(StoreError::Unreachable(e)) if tokio::time::Instant::now() < deadline => {
                eprintln!("Azurite not answering yet: {e}");
                Azurite::shared();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            _ => return,
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_azure_store_keeps_member_records_and_hands_the_lease_over_on_azurite() {
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let store = store_of(&group);
    let rt = runtime();
    let code =
        |r: Result<(), StoreError>| r.unwrap_err().code().map(str::to_owned).unwrap_or_default();
    let identity = "w/1 .x~";
    let key = MemberKey::of(identity);
    let member = Member {
        identity: identity.into(),
        priority: 3,
        acquires_with: LeaseId::random(),
        advertise: Some("http://127.0.0.1:9".into()),
        wake_token: Some(Secret::new("a-token".into())),
        standby_until: None,
        slots: 1,
        settled: None,
    };
    let (mine, other) = (LeaseId::random(), LeaseId::random());
    let changed = Member {
        priority: -1,
        ..member.clone()
    };
    rt.block_on(async {
        answering(&store).await;
        store.prepare(true).await.unwrap();
        assert_eq!(
            code(store.acquire_member(&key, mine, 30).await),
            "BlobNotFound"
        );
        store.create_member(&key, &member).await.unwrap();
        let again = store.create_member(&key, &member).await.unwrap_err();
        assert!(
            matches!(
                again,
                StoreError::Status {
                    status: 409 | 412,
                    ..
                }
            ),
            "{again}"
        );
        store.acquire_member(&key, mine, 30).await.unwrap();
        assert_eq!(
            code(store.acquire_member(&key, other, 30).await),
            "LeaseAlreadyPresent"
        );
        assert_eq!(
            code(store.delete_member(&key, None, None).await),
            "LeaseIdMissing"
        );
        store.renew_member(&key, mine).await.unwrap();
        store.write_member(&key, mine, &changed).await.unwrap();
        assert_eq!(
            code(
                store
                    .read_record(&MemberKey::of("nobody"))
                    .await
                    .map(|_| ())
            ),
            "BlobNotFound",
            "a record read as the memory store answers it"
        );
        let listed = store.list_members().await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
        // One record read (the handoff's check of its successor) shows what the listing shows,
        // but for the age: the service's Date, in whole seconds, of another request (the two
        // may straddle a second).
        let read = store.read_record(&key).await.unwrap().expect("the record");
        assert!(
            read.age.abs_diff(listed[0].age) <= Duration::from_secs(1),
            "{read:?}"
        );
        let read = MemberRecord {
            age: listed[0].age,
            ..read
        };
        assert_eq!(read, listed[0]);
        let record = &listed[0];
        assert_eq!(record.member, changed);
        assert_eq!(record.key, key);
        assert_eq!(record.lease, LeaseState::Leased);
        let age = time::OffsetDateTime::now_utc() - record.joined;
        assert!(
            age.whole_seconds().abs() < 60,
            "joined is the record's creation time on the service's clock: {}",
            record.joined
        );
    });
    // The names Azurite listed are the names written: nothing rewritten on the way.
    let names = azurite.list_blobs(&group.container).unwrap();
    assert!(names.contains(&key.blob_name(&group.blob)), "{names:?}");
    rt.block_on(async {
        // The lease blob: a change hands it to the member's published id, whose acquire then
        // succeeds; the old id is refused; the notice changes the ETag; the epoch write
        // removes the notice.
        let leader = LeaseId::random();
        store.acquire(leader, 15).await.unwrap();
        let before = store.read().await.unwrap();
        let holder = Holder {
            identity: "leader".into(),
            epoch: 7,
            acquired_at: time::OffsetDateTime::now_utc(),
            lease: Some(leader),
            slots: None,
            stamp: Default::default(),
        };
        let after = store
            .write_holder(leader, &before.etag, &holder)
            .await
            .unwrap();
        let written = store.read().await.unwrap();
        assert_eq!(
            written.etag, after,
            "the epoch write answers with the blob's new ETag (a handoff without a notice reserves the next epoch with it)"
        );
        let reserved = Reservation {
            epoch: 8,
            lease: changed.acquires_with,
        };
        let notice = Notice {
            successor: identity.to_owned(),
            passed_over: vec!["gone-1".into(), "gone-2".into()],
            reserved: Some(reserved),
        };
        // Conditional on the ETag (docs/safety.md, "Recovery from anything"): refused on a stale
        // one.
        assert_eq!(
            code(
                store
                    .write_notice(leader, &holder, &notice, Some(&before.etag))
                    .await
                    .map(drop)
            ),
            "ConditionNotMet"
        );
        let etag = store
            .write_notice(leader, &holder, &notice, Some(&written.etag))
            .await
            .unwrap();
        let noticed = store.read().await.unwrap();
        assert_eq!(noticed.etag, etag, "the notice's answer names the new ETag");
        assert_ne!(noticed.etag, written.etag, "the notice changes the ETag");
        assert_eq!(noticed.successor.as_deref(), Some(identity));
        assert_eq!(noticed.passed_over, ["gone-1", "gone-2"]);
        assert_eq!(
            noticed.reserved,
            Some(reserved),
            "the epoch reserved, for whom"
        );
        assert_eq!(noticed.holder.as_ref().map(|h| h.epoch), Some(7));
        // A change conditional on a stale ETag is refused, and changes nothing.
        assert_eq!(
            code(
                store
                    .change(leader, changed.acquires_with, Some(&written.etag))
                    .await
            ),
            "ConditionNotMet"
        );
        store
            .change(leader, changed.acquires_with, Some(&noticed.etag))
            .await
            .unwrap();
        assert_eq!(
            store.read().await.unwrap().etag,
            noticed.etag,
            "a change leaves the ETag as it was"
        );
        assert_eq!(
            code(store.renew(leader).await),
            "LeaseIdMismatchWithLeaseOperation"
        );
        assert_eq!(
            code(store.release(leader).await),
            "LeaseIdMismatchWithLeaseOperation",
            "the fallback release after a change that landed is refused"
        );
        // The successor's epoch write may land before its acquire (docs/succession.md, "The
        // handoff": they go side by side): under its own id, which the change made the active one,
        // and only while the blob is as the notice left it.
        let next = Holder {
            identity: identity.into(),
            epoch: 8,
            ..holder
        };
        assert_eq!(
            code(
                store
                    .write_holder(changed.acquires_with, &written.etag, &next)
                    .await
                    .map(drop)
            ),
            "ConditionNotMet",
            "a stale ETag"
        );
        assert_eq!(
            code(
                store
                    .write_holder(other, &noticed.etag, &next)
                    .await
                    .map(drop)
            ),
            "LeaseIdMismatchWithBlobOperation",
            "another lease id"
        );
        store
            .write_holder(changed.acquires_with, &noticed.etag, &next)
            .await
            .unwrap();
        store.acquire(changed.acquires_with, 15).await.unwrap();
        let taken = store.read().await.unwrap();
        assert_eq!(taken.successor, None);
        assert_eq!(
            taken.reserved, None,
            "the epoch write removes the reservation"
        );
        assert_eq!(taken.holder.map(|h| h.epoch), Some(8));
        // A release conditional on the ETag: refused on a stale one.
        assert_eq!(
            code(store.release_if(changed.acquires_with, &noticed.etag).await),
            "ConditionNotMet"
        );
        let led = store.read().await.unwrap();
        store
            .release_if(changed.acquires_with, &led.etag)
            .await
            .unwrap();
        assert_eq!(led.recreated, None);
    });
    // Deleted and created again by a member (docs/safety.md, "Recovery from anything"): marked,
    // with its age on the service's clock, until a leader writes an epoch.
    group.admin().delete();
    rt.block_on(async {
        assert_eq!(code(store.read().await.map(drop)), "BlobNotFound");
        store.recreate("worker-2").await.unwrap();
        store.recreate("worker-3").await.unwrap();
        let again = store.read().await.unwrap();
        assert_eq!(again.recreated.as_deref(), Some("worker-2"), "created once");
        assert!(again.holder.is_none(), "no epoch on it");
        assert!(again.age < Duration::from_secs(5), "{:?}", again.age);
        // Leaving: deleted under its lease.
        assert_eq!(
            code(store.delete_member(&key, Some(other), None).await),
            "LeaseIdMismatchWithBlobOperation"
        );
        store.delete_member(&key, Some(mine), None).await.unwrap();
        assert!(store.list_members().await.unwrap().is_empty());
    });
}

/// A poller's requests (one every 500 ms here, a second in the daemon) keep two connections
/// open, so that the two requests a woken successor sends side by side (its acquire and its
/// epoch write) both find one: the pair opens no connection on the handover's path. (With one
/// pool the second of the pair opened one: on Azurite a request on a new connection takes
/// about 1 ms more, on Azure a TCP and TLS handshake.)
#[test]
fn a_poller_keeps_a_connection_open_for_each_request_of_a_woken_pair() {
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let proxy = leasehold_testkit::FaultProxy::start(azurite.port);
    let target = StorageTarget::from_connection_string(
        &proxy.connection_string(),
        &group.container,
        &group.blob,
    )
    .expect("a target");
    let store = AzureStore::new(&target).expect("a store");
    let rt = runtime();
    rt.block_on(async {
        answering(&store).await;
        let holder = LeaseId::random();
        store.acquire(holder, 15).await.unwrap();
        // Polls, one at a time, as a successor's are (refused: the lease is held), for longer
        // than Azurite keeps a connection (5 s).
        for _ in 0..12 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let refused = store.acquire(LeaseId::random(), 15).await;
            assert!(refused.is_err(), "the lease is held");
        }
        let before = proxy.accepted();
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (read, renewed) = tokio::join!(store.read(), store.renew(holder));
        read.unwrap();
        renewed.unwrap();
        let opened = proxy.accepted() - before;
        println!(
            "connections: {before} open after the polls; the pair side by side opened {opened}"
        );
        assert!(before >= 1, "the polls went through the proxy");
        assert_eq!(
            opened, 0,
            "the pair opened a connection on the handover's path"
        );
        store.release(holder).await.unwrap();
    });
}

/// The store's calls as plain data, carried out on Azurite one after the other, each answered
/// as its request is: a term's lease taken, its epoch written under the read's ETag, handed over
/// by a change and renewed under the new id; a slot blob's lease; the group listed; a member
/// record created, leased and deleted; the lease released.
#[test]
fn calls_carried_out_on_azurite_are_answered_as_their_requests() {
    use super::blob::LeaseCheck;
    use super::call::{Call, Return, carry_out};
    use leasehold_core::store::Listing;
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let store = store_of(&group);
    let rt = runtime();
    let (leader, successor, record) = (LeaseId::random(), LeaseId::random(), LeaseId::random());
    let key = MemberKey::of("c-1");
    let member = Member {
        identity: "c-1".into(),
        priority: 0,
        acquires_with: successor,
        advertise: None,
        wake_token: None,
        standby_until: None,
        slots: 2,
        settled: None,
    };
    rt.block_on(async {
        answering(&store).await;
        let call = |call: Call| {
            let store = &store;
            async move { carry_out(store, &call).await }
        };
        let Return::Prepare(Ok(())) = call(Call::Prepare {
            slot: 0,
            create: true,
        })
        .await
        else {
            panic!("prepared");
        };
        let Return::Acquire(Ok(())) = call(Call::Acquire {
            slot: 0,
            id: leader,
            seconds: 15,
        })
        .await
        else {
            panic!("acquired");
        };
        let Return::Read(Ok(read)) = call(Call::Read { slot: 0 }).await else {
            panic!("read");
        };
        assert_eq!(read.lease, LeaseState::Leased);
        let holder = Holder {
            identity: "leader".into(),
            epoch: 1,
            // Whole seconds, as the metadata keeps it.
            acquired_at: time::OffsetDateTime::now_utc()
                .replace_nanosecond(0)
                .unwrap(),
            lease: Some(leader),
            slots: Some(2),
            stamp: Default::default(),
        };
        let written = call(Call::WriteHolder {
            slot: 0,
            id: leader,
            etag: read.etag.clone(),
            holder: holder.clone(),
        })
        .await;
        let Return::WriteHolder(Ok(etag)) = written else {
            panic!("the epoch written: {written:?}");
        };
        assert_ne!(etag, read.etag, "a write changes the ETag");
        let changed = call(Call::Change {
            slot: 0,
            id: leader,
            proposed: successor,
            if_match: Some(etag.clone()),
        })
        .await;
        assert!(matches!(changed, Return::Change(Ok(()))), "{changed:?}");
        let renewed = call(Call::Renew {
            slot: 0,
            id: leader,
        })
        .await;
        let Return::Renew(Err(e)) = renewed else {
            panic!("the old id renewed: {renewed:?}");
        };
        assert_eq!(e.code(), Some("LeaseIdMismatchWithLeaseOperation"));
        let renewed = call(Call::Renew {
            slot: 0,
            id: successor,
        })
        .await;
        assert!(matches!(renewed, Return::Renew(Ok(()))), "{renewed:?}");
        let Return::ReadStamped(Ok((stamped, _))) = call(Call::ReadStamped { slot: 0 }).await
        else {
            panic!("read stamped");
        };
        assert_eq!(stamped.etag, etag, "a change leaves the ETag as it was");
        assert_eq!(stamped.holder, Some(holder));
        // Slot 1's blob, on the slot's own store.
        let prepared = call(Call::Prepare {
            slot: 1,
            create: true,
        })
        .await;
        assert!(matches!(prepared, Return::Prepare(Ok(()))), "{prepared:?}");
        let acquired = call(Call::Acquire {
            slot: 1,
            id: leader,
            seconds: 15,
        })
        .await;
        assert!(matches!(acquired, Return::Acquire(Ok(()))), "{acquired:?}");
        let checked = call(Call::CheckLease {
            slot: 1,
            id: leader,
        })
        .await;
        assert!(
            matches!(checked, Return::CheckLease(Ok(LeaseCheck::Active))),
            "{checked:?}"
        );
        // A member record.
        let created = call(Call::CreateMember {
            key: key.clone(),
            member: member.clone(),
        })
        .await;
        assert!(
            matches!(created, Return::CreateMember(Ok(()))),
            "{created:?}"
        );
        let taken = call(Call::AcquireMember {
            key: key.clone(),
            id: record,
            seconds: 15,
        })
        .await;
        assert!(matches!(taken, Return::AcquireMember(Ok(()))), "{taken:?}");
        let Return::ListGroup(Ok(Listing { records, slots })) = call(Call::ListGroup).await else {
            panic!("listed");
        };
        assert_eq!(records.len(), 1, "{records:?}");
        assert_eq!(
            (&records[0].member, records[0].lease),
            (&member, LeaseState::Leased)
        );
        let slots: Vec<_> = slots.iter().map(|s| (s.slot, s.lease)).collect();
        assert_eq!(slots, [(0, LeaseState::Leased), (1, LeaseState::Leased)]);
        let Return::ReadMember(Ok((lease, _))) = call(Call::ReadMember { key: key.clone() }).await
        else {
            panic!("record read");
        };
        assert_eq!(lease, LeaseState::Leased);
        let deleted = call(Call::DeleteMember {
            key: key.clone(),
            lease: Some(record),
            etag: None,
        })
        .await;
        assert!(
            matches!(deleted, Return::DeleteMember(Ok(()))),
            "{deleted:?}"
        );
        let Return::ListMembers(Ok(records)) = call(Call::ListMembers).await else {
            panic!("listed");
        };
        assert!(records.is_empty(), "{records:?}");
        // The leases released.
        for (slot, id) in [(0, successor), (1, leader)] {
            let released = call(Call::Release { slot, id }).await;
            assert!(matches!(released, Return::Release(Ok(()))), "{released:?}");
        }
        let Return::Read(Ok(read)) = call(Call::Read { slot: 0 }).await else {
            panic!("read");
        };
        assert_eq!(read.lease, LeaseState::Available);
    });
}

/// A replica's blob created stamped (docs/quorum.md, *One replica set*): the set's fingerprint
/// and an id of its own, read back in one request; created only where no blob is (a second
/// create leaves the first id), and a blob created plainly carries no stamp.
#[test]
fn a_replica_blob_is_created_stamped_once_on_azurite() {
    use super::call::{Call, Return, carry_out};
    use leasehold_core::quorum::ReplicaSet;
    let azurite = Azurite::shared();
    let (group, plain) = (Group::new(azurite), Group::new(azurite));
    let (store, plain) = (store_of(&group), store_of(&plain));
    let set = ReplicaSet::new(&["east", "west", "north"]).unwrap();
    let rt = runtime();
    rt.block_on(async {
        answering(&plain).await;
        let stamped = || async {
            let created = carry_out(
                &store,
                &Call::CreateStamped {
                    slot: 0,
                    fingerprint: set.fingerprint(),
                },
            )
            .await;
            assert!(
                matches!(created, Return::CreateStamped(Ok(()))),
                "{created:?}"
            );
            let Return::ReadStamped(Ok((_, stamp))) =
                carry_out(&store, &Call::ReadStamped { slot: 0 }).await
            else {
                panic!("read stamped");
            };
            stamp
        };
        let first = stamped().await;
        assert_eq!(first.fingerprint, Some(set.fingerprint()));
        assert!(first.id.is_some(), "an id of its own");
        assert_eq!(stamped().await, first, "created once: the id stays");
        let Return::ReadStamped(Ok((_, none))) =
            carry_out(&plain, &Call::ReadStamped { slot: 0 }).await
        else {
            panic!("read the plain blob");
        };
        assert_eq!(none, leasehold_core::quorum::Stamp::default());
        // The epoch's write replaces the metadata: the holder carries the stamp, and a holder
        // without one leaves the replica unstamped (so counting for nobody), as Azure does.
        let id = LeaseId::random();
        let acquired = carry_out(
            &store,
            &Call::Acquire {
                slot: 0,
                id,
                seconds: 15,
            },
        )
        .await;
        assert!(matches!(acquired, Return::Acquire(Ok(_))), "{acquired:?}");
        let write = |stamp| {
            let store = &store;
            async move {
                let Return::Read(Ok(read)) = carry_out(store, &Call::Read { slot: 0 }).await else {
                    panic!("read");
                };
                let holder = Holder {
                    identity: "leader".into(),
                    epoch: 7,
                    acquired_at: time::OffsetDateTime::now_utc(),
                    lease: Some(id),
                    slots: None,
                    stamp,
                };
                let call = Call::WriteHolder {
                    slot: 0,
                    id,
                    etag: read.etag,
                    holder,
                };
                let written = carry_out(store, &call).await;
                assert!(matches!(written, Return::WriteHolder(Ok(_))), "{written:?}");
                let Return::ReadStamped(Ok((_, kept))) =
                    carry_out(store, &Call::ReadStamped { slot: 0 }).await
                else {
                    panic!("read stamped");
                };
                kept
            }
        };
        assert_eq!(
            write(first).await,
            first,
            "the stamp written again with the holder"
        );
        assert_eq!(
            write(leasehold_core::quorum::Stamp::default()).await,
            leasehold_core::quorum::Stamp::default(),
            "a holder without the stamp removes it"
        );
    });
}
