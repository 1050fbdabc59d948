//! `[[storage.replica]]` with the real binary: `check` proves three accounts (three Azurites,
//! each an account of its own) and names the one it cannot reach; `status` reads every replica
//! and tells whether one holder has a majority, `break` breaks a majority. `run` on replicas:
//! tests/it/quorum.rs.

use leasehold_core::quorum::Fingerprint;
use leasehold_testkit::azurite::connection_string;
use leasehold_testkit::process::assert_no_secret;
use leasehold_testkit::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Three Azurites, a blob name of this test's own on them, and a folder for its config.
struct Replicas {
    azurites: Vec<Azurite>,
    dir: tempfile::TempDir,
    blob: String,
    endpoints: Vec<String>,
}

fn three_replicas() -> Replicas {
    let azurites = Azurite::start_replicas(3);
    let endpoints = azurites.iter().map(Azurite::endpoint).collect();
    Replicas {
        azurites,
        dir: tempfile::tempdir().unwrap(),
        blob: format!("replicas-{}", fastrand::u32(..)),
        endpoints,
    }
}

/// A config of a group on `blob` whose replicas are at `endpoints` (Azurite's well-known account
/// at each), in `dir`.
fn replica_config(dir: &Path, blob: &str, endpoints: &[String]) -> PathBuf {
    replica_config_with_key(dir, blob, endpoints, EMULATOR_KEY)
}

/// [`replica_config`] with every replica's account key `key`.
fn replica_config_with_key(dir: &Path, blob: &str, endpoints: &[String], key: &str) -> PathBuf {
    let tables: String = endpoints
        .iter()
        .map(|endpoint| {
            format!(
                "[[storage.replica]]\nconnection_string = {:?}\n\n",
                connection_string(EMULATOR_ACCOUNT, key, endpoint)
            )
        })
        .collect();
    let path = dir.join("replicas.toml");
    std::fs::write(
        &path,
        format!(
            "identity = \"replica-checker\"\n\n[storage]\ncontainer = \"tests\"\nblob = {blob:?}\n\n\
             {tables}[child]\ncommand = [\"true\"]\n"
        ),
    )
    .unwrap();
    path
}

/// `leasehold check -c CONFIG`: its exit code and what it printed.
fn check(config: &Path) -> (Option<i32>, String) {
    let (out, ended) = leasehold_within(&["check", "-c", config.to_str().unwrap()], secs(60));
    assert!(ended, "check did not end");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), text)
}

/// The line of `text` that starts with `start`.
fn line<'a>(text: &'a str, start: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no line starting {start:?} in:\n{text}"))
}

