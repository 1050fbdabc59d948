//! The crash-loop backoff (docs/configuration.md, "When the child ends by itself"): a child
//! that fails at once makes its member stand aside for a backoff that doubles (1 s, 2 s, 4 s
//! ... up to 60 s by default), logged at WARN with the next attempt's delay and counted in
//! `/metrics`. Alone, the member retries after each delay, so a fixed deploy leads again
//! within a minute; in a group, the others lead between its attempts.

use leasehold_testkit::*;
use std::path::Path;
use std::time::Duration;

/// `[child]` lines whose command runs the witness, which fails at once (exit 1) until the file
/// `fixed` exists, then runs as usual.
fn failing_until(group: &Group, fixed: &Path) -> String {
    let script = format!(
        "if [ -e {fixed:?} ]; then exec \"$@\"; else exec \"$@\" --exit-after 0s --exit-code 1; fi"
    );
    let mut argv = vec!["sh".to_owned(), "-c".to_owned(), script, "sh".to_owned()];
    argv.extend(group.witness_argv(&[]));
    let words: Vec<String> = argv.iter().map(|w| format!("{w:?}")).collect();
    format!("command = [{}]\n", words.join(", "))
}

/// The gaps between one member's starts.
fn gaps(starts: &[&Event]) -> Vec<Duration> {
    starts.windows(2).map(|w| w[1].t - w[0].t).collect()
}

/// A lone member whose child exits 1 at once: it retries after 1, 2, 4, 8, 16, 32 s, so it
/// starts its child at most 7 times in a minute (6 here: the seventh attempt comes 63 s after
/// the first), each failure a WARN line with the delay and a count in `/metrics`. Once the
/// child is fixed, it leads with it at its next attempt: within the longest backoff (60 s).
/// (Without the backoff: 7 terms in 8 s, each spending an epoch.)
#[test]
fn a_lone_member_whose_child_fails_at_once_backs_off_and_leads_once_fixed() {
    let group = Group::shared();
    let fixed = group.dir().join("fixed");
    let a = group
        .launch("a", "", &failing_until(&group, &fixed))
        .http()
        .spawn();
    let first = group.wait_first_start(secs(15)).expect("a leads");
    std::thread::sleep((first.t + secs(60)).saturating_sub(mono_now()));
    let history = group.history();
    let starts: Vec<&Event> = history
        .of_kind("start")
        .into_iter()
        .filter(|e| e.t <= first.t + secs(60))
        .collect();
    let gaps = gaps(&starts);
    eprintln!(
        "{} starts in the first 60 s, at gaps of {:?}",
        starts.len(),
        gaps.iter().map(|g| figure(*g)).collect::<Vec<_>>()
    );
    assert!(starts.len() <= 7, "at most 7 starts in 60 s");
    assert!(starts.len() >= 5, "alone, it retries after each delay");
    for (k, gap) in gaps.iter().enumerate() {
        assert!(
            *gap >= secs(1 << k),
            "attempt {} came {} after the one before, before its backoff {}",
            k + 2,
            figure(*gap),
            figure(secs(1 << k))
        );
    }
    let log = a.log();
    for delay in ["1s", "2s", "4s", "8s", "16s"] {
        let line = format!("the next attempt in {delay} (crash-loop backoff");
        assert!(log.contains(&line), "no WARN line with {delay}:\n{log}");
    }
    assert!(log.contains(" WARN "), "at WARN:\n{log}");
    let metrics = a.metrics().expect("its metrics");
    let backoffs = metrics.sum("leasehold_child_backoffs_total", &[]);
    let in_a_row = metrics.sum("leasehold_child_quick_failures", &[]);
    let status = a.status().expect("its /status");
    eprintln!(
        "leasehold_child_backoffs_total {backoffs}, leasehold_child_quick_failures {in_a_row}; \
         /status crash_loop {}, role {}",
        status["crash_loop"], status["role"]
    );
    assert!(backoffs >= (starts.len() - 1) as f64);
    assert!(in_a_row >= (starts.len() - 1) as f64);
    assert!(status["crash_loop"]["quick_failures"].as_u64() >= Some(5));
    // `leasehold status` on its host asks it too.
    let config = group.dir().join("a.toml");
    let listen = a.http.clone().expect("it serves HTTP");
    let said = leasehold(
        &[
            "status",
            "-c",
            config.to_str().unwrap(),
            "--http-listen",
            &listen,
        ],
        &[],
    );
    let said = String::from_utf8_lossy(&said.stdout);
    eprintln!("{said}");
    assert!(
        said.contains("quick failure(s) in a row, the last: exit code 1 after"),
        "{said}"
    );

    // Fixed: the next attempt leads with a child that runs.
    std::fs::write(&fixed, "").unwrap();
    let fixed_at = mono_now();
    let runs = |h: &History| {
        h.starts()
            .into_iter()
            .find(|s| s.t > fixed_at && h.of_kind("beat").iter().any(|b| b.pid == s.pid))
            .cloned()
    };
    let started = wait_until_some(secs(70), || runs(&group.history()))
        .expect("the fixed child runs")
        .t;
    eprintln!(
        "fixed: a leads with a child that runs {} later (bound: the longest backoff, 60 s)",
        figure(started - fixed_at)
    );
    assert!(started - fixed_at <= secs(60) + secs(2));
    history.assert_safe();
}

