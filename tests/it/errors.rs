//! The rough edges a newcomer meets first, each with the one line it gets: `leasehold: error:
//! ...` on stderr, naming what is wrong, where, and how to fix it, with the documented exit
//! code; against a real Azurite with the real binary. (`--try` against storage that cannot be
//! reached, and the one-shot's other endings, are in oneliner.rs; two credentials, one from
//! the environment, in credentials.rs.)

use leasehold_testkit::*;
use std::path::Path;
use std::process::Output;

/// The one line on stderr, checked to be the only one and in the common format; returns it.
fn one_error_line(name: &str, out: &Output, code: i32) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{name}: {stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{name}: one line: {stderr}");
    assert!(
        lines[0].starts_with("leasehold: error: "),
        "{name}: {stderr}"
    );
    lines[0].to_owned()
}

/// A config of `group` whose container or blob is `container`/`blob` instead.
fn config_for(group: &Group, dir: &Path, container: &str, blob: &str) -> String {
    let path = dir.join(format!("{container}-{blob}.toml"));
    std::fs::write(
        &path,
        format!(
            "[storage]\nconnection_string = {:?}\ncontainer = {container:?}\nblob = {blob:?}\n",
            group.connection_string
        ),
    )
    .unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn status_and_break_on_a_missing_blob_or_container_name_it_and_the_likely_fix() {
    let azurite = Azurite::shared();
    let group = Group::new(azurite);
    let endpoint = azurite.endpoint();
    let dir = tempfile::tempdir().unwrap();
    // The container exists (the group's), the blob does not: nothing has run in it yet.
    leasehold(
        &[
            "run",
            "--try",
            "-c",
            &config_for(&group, dir.path(), &group.container, "first"),
            "--",
            "true",
        ],
        &[],
    );
    let no_blob = config_for(&group, dir.path(), &group.container, "nothing-ran-here");
    let no_container = config_for(&group, dir.path(), "no-such-container", "b");
    for (name, config, missing, key) in [
        (
            "blob",
            &no_blob,
            "lease blob \"nothing-ran-here\"",
            "[storage].blob",
        ),
        (
            "container",
            &no_container,
            "container \"no-such-container\"",
            "[storage].container",
        ),
    ] {
        for command in ["status", "break"] {
            let out = leasehold(&[command, "-c", config], &[]);
            let line = one_error_line(&format!("{command}, no {name}"), &out, 1);
            for needle in [
                missing,
                &endpoint,
                key,
                "typo",
                "nothing has run in this group yet",
            ] {
                assert!(
                    line.contains(needle),
                    "{command}, no {name}: {needle}: {line}"
                );
            }
            assert!(out.stdout.is_empty(), "{command}: nothing on stdout");
        }
        // --json: the same, and on stdout one JSON object that says it.
        let out = leasehold(&["status", "--json", "-c", config], &[]);
        let line = one_error_line(&format!("status --json, no {name}"), &out, 1);
        let answer: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("status --json, no {name}: {e}: {:?}", out.stdout));
        assert_eq!(
            answer["error"].as_str(),
            line.strip_prefix("leasehold: error: "),
            "{answer}"
        );
        assert_eq!(answer["endpoint"].as_str(), Some(endpoint.as_str()));
        assert!(answer["blob"].is_string() && answer["container"].is_string());
    }
    // A config error with --json: an object too.
    let out = leasehold(&["status", "--json", "--blob", "b"], &[]);
    one_error_line("status --json, no credential", &out, 2);
    let answer: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON object");
    assert!(
        answer["error"].as_str().unwrap().contains("credential"),
        "{answer}"
    );
}