/// Three accounts, each proved in turn on its own line: every one reached, its credential
/// accepted, its container and blob created, its lease acquired and released. Each Azurite
/// then holds the blob, free.
#[test]
fn check_proves_each_of_three_accounts() {
    let Replicas {
        azurites,
        dir,
        blob,
        endpoints,
    } = three_replicas();
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (code, text) = check(&config);
    eprintln!("{text}");
    assert_eq!(code, Some(0), "{text}");
    assert!(
        line(
            &text,
            "ok    replicas     3 storage accounts; the lease is held on a majority (2)"
        )
        .contains("changing the set needs the group stopped or a new blob name"),
        "{text}"
    );
    for (i, endpoint) in endpoints.iter().enumerate() {
        let n = i + 1;
        assert!(
            line(&text, &format!("ok    endpoint     replica {n}: ")).starts_with(&format!(
                "ok    endpoint     replica {n}: {endpoint} answered in "
            )),
            "{text}"
        );
        for (step, said) in [
            (
                "credentials",
                "accepted (account key for account devstoreaccount1)",
            ),
            ("container", "tests "),
            (
                "blob",
                &format!("{blob} created, stamped for this replica set (create_if_missing)"),
            ),
            (
                "lease",
                "acquire and release permitted (the lease was free)",
            ),
        ] {
            let start = format!("ok    {step:<12} replica {n}: {said}");
            line(&text, &start);
        }
    }
    assert_eq!(
        line(&text, "ok    replicas     all"),
        "ok    replicas     all 3 accounts passed"
    );
    assert!(
        !text.contains(&EMULATOR_KEY[..12]),
        "the key leaked: {text}"
    );
    // Three accounts, not one three times: each has the blob, stamped with the set's
    // fingerprint and an id of its own, and its lease is free again.
    let lowered: Vec<String> = endpoints.iter().map(|e| e.to_ascii_lowercase()).collect();
    let fingerprint = Fingerprint::of(&lowered).to_string();
    let mut ids = Vec::new();
    for azurite in &azurites {
        let admin = BlobAdmin::new(&azurite.connection_string(), "tests", &blob);
        assert!(admin.exists(), "no blob on {}", azurite.endpoint());
        let stamp = admin.metadata().expect("read the stamp");
        assert_eq!(
            stamp.get("leasehold_replica_set"),
            Some(&fingerprint),
            "{stamp:?}"
        );
        ids.push(stamp.get("leasehold_replica_id").cloned().expect("an id"));
        assert!(
            admin.lease_is_free(),
            "a probe lease left on {}",
            azurite.endpoint()
        );
    }
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "an id of its own each");
    // Checked again, each blob is found stamped for the set.
    let (code, text) = check(&config);
    assert_eq!(code, Some(0), "{text}");
    line(
        &text,
        &format!("ok    blob         replica 1: {blob} exists, stamped for this replica set"),
    );
}

/// A replica whose blob was made without the set's stamp (by hand, or by a build before the
/// stamp) counts for no member of the set: `check` fails it by name, with what to do, and says
/// the two stamped ones are still a majority.
#[test]
fn check_fails_a_replica_blob_without_the_sets_stamp() {
    let Replicas {
        azurites,
        dir,
        blob,
        endpoints,
    } = three_replicas();
    BlobAdmin::new(&azurites[1].connection_string(), "tests", &blob).create(&[]);
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (code, text) = check(&config);
    eprintln!("{text}");
    assert_eq!(code, Some(1), "{text}");
    line(
        &text,
        &format!(
            "FAIL  blob         replica 2: {blob} exists but is not stamped for this replica set"
        ),
    );
    assert!(
        text.contains("hint: delete it (leasehold creates it stamped)"),
        "{text}"
    );
    assert!(
        line(&text, "FAIL  replicas     replica 2 failed").contains("are a majority"),
        "{text}"
    );
}

/// One account listed twice, under two endpoints (here its own and a proxy's in front of it):
/// each is proved on its own, and then `check` fails, naming the two replicas that carry one
/// replica id, which the set counts once.
#[test]
fn check_fails_one_account_listed_twice() {
    let Replicas {
        azurites,
        dir,
        blob,
        mut endpoints,
    } = three_replicas();
    let proxy = FaultProxy::start(azurites[0].port);
    endpoints[2] = proxy.endpoint();
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (code, text) = check(&config);
    eprintln!("{text}");
    assert_eq!(code, Some(1), "{text}");
    line(&text, "ok    replicas     all 3 accounts passed");
    line(
        &text,
        "FAIL  replicas     replicas 1 and 3 carry one replica id: one account listed twice",
    );
    assert!(text.contains("hint: list each account once"), "{text}");
    drop(proxy);
}

