//! `cargo run --release --example chaos -- --minutes 10`: randomized fault trials against several
//! `leasehold` daemons sharing one lease on a real Azurite. Each daemon reaches storage through
//! its own fault-injecting proxy, and runs the witness child, which records who ran when. At the
//! end the whole history goes through the checker of the fault suite (the test kit's `check`),
//! and the command prints: trials, overlaps (must be 0), the worst "child alive after its
//! deadline" (must be <= 0), failover times, the recovery times of the deletion and
//! dead-successor trials (each held to its bound), and writes an SVG timeline of who led when,
//! with the faults marked.
//!
//! Options: `--minutes N` (10), `--daemons N` (5), `--seed N` (random), `--svg FILE`
//! (target/chaos.svg), `--keep DIR` (keep the history and every daemon's log there; kept in a
//! temporary folder otherwise, which is printed and left behind when the check fails),
//! `--only KIND,...` (only these trials, named as in the summary with `-` for spaces, e.g.
//! `churn,slow-answers,sigkill`), `--priorities P,...` (mixed priorities: daemon i gets the i-th,
//! cycling, with `--preempt-after D`, default "10s": preferred leaders preempt amid the faults,
//! docs/preferred.md), `--slots N` (1; `[lease].slots = N`, docs/slots.md: each slot's witness
//! records into a history of its own, each slot is judged as one lease is, and never more than N
//! children may run at once; a trial against "the leader" picks a holder at random, and a successor
//! is the first member holding no slot), `--replicas N` (3 or 5: the lease on a majority of N
//! accounts, docs/quorum.md, each an Azurite of its own behind one proxy that every daemon goes
//! through, every replica 30 ms away with jitter; the region trials of `regions.rs` are drawn
//! among the others: a minority of the regions out, one flapping, a replica's blob wiped, each
//! moving no leadership and stopping no body, and a majority out, which stops the body by its
//! deadline until a majority answers again; a daemon's own faults are faults of its connections
//! on every region; the trials that do not apply to a set are printed at the start with why).
//! `LEASEHOLD_BIN` names a prebuilt daemon instead of building one.
//!
//! Trials run one after another, each while a leader runs, and mostly against that leader: a
//! partition (blackhole), slow answers, slow requests, reset connections, storage stopped and
//! started again, storage frozen, the daemon SIGKILLed (and started again later), the daemon
//! stopped with SIGTERM, the daemon frozen alone (SIGSTOP of its pid: its child's guard keeps the
//! deadlines, so its child is judged as any other), Ctrl-Z (SIGTSTP: it steps down, then stops;
//! SIGCONT later), the machine paused (the daemon and its child's guard SIGSTOPped together, as a
//! paused VM or `docker pause` would: what no lease can stop), an admin break of the lease, a log
//! stall (nothing reads the daemon's stdout and stderr, which fill up, while it is also
//! partitioned: a kill that waited on a log write would show as a late child or an overlap), and
//! churn (random kills, restarts and partitions of random daemons for 30 s). And, for ordered
//! succession (every daemon advertises its HTTP endpoint for wake-ups): the successor SIGKILLed
//! just before or just after the leader hands it the lease on SIGTERM, the successor cut off from
//! storage when it is handed the lease, a wake-up to a dead address (the successor frozen, so that
//! its endpoint never answers), and members joining and leaving during handoffs (for 30 s, the
//! leader stopped every few seconds while the successor stops, crashes, or a stopped member comes
//! back). And, for recovery (docs/safety.md, "Recovery from anything", issue 25): *delete*, the
//! lease blob (with slots, the blob of the victim's slot) deleted under its holder with the lease
//! id its metadata records, as anyone who can read it could; *delete twice*, the same, then deleted
//! again under the next holder as that one is SIGTERMed (its handoff finds no blob); *dead
//! successor*, the successor SIGKILLed 1 s before the leader's SIGTERM. Each times the group's
//! recovery to the next child on the slot: a deletion no sooner than the lock-delay `L + M` (16 s)
//! and within the liveness bound (32.2 s with one slot, 69.2 s with slots) + 2 s, a dead successor
//! within 4 s of the SIGTERM + 1 s (with slots: the liveness bound for slots); one out of bounds
//! fails the run. A paused machine cannot stop its child (README, "What a lease cannot promise"):
//! overlaps involving the child of a daemon paused with its guard are reported apart, with whether
//! the epoch fenced the stale child off.
//!
//! Exit code 0 when the history is safe, every timed recovery kept its bounds and every region
//! trial kept what docs/quorum.md promises, 1 when not (the history and logs are then kept), 2 on
//! bad usage.

use leasehold_testkit::binaries::{build_leasehold, release_profile};
use leasehold_testkit::defaults::{G, L, M, POLL, R, WATCH};
use leasehold_testkit::plot::{self, Rgb};
use leasehold_testkit::procfs::guard_started_by;
use leasehold_testkit::slots::{
    check_slots, slot_histories, slot_history_path, slot_witness_child,
};
use leasehold_testkit::storage::BlobAdmin;
use leasehold_testkit::*;
use nix::sys::signal::Signal;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, Instant};

mod regions;
use regions::{RegionTrial, Regions};

/// The lease timings of every daemon: the design's defaults, G = 2 s.
const LEASE: &str = "duration = \"15s\"\nrenew_interval = \"4s\"\nacquire_interval = \"1s\"\nsafety_margin = \"1s\"\n";
/// How often the witness writes a sign of life: the precision of "alive after its deadline".
const BEAT: &str = "50ms";

/// The liveness bound with one slot (issue 25, as tests/it/recovery.rs holds the daemon to it
/// after a deletion): the longest error backoff (10 s), a renew interval, the lease, the margin,
/// the longest poll, and a second for the last steps: 32.2 s.
const LIVENESS: Duration = secs(10)
    .saturating_add(R)
    .saturating_add(L)
    .saturating_add(M)
    .saturating_add(POLL)
    .saturating_add(secs(1));
/// With slots, a slot left free is found by a member listing the slots (every record lease,
/// 30 s, at most) and its watch, and a second more: 69.2 s.
const LIVENESS_SLOTS: Duration = LIVENESS
    .saturating_add(secs(30))
    .saturating_add(WATCH)
    .saturating_add(secs(1));
/// What the real binary may take beyond the liveness bound on a loaded 2-core machine.
const LIVENESS_SLACK: Duration = secs(2);
/// A successor SIGKILLed a second before the leader's SIGTERM (docs/safety.md, "Recovery from
/// anything", a confirmed handoff): the next child starts within 4 s of the SIGTERM.
const DEAD_SUCCESSOR: Duration = secs(4);
const DEAD_SUCCESSOR_SLACK: Duration = secs(1);

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Partition,
    SlowAnswers,
    SlowRequests,
    Reset,
    StorageRestart,
    StorageFreeze,
    Crash,
    Terminate,
    Pause,
    Tstp,
    MachinePause,
    AdminBreak,
    LogStall,
    Churn,
    SuccessorKill,
    SuccessorCutOff,
    DeadWake,
    HandoffChurn,
    Delete,
    DeleteTwice,
    DeadSuccessor,
    RegionOut,
    MajorityOut,
    RegionFlap,
    ReplicaWipe,
}

impl Kind {
    /// Every kind: its name (as printed; on the command line lowercase, `-` for spaces), how
    /// often it is picked, and its colour on the timeline.
    const ALL: [(Kind, &'static str, u32, &'static str); 25] = [
        (Kind::Partition, "partition", 3, "#d62728"),
        (Kind::SlowAnswers, "slow answers", 2, "#ff7f0e"),
        (Kind::SlowRequests, "slow requests", 1, "#bcbd22"),
        (Kind::Reset, "reset", 1, "#8c564b"),
        (Kind::StorageRestart, "storage restart", 1, "#1f77b4"),
        (Kind::StorageFreeze, "storage freeze", 1, "#17becf"),
        (Kind::Crash, "SIGKILL", 2, "#000000"),
        (Kind::Terminate, "SIGTERM", 1, "#7f7f7f"),
        (Kind::Pause, "SIGSTOP", 2, "#9467bd"),
        (Kind::Tstp, "SIGTSTP", 1, "#c5b0d5"),
        (Kind::MachinePause, "machine pause", 1, "#5254a3"),
        (Kind::AdminBreak, "admin break", 1, "#e377c2"),
        (Kind::LogStall, "log stall", 2, "#7b4173"),
        (Kind::Churn, "churn", 1, "#2ca02c"),
        (Kind::SuccessorKill, "successor SIGKILL", 2, "#393b79"),
        (Kind::SuccessorCutOff, "successor cut off", 1, "#e7969c"),
        (Kind::DeadWake, "dead wake-up", 1, "#637939"),
        (Kind::HandoffChurn, "handoff churn", 1, "#98df8a"),
        (Kind::Delete, "delete", 2, "#e6550d"),
        (Kind::DeleteTwice, "delete twice", 1, "#843c39"),
        (Kind::DeadSuccessor, "dead successor", 2, "#6b6ecf"),
        (Kind::RegionOut, "region out", 6, "#fdae6b"),
        (Kind::MajorityOut, "majority out", 6, "#a50f15"),
        (Kind::RegionFlap, "region flapping", 3, "#6baed6"),
        (Kind::ReplicaWipe, "replica wiped", 3, "#fdd0a2"),
    ];

