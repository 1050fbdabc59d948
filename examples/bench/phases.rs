//! The measurements. Each one runs its own leadership group(s) on its own blob, and returns raw
//! samples; `report` turns them into figures.
//!
//! Handover latencies are taken on CLOCK_MONOTONIC from the instant the bench acts (SIGTERM sent
//! to the leading daemon, or the child's own last line before it exits) to the `start` line the
//! next leader's witness writes: "the next child starts", as a user of leasehold would see it.

use crate::fleet::{Env, Fleet, LeaseOps, Role, Workload, http_of};
use crate::say;
use leasehold_testkit::procfs::{
    CpuTime, MemoryDetail, guard_started_by, memory_detail, memory_kib, storage_connections,
};
use leasehold_testkit::wait::{check_interrupted, interrupted, pause, poll};
use leasehold_testkit::{Daemon, Deadlines, Event, History, check, leasehold_command, mono_now};
use nix::sys::signal::Signal;
use serde_json::json;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The handovers of one kind.
#[derive(Debug, Clone, Default)]
pub struct Handovers {
    /// Instances in the group when it was measured.
    pub daemons: usize,
    /// One per successful trial.
    pub latencies: Vec<Duration>,
    /// Trials in which no new child started in time.
    pub timeouts: usize,
    /// Per trial, for the JSON.
    pub details: Vec<serde_json::Value>,
    /// Witnesses that started while another was alive (must be 0).
    pub overlaps: usize,
}

impl Handovers {
    /// None measured yet, in a group of `daemons`.
    pub fn of(daemons: usize) -> Self {
        Self {
            daemons,
            ..Self::default()
        }
    }

    /// A trial in which the child of `from` was followed by `next`'s, `latency` after the
    /// bench's mark. `fencing` names `next`'s fencing token in the JSON (`epoch`, or `rev` for
    /// etcd's lock revision). Returns the trial's JSON, for fields of its own.
    pub fn record(
        &mut self,
        latency: Duration,
        from: &str,
        next: &Event,
        fencing: &str,
    ) -> &mut serde_json::Value {
        self.latencies.push(latency);
        let mut detail = json!({
            "ms": ms(latency),
            "from": from,
            "to": next.identity,
        });
        detail[fencing] = json!(next.epoch);
        self.details.push(detail);
        self.details.last_mut().expect("just pushed")
    }
}

/// SIGTERM to a child by the pid its witness recorded (it may have ended already): to its
/// supervisor, a child ending by itself.
pub fn terminate_child(pid: u32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGTERM);
}

/// Children that started while another was alive, by the checker (must be 0).
fn overlaps(history: &History) -> usize {
    check(history, &Deadlines::default()).overlaps.len()
}

/// The process id of a daemon, as /proc names it.
fn pid(daemon: &Daemon) -> u32 {
    daemon.pid().as_raw() as u32
}

/// A random pause of 1.5 to 3.5 s between trials: longer than the yield of a daemon that has
/// just released (1.2 × acquire_interval), so every follower polls again before the next trial,
/// and spread over more than one polling period, so that the bench's actions fall at random
/// points of the followers' polling (a fixed rhythm could fall in step with it and bias the
/// figures either way).
pub fn random_pause() {
    pause(Duration::from_millis(1500 + fastrand::u64(..2000)));
}

/// Whether `daemon` polls the lease now: its own `/status` shows it as the successor. (Not
/// whom it shows leading: a poller learns of a new leader only at its next listing, 30-36 s
/// on, as its acquires are refused without saying by whom.)
fn polls(daemon: &Daemon) -> bool {
    let Some((200, body)) = leasehold_testkit::http::get(&http_of(daemon), "/status") else {
        return false;
    };
    let Ok(status) = serde_json::from_str::<serde_json::Value>(&body) else {
        return false;
    };
    status["line"]["members"].as_array().is_some_and(|rows| {
        rows.iter()
            .any(|r| r["identity"] == daemon.identity.as_str() && r["role"] == "successor")
    })
}

