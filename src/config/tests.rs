//! The config's rules, each refused with its one line.

use super::testing::{GOOD, load, refused};
use super::*;
use crate::timing::Timing;
use std::path::Path;
use std::time::Duration;

#[test]
fn defaults_follow_the_design() {
    let s = load(GOOD).unwrap();
    assert_eq!(s.group.timing.duration, Duration::from_secs(15));
    assert_eq!(s.group.timing.renew_interval, Duration::from_secs(4));
    assert_eq!(s.group.timing.acquire_interval, Duration::from_secs(1));
    assert_eq!(s.group.timing.safety_margin, Duration::from_secs(1));
    assert_eq!(s.group.timing.stop_timeout, Duration::from_secs(5));
    assert_eq!(s.group.storage.container, "leasehold");
    assert_eq!(
        s.group.storage.endpoint,
        "http://127.0.0.1:10000/devstoreaccount1"
    );
    assert_eq!(s.group.storage.account, "devstoreaccount1");
    assert_eq!(s.child.on_exit, OnExit::Release);
    assert_eq!(s.child.stop_signal, nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn bad_input_names_key_and_rule() {
    let cases: &[(&str, &str, &str)] = &[
        (
            "[lease]\nduration = \"10s\"",
            "[lease].duration",
            "between 15s and 60s",
        ),
        (
            "[lease]\nduration = \"61s\"",
            "[lease].duration",
            "between 15s and 60s",
        ),
        (
            "[lease]\nduration = \"15500ms\"",
            "[lease].duration",
            "whole number",
        ),
        (
            "[lease]\nrenew_interval = \"6s\"",
            "[lease]",
            "2*renew_interval + stop_timeout + safety_margin <= duration",
        ),
        (
            "[lease]\ndurration = \"15s\"",
            "[lease].durration",
            "unknown key, expected one of `duration`",
        ),
        ("[bogus]\nx = 1", "bogus", "unknown key"),
        (
            "[lease]\nsafety_margin = \"0s\"",
            "[lease].safety_margin",
            "at least 500ms",
        ),
        (
            "[lease]\nacquire_interval = \"500000000000y\"",
            "[lease].acquire_interval",
            "between 100ms and 1h",
        ),
        (
            "[lease]\nrenew_interval = \"16s\"",
            "[lease].renew_interval",
            "at most the lease duration (15s)",
        ),
        (
            "[lease]\nduration = \"fast\"",
            "[lease].duration",
            "t.toml:",
        ),
    ];
    for (extra, key, rule) in cases {
        let text = format!("{GOOD}{extra}\n");
        let err = load(&text).expect_err(extra).to_string();
        assert!(err.contains(key), "{extra}: {err}");
        assert!(err.contains(rule), "{extra}: {err}");
        assert!(!err.contains('\n'), "{extra}: {err}");
    }
}

#[test]
fn slots_are_1_to_64() {
    assert_eq!(load(GOOD).unwrap().group.slots, 1, "default");
    let with = |n: &str| format!("{GOOD}[lease]\nslots = {n}\n");
    assert_eq!(load(&with("64")).unwrap().group.slots, 64);
    for bad in ["0", "65", "-1", "99999999999"] {
        let err = refused(&with(bad));
        assert!(err.contains("[lease].slots"), "{bad}: {err}");
        assert!(err.contains("from 1 to 64"), "{bad}: {err}");
        assert!(!err.contains('\n'), "{bad}: {err}");
    }
    assert!(refused(&with("\"two\"")).contains("[lease].slots"));
}

#[test]
fn the_smallest_safety_margin_is_accepted() {
    let text = format!("{GOOD}[lease]\nsafety_margin = \"500ms\"\n");
    assert_eq!(
        load(&text).unwrap().group.timing.safety_margin,
        leasehold_core::timing::MIN_SAFETY_MARGIN
    );
}

#[test]
fn health_rules() {
    let with = |body: &str| {
        GOOD.replace(
            "command = [\"true\"]",
            &format!("command = [\"true\"]\n[child.health]\n{body}"),
        )
    };
    let h = load(&with("http = \"http://127.0.0.1:8080/health\""))
        .unwrap()
        .child
        .health
        .unwrap();
    assert_eq!(h.interval, Duration::from_secs(5));
    assert_eq!(h.failures, 3);
    assert_eq!(h.cooldown, Duration::from_secs(10));
    let bad: &[(&str, &str)] = &[
        ("interval = \"1s\"", "give exactly one of them"),
        (
            "command = [\"x\"]\nhttp = \"http://h/x\"",
            "give exactly one of them",
        ),
        ("command = []", "[child.health].command"),
        ("http = \"ftp://h/x\"", "[child.health].http"),
        (
            "http = \"http://h/health\"\ntimeout = \"6s\"",
            "checks never overlap",
        ),
        (
            "http = \"http://h/health\"\nfailures = 0",
            "[child.health].failures",
        ),
        (
            "http = \"http://h/health\"\ncooldown = \"1s\"",
            "[child.health].cooldown",
        ),
        ("http = \"http://h/health\"\nretries = 3", "unknown key"),
    ];
    for (body, needle) in bad {
        let err = refused(&with(body));
        assert!(err.contains(needle), "{body}: {err}");
    }
}

#[test]
fn child_rules() {
    let empty = GOOD.replace("command = [\"true\"]", "command = []");
    assert!(refused(&empty).contains("[child].command"));
    let sig = GOOD.replace(
        "command = [\"true\"]",
        "command = [\"true\"]\nstop_signal = \"SIGBOGUS\"",
    );
    assert!(refused(&sig).contains("[child].stop_signal"));
    let short = GOOD.replace(
        "command = [\"true\"]",
        "command = [\"true\"]\nstop_signal = \"hup\"",
    );
    assert_eq!(
        load(&short).unwrap().child.stop_signal,
        nix::sys::signal::Signal::SIGHUP
    );
}

#[test]
fn crash_backoff_rules() {
    let with = |lines: &str| {
        GOOD.replace(
            "command = [\"true\"]",
            &format!("command = [\"true\"]\n{lines}"),
        )
    };
    let b = load(GOOD).unwrap().child.crash_backoff.unwrap();
    assert_eq!((b.first, b.max, b.window), (secs(1), secs(60), secs(60)));
    let off = with("crash_backoff = \"off\"");
    assert_eq!(load(&off).unwrap().child.crash_backoff, None);
    let b = load(&with(
        "crash_backoff = \"500ms\"\ncrash_backoff_max = \"10s\"\ncrash_window = \"5m\"",
    ))
    .unwrap()
    .child
    .crash_backoff
    .unwrap();
    assert_eq!(
        (b.first, b.max, b.window),
        (Duration::from_millis(500), secs(10), secs(300))
    );
    let bad: &[(&str, &str)] = &[
        (
            "crash_backoff = \"soon\"",
            "[child].crash_backoff = \"soon\": must be \"off\" or a duration between 100ms and 1h",
        ),
        ("crash_backoff = \"10ms\"", "[child].crash_backoff"),
        (
            "crash_backoff = \"2m\"",
            "[child].crash_backoff_max = \"1m\": must be at least crash_backoff (2m)",
        ),
        ("crash_backoff_max = \"2h\"", "[child].crash_backoff_max"),
        (
            "crash_window = \"0s\"",
            "[child].crash_window = \"0s\": must be between 1s and 24h",
        ),
    ];
    for (lines, needle) in bad {
        let err = refused(&with(lines));
        assert!(err.contains(needle), "{lines}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn without_a_file_every_key_has_its_default_and_overrides_replace_them() {
    let env = |k: &str| {
        (k == credentials::ENV_CONNECTION_STRING).then(|| "UseDevelopmentStorage=true".into())
    };
    let overrides = Overrides {
        blob: Some("nightly".into()),
        renew_interval: Some(secs(3)),
        command: vec!["true".into()],
        ..Overrides::default()
    };
    let s = Config::without_file(&overrides).validate(&env).unwrap();
    assert_eq!(
        s.group.timing,
        Timing {
            renew_interval: secs(3),
            ..Timing::default()
        }
    );
    assert_eq!(s.group.storage.blob, "nightly");
    assert_eq!(s.group.storage.container, "leasehold");
    assert!(s.group.storage.create_if_missing);
    assert_eq!(s.child.command, ["true"]);
    assert_eq!(
        s.child.on_exit,
        OnExit::Release,
        "the config's default; run decides"
    );
    assert!(s.group.http_listen.is_none());
}

#[test]
fn a_rule_broken_by_an_override_names_its_flag_and_one_broken_by_the_file_its_key() {
    let with = |text: &str, o: Overrides| {
        let mut config = Config::parse(Path::new("t.toml"), text).unwrap();
        config.apply(&o);
        config.validate(&testing::no_env).unwrap_err().to_string()
    };
    let renew = |d| Overrides {
        renew_interval: Some(d),
        ..Overrides::default()
    };
    assert_eq!(
        with(GOOD, renew(secs(20))),
        "--renew-interval 20s: must be at least 1s and at most the lease duration (15s)"
    );
    let from_file = format!("{GOOD}[lease]\nrenew_interval = \"20s\"\n");
    assert_eq!(
        with(&from_file, Overrides::default()),
        "t.toml: [lease].renew_interval = \"20s\": must be at least 1s and at most the lease \
         duration (15s)"
    );
    // The rule that ties the timings together names the flags given, with every value.
    let both = Overrides {
        lease_duration: Some(secs(20)),
        ..renew(secs(9))
    };
    assert_eq!(
        with(GOOD, both),
        "--lease-duration 20s --renew-interval 9s: timing rule 2*renew_interval + \
         stop_timeout + safety_margin <= duration is broken (2*9s + 5s + 1s = 24s > 20s); \
         lengthen the lease duration or shorten the others"
    );
    // A file value out of range under a flag's duration still names the file's key.
    let err = with(
        &from_file,
        Overrides {
            lease_duration: Some(secs(16)),
            ..Overrides::default()
        },
    );
    assert!(
        err.starts_with("t.toml: [lease].renew_interval = \"20s\""),
        "{err}"
    );
    let blob = Overrides {
        blob: Some("a//b".into()),
        ..Overrides::default()
    };
    assert!(with(GOOD, blob).starts_with("--blob \"a//b\": "));
}