    fn entry(self) -> (Kind, &'static str, u32, &'static str) {
        *Self::ALL
            .iter()
            .find(|e| e.0 == self)
            .expect("every kind is in Kind::ALL")
    }

    fn name(self) -> &'static str {
        self.entry().1
    }

    fn weight(self) -> u32 {
        self.entry().2
    }

    fn colour(self) -> &'static str {
        self.entry().3
    }

    /// Whether a trial of this kind times the group's recovery against a bound of docs/safety.md,
    /// "Recovery from anything" (a [`Recovery`]); its note then says it all, figures included.
    fn timed(self) -> bool {
        matches!(self, Kind::Delete | Kind::DeleteTwice | Kind::DeadSuccessor)
    }

    /// A region trial (regions.rs): it has figures of its own, and runs only on a set.
    fn regional(self) -> bool {
        matches!(
            self,
            Kind::RegionOut | Kind::MajorityOut | Kind::RegionFlap | Kind::ReplicaWipe
        )
    }

    /// Why this kind is left out of a run on a set (`on_set`) or on one account; `None`: it runs.
    fn left_out(self, on_set: bool) -> Option<&'static str> {
        match (self, on_set) {
            (k, false) if k.regional() => Some("one account has no regions (--replicas 3 or 5)"),
            (Kind::StorageRestart, true) => Some(
                "an Azurite restarted forgets its leases, which Azure keeps (on one account the \
                 trial holds the others off until the holder renewed); a region down is `region \
                 out` and `majority out`",
            ),
            (Kind::StorageFreeze, true) => {
                Some("a region frozen is one of the ways of `region out` and `majority out`")
            }
            (Kind::Delete | Kind::DeleteTwice, true) => Some(
                "a set's lease is a blob on each replica: `replica wiped` deletes one under its \
                 holder (the recovery bound after a deletion is one account's)",
            ),
            _ => None,
        }
    }

    /// The kind named `name` as on the command line.
    fn parse(name: &str) -> Option<Kind> {
        Self::ALL
            .iter()
            .map(|e| e.0)
            .find(|k| k.name().to_lowercase().replace(' ', "-") == name.to_lowercase())
    }
}

/// A fault as drawn on the timeline: on one daemon's row, or on the storage row.
#[derive(Debug, Clone)]
struct Mark {
    kind: Kind,
    /// The daemon it hit; `None`: storage (everyone).
    row: Option<String>,
    start: Duration,
    end: Duration,
    /// What it was, e.g. `slow answers by 2s` (printed with its trial).
    note: String,
}

/// One trial: a fault (or a churn of several), and when it began.
#[derive(Debug, Clone)]
struct Trial {
    kind: Kind,
    start: Duration,
    /// What was done, as printed: its fault's note (`slow answers by 2s`), else its kind.
    note: String,
}

/// A recovery that a trial times against its bound (docs/safety.md, "Recovery from anything"): from
/// a blob deleted under its holder, or from a leader's SIGTERM a second after its successor died,
/// to the next child on that slot.
#[derive(Debug, Clone)]
struct Recovery {
    kind: Kind,
    /// The trial's number, as printed while the run goes.
    trial: usize,
    /// `None`: no child started on the slot within the bound, its slack and 10 s more.
    took: Option<Duration>,
    /// A child sooner than this breaks the contract too: the lock-delay `L + M` after a
    /// deletion (nobody starts on the re-created blob before it).
    floor: Duration,
    bound: Duration,
    /// What the real binary may take beyond the bound on the loaded machine.
    slack: Duration,
}

impl Recovery {
    fn in_bounds(&self) -> bool {
        self.took
            .is_some_and(|t| t >= self.floor && t <= self.bound + self.slack)
    }
}

