//! Health-checked leadership (`[child.health]`): a leader whose child stalls steps down for a
//! healthy instance; healthy children are left alone; the start period and flapping are judged
//! as documented; a group of unhealthy children does not thrash faster than the cooldown.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

#[allow(non_snake_case)]
fn SECS(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A [child] table: the witness serving a health endpoint on `addr` that stalls while
/// `stall` exists, checked over HTTP.
fn http_checked(group: &Group, addr: &str, stall: &Path, health: &str) -> String {
    let command = group.witness(&[
        "--serve-health",
        addr,
        "--stall-file",
        stall.to_str().unwrap(),
    ]);
    format!(
        "command = {command}\nstop_timeout = \"2s\"\n\n[child.health]\nhttp = \"http://{addr}/health\"\n{health}\n"
    )
}

/// A [child] table: the witness, checked by a command that answers from a script: line N of
/// `script` is the result of check N (`pass` or `fail`; past the end, `pass`).
fn scripted(group: &Group, script: &Path, health: &str) -> String {
    let count = script.with_extension("count");
    let probe = format!(
        "n=$(cat {count} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {count}; \
         r=$(sed -n ${{n}}p {script}); echo check $n: ${{r:-pass}}; test \"${{r:-pass}}\" = pass",
        count = count.display(),
        script = script.display()
    );
    format!(
        "command = {}\nstop_timeout = \"2s\"\n\n[child.health]\ncommand = [\"sh\", \"-c\", {probe:?}]\n{health}\n",
        group.witness(&[])
    )
}

fn checks(addr: &str, result: &str) -> f64 {
    http_get(addr, "/metrics")
        .map(|(_, m)| {
            metric(
                &m,
                "leasehold_health_checks_total",
                &format!("result=\"{result}\""),
            )
        })
        .unwrap_or(0.0)
}

#[test]
fn a_stalled_leader_steps_down_for_a_healthy_instance() {
    let azurite = Azurite::start();
    let group = Group::new(&azurite);
    let health = "interval = \"1s\"\ntimeout = \"500ms\"\nfailures = 3\ncooldown = \"5s\"";
    let stall: Vec<PathBuf> = (0..2)
        .map(|i| group.dir.path().join(format!("stall-{i}")))
        .collect();
    let (a_addr, b_addr) = (free_addr(), free_addr());
    let a_http = free_addr();
    let a = Daemon::spawn(
        &group.config("a", "", &http_checked(&group, &a_addr, &stall[0], health)),
        "a",
        &["--http-listen", &a_http],
        &[],
    );
    group
        .wait_history(SECS(15), |h| !h.starts().is_empty())
        .expect("a leads");
    let b = Daemon::spawn(
        &group.config("b", "", &http_checked(&group, &b_addr, &stall[1], health)),
        "b",
        &[],
        &[],
    );
    assert!(b.wait_log("following", SECS(10)));
    assert!(
        wait_until(SECS(5), || checks(&a_http, "pass") >= 1.0),
        "a's child is checked"
    );
    let (_, status) = http_get(&a_http, "/status").unwrap();
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status["health"]["last_result"], "pass", "{status}");

    // The child keeps running, but its health endpoint stops answering.
    let stalled = mono_now();
    std::fs::write(&stall[0], "").unwrap();
    let h = group
        .wait_history(SECS(20), |h| h.starts().iter().any(|s| s.identity == "b"))
        .expect("b leads");
    let taken = h
        .starts()
        .into_iter()
        .find(|s| s.identity == "b")
        .unwrap()
        .t
        - stalled;
    // failures * interval + timeout + stop_timeout + acquire_interval + 1 s
    let bound = Duration::from_millis(3 * 1000 + 500 + 2000 + 1000 + 1000);
    eprintln!(
        "healthy instance leads {taken:?} after the leader's child stalled (bound {bound:?})"
    );
    assert!(taken <= bound, "took {taken:?}");
    assert!(
        a.wait_log("stepped down: child unhealthy", SECS(2)),
        "{}",
        a.log()
    );
    assert!(
        a.log().contains("no answer within 500ms"),
        "the WARN names the last check's outcome"
    );
    let (_, m) = http_get(&a_http, "/metrics").unwrap();
    assert!(
        metric(&m, "leasehold_health_checks_total", "result=\"timeout\"") >= 3.0,
        "{m}"
    );
    assert!(
        metric(&m, "leasehold_child_exits_total", "reason=\"unhealthy\"") >= 1.0,
        "{m}"
    );
    let (_, status) = http_get(&a_http, "/status").unwrap();
    assert!(status.contains("\"role\":\"cooling_down\""), "{status}");
    h.assert_no_overlap();
    h.assert_epochs_grow();
}

