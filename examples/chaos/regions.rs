//! `--replicas N` (3 or 5): the group's lease on a majority of N storage accounts
//! (docs/quorum.md), each an Azurite of its own (a region) behind one fault proxy that every
//! daemon goes through, as tests/it/quorum.rs sets them up. Every member lists the same
//! endpoints (members listing different ones would be different replica sets: the rule *One
//! replica set*), so a daemon's own faults (a leader's partition, churn) are faults of its
//! connections on every region's proxy (`FaultProxy::set_for`), on top of its region's.
//!
//! Throughout, every replica is [`LATENCY`] away each way, jittered by up to [`JITTER`]: the
//! cross-region round trip a set pays. The region trials, drawn among the others:
//!
//! - *region out*: a minority of the regions (one of three; one or two of five) blackholed,
//!   refusing connections, 150 ms slow, or frozen (its Azurite SIGSTOPped) for 20-60 s, once the
//!   leader holds every replica: no leadership moves and no body stops (the same child, pid and
//!   epoch, beating throughout), and the leader holds every replica again once they are back.
//! - *majority out*: a majority of the regions out (blackholed, refusing or frozen) for 20-40 s:
//!   the body is stopped by its kill deadline (the checker holds it there), no child runs anywhere
//!   while they are out; then they come back together, and one child runs again, timed from
//!   that return (the fault's end) and held to the liveness bound of docs/safety.md.
//! - *region flapping*: one region out and in again every 2-5 s for 30 s: as *region out*.
//! - *replica wiped*: one replica's blob deleted under its holder, with the lease id its
//!   metadata records: the leader keeps its majority (the same body), and wins the replica back
//!   once the new blob is out of its lock-delay.

use crate::{Chaos, Kind, LIVENESS, LIVENESS_SLACK, figure};
use leasehold_testkit::defaults::{L, M, R};
use leasehold_testkit::storage::BlobAdmin;
use leasehold_testkit::*;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How far every replica is, each way: a cross-region link.
pub const LATENCY: Duration = Duration::from_millis(30);
/// How much each way's latency moves, up or down, redrawn every [`JITTER_EVERY`].
pub const JITTER: Duration = Duration::from_millis(10);
const JITTER_EVERY: Duration = Duration::from_millis(200);
/// What a slow region adds to its answers.
const SLOW: Duration = Duration::from_millis(150);

/// How a region is out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Way {
    Blackholed,
    Refusing,
    /// Answering [`SLOW`] late: not out for the quorum, slow.
    Slow,
    /// Its Azurite SIGSTOPped.
    Frozen,
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::Blackholed => "blackholed".into(),
            Way::Refusing => "refusing connections".into(),
            Way::Slow => format!("{} ms slow", SLOW.as_millis()),
            Way::Frozen => "frozen (Azurite SIGSTOPped)".into(),
        }
    }

    fn fault(self) -> Fault {
        match self {
            Way::Blackholed => Fault::Blackhole,
            Way::Refusing => Fault::Reset,
            Way::Slow => Fault::slow_answers(SLOW),
            Way::Frozen => Fault::Pass,
        }
    }
}

/// The faults in force on the links, which the jitter thread applies again and again.
struct Links {
    /// Each region's own fault (`Pass` when up).
    region: Vec<Fault>,
    /// Each member's own fault, by identity (a partition of that daemon from every region).
    member: BTreeMap<String, Fault>,
    /// The running daemons: pid, identity.
    pids: BTreeMap<u32, String>,
    rng: fastrand::Rng,
}

/// The fault of a connection: the region's if it is out, else the member's if it is cut off,
/// else the link's latency with both's delays on top.
fn combine(region: Fault, member: Fault, (up, down): (Duration, Duration)) -> Fault {
    let delays = |f: Fault| match f {
        Fault::Delay { up, down } => Some((up, down)),
        Fault::Pass => Some((Duration::ZERO, Duration::ZERO)),
        _ => None,
    };
    match (delays(region), delays(member)) {
        (None, _) => region,
        (_, None) => member,
        (Some((ru, rd)), Some((mu, md))) => Fault::Delay {
            up: up + ru + mu,
            down: down + rd + md,
        },
    }
}

