//! Health-checked leadership (`[child.health]`): a leader whose child stalls steps down for a
//! healthy instance; healthy children are left alone; the start period and flapping are judged
//! as documented; a group of unhealthy children does not thrash faster than the cooldown.

use leasehold_testkit::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// How many health checks of `daemon`'s child had `result`, by its `/metrics`.
fn checks(daemon: &Daemon, result: &str) -> f64 {
    daemon.metrics().map_or(0.0, |m| {
        m.sum("leasehold_health_checks_total", &[("result", result)])
    })
}

#[test]
fn a_stalled_leader_steps_down_for_a_healthy_instance() {
    let group = Group::shared();
    let health = "interval = \"1s\"\ntimeout = \"500ms\"\nfailures = 3\ncooldown = \"5s\"";
    let stall: Vec<PathBuf> = (0..2)
        .map(|i| group.dir().join(format!("stall-{i}")))
        .collect();
    let (a_addr, b_addr) = (free_addr(), free_addr());
    let a = group
        .launch("a", "", &http_checked(&group, &a_addr, &stall[0], health))
        .http()
        .spawn();
    group.wait_first_start(secs(15)).expect("a leads");
    let b = group.start("b", "", &http_checked(&group, &b_addr, &stall[1], health));
    b.assert_follows(secs(10));
    assert!(
        wait_until(secs(5), || checks(&a, "pass") >= 1.0),
        "a's child is checked"
    );
    let status = a.status().expect("/status");
    assert_eq!(status["health"]["last_result"], "pass", "{status}");

    // The child keeps running, but its health endpoint stops answering.
    let stalled = mono_now();
    std::fs::write(&stall[0], "").unwrap();
    let taken = group.wait_start_of("b", secs(20)).expect("b leads").t - stalled;
    // failures * interval + timeout + stop_timeout + acquire_interval + 1 s
    let bound = Duration::from_millis(3 * 1000 + 500 + 2000 + 1000 + 1000);
    eprintln!(
        "healthy instance leads {taken:?} after the leader's child stalled (bound {bound:?})"
    );
    assert!(taken <= bound, "took {taken:?}");
    assert!(
        a.wait_log("stepped down: child unhealthy", secs(2)),
        "{}",
        a.log()
    );
    assert!(
        a.log().contains("no answer within 500ms"),
        "the WARN names the last check's outcome"
    );
    let m = a.metrics().expect("/metrics");
    assert!(
        m.sum("leasehold_health_checks_total", &[("result", "timeout")]) >= 3.0,
        "{m:?}"
    );
    assert!(
        m.sum("leasehold_child_exits_total", &[("reason", "unhealthy")]) >= 1.0,
        "{m:?}"
    );
    let status = a.status().expect("/status");
    assert_eq!(status["role"], "cooling_down", "{status}");
    let h = group.history();
    h.assert_safe();
}