/// The leader of the next trial, once the line has settled and after a [`random_pause`]: the
/// child running then (waited for up to 30 s). Settled: a member polls the lease as the
/// leader's successor, by its own `/status` (a member that moved up learns it within a watch
/// period, 5 x `acquire_interval`, and a handover before that waits for it; the trials measure
/// the handover of a settled line).
fn next_leader(group: &Fleet, daemons: &[Daemon]) -> Option<Event> {
    let leader = || {
        poll(Duration::from_secs(30), Duration::from_millis(20), || {
            group.history().current_leader().cloned()
        })
    };
    let first = leader()?;
    let settled = poll(Duration::from_secs(15), Duration::from_millis(200), || {
        daemons
            .iter()
            .any(|d| d.identity != first.identity && polls(d))
            .then_some(())
    });
    if settled.is_none() {
        say("no member polled as the successor within 15 s; the trial runs anyway");
    }
    // The pause puts the trial at a random point of the successor's polling.
    random_pause();
    leader()
}

/// One kind of handover, a trial at a time: so that two tools' trials can take turns in one
/// window ([`take_turns`]).
pub trait Trials {
    /// One trial, recorded in `out` (or counted there as a timeout).
    fn trial(&mut self, out: &mut Handovers);
    /// Children that started while another was alive, over every trial so far (must be 0).
    fn overlaps(&self) -> usize;
}

/// `trials` of each kind in `kinds`, taking turns (a, b, a, b, ...), so that whatever the
/// machine does over the window (load, Azurite's heap, the page cache) falls on each alike;
/// one after the other, a few minutes apart, the medians of two tools moved several ms apart
/// from run to run. Returns the handovers of each kind, in the same order.
pub fn take_turns(kinds: &mut [&mut dyn Trials], daemons: usize, trials: usize) -> Vec<Handovers> {
    let mut out: Vec<Handovers> = kinds.iter().map(|_| Handovers::of(daemons)).collect();
    for _ in 0..trials {
        for (kind, out) in kinds.iter_mut().zip(&mut out) {
            check_interrupted();
            kind.trial(out);
        }
    }
    for (kind, out) in kinds.iter().zip(&mut out) {
        out.overlaps = kind.overlaps();
    }
    out
}

/// One graceful trial: SIGTERM to the leader; then the stopped daemon is started again so the
/// group keeps its size. Returns the restarted daemon's index and the trial's window (signal
/// sent, next child started), or None when no leader was found.
fn graceful_trial(
    group: &mut Fleet,
    daemons: &mut [Daemon],
    out: &mut Handovers,
) -> Option<(usize, (Duration, Duration))> {
    let stop_timeout = group.env.timing.stop_timeout;
    let Some(leader) = next_leader(group, daemons) else {
        out.timeouts += 1;
        return None;
    };
    let Some(index) = daemons.iter().position(|d| d.identity == leader.identity) else {
        panic!("the leading child belongs to no daemon: {leader:?}");
    };
    let sent = mono_now();
    daemons[index].signal(Signal::SIGTERM);
    let next = group
        .group
        .wait_start_after(sent, Some(&leader.identity), Duration::from_secs(15));
    let stopped = group
        .history()
        .stop_of(leader.pid)
        .map(|t| t.saturating_sub(sent));
    match &next {
        Some(next) => {
            let trial = out.record(next.t - sent, &leader.identity, next, "epoch");
            trial["old_child_stopped_ms"] = json!(stopped.map(ms));
        }
        None => out.timeouts += 1,
    }
    assert!(
        daemons[index]
            .wait_exit(stop_timeout + Duration::from_secs(10))
            .is_some(),
        "{} did not exit after SIGTERM; see {}",
        leader.identity,
        group.dir()
    );
    daemons[index] = group.spawn(&leader.identity);
    daemons[index].assert_follows(Duration::from_secs(30));
    Some((index, (sent, next.map_or(mono_now(), |n| n.t))))
}

/// SIGTERM to the leader, `trials` times ([`graceful_trial`]). `moved` hears of each trial's
/// window (signal sent, next child started) and of the restarted daemon's new HTTP address.
fn graceful_trials(
    group: &mut Fleet,
    daemons: &mut [Daemon],
    trials: usize,
    mut moved: impl FnMut(usize, &Daemon, (Duration, Duration)),
) -> Handovers {
    let mut out = Handovers::of(daemons.len());
    for _ in 0..trials {
        if let Some((index, window)) = graceful_trial(group, daemons, &mut out) {
            moved(index, &daemons[index], window);
        }
    }
    out.overlaps = overlaps(&group.history());
    out
}

