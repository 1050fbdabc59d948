//! `leasehold run` against a real Azurite: real daemons, real signals, real children.
//!
//! Timing assertions print the measured figure next to the bound.

use leasehold_testkit::process::{assert_refused, assert_refused_within};
use leasehold_testkit::procfs::group_members;
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::time::Duration;

/// The design's defaults, with a 2 s stop timeout (2*4 + 2 + 1 <= 15).
const DEFAULTS: &str = "";

#[test]
fn one_daemon_leads_passes_its_epoch_and_shuts_down_in_order() {
    let group = Group::shared();
    // The credential comes from the standard variable; the child must not see it.
    let config = group.config("solo", DEFAULTS, "");
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace(
        &format!("connection_string = {:?}\n", group.connection_string),
        "",
    );
    std::fs::write(&config, text).unwrap();
    let mut daemon = Daemon::spawn(
        &config,
        "solo",
        &[],
        &[("AZURE_STORAGE_CONNECTION_STRING", &group.connection_string)],
    );

    let start = group.wait_first_start(secs(15)).expect("the child started");
    assert_eq!(start.identity, "solo", "LEASEHOLD_IDENTITY");
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(
        (now_ms - 60_000..=now_ms).contains(&start.epoch),
        "LEASEHOLD_EPOCH of the first leader of a blob: the wall clock in ms ({} vs now {now_ms})",
        start.epoch
    );
    assert_eq!(
        start.detail, "env_credentials=",
        "no AZURE_STORAGE_* variable reaches the child"
    );
    assert!(!group.lease_is_free(), "the leader holds the lease");

    // Signals for the child are forwarded to its process group.
    daemon.signal(Signal::SIGHUP);
    daemon.signal(Signal::SIGUSR1);
    group
        .wait_history(secs(5), |h| h.of_kind("signal").len() >= 2)
        .expect("SIGHUP and SIGUSR1 reached the child");

    daemon.signal(Signal::SIGTERM);
    let status = daemon.wait_exit(secs(10)).expect("the daemon exits");
    assert_eq!(status.code(), Some(0), "clean shutdown exits 0");
    let history = group.history();
    let stops = history.of_kind("stop");
    assert_eq!(stops.len(), 1, "{history:#?}");
    assert_eq!(stops[0].detail, "SIGTERM", "the child got the stop signal");
    // Released, not expired: another acquire succeeds at once.
    assert!(group.lease_is_free(), "the lease was released on shutdown");
    let log = daemon.log();
    let stopped = log.find("child stopped").expect("child stopped logged");
    let released = log.find("released leadership").expect("release logged");
    assert!(
        stopped < released,
        "the child was dead before the lease was released"
    );
}

#[test]
fn three_daemons_never_run_two_children_at_once() {
    let group = Group::shared();
    // Each child ends by itself after 1.5 s, so leadership keeps moving between the three.
    let child = group.witness_child(&["--exit-after", "1500ms"], "");
    let daemons: Vec<Daemon> = ["a", "b", "c"]
        .iter()
        .map(|id| group.start(id, DEFAULTS, &child))
        .collect();
    let began = std::time::Instant::now();
    let history = group
        .wait_history(secs(60), |h| {
            h.starts().len() >= 6 && began.elapsed() >= secs(10)
        })
        .expect("six terms within a minute");
    let leaders: std::collections::BTreeSet<&str> = history
        .starts()
        .iter()
        .map(|s| s.identity.as_str())
        .collect();
    eprintln!(
        "{} terms over {:?}, led by {leaders:?}",
        history.starts().len(),
        began.elapsed()
    );
    history.assert_safe();
    assert!(leaders.len() >= 2, "leadership moved: {leaders:?}");
    drop(daemons);
}

