//! The daemon's metrics and liveness, on paused time.

use super::metrics::{EXIT_REASONS, HANDOFFS, HEALTH_RESULTS, WAKES_SENT, WAKES_TAKEN};
use super::*;
use crate::elector::wake::WakeSent;
use crate::elector::{Handoff, LeaseOp, Observer};
use crate::store::StoreError;
use crate::timing::{Deadline, Timing};
use std::time::Duration;
use time::OffsetDateTime;
use tokio::time::{Instant, advance};

#[tokio::test(start_paused = true)]
async fn liveness_allows_the_slowest_polling_and_a_cooldown() {
    // A follower polling every 20-24 s is alive until 3 × 24 s = 72 s without a request.
    let slow = Timing {
        acquire_interval: Duration::from_secs(20),
        ..Timing::default()
    };
    let t = Telemetry::new("t", "c", "b", &slow, 1);
    advance(Duration::from_secs(72)).await;
    assert_eq!(t.liveness(), Ok(()));
    advance(Duration::from_secs(1)).await;
    assert_eq!(t.liveness(), Err(Duration::from_secs(73)));

    // A daemon cooling down for 120 s sends nothing on purpose; the clock starts at rejoin.
    let t = Telemetry::for_tests();
    t.cooling_down(Instant::now() + Duration::from_secs(120));
    advance(Duration::from_secs(150)).await;
    assert_eq!(t.liveness(), Ok(()), "30 s after the rejoin");
    advance(Duration::from_secs(1)).await;
    assert_eq!(t.liveness(), Err(Duration::from_secs(31)));
}

/// The lines of `text` that are samples of `name` (its `_total` too), sorted.
/// Without the `lease` label every one carries, and without the counters still at 0.
fn samples(text: &str, name: &str) -> Vec<String> {
    let mut lines: Vec<String> = all_samples(text, name)
        .into_iter()
        .filter(|l| !(l.contains("_total") && l.ends_with(" 0")))
        .map(|l| {
            l.replace("lease=\"c/b\",", "")
                .replace("{lease=\"c/b\"}", "")
        })
        .collect();
    lines.sort();
    lines
}

/// The lines of `text` that are samples of `name` (its `_total` too), as they are.
fn all_samples(text: &str, name: &str) -> Vec<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with([' ', '{']) || rest.starts_with("_total"))
        })
        .map(str::to_owned)
        .collect()
}

