//! The shipped Prometheus rules (deploy/prometheus/alerts.yaml): `promtool check rules` accepts
//! them, and `promtool test rules` runs each alert on series that real daemons served against a
//! real Azurite: a leader, the same leader renewing late while storage is frozen, the group
//! with nobody leading, a child that keeps exiting, and one that crash-loops. The series promtool sees are those
//! scrapes' samples, names and labels as served, laid out on a timeline.
//!
//! promtool is Debian's `prometheus` package; the test installs it when it is missing and it
//! runs as root (as CI does), and fails with the command to run otherwise.

use leasehold_testkit::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// promtool, installed from Debian's `prometheus` package if it is missing.
fn promtool() -> PathBuf {
    if let Err(why) = leasehold_testkit::debian::promtool() {
        panic!("promtool is needed to check the alerting rules: {why}");
    }
    PathBuf::from("promtool")
}

fn rules() -> PathBuf {
    workspace_root().join("deploy/prometheus/alerts.yaml")
}

#[test]
fn promtool_accepts_the_rules() {
    let out = Command::new(promtool())
        .args(["check", "rules"])
        .arg(rules())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    eprintln!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");
    assert!(text.contains("SUCCESS: 6 rules found"), "{text}");
}

/// One scrape of one daemon: every sample of the metrics the rules use, with its labels as
/// served and the daemon's `instance` added, as Prometheus adds it.
pub(crate) struct Scrape(Vec<(BTreeMap<String, String>, String, f64)>);

impl Scrape {
    pub(crate) fn of(daemon: &Daemon) -> Self {
        let metrics = daemon.metrics().expect("/metrics");
        Self(
            metrics
                .samples
                .into_iter()
                .filter(|s| {
                    s.name.starts_with("leasehold_is_leader")
                        || s.name.starts_with("leasehold_renew_lag_seconds")
                        || s.name.starts_with("leasehold_seconds_to_kill_deadline")
                        || s.name.starts_with("leasehold_child_exits_total")
                        || s.name.starts_with("leasehold_child_quick_failures")
                        || s.name.starts_with("leasehold_replica")
                })
                .map(|s| {
                    let mut labels = s.labels;
                    labels.insert("instance".into(), daemon.identity.clone());
                    (labels, s.name, s.value)
                })
                .collect(),
        )
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0
            .iter()
            .find(|(l, n, _)| {
                n == name
                    && labels
                        .iter()
                        .all(|(k, v)| l.get(*k) == Some(&v.to_string()))
            })
            .map(|(_, _, v)| *v)
    }

    pub(crate) fn lease(&self) -> String {
        self.0[0].0["lease"].clone()
    }
}

/// promtool's input series: each scrape held for `steps` evaluation intervals, one after the
/// other; a series a scrape does not have is missing (`_`) for those steps.
fn input_series(phases: &[(&Scrape, usize)]) -> String {
    let mut series: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let key = |labels: &BTreeMap<String, String>, name: &str| {
        let labels: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
        format!("{name}{{{}}}", labels.join(","))
    };
    for (scrape, _) in phases {
        for (labels, name, _) in &scrape.0 {
            series.entry(key(labels, name)).or_default();
        }
    }
    for (scrape, steps) in phases {
        for (id, values) in series.iter_mut() {
            let value = scrape
                .0
                .iter()
                .find(|(l, n, _)| key(l, n) == *id)
                .map_or("_".to_owned(), |(_, _, v)| v.to_string());
            values.extend(std::iter::repeat_n(value, *steps));
        }
    }
    series
        .iter()
        .map(|(id, values)| {
            format!(
                "      - series: '{id}'\n        values: '{}'\n",
                values.join(" ")
            )
        })
        .collect()
}