/// The blob (and identity prefix) of a handover group: `kind`, or `kind-advertise`.
fn handover_blob(kind: &str, advertise: bool) -> String {
    if advertise {
        format!("{kind}-advertise")
    } else {
        kind.to_owned()
    }
}

/// A group of `Witness` children for handovers, advertising its HTTP listeners or not.
fn handover_fleet<'a>(env: &'a Env, blob: &str, advertise: bool) -> Fleet<'a> {
    let group = Fleet::new(env, blob, Workload::Witness(Vec::new()));
    if advertise {
        group.advertising()
    } else {
        group
    }
}

/// A group of leasehold daemons handing over their witness, trial by trial.
pub struct Handing<'a> {
    group: Fleet<'a>,
    daemons: Vec<Daemon>,
    ending: Ending,
}

/// How a leasehold trial ends the leader's child.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// (1) Graceful handover: SIGTERM to the leading daemon -> the next child starts.
    Graceful,
    /// (2) Voluntary handover: the child exits by itself (`on_exit = "release"`) -> the next
    /// child starts. The bench makes the leader's child exit at a random moment by sending
    /// SIGTERM to the child itself, not to its daemon: to the daemon that is a child ending on
    /// its own. (A child that exits after a fixed time would fall in step with the followers'
    /// polling: the daemon that released rejoins 1.2 × acquire_interval later and polls at a
    /// fixed offset from the next exit.)
    Voluntary,
}

impl<'a> Handing<'a> {
    /// Graceful handovers in a group of `daemons`; with `advertise`, every daemon names its
    /// own HTTP listener in `[election].advertise`.
    pub fn graceful(env: &'a Env, daemons: usize, advertise: bool) -> Self {
        Self::start(env, "graceful", daemons, advertise, Ending::Graceful)
    }

    /// Voluntary handovers in a group of `daemons`, advertising or not.
    pub fn voluntary(env: &'a Env, daemons: usize, advertise: bool) -> Self {
        Self::start(env, "voluntary", daemons, advertise, Ending::Voluntary)
    }

    fn start(env: &'a Env, kind: &str, daemons: usize, advertise: bool, ending: Ending) -> Self {
        let blob = handover_blob(kind, advertise);
        let mut group = handover_fleet(env, &blob, advertise);
        let daemons = group.start(&blob, daemons);
        Self {
            group,
            daemons,
            ending,
        }
    }

    /// A voluntary trial: the leader's child ends by itself; timed from its own last word.
    fn voluntary_trial(&mut self, out: &mut Handovers) {
        let Some(leader) = next_leader(&self.group, &self.daemons) else {
            out.timeouts += 1;
            return;
        };
        let sent = mono_now();
        terminate_child(leader.pid);
        let Some(next) = self
            .group
            .group
            .wait_start_after(sent, None, Duration::from_secs(15))
        else {
            out.timeouts += 1;
            return;
        };
        // From the child's own last word: the moment it decided to exit.
        let exited = self.group.history().stop_of(leader.pid).unwrap_or(sent);
        out.record(
            next.t.saturating_sub(exited),
            &leader.identity,
            &next,
            "epoch",
        );
    }
}

impl Trials for Handing<'_> {
    fn trial(&mut self, out: &mut Handovers) {
        match self.ending {
            Ending::Graceful => {
                graceful_trial(&mut self.group, &mut self.daemons, out);
            }
            Ending::Voluntary => self.voluntary_trial(out),
        }
    }

    fn overlaps(&self) -> usize {
        overlaps(&self.group.history())
    }
}

/// `trials` handovers of one kind alone: (1) graceful, or (2) voluntary ([`Ending`]).
pub fn handovers(mut kind: Handing, trials: usize) -> Handovers {
    let daemons = kind.daemons.len();
    take_turns(&mut [&mut kind], daemons, trials).remove(0)
}

