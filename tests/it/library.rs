//! leasehold as a library, as a program that embeds it uses it.
//!
//! * Two processes of `examples/embedded.rs` against a real Azurite: one task at a time, a
//!   SIGTERM ends the leader's task before its lease is released, the other leads within about
//!   a second with a larger epoch, and each exits 0.
//! * Leader code tested on paused tokio time with the in-memory store (the `test-util`
//!   feature), through the public API only: the test a user copies; and the rest of a program
//!   watching leadership ([`Elector::watch`]) without polling.

use leasehold::store::{Behaviour, MemoryStore, Op, StoreError};
use leasehold::{Elector, Leadership, Role, Timing};
use leasehold_testkit::{Daemon, Group, example_bin};
use nix::sys::signal::Signal;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A running `examples/embedded -c CONFIG --identity NAME`, watched as the kit watches a daemon
/// (its task's lines and leasehold's log both go to its stdout, in the order it wrote them).
fn embedded(config: &Path, name: &str) -> Daemon {
    Daemon::program(&example_bin("embedded"), config, name)
        .args(&["--identity", name])
        .env("RUST_LOG", "info")
        .spawn()
}

/// The epoch in a `task started: NAME leads with epoch E` line.
fn epoch_of(line: &str) -> u64 {
    line.rsplit(' ')
        .next()
        .and_then(|e| e.parse().ok())
        .expect(line)
}

#[test]
fn two_embedded_leaders_take_turns_and_a_sigterm_hands_over() {
    let group = Group::shared();
    let config = group.dir().join("embedded.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\nconnection_string = {:?}\ncontainer = \"tests\"\nblob = {:?}\n\n[child]\nstop_timeout = \"2s\"\n",
            group.connection_string, group.blob
        ),
    )
    .unwrap();
    let mut a = embedded(&config, "a");
    a.wait_line("task started", Duration::from_secs(20))
        .expect("a leads");
    let mut b = embedded(&config, "b");
    b.wait_line("another instance holds the lease", Duration::from_secs(20))
        .expect("b follows");
    b.wait_line("joined the line of members", Duration::from_secs(20))
        .expect("b is a member");
    let (_, first) = a.wait_line("task started", Duration::ZERO).unwrap();
    let first = epoch_of(&first);

    // SIGTERM: the task is cancelled and stops, then the lease is handed to b (the only other
    // member: docs/succession.md), then a exits 0.
    a.signal(Signal::SIGTERM);
    let (stopped, _) = a
        .wait_line("task stopped", Duration::from_secs(5))
        .expect("a's task stopped");
    let (released, line) = a
        .wait_line("released leadership", Duration::from_secs(10))
        .expect("a released the lease");
    assert!(line.contains("handed the lease to b"), "{line}");
    assert!(
        a.line_position("task stopped") < a.line_position("released leadership"),
        "the task ended before the lease was released"
    );
    let status = a.wait_exit(Duration::from_secs(10)).expect("a exits");
    assert_eq!(status.code(), Some(0), "a exits 0 after releasing");

    // b, the successor, takes over at its next poll: within 1.2 x acquire_interval, plus
    // three requests (and some room for a loaded machine).
    let (started, line) = b
        .wait_line("task started", Duration::from_secs(10))
        .expect("b leads");
    let handover = started.saturating_sub(released);
    let bound = Duration::from_millis(1700);
    println!("b's task started {handover:?} after a released the lease (bound {bound:?})");
    assert!(started > stopped, "one task at a time");
    assert!(handover <= bound, "{handover:?}");
    let second = epoch_of(&line);
    assert!(second > first, "epochs grow: {first} then {second}");

    b.signal(Signal::SIGTERM);
    let status = b.wait_exit(Duration::from_secs(10)).expect("b exits");
    assert_eq!(status.code(), Some(0));
    assert!(b.line_position("task stopped") < b.line_position("released leadership"));
    assert!(group.lease_is_free(), "nobody holds the lease at the end");
}