/// A duration as the summary prints it: `17.8s`.
fn figure(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// One daemon of the group: its proxy, its config, and its current process.
struct Member {
    identity: String,
    config: PathBuf,
    /// Where its HTTP endpoint listens, which it advertises for wake-ups.
    http: String,
    /// Its own proxy to the one account; `None` on a set (the regions' proxies, shared).
    proxy: Option<FaultProxy>,
    daemon: Option<Daemon>,
    /// How many times it was started, for the log file names.
    runs: usize,
    /// Since when it is down (killed or terminated), for the timeline.
    down_since: Option<Duration>,
}

/// One witness history file, read incrementally.
struct TailFile {
    path: PathBuf,
    offset: u64,
    partial: String,
}

impl TailFile {
    fn new(path: PathBuf) -> Self {
        Self {
            path,
            offset: 0,
            partial: String::new(),
        }
    }

    /// The whole lines written since the last read.
    fn fresh(&mut self) -> Option<String> {
        let mut file = std::fs::File::open(&self.path).ok()?;
        file.seek(SeekFrom::Start(self.offset)).ok()?;
        let mut fresh = String::new();
        let n = file.read_to_string(&mut fresh).ok()?;
        self.offset += n as u64;
        self.partial.push_str(&fresh);
        let cut = self.partial.rfind('\n')?;
        Some(self.partial.drain(..=cut).collect())
    }
}

/// A child's life as the witness histories tell it so far.
struct Seen {
    identity: String,
    pid: u32,
    epoch: u64,
    /// The slot whose history it writes (0 with one slot).
    slot: u32,
    start: Duration,
    last_seen: Duration,
    ended: bool,
    /// When it exited by itself (an `exit` line, not a stop), if it did.
    exited: Option<Duration>,
}

/// The witness histories (one per slot), read incrementally, plus what is needed to tell who
/// leads now.
struct Tail {
    /// One per slot, in slot order.
    files: Vec<TailFile>,
    /// By pid.
    lives: BTreeMap<u32, Seen>,
}

impl Tail {
    fn new(paths: Vec<PathBuf>) -> Self {
        Self {
            files: paths.into_iter().map(TailFile::new).collect(),
            lives: BTreeMap::new(),
        }
    }

    fn poll(&mut self) {
        let fresh: Vec<(u32, String)> = (0..)
            .zip(self.files.iter_mut())
            .filter_map(|(slot, f)| Some((slot, f.fresh()?)))
            .collect();
        for (slot, w) in &fresh {
            for e in History::parse(w).events {
                match e.kind.as_str() {
                    "start" => {
                        let seen = Seen {
                            identity: e.identity.clone(),
                            pid: e.pid,
                            epoch: e.epoch,
                            slot: *slot,
                            start: e.t,
                            last_seen: e.t,
                            ended: false,
                            exited: None,
                        };
                        self.lives.insert(e.pid, seen);
                    }
                    "stop" | "exit" => {
                        if let Some(l) = self.lives.get_mut(&e.pid) {
                            l.last_seen = e.t;
                            l.ended = true;
                            l.exited = (e.kind == "exit").then_some(e.t);
                        }
                    }
                    _ => {
                        if let Some(l) = self.lives.get_mut(&e.pid) {
                            l.last_seen = l.last_seen.max(e.t);
                        }
                    }
                }
            }
        }
    }

    /// The children running now (seen within the last 300 ms), latest started first.
    fn running(&mut self) -> Vec<&Seen> {
        self.poll();
        let now = mono_now();
        let mut running: Vec<&Seen> = self
            .lives
            .values()
            .filter(|l| !l.ended && l.last_seen + Duration::from_millis(300) >= now)
            .collect();
        running.sort_by_key(|l| std::cmp::Reverse(l.start));
        running
    }

    /// The children running now, latest started first: (identity, pid).
    fn holders(&mut self) -> Vec<(String, u32)> {
        self.running()
            .into_iter()
            .map(|l| (l.identity.clone(), l.pid))
            .collect()
    }

    /// The slot of `identity`'s child running now, if it runs one.
    fn slot_of(&mut self, identity: &str) -> Option<u32> {
        self.running()
            .into_iter()
            .find(|l| l.identity == identity)
            .map(|l| l.slot)
    }

    /// The first child that started on `slot` after `t`: (identity, start).
    fn first_start_after(&mut self, t: Duration, slot: u32) -> Option<(String, Duration)> {
        self.poll();
        self.lives
            .values()
            .filter(|l| l.slot == slot && l.start > t)
            .min_by_key(|l| l.start)
            .map(|l| (l.identity.clone(), l.start))
    }

    /// The child running now that started last, if any.
    fn leader(&mut self) -> Option<(String, u32)> {
        self.holders().into_iter().next()
    }

    /// The epoch child `pid` was started with.
    fn epoch_of(&mut self, pid: u32) -> Option<u64> {
        self.poll();
        self.lives.get(&pid).map(|l| l.epoch)
    }

    /// Child `pid`'s last sign of life so far.
    fn last_seen(&mut self, pid: u32) -> Option<Duration> {
        self.poll();
        self.lives.get(&pid).map(|l| l.last_seen)
    }

    /// When child `pid` exited by itself, if it did.
    fn exited(&mut self, pid: u32) -> Option<Duration> {
        self.poll();
        self.lives.get(&pid).and_then(|l| l.exited)
    }

    /// Whether child `pid` has not ended and gave a sign of life within `within`.
    fn beating(&mut self, pid: u32, within: Duration) -> bool {
        self.poll();
        let now = mono_now();
        (self.lives.get(&pid)).is_some_and(|l| !l.ended && l.last_seen + within >= now)
    }
}

struct Chaos {
    rng: fastrand::Rng,
    /// `[lease].slots` of the group: with more than one, "the leader" of a trial is a holder
    /// picked at random.
    slots: u32,
    /// The one account; `None` on a set.
    azurite: Option<Azurite>,
    /// The set's regions, with `--replicas`.
    regions: Option<Regions>,
    group: Group,
    /// A config for `leasehold status`, reaching storage directly.
    observer: PathBuf,
    members: Vec<Member>,
    tail: Tail,
    /// Deadlines from the logs of daemons no longer running.
    deadlines: Deadlines,
    marks: Vec<Mark>,
    trials: Vec<Trial>,
    /// (identity, from, to, with its guard): the daemon was paused, alone (its guard keeps its
    /// child's deadlines) or with its child's guard (a paused machine: no deadline is kept).
    pauses: Vec<(String, Duration, Duration, bool)>,
    /// (identity, from, to): the daemon was not running.
    downs: Vec<(String, Duration, Duration)>,
    /// What the deletion and dead-successor trials timed.
    recoveries: Vec<Recovery>,
    /// What the region trials found.
    region_trials: Vec<RegionTrial>,
    /// Since when the child of this pid's daemon was first seen holding every replica: a
    /// replica counts only once its blob is out of its lock-delay (docs/quorum.md).
    held_all_since: Option<(u32, Duration)>,
    logs: PathBuf,
}

impl Chaos {
    fn member(&mut self, identity: &str) -> &mut Member {
        self.members
            .iter_mut()
            .find(|m| m.identity == identity)
            .expect("a member")
    }

    /// The victim of a trial against "the leader": the child running (with slots, a holder at
    /// random), if any.
    fn holder(&mut self) -> Option<String> {
        let holders = self.tail.holders();
        match self.slots {
            1 => holders.into_iter().next().map(|h| h.0),
            _ if holders.is_empty() => None,
            _ => {
                let i = self.rng.usize(..holders.len());
                Some(holders[i].0.clone())
            }
        }
    }

    fn random_member(&mut self) -> String {
        let i = self.rng.usize(..self.members.len());
        self.members[i].identity.clone()
    }

    fn spawn(&mut self, identity: &str) {
        let now = mono_now();
        let m = self.member(identity);
        assert!(m.daemon.is_none());
        m.runs += 1;
        let daemon = Daemon::launch(&m.config, identity)
            .deadline_log()
            .echo(false)
            .http_on(&m.http)
            .spawn();
        let pid = daemon.pid().as_raw().unsigned_abs();
        m.daemon = Some(daemon);
        if let Some(since) = m.down_since.take() {
            let id = m.identity.clone();
            self.downs.push((id, since, now));
        }
        if let Some(regions) = &self.regions {
            regions.register(pid, identity);
        }
    }

    /// `fault` on `id`'s link to storage: its own proxy's on one account, its connections' on
    /// every region's proxy on a set.
    fn set_link(&mut self, id: &str, fault: Fault) {
        match &self.regions {
            Some(regions) => regions.set_member(id, fault),
            None => {
                if let Some(proxy) = &self.member(id).proxy {
                    proxy.set(fault);
                }
            }
        }
    }

    /// The one account's Azurite (the storage trials run only there).
    fn storage(&mut self) -> &mut Azurite {
        self.azurite
            .as_mut()
            .expect("storage trials run on one account")
    }

    /// Keeps a daemon's log (and its deadlines) once its process is gone.
    fn retire(&mut self, identity: &str) {
        let logs = self.logs.clone();
        let m = self.member(identity);
        let Some(mut daemon) = m.daemon.take() else {
            return;
        };
        if daemon.wait_exit(Duration::ZERO).is_none() {
            let _ = nix::sys::signal::kill(daemon.pid(), Signal::SIGKILL);
            daemon.wait_exit(secs(5));
        }
        daemon.wait_log_complete(secs(5));
        let log = daemon.log();
        let path = logs.join(format!("{}-{}.log", m.identity, m.runs));
        let _ = std::fs::write(path, &log);
        let pid = daemon.pid().as_raw().unsigned_abs();
        drop(daemon);
        m.down_since = Some(mono_now());
        self.deadlines.read_log(identity, &log);
        if let Some(regions) = &self.regions {
            regions.forget(pid);
        }
    }

    /// Every deadline logged so far, by running and retired daemons.
    fn all_deadlines(&self) -> Deadlines {
        let mut all = self.deadlines.clone();
        for m in &self.members {
            if let Some(d) = &m.daemon {
                all.read_log(&m.identity, &d.log());
            }
        }
        all
    }

    fn sleep(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(100)));
            self.tail.poll();
        }
    }

    fn pick(&mut self, lo_ms: u64, hi_ms: u64) -> Duration {
        Duration::from_millis(self.rng.u64(lo_ms..=hi_ms))
    }

    fn wait_leader(&mut self, timeout: Duration) -> Option<(String, u32)> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(l) = self.tail.leader() {
                return Some(l);
            }
            if Instant::now() >= until {
                return None;
            }
            self.sleep(Duration::from_millis(100));
        }
    }

    fn mark(&mut self, kind: Kind, row: Option<&str>, start: Duration, note: String) {
        self.marks.push(Mark {
            kind,
            row: row.map(str::to_owned),
            start,
            end: mono_now(),
            note,
        });
    }

    /// Sends `sig` to `id`'s daemon, if it runs.
    fn send(&mut self, id: &str, sig: Signal) {
        if let Some(d) = &self.member(id).daemon {
            let _ = nix::sys::signal::kill(d.pid(), sig);
        }
    }

    /// Ends `id`'s daemon with `sig` (SIGTERM: waits for its graceful end) and keeps its log.
    fn end(&mut self, id: &str, sig: Signal) {
        self.send(id, sig);
        self.wait_end(id);
    }

    /// Waits for `id`'s daemon to exit (after a signal sent before), and keeps its log.
    fn wait_end(&mut self, id: &str) {
        if let Some(d) = self.member(id).daemon.as_mut() {
            d.wait_exit(G + secs(10));
        }
        self.retire(id);
    }

    /// The daemons that are down.
    fn down(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|m| m.daemon.is_none())
            .map(|m| m.identity.clone())
            .collect()
    }

    /// Starts again every daemon that is down.
    fn spawn_down(&mut self) {
        for id in self.down() {
            self.spawn(&id);
        }
    }

    /// A mark for an instant fault (a signal) on `row` at `at`.
    fn mark_instant(&mut self, kind: Kind, row: &str, at: Duration, note: &str) {
        self.marks.push(Mark {
            kind,
            row: Some(row.to_owned()),
            start: at,
            end: at,
            note: note.to_owned(),
        });
    }

    /// `fault` on `id`'s proxy for `hold`, then passing again.
    fn fault_for(&mut self, id: &str, fault: Fault, hold: Duration) {
        self.set_link(id, fault);
        self.sleep(hold);
        self.set_link(id, Fault::Pass);
    }

    fn trial(&mut self, kind: Kind) {
        let target = match self.holder() {
            Some(identity) => identity,
            None => self.random_member(),
        };
        let start = mono_now();
        let marks_before = self.marks.len();
        match kind {
            Kind::Partition | Kind::SlowAnswers | Kind::SlowRequests | Kind::Reset => {
                let (fault, note, hold) = self.proxy_fault(kind);
                self.fault_for(&target, fault, hold);
                self.mark(kind, Some(&target), start, format!("{}{note}", kind.name()));
            }
            Kind::StorageRestart | Kind::StorageFreeze => {
                let outage = self.pick(1000, 20000);
                if kind == Kind::StorageRestart {
                    self.storage().stop();
                    self.sleep(outage);
                    self.restart_storage_keeping_leases();
                } else {
                    self.storage().freeze();
                    self.sleep(outage);
                    self.storage().thaw();
                }
                self.mark(kind, None, start, kind.name().into());
            }
            Kind::Crash | Kind::Terminate => {
                let sig = match kind {
                    Kind::Crash => Signal::SIGKILL,
                    _ => Signal::SIGTERM,
                };
                self.end(&target, sig);
                let hold = self.pick(1000, 12000);
                self.sleep(hold);
                self.spawn(&target);
                self.mark(kind, Some(&target), start, kind.name().into());
            }
            Kind::Pause | Kind::Tstp => {
                if self.member(&target).daemon.is_some() {
                    let (sig, note) = match kind {
                        Kind::Pause => (Signal::SIGSTOP, "SIGSTOP (the daemon alone)"),
                        _ => (Signal::SIGTSTP, "SIGTSTP (Ctrl-Z: step down, then stop)"),
                    };
                    self.send(&target, sig);
                    let hold = self.pick(1000, 25000);
                    self.sleep(hold);
                    if kind == Kind::Tstp {
                        // As a shell's `fg`: once the daemon has stopped itself (it steps down
                        // first), or 10 s at most.
                        let pid = self.member(&target).daemon.as_ref().map(Daemon::pid);
                        let stopped = |pid: u32| {
                            leasehold_testkit::procfs::processes()
                                .iter()
                                .any(|p| p.pid == pid && p.state == "T")
                        };
                        if let Some(pid) = pid {
                            wait_until(secs(10), || stopped(pid.as_raw() as u32));
                        }
                    }
                    self.send(&target, Signal::SIGCONT);
                    self.pauses.push((target.clone(), start, mono_now(), false));
                    self.mark(kind, Some(&target), start, note.into());
                }
            }
            Kind::MachinePause => {
                if let Some(pid) = self.member(&target).daemon.as_ref().map(Daemon::pid) {
                    // The daemon and its child's guard (if a child runs) stop together; the
                    // child runs on, as one outside the frozen cgroup would.
                    let guard = guard_started_by(pid.as_raw() as u32)
                        .map(|g| nix::unistd::Pid::from_raw(g as i32));
                    let _ = nix::sys::signal::kill(pid, Signal::SIGSTOP);
                    if let Some(guard) = guard {
                        let _ = nix::sys::signal::kill(guard, Signal::SIGSTOP);
                    }
                    let hold = self.pick(1000, 25000);
                    self.sleep(hold);
                    if let Some(guard) = guard {
                        let _ = nix::sys::signal::kill(guard, Signal::SIGCONT);
                    }
                    let _ = nix::sys::signal::kill(pid, Signal::SIGCONT);
                    self.pauses.push((target.clone(), start, mono_now(), true));
                    let note = match guard {
                        Some(_) => "machine pause (the daemon and its child's guard)",
                        None => "machine pause (the daemon; no child ran)",
                    };
                    self.mark(kind, Some(&target), start, note.into());
                }
            }
            Kind::AdminBreak => {
                // The safety model's advice: a break period of at least R + G.
                let period = R + G + secs(1);
                let broke = self.break_lease(period);
                self.sleep(period);
                let note = match broke {
                    Ok(_) => format!("admin break, period {period:?}"),
                    Err(e) => format!("admin break, period {period:?}: {e}"),
                };
                self.mark(kind, None, start, note);
            }
            Kind::LogStall => {
                let stalled = self
                    .member(&target)
                    .daemon
                    .as_ref()
                    .is_some_and(Daemon::stall_output);
                let hold = self.pick(2000, 25000);
                self.fault_for(&target, Fault::Blackhole, hold);
                if let Some(d) = &self.member(&target).daemon {
                    d.resume_output();
                }
                let note = if stalled {
                    "log stall + partition"
                } else {
                    "partition (the log pipes could not be filled)"
                };
                self.mark(kind, Some(&target), start, note.into());
            }
            Kind::Churn => {
                self.churn();
                self.mark(kind, None, start, "churn".into());
            }
            Kind::SuccessorKill | Kind::SuccessorCutOff | Kind::DeadWake => {
                self.handoff_fault(kind, &target, start);
            }
            Kind::HandoffChurn => {
                self.handoff_churn();
                self.mark(kind, None, start, "handoff churn".into());
            }
            Kind::Delete | Kind::DeleteTwice => self.delete_trial(kind, &target, start),
            Kind::DeadSuccessor => self.dead_successor(&target, start),
            Kind::RegionOut | Kind::RegionFlap => self.minority_out(kind, start),
            Kind::MajorityOut => self.majority_out(start),
            Kind::ReplicaWipe => self.replica_wipe(start),
        }
        let note = match self.marks[marks_before..].last() {
            Some(mark) if kind.timed() => mark.note.clone(),
            Some(mark) if kind != Kind::Churn => match &mark.row {
                Some(daemon) => format!("{} on {daemon}", mark.note),
                None => mark.note.clone(),
            },
            _ => kind.name().to_owned(),
        };
        self.trials.push(Trial { kind, start, note });
    }

    /// The proxy fault of a trial of `kind`: the fault (its delay drawn from the table), its
    /// note, and how long it holds.
    fn proxy_fault(&mut self, kind: Kind) -> (Fault, String, Duration) {
        // kind, delays to draw from (seconds), how long the fault holds (ms, from..=to).
        const TABLE: [(Kind, &[u64], u64, u64); 4] = [
            (Kind::Partition, &[], 2000, 25000),
            (Kind::SlowAnswers, &[1, 2, 3, 5, 8], 5000, 25000),
            (Kind::SlowRequests, &[1, 2, 3, 5], 5000, 20000),
            (Kind::Reset, &[], 1000, 10000),
        ];
        let (_, delays, lo, hi) = *TABLE
            .iter()
            .find(|e| e.0 == kind)
            .expect("a proxy fault kind");
        let delay = (!delays.is_empty()).then(|| secs(delays[self.rng.usize(..delays.len())]));
        let fault = match (kind, delay) {
            (Kind::SlowAnswers, Some(d)) => Fault::slow_answers(d),
            (Kind::SlowRequests, Some(d)) => Fault::slow_requests(d),
            (Kind::Partition, _) => Fault::Blackhole,
            _ => Fault::Reset,
        };
        let note = delay.map(|d| format!(" by {d:?}")).unwrap_or_default();
        (fault, note, self.pick(lo, hi))
    }

    /// Azurite forgets every lease when it restarts (tests/it/faults.rs, scenario 3, says why); Azure
    /// keeps them. To model Azure, the daemons other than the leases' holders (one per slot) are
    /// kept away from storage (blackholed) until every holder has renewed its lease, which an
    /// expired lease nobody took allows, or until its kill deadline has passed.
    fn restart_storage_keeping_leases(&mut self) {
        let now = mono_now();
        let deadlines = self.all_deadlines();
        let mut holders: Vec<(String, Duration)> = self
            .members
            .iter()
            .filter_map(|m| {
                let latest = deadlines.all_of(&m.identity).into_iter().max()?;
                (latest > now).then(|| (m.identity.clone(), latest))
            })
            .collect();
        holders.sort_by_key(|(_, k)| std::cmp::Reverse(*k));
        holders.truncate(self.slots as usize);
        let others: Vec<String> = self
            .members
            .iter()
            .map(|m| m.identity.clone())
            .filter(|id| holders.iter().all(|(h, _)| h != id))
            .collect();
        for id in others.iter().filter(|_| !holders.is_empty()) {
            self.set_link(id, Fault::Blackhole);
        }
        self.storage().start_again();
        let up = mono_now();
        let lease = secs(15) - secs(1);
        for (holder, kill_at) in &holders {
            loop {
                let renewed = self
                    .member(holder)
                    .daemon
                    .as_ref()
                    .map(|d| Deadlines::from_log(holder, &d.log()))
                    .and_then(|d| d.all_of(holder).into_iter().max())
                    .is_some_and(|k| k - lease > up);
                if renewed || mono_now() > *kill_at {
                    break;
                }
                self.sleep(Duration::from_millis(50));
            }
        }
        for id in others.iter().filter(|_| !holders.is_empty()) {
            self.set_link(id, Fault::Pass);
        }
    }

    /// An admin's break of the group's lease, others acquiring after `period`: on a set,
    /// `leasehold break`, which breaks it on every replica it reaches (and fails short of a
    /// majority).
    fn break_lease(&mut self, period: Duration) -> Result<(), String> {
        if self.regions.is_none() {
            return self.group.admin().break_lease(period);
        }
        let config = self.observer.display().to_string();
        let period = format!("{}s", period.as_secs());
        let (out, _) = leasehold_within(&["break", "-c", &config, "--period", &period], secs(30));
        match out.status.success() {
            true => Ok(()),
            false => Err(String::from_utf8_lossy(&out.stderr).trim().to_owned()),
        }
    }

    /// The successor in line now, as `leasehold status` lists it, if it runs.
    fn successor(&mut self) -> Option<String> {
        let config = self.observer.to_str()?.to_owned();
        let (out, _) = leasehold_within(&["status", "-c", &config, "--json"], secs(10));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        // With slots, a holder hands its slot to the first live member holding none.
        let slots = self.slots;
        let id = report["members"].as_array()?.iter().find(|m| match slots {
            1 => m["role"] == "successor",
            _ => m["alive"] == true && m["slot"].is_null() && m["role"] != "standby",
        })?["identity"]
            .as_str()?
            .to_owned();
        let runs = self
            .members
            .iter()
            .any(|m| m.identity == id && m.daemon.is_some());
        runs.then_some(id)
    }

    /// The leader `leader` stops (SIGTERM) and hands its lease to a successor that cannot take
    /// it: SIGKILLed just before or just after the handoff, cut off from storage, or frozen (its
    /// wake-up endpoint never answers). Every one of them ends with the lease expiring unrenewed
    /// and another member taking it, or with the successor taking it late (frozen, then thawed).
    /// With slots, `leader` is a holder and its successor the first member holding no slot.
    fn handoff_fault(&mut self, kind: Kind, leader: &str, start: Duration) {
        let Some(next) = self.successor().filter(|n| n != leader) else {
            self.mark(kind, None, start, format!("{} (no successor)", kind.name()));
            return;
        };
        // Before and after the handoff, in turn.
        let before = self
            .trials
            .iter()
            .filter(|t| t.kind == Kind::SuccessorKill)
            .count()
            % 2
            == 0;
        let note = match kind {
            Kind::SuccessorKill if before => {
                self.send(&next, Signal::SIGKILL);
                self.send(leader, Signal::SIGTERM);
                format!("successor {next} SIGKILLed just before the handoff")
            }
            Kind::SuccessorKill => {
                // Frozen first, so that it cannot take the lease before it dies.
                self.send(&next, Signal::SIGSTOP);
                self.send(leader, Signal::SIGTERM);
                let handed =
                    self.member(leader).daemon.as_ref().is_some_and(|d| {
                        d.wait_log(&format!("handed the lease to {next}"), secs(10))
                    });
                self.send(&next, Signal::SIGKILL);
                format!(
                    "successor {next} SIGKILLed just after the handoff{}",
                    if handed { "" } else { " (not handed to it)" }
                )
            }
            Kind::SuccessorCutOff => {
                self.set_link(&next, Fault::Blackhole);
                self.send(leader, Signal::SIGTERM);
                format!("successor {next} cut off from storage at the handoff")
            }
            _ => {
                self.send(&next, Signal::SIGSTOP);
                self.send(leader, Signal::SIGTERM);
                format!("wake-up to a dead address: successor {next} frozen at the handoff")
            }
        };
        self.wait_end(leader);
        let hold = match kind {
            Kind::DeadWake => self.pick(1000, 8000),
            _ => self.pick(15000, 25000),
        };
        self.sleep(hold);
        match kind {
            Kind::SuccessorKill => {
                self.wait_end(&next);
                self.spawn(&next);
            }
            Kind::SuccessorCutOff => self.set_link(&next, Fault::Pass),
            _ => {
                self.send(&next, Signal::SIGCONT);
                let at = mono_now();
                self.pauses.push((next.clone(), start, at, false));
            }
        }
        self.spawn(leader);
        self.mark(kind, Some(&next), start, note);
    }

    /// The blob of `slot`: the group's blob for slot 0, `<blob>.slots/<i>` beside it for the
    /// others (docs/slots.md).
    fn slot_admin(&self, slot: u32) -> BlobAdmin {
        match slot {
            0 => self.group.admin(),
            i => BlobAdmin::new(
                &self.group.connection_string,
                &self.group.container,
                &format!("{}.slots/{i}", self.group.blob),
            ),
        }
    }

    /// Waits up to `within` for a child to start on `slot` after `t`: who, and how long after `t`.
    fn wait_start_after(
        &mut self,
        t: Duration,
        slot: u32,
        within: Duration,
    ) -> Option<(String, Duration)> {
        let until = Instant::now() + within;
        loop {
            if let Some((identity, start)) = self.tail.first_start_after(t, slot) {
                return Some((identity, start - t));
            }
            if Instant::now() >= until {
                return None;
            }
            self.sleep(Duration::from_millis(100));
        }
    }

    /// Records the recovery `next` (who led on the slot, how long after the fault) of the trial
    /// under way, held to `floor` and `bound` + `slack`; what it says, for the trial's note
    /// (`since`: the fault, e.g. "the deletion").
    fn record_recovery(
        &mut self,
        kind: Kind,
        next: Option<(String, Duration)>,
        (floor, bound, slack): (Duration, Duration, Duration),
        waited: Duration,
        since: &str,
    ) -> String {
        let recovery = Recovery {
            kind,
            trial: self.trials.len() + 1,
            took: next.as_ref().map(|n| n.1),
            floor,
            bound,
            slack,
        };
        let verdict = if recovery.in_bounds() {
            String::new()
        } else {
            format!(
                " (OUT OF BOUNDS: at least {}, at most {} + {})",
                figure(floor),
                figure(bound),
                figure(slack)
            )
        };
        self.recoveries.push(recovery);
        match next {
            Some((identity, took)) => {
                format!("{identity} led {} after {since}{verdict}", figure(took))
            }
            None => format!("NOBODY led within {} of {since}{verdict}", figure(waited)),
        }
    }

    /// How a trial names `slot`'s blob.
    fn blob_name(&self, slot: u32) -> String {
        match self.slots {
            1 => "the lease blob".into(),
            _ => format!("slot {slot}'s blob"),
        }
    }

    /// The blob of the slot `leader` holds deleted under it, with the lease id its metadata records
    /// (docs/safety.md, "Recovery from anything": the old child lives at most to its kill deadline,
    /// nobody starts on the re-created blob before the lock-delay `L + M`); for `delete twice`,
    /// deleted again under the next holder as that one is SIGTERMed, so that its handoff finds no
    /// blob. Each deletion is timed to the next child on the slot, held to the lock-delay and to
    /// the liveness bound.
    fn delete_trial(&mut self, kind: Kind, leader: &str, start: Duration) {
        let Some(slot) = self.tail.slot_of(leader) else {
            self.mark(
                kind,
                None,
                start,
                format!("{} (no child running)", kind.name()),
            );
            return;
        };
        let blob = self.blob_name(slot);
        let (next, said) = self.delete_under(kind, leader, slot, false);
        let note = format!("{blob} deleted under {leader}: {said}");
        let next = match next {
            Some(next) if kind == Kind::DeleteTwice => next,
            _ => {
                self.mark(kind, Some(leader), start, note);
                return;
            }
        };
        self.mark(kind, Some(leader), start, note.clone());
        let again = mono_now();
        let (_, said) = self.delete_under(kind, &next, slot, true);
        self.wait_end(&next);
        let note = format!("{note}; deleted again under {next} as it was SIGTERMed: {said}");
        self.mark(kind, Some(&next), again, note);
        let hold = self.pick(1000, 5000);
        self.sleep(hold);
        self.spawn(&next);
    }

    /// Deletes `slot`'s blob under its holder `holder` (and, if `sigterm`, SIGTERMs `holder`
    /// right after), then waits for the next child on the slot and records the recovery: who
    /// led, and what to say of it.
    fn delete_under(
        &mut self,
        kind: Kind,
        holder: &str,
        slot: u32,
        sigterm: bool,
    ) -> (Option<String>, String) {
        let deleted = mono_now();
        let result = self.slot_admin(slot).delete_under_lease();
        if sigterm {
            self.send(holder, Signal::SIGTERM);
        }
        if let Err(e) = result {
            return (None, format!("not deleted: {e}"));
        }
        let bound = match self.slots {
            1 => LIVENESS,
            _ => LIVENESS_SLOTS,
        };
        let waited = bound + LIVENESS_SLACK + secs(10);
        let next = self.wait_start_after(deleted, slot, waited);
        let who = next.as_ref().map(|n| n.0.clone());
        let limits = (L + M, bound, LIVENESS_SLACK);
        let said = self.record_recovery(kind, next, limits, waited, "the deletion");
        (who, said)
    }

    /// Issue 25, case 3: the successor SIGKILLed a second before the leader's SIGTERM. Its record
    /// still looks alive, so the leader hands it the lease; the wake-up fails, and the leader
    /// passes it over once its confirm window is over (docs/safety.md, "Recovery from anything")
    /// and hands the lease on. Timed from the SIGTERM to the next child on the leader's slot:
    /// within 4 s.
    fn dead_successor(&mut self, leader: &str, start: Duration) {
        let kind = Kind::DeadSuccessor;
        let Some(slot) = self.tail.slot_of(leader) else {
            self.mark(
                kind,
                None,
                start,
                format!("{} (no child running)", kind.name()),
            );
            return;
        };
        let Some(next) = self.successor().filter(|n| n != leader) else {
            self.mark(kind, None, start, format!("{} (no successor)", kind.name()));
            return;
        };
        let passing = format!("passing it over successor=\"{next}\"");
        let passed = |chaos: &mut Self| {
            chaos
                .member(leader)
                .daemon
                .as_ref()
                .map_or(0, |d| d.log().matches(&passing).count())
        };
        let passed_before = passed(self);
        let killed = mono_now();
        self.send(&next, Signal::SIGKILL);
        self.sleep(secs(1));
        let sigterm = mono_now();
        self.send(leader, Signal::SIGTERM);
        // With slots the confirmed handoff may end in a release (the leader's view of who
        // holds the other slots can be stale: chaos seed 7, --slots 3), and the free slot is
        // then found as any free slot is: the liveness bound for slots. On a set the handover's
        // bounds are not promised yet (docs/testing.md: a set's episodes are held to the liveness
        // bound at the least).
        let (bound, slack) = match (self.slots, &self.regions) {
            (1, None) => (DEAD_SUCCESSOR, DEAD_SUCCESSOR_SLACK),
            (1, Some(_)) => (LIVENESS, LIVENESS_SLACK),
            _ => (LIVENESS_SLOTS, LIVENESS_SLACK),
        };
        let waited = bound + slack + secs(10);
        let new = self.wait_start_after(sigterm, slot, waited);
        let limits = (Duration::ZERO, bound, slack);
        let said = self.record_recovery(kind, new, limits, waited, "the SIGTERM");
        if let Some(d) = self.member(leader).daemon.as_mut() {
            d.wait_exit(G + secs(10));
            d.wait_log_complete(secs(5));
        }
        let how = match passed(self) > passed_before {
            true => "passed over",
            false => "not passed over: the lease was not handed to it",
        };
        self.mark_instant(kind, leader, sigterm, "SIGTERM (dead successor)");
        let note =
            format!("successor {next} SIGKILLed 1 s before {leader}'s SIGTERM ({how}): {said}");
        self.mark(kind, Some(&next), killed, note);
        self.wait_end(leader);
        self.wait_end(&next);
        let hold = self.pick(1000, 5000);
        self.sleep(hold);
        self.spawn(&next);
        self.spawn(leader);
    }

    /// For 30 s, the leader is stopped (SIGTERM: a handoff) every 2-4 s, and at the same moment
    /// the successor leaves (SIGTERM), crashes (SIGKILL), or a stopped member comes back.
    fn handoff_churn(&mut self) {
        let until = Instant::now() + secs(30);
        while Instant::now() < until {
            let pause = self.pick(2000, 4000);
            self.sleep(pause);
            let Some(leader) = self.holder() else {
                continue;
            };
            let now = mono_now();
            let down = self.down();
            let next = self.successor().filter(|n| *n != leader);
            self.send(&leader, Signal::SIGTERM);
            // What befalls the successor meanwhile: its signal, mark and note.
            const SUCCESSOR: [(Signal, Kind, &str); 2] = [
                (
                    Signal::SIGTERM,
                    Kind::Terminate,
                    "successor left (handoff churn)",
                ),
                (
                    Signal::SIGKILL,
                    Kind::Crash,
                    "successor SIGKILL (handoff churn)",
                ),
            ];
            match (SUCCESSOR.get(self.rng.usize(..3)), next) {
                (Some((sig, kind, note)), Some(next)) => {
                    self.end(&next, *sig);
                    self.mark_instant(*kind, &next, now, note);
                }
                _ => {
                    if let Some(id) = down.first() {
                        self.spawn(id);
                    }
                }
            }
            self.wait_end(&leader);
            // Three members at least keep running, so that someone leads.
            let running = self.members.iter().filter(|m| m.daemon.is_some()).count();
            if running < 3 {
                let down: Vec<String> =
                    self.down().into_iter().filter(|id| *id != leader).collect();
                for id in down.iter().take(3 - running) {
                    self.spawn(id);
                }
            }
        }
        self.spawn_down();
    }

    /// 30 s of random kills, restarts and partitions of random daemons.
    fn churn(&mut self) {
        let until = Instant::now() + secs(30);
        let mut cut: BTreeMap<String, Duration> = BTreeMap::new();
        while Instant::now() < until {
            let pause = self.pick(500, 3000);
            self.sleep(pause);
            // Half the time the leader, so that leadership keeps moving.
            let id = match self.holder() {
                Some(leader) if self.rng.bool() => leader,
                _ => self.random_member(),
            };
            let now = mono_now();
            if self.member(&id).daemon.is_none() {
                self.spawn(&id);
            } else if let Some(since) = cut.remove(&id) {
                self.heal_churn_cut(&id, since);
            } else if self.rng.bool() {
                self.end(&id, Signal::SIGKILL);
                self.mark_instant(Kind::Crash, &id, now, "SIGKILL (churn)");
            } else {
                self.set_link(&id, Fault::Blackhole);
                cut.insert(id, now);
            }
        }
        for (id, since) in cut {
            self.heal_churn_cut(&id, since);
        }
        self.spawn_down();
    }

    /// Ends a churn's partition of `id`, cut since `since`.
    fn heal_churn_cut(&mut self, id: &str, since: Duration) {
        self.set_link(id, Fault::Pass);
        self.mark(Kind::Partition, Some(id), since, "partition (churn)".into());
    }
}

