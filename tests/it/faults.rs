//! The fault-injection suite: the faults that break naive lease code, against a real Azurite and
//! real daemons, each checked against the safety model on the witness history.
//!
//! A daemon that must be cut off from storage on its own reaches Azurite through a
//! [`FaultProxy`]. The daemons log each kill deadline they compute ([`DEADLINE_LOG`]), so the
//! checker ([`check`]) can hold every child to its daemon's exact deadline, not to a bound
//! guessed from the fault times. Timing tests print the measured figure next to its bound.
//!
//! Scenarios (the numbers of issue 4): 1 partition, 2 slow answers, 3 storage restarted,
//! 4 storage frozen (a short freeze here; the long one is
//! `a_frozen_storage_stops_the_child_before_the_lease_can_expire` in tests/it/run.rs), 5 the
//! leader SIGKILLed in the middle of stopping its child (a plain SIGKILL is
//! `a_crashed_leader_leaves_no_process_behind_and_is_replaced` in tests/it/run.rs), 6 a paused
//! leader, 7 an admin break, 8 churn (through the chaos command, `examples/chaos/`, which
//! runs all of them at random for as long as asked); and from issue 12, 9 a leader whose log
//! pipe stalls (cut off from storage, and asked to stop); from issue 26, 10 storage that
//! closes idle connections.

use leasehold_testkit::defaults::{G, L, M, POLL, R};
use leasehold_testkit::procfs::{self, group_members};
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The design's defaults (L = 15 s, R = 4 s, M = 1 s, acquire_interval = 1 s), with the
/// harness's stop timeout G = 2 s.
const DEFAULTS: &str = "";
/// The most a daemon gives the log lines still queued at exit to reach a stalled stderr (the
/// safety model: "at most 1 s").
const FLUSH_LIMIT: Duration = Duration::from_secs(1);

/// The scene of most faults: `a` leads through a proxy of its own (with `child` as its
/// `[child]` lines), `b` follows, reaching storage directly; both log their deadlines. Returns
/// the proxy, `a`, `a`'s first child and `b`.
fn a_behind_a_proxy(
    azurite: &Azurite,
    group: &Group,
    child: &str,
) -> (FaultProxy, Daemon, Event, Daemon) {
    let proxy = FaultProxy::start(azurite.port);
    let (a, first, b) = group.leader_and_follower(Some(&proxy), DEFAULTS, child);
    // A new leader lists the line 200 ms into its term (`TERM_START_QUIET`); the faults that
    // follow are meant for the requests of a settled term (its renews), so they start once
    // that listing is over.
    let settled = first.t + secs(1);
    std::thread::sleep(settled.saturating_sub(mono_now()));
    (proxy, a, first, b)
}

/// `a`, cut off from storage at `cut` (`what`), saw its child die at `dead`: by its kill
/// deadline, which no renew moved past the cut. Prints the figures; returns the deadline.
fn assert_dead_by_kill_deadline(a: &Daemon, what: &str, cut: Duration, dead: Duration) -> Duration {
    let kill_at = a.latest_deadline().expect("a logged its deadline");
    // The last renew that succeeded was sent before the cut (t_s <= cut).
    assert!(kill_at <= cut + L - M, "a renew succeeded through the cut");
    eprintln!(
        "{what}: the leader's child dead {} after the cut (bound L - M = {}), {} before its kill \
         deadline",
        figure(dead - cut),
        figure(L - M),
        figure(kill_at.saturating_sub(dead))
    );
    assert!(dead <= kill_at, "the child outlived its kill deadline");
    kill_at
}

/// `a`'s lease was taken from it at `at` (`what`): its next renew fails for good, so its child
/// is dead within `bound` (printed with its name) and `a` says the lease was lost. Returns when
/// the child died.
fn assert_stops_on_losing_the_lease(
    group: &Group,
    a: &Daemon,
    what: &str,
    at: Duration,
    (bound, bound_is): (Duration, &str),
) -> Duration {
    let dead = lock_freed(&group.lock_path(), secs(10)).expect("a's child stopped");
    eprintln!(
        "child dead {} after {what} (bound: {bound_is} = {})",
        figure(dead - at),
        figure(bound)
    );
    assert!(dead - at <= bound);
    // Logged before the stop signal, but read through a pipe by another thread.
    assert!(
        a.wait_log("the lease was lost", secs(2)),
        "a renew failed for good"
    );
    dead
}

/// `a`, which held the lease, lost touch with storage at `at` (`what`) without releasing it:
/// `b` leads once the lease expires on the server, within L + poll + 1 s of `at`. Prints the
/// figure; returns `b`'s child's start.
fn assert_b_leads_once_the_lease_expires(group: &Group, what: &str, at: Duration) -> Event {
    let b_start = group
        .wait_start_of("b", L + secs(10))
        .expect("b leads after the lease expired on the server");
    let failover = b_start.t - at;
    let bound = L + POLL + secs(1);
    eprintln!(
        "b leads {} after {what} (bound L + poll + 1s = {})",
        figure(failover),
        figure(bound)
    );
    assert!(failover <= bound);
    b_start
}

/// Storage answers `a` again after its renews failed, within its slack: `a` renews late and
/// keeps the lease and its child (no new term, no failover, no stop). Returns when it said so.
fn assert_renewed_late_and_kept_its_child(group: &Group, a: &Daemon) -> Duration {
    assert!(
        a.wait_log("renewed late; lease kept", secs(10)),
        "{}",
        a.log()
    );
    let kept = mono_now();
    let history = group.history();
    assert_eq!(history.starts().len(), 1, "no new term, no failover");
    assert!(history.of_kind("stop").is_empty(), "the child kept running");
    kept
}