/// How long ago `leader`'s last successful acquire or renew was sent, from its `/status`.
fn since_renew(leader: &Daemon) -> Option<Duration> {
    let (_, body) = leader.get("/status")?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    Some(Duration::from_secs_f64(v["seconds_since_renew"].as_f64()?))
}

/// One crash failover.
#[derive(Debug, Clone)]
pub struct Crash {
    /// SIGKILL of the leader -> the next child started.
    pub failover: Option<Duration>,
    /// How long ago the leader's last successful renew was sent when it was killed.
    pub since_renew: Duration,
}

/// (3) Crash failover: SIGKILL to the leader -> the next child starts. The trials run at once,
/// each on its own blob (their figures are seconds of lease expiry, which a busy CPU does not
/// move), and each kills its leader at a different point of the renew cycle: trial i waits until
/// `i/n * renew_interval` has passed since the last renew, so the first one is the worst case
/// (the lease was just renewed and has all of `duration` left).
pub fn crash(env: &Env, daemons: usize, trials: usize) -> (Vec<Crash>, usize) {
    let timing = env.timing;
    let results: Vec<(Crash, usize)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..trials)
            .map(|i| {
                s.spawn(move || {
                    let mut group = Fleet::new(
                        env,
                        &format!("crash-{}", i + 1),
                        Workload::Witness(Vec::new()),
                    );
                    let fleet = group.start(&format!("crash{}", i + 1), daemons);
                    let leader = &fleet[0];
                    let phase = timing.renew_interval.mul_f64(i as f64 / trials as f64);
                    let window = Duration::from_millis(150);
                    let since_renew = || since_renew(leader);
                    // Let at least one renew happen first, so every trial sees a renewed lease.
                    pause(timing.renew_interval);
                    let at = poll(timing.renew_interval * 3, Duration::from_millis(10), || {
                        let s = since_renew()?;
                        (s >= phase && s < phase + window).then_some((s, mono_now()))
                    });
                    let (since, asked) =
                        at.unwrap_or_else(|| (since_renew().unwrap_or_default(), mono_now()));
                    let sent = mono_now();
                    leader.signal(Signal::SIGKILL);
                    let next = group.group.wait_start_after(
                        sent,
                        Some(&leader.identity),
                        timing.duration + Duration::from_secs(15),
                    );
                    let overlaps = overlaps(&group.history());
                    drop(fleet);
                    (
                        Crash {
                            failover: next.map(|n| n.t - sent),
                            since_renew: since + (sent - asked),
                        },
                        overlaps,
                    )
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("crash trial"))
            .collect()
    });
    let overlaps = results.iter().map(|(_, o)| o).sum();
    (results.into_iter().map(|(c, _)| c).collect(), overlaps)
}

/// The steady-state footprint of one daemon.
#[derive(Debug, Clone, Default)]
pub struct Footprint {
    pub rss_max_kib: u64,
    pub rss_mean_kib: f64,
    /// The peak since the daemon started (`VmHWM`), start-up included.
    pub rss_peak_kib: u64,
    pub cpu: Duration,
    pub window: Duration,
    /// Storage requests made during the window, by operation.
    pub ops: LeaseOps,
    /// TCP connections to storage open when the window began.
    pub connections_before: usize,
    /// TCP connections to storage opened during the window (0 = every request went over a
    /// connection kept alive from before).
    pub connections_opened: usize,
    /// Of the connections open when the window began, those still open at its end.
    pub connections_kept: usize,
    /// When each connection was first seen, in seconds into the window, with its socket inode.
    pub connections_seen: Vec<(f64, u64)>,
    /// The child's guard process (leader only).
    pub guard_rss_kib: Option<u64>,
    /// At the end of the window.
    pub memory: MemoryDetail,
    pub guard_memory: Option<MemoryDetail>,
}

impl Footprint {
    pub fn cpu_percent(&self) -> f64 {
        100.0 * self.cpu.as_secs_f64() / self.window.as_secs_f64()
    }

    pub fn requests_per_minute(&self) -> f64 {
        self.ops.total() * 60.0 / self.window.as_secs_f64()
    }
}

