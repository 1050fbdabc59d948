//! Seeing and operating leadership: `status`, `check`, `break`, the HTTP endpoints and the logs,
//! against a real Azurite with real daemons.

use leasehold_testkit::azurite::connection_string;
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::path::Path;
use std::time::{Duration, Instant};

fn status_json(config: &std::path::Path) -> serde_json::Value {
    let out = leasehold(&["status", "-c", config.to_str().unwrap(), "--json"], &[]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("one JSON object")
}

#[test]
fn status_names_the_leader_and_its_epoch_from_any_instance() {
    let group = Group::shared();
    let first = group.start("first", "", "");
    let epoch = group.wait_first_start(secs(15)).expect("first leads").epoch;
    let follower_config = group.config("second", "", "");
    let second = Daemon::spawn(&follower_config, "second", &[], &[]);
    second.assert_follows(secs(10));

    let started = Instant::now();
    let report = status_json(&follower_config);
    eprintln!("status answered in {:?}", started.elapsed());
    assert_eq!(report["leader"], "first", "{report}");
    assert_eq!(
        report["epoch"], epoch,
        "the epoch the leader's child received: {report}"
    );
    assert_eq!(report["lease_state"], "leased");
    assert_eq!(
        report["lease_holder"], "recorded",
        "the lease is held under the lease id the leader recorded: {report}"
    );

    first.signal(Signal::SIGTERM);
    let started = group
        .wait_start_of("second", secs(10))
        .expect("second leads");
    let report = status_json(&follower_config);
    assert_eq!(report["leader"], "second", "{report}");
    assert_eq!(report["epoch"], started.epoch);

    // Text form, and "no leader" with the last holder once nobody holds the lease.
    let out = leasehold(&["status", "-c", follower_config.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("leader       second"), "{text}");
    let mut second = second;
    second.stop(secs(10));
    let report = status_json(&follower_config);
    assert_eq!(report["leader"], serde_json::Value::Null, "{report}");
    assert_eq!(report["last_holder"], "second", "{report}");
    assert_eq!(report["lease_state"], "available", "{report}");
    assert_eq!(report["lease_holder"], serde_json::Value::Null, "{report}");
}

#[test]
fn readyz_follows_leadership_and_metrics_count_lease_operations() {
    let group = Group::shared();
    let a = group.launch("a", "", "").http().spawn();
    group.wait_first_start(secs(15)).expect("a leads");
    let b = group.launch("b", "", "").http().spawn();
    b.assert_follows(secs(10));

    assert_eq!(a.get("/readyz").map(|r| r.0), Some(200));
    assert_eq!(b.get("/readyz").map(|r| r.0), Some(503));
    assert_eq!(a.get("/healthz").map(|r| r.0), Some(200));
    assert_eq!(b.get("/healthz").map(|r| r.0), Some(200));

    // The leader renews (after R = 4 s); the follower's acquires are refused.
    let operations = |d: &Daemon, op: &str, result: &str| {
        d.metrics().map_or(0.0, |m| {
            m.sum(
                "leasehold_lease_operations_total",
                &[("op", op), ("result", result)],
            )
        })
    };
    assert!(wait_until(secs(10), || operations(&a, "renew", "ok") >= 1.0));
    let leads = |d: &Daemon| d.metrics().map(|m| m.sum("leasehold_is_leader", &[]));
    assert_eq!(leads(&a), Some(1.0));
    assert!(operations(&a, "acquire", "ok") >= 1.0);
    assert_eq!(leads(&b), Some(0.0));
    assert!(operations(&b, "acquire", "LeaseAlreadyPresent") >= 1.0);

    // Every kind of request the daemon counts is there from the start, and documented.
    let ops = a
        .metrics()
        .unwrap()
        .by("leasehold_lease_operations_total", "op");
    let docs = std::fs::read_to_string(workspace_root().join("docs/operations.md")).unwrap();
    assert!(ops.len() >= 15, "{ops:?}");
    for op in ops.keys() {
        assert!(
            docs.contains(&format!("| `{op}` |")),
            "op {op} is not in docs/operations.md's table of op values"
        );
    }

    let status = a.status().expect("/status");
    assert_eq!(status["role"], "leader", "{status}");
    assert_eq!(status["identity"], "a");
    assert!(status["child"]["pid"].as_u64().is_some(), "{status}");
    assert!(
        status["seconds_to_stop_deadline"].as_f64().unwrap() > 0.0,
        "{status}"
    );

    // Handover: both endpoints flip within 1 s.
    let sigterm = Instant::now();
    a.signal(Signal::SIGTERM);
    assert!(wait_until(secs(1), || a
        .get("/readyz")
        .is_none_or(|r| r.0 != 200)));
    eprintln!(
        "old leader not ready {:?} after SIGTERM (bound 1s)",
        sigterm.elapsed()
    );
    let b_child = group.wait_start_of("b", secs(10)).expect("b leads").t;
    assert!(wait_until(secs(1), || b
        .get("/readyz")
        .is_some_and(|r| r.0 == 200)));
    let lag = mono_now().saturating_sub(b_child);
    eprintln!("new leader ready within {lag:?} of its child's start (bound 1s)");
    assert!(lag <= secs(1));
    assert_eq!(leads(&b), Some(1.0));
}

#[test]
fn break_forces_a_failover_without_overlap() {
    let group = Group::shared();
    let a = group.start("a", "", "");
    group.wait_first_start(secs(15)).expect("a leads");
    let b_config = group.config("b", "", "");
    let b = Daemon::spawn(&b_config, "b", &[], &[]);
    b.assert_follows(secs(10));
    let epoch = group.history().starts()[0].epoch;

    let broke = mono_now();
    let out = leasehold(&["break", "-c", b_config.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("held by a"), "{text}");
    // Default period: R + G + M = 4 + 2 + 1 = 7 s.
    assert!(text.contains("acquired again in 7s"), "{text}");

    let h = group
        .wait_history(secs(10), |h| !h.of_kind("stop").is_empty())
        .expect("the old leader stopped its child");
    let stopped = h.of_kind("stop")[0].t - broke;
    eprintln!("old leader's child stopped {stopped:?} after the break (bound R + 1s = 5s)");
    assert!(stopped <= secs(5));
    assert!(a.wait_log("lost leadership", secs(5)), "{}", a.log());

    let next = group
        .wait_nth_start(2, secs(20))
        .expect("someone leads again");
    eprintln!(
        "{} leads {:?} after the break (period 7s)",
        next.identity,
        next.t - broke
    );
    assert!(next.epoch > epoch, "epoch {epoch} -> {}", next.epoch);
    h.assert_safe();
    drop((a, b));
}

/// `break --period 0s` would let another instance lead while the old child runs: refused
/// without `--force` (one line, exit 2, the lease untouched). A lease that is already being
/// broken is still held by its leader until the break period ends, and a second `break` names
/// that leader (it used to say "an instance that had not written its metadata").
#[test]
fn break_period_zero_needs_force_and_a_breaking_lease_names_its_holder() {
    let group = Group::shared();
    // Renews far apart: nothing the leader does moves the lease between the two breaks.
    let slow = "duration = \"60s\"\nrenew_interval = \"20s\"";
    let a = group.start("a", slow, "");
    let epoch = group.wait_first_start(secs(15)).expect("a leads").epoch;
    let config = group.config("admin", slow, "");
    let config = config.to_str().unwrap();

    let out = leasehold(&["break", "-c", config, "--period", "0s"], &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("two children at once") && stderr.contains("--force"),
        "{stderr}"
    );
    let report = status_json(Path::new(config));
    assert_eq!(
        report["lease_state"], "leased",
        "refused: untouched: {report}"
    );

    let out = leasehold(&["break", "-c", config, "--period", "30s"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("held by a (epoch {epoch})")),
        "{text}"
    );
    assert_eq!(status_json(Path::new(config))["lease_state"], "breaking");

    let out = leasehold(&["break", "-c", config, "--period", "5s"], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!(
            "held by a (epoch {epoch}) (it was already being broken)"
        )),
        "{text}"
    );
    assert!(
        text.contains("acquired again in 5s"),
        "a shorter period wins: {text}"
    );
    drop(a);
}

/// `status` and `break` with storage that does not answer: one line naming the endpoint and
/// what to check (as `check` says it), exit 1.
#[test]
fn status_and_break_name_the_endpoint_and_the_fix_when_storage_is_unreachable() {
    let dir = tempfile::tempdir().unwrap();
    let endpoint = format!("http://127.0.0.1:{}/devstoreaccount1", free_port());
    let config = dir.path().join("nowhere.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\nconnection_string = {:?}\nblob = \"b\"\n",
            connection_string("devstoreaccount1", EMULATOR_KEY, &endpoint)
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    for args in [
        vec!["status", "-c", config],
        vec!["status", "--json", "-c", config],
        vec!["break", "-c", config],
    ] {
        let (out, ended) = leasehold_within(&args, secs(20));
        assert!(ended, "{args:?} did not end");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot reach storage at {endpoint}"))
                && stderr.contains("check [storage].endpoint"),
            "{args:?}: {stderr}"
        );
        assert!(!stderr.contains(&EMULATOR_KEY[..12]), "{stderr}");
    }
}

fn check_output(config: &std::path::Path) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let out = leasehold(&["check", "-c", config.to_str().unwrap()], &[]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text, started.elapsed())
}

#[test]
fn check_passes_on_a_good_config_and_explains_each_failure() {
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let good = group.config("checker", "", "");
    let (code, text, took) = check_output(&good);
    eprintln!("{text}(took {took:?})");
    assert_eq!(code, Some(0), "{text}");
    for step in [
        "config",
        "child",
        "endpoint",
        "credentials",
        "container",
        "blob",
        "lease",
    ] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("ok") && l.contains(step)),
            "{step}: {text}"
        );
    }
    assert!(text.contains("acquire and release permitted"), "{text}");

    let rewrite = |name: &str, from: &str, to: &str| {
        let path = group.dir().join(name);
        std::fs::write(
            &path,
            std::fs::read_to_string(&good).unwrap().replace(from, to),
        )
        .unwrap();
        path
    };
    let cases = [
        (
            "wrong key",
            rewrite(
                "wrongkey.toml",
                EMULATOR_KEY,
                "d3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nd3Jvbmc=",
            ),
            "FAIL  credentials",
            "check the account key",
        ),
        (
            "missing container",
            rewrite(
                "nocontainer.toml",
                "container = \"tests\"",
                "container = \"nope\"\ncreate_if_missing = false",
            ),
            "FAIL  container",
            "create_if_missing = true",
        ),
        (
            "closed port",
            rewrite(
                "closed.toml",
                &format!(":{}/", azurite.port),
                &format!(":{}/", free_port()),
            ),
            "FAIL  endpoint",
            "hint: check [storage].endpoint",
        ),
    ];
    for (name, config, failure, hint) in cases {
        let (code, text, took) = check_output(&config);
        eprintln!("{name}: {took:?}\n{text}");
        assert_eq!(code, Some(1), "{name}: {text}");
        assert!(
            text.contains(failure) && text.contains(hint),
            "{name}: {text}"
        );
        assert!(took <= secs(10), "{name} took {took:?}");
        assert!(!text.contains("d3Jvbmd3"), "{name}: the key leaked: {text}");
    }
}