/// The regions: an Azurite each and the proxy in front of it, and the thread that keeps their
/// links' latency moving.
pub struct Regions {
    pub azurites: Vec<Azurite>,
    proxies: Arc<Vec<FaultProxy>>,
    links: Arc<Mutex<Links>>,
    stop: Arc<AtomicBool>,
    jitter: Option<std::thread::JoinHandle<()>>,
}

impl Regions {
    pub fn start(n: usize, seed: u64) -> Self {
        let azurites = Azurite::start_replicas(n);
        let proxies: Arc<Vec<FaultProxy>> =
            Arc::new(azurites.iter().map(|a| FaultProxy::start(a.port)).collect());
        let links = Arc::new(Mutex::new(Links {
            region: vec![Fault::Pass; n],
            member: BTreeMap::new(),
            pids: BTreeMap::new(),
            rng: fastrand::Rng::with_seed(seed),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        apply(&proxies, &links);
        let jitter = {
            let (proxies, links, stop) = (proxies.clone(), links.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(JITTER_EVERY);
                    apply(&proxies, &links);
                }
            })
        };
        Self {
            azurites,
            proxies,
            links,
            stop,
            jitter: Some(jitter),
        }
    }

    pub fn len(&self) -> usize {
        self.azurites.len()
    }

    /// The endpoints every member lists, in order: the proxies'.
    pub fn connection_strings(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(FaultProxy::connection_string)
            .collect()
    }

    fn update(&self, change: impl FnOnce(&mut Links)) {
        change(&mut self.links.lock().unwrap());
        apply(&self.proxies, &self.links);
    }

    /// Region `r`'s own fault, for everyone.
    fn set_region(&self, r: usize, fault: Fault) {
        self.update(|l| l.region[r] = fault);
    }

    /// Member `identity`'s own fault, on every region, for its daemons now and later.
    pub fn set_member(&self, identity: &str, fault: Fault) {
        self.update(|l| {
            l.member.insert(identity.to_owned(), fault);
        });
    }

    /// `pid` is `identity`'s daemon: its connections get the member's fault from now on (and
    /// those it opened before, from their next chunk: the proxy looks for a connection's owner
    /// again once a process is named).
    pub fn register(&self, pid: u32, identity: &str) {
        self.update(|l| {
            l.pids.insert(pid, identity.to_owned());
        });
    }

    /// `pid` exited.
    pub fn forget(&self, pid: u32) {
        self.links.lock().unwrap().pids.remove(&pid);
    }

    /// Region `r`'s blob, as an operator reaches it, past its proxy.
    fn admin(&self, group: &Group, r: usize) -> BlobAdmin {
        BlobAdmin::new(
            &self.azurites[r].connection_string(),
            &group.container,
            &group.blob,
        )
    }

    /// Takes regions `out` out `way`.
    fn out(&self, out: &[usize], way: Way) {
        for &r in out {
            match way {
                Way::Frozen => self.azurites[r].freeze(),
                _ => self.set_region(r, way.fault()),
            }
        }
    }

    /// Brings regions `back` back from `way`.
    fn back(&self, back: &[usize], way: Way) {
        for &r in back {
            match way {
                Way::Frozen => self.azurites[r].thaw(),
                _ => self.set_region(r, Fault::Pass),
            }
        }
    }
}

impl Drop for Regions {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(jitter) = self.jitter.take() {
            let _ = jitter.join();
        }
        // A frozen Azurite would not stop on its SIGTERM.
        for a in &self.azurites {
            a.thaw();
        }
    }
}

/// Sets every proxy's faults as `links` has them, each way's latency drawn anew.
fn apply(proxies: &[FaultProxy], links: &Mutex<Links>) {
    let mut links = links.lock().unwrap();
    let jitter = JITTER.as_micros() as i64;
    for (r, proxy) in proxies.iter().enumerate() {
        let mut draw = || {
            let off = links.rng.i64(-jitter..=jitter);
            Duration::from_micros((LATENCY.as_micros() as i64 + off).max(0) as u64)
        };
        let latency = (draw(), draw());
        let region = links.region[r];
        proxy.set(combine(region, Fault::Pass, latency));
        for (pid, identity) in &links.pids {
            let member = links.member.get(identity).copied().unwrap_or(Fault::Pass);
            proxy.set_for(*pid, combine(region, member, latency));
        }
    }
}

