//! Wake-ups that only members can send (docs/succession.md, "The handoff", issue 26), against a
//! real Azurite with the real binary: `POST /wake` without the woken member's token (from its
//! member record) is refused with 401 and costs no storage request, so a storm of forged wake-ups
//! (thousands a second) leaves the group's storage requests at their quiet rate, counted by a proxy
//! in front of each member; a handover in the middle of the storm is as fast as without it; the
//! token appears in no log, no `/status` and no `leasehold status`.

use leasehold_testkit::defaults::POLL;
use leasehold_testkit::proxy::ProxiedRequest;
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long the quiet rate and the storm's rate are each counted.
const WINDOW: Duration = Duration::from_secs(8);

/// The most forged wake-ups one storm sends (it also ends when told to, or after a minute).
const STORM_MAX: usize = 200_000;

/// The most requests a period of `seconds` allows in a [`WINDOW`]: one at each end counts.
fn most(seconds: f64) -> usize {
    (WINDOW.as_secs_f64() / seconds).floor() as usize + 1
}

/// The most storage requests the two members' quiet schedule can put in one [`WINDOW`]
/// (docs/succession.md, default timings): the leader's renews (every 4 s) and listings (every 12
/// s); the successor's polls (every 1.0-1.2 s), reads of the blob (every 5-6 s) and listings (every
/// 30-36 s); each one's record renew (every 10 s) and, once, the mark it writes when it has been a
/// member for `preempt_after` (30 s).
fn quiet_schedule() -> usize {
    let leader = most(4.0) + most(12.0) + most(10.0) + 1;
    let successor = most(1.0) + most(5.0) + most(30.0) + most(10.0) + 1;
    leader + successor
}

/// `POST /wake` to `addr` on a connection of its own (the endpoint serves one request per
/// connection), with `token` in `X-Leasehold-Wake` if given: the status code, or None if no
/// answer came.
fn post_wake(addr: &str, token: Option<&str>) -> Option<u16> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    let header = token.map_or_else(String::new, |t| format!("X-Leasehold-Wake: {t}\r\n"));
    write!(
        stream,
        "POST /wake HTTP/1.1\r\nHost: {addr}\r\n{header}Content-Length: 0\r\n\r\n"
    )
    .ok()?;
    // The status line, then a reset: a storm of connections closed the usual way would leave
    // tens of thousands of sockets in TIME-WAIT on the daemon's port for a minute, and a port
    // the kit picks for a later test (an Azurite) could be that port.
    let mut answer = [0u8; 12];
    let read = stream.read_exact(&mut answer).ok();
    let linger = nix::libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    let _ = nix::sys::socket::setsockopt(&stream, nix::sys::socket::sockopt::Linger, &linger);
    read?;
    std::str::from_utf8(&answer[9..12]).ok()?.parse().ok()
}

/// Forged wake-ups from `threads` threads, round-robin over `targets`, as fast as they go: half
/// without a token, half with a made-up one.
struct Storm {
    began: Instant,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<BTreeMap<Option<u16>, usize>>>,
}

impl Storm {
    fn start(targets: &[String], threads: usize) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let began = Instant::now();
        let threads = (0..threads)
            .map(|t| {
                let (targets, stop) = (targets.to_vec(), stop.clone());
                std::thread::spawn(move || {
                    let mut answers = BTreeMap::new();
                    for i in 0..STORM_MAX / threads {
                        if stop.load(Ordering::Relaxed) || began.elapsed() > secs(60) {
                            break;
                        }
                        let token = (i % 2 == 1).then_some("0123456789abcdef0123456789abcdef");
                        let answer = post_wake(&targets[(i + t) % targets.len()], token);
                        *answers.entry(answer).or_insert(0) += 1;
                    }
                    answers
                })
            })
            .collect();
        Self {
            began,
            stop,
            threads,
        }
    }

    /// Stops it: how many wake-ups got each answer (None: none came), and for how long.
    fn stop(self) -> (BTreeMap<Option<u16>, usize>, Duration) {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = BTreeMap::new();
        for thread in self.threads {
            for (answer, n) in thread.join().expect("a storm thread") {
                *all.entry(answer).or_insert(0) += n;
            }
        }
        (all, self.began.elapsed())
    }
}