/// A group of three in which `a`'s child fails at once while `b`'s and `c`'s run 3 s and end
/// well (exit 0): `a` stands aside after each failure (its record says standby: the line passes
/// over it), so the others lead between its attempts, which come no sooner than its doubling
/// backoff; never two children at once.
#[test]
fn in_a_group_the_others_lead_between_a_crash_looping_member_s_attempts() {
    let group = Group::shared();
    let never = group.dir().join("never");
    let a = group
        .member("a")
        .child(&failing_until(&group, &never))
        .served()
        .join();
    group.wait_start_of("a", secs(15)).expect("a leads first");
    let healthy = group.witness_child(&["--exit-after", "3s"], "");
    let b = group.member("b").child(&healthy).join();
    let c = group.member("c").child(&healthy).join();
    let history = group
        .wait_history(secs(40), |h| {
            h.starts().iter().filter(|e| e.identity == "a").count() >= 4
        })
        .unwrap_or_else(|| {
            let h = group.history();
            panic!(
                "a made no four attempts: {:?}\n{}",
                h.starts()
                    .iter()
                    .map(|e| format!("{} {}", e.identity, figure(e.t)))
                    .collect::<Vec<_>>(),
                a.log()
            )
        });
    let starts = history.starts();
    let of_a: Vec<&Event> = starts
        .iter()
        .copied()
        .filter(|e| e.identity == "a")
        .collect();
    let gaps = gaps(&of_a);
    eprintln!(
        "a's attempts at gaps of {:?}; the terms: {:?}",
        gaps.iter().map(|g| figure(*g)).collect::<Vec<_>>(),
        starts
            .iter()
            .map(|e| e.identity.as_str())
            .collect::<Vec<_>>()
    );
    for (k, gap) in gaps.iter().enumerate() {
        assert!(*gap >= secs(1 << k), "a's attempt {} came early", k + 2);
        let between = starts
            .iter()
            .filter(|e| e.identity != "a" && e.t > of_a[k].t && e.t < of_a[k + 1].t)
            .count();
        assert!(
            between >= 1,
            "nobody led between a's attempts {} and {}",
            k + 1,
            k + 2
        );
    }
    let metrics = a.metrics().expect("a's metrics");
    assert!(metrics.sum("leasehold_child_backoffs_total", &[]) >= 3.0);
    group.verdict(&[&a, &b, &c]).assert_safe();
}