/// (4) + (5) One leader and two followers, HTTP on, left alone for `window`: resident memory,
/// CPU and connections to storage of the leader and the first follower, and every daemon's
/// storage requests by its part (from their own `/metrics` and `/status`, read just before and
/// just after the window, so the reads cost nothing inside it). Then `leasehold status`,
/// `status_runs` times.
pub fn footprint(env: &Env, window: Duration, status_runs: usize) -> Steady {
    let mut group = Fleet::new(env, "footprint", Workload::Idle);
    let leader = group.spawn("footprint-leader");
    assert!(
        leader.wait_log("child started", Duration::from_secs(30)),
        "the footprint leader did not lead; see {}",
        group.dir()
    );
    let follower = group.spawn("footprint-follower");
    follower.assert_follows(Duration::from_secs(30));
    // A second follower: with ordered succession, the first follower is the successor and
    // this one only watches, so each part's cost is measured.
    let second = group.spawn("footprint-follower-2");
    second.assert_follows(Duration::from_secs(30));
    // Past start-up: at least one renew, and the follower's polling under way. The window
    // then begins half a second after a renew, so that it holds whole renew periods (a 60 s
    // window may otherwise hold 15 or 16 renews 4 s apart, depending on where it falls).
    pause(env.timing.renew_interval + Duration::from_secs(1));
    poll(
        env.timing.renew_interval * 3,
        Duration::from_millis(10),
        || {
            let since = since_renew(&leader)?;
            (since >= Duration::from_millis(400) && since < Duration::from_millis(600))
                .then_some(())
        },
    );
    let pair = [&leader, &follower];
    let all = [&leader, &follower, &second];
    let roles0: Vec<Role> = all.iter().map(|d| Role::of(d)).collect();
    let all_ops0: Vec<LeaseOps> = all
        .iter()
        .map(|d| LeaseOps::of(d).expect("/metrics"))
        .collect();
    let ops0: Vec<LeaseOps> = all_ops0[..2].to_vec();
    let cpu0: Vec<CpuTime> = pair
        .iter()
        .map(|d| CpuTime::read(pid(d)).expect("/proc"))
        .collect();
    let began = Instant::now();
    let guard = guard_started_by(pid(&leader));
    let mut rss: [Vec<u64>; 2] = [Vec::new(), Vec::new()];
    let mut guard_rss = 0;
    let mut connections: [Vec<(f64, u64)>; 2] = Default::default();
    let mut next_memory = began;
    for (i, d) in pair.iter().enumerate() {
        for inode in storage_connections(pid(d), env.azurite.port) {
            connections[i].push((0.0, inode));
        }
    }
    while began.elapsed() < window {
        check_interrupted();
        for (i, d) in pair.iter().enumerate() {
            for inode in storage_connections(pid(d), env.azurite.port) {
                if !connections[i].iter().any(|(_, seen)| *seen == inode) {
                    connections[i].push((began.elapsed().as_secs_f64(), inode));
                }
            }
        }
        if Instant::now() >= next_memory {
            next_memory += Duration::from_secs(1);
            for (i, d) in pair.iter().enumerate() {
                if let Some((now, _)) = memory_kib(pid(d)) {
                    rss[i].push(now);
                }
            }
            if let Some((now, _)) = guard.and_then(memory_kib) {
                guard_rss = guard_rss.max(now);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let cpu1: Vec<CpuTime> = pair
        .iter()
        .map(|d| CpuTime::read(pid(d)).expect("/proc"))
        .collect();
    let elapsed = began.elapsed();
    let open_at_end: Vec<_> = pair
        .iter()
        .map(|d| storage_connections(pid(d), env.azurite.port))
        .collect();
    let all_ops1: Vec<LeaseOps> = all
        .iter()
        .map(|d| LeaseOps::of(d).expect("/metrics"))
        .collect();
    let ops1: Vec<LeaseOps> = all_ops1[..2].to_vec();
    let parts = all
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let role = Role::of(d);
            Part {
                identity: d.identity.clone(),
                // A daemon whose part changed during the window measured two parts at once.
                role: if role == roles0[i] { role } else { Role::Other },
                ops: all_ops1[i].since(&all_ops0[i]),
            }
        })
        .collect();
    let result = |i: usize| Footprint {
        rss_max_kib: rss[i].iter().copied().max().unwrap_or(0),
        rss_mean_kib: rss[i].iter().sum::<u64>() as f64 / rss[i].len().max(1) as f64,
        rss_peak_kib: memory_kib(pid(pair[i])).map_or(0, |(_, peak)| peak),
        cpu: cpu1[i].since(&cpu0[i]),
        window: elapsed,
        ops: ops1[i].since(&ops0[i]),
        connections_before: connections[i].iter().filter(|(t, _)| *t == 0.0).count(),
        connections_opened: connections[i].iter().filter(|(t, _)| *t > 0.0).count(),
        connections_kept: connections[i]
            .iter()
            .filter(|(t, inode)| *t == 0.0 && open_at_end[i].contains(inode))
            .count(),
        connections_seen: connections[i].clone(),
        guard_rss_kib: (i == 0 && guard.is_some()).then_some(guard_rss),
        memory: memory_detail(pid(pair[i])).unwrap_or_default(),
        guard_memory: guard.filter(|_| i == 0).and_then(memory_detail),
    };
    let (lead, follow) = (result(0), result(1));
    let status = status_latency(
        &group.group.dir().join("footprint-follower.toml"),
        &http_of(&follower),
        status_runs,
    );
    drop((leader, follower, second));
    Steady {
        leader: lead,
        follower: follow,
        status,
        parts: Parts {
            window: elapsed,
            parts,
        },
    }
}

/// One daemon's part in a group and the storage requests it made in a window.
#[derive(Debug, Clone)]
pub struct Part {
    pub identity: String,
    pub role: Role,
    pub ops: LeaseOps,
}

/// Every daemon of the footprint group over the same window.
#[derive(Debug, Clone, Default)]
pub struct Parts {
    pub window: Duration,
    pub parts: Vec<Part>,
}

/// What the footprint phase measured.
#[derive(Debug, Clone, Default)]
pub struct Steady {
    pub leader: Footprint,
    pub follower: Footprint,
    /// `leasehold status` latencies.
    pub status: Vec<Duration>,
    pub parts: Parts,
}

/// `leasehold status` run `runs` times against a live group, asking the daemon at `http` on
/// this host too: wall time from spawn to exit, process start-up included, as an operator would
/// wait for it.
pub fn status_latency(config: &Path, http: &str, runs: usize) -> Vec<Duration> {
    let config = config.to_str().expect("a config path");
    let mut out = Vec::with_capacity(runs);
    for _ in 0..runs {
        check_interrupted();
        let began = Instant::now();
        let output = leasehold_command(&["status", "--json", "-c", config, "--http-listen", http])
            .output()
            .expect("run leasehold status");
        let took = began.elapsed();
        let text = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && text.contains("\"lease_state\""),
            "leasehold status failed: {}{}",
            text,
            String::from_utf8_lossy(&output.stderr)
        );
        out.push(took);
        std::thread::sleep(Duration::from_millis(100));
    }
    out
}