/// A replica whose port nobody listens on fails `check` by name (its index, its endpoint, its
/// table's key in the hint); the others are still proved, and the last line says that the two
/// that passed are a majority.
#[test]
fn check_names_the_replica_it_cannot_reach() {
    let azurites = Azurite::start_replicas(2);
    let dir = tempfile::tempdir().unwrap();
    let blob = format!("replicas-{}", fastrand::u32(..));
    let closed = format!("http://127.0.0.1:{}/devstoreaccount1", free_port());
    let endpoints = [
        azurites[0].endpoint(),
        closed.clone(),
        azurites[1].endpoint(),
    ];
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (code, text) = check(&config);
    eprintln!("{text}");
    assert_eq!(code, Some(1), "{text}");
    assert!(
        line(&text, "FAIL  endpoint     replica 2: ")
            .starts_with(&format!("FAIL  endpoint     replica 2: {closed}: ")),
        "{text}"
    );
    assert!(
        text.contains("hint: check [storage.replica 2].endpoint"),
        "{text}"
    );
    for n in [1, 3] {
        line(
            &text,
            &format!("ok    lease        replica {n}: acquire and release permitted"),
        );
    }
    assert!(
        !text
            .lines()
            .any(|l| l.contains("replica 2: ") && l.starts_with("ok")),
        "{text}"
    );
    assert_eq!(
        line(&text, "FAIL  replicas"),
        "FAIL  replicas     replica 2 failed; the 2 that passed are a majority, so the group \
         could lead, but 1 more down would stop it"
    );
}

/// The three replicas of a group on `blob`, each Azurite's blob created as a member of the set
/// creates it: stamped with the set's fingerprint (the core's, over the endpoints in order,
/// letter case aside) and an id of its own. Returns an admin per replica.
fn stamped_replicas(azurites: &[Azurite], blob: &str) -> (Vec<BlobAdmin>, String) {
    let endpoints: Vec<String> = azurites
        .iter()
        .map(|a| a.endpoint().to_ascii_lowercase())
        .collect();
    let fingerprint = Fingerprint::of(&endpoints).to_string();
    let admins: Vec<BlobAdmin> = azurites
        .iter()
        .map(|a| BlobAdmin::new(&a.connection_string(), "tests", blob))
        .collect();
    for admin in &admins {
        let id = format!("{:032x}", fastrand::u128(..));
        admin.create(&[
            ("leasehold_replica_set", fingerprint.as_str()),
            ("leasehold_replica_id", id.as_str()),
        ]);
    }
    (admins, fingerprint)
}

/// What a holder writes on a replica it holds, beside its stamp (kept as the blob has it).
fn hold(admin: &BlobAdmin, identity: &str, epoch: u64) {
    let mut pairs = admin.metadata().expect("read the stamp");
    pairs.insert("leasehold_holder".into(), identity.into());
    pairs.insert("leasehold_epoch".into(), epoch.to_string());
    pairs.insert(
        "leasehold_acquired_at".into(),
        "2026-11-22T03:52:07Z".into(),
    );
    pairs.remove("leasehold_lease_id");
    let pairs: Vec<(&str, &str)> = pairs
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    admin
        .hold(secs(60), &pairs)
        .expect("hold the replica's lease");
}