/// Every labelled counter is there at 0 before its first event (an alert on
/// `increase(...)` counts the first one), every leasehold_ metric names its lease, the
/// build and the process are described, and the term's clock is there only while leading.
#[tokio::test(start_paused = true)]
async fn every_counter_starts_at_zero_and_names_its_lease() {
    let t = Timing::default();
    let telemetry = Telemetry::new("a", "c", "b", &t, 1);
    let text = telemetry.metrics_text();
    for op in LeaseOp::ALL {
        let line = format!(
            "leasehold_lease_operations_total{{lease=\"c/b\",op=\"{}\",result=\"ok\"}} 0",
            op.as_str()
        );
        assert!(text.contains(&line), "{line} in\n{text}");
    }
    for (name, label, values) in [
        (
            "leasehold_child_exits",
            "reason",
            &EXIT_REASONS.map(ExitReason::as_str)[..],
        ),
        (
            "leasehold_health_checks",
            "result",
            &HEALTH_RESULTS.map(HealthResult::as_str)[..],
        ),
        (
            "leasehold_handoffs",
            "result",
            &HANDOFFS.map(Handoff::as_str)[..],
        ),
        (
            "leasehold_wakeups_sent",
            "result",
            &WAKES_SENT.map(WakeSent::as_str)[..],
        ),
        (
            "leasehold_wakeups_received",
            "result",
            &WAKES_TAKEN.map(WakeTaken::as_str)[..],
        ),
    ] {
        for value in values {
            let line = format!("{name}_total{{lease=\"c/b\",{label}=\"{value}\"}} 0");
            assert!(text.contains(&line), "{line} in\n{text}");
        }
    }
    for line in [
        "leasehold_leadership_changes_total{lease=\"c/b\"} 0",
        "leasehold_members{lease=\"c/b\",state=\"live\"} 0",
        "leasehold_is_leader{lease=\"c/b\"} 0",
        concat!(
            "leasehold_build_info{version=\"",
            env!("CARGO_PKG_VERSION"),
            "\"} 1"
        ),
    ] {
        assert!(text.contains(line), "{line} in\n{text}");
    }
    assert!(!all_samples(&text, "process_resident_memory_bytes").is_empty());
    for line in text.lines().filter(|l| l.starts_with("leasehold_")) {
        assert!(
            line.starts_with("leasehold_build_info") || line.contains("lease=\"c/b\""),
            "{line}"
        );
    }
    // The term's clock: none while following; while leading, lag + time to the kill
    // deadline = L - M.
    assert!(all_samples(&text, "leasehold_renew_lag_seconds").is_empty());
    assert!(all_samples(&text, "leasehold_seconds_to_kill_deadline").is_empty());
    let deadline = Deadline::from_sent(crate::clock::now(), &t);
    telemetry.acquired(3, 0, OffsetDateTime::now_utc(), deadline);
    tokio::time::advance(Duration::from_secs(3)).await;
    let text = telemetry.metrics_text();
    let value = |name: &str| -> f64 {
        let lines = all_samples(&text, name);
        assert_eq!(lines.len(), 1, "{name}: {lines:?}");
        lines[0].rsplit_once(' ').unwrap().1.parse().unwrap()
    };
    let lag = value("leasehold_renew_lag_seconds");
    let to_kill = value("leasehold_seconds_to_kill_deadline");
    assert!((2.9..=3.1).contains(&lag), "{lag}");
    assert!((lag + to_kill - 14.0).abs() < 0.01, "{lag} + {to_kill}");
    telemetry.term_ended();
    let text = telemetry.metrics_text();
    assert!(all_samples(&text, "leasehold_renew_lag_seconds").is_empty());
}

/// With one slot the leader metrics read as before slots existed (no label); with three,
/// each is labelled by slot, and every slot's leader gauge is there from the start.
#[tokio::test(start_paused = true)]
async fn leader_metrics_are_labelled_by_slot_only_with_slots() {
    let t = Timing::default();
    let deadline = Deadline::from_sent(crate::clock::now(), &t);
    let now = OffsetDateTime::now_utc();
    let one = Telemetry::new("a", "c", "b", &t, 1);
    one.acquired(7, 0, now, deadline);
    Observer::handed_over(&one, Handoff::HandedOver);
    one.term_ended();
    let text = one.metrics_text();
    assert_eq!(
        samples(&text, "leasehold_is_leader"),
        ["leasehold_is_leader 0"]
    );
    assert_eq!(samples(&text, "leasehold_epoch"), ["leasehold_epoch 7"]);
    assert_eq!(
        samples(&text, "leasehold_leadership_changes"),
        ["leasehold_leadership_changes_total 2"]
    );
    assert_eq!(
        samples(&text, "leasehold_handoffs"),
        ["leasehold_handoffs_total{result=\"handed_over\"} 1"]
    );

    let three = Telemetry::new("a", "c", "b", &t, 3);
    assert_eq!(
        samples(&three.metrics_text(), "leasehold_is_leader"),
        [
            "leasehold_is_leader{slot=\"0\"} 0",
            "leasehold_is_leader{slot=\"1\"} 0",
            "leasehold_is_leader{slot=\"2\"} 0"
        ]
    );
    three.acquired(9, 2, now, deadline);
    let text = three.metrics_text();
    assert_eq!(
        samples(&text, "leasehold_is_leader"),
        [
            "leasehold_is_leader{slot=\"0\"} 0",
            "leasehold_is_leader{slot=\"1\"} 0",
            "leasehold_is_leader{slot=\"2\"} 1"
        ]
    );
    assert_eq!(
        samples(&text, "leasehold_epoch"),
        ["leasehold_epoch{slot=\"2\"} 9"]
    );
    Observer::handed_over(&three, Handoff::NoSuccessor);
    three.term_ended();
    let text = three.metrics_text();
    assert_eq!(
        samples(&text, "leasehold_handoffs"),
        ["leasehold_handoffs_total{slot=\"2\",result=\"no_successor\"} 1"]
    );
    assert_eq!(
        samples(&text, "leasehold_leadership_changes"),
        ["leasehold_leadership_changes_total{slot=\"2\"} 2"]
    );
    Observer::slot_mismatch(&three, Some(2));
    assert_eq!(
        samples(&three.metrics_text(), "leasehold_slot_mismatch"),
        ["leasehold_slot_mismatch 2"]
    );
}