#[test]
fn a_healthy_child_is_never_stopped_by_its_checks() {
    let azurite = Azurite::start();
    let group = Group::new(&azurite);
    let http = free_addr();
    let child = http_checked(
        &group,
        &free_addr(),
        &group.dir.path().join("never"),
        // The default failures = 3: one slow answer on a loaded machine is not what this is about.
        "interval = \"1s\"\ntimeout = \"1s\"",
    );
    let d = Daemon::spawn(
        &group.config("fine", "", &child),
        "fine",
        &["--http-listen", &http],
        &[],
    );
    group
        .wait_history(SECS(15), |h| !h.starts().is_empty())
        .expect("leads");
    let began = Instant::now();
    assert!(
        wait_until(SECS(45), || checks(&http, "pass") >= 30.0),
        "30 checks"
    );
    eprintln!(
        "30 passing checks in {:?} ({} failed, {} timed out)",
        began.elapsed(),
        checks(&http, "fail"),
        checks(&http, "timeout")
    );
    let h = group.history();
    assert_eq!(h.starts().len(), 1, "the child was never restarted");
    assert!(h.of_kind("stop").is_empty(), "the child was never stopped");
    assert_eq!(http_get(&http, "/readyz").map(|r| r.0), Some(200));

    // `status` on this host shows the local daemon's health next to the blob's view.
    let config = group.dir.path().join("fine.toml");
    let out = leasehold(
        &[
            "status",
            "-c",
            config.to_str().unwrap(),
            "--http-listen",
            &http,
        ],
        &[],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("this host    fine: leader"), "{text}");
    assert!(text.contains("health       last check pass"), "{text}");
    let out = leasehold(
        &[
            "status",
            "-c",
            config.to_str().unwrap(),
            "--http-listen",
            &http,
            "--json",
        ],
        &[],
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["local"]["health"]["consecutive_failures"], 0,
        "{report}"
    );
    drop(d);
}

#[test]
fn start_period_failures_and_flapping_do_not_make_a_child_unhealthy() {
    let azurite = Azurite::start();
    let starting = Group::new(&azurite);
    let flapping = Group::new(&azurite);
    // Four failures inside a 4.5 s start period (checks at 1, 2, 3, 4 s), then passes. The
    // probe is a shell script: a generous timeout keeps a slow machine from turning an answer
    // into a timeout (which would count as a failure and change the pattern).
    let script = starting.dir.path().join("script");
    std::fs::write(&script, "fail\nfail\nfail\nfail\n").unwrap();
    let starting_http = free_addr();
    let a = Daemon::spawn(
        &starting.config(
            "slow-start",
            "",
            &scripted(
                &starting,
                &script,
                "interval = \"1s\"\ntimeout = \"1s\"\nfailures = 2\nstart_period = \"4500ms\"",
            ),
        ),
        "slow-start",
        &["--http-listen", &starting_http],
        &[],
    );
    // Never two failures in a row.
    let script = flapping.dir.path().join("script");
    std::fs::write(
        &script,
        "fail\npass\nfail\npass\nfail\npass\nfail\npass\nfail\n",
    )
    .unwrap();
    let flapping_http = free_addr();
    let b = Daemon::spawn(
        &flapping.config(
            "flapper",
            "",
            &scripted(
                &flapping,
                &script,
                "interval = \"1s\"\ntimeout = \"1s\"\nfailures = 2",
            ),
        ),
        "flapper",
        &["--http-listen", &flapping_http],
        &[],
    );
    for http in [&starting_http, &flapping_http] {
        assert!(
            wait_until(SECS(30), || checks(http, "pass") + checks(http, "fail")
                >= 12.0),
            "twelve checks on {http}"
        );
    }
    let counts = |http: &str| ["pass", "fail", "timeout"].map(|r| (r, checks(http, r)));
    eprintln!(
        "slow start: {:?}; flapping: {:?}",
        counts(&starting_http),
        counts(&flapping_http)
    );
    assert_eq!(
        checks(&starting_http, "fail"),
        4.0,
        "{:?}",
        counts(&starting_http)
    );
    assert!(
        checks(&flapping_http, "fail") >= 5.0,
        "{:?}",
        counts(&flapping_http)
    );
    for (group, http) in [(&starting, &starting_http), (&flapping, &flapping_http)] {
        let h = group.history();
        assert_eq!(h.starts().len(), 1, "{http}: still the first child");
        assert!(h.of_kind("stop").is_empty(), "{http}: never stopped");
        assert_eq!(
            http_get(http, "/readyz").map(|r| r.0),
            Some(200),
            "{http}: still leading"
        );
    }
    drop((a, b));
}

#[test]
fn an_all_unhealthy_group_rotates_no_faster_than_the_cooldown() {
    let azurite = Azurite::start();
    let group = Group::new(&azurite);
    let child = format!(
        "command = {}\nstop_timeout = \"2s\"\n\n[child.health]\ncommand = [\"false\"]\ninterval = \"500ms\"\ntimeout = \"400ms\"\nfailures = 2\ncooldown = \"4s\"\n",
        group.witness(&[])
    );
    let daemons: Vec<Daemon> = ["x", "y"]
        .iter()
        .map(|id| group.start(id, "", &child))
        .collect();
    let h = group
        .wait_history(SECS(60), |h| h.starts().len() >= 6)
        .expect("six terms");
    h.assert_no_overlap();
    h.assert_epochs_grow();
    // After stepping down, a daemon sits out at least the cooldown before its next child.
    let mut shortest = Duration::MAX;
    for id in ["x", "y"] {
        let mine: Vec<&Event> = h
            .events
            .iter()
            .filter(|e| e.identity == id && (e.kind == "start" || e.kind == "stop"))
            .collect();
        for pair in mine.windows(2) {
            if pair[0].kind == "stop" && pair[1].kind == "start" {
                shortest = shortest.min(pair[1].t - pair[0].t);
            }
        }
    }
    eprintln!(
        "shortest gap between a daemon stepping down and leading again: {shortest:?} (cooldown 4s)"
    );
    assert!(shortest >= SECS(4), "{shortest:?}");
    drop(daemons);
}
