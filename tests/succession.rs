//! Members and ordered succession (design section 10), against a real Azurite with the real
//! binary: a voluntary end of term hands the lease to the first member in line with Lease Blob
//! `change` after the child is dead, a wake-up makes the handover take milliseconds, and every
//! way a handoff can go wrong (the successor killed just before or just after it, cut off from
//! storage, woken at a dead address; members joining and leaving meanwhile) still ends with one
//! leader at a time and no child past its deadline. The store's own member operations are
//! checked against Azurite first.

use leasehold::store::{
    AzureStore, LeaseId, LeaseState, LeaseStore, Member, MemberKey, StorageTarget,
};
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::time::Duration;

/// The lease blob and member records of a group, through leasehold's own store.
fn store_of(group: &Group) -> AzureStore {
    let target =
        StorageTarget::from_connection_string(&group.connection_string, &group.container, &group.blob)
            .expect("a target");
    AzureStore::new(&target).expect("a store")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_azure_store_keeps_member_records_and_hands_the_lease_over_on_azurite() {
    let (_azurite, group) = Group::on_new_azurite();
    let store = store_of(&group);
    runtime().block_on(async {
        store.prepare(true).await.unwrap();
        let code = |r: Result<(), leasehold::store::StoreError>| {
            r.unwrap_err().code().map(str::to_owned).unwrap_or_default()
        };
        let identity = "w/1 .x~";
        let key = MemberKey::of(identity);
        let member = Member {
            identity: identity.into(),
            priority: 3,
            acquires_with: LeaseId::random(),
            advertise: Some("http://127.0.0.1:9".into()),
            standby_until: None,
        };
        let (mine, other) = (LeaseId::random(), LeaseId::random());
        assert_eq!(
            code(store.acquire_member(&key, mine, 30).await),
            "BlobNotFound"
        );
        store.create_member(&key, &member).await.unwrap();
        let again = store.create_member(&key, &member).await.unwrap_err();
        assert!(
            matches!(
                again,
                leasehold::store::StoreError::Status {
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
        let changed = Member {
            priority: -1,
            ..member.clone()
        };
        store.write_member(&key, mine, &changed).await.unwrap();
        let listed = store.list_members().await.unwrap();
        assert_eq!(listed.len(), 1, "{listed:?}");
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
        // The names Azurite listed are the names written: nothing rewritten on the way.
        let names = _azurite.list_blobs(&group.container).unwrap();
        assert!(
            names.contains(&key.blob_name(&group.blob)),
            "{names:?}"
        );
        // The lease blob: a change hands it to the member's published id, whose acquire then
        // succeeds; the old id is refused; the notice changes the ETag; the epoch write
        // removes the notice.
        let leader = LeaseId::random();
        store.acquire(leader, 15).await.unwrap();
        let before = store.read().await.unwrap();
        let holder = leasehold::store::Holder {
            identity: "leader".into(),
            epoch: 7,
            acquired_at: time::OffsetDateTime::now_utc(),
            lease: Some(leader),
        };
        store
            .write_holder(leader, &before.etag, &holder)
            .await
            .unwrap();
        let written = store.read().await.unwrap();
        store.write_notice(leader, &holder, identity).await.unwrap();
        let noticed = store.read().await.unwrap();
        assert_ne!(noticed.etag, written.etag, "the notice changes the ETag");
        assert_eq!(noticed.successor.as_deref(), Some(identity));
        assert_eq!(noticed.holder.as_ref().map(|h| h.epoch), Some(7));
        store.change(leader, changed.acquires_with).await.unwrap();
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
        store.acquire(changed.acquires_with, 15).await.unwrap();
        let next = leasehold::store::Holder {
            identity: identity.into(),
            epoch: 8,
            ..holder
        };
        store
            .write_holder(changed.acquires_with, &noticed.etag, &next)
            .await
            .unwrap();
        assert_eq!(store.read().await.unwrap().successor, None);
        store.release(changed.acquires_with).await.unwrap();
        // Leaving: deleted under its lease.
        assert_eq!(
            code(store.delete_member(&key, Some(other), None).await),
            "LeaseIdMismatchWithBlobOperation"
        );
        store.delete_member(&key, Some(mine), None).await.unwrap();
        assert!(store.list_members().await.unwrap().is_empty());
    });
}