/// What a region trial found, for the summary.
#[derive(Debug, Clone)]
pub struct RegionTrial {
    pub kind: Kind,
    /// The trial's number, as printed while the run goes.
    pub trial: usize,
    /// What was done, with its figures.
    pub note: String,
    /// For a minority out, flapping or a wipe: the leader's body ran on (same pid and epoch,
    /// beating, no other child). `None`: not judged (no steady leader to begin with).
    pub kept: Option<bool>,
    /// For a majority out: no child started while it was out, and none ran at its end.
    pub none_while_out: Option<bool>,
    /// For a majority out: from the regions' return to the next child (`None`: nobody led
    /// within the bound, its slack and 10 s).
    pub again: Option<Option<Duration>>,
}

impl RegionTrial {
    /// Whether it kept what docs/quorum.md promises.
    pub fn kept_promise(&self) -> bool {
        self.kept != Some(false)
            && self.none_while_out != Some(false)
            && self
                .again
                .is_none_or(|a| a.is_some_and(|t| t <= LIVENESS + LIVENESS_SLACK))
    }
}

/// The leader's body at a trial's start: who, its child's pid and epoch.
struct Body {
    identity: String,
    pid: u32,
    epoch: u64,
}

impl Chaos {
    fn regions(&self) -> &Regions {
        self.regions.as_ref().expect("region trials run on a set")
    }

    /// The replicas (from 0) whose lease `identity` holds, as `leasehold status` tells it: the
    /// holder its metadata records, under the lease id it recorded.
    fn held_by(&mut self, identity: &str) -> usize {
        let Some(config) = self.observer.to_str().map(str::to_owned) else {
            return 0;
        };
        let (out, _) = leasehold_within(&["status", "--json", "-c", &config], secs(10));
        let Ok(report) = serde_json::from_slice::<serde_json::Value>(&out.stdout) else {
            return 0;
        };
        let rows = report["replicas"].as_array().cloned().unwrap_or_default();
        rows.iter()
            .filter(|r| r["holder"] == identity && r["lease_holder"] == "recorded")
            .count()
    }

    /// The leader, once it counts every replica (within 30 s and the lock-delay), and its body.
    /// `leasehold status` shows who holds each replica, not whether the holder counts it yet: a
    /// replica whose blob is younger than the lock-delay `L + M` counts for nobody (a fresh set's
    /// blobs, one created again after a wipe). A blob the leader was seen holding `L + M` and a
    /// second ago is older than that.
    fn steady_body(&mut self) -> Option<Body> {
        let n = self.regions().len();
        let until = Instant::now() + secs(30) + L + M + secs(1);
        while Instant::now() < until {
            if let Some((identity, pid)) = self.tail.leader()
                && self.held_by(&identity) == n
                && self.tail.leader() == Some((identity.clone(), pid))
            {
                let now = mono_now();
                let since = match self.held_all_since {
                    Some((p, since)) if p == pid => since,
                    _ => self.held_all_since.insert((pid, now)).1,
                };
                if now >= since + L + M + secs(1) {
                    let epoch = self.tail.epoch_of(pid)?;
                    return Some(Body {
                        identity,
                        pid,
                        epoch,
                    });
                }
            }
            self.sleep(secs(1));
        }
        None
    }

    /// Whether `body` still runs alone: no other child started since `since`, and it beat within
    /// the last second. A body that exited by itself (a child with `--exit-after`: its daemon
    /// then releases the lease) is judged until its exit.
    fn still_runs(&mut self, body: &Body, since: Duration) -> bool {
        if let Some(exit) = self.tail.exited(body.pid) {
            let next = self.tail.first_start_after(since, 0);
            return next.is_none_or(|(_, start)| start > exit);
        }
        let alone = self.tail.first_start_after(since, 0).is_none();
        let beating = self.tail.beating(body.pid, secs(1));
        alone && beating && self.tail.epoch_of(body.pid) == Some(body.epoch)
    }