/// `leasehold ARGS -c CONFIG`, ended within 30 s: its output.
fn run(args: &[&str], config: &Path) -> Output {
    let mut full = args.to_vec();
    full.extend(["-c", config.to_str().unwrap()]);
    let (out, ended) = leasehold_within(&full, secs(30));
    assert!(ended, "{full:?} did not end");
    out
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `status --json`: its exit code, the object, and stderr.
fn status_json(config: &Path) -> (Option<i32>, Value, String) {
    let out = run(&["status", "--json"], config);
    let (stdout, stderr) = text(&out);
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not one JSON object ({e}): {stdout}{stderr}"));
    (out.status.code(), report, stderr)
}

/// Each replica's field `key` in a `status --json` report.
fn each(report: &Value, key: &str) -> Vec<Value> {
    report["replicas"]
        .as_array()
        .unwrap_or_else(|| panic!("no replicas: {report}"))
        .iter()
        .map(|r| r[key].clone())
        .collect()
}

/// The secrets no output may carry: the key, and each replica's connection string.
fn assert_quiet(name: &str, output: &str, azurites: &[Azurite]) {
    let strings: Vec<String> = azurites.iter().map(Azurite::connection_string).collect();
    let mut secrets = vec![EMULATOR_KEY];
    secrets.extend(strings.iter().map(String::as_str));
    assert_no_secret(name, output, &secrets);
}

/// `status` on three replicas: each replica on its own row, and whether one holder has a
/// majority. Unheld: three rows, no majority. Held by hand on two of three (as a holder writes):
/// no majority while the blobs are younger than the lock-delay (about 17 s), then that holder
/// leads, on a majority. One Azurite stopped: status still answers (exit 0), the
/// replica's row says it could not be reached; two stopped: no majority could be read, exit 1
/// with one line naming them.
#[test]
fn status_reads_each_replica_and_tells_the_majority() {
    let Replicas {
        mut azurites,
        dir,
        blob,
        endpoints,
    } = three_replicas();
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (admins, fingerprint) = stamped_replicas(&azurites, &blob);
    let mut outputs = Vec::new();

    let (code, report, stderr) = status_json(&config);
    eprintln!("{report:#}");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(each(&report, "replica"), [1, 2, 3].map(Value::from));
    assert_eq!(
        each(&report, "lease_state"),
        ["available"; 3].map(Value::from)
    );
    assert_eq!(each(&report, "stamp"), ["this_set"; 3].map(Value::from));
    assert_eq!(
        each(&report, "fingerprint"),
        [fingerprint.as_str(); 3].map(Value::from)
    );
    let shown: Vec<Value> = endpoints.iter().map(|e| Value::from(e.as_str())).collect();
    assert_eq!(each(&report, "endpoint"), shown);
    assert!(
        each(&report, "latency_ms")
            .iter()
            .all(|l| l.as_f64().is_some_and(|ms| ms > 0.0)),
        "{report}"
    );
    assert_eq!(report["majority"]["reached"], false, "{report}");
    assert_eq!(report["majority"]["needed"], 2, "{report}");
    assert_eq!(report["leader"], Value::Null, "{report}");
    // Just created: younger than the lock-delay (L + M and a second, 17 s by default).
    let young = each(&report, "young_for_s");
    assert!(
        young
            .iter()
            .all(|s| s.as_u64().is_some_and(|s| (1..=17).contains(&s))),
        "{report}"
    );
    let out = run(&["status"], &config);
    let (said, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}{stderr}");
    assert!(
        said.contains("replicas     3 accounts, a majority is 2: no holder has one\n"),
        "{said}"
    );
    assert!(
        said.starts_with("leader       none: no holder has a majority of the replicas (2 of 3)\n"),
        "{said}"
    );
    outputs.push(said);

    let epoch = 1_795_433_418_357_u64;
    hold(&admins[0], "w1", epoch);
    hold(&admins[2], "w1", epoch);
    // Held on two, but young: they count for nobody yet, and the table says why.
    let (code, report, stderr) = status_json(&config);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        each(&report, "young_for_s").iter().all(Value::is_u64),
        "{report}"
    );
    assert_eq!(report["majority"]["reached"], false, "{report}");
    assert_eq!(report["leader"], Value::Null, "{report}");
    let (said, _) = text(&run(&["status"], &config));
    assert!(said.contains("no (young, "), "{said}");
    outputs.push(said);
    let old = leasehold_testkit::wait::poll(secs(25), secs(1), || {
        let (_, report, _) = status_json(&config);
        let young = each(&report, "young_for_s");
        young.iter().all(Value::is_null).then_some(report)
    });
    let report = old.expect("the replicas older than the lock-delay within 25 s");
    eprintln!("{report:#}");
    assert_eq!(report["leader"], "w1", "{report}");
    let (code, report, stderr) = status_json(&config);
    eprintln!("{report:#}");
    assert_eq!(code, Some(0), "{stderr}");
    assert_eq!(report["leader"], "w1", "{report}");
    assert_eq!(report["epoch"], epoch, "{report}");
    assert_eq!(report["majority"]["reached"], true, "{report}");
    assert_eq!(report["majority"]["holder"], "w1", "{report}");
    assert_eq!(report["majority"]["counted"], 2, "{report}");
    assert_eq!(
        each(&report, "holder"),
        [Value::from("w1"), Value::Null, Value::from("w1")]
    );
    assert_eq!(
        each(&report, "lease_holder"),
        [
            Value::from("recorded"),
            Value::Null,
            Value::from("recorded")
        ]
    );
    assert_eq!(
        each(&report, "counts"),
        [true, false, true].map(Value::from)
    );
    let out = run(&["status"], &config);
    let (said, _) = text(&out);
    assert!(said.starts_with("leader       w1\n"), "{said}");
    assert!(
        said.contains(
            "replicas     3 accounts, a majority is 2: w1 holds a majority (2 count for it)\n"
        ),
        "{said}"
    );
    outputs.push(said);

    // One region down: the majority still answers.
    azurites[1].stop();
    let (code, report, stderr) = status_json(&config);
    eprintln!("{report:#}");
    assert_eq!(code, Some(0), "one replica down is no failure: {stderr}");
    assert!(stderr.is_empty(), "{stderr}");
    assert_eq!(report["leader"], "w1", "{report}");
    assert_eq!(report["majority"]["answered"], 2, "{report}");
    let down = &report["replicas"][1];
    assert_eq!(down["lease_state"], Value::Null, "{report}");
    let error = down["error"]
        .as_str()
        .unwrap_or_else(|| panic!("no error: {report}"));
    assert!(
        error.starts_with(&format!("cannot reach storage at {}: ", endpoints[1])),
        "{error}"
    );
    assert!(
        error.contains("check [storage.replica 2].endpoint"),
        "{error}"
    );
    let out = run(&["status"], &config);
    let (said, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}{stderr}");
    assert!(
        said.contains(&format!(
            "  replica 2: cannot reach storage at {}",
            endpoints[1]
        )),
        "{said}"
    );
    outputs.push(said);

    // Two down: who leads cannot be told.
    azurites[2].stop();
    let (code, report, stderr) = status_json(&config);
    eprintln!("{report:#}\n{stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(
            "leasehold: error: only 1 of 3 replicas answered, fewer than a majority (2)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "could not reach replica 2 at {}, replica 3 at {}",
            endpoints[1], endpoints[2]
        )),
        "{stderr}"
    );
    assert_eq!(report["leader"], Value::Null, "{report}");
    assert!(report["error"].as_str().is_some(), "{report}");
    outputs.push(format!("{report}{stderr}"));
    for (i, output) in outputs.iter().enumerate() {
        assert_quiet(&format!("status {i}"), output, &azurites);
    }
}