/// One round of `/readyz` over every daemon of the scale group.
#[derive(Debug, Clone)]
pub struct Sweep {
    pub began: Duration,
    pub ended: Duration,
    pub leaders: usize,
    pub unanswered: usize,
}

#[derive(Debug, Clone, Default)]
pub struct Scale {
    pub daemons: usize,
    pub handovers: Handovers,
    pub sweeps: Vec<Sweep>,
    /// (signal sent, next child started) of each handover: samples inside may see 0 leaders.
    pub transitions: Vec<(Duration, Duration)>,
    pub window: Duration,
    pub ops: LeaseOps,
    pub cpu: Duration,
    pub rss_total_kib: u64,
    pub rss_max_kib: u64,
    /// PSS summed: the binary's shared pages counted once.
    pub pss_total_kib: u64,
    pub azurite_rss_kib: u64,
    /// Azurite's CPU time during the window: what serving the group costs the storage side.
    pub azurite_cpu: Duration,
    pub status: Vec<Duration>,
}

/// (6) `n` daemons on one blob: `/readyz` of every one sampled twice a second throughout;
/// a quiet window for storage requests, CPU and memory; then `trials` graceful handovers.
pub fn scale(
    env: &Env,
    azurite_pid: u32,
    n: usize,
    window: Duration,
    trials: usize,
    status_runs: usize,
) -> Scale {
    let mut group = Fleet::new(env, "scale", Workload::Witness(Vec::new()));
    let mut fleet = group.start("scale", n);
    pause(Duration::from_secs(3));

    let addresses = Arc::new(Mutex::new(fleet.iter().map(http_of).collect::<Vec<_>>()));
    let stop = Arc::new(AtomicBool::new(false));
    let sweeper = {
        let (addresses, stop) = (addresses.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut sweeps = Vec::new();
            let mut next = Instant::now();
            while !stop.load(Ordering::SeqCst) && !interrupted() {
                let current = addresses.lock().unwrap().clone();
                let began = mono_now();
                let answers: Vec<Option<u16>> = std::thread::scope(|s| {
                    let handles: Vec<_> = current
                        .iter()
                        .map(|a| {
                            s.spawn(move || {
                                leasehold_testkit::http::get(a, "/readyz").map(|(code, _)| code)
                            })
                        })
                        .collect();
                    handles
                        .into_iter()
                        .map(|h| h.join().ok().flatten())
                        .collect()
                });
                sweeps.push(Sweep {
                    began,
                    ended: mono_now(),
                    leaders: answers.iter().filter(|a| **a == Some(200)).count(),
                    unanswered: answers.iter().filter(|a| a.is_none()).count(),
                });
                next += Duration::from_millis(500);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            sweeps
        })
    };

    let ops = |fleet: &[Daemon]| {
        let mut sum = LeaseOps::default();
        for d in fleet {
            for (op, n) in LeaseOps::of(d).expect("/metrics").0 {
                *sum.0.entry(op).or_insert(0.0) += n;
            }
        }
        sum
    };
    let ops0 = ops(&fleet);
    let cpu0: Vec<CpuTime> = fleet
        .iter()
        .map(|d| CpuTime::read(pid(d)).expect("/proc"))
        .collect();
    let azurite0 = CpuTime::read(azurite_pid).expect("/proc of Azurite");
    let began = Instant::now();
    pause(window);
    let azurite1 = CpuTime::read(azurite_pid).expect("/proc of Azurite");
    let cpu1: Vec<CpuTime> = fleet
        .iter()
        .map(|d| CpuTime::read(pid(d)).expect("/proc"))
        .collect();
    let elapsed = began.elapsed();
    let ops1 = ops(&fleet);
    let rss: Vec<u64> = fleet
        .iter()
        .filter_map(|d| memory_kib(pid(d)))
        .map(|(now, _)| now)
        .collect();
    let mut out = Scale {
        daemons: n,
        window: elapsed,
        ops: ops1.since(&ops0),
        cpu: cpu1.iter().zip(&cpu0).map(|(b, a)| b.since(a)).sum(),
        rss_total_kib: rss.iter().sum(),
        rss_max_kib: rss.iter().copied().max().unwrap_or(0),
        pss_total_kib: fleet
            .iter()
            .filter_map(|d| memory_detail(pid(d)))
            .map(|m| m.pss_kib)
            .sum(),
        azurite_rss_kib: memory_kib(azurite_pid).map_or(0, |(now, _)| now),
        azurite_cpu: azurite1.since(&azurite0),
        ..Scale::default()
    };

    let mut transitions = Vec::new();
    out.handovers = graceful_trials(&mut group, &mut fleet, trials, |index, daemon, window| {
        addresses.lock().unwrap()[index] = http_of(daemon);
        transitions.push(window);
    });
    out.transitions = transitions;
    stop.store(true, Ordering::SeqCst);
    out.sweeps = sweeper.join().expect("sweeper");
    out.status = status_latency(
        &group.group.dir().join("scale-2.toml"),
        &http_of(&fleet[1]),
        status_runs,
    );
    drop(fleet);
    out
}

pub fn ms(d: Duration) -> f64 {
    (d.as_secs_f64() * 10_000.0).round() / 10.0
}