fn main() {
    let mut minutes = 10.0f64;
    let mut daemons = 5usize;
    let mut seed = None;
    let mut svg_path = None;
    let mut keep = None;
    let mut only: Option<Vec<Kind>> = None;
    let mut priorities: Vec<i64> = Vec::new();
    let mut preempt_after = "10s".to_owned();
    let mut slots = 1u32;
    let mut replicas = 1usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage(&arg));
        match arg.as_str() {
            "--minutes" => minutes = value().parse().unwrap_or_else(|_| usage("--minutes")),
            "--daemons" => daemons = value().parse().unwrap_or_else(|_| usage("--daemons")),
            "--seed" => seed = Some(value().parse().unwrap_or_else(|_| usage("--seed"))),
            "--svg" => svg_path = Some(PathBuf::from(value())),
            "--keep" => keep = Some(PathBuf::from(value())),
            "--only" => {
                only = Some(
                    value()
                        .split(',')
                        .map(|k| Kind::parse(k).unwrap_or_else(|| usage(k)))
                        .collect(),
                )
            }
            "--priorities" => {
                priorities = value()
                    .split(',')
                    .map(|p| p.trim().parse().unwrap_or_else(|_| usage("--priorities")))
                    .collect()
            }
            "--preempt-after" => preempt_after = value(),
            "--slots" => {
                slots = value()
                    .parse()
                    .ok()
                    .filter(|n| (1..=64).contains(n))
                    .unwrap_or_else(|| usage("--slots (1 to 64)"))
            }
            "--replicas" => {
                replicas = value()
                    .parse()
                    .ok()
                    .filter(|n| [3, 5].contains(n))
                    .unwrap_or_else(|| usage("--replicas (3 or 5)"))
            }
            other => usage(other),
        }
    }
    if daemons < 2 || daemons <= slots as usize {
        usage("--daemons (at least 2, and more than --slots)");
    }
    let on_set = replicas > 1;
    if on_set && slots > 1 {
        usage("--slots with --replicas (`check` refuses slots on a set: docs/quorum.md)");
    }
    if let Some(k) = (only.iter().flatten()).find(|k| k.left_out(on_set).is_some()) {
        let why = k.left_out(on_set).unwrap_or_default();
        usage(&format!("--only {}: {why}", k.name()));
    }
    let seed = seed.unwrap_or_else(|| fastrand::u64(..1_000_000));
    let svg_path = svg_path.unwrap_or_else(|| workspace_root().join("target/chaos.svg"));

    println!("chaos: building leasehold...");
    build_leasehold(release_profile());
    let witness = witness_bin();
    let lease = match slots {
        1 => LEASE.to_owned(),
        n => format!("{LEASE}slots = {n}\n"),
    };
    let (azurite, regions) = match on_set {
        false => (Some(Azurite::start()), None),
        true => (None, Some(Regions::start(replicas, seed))),
    };
    let group = match (&azurite, &regions) {
        (Some(azurite), _) => Group::new(azurite),
        // The group's own connection string is the first region's, past its proxy: only
        // the configs' replicas are used on a set.
        (None, Some(regions)) => Group::new(&regions.azurites[0]),
        (None, None) => unreachable!("one account or a set"),
    };
    let logs = match keep {
        Some(dir) => {
            std::fs::create_dir_all(&dir).expect("--keep folder");
            dir
        }
        None => group.dir().to_owned(),
    };
    // Each daemon gets a different child, so every way a term can end is exercised.
    let flavours = [
        vec![],
        vec!["--grandchild"],
        vec!["--ignore-stop"],
        vec!["--exit-after", "25s"],
        vec!["--linger", "500ms"],
    ];
    let members: Vec<Member> = (1..=daemons)
        .map(|i| {
            let identity = format!("d{i}");
            let mut options = vec!["--beat", BEAT];
            options.extend(flavours[(i - 1) % flavours.len()].iter().copied());
            let http = free_addr();
            let mut election = format!("\n[election]\nadvertise = \"http://{http}\"\n");
            if !priorities.is_empty() {
                let priority = priorities[(i - 1) % priorities.len()];
                election.push_str(&format!(
                    "priority = {priority}\npreempt_after = \"{preempt_after}\"\n"
                ));
            }
            let child = match slots {
                1 => group.witness_child(&options, &election),
                _ => slot_witness_child(&group, &options, &election),
            };
            let (config, proxy) = match (&azurite, &regions) {
                (Some(azurite), _) => {
                    let proxy = FaultProxy::start(azurite.port);
                    let via = proxy.connection_string();
                    (
                        group.config_via(&identity, &via, &lease, &child),
                        Some(proxy),
                    )
                }
                (None, Some(regions)) => {
                    let endpoints = regions.connection_strings();
                    (
                        group.config_on_replicas(&identity, &endpoints, &lease, &child),
                        None,
                    )
                }
                (None, None) => unreachable!("one account or a set"),
            };
            Member {
                identity,
                config,
                http,
                proxy,
                daemon: None,
                runs: 0,
                down_since: None,
            }
        })
        .collect();
    let storage = match (&azurite, &regions) {
        (Some(azurite), _) => format!("Azurite on port {}", azurite.port),
        (None, Some(regions)) => format!(
            "a set of {replicas} replicas, Azurites on ports {}",
            (regions.azurites.iter())
                .map(|a| a.port.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, None) => unreachable!("one account or a set"),
    };
    println!(
        "chaos: {minutes} minutes, {daemons} daemons, {slots} slot(s), seed {seed}; {storage}; witness {}; logs in {}",
        witness.display(),
        logs.display()
    );
    for (kind, why) in Kind::ALL
        .iter()
        .filter_map(|e| Some((e.0, e.0.left_out(on_set)?)))
    {
        if !kind.regional() {
            println!("  left out on a set: {}: {why}", kind.name());
        }
    }
    let observer = match &regions {
        Some(regions) => {
            group.config_on_replicas("observer", &regions.connection_strings(), &lease, "")
        }
        None => group.config("observer", &lease, ""),
    };
    let mut chaos = Chaos {
        rng: fastrand::Rng::with_seed(seed),
        slots,
        tail: Tail::new(match slots {
            1 => vec![group.history_path()],
            n => (0..n).map(|i| slot_history_path(&group, i)).collect(),
        }),
        observer,
        azurite,
        regions,
        group,
        members,
        deadlines: Deadlines::default(),
        marks: Vec::new(),
        trials: Vec::new(),
        pauses: Vec::new(),
        downs: Vec::new(),
        recoveries: Vec::new(),
        region_trials: Vec::new(),
        held_all_since: None,
        logs,
    };
    let began = mono_now();
    let ids: Vec<String> = chaos.members.iter().map(|m| m.identity.clone()).collect();
    for id in &ids {
        chaos.spawn(id);
    }
    let weights: Vec<(Kind, u32)> = Kind::ALL
        .iter()
        .map(|e| (e.0, e.0.weight()))
        .filter(|(k, _)| k.left_out(on_set).is_none())
        .filter(|(k, _)| only.as_ref().is_none_or(|o| o.contains(k)))
        .collect();
    let total: u32 = weights.iter().map(|(_, w)| w).sum();
    let end = Instant::now() + Duration::from_secs_f64(minutes * 60.0);
    while Instant::now() < end {
        if chaos.wait_leader(secs(60)).is_none() {
            println!("  no leader for 60 s");
        }
        let quiet = chaos.pick(1000, 4000);
        chaos.sleep(quiet);
        let mut roll = chaos.rng.u32(..total);
        let kind = weights
            .iter()
            .find(|(_, w)| {
                if roll < *w {
                    true
                } else {
                    roll -= w;
                    false
                }
            })
            .map(|(k, _)| *k)
            .expect("a kind");
        let at = mono_now() - began;
        chaos.trial(kind);
        println!(
            "  {:>6.1}s  trial {:>3}: {}",
            at.as_secs_f64(),
            chaos.trials.len(),
            chaos.trials.last().map_or(kind.name(), |t| t.note.as_str())
        );
    }
    chaos.wait_leader(secs(60));

    // The end: every daemon stops its child and releases; then the whole history is judged.
    for id in &ids {
        if let Some(d) = &chaos.member(id).daemon {
            d.signal(Signal::SIGTERM);
        }
    }
    for id in &ids {
        if let Some(d) = chaos.member(id).daemon.as_mut() {
            d.wait_exit(G + secs(10));
        }
        chaos.retire(id);
    }
    let finished = mono_now();
    let deadlines = chaos.all_deadlines();
    let (history, verdict, most_at_once) = judge(&chaos.group, slots, &deadlines);
    let report = Report::new(
        &chaos,
        &history,
        &deadlines,
        &verdict,
        most_at_once,
        began,
        finished,
    );
    let svg = timeline(&chaos, &verdict, &report, began, finished);
    if let Some(dir) = svg_path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    std::fs::write(&svg_path, svg).expect("write the SVG");
    for (from, to) in match slots {
        1 => vec![(chaos.group.history_path(), "history".to_owned())],
        n => (0..n)
            .map(|i| {
                let path = slot_history_path(&chaos.group, i);
                (path, format!("history-slot-{i}"))
            })
            .collect(),
    } {
        let _ = std::fs::copy(from, chaos.logs.join(to));
    }
    println!();
    print!("{}", report.text);
    println!("timeline: {}", svg_path.display());
    if !report.safe || !report.in_bounds {
        println!("{verdict}");
        let kept = chaos.group.keep();
        let what = if report.safe {
            "OUT OF BOUNDS"
        } else {
            "UNSAFE"
        };
        println!("{what}: history and logs kept in {}", kept.display());
        std::process::exit(1);
    }
}

