//! A daemon that cannot act: frozen (SIGSTOP), stopped at a terminal (SIGTSTP, Ctrl-Z), or
//! killed while frozen. The child's guard process holds the child to its deadlines in its
//! daemon's place (docs/safety.md, "The guard"): the child is dead by `t_s + L - M`, before the
//! next leader's child starts, and gets one stop signal.
//!
//! These tests run the daemon the suite runs (`target/<profile>/leasehold`, the debug binary
//! under `cargo test`; `LEASEHOLD_BIN` names another, e.g. the release binary). The figures do
//! not depend on the build: the guard is a process of its own that sleeps on a CLOCK_BOOTTIME
//! timer until `t_s + L - M - G`, and the witness stops at once on the signal; the margin to the
//! kill deadline is `G` (2 s here) minus a timer's wake-up.

use leasehold_testkit::defaults::{G, L, M, POLL};
use leasehold_testkit::procfs::{guard_started_by, memory_detail, memory_kib, processes};
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::time::Duration;

/// The design's defaults (L = 15 s, R = 4 s, M = 1 s, acquire_interval = 1 s), with the
/// harness's stop timeout G = 2 s.
const DEFAULTS: &str = "";

/// The state letter of process `pid` in /proc (`T`: stopped).
fn state(pid: u32) -> Option<String> {
    processes()
        .into_iter()
        .find(|p| p.pid == pid)
        .map(|p| p.state)
}

/// The stop signals a child got: its `stop` lines, and with `--ignore-stop` its `signal` lines
/// that name the stop signal.
fn stop_signals(history: &History, pid: u32) -> usize {
    history
        .of_kind("stop")
        .iter()
        .chain(history.of_kind("signal").iter())
        .filter(|e| e.pid == pid && e.detail == "SIGTERM")
        .count()
}

/// The guard of `a`'s child, and its memory printed beside its daemon's.
fn guard_of_leader(a: &Daemon) -> u32 {
    let guard = wait_until_some(secs(2), || guard_started_by(a.pid().as_raw() as u32))
        .expect("the child has its guard");
    if let (Some((rss, _)), Some(detail), Some((daemon, _))) = (
        memory_kib(guard),
        memory_detail(guard),
        memory_kib(a.pid().as_raw() as u32),
    ) {
        eprintln!(
            "guard {guard}: resident {rss} KiB ({} KiB of it heap, stacks and relocated \
             tables, {} KiB the binary's shared pages); its daemon: {daemon} KiB",
            detail.anon_kib, detail.file_kib
        );
        // Its own memory (a debug build's relocated tables included) beside the binary's
        // shared pages, which every leasehold process on the host shares.
        assert!(detail.anon_kib <= 2048, "the guard stays tiny");
    }
    guard
}

/// SIGSTOP to the leading daemon's pid alone (its child and guard run on, as after `kill -STOP`
/// or a debugger's attach). Its guard sends the child its stop signal at `t_s + L - M - G`: the
/// child is dead `G` before its kill deadline `t_s + L - M`, and the follower leads once the
/// lease has expired on the server, after that. On SIGCONT the frozen daemon steps down without
/// a second signal and follows. (Before the guard kept the deadlines, the child ran on until
/// SIGCONT: `b` led beside it.)
#[test]
fn a_frozen_leader_s_guard_stops_its_child_by_the_kill_deadline() {
    let group = Group::shared();
    let (a, first, b) = group.leader_and_follower(None, DEFAULTS, "");
    guard_of_leader(&a);

    let frozen = mono_now();
    a.signal(Signal::SIGSTOP);
    let dead = lock_freed(&group.lock_path(), L + secs(5)).expect("the frozen leader's child died");
    // Its log ends where it froze: the last deadline it logged is the one its guard holds.
    let kill_at = a.latest_deadline().expect("a logged its deadline");
    assert!(kill_at <= frozen + L - M, "no renew after the freeze");
    let stopped = group
        .history()
        .of_kind("stop")
        .into_iter()
        .find(|e| e.pid == first.pid)
        .expect("the child got its stop signal")
        .t;
    eprintln!(
        "a frozen {} before its kill deadline: the child's stop signal {} after its stop \
         deadline t_s + L - M - G, the child dead {} before its kill deadline t_s + L - M",
        figure(kill_at - frozen),
        figure(stopped.saturating_sub(kill_at - G)),
        figure(kill_at.saturating_sub(dead))
    );
    assert!(
        stopped + ms(1) >= kill_at - G,
        "stopped before the stop deadline"
    );
    assert!(dead <= kill_at, "the child outlived its kill deadline");

    let b_start = group
        .wait_start_of("b", L + secs(10))
        .expect("b leads once the lease expired");
    eprintln!(
        "b's child started {} after a's child died ({} after the freeze)",
        figure(b_start.t.saturating_sub(dead)),
        figure(b_start.t - frozen)
    );
    assert!(b_start.t >= dead);

    a.signal(Signal::SIGCONT);
    assert!(
        a.wait_log("lost leadership", secs(5)),
        "a steps down on SIGCONT:\n{}",
        a.log()
    );
    a.assert_follows(secs(10));
    let history = group.history();
    assert_eq!(stop_signals(&history, first.pid), 1, "one stop signal");
    assert_eq!(history.starts().len(), 2, "b leads on");
    group.verdict(&[&a, &b]).assert_safe();
}

