//! The README's "main job" command works: `cargo run --example demo` elects a leader among three
//! daemons, hands over when the leader is stopped, and shuts everything down on `q` or Ctrl-C.

use leasehold_testkit::*;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The demo, in a process group of its own as a terminal starts it, and the lines it prints.
fn start_demo() -> (Child, mpsc::Receiver<String>) {
    let mut demo = Command::new(example_bin("demo"))
        .args(["--port", "0"])
        .env("LEASEHOLD_BIN", leasehold_bin())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0)
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
    (demo, lines)
}

/// The first line that contains `needle` and passes `accept`, within `timeout`.
fn wait_line(
    lines: &mpsc::Receiver<String>,
    needle: &str,
    accept: &dyn Fn(&str) -> bool,
    timeout: Duration,
) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        if line.contains(needle) && accept(&line) {
            return Some(line);
        }
    }
    None
}

/// Waits for the demo's own word on who leads: "demo: worker-2 leads", not "demo: worker-1
/// answers on ... (200 while it leads)".
fn wait_for_a_leader(lines: &mpsc::Receiver<String>) -> bool {
    wait_line(
        lines,
        " leads",
        &|l| l.starts_with("demo: worker-") && l.ends_with(" leads"),
        Duration::from_secs(60),
    )
    .is_some()
}

#[test]
fn the_demo_elects_hands_over_and_quits() {
    let (mut demo, lines) = start_demo();
    let wait_for =
        |needle: &str, timeout: Duration| wait_line(&lines, needle, &|_| true, timeout).is_some();
    // "worker-N leads with epoch E": the epoch of the first leader of a blob is the wall clock in
    // milliseconds; each later leader's is larger.
    let epoch = |line: &str| -> Option<u64> {
        line.rsplit("leads with epoch ").next()?.trim().parse().ok()
    };
    // The child's output and the daemon's log reach the demo by two pipes, so the child's first
    // line can come before the demo has read who leads; a key pressed then finds nobody to stop.
    // Wait for the demo's word, then for the leader's next line (it prints one every 2 s).
    assert!(wait_for_a_leader(&lines), "the demo names a first leader");
    let first = wait_line(
        &lines,
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
            &lines,
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

/// A Ctrl-C at the terminal goes to the whole foreground process group. The demo stops its
/// daemons in order, the leader last, and they still need storage for it: Azurite must not be
/// in the reach of that signal, or the leader's release finds storage gone.
#[test]
fn a_ctrl_c_stops_the_demo_in_order() {
    let (mut demo, lines) = start_demo();
    assert!(wait_for_a_leader(&lines), "the demo names a first leader");
    let group = nix::unistd::Pid::from_raw(demo.id() as i32);
    nix::sys::signal::killpg(group, nix::sys::signal::Signal::SIGINT).expect("Ctrl-C");
    let mut told = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Ok(line) = lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        let done = line.contains("demo: done");
        told.push(line);
        if done {
            break;
        }
    }
    assert!(
        told.iter().any(|l| l.contains("demo: done")),
        "the demo quits on Ctrl-C"
    );
    assert!(
        told.iter().any(|l| l.contains("released leadership")),
        "the leader says it gave its lease up"
    );
    let unreachable: Vec<_> = told
        .iter()
        .filter(|l| l.contains("storage unreachable"))
        .collect();
    assert!(
        unreachable.is_empty(),
        "storage went away while the daemons stopped: {unreachable:#?}"
    );
    assert!(demo.wait().unwrap().success());
}
