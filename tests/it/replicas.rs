//! `[[storage.replica]]` with the real binary: `check` proves three accounts (three Azurites,
//! each an account of its own) and names the one it cannot reach; `run`, `status` and `break`
//! refuse a replica config with one line until the elector leads on a majority.

use leasehold_testkit::azurite::connection_string;
use leasehold_testkit::process::assert_refused;
use leasehold_testkit::*;
use std::path::{Path, PathBuf};

/// A config of a group on `blob` whose replicas are at `endpoints` (Azurite's well-known account
/// at each), in `dir`.
fn replica_config(dir: &Path, blob: &str, endpoints: &[String]) -> PathBuf {
    let tables: String = endpoints
        .iter()
        .map(|endpoint| {
            format!(
                "[[storage.replica]]\nconnection_string = {:?}\n\n",
                connection_string(EMULATOR_ACCOUNT, EMULATOR_KEY, endpoint)
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
    let azurites = Azurite::start_replicas(3);
    let dir = tempfile::tempdir().unwrap();
    let blob = format!("replicas-{}", fastrand::u32(..));
    let endpoints: Vec<String> = azurites.iter().map(Azurite::endpoint).collect();
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
            ("blob", &format!("{blob} created (create_if_missing)")),
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
    // Three accounts, not one three times: each has the blob, and its lease is free again.
    for azurite in &azurites {
        let admin = BlobAdmin::new(&azurite.connection_string(), "tests", &blob);
        assert!(admin.exists(), "no blob on {}", azurite.endpoint());
        assert!(
            admin.lease_is_free(),
            "a probe lease left on {}",
            azurite.endpoint()
        );
    }
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

/// `run` refuses a replica config with one line and the config exit code (2), before it
/// touches storage or starts anything; so do `status` and `break`, which would see one account.
#[test]
fn run_refuses_replicas_until_the_quorum_lands() {
    let dir = tempfile::tempdir().unwrap();
    let endpoints: Vec<String> = (0..3)
        .map(|_| format!("http://127.0.0.1:{}/devstoreaccount1", free_port()))
        .collect();
    let config = replica_config(dir.path(), "replicas", &endpoints);
    let config = config.to_str().unwrap();
    let said = format!(
        "leasehold: error: {config}: [[storage.replica]] = 3 tables: the quorum of storage \
         accounts is not in this build yet (docs/quorum.md): only `leasehold check` takes \
         replicas for now, to prove each account; run on one [storage] account until it lands"
    );
    for args in [
        vec!["run", "-c", config],
        vec!["run", "-c", config, "--", "true"],
        vec!["status", "-c", config],
        vec!["break", "-c", config],
    ] {
        let (out, ended) = leasehold_within(&args, secs(20));
        assert!(ended, "{args:?} did not end");
        assert_refused(&format!("{args:?}"), &out, "docs/quorum.md");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr).trim_end(),
            said,
            "{args:?}"
        );
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// The library's `Elector::connect` refuses a replica config with the same line, as
/// `leasehold::Error::Config`: a program would otherwise lead on one account of the three.
#[tokio::test]
async fn the_library_refuses_replicas_too() {
    let dir = tempfile::tempdir().unwrap();
    let endpoints: Vec<String> = (0..3)
        .map(|_| format!("http://127.0.0.1:{}/devstoreaccount1", free_port()))
        .collect();
    let path = replica_config(dir.path(), "replicas", &endpoints);
    let config = leasehold::Config::from_file(&path).expect("the file parses");
    let err = leasehold::Elector::connect(&config)
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, leasehold::Error::Config(_)), "{err:?}");
    assert!(
        err.to_string().ends_with(
            "[[storage.replica]] = 3 tables: the quorum of storage accounts is not in this build \
             yet (docs/quorum.md): only `leasehold check` takes replicas for now, to prove each \
             account; run on one [storage] account until it lands"
        ),
        "{err}"
    );
}