/// The requests that reached storage through `proxy` in `[from, from + WINDOW)`.
fn in_window(proxy: &FaultProxy, from: Duration) -> Vec<ProxiedRequest> {
    proxy
        .requests()
        .into_iter()
        .filter(|r| r.at >= from && r.at < from + WINDOW)
        .collect()
}

/// Acquires of the group's lease blob among `requests` (not of a member record).
fn lease_acquires(group: &Group, requests: &[ProxiedRequest]) -> usize {
    let blob = format!("/{}/{}?", group.container, group.blob);
    requests
        .iter()
        .filter(|r| r.lease_action.as_deref() == Some("acquire") && r.line.contains(&blob))
        .count()
}

/// The requests of one window by member and kind ("b acquire", "a renew record", "b list",
/// ...), to print.
fn kinds(group: &Group, windows: &[Vec<ProxiedRequest>; 2]) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    for (member, requests) in ["a", "b"].iter().zip(windows) {
        for r in requests {
            let method = r.line.split(' ').next().unwrap_or("?");
            let what = match (&r.lease_action, r.line.contains("comp=list")) {
                (Some(action), _) => action.clone(),
                (None, true) => "list".into(),
                (None, false) => method.to_lowercase(),
            };
            let record = if r
                .line
                .contains(&format!("/{}/{}?", group.container, group.blob))
            {
                ""
            } else {
                " (record)"
            };
            *kinds.entry(format!("{member} {what}{record}")).or_insert(0) += 1;
        }
    }
    kinds
}

/// Each member's wake token, as its record publishes it.
fn tokens(group: &Group) -> BTreeMap<String, String> {
    group
        .admin()
        .member_records()
        .expect("list the member records")
        .into_iter()
        .filter_map(|r| Some((r.identity, r.wake_token?)))
        .collect()
}