/// The same with a child that ignores its stop signal: the frozen daemon's guard SIGKILLs its
/// group at the kill deadline `t_s + L - M` (late by a timer's wake-up and the kill), a margin
/// `M` before the lease could expire on the server and anyone else could lead.
#[test]
fn a_frozen_leader_s_guard_kills_a_stubborn_child_at_the_kill_deadline() {
    let group = Group::shared();
    let stubborn = group.witness_child(&["--ignore-stop"], "");
    let (a, first, b) = group.leader_and_follower(None, DEFAULTS, &stubborn);
    guard_of_leader(&a);

    let frozen = mono_now();
    a.signal(Signal::SIGSTOP);
    let dead = lock_freed(&group.lock_path(), L + secs(5)).expect("the frozen leader's child died");
    let kill_at = a.latest_deadline().expect("a logged its deadline");
    assert!(kill_at <= frozen + L - M, "no renew after the freeze");
    eprintln!(
        "a frozen: its stubborn child dead {} after its kill deadline (bound 100 ms; the lease \
         expires M = {} after the deadline)",
        figure(dead.saturating_sub(kill_at)),
        figure(M)
    );
    assert!(dead + ms(1) >= kill_at, "killed before the kill deadline");
    assert!(dead <= kill_at + ms(100), "the kill came late");
    let b_start = group
        .wait_start_of("b", L + secs(10))
        .expect("b leads once the lease expired");
    assert!(b_start.t >= dead);
    assert_eq!(
        stop_signals(&group.history(), first.pid),
        1,
        "one stop signal"
    );
    a.signal(Signal::SIGCONT);
    a.assert_follows(secs(10));
    group.verdict(&[&a, &b]).assert_safe();
}

/// A leader cut off from storage comes to its stop deadline while its guard does: whichever
/// sends the stop signal first takes the stop token, and the child gets one SIGTERM (the
/// daemon's timers tick in milliseconds, the guard's in nanoseconds: without the token the
/// child got two, a millisecond apart). Then the group is SIGKILLed at its kill deadline.
#[test]
fn a_stop_deadline_that_daemon_and_guard_reach_together_sends_one_stop_signal() {
    let group = Group::shared();
    let proxy = FaultProxy::start(Azurite::shared().port);
    let stubborn = group.witness_child(&["--ignore-stop"], "");
    let (a, first, b) = group.leader_and_follower(Some(&proxy), DEFAULTS, &stubborn);
    let cut = mono_now();
    proxy.set(Fault::Blackhole);
    let dead =
        lock_freed(&group.lock_path(), L + secs(5)).expect("the cut-off leader's child died");
    let kill_at = a.latest_deadline().expect("a logged its deadline");
    let history = group.history();
    let signals: Vec<Duration> = history
        .of_kind("signal")
        .iter()
        .filter(|e| e.pid == first.pid)
        .map(|e| e.t)
        .collect();
    eprintln!(
        "cut off {} before its kill deadline: stop signals at {:?} from the stop deadline, the \
         child dead {} after the kill deadline",
        figure(kill_at - cut),
        signals
            .iter()
            .map(|t| figure(t.saturating_sub(kill_at - G)))
            .collect::<Vec<_>>(),
        figure(dead.saturating_sub(kill_at))
    );
    assert_eq!(signals.len(), 1, "one stop signal");
    assert!(dead <= kill_at + ms(100));
    group
        .wait_start_of("b", L + secs(10))
        .expect("b leads once the lease expired");
    proxy.set(Fault::Pass);
    group.verdict(&[&a, &b]).assert_safe();
}

