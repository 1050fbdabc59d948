//! `leasehold run` without a config file, `--try` and `--timeout`, against a real Azurite with
//! the real binary: the one-liner leads and runs its command, `--try` runs it on exactly one
//! instance of several, `--timeout` gives up on time, each documented exit code, and one line
//! naming the flag for each bad flag value.
//!
//! Timing assertions print the measured figure next to the bound.

use leasehold_testkit::azurite::connection_string;
use leasehold_testkit::process::assert_refused_within;
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

/// The conflict exit code: another instance holds the lease.
const NOT_ELECTED: i32 = 75;

/// How long a one-shot that ought to lead at once may take before it is killed and the test
/// fails (rather than waiting for storage for ever).
const ONE_SHOT: Duration = Duration::from_secs(30);

/// `--blob BLOB [--container C] EXTRA... -- WITNESS...` for `group` (the container only when it
/// is not the default one).
fn one_liner_args(group: &Group, extra: &[&str], witness: &[&str]) -> Vec<String> {
    let mut args = vec!["--blob".to_owned(), group.blob.clone()];
    if group.container != "leasehold" {
        args.extend(["--container".to_owned(), group.container.clone()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args.push("--".into());
    args.extend(group.witness_argv(witness));
    args
}

/// A one-liner for `identity` in `group`, its credential from the standard variable.
fn one_liner(group: &Group, identity: &str, extra: &[&str], witness: &[&str]) -> Launch {
    let mut extra = extra.to_vec();
    extra.extend(["--identity", identity]);
    let args = one_liner_args(group, &extra, witness);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Daemon::one_liner(identity)
        .args(&args)
        .env("AZURE_STORAGE_CONNECTION_STRING", &group.connection_string)
}

/// Waits until one of `daemons` exits: which, its status, and when.
fn first_exit(daemons: &mut [&mut Daemon], timeout: Duration) -> (usize, ExitStatus, Instant) {
    wait_until_some(timeout, || {
        daemons.iter_mut().enumerate().find_map(|(i, d)| {
            d.wait_exit(Duration::ZERO)
                .map(|status| (i, status, Instant::now()))
        })
    })
    .expect("one of them exited")
}

#[test]
fn the_one_liner_with_only_a_blob_and_the_standard_variable_leads_and_runs_its_command() {
    let mut group = Group::shared();
    group.container = "leasehold".into(); // the default: no --container
    let args = one_liner_args(&group, &[], &["--exit-after", "1s", "--exit-code", "7"]);
    assert_eq!(&args[..2], ["--blob", group.blob.as_str()], "{args:?}");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let launched = Instant::now();
    let mut d = Daemon::one_liner("solo")
        .args(&args)
        .env("AZURE_STORAGE_CONNECTION_STRING", &group.connection_string)
        .spawn();

    let start = group
        .wait_first_start(secs(15))
        .unwrap_or_else(|| panic!("the command did not start:\n{}", d.log()));
    println!(
        "the one-liner ran its command {} after it was started",
        figure(launched.elapsed())
    );
    assert_eq!(
        start.detail, "env_credentials=",
        "no AZURE_STORAGE_* variable reaches the command"
    );
    assert!(start.epoch > 0, "LEASEHOLD_EPOCH");
    let status = d.wait_exit(secs(15)).expect("the one-liner exits");
    assert_eq!(status.code(), Some(7), "the command's code:\n{}", d.log());
    let history = group.history();
    assert_eq!(history.starts().len(), 1, "once: {history:#?}");
    assert_eq!(history.of_kind("exit").len(), 1, "it ended by itself");
    assert!(group.lease_is_free(), "released before exiting");
    let log = d.log();
    assert!(log.contains("acquired leadership") && log.contains("released leadership"));

    // The other commands work without a file too.
    let env = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        group.connection_string.as_str(),
    )];
    let out = leasehold(&["status", "--json", "--blob", &group.blob], &env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    let status: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(status["last_holder"], start.identity.as_str(), "{status}");
    assert_eq!(status["epoch"], start.epoch, "{status}");
    let out = leasehold(&["check", "--blob", &group.blob], &env);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("the command line: "), "{stdout}");
}

/// Two instances started together with `--try`: one runs the command, the other exits with the
/// conflict code at once, printing nothing (cron mails what a job prints). Three rounds.
#[test]
fn try_on_two_instances_at_once_runs_the_command_on_exactly_one() {
    const BOUND: Duration = Duration::from_secs(2);
    let group = Group::shared();
    let mut losers = Vec::new();
    for round in 1..=3 {
        let before = group.history().starts().len();
        let witness = ["--exit-after", "3s", "--exit-code", "0"];
        let launch = |name: &str| {
            one_liner(&group, name, &["--try"], &witness)
                .env("RUST_LOG", "warn") // the one-shot's default, stated
                .spawn()
        };
        let launched = Instant::now();
        let (mut a, mut b) = (launch("a"), launch("b"));
        let (first, status, at) = first_exit(&mut [&mut a, &mut b], secs(20));
        let (loser, mut winner) = if first == 0 { (a, b) } else { (b, a) };
        let took = at - launched;
        println!(
            "round {round}: {} exited {} after both were started (bound {}), the other ran the command",
            loser.identity,
            figure(took),
            figure(BOUND)
        );
        assert_eq!(
            status.code(),
            Some(NOT_ELECTED),
            "{}:\n{}",
            loser.identity,
            loser.log()
        );
        assert!(took < BOUND, "{}", figure(took));
        assert_eq!(loser.log(), "", "the loser printed nothing");
        let status = winner.wait_exit(secs(20)).expect("the winner exits");
        assert_eq!(status.code(), Some(0), "{}", winner.log());
        let history = group.history();
        let starts = &history.starts()[before..];
        assert_eq!(starts.len(), 1, "exactly one ran it: {history:#?}");
        assert_eq!(starts[0].identity, winner.identity);
        assert!(
            history.lives().iter().all(|l| !l.end.is_empty()),
            "the command is gone"
        );
        losers.push(took);
    }
    group.history().assert_safe();
    assert!(group.lease_is_free(), "the winner released the lease");
    println!(
        "losers exited after {}",
        losers
            .iter()
            .map(|d| figure(*d))
            .collect::<Vec<_>>()
            .join(", ")
    );
}

#[test]
fn timeout_while_another_leads_exits_with_the_conflict_code_after_about_the_timeout() {
    const TIMEOUT: Duration = Duration::from_secs(2);
    // The campaign ends at the first pause after the timeout; an attempt in flight then (a few
    // milliseconds against Azurite) is finished, and the process has to start and exit.
    const SLACK: Duration = Duration::from_secs(1);
    let group = Group::shared();
    // The leader: a one-liner without --try or --timeout, its command running until stopped.
    let mut leader = one_liner(&group, "leader", &[], &[]).spawn();
    group
        .wait_first_start(secs(15))
        .unwrap_or_else(|| panic!("no leader:\n{}", leader.log()));

    let launched = Instant::now();
    let mut waiter = one_liner(&group, "waiter", &["--timeout", "2s"], &[]).spawn();
    let status = waiter.wait_exit(secs(20)).expect("the waiter gives up");
    let took = launched.elapsed();
    println!(
        "--timeout 2s exited {} after it was started (bounds {} to {})",
        figure(took),
        figure(TIMEOUT),
        figure(TIMEOUT + SLACK)
    );
    assert_eq!(status.code(), Some(NOT_ELECTED), "{}", waiter.log());
    assert!(waiter.log().contains("following"), "it campaigned");
    assert!(
        took >= TIMEOUT && took <= TIMEOUT + SLACK,
        "{}",
        figure(took)
    );
    assert_eq!(
        group.history().starts().len(),
        1,
        "only the leader's command"
    );

    // A lease freed within the timeout is taken, and the command runs once.
    let mut patient = one_liner(
        &group,
        "patient",
        &["--timeout", "30s"],
        &["--exit-after", "300ms", "--exit-code", "3"],
    )
    .spawn();
    patient.assert_follows(secs(10));
    let stopped = mono_now();
    leader.signal(Signal::SIGTERM);
    let status = leader.wait_exit(secs(15)).expect("the leader stops");
    assert_eq!(
        status.code(),
        Some(128 + 15),
        "a one-shot stopped by SIGTERM: 128 + 15, like a shell\n{}",
        leader.log()
    );
    let started = group
        .wait_start_of("patient", secs(10))
        .unwrap_or_else(|| panic!("the patient one did not lead:\n{}", patient.log()));
    println!(
        "the patient one ran its command {} after the leader was stopped",
        figure(started.t - stopped)
    );
    let status = patient.wait_exit(secs(15)).expect("the patient one exits");
    assert_eq!(status.code(), Some(3), "{}", patient.log());
    let history = group.history();
    assert_eq!(history.of_kind("stop")[0].identity, "leader");
    history.assert_safe();
    assert!(group.lease_is_free());
}

/// The codes a one-shot exits with when its command did not run or did not finish.
#[test]
fn a_one_shot_exits_with_a_documented_code_when_its_command_cannot_run_or_finish() {
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let run = |extra: &[&str], env: &[(&str, &str)]| {
        let args = one_liner_args(&group, extra, &[]);
        let args: Vec<&str> = std::iter::once("run")
            .chain(args.iter().map(String::as_str))
            .collect();
        let launched = Instant::now();
        let (out, ended) = output_within(leasehold_with_env(&args, env), secs(20));
        assert!(ended, "{args:?} did not end");
        (out, launched.elapsed())
    };

    // Storage that cannot be reached: 69, the command not run; --try tries once.
    let (account, key) = azurite.account();
    let endpoint = format!("http://127.0.0.1:{}/{account}", free_port());
    let nowhere = connection_string(account, key, &endpoint);
    let env = [("AZURE_STORAGE_CONNECTION_STRING", nowhere.as_str())];
    let (out, took) = run(&["--try"], &env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "--try, storage unreachable: exit {:?} after {}",
        out.status.code(),
        figure(took)
    );
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    // The last line, in every command's format, names where storage was looked for.
    let last = stderr.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("leasehold: error: ")
            && last.contains(&endpoint)
            && last.contains("the command did not run"),
        "{stderr}"
    );
    assert!(took < secs(5), "{}", figure(took));
    let (out, took) = run(&["--timeout", "2s"], &env);
    println!(
        "--timeout 2s, storage unreachable: exit {:?} after {}",
        out.status.code(),
        figure(took)
    );
    assert_eq!(
        out.status.code(),
        Some(69),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(took >= secs(2) && took < secs(4), "{}", figure(took));

    // Too few open files to start a command: it never campaigned, which is no conflict with
    // another instance: 69 and the reason, not 75 and "another instance holds the lease".
    let env = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        group.connection_string.as_str(),
    )];
    let args = one_liner_args(&group, &["--try"], &[]);
    let args: Vec<&str> = std::iter::once("run")
        .chain(args.iter().map(String::as_str))
        .collect();
    let mut short = leasehold_with_env(&args, &env);
    // SAFETY: between fork and exec only setrlimit, which is async-signal-safe.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut short, || {
            nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, 40, 40)
                .map_err(std::io::Error::from)
        });
    }
    let (out, ended) = output_within(short, secs(20));
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "--try with 40 open files at most: exit {:?}",
        out.status.code()
    );
    assert!(ended, "{stderr}");
    assert_eq!(out.status.code(), Some(69), "{stderr}");
    assert!(stderr.contains("too few free file descriptors"), "{stderr}");
    assert!(!stderr.contains("another instance holds"), "{stderr}");
    assert!(group.history().starts().is_empty(), "no command ran");

    // Refused credentials: 3, as for the daemon.
    let wrong = connection_string(
        account,
        "Zmlyc3Qtd3Jvbmcta2V5LXRoYXQtaXMtbG9uZy1lbm91Z2gtdG8tbG9vay1yZWFs",
        &azurite.endpoint(),
    );
    let (out, _) = run(&["--try"], &[("AZURE_STORAGE_CONNECTION_STRING", &wrong)]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    let last = stderr.lines().last().unwrap_or_default();
    assert!(last.starts_with("leasehold: error: "), "{stderr}");
    assert!(!stderr.contains("Zmlyc3Qtd3Jvbmc"), "{stderr}");
    assert!(group.history().starts().is_empty(), "no command ran");

    // Leadership lost while the command runs (an admin breaks the lease): the command is
    // stopped, and the one-shot exits 4, not with the command's code, and not 75.
    let mut d = one_liner(&group, "broken", &["--try"], &[]).spawn();
    group
        .wait_first_start(secs(15))
        .unwrap_or_else(|| panic!("no start:\n{}", d.log()));
    group.admin().break_lease(Duration::ZERO).expect("break");
    let status = d.wait_exit(secs(15)).expect("the one-shot exits");
    assert_eq!(status.code(), Some(4), "{}", d.log());
    let log = d.log();
    assert!(
        log.lines()
            .any(|l| l.starts_with("leasehold: error: ") && l.contains("stopped")),
        "{log}"
    );
    let history = group.history();
    assert_eq!(
        history.of_kind("stop").len(),
        1,
        "the command got its stop signal"
    );
    assert_eq!(history.starts().len(), 1, "and was not run again");
}