#[test]
fn graceful_handover_is_quick_and_the_epoch_grows() {
    let group = Group::shared();
    let first = group.start("first", DEFAULTS, "");
    let first_epoch = group.wait_first_start(secs(15)).expect("first leads").epoch;
    let second = group.start("second", DEFAULTS, "");
    second.assert_follows(secs(10));
    // Measured once second knows it is next in line (it joined after first listed, or first
    // would release rather than hand over: the fallback's case, not this one).
    assert!(
        second.wait_log("next in line", secs(10)),
        "{}",
        second.log()
    );
    // A signal for a child that does not exist yet is dropped, not saved for the next child.
    second.signal(Signal::SIGHUP);

    let sigterm = mono_now();
    first.signal(Signal::SIGTERM);
    let next = group
        .wait_start_of("second", secs(10))
        .expect("second leads");
    let handover = next.t - sigterm;
    let bound = secs(1) + secs(1); // acquire_interval + 1 s
    eprintln!("graceful handover: {handover:?} (bound {bound:?})");
    assert!(handover <= bound, "handover took {handover:?}");
    assert!(
        next.epoch > first_epoch,
        "epoch {} -> {}",
        first_epoch,
        next.epoch
    );
    assert!(second.wait_log(
        "dropping a signal received while no child was running",
        secs(2)
    ));
    let late = group.wait_history(Duration::from_millis(500), |h| {
        !h.of_kind("signal").is_empty()
    });
    assert!(
        late.is_none(),
        "the follower's SIGHUP reached its later child: {late:#?}"
    );
    group.history().assert_safe();
    drop((first, second));
}

#[test]
fn a_crashed_leader_leaves_no_process_behind_and_is_replaced() {
    let group = Group::shared();
    let child = group.witness_child(&["--grandchild"], "");
    let leader = group.start("doomed", DEFAULTS, &child);
    let child_pid = group.wait_first_start(secs(15)).expect("leads").pid;
    assert!(
        wait_until(secs(5), || group_members(child_pid).len() >= 2),
        "the child and its own child run in one group"
    );
    let heir = group.start("heir", DEFAULTS, "");
    heir.assert_follows(secs(10));

    let crash = mono_now();
    leader.signal(Signal::SIGKILL);
    let freed = lock_freed(&group.lock_path(), secs(5)).expect("the child's processes died");
    let gone = freed - crash;
    eprintln!("child and grandchild dead {gone:?} after SIGKILL of the daemon (bound 1s)");
    assert!(gone <= secs(1), "took {gone:?}");
    // The kernel frees the lock while closing the files of an exiting process, a moment before
    // the process leaves /proc.
    assert!(
        wait_until(secs(1), || group_members(child_pid).is_empty()),
        "nothing left in the child's group: {:?}",
        group_members(child_pid)
    );

    let taken = group
        .wait_start_of("heir", secs(25))
        .expect("the heir leads")
        .t
        - crash;
    let bound = secs(15) + secs(1) + secs(1); // duration + acquire_interval + 1 s
    eprintln!("failover after a crash: {taken:?} (bound {bound:?})");
    assert!(taken <= bound, "failover took {taken:?}");
    let history = group.history();
    history.assert_safe();
    drop((leader, heir));
}

#[test]
fn a_frozen_storage_stops_the_child_before_the_lease_can_expire() {
    let (azurite, group) = Group::on_new_azurite();
    let a = group.start("a", DEFAULTS, "");
    let b = group.start("b", DEFAULTS, "");
    let leader = group
        .wait_first_start(secs(15))
        .expect("someone leads")
        .identity;

    let freeze = mono_now();
    azurite.freeze();
    // t_s <= freeze, so the child must be dead by freeze + L - M.
    let bound = secs(15) - secs(1);
    let dead = lock_freed(&group.lock_path(), secs(20)).expect("the child stopped");
    let after = dead - freeze;
    eprintln!("child dead {after:?} after the storage froze (bound {bound:?})");
    assert!(
        after <= bound,
        "the child outlived the lease bound: {after:?}"
    );
    let stop = group.history();
    assert_eq!(
        stop.of_kind("stop").last().map(|e| e.identity.as_str()),
        Some(leader.as_str())
    );

    let thaw = mono_now();
    azurite.thaw();
    let next = group
        .wait_nth_start(2, secs(45))
        .expect("someone leads again after the storage thaws");
    eprintln!("led again {:?} after the thaw", next.t.saturating_sub(thaw));
    group.history().assert_safe();
    drop((a, b));
}