    /// Sleeps `hold`, checking every second that `body` runs on; whether it did throughout.
    fn watch_body(&mut self, body: &Body, since: Duration, hold: Duration) -> bool {
        let until = Instant::now() + hold;
        let mut kept = true;
        while Instant::now() < until {
            self.sleep((until - Instant::now()).min(secs(1)));
            kept &= self.still_runs(body, since);
        }
        kept
    }

    fn verdict(kept: bool) -> &'static str {
        match kept {
            true => "the same body",
            false => "LEADERSHIP MOVED OR THE BODY STOPPED",
        }
    }

    /// What the trial says of the leader winning its replicas back (`again`: how long after the
    /// fault's end, or from `since`).
    fn held_again_note(
        &mut self,
        body: &Body,
        since: Duration,
        (again, from): (Option<Duration>, &str),
    ) -> String {
        match (self.tail.exited(body.pid), again) {
            (Some(exit), _) => format!(
                "the body exited by itself {} into the trial (--exit-after), judged until then",
                figure(exit.saturating_sub(since))
            ),
            (None, Some(t)) => format!("every replica held again {} after {from}", figure(t)),
            (None, None) => "every replica NOT held again within 40 s".into(),
        }
    }

    /// How long after now the leader of `body` holds every replica again (within 40 s; `None` at
    /// once if the body exited by itself, its daemon then releasing the lease).
    fn held_again(&mut self, body: &Body) -> Option<Duration> {
        let n = self.regions().len();
        let from = Instant::now();
        while from.elapsed() < secs(40) && self.tail.exited(body.pid).is_none() {
            if self.held_by(&body.identity) == n {
                return Some(from.elapsed());
            }
            self.sleep(Duration::from_millis(500));
        }
        None
    }

    /// `count` regions drawn at random, in order.
    fn draw_regions(&mut self, count: usize) -> Vec<usize> {
        let mut all: Vec<usize> = (0..self.regions().len()).collect();
        self.rng.shuffle(&mut all);
        all.truncate(count);
        all.sort();
        all
    }

    fn region_names(regions: &[usize]) -> String {
        let names: Vec<String> = regions.iter().map(|r| (r + 1).to_string()).collect();
        match names.len() {
            1 => format!("region {}", names[0]),
            _ => format!("regions {}", names.join(" and ")),
        }
    }

    /// A region trial's record and note.
    fn region_record(&mut self, kind: Kind, start: Duration, record: RegionTrial) {
        self.mark(kind, None, start, record.note.clone());
        self.region_trials.push(record);
    }

    fn no_steady_leader(&mut self, kind: Kind, start: Duration) {
        let note = format!(
            "{} (no leader holding every replica for the lock-delay within 47 s)",
            kind.name()
        );
        self.region_record(kind, start, self.region_trial(kind, note));
    }

    fn region_trial(&self, kind: Kind, note: String) -> RegionTrial {
        RegionTrial {
            kind,
            trial: self.trials.len() + 1,
            note,
            kept: None,
            none_while_out: None,
            again: None,
        }
    }

    /// A minority of the regions out for 20-60 s, or one region flapping for 30 s: the leader's
    /// body runs on.
    pub fn minority_out(&mut self, kind: Kind, start: Duration) {
        let Some(body) = self.steady_body() else {
            return self.no_steady_leader(kind, start);
        };
        let since = mono_now();
        let n = self.regions().len();
        let count = match kind {
            Kind::RegionFlap => 1,
            _ => 1 + self.rng.usize(..(n - 1) / 2),
        };
        let out = self.draw_regions(count);
        let ways = [Way::Blackholed, Way::Refusing, Way::Slow, Way::Frozen];
        let way = match kind {
            Kind::RegionFlap => ways[self.rng.usize(..2)],
            _ => ways[self.rng.usize(..ways.len())],
        };
        let (what, mut kept) = match kind {
            Kind::RegionFlap => {
                let until = Instant::now() + secs(30);
                let mut kept = true;
                let mut flips = 0;
                while Instant::now() < until {
                    self.regions().out(&out, way);
                    let hold = self.pick(2000, 5000);
                    kept &= self.watch_body(&body, since, hold);
                    self.regions().back(&out, way);
                    let hold = self.pick(2000, 5000);
                    kept &= self.watch_body(&body, since, hold);
                    flips += 1;
                }
                let what = format!(
                    "{} flapping ({} {flips} times, 2-5 s out, 2-5 s in)",
                    Self::region_names(&out),
                    way.name()
                );
                (what, kept)
            }
            _ => {
                let hold = self.pick(20000, 60000);
                self.regions().out(&out, way);
                let kept = self.watch_body(&body, since, hold);
                self.regions().back(&out, way);
                let what = format!(
                    "{} {} for {}",
                    Self::region_names(&out),
                    way.name(),
                    figure(hold)
                );
                (what, kept)
            }
        };
        let again = self.held_again(&body);
        kept &= self.still_runs(&body, since);
        let note = format!(
            "{what}: {} (leader {}, pid {}, epoch {}); {}",
            Self::verdict(kept),
            body.identity,
            body.pid,
            body.epoch,
            self.held_again_note(&body, since, (again, "its return"))
        );
        let mut record = self.region_trial(kind, note);
        record.kept = Some(kept);
        self.region_record(kind, start, record);
    }

    /// One replica's blob deleted under the leader, with the lease id its metadata records: the
    /// leader keeps its majority and its body, and wins the replica back.
    pub fn replica_wipe(&mut self, start: Duration) {
        let kind = Kind::ReplicaWipe;
        let Some(body) = self.steady_body() else {
            return self.no_steady_leader(kind, start);
        };
        let since = mono_now();
        let r = self.draw_regions(1)[0];
        let deleted = self.regions().admin(&self.group, r).delete_under_lease();
        // The new blob counts for nobody until L + M old: the body runs on meanwhile, on the
        // others.
        let mut kept = self.watch_body(&body, since, L + M + R);
        let again = self.held_again(&body).map(|t| t + L + M + R);
        // The blob created again is young: the next trial waits out its lock-delay.
        self.held_all_since = None;
        kept &= self.still_runs(&body, since);
        let note = format!(
            "replica {}'s blob deleted under {}{}: {} (pid {}, epoch {}); {}",
            r + 1,
            body.identity,
            match deleted {
                Ok(()) => String::new(),
                Err(e) => format!(" (NOT DELETED: {e})"),
            },
            Self::verdict(kept),
            body.pid,
            body.epoch,
            self.held_again_note(&body, since, (again, "the deletion"))
        );
        let mut record = self.region_trial(kind, note);
        record.kept = Some(kept);
        self.region_record(kind, start, record);
    }

    /// A majority of the regions out for 20-40 s: the body stopped by its deadline, nobody
    /// leads while they are out; back together, and a child again, timed.
    pub fn majority_out(&mut self, start: Duration) {
        let kind = Kind::MajorityOut;
        let Some(body) = self.steady_body() else {
            return self.no_steady_leader(kind, start);
        };
        let n = self.regions().len();
        let out = self.draw_regions(n / 2 + 1);
        let ways = [Way::Blackholed, Way::Refusing, Way::Frozen];
        let way = ways[self.rng.usize(..ways.len())];
        let hold = self.pick(20000, 40000);
        let deadline_before = self.latest_deadline(&body.identity);
        let gone = mono_now();
        self.regions().out(&out, way);
        self.sleep(hold);
        let deadline = self
            .latest_deadline(&body.identity)
            .or(deadline_before)
            .map(|d| d.saturating_sub(gone));
        let none_while_out =
            self.tail.first_start_after(gone, 0).is_none() && self.tail.running().is_empty();
        let stopped = self
            .tail
            .last_seen(body.pid)
            .map(|t| t.saturating_sub(gone));
        let how = match self.tail.exited(body.pid) {
            Some(_) => "exited by itself (--exit-after)",
            None => "last seen",
        };
        // All back at once: the fault's end, from which docs/safety.md holds the group to the
        // liveness bound.
        self.regions().back(&out, way);
        let back = mono_now();
        let waited = LIVENESS + LIVENESS_SLACK + secs(10);
        let next = self.wait_start_after(back, 0, waited);
        let took = next.as_ref().map(|n| n.1);
        let note = format!(
            "{} {} for {}: {}'s body (pid {}) {how} {} after (its kill deadline {} after); {}; \
             back: {}",
            Self::region_names(&out),
            way.name(),
            figure(hold),
            body.identity,
            body.pid,
            stopped.map_or("n/a".into(), figure),
            deadline.map_or("n/a".into(), figure),
            match none_while_out {
                true => "no child while a majority was out",
                false => "A CHILD RAN WHILE A MAJORITY WAS OUT",
            },
            match &next {
                Some((who, t)) => format!(
                    "{who} led {} after (bound {}){}",
                    figure(*t),
                    figure(LIVENESS + LIVENESS_SLACK),
                    if *t <= LIVENESS + LIVENESS_SLACK {
                        ""
                    } else {
                        " OUT OF BOUNDS"
                    }
                ),
                None => format!("NOBODY led within {}", figure(waited)),
            }
        );
        let mut record = self.region_trial(kind, note);
        record.none_while_out = Some(none_while_out);
        record.again = Some(took);
        self.region_record(kind, start, record);
    }

    /// The latest kill deadline `identity`'s daemon logged, if it runs.
    fn latest_deadline(&mut self, identity: &str) -> Option<Duration> {
        self.member(identity)
            .daemon
            .as_ref()
            .and_then(Daemon::latest_deadline)
    }
}