/// Every bad flag value: exit 2, one line naming the flag (not the TOML key), never a panic,
/// never reaching storage.
#[test]
fn a_bad_flag_value_exits_2_with_one_line_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let unreadable = dir.path().join("no-such-file");
    let unreadable = unreadable.to_str().unwrap();
    let key_file = dir.path().join("key");
    std::fs::write(&key_file, EMULATOR_KEY).unwrap();
    let key_file = key_file.to_str().unwrap();
    let config = dir.path().join("leasehold.toml");
    std::fs::write(
        &config,
        "[storage]\nconnection_string = \"UseDevelopmentStorage=true\"\nblob = \"b\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    // (flags, what the one line must say); each runs as `run [--blob b] FLAGS -- true`.
    let cases: &[(&[&str], &str)] = &[
        (&["--lease-duration", "banana"], "--lease-duration <DUR>"),
        (
            &["--lease-duration", "10s"],
            "--lease-duration 10s: must be between 15s and 60s",
        ),
        (
            &["--lease-duration", "61s"],
            "--lease-duration 1m1s: must be between 15s and 60s",
        ),
        (
            &["--lease-duration", "15500ms"],
            "--lease-duration 15s500ms: must be a whole number",
        ),
        (
            &["--renew-interval", "20s"],
            "--renew-interval 20s: must be at least 1s and at most the lease duration (15s)",
        ),
        (
            &["--renew-interval", "500ms"],
            "--renew-interval 500ms: must be at least 1s",
        ),
        (
            &["--renew-interval", "6s"],
            "--renew-interval 6s: timing rule 2*renew_interval + stop_timeout + safety_margin <= duration is broken (2*6s + 5s + 1s = 18s > 15s)",
        ),
        (
            &["--acquire-interval", "50ms"],
            "--acquire-interval 50ms: must be between 100ms and 1h",
        ),
        (
            &["--acquire-interval", "2h"],
            "--acquire-interval 2h: must be between 100ms and 1h",
        ),
        (
            &["--acquire-interval", "500000000000y"],
            "--acquire-interval",
        ),
        (
            &["--safety-margin", "0s"],
            "--safety-margin 0s: must be at least 500ms",
        ),
        (
            &["--safety-margin", "16s"],
            "--safety-margin 16s: must be at least 500ms",
        ),
        (
            &["--stop-timeout", "16s"],
            "--stop-timeout 16s: must be at most the lease duration (15s)",
        ),
        (&["--stop-timeout", "8s"], "--stop-timeout 8s: timing rule"),
        (
            &["--lease-duration", "20s", "--renew-interval", "9s"],
            "--lease-duration 20s --renew-interval 9s: timing rule",
        ),
        (&["--stop-timeout", "soon"], "--stop-timeout <DUR>"),
        (&["--timeout", "banana"], "--timeout <DUR>"),
        (&["--timeout", "8days"], "--timeout <DUR>"),
        (&["--try", "--timeout", "1s"], "--try"),
        (&["--try", "--on-exit", "release"], "--on-exit release"),
        (&["--on-exit", "sometimes"], "--on-exit <WHAT>"),
        (&["--conflict-exit-code", "256"], "--conflict-exit-code <N>"),
        (&["--credential", "password"], "--credential <KIND>"),
        (&["--blob", "a//b"], "--blob \"a//b\""),
        (&["--container", "No_Caps"], "--container \"No_Caps\""),
        (&["--identity", ""], "--identity \"\""),
        (&["--http-listen", "nowhere"], "--http-listen <ADDR>"),
        // clap's own hint is kept in the one line.
        (
            &["--timout", "1s"],
            "unexpected argument '--timout' found; a similar argument exists: '--timeout'",
        ),
        (
            &["--connection-string-file", unreadable],
            "--connection-string-file",
        ),
        (
            &["--access-key-file", key_file],
            "--access-key-file needs the storage account: set --account",
        ),
        (
            &[
                "--account",
                "acct",
                "--access-key-file",
                key_file,
                "--endpoint",
                "https://x.example/a?sig=1",
            ],
            "--endpoint \"https://x.example/a?<query>\": must not carry a query string",
        ),
        (
            &["-c", config, "--renew-interval", "20s"],
            "--renew-interval 20s: must be at least 1s and at most the lease duration (15s)",
        ),
    ];
    let mut failed = Vec::new();
    for (flags, needle) in cases {
        let mut args = vec!["run"];
        if !flags.contains(&"--blob") {
            args.extend(["--blob", "b"]);
        }
        args.extend(*flags);
        args.extend(["--", "true"]);
        // Credentials from the standard variable, unless the case gives its own.
        let env: &[(&str, &str)] = if flags.iter().any(|f| f.contains("-file") || *f == "-c") {
            &[]
        } else {
            &[(
                "AZURE_STORAGE_CONNECTION_STRING",
                "UseDevelopmentStorage=true",
            )]
        };
        let name = flags.join(" ");
        if std::panic::catch_unwind(|| refused(&name, &args, env, needle)).is_err() {
            failed.push(name);
        }
    }
    // Without --blob, or without a command.
    let env = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        "UseDevelopmentStorage=true",
    )];
    let more: &[(&[&str], &str)] = &[
        (
            &["run", "--", "true"],
            "--blob is missing: name the lease blob; one blob per leadership group, e.g. --blob my-service",
        ),
        (
            &["run", "--blob", "b"],
            "COMMAND (after --) is missing: give the command to run after `--`",
        ),
        (
            &["run", "--blob", "b", "--", "/no/such/program"],
            "COMMAND (after --): program \"/no/such/program\" is not an executable file",
        ),
    ];
    for (args, needle) in more {
        let name = args.join(" ");
        if std::panic::catch_unwind(|| refused(&name, args, &env, needle)).is_err() {
            failed.push(name);
        }
    }
    // No credential at all: the one line names the variables and the flags.
    if std::panic::catch_unwind(|| {
        refused(
            "no credential",
            &["run", "--blob", "b", "--", "true"],
            &[],
            "--connection-string-file",
        )
    })
    .is_err()
    {
        failed.push("no credential".into());
    }
    println!(
        "{} of {} bad flag values refused with one line naming the flag",
        cases.len() + more.len() + 1 - failed.len(),
        cases.len() + more.len() + 1
    );
    assert!(
        failed.is_empty(),
        "{} cases failed: {failed:#?}",
        failed.len()
    );
}