#[test]
fn on_exit_release_hands_leadership_on() {
    let group = Group::shared();
    let child = group.witness_child(&["--exit-after", "1s"], "on_exit = \"release\"");
    let daemons = ["a", "b"].map(|id| group.start(id, DEFAULTS, &child));
    let history = group
        .wait_history(secs(30), |h| {
            let ids: std::collections::BTreeSet<_> =
                h.starts().iter().map(|s| s.identity.clone()).collect();
            ids.len() == 2
        })
        .expect("both instances led in turn");
    history.assert_safe();
    drop(daemons);
}

#[test]
fn on_exit_restart_keeps_the_lease_and_the_epoch() {
    let group = Group::shared();
    let child = group.witness_child(&["--exit-after", "300ms"], "on_exit = \"restart\"");
    let d = group.start("keeper", DEFAULTS, &child);
    let history = group
        .wait_history(secs(20), |h| h.starts().len() >= 3)
        .expect("restarted twice");
    let starts = history.starts();
    assert!(
        starts.iter().all(|s| s.epoch == starts[0].epoch),
        "same epoch: {starts:#?}"
    );
    let pids: std::collections::BTreeSet<u32> = starts.iter().map(|s| s.pid).collect();
    assert_eq!(pids.len(), starts.len(), "a new process each time");
    assert!(!group.lease_is_free(), "the lease is kept across restarts");
    history.assert_safe();
    drop(d);
}

#[test]
fn on_exit_exit_ends_the_daemon_with_the_childs_code() {
    let group = Group::shared();
    let child = group.witness_child(
        &["--exit-after", "300ms", "--exit-code", "7"],
        "on_exit = \"exit\"",
    );
    let mut d = group.start("once", DEFAULTS, &child);
    let status = d.wait_exit(secs(15)).expect("the daemon exits");
    assert_eq!(status.code(), Some(7));
    assert!(group.lease_is_free(), "released before exiting");

    // A child killed by a signal: 128 + the signal, like a shell.
    let killed = "command = [\"sh\", \"-c\", \"kill -KILL $$\"]\non_exit = \"exit\"\n";
    let mut d = group.start("killed", DEFAULTS, killed);
    let status = d.wait_exit(secs(15)).expect("the daemon exits");
    assert_eq!(status.code(), Some(128 + 9));
}

#[test]
fn child_output_passes_through() {
    let group = Group::shared();
    let child = "command = [\"sh\", \"-c\", \"echo out-$LEASEHOLD_EPOCH; echo err-$LEASEHOLD_BLOB >&2; exec sleep 60\"]\n";
    let d = group.start("talker", DEFAULTS, child);
    assert!(d.wait_log("out-1", secs(15)), "{}", d.log());
    assert!(
        d.wait_log(&format!("err-{}", group.blob), secs(5)),
        "{}",
        d.log()
    );
}

/// One line on stderr, exit 2, never a panic, for each kind of bad input.
#[test]
fn bad_input_exits_2_with_one_line_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let good = "[storage]\nconnection_string = \"UseDevelopmentStorage=true\"\nblob = \"b\"\n[child]\ncommand = [\"true\"]\n";
    let cases: &[(&str, String, &str)] = &[
        (
            "unknown key",
            format!("{good}stop_timeoutt = \"1s\"\n"),
            "[child].stop_timeoutt",
        ),
        (
            "unknown section",
            format!("{good}[bogus]\nx = 1\n"),
            "bogus",
        ),
        (
            "duration 10s",
            format!("{good}[lease]\nduration = \"10s\"\n"),
            "[lease].duration",
        ),
        (
            "duration 61s",
            format!("{good}[lease]\nduration = \"61s\"\n"),
            "[lease].duration",
        ),
        (
            "timing rule",
            format!("{good}[lease]\nrenew_interval = \"5s\"\n"),
            "2*renew_interval + stop_timeout + safety_margin <= duration",
        ),
        (
            "empty command",
            good.replace("[\"true\"]", "[]"),
            "[child].command",
        ),
        (
            "unknown signal",
            format!("{good}stop_signal = \"SIGNOPE\"\n"),
            "[child].stop_signal",
        ),
        (
            "bad health check",
            format!("{good}[child.health]\nhttp = \"ftp://h/x\"\n"),
            "[child.health].http",
        ),
        (
            "unreadable toml",
            "[storage\nblob = ".to_owned(),
            "bad.toml",
        ),
        (
            "missing program",
            good.replace("[\"true\"]", "[\"/no/such/program\"]"),
            "/no/such/program",
        ),
    ];
    for (name, text, needle) in cases {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, text).unwrap();
        check_refused(name, &["run", "-c", path.to_str().unwrap()], needle);
        // `check --offline` refuses what `run` refuses. Two cases differ on purpose: the
        // command may come after `--`, and a missing program is a failed step (exit 1).
        if !matches!(*name, "empty command" | "missing program") {
            check_offline_refused(name, &path, needle);
        }
    }
    check_refused(
        "missing file",
        &["run", "-c", "/no/such/leasehold.toml"],
        "/no/such/leasehold.toml",
    );
    // Without a file, the one-liner's settings come from flags: the blob is the one required.
    check_refused("no config, no blob", &["run"], "--blob is missing");
}