#[test]
fn a_healthy_child_is_never_stopped_by_its_checks() {
    let group = Group::shared();
    let child = http_checked(
        &group,
        &free_addr(),
        &group.dir().join("never"),
        // The default failures = 3: one slow answer on a loaded machine is not what this is about.
        "interval = \"1s\"\ntimeout = \"1s\"",
    );
    let d = group.launch("fine", "", &child).http().spawn();
    group.wait_first_start(secs(15)).expect("leads");
    let began = Instant::now();
    assert!(
        wait_until(secs(45), || checks(&d, "pass") >= 30.0),
        "30 checks"
    );
    eprintln!(
        "30 passing checks in {:?} ({} failed, {} timed out)",
        began.elapsed(),
        checks(&d, "fail"),
        checks(&d, "timeout")
    );
    let h = group.history();
    assert_eq!(h.starts().len(), 1, "the child was never restarted");
    assert!(h.of_kind("stop").is_empty(), "the child was never stopped");
    assert_eq!(d.get("/readyz").map(|r| r.0), Some(200));

    // `status` on this host shows the local daemon's health next to the blob's view.
    let http = d.http.clone().unwrap();
    let config = group.dir().join("fine.toml");
    let status = |more: &[&str]| {
        let args = [
            &[
                "status",
                "-c",
                config.to_str().unwrap(),
                "--http-listen",
                &http,
            ],
            more,
        ];
        leasehold(&args.concat(), &[])
    };
    let out = status(&[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("this host    fine: leader"), "{text}");
    assert!(text.contains("health       last check pass"), "{text}");
    let out = status(&["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        report["local"]["health"]["consecutive_failures"], 0,
        "{report}"
    );
    drop(d);
}

#[test]
fn start_period_failures_and_flapping_do_not_make_a_child_unhealthy() {
    let azurite = Azurite::shared();
    let starting = Group::new(azurite);
    let flapping = Group::new(azurite);
    // Four failures inside a 4.5 s start period (checks at 1, 2, 3, 4 s), then passes. The
    // probe is a shell script: a generous timeout keeps a slow machine from turning an answer
    // into a timeout (which would count as a failure and change the pattern).
    let script = starting.dir().join("script");
    std::fs::write(&script, "fail\nfail\nfail\nfail\n").unwrap();
    let a = starting
        .launch(
            "slow-start",
            "",
            &scripted(
                &starting,
                &script,
                "interval = \"1s\"\ntimeout = \"1s\"\nfailures = 2\nstart_period = \"4500ms\"",
            ),
        )
        .http()
        .spawn();
    // Never two failures in a row.
    let script = flapping.dir().join("script");
    std::fs::write(
        &script,
        "fail\npass\nfail\npass\nfail\npass\nfail\npass\nfail\n",
    )
    .unwrap();
    let b = flapping
        .launch(
            "flapper",
            "",
            &scripted(
                &flapping,
                &script,
                "interval = \"1s\"\ntimeout = \"1s\"\nfailures = 2",
            ),
        )
        .http()
        .spawn();
    for d in [&a, &b] {
        assert!(
            wait_until(secs(30), || checks(d, "pass") + checks(d, "fail") >= 12.0),
            "twelve checks of {}",
            d.identity
        );
    }
    let counts = |d: &Daemon| ["pass", "fail", "timeout"].map(|r| (r, checks(d, r)));
    eprintln!("slow start: {:?}; flapping: {:?}", counts(&a), counts(&b));
    assert_eq!(checks(&a, "fail"), 4.0, "{:?}", counts(&a));
    assert!(checks(&b, "fail") >= 5.0, "{:?}", counts(&b));
    for (group, d) in [(&starting, &a), (&flapping, &b)] {
        let h = group.history();
        let name = &d.identity;
        assert_eq!(h.starts().len(), 1, "{name}: still the first child");
        assert!(h.of_kind("stop").is_empty(), "{name}: never stopped");
        assert_eq!(
            d.get("/readyz").map(|r| r.0),
            Some(200),
            "{name}: still leading"
        );
    }
}

#[test]
fn an_all_unhealthy_group_rotates_no_faster_than_the_cooldown() {
    let group = Group::shared();
    let child = format!(
        "command = {}\nstop_timeout = \"2s\"\n\n[child.health]\ncommand = [\"false\"]\ninterval = \"500ms\"\ntimeout = \"400ms\"\nfailures = 2\ncooldown = \"4s\"\n",
        group.witness(&[])
    );
    let daemons: Vec<Daemon> = ["x", "y"]
        .iter()
        .map(|id| group.start(id, "", &child))
        .collect();
    let h = group
        .wait_history(secs(60), |h| h.starts().len() >= 6)
        .expect("six terms");
    h.assert_safe();
    // After stepping down, a daemon sits out at least the cooldown before its next child: every
    // term of a daemon after its first is measured from the stop of its previous child.
    let mut gaps = Vec::new();
    let mut later_terms = 0;
    for id in ["x", "y"] {
        let mine: Vec<&Event> = h
            .events
            .iter()
            .filter(|e| e.identity == id && (e.kind == "start" || e.kind == "stop"))
            .collect();
        later_terms += mine
            .iter()
            .filter(|e| e.kind == "start")
            .count()
            .saturating_sub(1);
        for pair in mine.windows(2) {
            if pair[0].kind == "stop" && pair[1].kind == "start" {
                gaps.push(pair[1].t - pair[0].t);
            }
        }
    }
    let shortest = gaps.iter().min().copied();
    eprintln!(
        "shortest gap between a daemon stepping down and leading again: {shortest:?} over {} \
         gaps (cooldown 4s)",
        gaps.len()
    );
    assert!(
        gaps.len() == later_terms && later_terms >= 4,
        "{} of {later_terms} later terms measured (six terms of two daemons make at least 4)",
        gaps.len()
    );
    assert!(shortest.is_some_and(|s| s >= secs(4)), "{shortest:?}");
    drop(daemons);
}