/// `status --watch` on replicas that all refuse the credentials ends at once, as on one
/// account (exit 3, one line): looking again cannot help until the config is fixed.
#[test]
fn status_watch_ends_when_every_replica_refuses_the_credentials() {
    let Replicas {
        azurites,
        dir,
        blob,
        endpoints,
    } = three_replicas();
    // A well-formed key that is not the account's.
    let wrong = azure_core::base64::encode((0..64).map(|_| fastrand::u8(..)).collect::<Vec<u8>>());
    let config = replica_config_with_key(dir.path(), &blob, &endpoints, &wrong);
    let args = [
        "status",
        "-c",
        config.to_str().unwrap(),
        "--watch",
        "--interval",
        "200ms",
    ];
    let (out, ended) = leasehold_within(&args, secs(30));
    let (said, stderr) = text(&out);
    eprintln!("{said}{stderr}");
    assert!(ended, "status --watch ended on refused credentials");
    assert_eq!(out.status.code(), Some(3), "{said}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("credentials"), "{stderr}");
    for n in 1..=3 {
        assert!(said.contains(&format!("replica {n}: ")), "{said}");
    }
    let output = format!("{said}{stderr}");
    assert_quiet("status --watch", &output, &azurites);
    assert_no_secret("status --watch", &output, &[&wrong]);
}

/// A replica whose blob is missing (wiped, or not made yet) holds no lease: `break` counts it
/// as free, says there is nothing to break there, and succeeds with the one it broke.
#[test]
fn break_counts_a_replica_without_its_blob_as_free() {
    let Replicas {
        azurites,
        dir,
        blob,
        endpoints,
    } = three_replicas();
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (admins, _) = stamped_replicas(&azurites, &blob);
    let epoch = 1_795_433_418_361_u64;
    hold(&admins[0], "w1", epoch);
    admins[1].delete();

    let out = run(&["break", "--period", "30s"], &config);
    let (said, stderr) = text(&out);
    eprintln!("{said}{stderr}");
    assert_eq!(out.status.code(), Some(0), "{said}{stderr}");
    let lines = [
        format!(
            "replica 1 ({}): broke the lease on tests/{blob} held by w1 (epoch {epoch}); it can \
             be acquired again in 30s\n",
            endpoints[0]
        ),
        format!(
            "replica 2 ({}): nothing to break: tests/{blob} does not exist\n",
            endpoints[1]
        ),
        format!(
            "replica 3 ({}): nothing to break: the lease on tests/{blob} is available\n",
            endpoints[2]
        ),
    ];
    for line in &lines {
        assert!(said.contains(line.as_str()), "{line:?} in:\n{said}");
    }
    assert!(
        said.ends_with(
            "the group's lease is broken: 3 of 3 replicas broken or not held, a majority (2); \
             its holder stops leading at its next renew\n"
        ),
        "{said}"
    );
    assert_quiet("break", &format!("{said}{stderr}"), &azurites);
}

/// `break` on three replicas breaks the lease on each, side by side, one line each, and
/// succeeds on a majority; with only one of three reachable it fails (exit 1) with one line
/// naming the two it could not reach.
#[test]
fn break_breaks_a_majority_and_names_the_replicas_it_cannot_reach() {
    let Replicas {
        mut azurites,
        dir,
        blob,
        endpoints,
    } = three_replicas();
    let config = replica_config(dir.path(), &blob, &endpoints);
    let (admins, _) = stamped_replicas(&azurites, &blob);
    let epoch = 1_795_433_418_360_u64;
    for admin in &admins {
        hold(admin, "w1", epoch);
    }

    let out = run(&["break", "--period", "30s"], &config);
    let (said, stderr) = text(&out);
    eprintln!("{said}{stderr}");
    assert_eq!(out.status.code(), Some(0), "{said}{stderr}");
    for (i, endpoint) in endpoints.iter().enumerate() {
        let line = format!(
            "replica {} ({endpoint}): broke the lease on tests/{blob} held by w1 (epoch {epoch}); \
             it can be acquired again in 30s\n",
            i + 1
        );
        assert!(said.contains(&line), "{line:?} in:\n{said}");
    }
    assert!(said.ends_with("the group's lease is broken: 3 of 3 replicas broken or not held, a majority (2); its holder stops leading at its next renew\n"), "{said}");
    let (_, report, _) = status_json(&config);
    assert_eq!(
        each(&report, "lease_state"),
        ["breaking"; 3].map(Value::from),
        "{report}"
    );
    let mut outputs = vec![said];

    azurites[1].stop();
    azurites[2].stop();
    let out = run(&["break", "--period", "30s"], &config);
    let (said, stderr) = text(&out);
    eprintln!("{said}{stderr}");
    assert_eq!(out.status.code(), Some(1), "{said}{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert_eq!(
        stderr.trim_end(),
        format!(
            "leasehold: error: broke or found free 1 of 3 replicas, fewer than a majority (2): \
             could not reach replica 2 at {}, replica 3 at {}; the holder may keep its majority: \
             run break again once they answer",
            endpoints[1], endpoints[2]
        )
    );
    assert!(said.contains(&format!("replica 1 ({}): broke the lease on tests/{blob} held by w1 (epoch {epoch}) (it was already being broken)", endpoints[0])), "{said}");
    for n in [2, 3] {
        assert!(
            said.contains(&format!(
                "replica {n} ({}): failed: cannot reach storage at ",
                endpoints[n - 1]
            )),
            "{said}"
        );
    }
    outputs.push(format!("{said}{stderr}"));
    for (i, output) in outputs.iter().enumerate() {
        assert_quiet(&format!("break {i}"), output, &azurites);
    }
}