/// The whole history and the checker's verdict on it. With slots, each slot's history is
/// judged on its own (never two children on one slot, epochs growing per slot, no child past its
/// deadline: the kit's `check_slots`), the verdicts joined into one, and the most children alive
/// at once counted across slots (never more than N).
fn judge(group: &Group, slots: u32, deadlines: &Deadlines) -> (History, Verdict, usize) {
    if slots == 1 {
        let history = group.history();
        let verdict = check(&history, deadlines);
        // One lease: the overlaps say it all.
        return (history, verdict, 0);
    }
    let per_slot = check_slots(group, slots, deadlines);
    let mut history = History::default();
    for h in slot_histories(group, slots) {
        history.events.extend(h.events);
    }
    let mut verdict = Verdict {
        lives: Vec::new(),
        overlaps: Vec::new(),
        epoch_regressions: Vec::new(),
        late: Vec::new(),
        worst_margin_ns: None,
        undated: Vec::new(),
    };
    for v in per_slot.slots {
        verdict.lives.extend(v.lives);
        verdict.overlaps.extend(v.overlaps);
        verdict.epoch_regressions.extend(v.epoch_regressions);
        verdict.late.extend(v.late);
        verdict.undated.extend(v.undated);
        verdict.worst_margin_ns = verdict.worst_margin_ns.max(v.worst_margin_ns);
    }
    verdict.lives.sort_by_key(|l| l.start);
    (history, verdict, per_slot.most_at_once)
}