#[test]
fn a_forged_wake_storm_costs_no_storage_request_and_a_handover_in_it_stays_fast() {
    let group = Group::shared();
    let (pa, pb) = (
        FaultProxy::start(Azurite::shared().port),
        FaultProxy::start(Azurite::shared().port),
    );
    let mut a = group.member("a").advertised().via(&pa).join();
    group.wait_start_of("a", secs(15)).expect("a leads");
    let b = group.member("b").advertised().via(&pb).join();
    b.assert_follows(secs(10));
    // b polls the lease as a's successor.
    let polling = wait_until(secs(15), || {
        lease_acquires(&group, &in_window(&pb, mono_now().saturating_sub(POLL))) > 0
    });
    assert!(polling, "b polls the lease:\n{}", b.log());
    let (a_addr, b_addr) = (a.http.clone().unwrap(), b.http.clone().unwrap());

    // Each member's record carries a token of its own; only it opens POST /wake.
    let tokens = tokens(&group);
    let (a_token, b_token) = (&tokens["a"], &tokens["b"]);
    assert_eq!(b_token.len(), 32);
    assert_ne!(a_token, b_token);
    assert_eq!(post_wake(&b_addr, None), Some(401));
    assert_eq!(post_wake(&b_addr, Some(a_token)), Some(401), "a's token");
    assert_eq!(post_wake(&b_addr, Some(b_token)), Some(202));
    assert_eq!(
        post_wake(&b_addr, Some(b_token)),
        Some(429),
        "within a second"
    );

    // The quiet rate, then the same window in a storm on both members.
    let quiet_from = mono_now();
    std::thread::sleep(WINDOW);
    let storm = Storm::start(&[a_addr.clone(), b_addr.clone()], 2);
    let storm_from = mono_now();
    std::thread::sleep(WINDOW);
    let received = |d: &Daemon, result: &str| {
        d.metrics().map_or(0.0, |m| {
            m.sum("leasehold_wakeups_received_total", &[("result", result)])
        })
    };
    let refused_by_now = received(&a, "unauthorized") + received(&b, "unauthorized");

    // A handover in the storm: a stops, hands over, wakes b with b's token.
    let (sigterm, next) = {
        let sigterm = mono_now();
        a.signal(Signal::SIGTERM);
        let next = group
            .wait_start_after(sigterm, Some("a"), secs(10))
            .unwrap_or_else(|| panic!("nobody led after a stopped:\n{}", a.log()));
        (sigterm, next)
    };
    let (answers, storm_took) = storm.stop();
    let handover = next.t - sigterm;
    assert_eq!(next.identity, "b");
    let _ = a.wait_exit(secs(10));

    let sent: usize = answers.values().sum();
    let (quiet, stormy) = (
        [&pa, &pb].map(|p| in_window(p, quiet_from)),
        [&pa, &pb].map(|p| in_window(p, storm_from)),
    );
    let count = |w: &[Vec<ProxiedRequest>; 2]| w.iter().map(Vec::len).sum::<usize>();
    let polls = |w: &[Vec<ProxiedRequest>; 2]| lease_acquires(&group, &w[1]);
    let rate = sent as f64 / storm_took.as_secs_f64();
    eprintln!(
        "forged wake-up storm: {sent} POST /wake in {} ({rate:.0}/s), answers {answers:?}; \
         storage requests in {} (the quiet schedule allows {}): quiet {} {:?}, in the storm {} {:?}; \
         handover in the storm {} (b woken: {} accepted)",
        figure(storm_took),
        figure(WINDOW),
        quiet_schedule(),
        count(&quiet),
        kinds(&group, &quiet),
        count(&stormy),
        kinds(&group, &stormy),
        figure(handover),
        received(&b, "accepted"),
    );
    // A storm, every one refused (those sent to a once it had exited got no answer): 3,300
    // a second on a quiet machine; the generator shares CI's two cores with the suite, where it
    // reached 940 a second once. What is asserted is that it was a storm, not its generator's
    // speed.
    assert!(rate >= 500.0, "a storm: {rate:.0}/s");
    assert!(
        answers.keys().all(|a| matches!(a, Some(401) | None)),
        "{answers:?}"
    );
    assert!(
        refused_by_now >= 1000.0,
        "counted as unauthorized: {refused_by_now}"
    );
    // No storage request beyond the quiet rate: what a wake-up drives (b's acquires) stays at
    // b's own polling, and all together stay within what the quiet schedule can put in one
    // window (its periodic requests fall on either side of a window's edge, so two windows of
    // it differ by a few).
    assert!(
        polls(&stormy) <= most(1.0),
        "b's polls in the storm: {} (its polling allows {})",
        polls(&stormy),
        most(1.0)
    );
    assert!(
        count(&stormy) <= quiet_schedule(),
        "storage requests in the storm: {} (the quiet schedule allows {}, {} in the quiet window)",
        count(&stormy),
        quiet_schedule(),
        count(&quiet)
    );
    // The leader's wake-up, with b's token, went through the storm.
    assert!(received(&b, "accepted") >= 2.0, "b was woken by a");
    assert!(
        handover <= Duration::from_millis(800),
        "handover {}",
        figure(handover)
    );

    // The tokens are secrets: in no log, no /status, no `leasehold status`.
    let status = leasehold(
        &[
            "status",
            "--json",
            "-c",
            group.config("observer", "", "").to_str().unwrap(),
        ],
        &[],
    );
    let shown = [
        a.log(),
        b.log(),
        b.get("/status").map(|(_, body)| body).unwrap_or_default(),
        String::from_utf8_lossy(&status.stdout).into_owned(),
        String::from_utf8_lossy(&status.stderr).into_owned(),
    ];
    assert!(status.status.success(), "{}", shown[4]);
    for text in &shown {
        for token in [a_token, b_token] {
            assert!(
                !text.contains(token.as_str()),
                "a wake token shown:\n{text}"
            );
        }
    }
    group.assert_safe(&[&a, &b]);
}
