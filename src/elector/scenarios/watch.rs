//! [`Elector::watch`] on paused time: code outside the leader's task sees leadership come and
//! go, with the epoch of each term, without polling.

use crate::elector::testing::timing;
use crate::store::memory::MemoryStore;
use crate::{Elector, Leadership, Role};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, sleep, timeout};
use tokio_util::sync::CancellationToken;

/// Runs `identity` on `store` until the returned token is cancelled; its task waits to be
/// cancelled. Returns the token, the run, and the watch of its role.
fn run(
    store: &Arc<MemoryStore>,
    identity: &str,
) -> (
    CancellationToken,
    tokio::task::JoinHandle<Result<(), crate::Error>>,
    watch::Receiver<Role>,
) {
    let elector = Elector::with_store(store.clone(), identity, timing()).unwrap();
    let role = elector.watch();
    let stop = CancellationToken::new();
    let shutdown = stop.clone().cancelled_owned();
    let running = tokio::spawn(
        elector.run_while_leader(shutdown, |l: Leadership| async move {
            l.cancelled().await;
        }),
    );
    (stop, running, role)
}

/// The next role the watch shows, within a minute of paused time.
async fn next(role: &mut watch::Receiver<Role>) -> Role {
    timeout(Duration::from_secs(60), role.changed())
        .await
        .expect("the role changes")
        .expect("the elector is still there");
    *role.borrow_and_update()
}

#[tokio::test(start_paused = true)]
async fn the_watch_shows_each_term_with_its_epoch_and_closes_with_the_elector() {
    let store = Arc::new(MemoryStore::default());
    let (stop_a, a, mut role_a) = run(&store, "a");
    assert_eq!(
        *role_a.borrow(),
        Role::Follower,
        "a follower until it leads"
    );
    let first = next(&mut role_a).await;
    let Role::Leader { epoch, slot: 0 } = first else {
        panic!("{first:?}")
    };
    assert_eq!(
        store.holder().unwrap().epoch,
        epoch,
        "the epoch on the blob"
    );

    // b follows while a leads: its role does not change.
    let (stop_b, b, mut role_b) = run(&store, "b");
    sleep(Duration::from_secs(30)).await;
    assert!(!role_b.has_changed().unwrap(), "{:?}", *role_b.borrow());
    assert!(role_a.borrow().is_leader());

    // a stops: its role turns to follower once its task is gone, before its lease is given
    // up; b leads with the next epoch; a's watch closes once a's elector is gone.
    let asked = Instant::now();
    stop_a.cancel();
    assert_eq!(next(&mut role_a).await, Role::Follower);
    let next_b = next(&mut role_b).await;
    assert_eq!(next_b.epoch(), Some(epoch + 1), "{next_b:?}");
    println!(
        "b saw itself lead {:?} after a was asked to stop",
        Instant::now() - asked
    );
    a.await.unwrap().unwrap();
    assert!(role_a.changed().await.is_err(), "closed with the elector");
    stop_b.cancel();
    assert_eq!(next(&mut role_b).await, Role::Follower);
    b.await.unwrap().unwrap();
}