/// The proxy itself: each fault bites at once on a connection that is already open.
#[test]
fn the_proxy_passes_holds_delays_and_resets_open_connections() {
    let echo = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = echo.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in echo.incoming().map_while(Result::ok) {
            std::thread::spawn(move || {
                let mut conn = conn;
                let mut buf = [0u8; 256];
                while let Ok(n @ 1..) = conn.read(&mut buf) {
                    if conn.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    let proxy = FaultProxy::start(upstream);
    let mut conn = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buf = [0u8; 16];
    let round_trip = |conn: &mut TcpStream, byte: u8| -> Option<Duration> {
        let mut buf = [0u8; 16];
        let sent = Instant::now();
        conn.write_all(&[byte]).unwrap();
        let deadline = sent + secs(5);
        while Instant::now() < deadline {
            match conn.read(&mut buf) {
                Ok(1..) if buf[0] == byte => return Some(sent.elapsed()),
                Ok(_) => return None,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return None,
            }
        }
        None
    };
    assert!(round_trip(&mut conn, b'a').is_some(), "pass");

    proxy.set(Fault::Blackhole);
    conn.write_all(b"b").unwrap();
    assert!(
        conn.read(&mut buf).is_err(),
        "nothing comes back through a blackhole"
    );
    assert!(
        wait_until(secs(1), || proxy.pending(Direction::Up) == 1),
        "the request is held"
    );
    proxy.set(Fault::Pass);
    conn.set_read_timeout(Some(secs(2))).unwrap();
    assert_eq!(
        conn.read(&mut buf).unwrap(),
        1,
        "held bytes go on when it heals"
    );
    assert_eq!(buf[0], b'b');
    conn.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();

    proxy.set(Fault::slow_answers(Duration::from_millis(400)));
    let took = round_trip(&mut conn, b'c').expect("delayed, not lost");
    eprintln!("answer delayed 400ms: round trip {took:?}");
    assert!(
        took >= Duration::from_millis(400) && took < secs(2),
        "{took:?}"
    );
    proxy.set(Fault::slow_requests(Duration::from_millis(400)));
    let took = round_trip(&mut conn, b'd').expect("delayed, not lost");
    assert!(
        took >= Duration::from_millis(400) && took < secs(2),
        "{took:?}"
    );

    proxy.set(Fault::Reset);
    conn.set_read_timeout(Some(secs(2))).unwrap();
    assert!(
        matches!(conn.read(&mut buf), Ok(0) | Err(_)),
        "an open connection is closed"
    );
    let mut fresh = TcpStream::connect(("127.0.0.1", proxy.port)).unwrap();
    fresh.set_read_timeout(Some(secs(2))).unwrap();
    assert!(
        matches!(fresh.read(&mut buf), Ok(0) | Err(_)),
        "a new connection is closed"
    );
}

/// Scenario 1: the leader is cut off from storage (blackhole); the others still reach it.
#[test]
fn a_leader_cut_off_from_storage_stops_its_child_before_anyone_else_leads() {
    let group = Group::shared();
    let (proxy, a, _, b) = a_behind_a_proxy(Azurite::shared(), &group, "");

    let cut = mono_now();
    proxy.set(Fault::Blackhole);
    let dead = lock_freed(&group.lock_path(), secs(20)).expect("a's child stopped");
    let kill_at = assert_dead_by_kill_deadline(&a, "partitioned", cut, dead);

    let b_start = assert_b_leads_once_the_lease_expires(&group, "the cut", cut);
    // The server started its clock when the last renew arrived, after it was sent at
    // kill_at - (L - M): the lease cannot expire there before kill_at + M.
    assert!(
        b_start.t >= kill_at,
        "b led {:?} before a's kill deadline",
        kill_at - b_start.t
    );

    // Healed: what the proxy held (renews, a release, acquires) now reaches storage late, and
    // must not disturb b.
    proxy.set(Fault::Pass);
    assert!(a.wait_log("following", secs(30)), "a rejoins as a follower");
    let verdict = group.verdict(&[&a, &b]);
    eprintln!("{verdict}");
    verdict.assert_safe();
    let b_child = verdict.lives.iter().find(|l| l.identity == "b").unwrap();
    assert_eq!(
        verdict.lives.last().map(|l| l.pid),
        Some(b_child.pid),
        "b kept leading"
    );
    assert!(
        group
            .history()
            .of_kind("stop")
            .iter()
            .all(|e| e.identity == "a")
    );
}

/// Scenario 2: storage answers renews late, by 2, 5 and then 12 s.
///
/// L = 15 s, R = 6 s, M = 1 s, G = 2 s (2R + G + M = 15 <= L). A renew is sent R = 6 s after
/// the last success `t_s`, and may take R = 6 s (the request timeout) but never past the stop
/// deadline `t_s + L - M - G = t_s + 12`: so it must be answered by `t_s + 12`, and a 2 s or 5 s
/// late answer (at `t_s + 8`, `t_s + 11`) is in time and keeps the lease with a deadline counted
/// from its own send. A 12 s late answer never comes within the 6 s timeout: no renew succeeds,
/// and the child gets its stop signal at `t_s + 12` and is dead by `t_s + 14`.
#[test]
fn late_renew_answers_keep_the_lease_in_time_and_stop_the_child_when_too_late() {
    // An Azurite of its own that keeps idle connections 60 s: the proxy holds each answer
    // `delay` s while Azurite's idle clock runs from when it sent it, so with its 5 s default a
    // renew 6 s after the last one's send met a connection the server was closing ('connection
    // closed before message completed', 1 run in 4 under load), which is the proxy's skew and
    // not what this scenario is about (keep-alive is scenario 10's).
    let azurite = Azurite::start_with(AzuriteOptions {
        keep_alive_secs: Some(60),
        ..AzuriteOptions::default()
    });
    // Checked beside the scenario, not assumed: `azurite-blob` ignores the flag, and this test
    // failed 1 run in 4 until the kit ran the full `azurite` for it.
    let kept = std::thread::scope(|scope| {
        let probe = scope.spawn(|| azurite.keeps_idle_connections_for(secs(7)));
        late_renews(&azurite);
        probe.join().unwrap()
    });
    assert!(kept, "this Azurite closed an idle connection within 7 s");
}

fn late_renews(azurite: &Azurite) {
    let group = Group::new(azurite);
    let proxy = FaultProxy::start(azurite.port);
    let lease = "duration = \"15s\"\nrenew_interval = \"6s\"\nsafety_margin = \"1s\"\n";
    let a = group.start_watched("a", Some(&proxy), lease, "");
    let child = group.wait_first_start(secs(15)).expect("a leads");
    let before = a.latest_deadline().expect("a logged its deadline");
    let from_sent = L - M; // kill_at = t_s + L - M

    for delay in [2, 5] {
        let slowed = mono_now();
        proxy.set(Fault::slow_answers(secs(delay)));
        // Renews sent after the answers became slow, answered `delay` late, and counted.
        let late = wait_until_some(secs(2 * 6 + delay + 5), || {
            let late: Vec<Duration> = a
                .renewals()
                .into_iter()
                .filter(|k| *k - from_sent > slowed)
                .collect();
            (late.len() >= 2).then_some(late)
        })
        .unwrap_or_else(|| panic!("no renew succeeded with answers {delay}s late"));
        eprintln!(
            "answers {delay}s late: {} renews succeeded, each deadline counted from its send",
            late.len()
        );
    }
    let history = group.history();
    assert!(
        history.of_kind("stop").is_empty() && history.of_kind("exit").is_empty(),
        "the child kept running"
    );
    let ran_past = history.last_seen(child.pid).saturating_sub(before);
    eprintln!(
        "the child ran {} past the kill deadline it had before the answers became slow",
        figure(ran_past)
    );
    assert!(
        ran_past > Duration::ZERO,
        "late successes must extend the lease"
    );

    let slowed = mono_now();
    proxy.set(Fault::slow_answers(secs(12)));
    let dead = lock_freed(&group.lock_path(), secs(20)).expect("the child stopped");
    let kill_at = a.latest_deadline().unwrap();
    assert!(
        kill_at - from_sent < slowed,
        "no renew can succeed with answers 12s late"
    );
    let stop_at = kill_at - G;
    let history = group.history();
    let stop = history
        .of_kind("stop")
        .first()
        .map(|e| e.t)
        .expect("the child got the stop signal");
    eprintln!(
        "answers 12s late: stop signal {} after the stop deadline t_s + L - M - G, child dead {} before its kill deadline",
        figure(stop.saturating_sub(stop_at)),
        figure(kill_at.saturating_sub(dead))
    );
    assert!(
        stop + Duration::from_millis(50) >= stop_at,
        "stopped {:?} before the stop deadline",
        stop_at - stop
    );
    assert!(dead <= kill_at, "the child outlived its kill deadline");
    // The supervisor's own timer stops the child at the stop deadline; the renew loop logs this
    // a moment later, when its last attempt (cut at that same deadline) has ended.
    assert!(
        a.wait_log("no renew succeeded before the stop deadline", secs(2)),
        "{}",
        a.log()
    );
    group.verdict(&[&a]).assert_safe();
}

/// Scenario 3: storage goes down and comes back with its data (`--location`). A short outage is
/// ridden out by renewing late; a long one stops the child in time, and the epoch carries on
/// from the stored one when leadership returns.
///
/// Azurite 3.35 forgets leases when it restarts: it reads each lease's expiry back from its
/// database as a string, and `Date < string` is false, so every lease comes back "expired"
/// (`LeaseFactory.createLeaseState`). Azure keeps leases. With the emulator, a follower could
/// take a forgotten lease while the leader's child still runs, as after an admin break with a 0 s
/// period (the README's "What a lease cannot promise"). So the follower here joins only for the
/// long outage, when the leader's child is dead before storage comes back.
#[test]
fn storage_going_down_and_coming_back_keeps_leases_and_epochs() {
    let mut azurite = Azurite::start();
    let group = Group::new(&azurite);
    let a = group.start_watched("a", None, DEFAULTS, "");
    let first = group.wait_first_start(secs(15)).expect("a leads");

    // Short: down until the leader notices, then back. Its renew of the lease Azurite forgot
    // (an expired lease nobody took) succeeds.
    let down = mono_now();
    azurite.stop();
    assert!(a.wait_log("renew failed", secs(10)), "the leader noticed");
    azurite.start_again();
    let kept = assert_renewed_late_and_kept_its_child(&group, &a);
    eprintln!(
        "storage down and back within {}: the leader renewed late and kept its child",
        figure(kept - down)
    );

    // Long: down until the child is dead.
    let b = group.start_watched("b", None, DEFAULTS, "");
    b.assert_follows(secs(10));
    let down = mono_now();
    azurite.stop();
    let dead = lock_freed(&group.lock_path(), L + secs(5)).expect("the child stopped");
    assert_dead_by_kill_deadline(&a, "storage down", down, dead);
    azurite.start_again();
    let up = mono_now();
    let next = group
        .wait_nth_start(2, secs(40))
        .expect("leadership returns");
    // The daemons retry with a backoff that reaches 10 s, plus up to 100 % jitter.
    let bound = secs(20) + secs(2);
    eprintln!(
        "{} leads again {} after storage came back (bound {}), epoch {} -> {}",
        next.identity,
        figure(next.t - up),
        figure(bound),
        first.epoch,
        next.epoch
    );
    assert!(next.t - up <= bound);
    assert!(next.epoch > first.epoch, "the epoch survived the restart");
    group.verdict(&[&a, &b]).assert_safe();
}

/// Scenario 4: storage frozen (SIGSTOP) for less than the leader's slack: every request hangs,
/// the leader retries, and the first answer after the thaw keeps the lease. (A freeze longer than
/// the slack: tests/it/run.rs.)
#[test]
fn a_short_storage_freeze_is_ridden_out_without_a_failover() {
    let (azurite, group) = Group::on_new_azurite();
    let (a, _, b) = group.leader_and_follower(None, DEFAULTS, "");

    let frozen = mono_now();
    azurite.freeze();
    // A renew hangs until its timeout (R = 4 s), which the leader logs.
    let noticed = a.wait_log("renew failed", secs(10));
    azurite.thaw();
    let thawed = mono_now();
    assert!(noticed, "the leader noticed the freeze");
    assert_renewed_late_and_kept_its_child(&group, &a);
    eprintln!(
        "storage frozen for {}: the leader renewed late and kept its child",
        figure(thawed - frozen)
    );
    group.verdict(&[&a, &b]).assert_safe();
}

/// Scenario 5: the leader is SIGKILLed while it is stopping a child that ignores the stop signal
/// and has a child of its own: the guard still takes the whole group down.
#[test]
fn a_leader_killed_while_stopping_its_child_leaves_nothing_behind() {
    let group = Group::shared();
    // G = 5 s leaves a window between the stop signal and the group kill (2*4 + 5 + 1 <= 15).
    let stubborn = group.witness_child(&["--ignore-stop", "--grandchild"], "stop_timeout = \"5s\"");
    let (a, child, b) = group.leader_and_follower(None, DEFAULTS, &stubborn);
    assert!(
        wait_until(secs(5), || group_members(child.pid).len() >= 2),
        "the child and its own child run in one group"
    );

    a.signal(Signal::SIGTERM);
    group
        .wait_history(secs(5), |h| !h.of_kind("signal").is_empty())
        .expect("the child got (and ignored) the stop signal");
    assert!(
        group_members(child.pid).len() >= 2,
        "both ignore the stop signal"
    );
    let crash = mono_now();
    a.signal(Signal::SIGKILL);
    let freed = lock_freed(&group.lock_path(), secs(5)).expect("the child's processes died");
    let gone = freed - crash;
    eprintln!(
        "child and grandchild dead {} after SIGKILL of the daemon in mid-stop (bound 1s)",
        figure(gone)
    );
    assert!(gone <= secs(1));
    // The kernel frees the lock while closing an exiting process's files, a moment before the
    // process leaves /proc.
    assert!(
        wait_until(secs(1), || group_members(child.pid).is_empty()),
        "nothing left"
    );

    // The lease was not released: b leads once it expires.
    assert_b_leads_once_the_lease_expires(&group, "the crash", crash);
    group.verdict(&[&a, &b]).assert_safe();
}

/// Scenario 6: the leader daemon is paused past its lease together with its child's guard, as a
/// paused VM, `docker pause` or a cgroup freeze of the whole container would pause them (the
/// child runs on here, as a process outside the freeze would). Nothing on the machine can stop
/// the child meanwhile; the README says so ("What a lease cannot promise"), and this test shows
/// what the epoch buys: the stale child's writes carry the smaller epoch, so a downstream system
/// that checks epochs refuses every one of them once the new leader has written. The two
/// children use separate witness locks here, so the new leader's child really runs beside the
/// stale one. (A daemon frozen alone is no such case: its guard stops the child on time,
/// tests/it/freeze.rs.)
#[test]
fn a_paused_leader_is_fenced_off_by_its_epoch() {
    let group = Group::shared();
    let witness = |name: &str| {
        let lock = group.dir().join(format!("{name}.lock"));
        format!("command = {}\n", group.witness_locking(&lock, &[]))
    };
    let a = group.start_watched("a", None, DEFAULTS, &witness("a"));
    let stale = group.wait_first_start(secs(15)).expect("a leads");
    let b = group.start_watched("b", None, DEFAULTS, &witness("b"));
    b.assert_follows(secs(10));
    let guard = procfs::guard_started_by(a.pid().as_raw() as u32).expect("a's child's guard");
    let guard = nix::unistd::Pid::from_raw(guard as i32);

    let paused = mono_now();
    a.signal(Signal::SIGSTOP);
    nix::sys::signal::kill(guard, Signal::SIGSTOP).expect("pause the guard");
    let history = group
        .wait_history(L + secs(10), |h| {
            let Some(b_start) = h.first_start_of("b") else {
                return false;
            };
            // Both children write after the new leader started.
            let beats_after = |id: &str| {
                h.of_kind("beat")
                    .iter()
                    .filter(|e| e.identity == id && e.t > b_start.t)
                    .count()
            };
            beats_after("a") >= 3 && beats_after("b") >= 3
        })
        .expect("b leads while a's child still runs");
    let fresh = history.first_start_of("b").unwrap();
    let resumed = mono_now();
    nix::sys::signal::kill(guard, Signal::SIGCONT).expect("resume the guard");
    a.signal(Signal::SIGCONT);
    let dead = lock_freed(&group.dir().join("a.lock"), secs(5)).expect("a stops its child");
    eprintln!(
        "paused {} in all; b led {} after the pause; a's stale child dead {} after SIGCONT (bound 1s)",
        figure(resumed - paused),
        figure(fresh.t - paused),
        figure(dead.saturating_sub(resumed))
    );
    assert!(dead.saturating_sub(resumed) <= secs(1));
    assert!(
        a.wait_log("lost leadership", secs(5)),
        "a steps down at once"
    );

    let history = group.history();
    assert!(
        stale.epoch < fresh.epoch,
        "the stale epoch {} is smaller than the new leader's {}",
        stale.epoch,
        fresh.epoch
    );
    let refused = history.fenced_writes();
    let stale_writes_after = history
        .of_kind("beat")
        .iter()
        .filter(|e| e.pid == stale.pid && e.t > fresh.t)
        .count();
    eprintln!(
        "a downstream checking epochs refused {} writes, all of them epoch {} from the paused leader's child ({} of its writes came after the new leader started)",
        refused.len(),
        stale.epoch,
        stale_writes_after
    );
    assert!(!refused.is_empty());
    assert!(
        refused
            .iter()
            .all(|e| e.pid == stale.pid && e.epoch == stale.epoch)
    );

    // The checker flags exactly what the README says a lease cannot promise, and nothing else.
    let verdict = group.verdict(&[&a, &b]);
    eprintln!("{verdict}");
    assert!(verdict.epoch_regressions.is_empty());
    assert!(
        !verdict.overlaps.is_empty()
            && verdict
                .overlaps
                .iter()
                .all(|o| o.alive.iter().all(|l| l.pid == stale.pid)),
        "the only overlap is with the paused leader's child"
    );
    assert!(verdict.late.iter().all(|l| l.life.pid == stale.pid));
}

/// Scenario 7: an admin breaks the lease while a renew is on its way (requests to storage are
/// slowed by 2 s, and the break lands while one is held). The renew arrives on a breaking lease,
/// fails for good, and the child is stopped at once, before the break period (R + G + 1 s, as
/// the README advises) lets anyone else in.
#[test]
fn an_admin_break_during_a_renew_stops_the_child_before_the_next_leader_starts() {
    let group = Group::shared();
    let (proxy, a, _, b) = a_behind_a_proxy(Azurite::shared(), &group, "");

    let in_flight = secs(2);
    proxy.set(Fault::slow_requests(in_flight));
    assert!(
        wait_until(secs(10), || proxy.pending(Direction::Up) > 0),
        "a renew is on its way"
    );
    let period = secs(4) + G + secs(1);
    let admin = group.admin();
    let broke = mono_now();
    admin.break_lease(period).expect("break the lease");

    let dead = assert_stops_on_losing_the_lease(
        &group,
        &a,
        "the break",
        broke,
        (in_flight + G, "the renew in flight + G"),
    );

    // a competes again, with its requests 2 s slow; cut it off so that the next leader is b.
    proxy.set(Fault::Blackhole);
    let b_start = group
        .wait_start_of("b", period + secs(5))
        .expect("b leads after the break period")
        .t;
    eprintln!(
        "b leads {} after the break (break period {}), {} after a's child died",
        figure(b_start - broke),
        figure(period),
        figure(b_start - dead)
    );
    assert!(b_start >= dead);
    assert!(b_start - broke <= period + POLL + secs(1));
    proxy.set(Fault::Pass);
    group.verdict(&[&a, &b]).assert_safe();
}

/// Scenario 8, and the chaos command itself: one 30 s churn of random kills, restarts and
/// partitions among five daemons, then the whole history through the checker.
#[test]
fn the_chaos_command_survives_a_churn_of_five_daemons() {
    let out = tempfile::tempdir().unwrap();
    let svg = out.path().join("chaos.svg");
    let run = std::process::Command::new(example_bin("chaos"))
        .args(["--minutes", "0.1", "--daemons", "5", "--only", "churn"])
        .arg("--svg")
        .arg(&svg)
        .env("LEASEHOLD_BIN", leasehold_bin())
        .output()
        .expect("run the chaos command");
    let summary = String::from_utf8_lossy(&run.stdout);
    eprintln!("{summary}{}", String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{}", run.status);
    assert!(summary.contains("trials: 1 (churn 1)"));
    assert!(summary.contains("overlaps: 0"));
    assert!(summary.contains("verdict: SAFE"));
    let drawing = std::fs::read_to_string(&svg).expect("the timeline");
    // A row per daemon, and the children's bars labelled with their epochs.
    let texts: Vec<&str> = drawing.lines().map(str::trim).collect();
    assert!(drawing.starts_with("<svg"), "{drawing}");
    for daemon in ["d1", "d2", "d3", "d4", "d5", "storage, all"] {
        assert!(texts.contains(&daemon), "no row for {daemon}");
    }
    assert!(
        texts.iter().any(|t| t.starts_with('…')),
        "no child's bar labelled with its epoch"
    );
}

/// Issue 12, item 2: an instance whose storage answers come back later than its request timeout
/// (R + 0.5 s here) cannot complete an acquire, but its acquire requests do reach the server
/// and win the lease there. It must not keep the lease from a healthy instance.
///
/// a leads; b follows behind a proxy that holds every answer R + 0.5 s; a is SIGKILLed. Once a's
/// lease has expired and b's next acquire has taken it (seen from outside: the blob is leased
/// again, and its metadata still names a), `status` must not name a, and a healthy daemon c is
/// started (like an instance restarted meanwhile). c must lead within b's answer delay (b learns
/// of its win that late, and gives the lease back at once) + one polling period of c + 1 s for
/// c's start-up and the release to travel. Then b must stay out of c's way for a lease duration.
/// Measured from the kill, that is L (a's lease) + b's wait until its next acquire (its previous
/// one's answer, R + 0.5 s, plus a poll) + the bound above: well above the design's failover
/// bound `L + 1.2 x acquire_interval` only because c was not running when the lease expired;
/// with c running, c takes the lease at its first poll after the expiry or after b's release.
#[test]
fn an_instance_whose_answers_come_too_late_does_not_keep_the_lease() {
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let a = group.start_watched("a", None, DEFAULTS, "");
    group.wait_first_start(secs(15)).expect("a leads");
    let r = secs(4);
    let answer_delay = r + Duration::from_millis(500);
    let proxy = FaultProxy::start(azurite.port);
    proxy.set(Fault::slow_answers(answer_delay));
    let b = group.start_watched("b", Some(&proxy), DEFAULTS, "");
    assert!(
        b.wait_log("did not answer within", secs(20)),
        "b's acquire timed out"
    );

    let killed = mono_now();
    a.signal(Signal::SIGKILL);
    // a's last renew was sent at kill_at - (L - M); the server's lease runs L from its arrival.
    let a_expires = a.latest_deadline().expect("a logged its deadline") + M;
    let admin = group.admin();
    let b_won = wait_until_some(L + secs(20), || {
        if mono_now() < a_expires + Duration::from_millis(300) {
            return None;
        }
        admin.is_leased().ok()?.then(mono_now)
    })
    .expect("b's acquire took the expired lease");
    let status_config = group.config("c", DEFAULTS, "");
    let status = leasehold(
        &["status", "--json", "-c", status_config.to_str().unwrap()],
        &[],
    );
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).expect("status --json");
    eprintln!(
        "a's lease expired {} after the kill; b's acquire holds it {} after that; status: {report}",
        figure(a_expires - killed),
        figure(b_won - a_expires)
    );

    let c = Daemon::launch(&status_config, "c").deadline_log().spawn();
    let c_started = mono_now();
    let bound = answer_delay + POLL + secs(1);
    let c_leads = group
        .wait_start_of("c", bound + secs(20))
        .expect("c leads (on the unfixed code, b renews the lease for ever with late acquires)");
    eprintln!(
        "c leads {} after b's acquire took the lease (bound: b's answer delay + poll + 1s = {}), {} after c started, {} after the kill",
        figure(c_leads.t - b_won),
        figure(bound),
        figure(c_leads.t - c_started),
        figure(c_leads.t - killed)
    );
    assert!(c_leads.t - b_won <= bound);

    // b gave back the lease its acquire took as soon as it learnt of it.
    let requests = proxy.requests();
    let release = requests
        .iter()
        .find(|r| r.lease_action.as_deref() == Some("release") && r.at >= b_won)
        .expect("b released the lease its late acquire had taken");
    eprintln!(
        "b released it {} after it was seen held (b's answer delay {})",
        figure(release.at - b_won),
        figure(answer_delay)
    );
    assert!(release.at - b_won <= answer_delay + Duration::from_millis(500));

    // b keeps trying, and its late answers keep coming; it stays out of the healthy leader's way.
    let refusals = |d: &Daemon| d.log().matches("the late acquire was refused").count();
    let before = refusals(&b);
    assert!(
        wait_until(L + answer_delay + POLL + secs(5), || refusals(&b) > before),
        "b tried again after c led, and was refused"
    );
    let acquires: Vec<String> = proxy
        .requests()
        .into_iter()
        .filter(|r| r.lease_action.as_deref() == Some("acquire"))
        .filter_map(|r| r.lease_id)
        .collect();
    let distinct: std::collections::HashSet<&String> = acquires.iter().collect();
    eprintln!(
        "b sent {} acquires, with {} distinct lease ids",
        acquires.len(),
        distinct.len()
    );
    assert!(acquires.len() >= 3);
    assert_eq!(
        distinct.len(),
        acquires.len(),
        "an acquire that got no answer in time was sent again with its id"
    );
    let history = group.history();
    assert!(
        history.starts().iter().all(|s| s.identity != "b"),
        "b never leads"
    );
    assert_eq!(
        history.starts().last().map(|s| s.pid),
        Some(c_leads.pid),
        "c keeps leading"
    );
    assert!(
        history.of_kind("stop").iter().all(|e| e.identity == "a"),
        "c's child was never stopped"
    );
    let verdict = group.verdict(&[&a, &b, &c]);
    eprintln!("{verdict}");
    verdict.assert_safe();

    assert_eq!(report["lease_state"], "leased", "{report}");
    assert_eq!(report["last_holder"], "a", "{report}");
    assert_eq!(
        report["leader"],
        serde_json::Value::Null,
        "status must not name the crashed a as the leader: {report}"
    );
    assert_eq!(report["lease_holder"], "unrecorded", "{report}");
}

/// Issue 12, item 2: a term that ended because no renew succeeded (the stop deadline passed)
/// does not campaign again at once: not before its last successful renew was sent + L, before
/// which nobody can take the lease. When storage is down for everyone this costs nothing; when
/// only this instance is slow, it leaves the lease to a healthy follower instead of racing it
/// with requests whose answers it would not get in time either.
///
/// a (G = 5 s, so its stop deadline is `t_s + 9`) leads behind a proxy that then holds every
/// answer 12 s: no renew can succeed, the child is stopped at `t_s + 9` and the release is
/// sent (it reaches storage at once, only its answer is late; a gives up waiting for it at
/// `t_s + 13`). b, healthy, takes over. a's next acquire must not be sent before `t_s + L`.
#[test]
fn a_leader_whose_renews_all_failed_stays_out_until_its_lease_has_expired() {
    let group = Group::shared();
    let (proxy, a, _, b) = a_behind_a_proxy(Azurite::shared(), &group, "stop_timeout = \"5s\"\n");

    let slowed = mono_now();
    proxy.set(Fault::slow_answers(secs(12)));
    let history = group
        .wait_history(L + secs(10), |h| h.first_start_of("b").is_some())
        .expect("b leads");
    let kill_at = a.latest_deadline().expect("a logged its deadline");
    let t_s = kill_at - (L - M);
    assert!(
        t_s < slowed,
        "no renew succeeded once the answers were slow"
    );
    assert!(
        a.wait_log("no renew succeeded before the stop deadline", secs(5)),
        "a's term ended because no renew succeeded"
    );
    let next_acquire = wait_until_some(L + secs(10), || {
        proxy
            .requests()
            .into_iter()
            .find(|r| r.lease_action.as_deref() == Some("acquire") && r.at > slowed)
    })
    .expect("a campaigns again");
    let b_start = history.first_start_of("b").unwrap().t;
    eprintln!(
        "a's last renew sent at t_s; its child stopped by t_s + {}, b led at t_s + {}, a's next acquire sent at t_s + {} (not before t_s + L = t_s + {})",
        figure(
            history
                .of_kind("stop")
                .first()
                .map_or(Duration::ZERO, |e| e.t.saturating_sub(t_s))
        ),
        figure(b_start - t_s),
        figure(next_acquire.at - t_s),
        figure(L)
    );
    assert!(
        next_acquire.at >= t_s + L,
        "a campaigned {} before its lease could have expired",
        figure(t_s + L - next_acquire.at)
    );
    assert!(
        a.log().contains("staying out of the election"),
        "{}",
        a.log()
    );
    proxy.set(Fault::Pass);
    group.verdict(&[&a, &b]).assert_safe();
}

/// Issue 15: the lease blob is broken and then deleted while its leader leads (an operator's
/// cleanup). The leader learns of it at its next renew (404), stops its child at once, and the
/// next leadership, on the re-created blob, still gets a larger epoch than every earlier one.
#[test]
fn a_lease_blob_broken_then_deleted_under_its_leader_stops_the_child_and_epochs_keep_growing() {
    let group = Group::shared();
    let a = group.start_watched("a", None, DEFAULTS, "");
    let first = group.wait_first_start(secs(15)).expect("a leads");
    let admin = group.admin();
    let deleted = mono_now();
    admin.break_lease(Duration::ZERO).expect("break the lease");
    admin.delete();

    let dead = assert_stops_on_losing_the_lease(
        &group,
        &a,
        "the blob was broken and deleted",
        deleted,
        (R + secs(1), "the next renew, R, + 1s"),
    );

    let next = group
        .wait_nth_start(2, secs(30))
        .expect("a leads again on the re-created blob");
    eprintln!(
        "epoch {} before the deletion, {} after",
        first.epoch, next.epoch
    );
    assert!(next.epoch > first.epoch, "the epoch went back");
    assert!(next.t >= dead);
    group.verdict(&[&a]).assert_safe();
}

/// Scenario 9 (issue 12): the consumer of the leader's output stalls (Docker's default log mode
/// blocks the writer when its driver falls behind; a stuck journald does the same) while its
/// child keeps writing to the same pipe, and then the leader is cut off from storage. Its child
/// must still be dead by the daemon's kill deadline, before the follower takes over.
#[test]
fn a_leader_whose_log_pipe_stalls_still_kills_its_child_in_time() {
    let group = Group::shared();
    let chatty = group.witness_child(&["--chatter", "1ms"], "");
    let (proxy, a, child, b) = a_behind_a_proxy(Azurite::shared(), &group, &chatty);

    // Right after a renew, so that the deadline of the last renew before the cut is among the
    // lines read before the stall (a daemon whose output stalls may drop lines).
    let renewed = a.renewals().len();
    assert!(
        wait_until(R + secs(2), || a.renewals().len() > renewed),
        "a renews"
    );
    assert!(a.stall_output(), "a's stdout and stderr are full");
    let cut = mono_now();
    proxy.set(Fault::Blackhole);
    let bound = cut + L - M;
    let Some(dead) = lock_freed(&group.lock_path(), L - M + secs(5)) else {
        // Drained, the daemon gets on; b's child, waiting for the witness lock, takes it.
        a.resume_output();
        let gone = wait_until(secs(30), || group_members(child.pid).is_empty());
        let last = group.history().last_seen(child.pid);
        panic!(
            "a's child still alive 5s past t_cut + L - M while its log pipe stalled; {} it was \
             last seen {} past t_cut + L - M\n{}",
            if gone {
                "drained, the daemon killed it:"
            } else {
                "still alive 30s after the pipe was drained;"
            },
            figure(last.saturating_sub(bound)),
            group.verdict(&[&a, &b])
        );
    };
    assert_dead_by_kill_deadline(&a, "log pipe stalled, partitioned", cut, dead);

    let b_start = group
        .wait_start_of("b", L + secs(10))
        .expect("b leads after the lease expired on the server");
    assert!(b_start.t >= dead, "b's child started before a's died");
    eprintln!(
        "b leads {} after the cut, {} after a's child died",
        figure(b_start.t - cut),
        figure(b_start.t - dead)
    );

    a.resume_output();
    proxy.set(Fault::Pass);
    assert!(a.wait_log("following", secs(30)), "a rejoins as a follower");
    let verdict = group.verdict(&[&a, &b]);
    eprintln!("{verdict}");
    verdict.assert_safe();
}

/// Scenario 9, at shutdown: SIGTERM to a leader whose output is stalled and whose log queue
/// overflows (a burst of forwarded signals, one log line each). It still stops its child at
/// once, releases the lease and exits 0, within G (the child's stop timeout) + the second the
/// daemon gives its last log lines at exit + 1 s for the release and a loaded machine.
#[test]
fn a_leader_whose_log_pipe_stalls_still_shuts_down_cleanly() {
    let group = Group::shared();
    let chatty = group.witness_child(&["--chatter", "1ms"], "");
    let mut a = group.launch("a", DEFAULTS, &chatty).http().spawn();
    group.wait_first_start(secs(15)).expect("a leads");

    assert!(a.stall_output(), "a's stdout and stderr are full");
    // Each forwarded signal is a log line: far more than the daemon keeps queued.
    let burst = 600;
    for _ in 0..burst {
        a.signal(Signal::SIGUSR1);
        std::thread::sleep(Duration::from_millis(1));
    }
    let dropped = wait_until_some(secs(5), || {
        let dropped = a.metrics()?.sum("leasehold_log_lines_dropped_total", &[]);
        (dropped > 0.0).then_some(dropped)
    });

    let asked = mono_now();
    a.signal(Signal::SIGTERM);
    let status = a.wait_exit(secs(20));
    let took = mono_now() - asked;
    let status = status.unwrap_or_else(|| {
        panic!("a did not exit within 20s of SIGTERM while its log pipe stalled")
    });
    let bound = G + FLUSH_LIMIT + secs(1);
    eprintln!(
        "log pipe stalled, {} log lines dropped: the leader exited {} after SIGTERM (bound G + flush limit + 1s = {})",
        dropped.unwrap_or(0.0),
        figure(took),
        figure(bound)
    );
    assert_eq!(status.code(), Some(0), "{status}");
    let stop = group
        .history()
        .of_kind("stop")
        .first()
        .map(|e| e.t)
        .expect("the child got the stop signal");
    eprintln!("stop signal handled {} after SIGTERM", figure(stop - asked));
    assert!(stop - asked <= secs(1));
    assert!(took <= bound);
    assert!(group.lease_is_free(), "the lease was released");
    let dropped = dropped.expect("dropped log lines are counted in /metrics");
    assert!(dropped < burst as f64, "{dropped}");
}

/// Scenario 10: storage that closes idle connections. Azurite (any Node server) announces on
/// every answer how long it keeps an idle connection (`Keep-Alive: timeout=5`) and closes it
/// about a second after that; a request written on that connection as it closes fails, though
/// storage was never unreachable (renews 6 s apart through the store failed 2 of 20 before
/// leasehold read the header). Through leasehold's own store: a connection is reused while the
/// server promises to keep it (less half a second), a new one is opened after a longer pause,
/// and no request sent around the moment of the close fails. (Azurite 3.35 ignores its own
/// `--blobKeepAliveTimeout`, so this takes its 5 s.)
#[test]
fn no_request_races_storage_closing_an_idle_connection() {
    use leasehold::store::{AzureStore, LeaseId, LeaseStore, StorageTarget};
    let azurite = Azurite::start_with(AzuriteOptions {
        in_memory: true,
        ..AzuriteOptions::default()
    });
    let target =
        StorageTarget::from_connection_string(&azurite.connection_string(), "idle", "closes")
            .expect("a target");
    let store = AzureStore::new(&target).expect("a store");
    let connections =
        || leasehold_testkit::procfs::storage_connections(std::process::id(), azurite.port);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        store.prepare(true).await.expect("container and blob");
        let id = LeaseId::random();
        store.acquire(id, 15).await.expect("the lease");
        // The answers so far announced the keep-alive; from here on one connection serves
        // requests less than 4.5 s apart.
        store.renew(id).await.expect("renew");
        let first = connections();
        assert_eq!(first.len(), 1, "one connection to storage: {first:?}");
        tokio::time::sleep(Duration::from_secs(4)).await;
        store.renew(id).await.expect("renew after 4 s");
        assert_eq!(connections(), first, "a connection idle for 4 s is reused");
        // Idle past 4.5 s, though Azurite has not closed it yet: not reused.
        tokio::time::sleep(Duration::from_secs(5)).await;
        store.renew(id).await.expect("renew after 5 s");
        let second = connections();
        assert!(
            second.len() == 1 && second != first,
            "a connection idle for 5 s is not reused: before {first:?}, now {second:?}"
        );
        // Around the moment Azurite closes an idle connection (6 s): none fails.
        for pause in [5980, 6000, 6020] {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            if let Err(e) = store.renew(id).await {
                panic!("a renew {pause} ms after the last one failed: {e}");
            }
        }
        store.release(id).await.expect("release");
    });
}