/// Runs `promtool test rules` on `tests` (the `tests:` list of a unit test file), each test's
/// series at a 5 s interval.
pub(crate) fn promtool_test(dir: &Path, tests: &str) {
    let file = dir.join("alerts-test.yaml");
    let text = format!(
        "rule_files:\n  - {:?}\nevaluation_interval: 5s\ntests:\n{tests}",
        rules().display().to_string()
    );
    std::fs::write(&file, &text).unwrap();
    let out = Command::new(promtool())
        .args(["test", "rules"])
        .arg(&file)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!("{said}");
    assert!(out.status.success(), "promtool test rules:\n{said}\n{text}");
    assert!(said.contains("SUCCESS"), "{said}");
}

/// An alert expected to fire with `labels` and the rule's annotations for them.
pub(crate) fn firing(labels: &[(&str, &str)], summary: &str, description: &str) -> String {
    let labels: String = labels
        .iter()
        .map(|(k, v)| format!("              {k}: {v:?}\n"))
        .collect();
    format!(
        "          - exp_labels:\n{labels}            exp_annotations:\n              \
         summary: {summary:?}\n              description: {description:?}\n"
    )
}

/// One promtool test of `alert`: the phases' series, silent at `quiet_at`, firing at
/// `firing_at` with `firing` (from [`firing`]).
pub(crate) fn alert_test(
    alert: &str,
    phases: &[(&Scrape, usize)],
    quiet_at: &str,
    firing_at: &str,
    firing: String,
) -> String {
    format!(
        "  - interval: 5s\n    input_series:\n{}    alert_rule_test:\n      - eval_time: \
         {quiet_at}\n        alertname: {alert}\n        exp_alerts: []\n      - eval_time: \
         {firing_at}\n        alertname: {alert}\n        exp_alerts:\n{firing}",
        input_series(phases)
    )
}