/// SIGTSTP (Ctrl-Z at a terminal running `leasehold run`): the daemon steps down as on SIGTERM
/// (the child stopped, the lease handed to the follower), then stops itself; its child never
/// runs beside the next one. On SIGCONT it rejoins the line.
#[test]
fn ctrl_z_steps_down_then_stops_the_daemon_and_sigcont_rejoins() {
    let group = Group::shared();
    let (a, first, b) = group.leader_and_follower(None, DEFAULTS, "");
    let sent = mono_now();
    a.signal(Signal::SIGTSTP);
    let dead = lock_freed(&group.lock_path(), secs(5)).expect("a stops its child");
    let kill_at = a.latest_deadline().expect("a logged its deadline");
    let b_start = group
        .wait_start_of("b", secs(5))
        .expect("b leads after the handover");
    eprintln!(
        "SIGTSTP: the child dead {} after it ({} before its kill deadline), b's child started \
         {} after it (bound: a poll, {}, plus 1 s)",
        figure(dead - sent),
        figure(kill_at.saturating_sub(dead)),
        figure(b_start.t - sent),
        figure(POLL)
    );
    assert!(dead - sent <= G, "stopped as on SIGTERM");
    assert!(dead <= kill_at);
    assert!(b_start.t >= dead);
    assert!(
        b_start.t - sent <= POLL + secs(1),
        "handed over, not left to expire"
    );
    let pid = a.pid().as_raw() as u32;
    assert!(
        wait_until(secs(5), || state(pid).as_deref() == Some("T")),
        "a stopped itself after stepping down: {:?}\n{}",
        state(pid),
        a.log()
    );
    assert_eq!(
        stop_signals(&group.history(), first.pid),
        1,
        "one stop signal"
    );

    a.signal(Signal::SIGCONT);
    assert!(
        wait_until(secs(10), || a
            .log()
            .matches("joined the line of members")
            .count()
            >= 2),
        "a rejoins the line on SIGCONT:\n{}",
        a.log()
    );
    assert!(a.log().contains("rejoining the election"));
    let history = group.history();
    assert_eq!(history.starts().len(), 2, "b leads on");
    group.verdict(&[&a, &b]).assert_safe();
}

/// SIGCONT that comes while the daemon still steps down on SIGTSTP (`kill -CONT` from a
/// script, not a shell's `fg`, which waits for the stop): the stop is called off, since nothing
/// would continue it afterwards; the daemon rejoins at once.
#[test]
fn sigcont_during_the_step_down_calls_off_the_stop() {
    let group = Group::shared();
    // Its child takes a second to stop: the step-down outlasts the SIGCONT.
    let slow = group.witness_child(&["--linger", "1s"], "");
    let (a, _, b) = group.leader_and_follower(None, DEFAULTS, &slow);
    a.signal(Signal::SIGTSTP);
    std::thread::sleep(ms(200));
    a.signal(Signal::SIGCONT);
    assert!(
        a.wait_log("continued meanwhile, so not stopping", secs(10)),
        "{}",
        a.log()
    );
    assert!(a.wait_log("rejoining the election", secs(5)));
    let pid = a.pid().as_raw() as u32;
    assert_ne!(state(pid).as_deref(), Some("T"), "a is not stopped");
    group.verdict(&[&a, &b]).assert_safe();
}

/// A frozen leader SIGKILLed (an operator's `kill -9` of a hung daemon, the OOM killer): its
/// guard, which the pipe's closing wakes, kills the group at once, as for any dead daemon.
#[test]
fn a_frozen_leader_killed_takes_its_child_with_it_at_once() {
    let group = Group::shared();
    let (a, first, b) = group.leader_and_follower(None, DEFAULTS, "");
    a.signal(Signal::SIGSTOP);
    std::thread::sleep(ms(200));
    let killed = mono_now();
    a.signal(Signal::SIGKILL);
    let dead = lock_freed(&group.lock_path(), secs(5)).expect("the child died");
    eprintln!(
        "the frozen daemon SIGKILLed: its child dead {} later (bound 1 s)",
        figure(dead - killed)
    );
    assert!(dead - killed <= secs(1));
    assert!(
        wait_until(secs(1), || leasehold_testkit::procfs::group_members(
            first.pid
        )
        .is_empty()),
        "nothing left of the group"
    );
    group
        .wait_start_of("b", L + secs(10))
        .expect("b leads once the lease expired");
    group.verdict(&[&a, &b]).assert_safe();
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}