/// The test a user of the library writes for their leader code (copy it): the in-memory store
/// (feature `test-util`) keeps Azure's lease rules on tokio's clock, so that paused time runs
/// a whole term in no time, and a scripted fault shows what the task does when storage fails.
/// Here: renews fail, so the term ends at its stop deadline `t_s + L - M - G` (9 s with the
/// default timings): the task is cancelled there, and the lease is released once it has ended.
#[tokio::test(start_paused = true)]
async fn leader_code_on_paused_time() {
    let store = Arc::new(MemoryStore::default());
    store.set(
        Op::Renew,
        Behaviour::Fail(StoreError::TimedOut(Duration::from_secs(4))),
    );
    let elector = Elector::with_store(store.clone(), "me", Timing::default()).unwrap();
    let (report, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(elector.run_while_leader(
        async move {
            let _ = shutdown.1.await;
        },
        move |leadership: Leadership| {
            let report = report.clone();
            async move {
                let began = tokio::time::Instant::now();
                leadership.cancelled().await;
                let _ = report.send((leadership.epoch(), began.elapsed()));
            }
        },
    ));
    let (epoch, ran) = reports.recv().await.unwrap();
    assert_eq!(
        ran,
        Duration::from_secs(9),
        "cancelled at the stop deadline"
    );
    // The next term comes once that lease has surely expired (L = 15 s after it was won).
    let (next, _) = reports.recv().await.unwrap();
    assert_eq!(next, epoch + 1);
    shutdown.0.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert!(!store.is_leased(), "released at shutdown");
}

/// The rest of a program watches leadership without polling: [`Elector::watch`] shows each
/// term with its epoch (the one its task was given) while the task runs, a follower before and
/// after, and closes once the elector is gone.
#[tokio::test(start_paused = true)]
async fn the_rest_of_the_program_watches_leadership() {
    let store = Arc::new(MemoryStore::default());
    store.set(
        Op::Renew,
        Behaviour::Fail(StoreError::TimedOut(Duration::from_secs(4))),
    );
    let elector = Elector::with_store(store.clone(), "me", Timing::default()).unwrap();
    let mut role = elector.watch();
    assert_eq!(*role.borrow(), Role::Follower);
    let (report, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let shutdown = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(elector.run_while_leader(
        async move {
            let _ = shutdown.1.await;
        },
        move |leadership: Leadership| {
            let report = report.clone();
            async move {
                let _ = report.send(leadership.epoch());
                leadership.cancelled().await;
            }
        },
    ));
    let leading = *role.wait_for(Role::is_leader).await.unwrap();
    let epoch = reports.recv().await.unwrap();
    assert_eq!(leading, Role::Leader { epoch, slot: 0 });
    // Renews fail: the term ends at its stop deadline, and the next one (once that lease has
    // surely expired) has the next epoch.
    role.wait_for(|r| !r.is_leader()).await.unwrap();
    let next = *role.wait_for(Role::is_leader).await.unwrap();
    assert_eq!(next.epoch(), Some(epoch + 1));
    assert_eq!(reports.recv().await, Some(epoch + 1));
    shutdown.0.send(()).unwrap();
    running.await.unwrap().unwrap();
    assert_eq!(*role.borrow_and_update(), Role::Follower);
    assert!(role.changed().await.is_err(), "closed with the elector");
}

/// `Config::load` takes any path, as `Config::from_file` does: a `String`, a `&str`, a
/// `PathBuf` (before, only a `&Path`: `Config::load(path_string, ..)` did not compile).
#[test]
fn config_load_takes_a_path_as_from_file_does() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("leasehold.toml");
    std::fs::write(
        &path,
        "[storage]\nconnection_string = \"UseDevelopmentStorage=true\"\nblob = \"b\"\n",
    )
    .unwrap();
    let text: String = path.to_str().unwrap().to_owned();
    let overrides = leasehold::Overrides {
        blob: Some("from-a-flag".to_owned()),
        ..leasehold::Overrides::default()
    };
    for config in [
        leasehold::Config::load(text.clone(), &overrides),
        leasehold::Config::load(text.as_str(), &overrides),
        leasehold::Config::load(&path, &overrides),
        leasehold::Config::load(path.clone(), &overrides),
    ] {
        let config = config.expect("the file loads");
        assert!(
            format!("{config:?}").contains("from-a-flag"),
            "the overrides apply"
        );
    }
    leasehold::Config::from_file(text).expect("from_file too");
}