/// The summary's lines of the region trials.
pub fn summary(chaos: &Chaos) -> String {
    let Some(regions) = &chaos.regions else {
        return String::new();
    };
    let mut text = String::new();
    let _ = writeln!(
        text,
        "regions: {} (a majority: {}), every replica {} ms away each way, jittered by up to {} ms",
        regions.len(),
        regions.len() / 2 + 1,
        LATENCY.as_millis(),
        JITTER.as_millis()
    );
    let kinds = [
        (
            Kind::RegionOut,
            "a minority out: no leadership moves, no body stops",
        ),
        (
            Kind::RegionFlap,
            "one region out and in: no leadership moves, no body stops",
        ),
        (
            Kind::ReplicaWipe,
            "one replica's blob deleted under its holder: the body runs on",
        ),
        (
            Kind::MajorityOut,
            "a majority out: the body stopped by its deadline, no child while out, one child again once they answer",
        ),
    ];
    for (kind, promise) in kinds {
        let all: Vec<&RegionTrial> = chaos
            .region_trials
            .iter()
            .filter(|t| t.kind == kind)
            .collect();
        let judged = all
            .iter()
            .filter(|t| t.kept.is_some() || t.again.is_some())
            .count();
        let kept = all
            .iter()
            .filter(|t| (t.kept.is_some() || t.again.is_some()) && t.kept_promise())
            .count();
        let _ = writeln!(
            text,
            "  {} ({promise}): {} trials, {kept}/{judged} kept it",
            kind.name(),
            all.len()
        );
        for t in &all {
            let _ = writeln!(text, "    trial {}: {}", t.trial, t.note);
        }
        if kind == Kind::MajorityOut {
            let mut took: Vec<Duration> = all.iter().filter_map(|t| t.again.flatten()).collect();
            took.sort();
            if let (Some(lo), Some(hi)) = (took.first(), took.last()) {
                let _ = writeln!(
                    text,
                    "    the regions back -> next child: min {}  p50 {}  max {}  (n = {}; bound {} = the liveness bound {} + {} slack)",
                    figure(*lo),
                    figure(took[took.len() / 2]),
                    figure(*hi),
                    took.len(),
                    figure(LIVENESS + LIVENESS_SLACK),
                    figure(LIVENESS),
                    figure(LIVENESS_SLACK)
                );
            }
        }
    }
    text
}
