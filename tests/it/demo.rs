//! The README's "main job" command works: `cargo run --example demo` elects a leader among three
//! daemons, hands over when the leader is stopped, and shuts everything down on `q`.

use leasehold_testkit::*;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

#[test]
fn the_demo_elects_hands_over_and_quits() {
    let mut demo = Command::new(example_bin("demo"))
        .args(["--port", "0"])
        .env("LEASEHOLD_BIN", leasehold_bin())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the demo");
    let (tx, lines) = mpsc::channel();
    let stdout = demo.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            eprintln!("{line}");
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // Returns the first line that contains `needle` and passes `accept`.
    let wait_line = |needle: &str, accept: &dyn Fn(&str) -> bool, timeout: Duration| {
        let deadline = Instant::now() + timeout;
        while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            if line.contains(needle) && accept(&line) {
                return Some(line);
            }
        }
        None
    };
    let wait_for =
        |needle: &str, timeout: Duration| wait_line(needle, &|_| true, timeout).is_some();
    // "worker-N leads with epoch E": the epoch of the first leader of a blob is the wall clock in
    // milliseconds; each later leader's is larger.
    let epoch = |line: &str| -> Option<u64> {
        line.rsplit("leads with epoch ").next()?.trim().parse().ok()
    };
    // The child's output and the daemon's log reach the demo by two pipes, so the child's first
    // line can come before the demo has read who leads; a key pressed then finds nobody to stop.
    // Wait for the demo's word, then for the leader's next line (it prints one every 2 s).
    assert!(
        wait_line(
            " leads",
            // "demo: worker-2 leads", not "demo: worker-1 answers on ... (200 while it leads)".
            &|l| l.starts_with("demo: worker-") && l.ends_with(" leads"),
            Duration::from_secs(60)
        )
        .is_some(),
        "the demo names a first leader"
    );
    let first = wait_line(
        "leads with epoch",
        &|l| epoch(l).is_some(),
        Duration::from_secs(15),
    )
    .expect("the first leader's child");
    let first = epoch(&first).unwrap();
    let mut keys = demo.stdin.take().unwrap();
    keys.write_all(b"\n").unwrap(); // stop the leader gracefully
    assert!(
        wait_for(
            "demo: sending SIGTERM to the leader",
            Duration::from_secs(5)
        ),
        "the demo stops the leader"
    );
    assert!(
        wait_line(
            "leads with epoch",
            &|l| epoch(l).is_some_and(|e| e > first),
            Duration::from_secs(15)
        )
        .is_some(),
        "a second leader, with a larger epoch than {first}"
    );
    keys.write_all(b"q\n").unwrap();
    assert!(
        wait_for("demo: done", Duration::from_secs(30)),
        "the demo quits"
    );
    let status = demo.wait().unwrap();
    assert!(status.success(), "{status}");
}