/// RUSTSEC-2026-0275 (SECURITY.md): at `RUST_LOG=trace` the legacy `azure_core` would log each
/// request's `Authorization` header (`SharedKey account:signature`); leasehold caps it at `warn`
/// (src/logging.rs). Real requests of every kind, the daemon's and each operator command's,
/// against Azurite with the real binary: none of what they print holds the header, the scheme,
/// a SAS signature or the key. (With the cap taken out of src/logging.rs, this fails on
/// `Authorization`.)
#[test]
fn no_output_carries_a_secret() {
    let group = Group::shared();
    let config = group.config("quiet", "", "");
    let mut daemon = Daemon::launch(&config, "quiet")
        .env("RUST_LOG", "trace")
        .http()
        .spawn();
    group.wait_first_start(secs(15)).expect("leads");
    // At least one renew, so that every kind of request has been made and logged.
    assert!(wait_until(secs(10), || {
        daemon
            .metrics()
            .is_some_and(|m| m.sum("leasehold_lease_operations_total", &[("op", "renew")]) >= 1.0)
    }));
    let mut outputs = vec![
        daemon.get("/status").unwrap().1,
        daemon.get("/metrics").unwrap().1,
    ];
    for args in [
        vec!["status"],
        vec!["status", "--json"],
        vec!["check"],
        vec!["break", "--period", "0s", "--force"],
    ] {
        let mut full = args.clone();
        full.extend(["-c", config.to_str().unwrap()]);
        let out = leasehold(&full, &[("RUST_LOG", "trace")]);
        outputs.push(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    daemon.stop(secs(10));
    let logs = daemon.log();
    assert!(logs.contains("TRACE"), "trace level was on");
    outputs.push(logs);
    let secrets = [
        EMULATOR_KEY,
        &EMULATOR_KEY[..12],
        group.connection_string.as_str(),
        // What a logged request would carry: the header and its scheme.
        "Authorization",
        "SharedKey",
    ];
    // A SAS's signature (`sig=` and base64); the daemon's own `sig=SIGTERM` field is no secret.
    for output in &outputs {
        let signed = output
            .match_indices("sig=")
            .any(|(at, _)| !output[at + 4..].starts_with("SIG"));
        assert!(!signed, "a SAS signature (sig=...) in:\n{output}");
    }
    for output in &outputs {
        for secret in secrets {
            assert!(
                !output.contains(secret),
                "a secret ({}...) leaked into:\n{output}",
                &secret[..8.min(secret.len())]
            );
        }
    }
}

/// A blob name is either refused by the config (one line naming `[storage].blob`, exit 2) or
/// used exactly as written: the blob leasehold creates is listed by the service under that very
/// name. Before this rule the SDK and the URL parser rewrote some names on the way, so that two
/// groups configured differently could share one lease (`a\b` and `a/b`). Each name gets a
/// container of its own, so that each listing shows what that one name became.
#[test]
fn a_blob_name_is_refused_or_used_exactly_as_written() {
    let azurite = Azurite::shared();
    let dir = tempfile::tempdir().unwrap();
    let prefix = format!("names-{}", fastrand::u32(..));
    let names = [
        // Plain names, and characters the client must escape but keep.
        "plain",
        "dir/sub/leaf",
        "with space",
        "query?mark",
        "hash#mark",
        "plus+sign",
        "semi;colon=equals&amp",
        "quote'and\"double",
        "unicode-ü-漢字",
        "tilde~and(parens)",
        "percent%",
        "percent%41",
        "percent%2Fslash",
        // What the client or the service rewrites.
        "a\\b",
        "tail\\",
        "..\\..\\x",
        "/leading",
        "//double-leading",
        "a//b",
        "a/./b",
        "a/../b",
        "./a",
        "../a",
        "a/..",
        "dot./segment",
        "tab\there",
        "new\nline",
        "cr\rhere",
        "nul\u{0}here",
        "del\u{7f}here",
        "trailing/",
        "trailing.",
        "c1\u{85}control",
        // Azure's limits: 1024 characters, 254 path segments.
        &"x".repeat(1024),
        &"x".repeat(1025),
        &"ü".repeat(1024),
        &["s"; 254].join("/"),
        &["s"; 255].join("/"),
    ];
    let mut failures = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let container = format!("{prefix}-{i}");
        let config = dir.path().join(format!("name-{i}.toml"));
        std::fs::write(
            &config,
            format!(
                "[storage]\nconnection_string = {}\ncontainer = {container:?}\nblob = {}\n\
                 [child]\ncommand = [\"true\"]\n",
                toml::Value::String(azurite.connection_string()),
                toml::Value::String(name.to_string()),
            ),
        )
        .unwrap();
        let (code, text, _) = check_output(&config);
        let verdict = match code {
            Some(2) => {
                // Refused: `run` says so in one line naming the key, before touching storage.
                let out = leasehold(&["run", "-c", config.to_str().unwrap()], &[]);
                let stderr = String::from_utf8_lossy(&out.stderr);
                if text.contains("[storage].blob")
                    && out.status.code() == Some(2)
                    && stderr.trim_end().lines().count() == 1
                    && stderr.contains("[storage].blob")
                {
                    Ok("refused".to_owned())
                } else {
                    Err(format!(
                        "refused, but not as one line naming [storage].blob: {text} / {stderr}"
                    ))
                }
            }
            Some(0) => match azurite.list_blobs(&container) {
                Ok(listed) if listed == [name.to_string()] => {
                    Ok("accepted, listed under exactly that name".to_owned())
                }
                Ok(listed) => Err(format!("accepted, but the service lists {listed:?}")),
                Err(e) => Err(format!("accepted, but {e}")),
            },
            _ => Err(format!("neither refused nor usable: {text}")),
        };
        // Long names are shown by their start and length.
        let shown = match name.chars().count() {
            n if n > 40 => format!(
                "{:?}... ({n} characters)",
                name.chars().take(12).collect::<String>()
            ),
            _ => format!("{name:?}"),
        };
        match verdict {
            Ok(v) => eprintln!("{shown}: {v}"),
            Err(e) => {
                eprintln!("{shown}: WRONG: {e}");
                failures.push(format!("{shown}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} names mishandled:\n{}",
        failures.len(),
        names.len(),
        failures.join("\n")
    );
}

/// A member of `group` with `[election]` lines and its HTTP endpoint (advertised when
/// `advertise`); returns once it joined the line of members.
fn member(group: &Group, identity: &str, election: &str, child: &str, advertise: bool) -> Daemon {
    let addr = free_addr();
    // Without, "off": it serves HTTP, which would otherwise advertise it ("auto").
    let advertised = if advertise {
        format!("advertise = \"http://{addr}\"\n")
    } else {
        "advertise = \"off\"\n".to_owned()
    };
    let config = group.config(
        identity,
        "",
        &format!("{child}\n[election]\n{advertised}{election}\n"),
    );
    let daemon = Daemon::launch(&config, identity).http_on(&addr).spawn();
    assert!(
        daemon.wait_log("joined the line of members", secs(15)),
        "{}",
        daemon.log()
    );
    daemon
}

/// The members of a `status --json` report as (identity, role) in order.
fn line_of(report: &serde_json::Value) -> Vec<(String, String)> {
    report["members"]
        .as_array()
        .unwrap_or_else(|| panic!("members: {report}"))
        .iter()
        .map(|m| {
            (
                m["identity"].as_str().unwrap().to_owned(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn pairs(line: &[(&str, &str)]) -> Vec<(String, String)> {
    line.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

/// `status` (text and JSON) and `/status` on any instance show the leader, its epoch and since
/// when, and the members in succession order with priority, liveness, role and advertise.
#[test]
fn status_shows_the_line_of_members_from_any_instance() {
    let group = Group::shared();
    let a = member(&group, "a", "", "", true);
    let epoch = group.wait_first_start(secs(15)).expect("a leads").epoch;
    let b = member(&group, "b", "priority = 2", "", false);
    let c = member(&group, "c", "", "", false);
    let config = group.config("anyone", "", "");

    let report = status_json(&config);
    assert_eq!(report["leader"], "a", "{report}");
    assert_eq!(report["epoch"], epoch);
    assert!(report["acquired_at"].is_string(), "{report}");
    assert_eq!(report["handing_to"], serde_json::Value::Null);
    assert_eq!(
        line_of(&report),
        pairs(&[("b", "successor"), ("a", "leader"), ("c", "follower")]),
        "{report}"
    );
    let members = report["members"].as_array().unwrap();
    assert_eq!(members[0]["priority"], 2);
    assert_eq!(members[1]["priority"], 0);
    assert!(members.iter().all(|m| m["alive"] == true), "{report}");
    assert!(members.iter().all(|m| m["since"].is_string()), "{report}");
    assert_eq!(
        members[1]["advertise"].as_str(),
        Some(format!("http://{}", a.http.as_deref().unwrap()).as_str())
    );
    assert_eq!(members[0]["advertise"], serde_json::Value::Null);

    let out = leasehold(&["status", "-c", config.to_str().unwrap()], &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}");
    assert!(text.contains("members      3 live"), "{text}");
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with("  ") && l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(row("b")[..4], ["1", "b", "2", "successor"]);
    assert_eq!(row("a")[..4], ["2", "a", "0", "leader"]);
    assert_eq!(row("c")[..4], ["3", "c", "0", "follower"]);

    // Every daemon's /status has the line as it last listed it: c joined last and saw
    // everyone; b (listed when it joined, before c) knows a leads and that it is next; the
    // leader lists every 30-36 s and then knows everyone.
    let view = |d: &Daemon| -> Option<(serde_json::Value, Vec<(String, String)>)> {
        let line = d.status()?["line"].clone();
        let roles = line["members"]
            .as_array()?
            .iter()
            .map(|m| {
                (
                    m["identity"].as_str().unwrap_or("").to_owned(),
                    m["role"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        Some((line, roles))
    };
    let everyone = pairs(&[("b", "successor"), ("a", "leader"), ("c", "follower")]);
    for (d, within, expected, place) in [
        (&c, secs(10), everyone.clone(), 3),
        (
            &b,
            secs(10),
            pairs(&[("b", "successor"), ("a", "leader")]),
            1,
        ),
        (&a, secs(45), everyone.clone(), 2),
    ] {
        let seen = wait_until_some(within, || {
            let (line, roles) = view(d)?;
            (line["leader"]["identity"] == "a"
                && line["leader"]["epoch"] == epoch
                && roles == expected)
                .then_some(line)
        });
        let line = seen.unwrap_or_else(|| panic!("{}: {:?}", d.identity, d.status()));
        assert_eq!(
            line["position"], place,
            "{}'s place in line: {line}",
            d.identity
        );
        assert!(line["listed_at"].is_string(), "{line}");
    }
}

/// The metrics of succession: handoffs by result, wake-ups sent and received, members live and
/// dead, this instance's place in line.
#[test]
fn metrics_count_handoffs_wake_ups_and_members() {
    let group = Group::shared();
    let child = group.witness_child(&["--exit-after", "1s"], "on_exit = \"release\"");
    let a = member(&group, "a", "", &child, true);
    group.wait_first_start(secs(15)).expect("a leads");
    let b = member(&group, "b", "", &child, true);
    let c = member(&group, "c", "", &child, true);
    // The lease goes round: each child exits after 1 s, and its leader hands over.
    group
        .wait_history(secs(30), |h| h.starts().len() >= 5)
        .expect("five terms");
    let sum = |d: &Daemon, name: &str, labels: &[(&str, &str)]| {
        d.metrics().map_or(0.0, |m| m.sum(name, labels))
    };
    let all = [&a, &b, &c];
    let total = |name: &str, labels: &[(&str, &str)]| -> f64 {
        all.iter().map(|d| sum(d, name, labels)).sum()
    };
    let handed = total("leasehold_handoffs_total", &[("result", "handed_over")]);
    let sent = total("leasehold_wakeups_sent_total", &[("result", "ok")]);
    let received = total(
        "leasehold_wakeups_received_total",
        &[("result", "accepted")],
    );
    eprintln!("handoffs {handed}, wake-ups sent {sent}, received {received}");
    assert!(handed >= 4.0, "{handed}");
    assert!(sent >= 4.0 && received >= 4.0, "{sent} {received}");
    for d in all {
        assert!(
            wait_until(secs(10), || sum(
                d,
                "leasehold_members",
                &[("state", "live")]
            ) == 3.0),
            "{}: {:?}",
            d.identity,
            d.metrics()
        );
        assert_eq!(sum(d, "leasehold_members", &[("state", "dead")]), 0.0);
    }
    let mut places: Vec<f64> = all
        .iter()
        .map(|d| sum(d, "leasehold_place_in_line", &[]))
        .collect();
    places.sort_by(f64::total_cmp);
    assert_eq!(places, [1.0, 2.0, 3.0], "each its own place");
    group.history().assert_safe();
}

/// `leasehold status -c CONFIG --watch --interval 200ms EXTRA...`, running, and the lines it
/// prints as they come.
fn watch_status(
    config: &Path,
    extra: &[&str],
) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    use std::io::BufRead;
    let mut args = vec![
        "status",
        "-c",
        config.to_str().unwrap(),
        "--watch",
        "--interval",
        "200ms",
    ];
    args.extend(extra);
    let mut watch = leasehold_command(&args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = watch.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    (watch, rx)
}

/// `status --watch` shows the line again only when it changed, and Ctrl-C ends it (exit 0).
#[test]
fn status_watch_redraws_on_change_and_ends_on_ctrl_c() {
    let group = Group::shared();
    let a = member(&group, "a", "", "", false);
    group.wait_first_start(secs(15)).expect("a leads");
    let _b = member(&group, "b", "", "", false);
    let config = group.config("anyone", "", "");
    let (mut watch, rx) = watch_status(&config, &[]);
    let collect = |rx: &std::sync::mpsc::Receiver<String>, d: Duration| -> Vec<String> {
        let end = Instant::now() + d;
        let mut lines = Vec::new();
        while let Ok(l) = rx.recv_timeout(end.saturating_duration_since(Instant::now())) {
            lines.push(l);
        }
        lines
    };
    let views = |lines: &[String]| lines.iter().filter(|l| l.contains("Ctrl-C ends")).count();
    // 2 s at 200 ms: ten looks, one view, since nothing changed.
    let first = collect(&rx, secs(2));
    assert_eq!(views(&first), 1, "{first:#?}");
    assert!(
        first.iter().any(|l| l.starts_with("leader       a")),
        "{first:#?}"
    );
    a.signal(Signal::SIGTERM);
    group.wait_start_of("b", secs(10)).expect("b leads");
    let next = collect(&rx, secs(2));
    assert!(views(&next) >= 1, "redrawn after the handover: {next:#?}");
    assert!(
        next.iter().any(|l| l.starts_with("leader       b")),
        "{next:#?}"
    );
    let quiet = collect(&rx, secs(1));
    assert_eq!(views(&quiet), 0, "{quiet:#?}");

    let interrupted = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(watch.id() as i32),
        Signal::SIGINT,
    )
    .unwrap();
    let status = wait_until_some(secs(5), || watch.try_wait().ok().flatten()).expect("it ends");
    eprintln!(
        "status --watch ended {:?} after Ctrl-C",
        interrupted.elapsed()
    );
    assert_eq!(status.code(), Some(0));

    // A bad interval is one line and exit 2.
    let out = leasehold(
        &[
            "status",
            "-c",
            config.to_str().unwrap(),
            "--watch",
            "--interval",
            "10ms",
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("100ms to 1h"), "{err}");
}

/// `status --watch --json` is a stream of events a follower can act on: one JSON object per
/// line and per change, `initial` first, `leader_changed` when another instance leads (with
/// the new leader's epoch and its wake-up URL in `leader_advertise`), nothing while nothing
/// changes.
#[test]
fn status_watch_json_streams_one_event_per_change_with_the_leaders_url() {
    let group = Group::shared();
    let a = member(&group, "a", "", "", true);
    group.wait_first_start(secs(15)).expect("a leads");
    let b = member(&group, "b", "", "", true);
    let config = group.config("watcher", "", "");
    let (mut watch, rx) = watch_status(&config, &["--json"]);
    let next_event = |within: Duration| -> Option<serde_json::Value> {
        let line = rx.recv_timeout(within).ok()?;
        Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")))
    };
    let first = next_event(secs(10)).expect("the first event");
    assert_eq!(first["event"], "initial", "{first}");
    assert_eq!(first["leader"], "a", "{first}");
    assert_eq!(
        first["leader_advertise"].as_str(),
        Some(format!("http://{}", a.http.as_deref().unwrap()).as_str()),
        "{first}"
    );
    // Until b has joined the listing, a change may show; then quiet.
    let mut quiet = 0;
    while let Some(event) = next_event(secs(2)) {
        assert_eq!(event["event"], "changed", "{event}");
        quiet += 1;
        assert!(quiet < 5, "changes keep coming: {event}");
    }

    let epoch = first["epoch"].as_u64().unwrap();
    a.signal(nix::sys::signal::Signal::SIGTERM);
    let changed = wait_until_some(secs(15), || {
        let event = next_event(Duration::from_millis(500))?;
        (event["event"] == "leader_changed" && event["leader"] == "b").then_some(event)
    })
    .expect("a leader_changed event naming b");
    eprintln!("leader_changed: {changed}");
    assert!(changed["epoch"].as_u64().unwrap() > epoch, "{changed}");
    assert_eq!(
        changed["leader_advertise"].as_str(),
        Some(format!("http://{}", b.http.as_deref().unwrap()).as_str()),
        "the new leader's wake-up URL: {changed}"
    );
    assert!(changed["observed_at"].as_str().is_some(), "{changed}");
    let _ = watch.kill();
    let _ = watch.wait();
    drop((a, b));
}