#[test]
fn each_alert_fires_on_series_real_daemons_served() {
    // The leader's storage is frozen below: an Azurite of its own. The restarting child's
    // group does not need one.
    let azurite = Azurite::start();
    let group = Group::new(&azurite);
    let restarting = Group::shared();

    // A child that keeps exiting, restarted in place: its exits counted from 0.
    let r = restarting
        .launch(
            "r",
            "",
            "command = [\"sh\", \"-c\", \"sleep 1; exit 3\"]\non_exit = \"restart\"",
        )
        .http()
        .spawn();
    let before = Scrape::of(&r);
    let exited = [("reason", "exited")];
    assert_eq!(
        before.value("leasehold_child_exits_total", &exited),
        Some(0.0),
        "the exits counter is there at 0 before the first exit"
    );
    let exits = |d: &Daemon| {
        d.metrics()
            .map_or(0.0, |m| m.sum("leasehold_child_exits_total", &exited))
    };
    assert!(
        wait_until(secs(30), || exits(&r) >= 3.0),
        "three exits: {}",
        r.log()
    );
    let after = Scrape::of(&r);
    eprintln!(
        "r: exits {:?} -> {:?}",
        before.value("leasehold_child_exits_total", &exited),
        after.value("leasehold_child_exits_total", &exited)
    );
    drop(r);

    // A child that fails at once: its member backs off after each failure.
    let looping = Group::shared();
    let l = looping
        .launch("l", "", "command = [\"sh\", \"-c\", \"exit 1\"]")
        .http()
        .spawn();
    let in_a_row = |s: &Scrape| s.value("leasehold_child_quick_failures", &[]);
    let first = Scrape::of(&l);
    assert!(
        in_a_row(&first).is_some_and(|n| n < 3.0),
        "counted from 0: {:?}",
        in_a_row(&first)
    );
    let looped = wait_until_some(secs(30), || {
        let s = Scrape::of(&l);
        in_a_row(&s).is_some_and(|n| n >= 3.0).then_some(s)
    })
    .unwrap_or_else(|| panic!("three quick failures in a row:\n{}", l.log()));
    eprintln!(
        "l: quick failures in a row {:?} -> {:?}",
        in_a_row(&first),
        in_a_row(&looped)
    );
    drop(l);

    // A leader; then storage frozen: its renews get no answer, the lag grows.
    let a = group.launch("a", "", "").http().spawn();
    group.wait_first_start(secs(15)).expect("a leads");
    let leading = Scrape::of(&a);
    assert_eq!(leading.value("leasehold_is_leader", &[]), Some(1.0));
    let lag = |s: &Scrape| s.value("leasehold_renew_lag_seconds", &[]);
    assert!(lag(&leading).is_some_and(|l| l < 5.0), "renewing on time");
    azurite.freeze();
    let late = wait_until_some(secs(15), || {
        let s = Scrape::of(&a);
        lag(&s).is_some_and(|l| l > 7.5).then_some(s)
    });
    let late = late.expect("the renew lag passed 7.5 s while storage was frozen");
    eprintln!(
        "a, storage frozen: lag {:?}, to the kill deadline {:?}",
        lag(&late),
        late.value("leasehold_seconds_to_kill_deadline", &[])
    );
    // Its child is stopped at the stop deadline; nobody leads while storage stays frozen.
    let nobody = wait_until_some(secs(15), || {
        let s = Scrape::of(&a);
        (s.value("leasehold_is_leader", &[]) == Some(0.0)).then_some(s)
    })
    .expect("a stops leading");
    assert_eq!(lag(&nobody), None, "no lag gauge without a term");
    azurite.thaw();
    drop(a);

    let lease = leading.lease();
    let dir = tempfile::tempdir().unwrap();
    // 1: leading for a minute, then nobody for a minute: fires once nobody has led for 20 s
    // (L + 5 s), not before.
    let no_leader = alert_test(
        "LeaseholdNoLeader",
        &[(&leading, 12), (&nobody, 12)],
        "75s",
        "85s",
        firing(
            &[("lease", &lease), ("severity", "critical")],
            &format!("No leader for lease {lease}"),
            &format!(
                "No instance of {lease} has held its lease for more than L + 5 s; `leasehold \
                 status` shows the line of members and `leasehold check` what fails."
            ),
        ),
    );
    // 2: renewing on time, then the late scrape: fires at once, not before.
    let renew_lag = alert_test(
        "LeaseholdRenewLagNearDeadline",
        &[(&leading, 12), (&late, 2)],
        "55s",
        "60s",
        firing(
            &[
                ("instance", "a"),
                ("lease", &lease),
                ("severity", "warning"),
            ],
            &format!("a is late renewing lease {lease}"),
            &format!(
                "The leader's renews of {lease} are failing or slow: it stops its child once \
                 the kill deadline is stop_timeout away. Look at its log (renew lines with the \
                 time left) and at storage."
            ),
        ),
    );
    // 3: no exit for five minutes, then three: fires on the first three.
    let child_lease = before.lease();
    let child = alert_test(
        "LeaseholdChildRestarting",
        &[(&before, 60), (&after, 60)],
        "295s",
        "305s",
        firing(
            &[
                ("instance", "r"),
                ("lease", &child_lease),
                ("severity", "warning"),
            ],
            &format!("The child of r keeps ending ({child_lease})"),
            &format!(
                "The child leasehold runs for {child_lease} on r ended by itself, could not \
                 start or failed its health checks at least 3 times in 15 minutes."
            ),
        ),
    );
    // 4: one or two quick failures for five minutes, then three in a row: fires at once.
    let looping_lease = first.lease();
    let crash_loop = alert_test(
        "LeaseholdChildCrashLooping",
        &[(&first, 60), (&looped, 60)],
        "295s",
        "305s",
        firing(
            &[
                ("instance", "l"),
                ("lease", &looping_lease),
                ("severity", "warning"),
            ],
            &format!("The child of l crash-loops ({looping_lease})"),
            &format!(
                "The child leasehold runs for {looping_lease} on l failed soon after each of \
                 its last three starts or more; the instance backs off between attempts \
                 (leasehold status shows the last failure). Look at the child's output in its \
                 log."
            ),
        ),
    );
    promtool_test(
        dir.path(),
        &format!("{no_leader}{renew_lag}{child}{crash_loop}"),
    );
}