#[test]
fn a_taken_port_and_a_missing_program_name_where_the_value_came_from() {
    let group = Group::shared();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = group.dir();
    let base = format!(
        "[storage]\nconnection_string = {:?}\ncontainer = {:?}\nblob = {:?}\n\n[child]\ncommand = [\"true\"]\n",
        group.connection_string, group.container, group.blob
    );
    let plain = dir.join("plain.toml");
    std::fs::write(&plain, &base).unwrap();
    let listens = dir.join("listens.toml");
    std::fs::write(&listens, format!("{base}\n[http]\nlisten = {addr:?}\n")).unwrap();
    let (plain, listens) = (plain.to_str().unwrap(), listens.to_str().unwrap());

    // A name, the arguments, the environment, and how the line names the address's source.
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, String);
    let cases: [Case; 3] = [
        (
            "the flag",
            vec!["run", "-c", plain, "--http-listen", &addr],
            vec![],
            format!("--http-listen = {addr}"),
        ),
        (
            "the file",
            vec!["run", "-c", listens],
            vec![],
            format!("[http].listen in {listens} = {addr}"),
        ),
        (
            "the variable",
            vec!["run", "-c", plain],
            vec![("LEASEHOLD_HTTP_LISTEN", addr.as_str())],
            format!("LEASEHOLD_HTTP_LISTEN = {addr}"),
        ),
    ];
    for (name, args, env, source) in cases {
        let (out, ended) = output_within(
            {
                let mut command = leasehold_command(&args);
                command.envs(env);
                command
            },
            secs(20),
        );
        assert!(ended, "{name}: a taken port ends the run");
        let line = one_error_line(name, &out, 2);
        assert!(line.contains(&source), "{name}: {line}");
        assert!(line.contains("pick another port"), "{name}: {line}");
    }
    drop(taken);

    // The child's program, named in the file: the line names the file too.
    let missing = dir.join("missing.toml");
    std::fs::write(
        &missing,
        base.replace("[\"true\"]", "[\"no-such-program-41\"]"),
    )
    .unwrap();
    let missing = missing.to_str().unwrap();
    let out = leasehold(&["run", "-c", missing], &[]);
    let line = one_error_line("missing program", &out, 2);
    assert!(
        line.contains(&format!("[child].command in {missing}"))
            && line.contains("\"no-such-program-41\"")
            && line.contains("full path"),
        "{line}"
    );
}

#[test]
fn status_and_break_help_show_only_the_flags_that_apply() {
    let flags = |command: &str| -> Vec<String> {
        let out = leasehold(&[command, "--help"], &[]);
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter(|w| w.starts_with("--"))
            .map(|w| w.trim_end_matches(',').to_owned())
            .collect()
    };
    let instance = ["--identity", "--priority", "--advertise"];
    let timing = ["--lease-duration", "--renew-interval", "--stop-timeout"];
    let storage = ["--blob", "--container", "--connection-string-file"];
    let status = flags("status");
    for flag in instance.iter().chain(&timing) {
        assert!(
            !status.iter().any(|f| f == flag),
            "status --help offers {flag}"
        );
    }
    for flag in storage.iter().chain(&["--http-listen", "--json"]) {
        assert!(
            status.iter().any(|f| f == flag),
            "status --help lacks {flag}"
        );
    }
    let broken = flags("break");
    for flag in instance.iter().chain(&["--http-listen"]) {
        assert!(
            !broken.iter().any(|f| f == flag),
            "break --help offers {flag}"
        );
    }
    // The default period is renew_interval + stop_timeout + safety_margin.
    for flag in storage.iter().chain(&timing).chain(&["--period"]) {
        assert!(
            broken.iter().any(|f| f == flag),
            "break --help lacks {flag}"
        );
    }
    // check checks everything run would use, and shows it.
    let check = flags("check");
    for flag in instance.iter().chain(&timing).chain(&storage) {
        assert!(check.iter().any(|f| f == flag), "check --help lacks {flag}");
    }
    // A flag that does not apply is refused in one line, not ignored.
    let out = leasehold(&["status", "--blob", "b", "--identity", "x"], &[]);
    let line = one_error_line("status --identity", &out, 2);
    assert!(line.contains("--identity"), "{line}");
}

#[test]
fn the_man_page_has_files_environment_and_exit_status() {
    for page in [vec!["man"], vec!["man", "run"], vec!["man", "status"]] {
        let out = leasehold(&page, &[]);
        assert!(out.status.success());
        let roff = String::from_utf8_lossy(&out.stdout);
        for section in [".SH FILES", ".SH ENVIRONMENT", ".SH \"EXIT STATUS\""] {
            assert!(roff.contains(section), "{page:?}: {section}");
        }
        for needle in [
            "LEASEHOLD_CONFIG",
            "AZURE_STORAGE_CONNECTION_STRING",
            "RUST_LOG",
            "LEASEHOLD_EPOCH",
            "leasehold.toml",
        ] {
            assert!(roff.contains(needle), "{page:?}: {needle}");
        }
        // Every documented exit code, 75 and 69 among them.
        for code in ["0", "1", "2", "3", "4", "69", "75", "128+N"] {
            assert!(
                roff.contains(&format!("\\fB{code}\\fR")),
                "{page:?}: exit code {code}"
            );
        }
    }
}