/// Refused within 10 s ([`assert_refused_within`]); a flag's value names the flag, not the TOML
/// key.
fn refused(name: &str, args: &[&str], env: &[(&str, &str)], needle: &str) {
    let stderr = assert_refused_within(name, leasehold_with_env(args, env), needle);
    assert!(
        !stderr.contains("[lease]") && !stderr.contains("[child]"),
        "{name}: {stderr}"
    );
}

/// `leasehold ARGS` with `env` added, not yet run.
fn leasehold_with_env(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut command = leasehold_command(args);
    command.envs(env.iter().copied());
    command
}

/// `leasehold completions SHELL` and `leasehold man [SUBCOMMAND]` come from the command line's
/// definitions: every flag of `run` is offered, the internal `__guard` is not, the bash script
/// parses, the man pages are roff.
#[test]
fn completions_and_man_pages_are_generated_from_the_command_line() {
    let flags = [
        "--try",
        "--timeout",
        "--conflict-exit-code",
        "--lease-duration",
        "--blob",
        "--shell",
        "--pass-stdin",
        "--priority",
        "--advertise",
    ];
    for shell in ["bash", "zsh", "fish"] {
        let out = leasehold(&["completions", shell], &[]);
        let script = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{shell}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // fish names long flags without their dashes (`-l lease-duration`).
        for flag in flags {
            assert!(
                script.contains(flag.trim_start_matches('-')),
                "{shell}: {flag}"
            );
        }
        assert!(
            !script.contains("__guard"),
            "{shell} offers the internal __guard"
        );
        println!("{shell}: {} lines", script.lines().count());
    }
    let dir = tempfile::tempdir().unwrap();
    let bash = dir.path().join("leasehold.bash");
    std::fs::write(&bash, leasehold(&["completions", "bash"], &[]).stdout).unwrap();
    let parsed = std::process::Command::new("bash")
        .arg("-n")
        .arg(&bash)
        .output()
        .unwrap();
    assert!(
        parsed.status.success(),
        "{}",
        String::from_utf8_lossy(&parsed.stderr)
    );

    let out = leasehold(&["man"], &[]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    assert!(page.contains(".TH leasehold 1"), "{page}");
    assert!(
        page.contains(".SH SYNOPSIS") && page.contains("completions"),
        "{page}"
    );
    let out = leasehold(&["man", "run"], &[]);
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.contains(".TH leasehold-run 1"), "{page}");
    for flag in flags {
        assert!(page.contains(&flag.replace('-', "\\-")), "man run: {flag}");
    }
    let out = leasehold(&["man", "nope"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
}

/// `--shell` runs the command with `/bin/sh -c` (a pipe, and the child's own variables expanded
/// by that shell); `--pass-stdin` hands it this process's standard input (a pipe here); a
/// terminal as standard input is refused with one line, before anything runs.
#[test]
fn shell_and_pass_stdin_reach_the_command() {
    let group = Group::shared();
    let env = [(
        "AZURE_STORAGE_CONNECTION_STRING",
        group.connection_string.as_str(),
    )];
    let blob = group.blob.as_str();
    let container = group.container.as_str();

    let out = leasehold_with_env(
        &[
            "run",
            "--blob",
            blob,
            "--container",
            container,
            "--shell",
            "--",
            "echo epoch $LEASEHOLD_EPOCH of $LEASEHOLD_BLOB | tr a-z A-Z",
        ],
        &env,
    );
    let (out, ended) = output_within(out, ONE_SHOT);
    assert!(ended, "--shell: still running after {ONE_SHOT:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout.trim();
    eprintln!("--shell: {line}");
    let expected_prefix = "EPOCH ";
    assert!(
        line.starts_with(expected_prefix)
            && line.ends_with(&format!(" OF {}", blob.to_uppercase())),
        "{line}"
    );
    assert!(
        line[expected_prefix.len()..]
            .split(' ')
            .next()
            .unwrap()
            .parse::<u64>()
            .is_ok(),
        "the shell expanded the child's own LEASEHOLD_EPOCH: {line}"
    );

    let run = leasehold_with_env(
        &[
            "run",
            "--blob",
            blob,
            "--container",
            container,
            "--pass-stdin",
            "--",
            "sh",
            "-c",
            "read first; read second; echo \"got $first and $second\"",
        ],
        &env,
    );
    let (out, ended) = output_within_fed(run, Some(b"one\ntwo\n"), ONE_SHOT);
    assert!(ended, "--pass-stdin: still running after {ONE_SHOT:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(stdout.trim(), "got one and two");

    // A terminal: refused at once, exit 2, one line.
    let pty = nix::pty::openpty(None, None).unwrap();
    let (out, ended) = output_within(
        {
            let mut command =
                leasehold_with_env(&["run", "--blob", blob, "--pass-stdin", "--", "true"], &env);
            command.stdin(std::process::Stdio::from(pty.slave));
            command
        },
        secs(10),
    );
    assert!(ended);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--pass-stdin: standard input is a terminal"),
        "{stderr}"
    );
    drop(pty.master);
}

/// Ctrl-Z on a one-shot (SIGTSTP): the command is stopped and the lease released, as on
/// SIGTERM, and leasehold stops itself; it runs its command once, so on SIGCONT (`fg`) it
/// exits with 128 + SIGTSTP, as a shell reports a job it stopped. One still campaigning
/// stops, and campaigns again on SIGCONT.
#[test]
fn ctrl_z_on_a_one_shot_stops_its_command_releases_and_exits_148_when_continued() {
    let group = Group::shared();
    let mut shot = one_liner(&group, "shot", &[], &[]).spawn();
    let first = group
        .wait_first_start(ONE_SHOT)
        .unwrap_or_else(|| panic!("the one-shot never ran its command:\n{}", shot.log()));
    let mut waiting = one_liner(&group, "waiting", &[], &[]).spawn();
    waiting.assert_follows(secs(10));

    // The one still campaigning: stopped, then continued, it campaigns on.
    waiting.signal(Signal::SIGTSTP);
    let stopped = |pid: u32| {
        wait_until(secs(5), || {
            leasehold_testkit::procfs::processes()
                .iter()
                .any(|p| p.pid == pid && p.state == "T")
        })
    };
    assert!(stopped(waiting.pid().as_raw() as u32), "{}", waiting.log());
    waiting.signal(Signal::SIGCONT);
    assert!(waiting.wait_log("rejoining the election", secs(5)));

    let sent = mono_now();
    shot.signal(Signal::SIGTSTP);
    let dead = lock_freed(&group.lock_path(), secs(5)).expect("the command was stopped");
    assert!(stopped(shot.pid().as_raw() as u32), "{}", shot.log());
    // The lease was handed on: the one waiting leads.
    let next = group
        .wait_start_of("waiting", secs(5))
        .unwrap_or_else(|| panic!("the waiting one did not lead:\n{}", waiting.log()));
    println!(
        "SIGTSTP: the command stopped {} after it, the waiting one's command started {} after it",
        figure(dead - sent),
        figure(next.t - sent)
    );
    shot.signal(Signal::SIGCONT);
    let status = shot
        .wait_exit(secs(10))
        .expect("the one-shot exits on SIGCONT");
    assert_eq!(status.code(), Some(128 + 20), "{}", shot.log());
    let history = group.history();
    assert_eq!(
        history.starts().len(),
        2,
        "the command ran once: {}",
        first.pid
    );
    history.assert_safe();
    waiting.signal(Signal::SIGTERM);
    assert!(waiting.wait_exit(secs(10)).is_some());
}