fn usage(what: &str) -> ! {
    eprintln!("chaos: bad or missing {what}; see the top of examples/chaos/main.rs");
    std::process::exit(2);
}

/// The summary: the figures the issue asks for, and whether the history is safe.
struct Report {
    text: String,
    safe: bool,
    /// Every timed recovery kept its bounds.
    in_bounds: bool,
    /// Lives of children whose daemon was paused with their guard while they lived.
    paused_pids: Vec<u32>,
}

impl Report {
    fn new(
        chaos: &Chaos,
        history: &History,
        deadlines: &Deadlines,
        verdict: &Verdict,
        most_at_once: usize,
        began: Duration,
        finished: Duration,
    ) -> Self {
        let paused_pids: Vec<u32> = verdict
            .lives
            .iter()
            .filter(|l| {
                chaos.pauses.iter().any(|(id, from, to, guard_too)| {
                    *guard_too && *id == l.identity && l.start <= *to && l.last_seen >= *from
                })
            })
            .map(|l| l.pid)
            .collect();
        let paused = |l: &Life| paused_pids.contains(&l.pid);
        let (expected, overlaps): (Vec<_>, Vec<_>) = verdict
            .overlaps
            .iter()
            .partition(|o| !o.alive.is_empty() && o.alive.iter().all(paused));
        let fenced = expected
            .iter()
            .filter(|o| o.alive.iter().all(|l| l.epoch < o.newcomer_epoch))
            .count();
        // Epochs grow per slot: a downstream fences each slot's writes by that slot's epochs.
        let refused: usize = match chaos.slots {
            1 => history.fenced_writes().len(),
            n => slot_histories(&chaos.group, n)
                .iter()
                .map(|h| h.fenced_writes().len())
                .sum(),
        };
        let late: Vec<_> = verdict.late.iter().filter(|l| !paused(&l.life)).collect();
        let worst = verdict
            .lives
            .iter()
            .filter(|l| !paused(l))
            .filter_map(|l| {
                let k = deadlines.of(&l.identity, l.epoch)?;
                Some(l.last_seen.as_nanos() as i128 - k.as_nanos() as i128)
            })
            .max();

        let mut failovers: Vec<(Kind, Duration)> = Vec::new();
        for (i, t) in chaos.trials.iter().enumerate() {
            // A churn is many faults at once: no single instant to count from. The timed trials
            // have figures of their own, below.
            if t.kind == Kind::Churn || t.kind.timed() || t.kind.regional() {
                continue;
            }
            let next = chaos.trials.get(i + 1).map_or(finished, |n| n.start);
            let Some(old) = verdict
                .lives
                .iter()
                .filter(|l| l.start <= t.start && t.start <= l.last_seen)
                .max_by_key(|l| l.start)
            else {
                continue;
            };
            if old.last_seen >= next || old.end.starts_with("exit") {
                continue;
            }
            if let Some(new) = verdict
                .lives
                .iter()
                .find(|l| l.start > old.last_seen && l.start < next)
            {
                failovers.push((t.kind, new.start - t.start));
            }
        }
        // One figure over all kinds moves with the mix of trials the seed drew (a graceful stop
        // hands over in under a second, a partition waits out the lease): each kind's, too.
        let figures = |of: &[Duration]| -> String {
            let mut of = of.to_vec();
            of.sort();
            let pct = |p: f64| {
                let i = ((p / 100.0) * (of.len() - 1) as f64).round() as usize;
                format!("{:.1}s", of[i].as_secs_f64())
            };
            if of.is_empty() {
                return "p50 n/a  p99 n/a  max n/a  (n = 0)".into();
            }
            format!(
                "p50 {}  p99 {}  max {}  (n = {})",
                pct(50.0),
                pct(99.0),
                pct(100.0),
                of.len()
            )
        };
        let mut by_kind: BTreeMap<Kind, Vec<Duration>> = BTreeMap::new();
        for (kind, took) in &failovers {
            by_kind.entry(*kind).or_default().push(*took);
        }
        let all: Vec<Duration> = failovers.iter().map(|(_, took)| *took).collect();

        let mut counts: BTreeMap<Kind, usize> = BTreeMap::new();
        for t in &chaos.trials {
            *counts.entry(t.kind).or_default() += 1;
        }
        let judged = verdict
            .lives
            .iter()
            .filter(|l| !paused(l) && deadlines.of(&l.identity, l.epoch).is_some())
            .count();
        let slots = chaos.slots as usize;
        let safe = overlaps.is_empty()
            && (slots == 1 || most_at_once <= slots)
            && late.is_empty()
            && verdict.epoch_regressions.is_empty()
            && verdict.undated.is_empty()
            && fenced == expected.len();
        let mut text = String::new();
        let _ = writeln!(
            text,
            "ran {:.1} min, {} daemons, {} terms (children), {} witness events",
            (finished - began).as_secs_f64() / 60.0,
            chaos.members.len(),
            verdict.lives.len(),
            history.events.len()
        );
        let _ = writeln!(
            text,
            "trials: {} ({})",
            chaos.trials.len(),
            counts
                .iter()
                .map(|(k, n)| format!("{} {n}", k.name()))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(text, "overlaps: {}", overlaps.len());
        if slots > 1 {
            let _ = writeln!(
                text,
                "slots: {slots}; overlaps above are two children on one slot; most children alive at once, all slots: {most_at_once} (at most {slots})"
            );
        }
        let _ = writeln!(
            text,
            "epochs not growing in start order: {}",
            verdict.epoch_regressions.len()
        );
        let _ = writeln!(
            text,
            "worst child alive after its deadline: {} ({} children judged against their daemon's logged kill deadline; last sign of life, beat {BEAT}; negative = dead before it)",
            worst.map_or("n/a".into(), |ns| format!("{:+.3}s", ns as f64 / 1e9)),
            judged
        );
        let _ = writeln!(text, "children alive after their deadline: {}", late.len());
        let _ = writeln!(
            text,
            "failover (fault -> next child running, single-fault trials that stopped the leader's child): {}",
            figures(&all)
        );
        for (kind, took) in &by_kind {
            let _ = writeln!(text, "  after {}: {}", kind.name(), figures(took));
        }
        let deletions = Report::recoveries(
            chaos,
            |k| matches!(k, Kind::Delete | Kind::DeleteTwice),
            "after a deletion (deletion -> next child on its slot, no sooner than the lock-delay L + M",
        );
        let dead_successors = Report::recoveries(
            chaos,
            |k| k == Kind::DeadSuccessor,
            "beside a dead successor (successor SIGKILLed 1 s before the leader's SIGTERM; SIGTERM -> next child on the slot",
        );
        text.push_str(&deletions);
        text.push_str(&dead_successors);
        text.push_str(&regions::summary(chaos));
        let alone = chaos.pauses.iter().filter(|p| !p.3).count();
        let _ = writeln!(
            text,
            "daemons frozen alone (SIGSTOP, SIGTSTP, a successor frozen at a handoff): {alone}, their children judged as any other (the guard keeps the deadlines)"
        );
        let _ = writeln!(
            text,
            "paused machines (the daemon and its child's guard SIGSTOPped, which no lease can stop): {} pauses, {} overlaps with a stale child, fenced by a smaller epoch: {}/{} ({} stale writes refused by an epoch-checking downstream)",
            chaos.pauses.len() - alone,
            expected.len(),
            fenced,
            expected.len(),
            refused
        );
        let recovered = chaos.recoveries.iter().all(Recovery::in_bounds);
        let regions_kept = chaos.region_trials.iter().all(RegionTrial::kept_promise);
        let in_bounds = recovered && regions_kept;
        let verdict = match (safe, recovered, regions_kept) {
            (true, true, true) => "SAFE",
            (false, _, _) => "UNSAFE",
            (true, false, _) => "SAFE, but a recovery OUT OF BOUNDS (see the recovery lines)",
            (true, true, false) => {
                "SAFE, but a region trial broke what docs/quorum.md promises (see the region lines)"
            }
        };
        let _ = writeln!(text, "verdict: {verdict}");
        Self {
            text,
            safe,
            in_bounds,
            paused_pids,
        }
    }

    /// The line of the recoveries of the kinds `of` (`what` opens the parenthesis): each trial's
    /// figures, their spread, and how many broke their bounds.
    fn recoveries(chaos: &Chaos, of: impl Fn(Kind) -> bool, what: &str) -> String {
        let all: Vec<&Recovery> = chaos.recoveries.iter().filter(|r| of(r.kind)).collect();
        let Some(first) = all.first() else {
            return String::new();
        };
        let floor = match first.floor {
            Duration::ZERO => String::new(),
            f => format!(" = {}", figure(f)),
        };
        let each = all
            .iter()
            .map(|r| {
                let took = r.took.map_or("none".into(), figure);
                format!("{took} (trial {})", r.trial)
            })
            .collect::<Vec<_>>()
            .join(", ");
        let mut took: Vec<Duration> = all.iter().filter_map(|r| r.took).collect();
        took.sort();
        let spread = match (took.first(), took.get(took.len() / 2), took.last()) {
            (Some(lo), Some(p50), Some(hi)) => {
                format!(
                    "min {}  p50 {}  max {}",
                    figure(*lo),
                    figure(*p50),
                    figure(*hi)
                )
            }
            _ => "n/a".into(),
        };
        format!(
            "recovery {what}{floor}; bound {} + {} slack): {each}; {spread}  (n = {}); out of bounds: {}\n",
            figure(first.bound),
            figure(first.slack),
            all.len(),
            all.iter().filter(|r| !r.in_bounds()).count()
        )
    }
}

/// The timeline: one row per daemon (its children's lives, coloured by epoch, and the faults that
/// hit it underneath), one row for storage faults, lines at overlaps.
fn timeline(
    chaos: &Chaos,
    verdict: &Verdict,
    report: &Report,
    began: Duration,
    finished: Duration,
) -> String {
    let rows: Vec<String> = chaos.members.iter().map(|m| m.identity.clone()).collect();
    let row = |id: &str| rows.iter().position(|r| r == id);
    let since = |t: Duration| t.saturating_sub(began);
    let paused = Rgb::hex("#9467bd");
    let shades = chaos
        .downs
        .iter()
        .filter_map(|(id, from, to)| {
            Some(plot::Bar {
                row: row(id)?,
                from: since(*from),
                to: since(*to),
                fill: Rgb::hex("#eeeeee"),
                outline: None,
                label: String::new(),
            })
        })
        .collect();
    let bars = verdict
        .lives
        .iter()
        .filter_map(|l| {
            Some(plot::Bar {
                row: row(&l.identity)?,
                from: since(l.start),
                to: since(l.last_seen),
                fill: Rgb::hsl(((l.epoch * 67) % 360) as f64, 0.55, 0.6),
                outline: report.paused_pids.contains(&l.pid).then_some(paused),
                // A blob's first epoch is the wall clock in milliseconds (13 digits); its last
                // four tell the bars of one run apart.
                label: if l.epoch >= 100_000 {
                    format!("…{:04}", l.epoch % 10_000)
                } else {
                    l.epoch.to_string()
                },
            })
        })
        .collect();
    let marks = chaos
        .marks
        .iter()
        .map(|m| plot::Mark {
            row: m.row.as_deref().and_then(row),
            from: since(m.start),
            to: since(m.end),
            fill: Rgb::hex(m.kind.colour()),
        })
        .collect();
    let lines = verdict
        .overlaps
        .iter()
        .map(|o| {
            let fenced =
                !o.alive.is_empty() && o.alive.iter().all(|l| report.paused_pids.contains(&l.pid));
            (
                since(o.at),
                if fenced { paused } else { Rgb::hex("#ff0000") },
            )
        })
        .collect();
    let mut legend: Vec<(String, Rgb)> = Kind::ALL
        .iter()
        .map(|e| (e.0.name().to_owned(), Rgb::hex(e.0.colour())))
        .collect();
    legend.push(("daemon not running".into(), Rgb::hex("#eeeeee")));
    legend.push(("child of a paused machine (outline)".into(), paused));
    plot::Timeline {
        title: format!(
            "leasehold chaos: who led when ({:.1} min, {} numbered trials). Bars: a child's life, \
             labelled with its epoch. Under each bar: the faults that hit that daemon.",
            (finished - began).as_secs_f64() / 60.0,
            chaos.trials.len()
        ),
        span: finished - began,
        rows,
        everyone: "storage, all".into(),
        bars,
        shades,
        marks,
        lines,
        ticks: chaos
            .trials
            .iter()
            .enumerate()
            .map(|(i, t)| (since(t.start), (i + 1).to_string()))
            .collect(),
        legend,
        caption: "Vertical lines: a child started while another lived; purple: beside the stale \
                  child of a paused machine (expected, fenced off by its smaller epoch); red: an \
                  overlap, which must not happen."
            .into(),
    }
    .svg()
}