/// Every duration key has a floor and a ceiling, each refused with one line naming the key
/// (exit 2 from `run` and from `check --offline`), never a panic from overflowing arithmetic:
/// the timing rule `2R + G + M <= L`, the follower's jittered poll, the health cooldown's default
/// `max(10s, 5 * acquire_interval)` and every `now + duration`.
#[test]
fn every_duration_key_is_bounded_with_one_line_naming_it() {
    const HUGE: &str = "500000000000y";
    let dir = tempfile::tempdir().unwrap();
    let good = "[storage]\nconnection_string = \"UseDevelopmentStorage=true\"\nblob = \"b\"\n";
    let health = "[child.health]\nhttp = \"http://127.0.0.1:9/health\"\n";
    // (table, key, whether a huge value and whether 0s are refused): every key is refused with
    // its name, `[table].key`.
    let cases = [
        ("lease", "duration", [true, true]),
        ("lease", "renew_interval", [true, true]),
        ("lease", "acquire_interval", [true, true]),
        ("lease", "safety_margin", [true, true]),
        // G = 0: the stop signal and the SIGKILL go together; allowed.
        ("child", "stop_timeout", [true, false]),
        ("child.health", "interval", [true, true]),
        ("child.health", "timeout", [true, true]),
        // The default: failures count from the first check.
        ("child.health", "start_period", [true, false]),
        ("child.health", "cooldown", [true, true]),
    ];
    let mut texts: Vec<(String, String, bool)> = Vec::new();
    for (table, key, refused) in cases {
        for (value, refused) in [HUGE, "0s"].into_iter().zip(refused) {
            let line = format!("{key} = {value:?}\n");
            let text = match table {
                "lease" => format!("{good}[child]\ncommand = [\"true\"]\n[lease]\n{line}"),
                "child" => format!("{good}[child]\ncommand = [\"true\"]\n{line}"),
                _ => format!("{good}[child]\ncommand = [\"true\"]\n{health}{line}"),
            };
            texts.push((text, format!("[{table}].{key}"), refused));
        }
    }
    texts.push((
        format!(
            "{good}[lease]\nacquire_interval = {HUGE:?}\n[child]\ncommand = [\"true\"]\n{health}"
        ),
        "[lease].acquire_interval".into(),
        true,
    ));
    // Every case is tried, and the failures reported together.
    let mut failed = Vec::new();
    for (i, (text, needle, refused)) in texts.iter().enumerate() {
        let path = dir.path().join(format!("durations-{i}.toml"));
        std::fs::write(&path, text).unwrap();
        let name = format!("{needle} in\n{text}");
        let case = std::panic::catch_unwind(|| {
            if *refused {
                check_refused_within(&name, &["run", "-c", path.to_str().unwrap()], needle);
                check_offline_refused(&name, &path, needle);
            } else {
                let out = leasehold(&["check", "--offline", "-c", path.to_str().unwrap()], &[]);
                assert_eq!(
                    out.status.code(),
                    Some(0),
                    "{name}: {}",
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        });
        if case.is_err() {
            failed.push(name);
        }
    }
    eprintln!(
        "{} of {} duration cases handled",
        texts.len() - failed.len(),
        texts.len()
    );
    assert!(
        failed.is_empty(),
        "{} cases failed: {failed:#?}",
        failed.len()
    );
}

/// Like [`check_refused`], for input the daemon might wrongly accept: a daemon still running
/// after 10 s is killed and the case fails.
fn check_refused_within(name: &str, args: &[&str], needle: &str) {
    assert_refused_within(name, leasehold_command(args), needle);
}

fn check_offline_refused(name: &str, config: &std::path::Path, needle: &str) {
    let out = leasehold(&["check", "--offline", "-c", config.to_str().unwrap()], &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(2),
        "check --offline, {name}: {stdout}"
    );
    assert!(
        stdout.starts_with("FAIL  config") && stdout.contains(needle),
        "check --offline, {name}: should fail on {needle:?}: {stdout}"
    );
}

fn check_refused(name: &str, args: &[&str], needle: &str) {
    assert_refused(name, &leasehold(args, &[]), needle);
}

#[test]
fn a_wrong_account_key_exits_3_without_printing_it() {
    let group = Group::shared();
    let wrong = "Zmlyc3Qtd3Jvbmcta2V5LXRoYXQtaXMtbG9uZy1lbm91Z2gtdG8tbG9vay1yZWFs";
    let config = group.config("intruder", DEFAULTS, "");
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(EMULATOR_KEY, wrong);
    std::fs::write(&config, text).unwrap();
    let mut d = Daemon::spawn(&config, "intruder", &[], &[]);
    let status = d.wait_exit(secs(15)).expect("exits");
    let log = d.log();
    assert_eq!(status.code(), Some(3), "{log}");
    assert!(log.contains("refused the credentials"), "{log}");
    assert!(
        !log.contains(wrong) && !log.contains(&wrong[..12]),
        "the key leaked: {log}"
    );
}

/// Issue 15: three leaderships, then the blob is deleted between two (a cleanup script, a
/// lifecycle rule, `az storage blob delete`) and re-created by the next daemon. The next epoch
/// must still be larger than every earlier one: a downstream that remembers the largest epoch
/// it saw would otherwise refuse every new leader, or accept a reused number.
#[test]
fn epochs_keep_growing_when_the_lease_blob_is_deleted_between_leaderships() {
    let group = Group::shared();
    for n in 1..=3 {
        let mut d = group.start(&format!("d{n}"), DEFAULTS, "");
        group
            .wait_history(secs(15), |h| h.starts().len() == n)
            .unwrap_or_else(|| panic!("leadership {n}"));
        d.stop(secs(10));
    }
    let admin = group.admin();
    admin.delete();
    assert!(!admin.exists(), "the blob is gone, and its epoch with it");

    let _after = group.start("after", DEFAULTS, "");
    let history = group
        .wait_history(secs(15), |h| h.starts().len() == 4)
        .expect("a leader on the re-created blob");
    let epochs: Vec<u64> = history.starts().iter().map(|s| s.epoch).collect();
    eprintln!(
        "epochs {:?}, then the blob was deleted, then {}",
        &epochs[..3],
        epochs[3]
    );
    assert!(
        epochs[..3].iter().all(|e| *e < epochs[3]),
        "an epoch after the deletion went back: {epochs:?}"
    );
    history.assert_safe();
}

/// Tampered metadata is refused, with a line naming the key, and the instance does not lead:
/// an epoch that is not a number, and one that cannot grow. Deleting the key (what that line
/// says to do) lets it lead again, with an epoch from the wall clock.
#[test]
fn tampered_epoch_metadata_keeps_the_instance_from_leading() {
    let group = Group::shared();
    let admin = group.admin();
    admin.create(&[("leasehold_epoch", "seven"), ("leasehold_holder", "w1")]);
    let a = group.start("a", DEFAULTS, "");
    assert!(
        a.wait_log(
            "blob metadata leasehold_epoch = \"seven\" is not valid; fix or delete that metadata key",
            secs(15)
        ),
        "{}",
        a.log()
    );
    admin.set_metadata(&[("leasehold_epoch", &u64::MAX.to_string())]);
    assert!(
        a.wait_log(
            &format!(
                "blob metadata leasehold_epoch = \"{}\" is not valid",
                u64::MAX
            ),
            secs(25)
        ),
        "{}",
        a.log()
    );
    assert!(group.history().starts().is_empty(), "no child ever started");

    let floor = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    admin.set_metadata(&[]);
    let epoch = group
        .wait_first_start(secs(25))
        .expect("a leads once the key is deleted")
        .epoch;
    eprintln!("after the key was deleted: epoch {epoch} (wall clock then {floor} ms)");
    assert!(epoch >= floor);
}

/// The per-instance keys (identity, priority, advertise, the HTTP listener) come from the file,
/// an environment variable or a flag, in that order of precedence (file < variable < flag), as
/// `check --offline` shows them; a bad value is named by where it came from.
#[test]
fn per_instance_keys_come_from_the_file_a_variable_or_a_flag_in_that_order() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shared.toml");
    std::fs::write(
        &config,
        "identity = \"from-file\"\n[storage]\nconnection_string = \"UseDevelopmentStorage=true\"\n\
         blob = \"b\"\n[election]\npriority = 1\nadvertise = \"http://127.0.0.1:1001\"\n\
         [http]\nlisten = \"127.0.0.1:1001\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let check = |flags: &[&str], env: &[(&str, &str)]| -> String {
        let mut args = vec!["check", "--offline", "-c", config];
        args.extend(flags);
        let out = leasehold(&args, env);
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{args:?} {env:?}: {stdout}{stderr}");
        let line = stdout
            .lines()
            .find(|l| l.starts_with("ok    config"))
            .unwrap_or_else(|| panic!("{stdout}"));
        let (_, shown) = line.split_once(": ").unwrap();
        shown.split(" in group").next().unwrap().to_owned()
    };
    let env = [
        ("LEASEHOLD_IDENTITY", "from-env"),
        ("LEASEHOLD_PRIORITY", "2"),
        ("LEASEHOLD_ADVERTISE", "http://127.0.0.1:1002"),
        ("LEASEHOLD_HTTP_LISTEN", "127.0.0.1:1002"),
    ];
    let flags = [
        "--identity",
        "from-flag",
        "--priority",
        "-3",
        "--advertise",
        "http://127.0.0.1:1003",
        "--http-listen",
        "127.0.0.1:1003",
    ];
    type Env<'a> = &'a [(&'a str, &'a str)];
    let cases: &[(&str, &[&str], Env, &str)] = &[
        (
            "the file",
            &[],
            &[],
            "from-file (priority 1, advertise http://127.0.0.1:1001, http 127.0.0.1:1001)",
        ),
        (
            "variables over the file",
            &[],
            &env,
            "from-env (priority 2, advertise http://127.0.0.1:1002, http 127.0.0.1:1002)",
        ),
        (
            "flags over variables",
            &flags,
            &env,
            "from-flag (priority -3, advertise http://127.0.0.1:1003, http 127.0.0.1:1003)",
        ),
        (
            "each key on its own",
            &["--priority", "7"],
            &[("LEASEHOLD_IDENTITY", "from-env")],
            "from-env (priority 7, advertise http://127.0.0.1:1001, http 127.0.0.1:1001)",
        ),
    ];
    for (name, flags, env, expected) in cases {
        let shown = check(flags, env);
        eprintln!("{name}: {shown}");
        assert_eq!(shown, *expected, "{name}");
    }

    // A bad value is named by what gave it: the variable, the flag, or the file's key.
    let refused: &[(&[&str], Env, &str)] = &[
        (
            &[],
            &[("LEASEHOLD_ADVERTISE", "ftp://x:1")],
            "LEASEHOLD_ADVERTISE=\"ftp://x:1\": must be an http:// or https:// URL",
        ),
        (
            &["--advertise", "ftp://x:1"],
            &[("LEASEHOLD_ADVERTISE", "http://127.0.0.1:1")],
            "--advertise \"ftp://x:1\": must be an http:// or https:// URL",
        ),
        (
            &[],
            &[("LEASEHOLD_PRIORITY", "high")],
            "LEASEHOLD_PRIORITY=\"high\": must be a whole number",
        ),
        (
            &["--priority", "high"],
            &[],
            "invalid value 'high' for '--priority <N>': must be a whole number",
        ),
        (
            &[],
            &[("LEASEHOLD_HTTP_LISTEN", "nowhere")],
            "LEASEHOLD_HTTP_LISTEN=\"nowhere\": must be an IP address and a port",
        ),
        (
            &[],
            &[("LEASEHOLD_IDENTITY", "tab\there")],
            "LEASEHOLD_IDENTITY=\"tab\\there\": must be 1-256 printable ASCII characters",
        ),
    ];
    for (flags, env, needle) in refused {
        let mut args = vec!["check", "--offline", "-c", config];
        args.extend(*flags);
        let out = leasehold(&args, env);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(out.status.code(), Some(2), "{flags:?} {env:?}: {text}");
        assert!(text.contains(needle), "{flags:?} {env:?}: {text}");
    }
}

/// One config file for a whole group, each instance set apart by variables alone, as a shared
/// ConfigMap or Compose file does: the members show the priority and wake-up URL each was
/// given, the HTTP endpoint listens where its variable says, the instance of higher priority
/// leads, and the child sees none of the variables leasehold read its own settings from.
#[test]
fn one_shared_config_serves_instances_set_apart_by_variables() {
    let group = Group::shared();
    let seen = group.dir().join("child-env");
    let child = format!(
        "command = [\"sh\", \"-c\", \"env > {}; exec sleep 600\"]",
        seen.display()
    );
    let config = group.config("shared", DEFAULTS, &child);
    let text = std::fs::read_to_string(&config).unwrap();
    let text: String = text
        .lines()
        .filter(|l| !l.starts_with("identity"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&config, text).unwrap();
    let (addr_low, addr_high) = (free_addr(), free_addr());
    let start = |identity: &str, priority: &str, addr: &str| {
        Daemon::launch(&config, identity)
            .envs(&[
                ("LEASEHOLD_IDENTITY", identity),
                ("LEASEHOLD_PRIORITY", priority),
                ("LEASEHOLD_ADVERTISE", &format!("http://{addr}")),
                ("LEASEHOLD_HTTP_LISTEN", addr),
                ("LEASEHOLD_CONFIG", config.to_str().unwrap()),
            ])
            .spawn()
    };
    let low = start("low", "1", &addr_low);
    assert!(
        low.wait_log("acquired leadership", secs(15)),
        "{}",
        low.log()
    );
    let high = start("high", "5", &addr_high);
    // Preemption (after the default 30 s) is not what this test is about: the line is.
    let listed = wait_until_some(secs(20), || {
        let out = leasehold(&["status", "--json", "-c", config.to_str().unwrap()], &[]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let members = report["members"].as_array()?.clone();
        (members.len() == 2).then_some(members)
    })
    .expect("both members listed");
    let shown: Vec<(String, i64, String)> = listed
        .iter()
        .map(|m| {
            (
                m["identity"].as_str().unwrap().to_owned(),
                m["priority"].as_i64().unwrap(),
                m["advertise"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    eprintln!("members: {shown:?}");
    assert_eq!(
        shown,
        [
            ("high".to_owned(), 5, format!("http://{addr_high}")),
            ("low".to_owned(), 1, format!("http://{addr_low}")),
        ],
        "in succession order, each with what its variables gave"
    );
    for addr in [&addr_low, &addr_high] {
        assert_eq!(
            leasehold_testkit::http::get(addr, "/healthz").map(|r| r.0),
            Some(200),
            "listening on {addr} (LEASEHOLD_HTTP_LISTEN)"
        );
    }
    let env = wait_until_some(secs(5), || {
        std::fs::read_to_string(&seen)
            .ok()
            .filter(|t| t.contains("LEASEHOLD_EPOCH"))
    })
    .expect("the child wrote its environment");
    assert!(env.lines().any(|l| l == "LEASEHOLD_IDENTITY=low"), "{env}");
    for own in [
        "LEASEHOLD_PRIORITY",
        "LEASEHOLD_ADVERTISE",
        "LEASEHOLD_HTTP_LISTEN",
        "LEASEHOLD_CONFIG",
    ] {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{own}="))),
            "the child must not see {own}: {env}"
        );
    }
    drop((low, high));
}

/// systemd's `Type=notify`, with a real unix datagram socket as `NOTIFY_SOCKET`: no `READY=1`
/// while storage cannot be reached (the daemon is not in the group yet), `READY=1` once it has
/// joined, `WATCHDOG=1` about three times per `WATCHDOG_USEC` while its loop lives, `STOPPING=1`
/// on SIGTERM; the child sees none of the service manager's variables.
#[test]
fn systemd_hears_ready_once_in_the_group_watchdog_pings_and_stopping() {
    use std::os::unix::net::UnixDatagram;
    use std::time::Instant;
    let (azurite, group) = Group::on_new_azurite();
    let socket_path = group.dir().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    let (tx, heard) = std::sync::mpsc::channel::<(Instant, String)>();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = socket.recv(&mut buf) {
            let text = String::from_utf8_lossy(&buf[..n]).into_owned();
            if tx.send((Instant::now(), text)).is_err() {
                break;
            }
        }
    });
    let seen = group.dir().join("child-env");
    let child = format!(
        "command = [\"sh\", \"-c\", \"env > {}; exec sleep 600\"]",
        seen.display()
    );
    azurite.freeze();
    let mut a = group
        .launch("a", DEFAULTS, &child)
        .env("NOTIFY_SOCKET", socket_path.to_str().unwrap())
        .env("WATCHDOG_USEC", "1500000")
        .spawn();
    let next = |within: Duration| heard.recv_timeout(within).ok();
    // Storage frozen: the daemon cannot join, so it must not say it is ready.
    let frozen_until = Instant::now() + secs(3);
    let mut before = Vec::new();
    while let Some((_, text)) = next(frozen_until.saturating_duration_since(Instant::now())) {
        before.push(text);
    }
    eprintln!("while storage was frozen: {before:?}");
    assert!(!before.iter().any(|t| t.contains("READY=1")), "{before:?}");
    let thawed = Instant::now();
    azurite.thaw();
    let ready = wait_until_some(secs(20), || {
        let (at, text) = next(Duration::from_millis(100))?;
        text.contains("READY=1").then_some((at, text))
    })
    .expect("READY=1 once in the group");
    eprintln!(
        "READY=1 {:?} after storage came back: {:?}",
        ready.0 - thawed,
        ready.1
    );
    assert!(
        a.wait_log("joined the line of members", secs(2)),
        "{}",
        a.log()
    );

    // Pings: three per 1.5 s period while the loop lives.
    let counted = Instant::now();
    let mut pings = 0;
    while counted.elapsed() < secs(3) {
        if let Some((_, text)) = next(Duration::from_millis(100)) {
            pings += text.lines().filter(|l| *l == "WATCHDOG=1").count();
        }
    }
    eprintln!("WATCHDOG=1 x {pings} in 3 s (WATCHDOG_USEC 1.5 s: about 6)");
    assert!((4..=8).contains(&pings), "{pings}");

    let env = wait_until_some(secs(15), || {
        std::fs::read_to_string(&seen)
            .ok()
            .filter(|t| t.contains("LEASEHOLD_EPOCH"))
    })
    .expect("the child ran and wrote its environment");
    for variable in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{variable}="))),
            "the child must not see {variable}"
        );
    }

    a.signal(Signal::SIGTERM);
    let stopping = wait_until_some(secs(5), || {
        let (_, text) = next(Duration::from_millis(100))?;
        text.contains("STOPPING=1").then_some(text)
    });
    assert!(stopping.is_some(), "STOPPING=1 on SIGTERM");
    assert_eq!(a.wait_exit(secs(15)).and_then(|s| s.code()), Some(0));
}