/// The shipped systemd unit (deploy/systemd/leasehold.service) waits for watchdog pings longer
/// than the stall limit of the config it runs (deploy/systemd/leasehold.toml): the pings stop
/// only when the loop has stalled.
#[test]
fn the_shipped_systemd_watchdog_outlasts_the_stall_limit() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/systemd");
    let unit = std::fs::read_to_string(format!("{dir}/leasehold.service")).unwrap();
    let watchdog = unit
        .lines()
        .find_map(|l| l.strip_prefix("WatchdogSec="))
        .map(|v| humantime::parse_duration(v.trim()).expect("WatchdogSec"))
        .expect("WatchdogSec=");
    let config = crate::Config::from_file(format!("{dir}/leasehold.toml")).unwrap();
    let stall = super::state::stall_limit(&config.timing().unwrap());
    assert!(
        watchdog > stall,
        "WatchdogSec {watchdog:?} must exceed the stall limit {stall:?}"
    );
}

/// With replicas, each one's requests, latency and reachability are series of their own, and
/// the count of those answering stands beside the majority: a timeout or a failed connection
/// makes a replica unreachable, a refusal does not. One account shows none of them.
#[test]
fn replica_metrics_count_each_replica_and_the_majority() {
    let t = Timing::default();
    let one = Telemetry::new("a", "c", "b", &t, 1).with_replicas(0);
    Observer::replica_op(&one, 0, Duration::from_millis(3), None);
    assert!(!one.metrics_text().contains("leasehold_replica"));

    let three = Telemetry::new("a", "c", "b", &t, 1).with_replicas(3);
    let text = three.metrics_text();
    assert_eq!(
        samples(&text, "leasehold_replicas_majority"),
        ["leasehold_replicas_majority 2"]
    );
    assert_eq!(
        samples(&text, "leasehold_replicas_reachable"),
        ["leasehold_replicas_reachable 3"]
    );
    let ms = Duration::from_millis;
    Observer::replica_op(&three, 1, ms(3), None);
    Observer::replica_op(&three, 1, ms(2000), Some(&StoreError::TimedOut(ms(2000))));
    let refused = StoreError::Status {
        status: 409,
        code: Some("LeaseAlreadyPresent".into()),
    };
    Observer::replica_op(&three, 2, ms(40), Some(&refused));
    let text = three.metrics_text();
    assert_eq!(
        samples(&text, "leasehold_replica_reachable"),
        [
            "leasehold_replica_reachable{replica=\"1\"} 1",
            "leasehold_replica_reachable{replica=\"2\"} 0",
            "leasehold_replica_reachable{replica=\"3\"} 1"
        ]
    );
    assert_eq!(
        samples(&text, "leasehold_replicas_reachable"),
        ["leasehold_replicas_reachable 2"]
    );
    let requests = all_samples(&text, "leasehold_replica_requests");
    for line in [
        "leasehold_replica_requests_total{lease=\"c/b\",replica=\"2\",result=\"ok\"} 1",
        "leasehold_replica_requests_total{lease=\"c/b\",replica=\"2\",result=\"timeout\"} 1",
        "leasehold_replica_requests_total{lease=\"c/b\",replica=\"3\",result=\"LeaseAlreadyPresent\"} 1",
        "leasehold_replica_requests_total{lease=\"c/b\",replica=\"1\",result=\"ok\"} 0",
    ] {
        assert!(
            requests.iter().any(|s| s == line),
            "{line} in {requests:#?}"
        );
    }
}
