//! From samples to figures: percentiles, the Markdown table (every figure next to its target)
//! and the page around it (page.md), the JSON, and the plot of the handover latencies.

use crate::cost::{self, Class, MINUTES_PER_MONTH, Rates, SHEET};
use crate::etcdlock::EtcdLock;
use crate::fleet::{LeaseOps, Role, Timing};
use crate::phases::{Crash, Footprint, Handovers, Parts, Scale, Steady, ms};
use crate::quorum::Quorum;
use crate::requests::{Latencies, Requests};
use crate::slots::Slots;
use leasehold_testkit::plot::{LatencyPlot, LatencyRow};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::Duration;

/// What a handover with wake-ups may take beyond `etcdctl lock`'s p50 and one storage round
/// trip (issue 26's goal).
const SLACK: Duration = Duration::from_millis(2);

/// Percentiles by the nearest-rank method: p50 of 20 samples is the 10th smallest, p95 the 19th.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    pub n: usize,
    pub min: Duration,
    pub p50: Duration,
    pub p95: Duration,
    pub max: Duration,
    pub mean: Duration,
}

impl Stats {
    pub fn of(samples: &[Duration]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        let mut s = samples.to_vec();
        s.sort();
        let rank = |p: f64| s[((p * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1];
        Some(Self {
            n: s.len(),
            min: s[0],
            p50: rank(0.50),
            p95: rank(0.95),
            max: s[s.len() - 1],
            mean: s.iter().sum::<Duration>() / s.len() as u32,
        })
    }

    fn json(&self) -> Value {
        json!({
            "n": self.n, "min_ms": ms(self.min), "p50_ms": ms(self.p50), "p95_ms": ms(self.p95),
            "max_ms": ms(self.max), "mean_ms": ms(self.mean),
        })
    }

    fn text(&self) -> String {
        format!(
            "p50 {} · p95 {} · max {}",
            human(self.p50),
            human(self.p95),
            human(self.max)
        )
    }
}

/// A storage request's time: "1.52 ms", "12.3 ms", "412 ms", "1.12 s".
pub fn fine(d: Duration) -> String {
    let ms = d.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else if ms < 100.0 {
        format!("{ms:.1} ms")
    } else {
        human(d)
    }
}

/// "412 ms", "1.12 s", "15.3 s".
pub fn human(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 1.0 {
        format!("{:.0} ms", s * 1000.0)
    } else if s < 10.0 {
        format!("{s:.2} s")
    } else {
        format!("{s:.1} s")
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Everything one run measured; phases left out by `--only` are `None`.
#[derive(Default)]
pub struct Report {
    pub header: Header,
    pub timing: Option<Timing>,
    pub graceful: Option<Handovers>,
    pub voluntary: Option<Handovers>,
    pub crash: Option<(Vec<Crash>, usize)>,
    pub footprint: Option<Steady>,
    pub binary_bytes: u64,
    pub scale: Option<Scale>,
    /// leasehold with `[election].advertise` on every daemon.
    pub advertise: Advertise,
    /// `etcdctl lock` handing over the same child.
    pub etcd: Option<EtcdLock>,
    /// A group with `[lease].slots` > 1.
    pub slots: Option<Slots>,
    /// One storage request: leasehold's store beside the official Python SDK.
    pub requests: Option<Requests>,
    /// A group on three replicas beside one on one account.
    pub quorum: Option<Quorum>,
}

/// The handovers with `[election].advertise` set, when the binary has ordered succession.
#[derive(Default)]
pub enum Advertise {
    /// Left out with `--only`.
    #[default]
    Skipped,
    /// The binary refuses the key (`leasehold check --offline`): succession is not built yet.
    NotBuilt,
    Ran {
        graceful: Option<Handovers>,
        voluntary: Option<Handovers>,
    },
}

impl Advertise {
    fn graceful(&self) -> Option<&Handovers> {
        match self {
            Self::Ran { graceful, .. } => graceful.as_ref(),
            _ => None,
        }
    }

    fn voluntary(&self) -> Option<&Handovers> {
        match self {
            Self::Ran { voluntary, .. } => voluntary.as_ref(),
            _ => None,
        }
    }
}

/// Where and when the figures were taken.
#[derive(Default)]
pub struct Header {
    pub date: String,
    pub commit: String,
    pub machine: String,
    pub load_before: String,
    pub load_after: String,
    pub note: Option<String>,
    pub quick: bool,
    pub elapsed: Duration,
}

enum Verdict {
    Met,
    Missed(String),
    Info,
}

struct Row {
    figure: String,
    measured: String,
    target: String,
    verdict: Verdict,
}

impl Row {
    fn new(
        figure: impl Into<String>,
        measured: impl Into<String>,
        target: impl Into<String>,
        verdict: Verdict,
    ) -> Self {
        Self {
            figure: figure.into(),
            measured: measured.into(),
            target: target.into(),
            verdict,
        }
    }
}

/// Met if `value <= limit`, else "missed by <excess>".
fn at_most(value: Duration, limit: Duration) -> Verdict {
    if value <= limit {
        Verdict::Met
    } else {
        Verdict::Missed(format!("by {}", human(value - limit)))
    }
}

fn both(a: Verdict, b: Verdict) -> Verdict {
    match (a, b) {
        (Verdict::Missed(x), Verdict::Missed(y)) => Verdict::Missed(format!("{x}; {y}")),
        (Verdict::Missed(x), _) | (_, Verdict::Missed(x)) => Verdict::Missed(x),
        _ => Verdict::Met,
    }
}

/// The most requests "at most one per `period`" allows in a window of `window`: one at each
/// end of the window counts, so a 60 s window may hold 16 renews 4 s apart.
fn most(window: Duration, period: Duration) -> f64 {
    (window.as_secs_f64() / period.as_secs_f64()).floor() + 1.0
}

/// Met if `kib` is at most 10 MiB, the per-daemon memory target.
fn within_ten_mib(kib: u64) -> Verdict {
    const LIMIT: u64 = 10 * 1024;
    if kib <= LIMIT {
        Verdict::Met
    } else {
        Verdict::Missed(format!("by {}", mib(kib - LIMIT)))
    }
}

fn no_data(figure: String) -> Row {
    Row::new(
        figure,
        "no trial completed",
        "",
        Verdict::Missed("no data".into()),
    )
}

fn ops_text(ops: &LeaseOps, per_minute: f64) -> String {
    ops.0
        .iter()
        .map(|(op, n)| format!("{op} {:.1}", n * per_minute))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Report {
    fn handover_target(&self) -> (Duration, Duration) {
        (Duration::from_millis(600), Duration::from_millis(1200))
    }

    fn crash_limit(&self, t: &Timing) -> Duration {
        t.duration + t.acquire_interval + Duration::from_millis(500)
    }

    fn rows(&self) -> Vec<Row> {
        let mut rows = Vec::new();
        let (p50_target, p95_target) = self.handover_target();
        let handover_row = |name: &str, h: &Handovers| -> Row {
            let figure = format!(
                "{name} ({} daemons, {} trials{})",
                h.daemons,
                h.latencies.len(),
                if h.timeouts > 0 {
                    format!(", {} timed out", h.timeouts)
                } else {
                    String::new()
                }
            );
            match Stats::of(&h.latencies) {
                Some(s) => Row::new(
                    figure,
                    s.text(),
                    format!("p50 ≤ {} · p95 ≤ {}", human(p50_target), human(p95_target)),
                    if h.timeouts > 0 {
                        Verdict::Missed(format!("{} trials without a new leader", h.timeouts))
                    } else {
                        both(at_most(s.p50, p50_target), at_most(s.p95, p95_target))
                    },
                ),
                None => no_data(figure),
            }
        };
        if let Some(r) = &self.requests {
            requests_rows(r, &mut rows);
        }
        if let Some(h) = &self.graceful {
            rows.push(handover_row(
                "Graceful handover: SIGTERM to the leader → next child starts",
                h,
            ));
        }
        if let Some(h) = &self.voluntary {
            rows.push(handover_row(
                "Voluntary handover: the child exits, `on_exit = \"release\"` → next child starts",
                h,
            ));
        }
        if let Some((crashes, _)) = &self.crash {
            self.crash_rows(crashes, &mut rows);
        }
        if let Some(steady) = &self.footprint {
            self.footprint_rows(
                (&steady.leader, &steady.follower, &steady.status),
                &mut rows,
            );
        }
        if let Some(sc) = &self.scale {
            self.scale_rows(sc, &mut rows);
        }
        if let Some(sl) = &self.slots {
            self.slots_rows(sl, &mut rows);
        }
        if let Some(q) = &self.quorum {
            self.quorum_rows(q, &mut rows);
        }
        let etcd = self.etcd.as_ref();
        let overlaps: usize = [
            self.graceful.as_ref(),
            self.voluntary.as_ref(),
            self.advertise.graceful(),
            self.advertise.voluntary(),
            etcd.and_then(|e| e.graceful.as_ref()),
            etcd.and_then(|e| e.voluntary.as_ref()),
        ]
        .iter()
        .filter_map(|h| h.map(|h| h.overlaps))
        .chain(self.crash.as_ref().map(|(_, o)| *o))
        .chain(self.scale.as_ref().map(|s| s.handovers.overlaps))
        .chain(self.slots.as_ref().map(|s| s.overlaps))
        .chain(
            self.quorum
                .iter()
                .flat_map(|q| q.groups.iter().map(|g| g.overlaps)),
        )
        .sum();
        rows.push(Row::new(
            "Two children alive at once (witness flock, all groups)",
            overlaps.to_string(),
            "0",
            if overlaps == 0 {
                Verdict::Met
            } else {
                Verdict::Missed(format!("{overlaps} overlaps"))
            },
        ));
        rows
    }

    /// The quorum groups: for each (one account, three replicas), its first leader, its
    /// handovers and failovers beside their bounds, and its requests a minute per account.
    fn quorum_rows(&self, q: &Quorum, rows: &mut Vec<Row>) {
        let t = self.timing.unwrap_or_default();
        let poll = t.acquire_interval.mul_f64(1.2);
        for g in &q.groups {
            let on = match g.accounts {
                1 => "one account".to_owned(),
                n => format!("{n} replicas"),
            };
            rows.push(Row::new(
                format!("Quorum, {on} 30 ms away: a fresh group's first child"),
                g.first_lead.map_or("none within 60 s".to_owned(), human),
                match g.accounts {
                    1 => "informational".to_owned(),
                    _ => "informational: a fresh set's blobs count after L + M + 1 s".to_owned(),
                },
                Verdict::Met,
            ));
            let times = |of: &[Option<Duration>]| -> (Vec<Duration>, usize) {
                let done: Vec<Duration> = of.iter().flatten().copied().collect();
                (done.clone(), of.len() - done.len())
            };
            // The leader hands the lease over to the next in line, which no wake-up reaches
            // here (no daemon serves HTTP): it takes the lease at its next poll.
            let graceful_limit = poll + Duration::from_secs(1);
            let (done, missing) = times(&g.graceful);
            rows.push(times_row(
                format!("Quorum, {on}: SIGTERM to the leader → next child starts"),
                &done,
                missing,
                format!(
                    "max ≤ {} (1.2 × acquire_interval + 1 s)",
                    human(graceful_limit)
                ),
                graceful_limit,
            ));
            let crash_limit = t.duration + poll + Duration::from_secs(1);
            let (done, missing) = times(&g.crash);
            rows.push(times_row(
                format!("Quorum, {on}: SIGKILL to the leader → next child starts"),
                &done,
                missing,
                format!(
                    "max ≤ {} (duration + 1.2 × acquire_interval + 1 s)",
                    human(crash_limit)
                ),
                crash_limit,
            ));
            rows.push(Row::new(
                format!(
                    "Quorum, {on}: storage requests a minute per account once settled (3 daemons, {:.0} s)",
                    q.window.as_secs_f64()
                ),
                format!("{:.0}", g.per_account_minute),
                "informational: every request goes to each replica",
                Verdict::Met,
            ));
        }
    }

    /// The slots group: its requests a second by part, and its refills beside their bound.
    fn slots_rows(&self, sl: &Slots, rows: &mut Vec<Row>) {
        let t = self.timing.unwrap_or_default();
        // The waiting members list every 5-6 minutes, seldom inside the window: their listings
        // count at the configured rate (a List as ten), not the window's 0 or 1.
        let configured = cost::succession_model(&t)
            .get(&Role::OtherFollower)
            .map_or(0.0, |r| r.get(Class::List))
            / 60.0;
        let waiting: Vec<f64> = sl
            .parts
            .iter()
            .filter(|p| p.role == "waiting")
            .map(|p| {
                let lists = p.ops.0.get("list_members").copied().unwrap_or(0.0);
                (p.ops.total() - lists) / sl.window.as_secs_f64() + 10.0 * configured
            })
            .collect();
        let (holders, holders_weighted) = sl.per_second(|r| r.starts_with("holder"));
        let (poller, poller_weighted) = sl.per_second(|r| r == "poller");
        let (all, _) = sl.per_second(|_| true);
        let weighted = holders_weighted + poller_weighted + waiting.iter().sum::<f64>();
        let most_waiting = waiting.iter().copied().fold(0.0, f64::max);
        let least_waiting = waiting.iter().copied().fold(f64::INFINITY, f64::min);
        rows.push(Row::new(
            format!(
                "Slots: a group of {} with `[lease].slots = {}`, storage requests once settled ({:.0} s, each daemon's own `/metrics`)",
                sl.members,
                sl.slots,
                sl.window.as_secs_f64()
            ),
            format!(
                "{all:.2} /s; a List as ten {weighted:.2} /s: the {} holders together {holders_weighted:.2} ({holders:.2} unweighted), the poller {poller_weighted:.2} ({poller:.2} unweighted), each of {} waiting members {least_waiting:.2}–{most_waiting:.2} (their listing every 5–6 min at its configured rate)",
                sl.slots,
                waiting.len()
            ),
            "a waiting member ≤ ⅓ of the poller (a List as ten)",
            if 3.0 * most_waiting <= poller_weighted {
                Verdict::Met
            } else {
                Verdict::Missed(format!(
                    "{most_waiting:.2} against {poller_weighted:.2}"
                ))
            },
        ));
        let done: Vec<Duration> = sl.refills.iter().filter_map(|r| r.took).collect();
        let missing = sl.refills.len() - done.len();
        let bound = t.duration + t.acquire_interval.mul_f64(1.2);
        let limit = bound + Duration::from_secs(1);
        let figure = format!(
            "Slots: SIGKILL to a holder → the next child on its slot starts ({} trials, slots {})",
            sl.refills.len(),
            sl.refills
                .iter()
                .map(|r| r.slot.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        rows.push(times_row(
            figure,
            &done,
            missing,
            format!(
                "max ≤ {} (bound duration + 1.2 × acquire_interval = {}, + 1 s for the child to start)",
                human(limit),
                human(bound)
            ),
            limit,
        ));
        rows.push(Row::new(
            format!("Slots: most children alive at once ({} slots)", sl.slots),
            sl.most_at_once.to_string(),
            format!("≤ {}", sl.slots),
            if sl.most_at_once <= sl.slots as usize {
                Verdict::Met
            } else {
                Verdict::Missed(format!("{} at once", sl.most_at_once))
            },
        ));
    }

    fn crash_rows(&self, crashes: &[Crash], rows: &mut Vec<Row>) {
        let t = self.timing.unwrap_or_default();
        let done: Vec<Duration> = crashes.iter().filter_map(|c| c.failover).collect();
        let missing = crashes.len() - done.len();
        let limit = self.crash_limit(&t);
        let phases = crashes
            .iter()
            .map(|c| format!("{:.1}", c.since_renew.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", ");
        let figure = format!(
            "Crash failover: SIGKILL to the leader → next child starts ({} trials, killed {phases} s after a renew)",
            crashes.len()
        );
        rows.push(times_row(
            figure,
            &done,
            missing,
            format!(
                "max ≤ {} (bound duration + acquire_interval = {}, + 0.5 s)",
                human(limit),
                human(t.duration + t.acquire_interval)
            ),
            limit,
        ));
    }

    fn footprint_rows(
        &self,
        (leader, follower, status): (&Footprint, &Footprint, &Vec<Duration>),
        rows: &mut Vec<Row>,
    ) {
        let t = self.timing.unwrap_or_default();
        for (role, f) in [("leader", leader), ("follower", follower)] {
            let guard = match (f.guard_rss_kib, f.guard_memory) {
                (Some(g), Some(m)) => format!(
                    "; the child's guard process {} ({} of it the binary's shared pages)",
                    mib(g),
                    mib(m.file_kib)
                ),
                _ => String::new(),
            };
            rows.push(Row::new(
                format!(
                    "Resident memory, {role} with HTTP on ({:.0} s of steady state)",
                    f.window.as_secs_f64()
                ),
                format!(
                    "{} (mean {}, peak since start {}; heap and stacks {}){guard}",
                    mib(f.rss_max_kib),
                    mib(f.rss_mean_kib as u64),
                    mib(f.rss_peak_kib),
                    mib(f.memory.anon_kib)
                ),
                "≤ 10 MiB",
                within_ten_mib(f.rss_max_kib),
            ));
        }
        for (role, f) in [("leader", leader), ("follower", follower)] {
            let pct = f.cpu_percent();
            rows.push(Row::new(
                format!("CPU, {role} idle (HTTP on, not scraped)"),
                format!(
                    "{pct:.3} % of a core ({:.0} ms in {:.0} s)",
                    f.cpu.as_secs_f64() * 1000.0,
                    f.window.as_secs_f64()
                ),
                "≤ 0.2 % of a core",
                if pct <= 0.2 {
                    Verdict::Met
                } else {
                    Verdict::Missed(format!("by {:.3} points", pct - 0.2))
                },
            ));
        }
        let bytes = self.binary_bytes;
        rows.push(Row::new(
            "Release binary size (`target/release/leasehold`)",
            format!("{:.1} MiB ({bytes} bytes)", bytes as f64 / 1048576.0),
            "≤ 12 MiB",
            if bytes <= 12 * 1048576 {
                Verdict::Met
            } else {
                Verdict::Missed(format!(
                    "by {:.1} MiB",
                    (bytes - 12 * 1048576) as f64 / 1048576.0
                ))
            },
        ));
        // At most one request per period, and for the leader one more per acquisition.
        let acquisitions = leader.ops.0.get("acquire").copied().unwrap_or(0.0);
        for (role, f, period, allowance, rule) in [
            (
                "the leader",
                leader,
                t.renew_interval,
                acquisitions,
                "(one per renew_interval) + one per acquisition",
            ),
            (
                "a follower",
                follower,
                t.acquire_interval,
                0.0,
                "(one per acquire_interval)",
            ),
        ] {
            let limit = 60.0 / period.as_secs_f64();
            let per_min = 60.0 / f.window.as_secs_f64();
            rows.push(Row::new(
                format!("Storage requests by {role} (its own `/metrics`)"),
                format!(
                    "{:.1} /min ({})",
                    f.requests_per_minute(),
                    ops_text(&f.ops, per_min)
                ),
                format!("≤ {limit:.0} /min {rule}"),
                if f.ops.total() <= most(f.window, period) + allowance {
                    Verdict::Met
                } else {
                    Verdict::Missed(format!("by {:.1} /min", f.requests_per_minute() - limit))
                },
            ));
        }
        rows.push(Row::new(
            "TCP connections to storage opened during the window",
            format!(
                "leader {} for {:.0} requests · follower {} for {:.0} requests (open before and still open after: {} and {})",
                leader.connections_opened,
                leader.ops.total(),
                follower.connections_opened,
                follower.ops.total(),
                leader.connections_kept,
                follower.connections_kept,
            ),
            "0 (keep-alive: no handshake per request)",
            if leader.connections_opened == 0
                && follower.connections_opened == 0
                && leader.connections_kept > 0
                && follower.connections_kept > 0
            {
                Verdict::Met
            } else {
                Verdict::Missed("connections are not reused".into())
            },
        ));
        if let Some(s) = Stats::of(status) {
            rows.push(Row::new(
                format!(
                    "`leasehold status` (process start to exit, 2 daemons, {} runs)",
                    s.n
                ),
                s.text(),
                "≤ 1 s",
                at_most(s.max, Duration::from_secs(1)),
            ));
        }
    }

    fn scale_rows(&self, sc: &Scale, rows: &mut Vec<Row>) {
        let t = self.timing.unwrap_or_default();
        let n = sc.daemons;
        let (mut one, mut inside, mut two_plus, mut none_outside, mut unanswered) = (0, 0, 0, 0, 0);
        let margin = Duration::from_millis(50);
        for s in &sc.sweeps {
            let in_transition = sc
                .transitions
                .iter()
                .any(|(a, b)| s.began <= *b + margin && s.ended + margin >= *a);
            unanswered += s.unanswered;
            if s.leaders >= 2 {
                two_plus += 1;
            } else if in_transition {
                inside += 1;
            } else if s.leaders == 1 {
                one += 1;
            } else {
                none_outside += 1;
            }
        }
        let outside = one + none_outside;
        rows.push(Row::new(
            format!("{n} daemons on one blob: leaders per `/readyz` sample (every 0.5 s, all {n} at once)"),
            format!(
                "exactly 1 in {one} of {outside} samples outside handovers; {inside} samples during a handover (0 or 1); \
                 {two_plus} samples with 2 or more; {unanswered} unanswered requests"
            ),
            "exactly one at every sample",
            if two_plus == 0 && none_outside == 0 {
                Verdict::Met
            } else {
                Verdict::Missed(format!(
                    "{two_plus} samples with 2+, {none_outside} with none outside handovers"
                ))
            },
        ));
        let base = self
            .graceful
            .as_ref()
            .and_then(|g| Stats::of(&g.latencies))
            .map(|s| s.p50);
        let h = &sc.handovers;
        match Stats::of(&h.latencies) {
            Some(s) => rows.push(Row::new(
                format!(
                    "{n} daemons: graceful handover ({} trials{})",
                    s.n,
                    if h.timeouts > 0 {
                        format!(", {} timed out", h.timeouts)
                    } else {
                        String::new()
                    }
                ),
                s.text(),
                match base {
                    Some(b) => format!("p50 ≤ 2 × the 3-daemon p50 = {}", human(b * 2)),
                    None => "p50 ≤ 2 × the 3-daemon p50".into(),
                },
                match base {
                    Some(b) => at_most(s.p50, b * 2),
                    None => Verdict::Info,
                },
            )),
            None => rows.push(no_data(format!("{n} daemons: graceful handover"))),
        }
        let per_s = sc.ops.total() / sc.window.as_secs_f64();
        let bound = (n - 1) as f64 / t.acquire_interval.as_secs_f64()
            + 1.0 / t.renew_interval.as_secs_f64();
        rows.push(Row::new(
            format!("{n} daemons: storage requests, all together"),
            format!(
                "{per_s:.1} /s ({:.0} M per month)",
                per_s * 60.0 * MINUTES_PER_MONTH / 1e6
            ),
            format!(
                "≤ {bound:.2} /s ({} followers × 1/acquire_interval + 1/renew_interval)",
                n - 1
            ),
            if per_s <= bound {
                Verdict::Met
            } else {
                Verdict::Missed(format!("by {:.1} /s", per_s - bound))
            },
        ));
        rows.push(Row::new(
            format!("{n} daemons: resident memory"),
            format!(
                "RSS {} in all (PSS {}: the binary's shared pages counted once), {} the largest; Azurite {}",
                mib(sc.rss_total_kib),
                mib(sc.pss_total_kib),
                mib(sc.rss_max_kib),
                mib(sc.azurite_rss_kib)
            ),
            "≤ 10 MiB per daemon",
            within_ten_mib(sc.rss_max_kib),
        ));
        rows.push(Row::new(
            format!("{n} daemons: CPU, all together (serving `/readyz` twice a second)"),
            format!(
                "{:.2} % of a core; Azurite serving them {:.1} %",
                100.0 * sc.cpu.as_secs_f64() / sc.window.as_secs_f64(),
                100.0 * sc.azurite_cpu.as_secs_f64() / sc.window.as_secs_f64()
            ),
            "",
            Verdict::Info,
        ));
        if let Some(s) = Stats::of(&sc.status) {
            rows.push(Row::new(
                format!("`leasehold status` with {n} daemons polling ({} runs)", s.n),
                s.text(),
                "≤ 1 s",
                at_most(s.max, Duration::from_secs(1)),
            ));
        }
    }

    fn settings(&self) -> String {
        let t = self.timing.unwrap_or_default();
        format!(
            "duration {} · renew_interval {} · acquire_interval {} (followers poll every 1.0–1.2 ×) · safety_margin {} · stop_timeout {} · HTTP on",
            human(t.duration),
            human(t.renew_interval),
            human(t.acquire_interval),
            human(t.safety_margin),
            human(t.stop_timeout)
        )
    }

    fn header_lines(&self) -> Vec<String> {
        let h = &self.header;
        let mut lines = vec![
            format!(
                "{} · commit {} · {} · load average {} before, {} after · Azurite 3.35.0 on loopback · took {}",
                h.date,
                h.commit,
                h.machine,
                h.load_before,
                h.load_after,
                human_long(h.elapsed)
            ),
            format!("Settings (the defaults): {}.", self.settings()),
        ];
        if h.quick {
            lines.push(
                "**Quick run** (`--quick`): fewer trials and shorter windows; not comparable."
                    .into(),
            );
        }
        if let Some(note) = &h.note {
            lines.push(format!("**Note:** {note}"));
        }
        lines
    }

    pub fn markdown(&self) -> String {
        let mut out = String::new();
        for line in self.header_lines() {
            let _ = writeln!(out, "{line}\n");
        }
        let _ = writeln!(out, "| figure | measured | target | |\n|---|---|---|---|");
        for r in self.rows() {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} |",
                r.figure,
                r.measured,
                r.target,
                r.verdict.text()
            );
        }
        for section in [self.side_by_side(), self.cost_by_role()]
            .into_iter()
            .flatten()
        {
            let _ = writeln!(out, "\n{section}");
        }
        out
    }

    pub fn json(&self) -> Value {
        let h = &self.header;
        let t = self.timing.unwrap_or_default();
        let handovers = |h: &Handovers| {
            json!({
                "daemons": h.daemons,
                "stats": Stats::of(&h.latencies).map(|s| s.json()),
                "timeouts": h.timeouts,
                "overlaps": h.overlaps,
                "trials": h.details,
            })
        };
        let footprint = |f: &Footprint| {
            json!({
                "window_s": f.window.as_secs_f64(),
                "rss_max_kib": f.rss_max_kib,
                "rss_mean_kib": f.rss_mean_kib.round(),
                "rss_peak_since_start_kib": f.rss_peak_kib,
                "guard_rss_kib": f.guard_rss_kib,
                "cpu_ms": ms(f.cpu),
                "cpu_percent_of_a_core": f.cpu_percent(),
                "requests": f.ops.0,
                "requests_per_minute": f.requests_per_minute(),
                "transactions_per_month": f.requests_per_minute() * MINUTES_PER_MONTH,
                "storage_connections_before": f.connections_before,
                "rss_anon_kib": f.memory.anon_kib,
                "rss_file_kib": f.memory.file_kib,
                "pss_kib": f.memory.pss_kib,
                "guard_memory_kib": f.guard_memory.map(|m| json!({"anon": m.anon_kib, "file": m.file_kib, "pss": m.pss_kib})),
                "storage_connections_opened": f.connections_opened,
                "storage_connections_kept": f.connections_kept,
                "storage_connections_first_seen_s": f.connections_seen,
            })
        };
        json!({
            "date": h.date,
            "commit": h.commit,
            "machine": h.machine,
            "load_average_before": h.load_before,
            "load_average_after": h.load_after,
            "note": h.note,
            "quick": h.quick,
            "elapsed_s": h.elapsed.as_secs_f64(),
            "settings": {
                "duration_s": t.duration.as_secs_f64(),
                "renew_interval_s": t.renew_interval.as_secs_f64(),
                "acquire_interval_s": t.acquire_interval.as_secs_f64(),
                "safety_margin_s": t.safety_margin.as_secs_f64(),
                "stop_timeout_s": t.stop_timeout.as_secs_f64(),
            },
            "graceful_handover": self.graceful.as_ref().map(handovers),
            "voluntary_handover": self.voluntary.as_ref().map(handovers),
            "crash_failover": self.crash.as_ref().map(|(c, overlaps)| json!({
                "bound_ms": ms(t.duration + t.acquire_interval),
                "target_max_ms": ms(self.crash_limit(&t)),
                "stats": Stats::of(&c.iter().filter_map(|c| c.failover).collect::<Vec<_>>()).map(|s| s.json()),
                "overlaps": overlaps,
                "trials": c.iter().map(|c| json!({
                    "ms": c.failover.map(ms),
                    "killed_after_renew_ms": ms(c.since_renew),
                    // What the lease had left on our clock, and what followed its expiry: the
                    // followers' polling plus the new leader's acquire, epoch write and spawn.
                    "lease_left_ms": ms(t.duration.saturating_sub(c.since_renew)),
                    "after_expiry_ms": c.failover.map(|f| ms(f.saturating_sub(t.duration.saturating_sub(c.since_renew)))),
                })).collect::<Vec<_>>(),
            })),
            "footprint": self.footprint.as_ref().map(|st| json!({
                "leader": footprint(&st.leader),
                "follower": footprint(&st.follower),
                "binary_bytes": self.binary_bytes,
            })),
            "status_latency": self.footprint.as_ref().and_then(|st| Stats::of(&st.status)).map(|s| s.json()),
            "cost_by_role": self.footprint.as_ref().map(|st| json!({
                "window_s": st.parts.window.as_secs_f64(),
                "price_sheet": {
                    "name": SHEET.name,
                    "usd_per_10000": {"other": SHEET.other, "read": SHEET.read, "list": SHEET.list, "write": SHEET.write},
                },
                "daemons": st.parts.parts.iter().map(|p| json!({
                    "identity": p.identity,
                    "role": p.role.name(),
                    "requests": p.ops.0,
                    "per_minute_by_class": Rates::measured(&p.ops, st.parts.window.as_secs_f64() / 60.0)
                        .0.iter().map(|(c, n)| (c.name().to_owned(), json!(n))).collect::<serde_json::Map<_, _>>(),
                })).collect::<Vec<_>>(),
            })),
            "requests": self.requests.as_ref().map(|r| json!({
                "sdk": r.sdk_version,
                "period_s": r.period.as_secs_f64(),
                "burst": r.burst,
                "optimized_build": r.optimized,
                "round_trip_ms": round_trip(r).map(ms3),
                "leasehold": latencies_json(&r.leasehold),
                "python_sdk": latencies_json(&r.sdk),
            })),
            "advertise": match &self.advertise {
                Advertise::Skipped => json!("not run"),
                Advertise::NotBuilt => json!("not built yet"),
                Advertise::Ran { graceful, voluntary } => json!({
                    "graceful_handover": graceful.as_ref().map(handovers),
                    "voluntary_handover": voluntary.as_ref().map(handovers),
                }),
            },
            "etcdctl_lock": self.etcd.as_ref().map(|e| json!({
                "version": e.version,
                "graceful_handover_process_group_sigterm": e.graceful.as_ref().map(handovers),
                "voluntary_handover": e.voluntary.as_ref().map(handovers),
                "lone_sigterm_child_kept_running": e.lone_sigterm,
                "lone_sigterm_waited_s": e.waited.as_secs_f64(),
            })),
            "slots": self.slots.as_ref().map(|s| json!({
                "members": s.members,
                "slots": s.slots,
                "window_s": s.window.as_secs_f64(),
                "parts": s.parts.iter().map(|p| json!({
                    "identity": p.identity,
                    "role": p.role,
                    "requests": p.ops.0,
                })).collect::<Vec<_>>(),
                "refills": s.refills.iter().map(|r| json!({
                    "slot": r.slot,
                    "killed": r.killed,
                    "took_ms": r.took.map(ms),
                    "by": r.by,
                })).collect::<Vec<_>>(),
                "overlaps": s.overlaps,
                "most_at_once": s.most_at_once,
            })),
            "quorum": self.quorum.as_ref().map(|q| json!({
                "window_s": q.window.as_secs_f64(),
                "groups": q.groups.iter().map(|g| json!({
                    "accounts": g.accounts,
                    "first_lead_ms": g.first_lead.map(ms),
                    "graceful_ms": g.graceful.iter().map(|d| d.map(ms)).collect::<Vec<_>>(),
                    "crash_ms": g.crash.iter().map(|d| d.map(ms)).collect::<Vec<_>>(),
                    "requests_per_minute_per_account": g.per_account_minute,
                    "overlaps": g.overlaps,
                })).collect::<Vec<_>>(),
            })),
            "scale": self.scale.as_ref().map(|s| json!({
                "daemons": s.daemons,
                "handover": handovers(&s.handovers),
                "window_s": s.window.as_secs_f64(),
                "requests": s.ops.0,
                "requests_per_second": s.ops.total() / s.window.as_secs_f64(),
                "cpu_percent_of_a_core": 100.0 * s.cpu.as_secs_f64() / s.window.as_secs_f64(),
                "rss_total_kib": s.rss_total_kib,
                "rss_max_kib": s.rss_max_kib,
                "pss_total_kib": s.pss_total_kib,
                "azurite_rss_kib": s.azurite_rss_kib,
                "azurite_cpu_percent_of_a_core": 100.0 * s.azurite_cpu.as_secs_f64() / s.window.as_secs_f64(),
                "status_latency": Stats::of(&s.status).map(|s| s.json()),
                "sweeps": s.sweeps.iter().map(|w| json!([ms(w.began), ms(w.ended), w.leaders, w.unanswered])).collect::<Vec<_>>(),
                "transitions": s.transitions.iter().map(|(a, b)| json!([ms(*a), ms(*b)])).collect::<Vec<_>>(),
            })),
        })
    }

    /// The performance page: page.md (what is measured, how, and what bounds each figure)
    /// with this run's `figures` (its header and table) in place.
    pub fn page(&self, figures: &str) -> String {
        include_str!("page.md").replace("{{figures}}\n", figures)
    }

    /// One row per kind of handover: every trial a dot on a log time axis, p50 and p95 as
    /// ticks, the target as a red mark.
    pub fn svg(&self) -> String {
        let t = self.timing.unwrap_or_default();
        let (p50_target, p95_target) = self.handover_target();
        let row = |name: String, samples: &[Duration], targets: Vec<(Duration, &str)>| {
            let stats = Stats::of(samples);
            LatencyRow {
                name,
                summary: stats.map_or_else(
                    || "no data".into(),
                    |st| format!("n={} · {}", st.n, st.text()),
                ),
                samples: samples.to_vec(),
                p50: stats.map(|s| s.p50),
                p95: stats.map(|s| s.p95),
                targets: targets
                    .into_iter()
                    .map(|(d, name)| (d, name.to_owned()))
                    .collect(),
            }
        };
        let handover_targets = vec![(p50_target, "p50"), (p95_target, "p95")];
        let mut rows = Vec::new();
        if let Some(h) = &self.graceful {
            rows.push(row(
                format!("graceful (SIGTERM), {} daemons", h.daemons),
                &h.latencies,
                handover_targets.clone(),
            ));
        }
        if let Some(h) = &self.voluntary {
            rows.push(row(
                format!("voluntary (child exits), {} daemons", h.daemons),
                &h.latencies,
                handover_targets.clone(),
            ));
        }
        for (name, h) in [
            (
                "graceful (SIGTERM), with advertise",
                self.advertise.graceful(),
            ),
            (
                "voluntary (child exits), with advertise",
                self.advertise.voluntary(),
            ),
            (
                "etcdctl lock: graceful (group SIGTERM)",
                self.etcd.as_ref().and_then(|e| e.graceful.as_ref()),
            ),
            (
                "etcdctl lock: voluntary (child exits)",
                self.etcd.as_ref().and_then(|e| e.voluntary.as_ref()),
            ),
        ] {
            if let Some(h) = h {
                rows.push(row(
                    format!("{name}, {} instances", h.daemons),
                    &h.latencies,
                    Vec::new(),
                ));
            }
        }
        if let Some(s) = &self.scale {
            let base = self
                .graceful
                .as_ref()
                .and_then(|g| Stats::of(&g.latencies))
                .map(|s| s.p50 * 2);
            rows.push(row(
                format!("graceful (SIGTERM), {} daemons", s.daemons),
                &s.handovers.latencies,
                base.map(|b| vec![(b, "p50")]).unwrap_or_default(),
            ));
        }
        if let Some((c, _)) = &self.crash {
            rows.push(row(
                format!(
                    "crash (SIGKILL), {} daemons",
                    self.graceful.as_ref().map_or(3, |g| g.daemons)
                ),
                &c.iter().filter_map(|c| c.failover).collect::<Vec<_>>(),
                vec![(self.crash_limit(&t), "max")],
            ));
        }
        let mut subtitle = vec![(
            format!("{} · {}", self.header.date, self.header.machine),
            false,
        )];
        if let Some(note) = &self.header.note {
            subtitle.push((note.clone(), true));
        }
        subtitle.push((self.settings(), false));
        LatencyPlot {
            title: "leasehold: from the leader's end to the next child's start".into(),
            subtitle,
            rows,
            caption: "dots: trials · black: measured p50 · grey: measured p95 · red: the \
                      targets for p50, p95 or max · log time axis"
                .into(),
        }
        .svg()
    }
}

/// "4m 12s".
pub fn human_long(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// A Markdown table with a verdict column.
fn table(out: &mut String, head: &[&str], rows: Vec<(Vec<String>, Verdict)>) {
    let _ = writeln!(out, "| {} | |", head.join(" | "));
    let _ = writeln!(out, "|{}---|", "---|".repeat(head.len()));
    for (cells, verdict) in rows {
        let _ = writeln!(out, "| {} | {} |", cells.join(" | "), verdict.text());
    }
}

/// A Markdown table of figures alone.
fn plain_table(out: &mut String, head: &[&str], rows: Vec<Vec<String>>) {
    let _ = writeln!(out, "| {} |", head.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(head.len()));
    for cells in rows {
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

impl Verdict {
    fn text(self) -> String {
        match self {
            Verdict::Met => "met".to_owned(),
            Verdict::Missed(why) => format!("**missed** {why}"),
            Verdict::Info => String::new(),
        }
    }
}

/// "p50 · p95 · max" cells of one kind of handover, and its trial count.
fn handover_cells(h: Option<&Handovers>) -> (String, Vec<String>) {
    match h.map(|h| (h, Stats::of(&h.latencies))) {
        Some((h, Some(s))) => (
            if h.timeouts > 0 {
                format!("{} ({} timed out)", s.n, h.timeouts)
            } else {
                s.n.to_string()
            },
            vec![fine(s.p50), fine(s.p95), fine(s.max)],
        ),
        Some((h, None)) => (
            format!("0 ({} timed out)", h.timeouts),
            vec!["no trial completed".into(), String::new(), String::new()],
        ),
        None => (
            "–".into(),
            vec!["not run".into(), String::new(), String::new()],
        ),
    }
}

impl Report {
    /// "Handover, side by side": leasehold today, leasehold with `advertise`, `etcdctl lock`,
    /// handing over the same child in the same run.
    fn side_by_side(&self) -> Option<String> {
        if self.graceful.is_none()
            && self.voluntary.is_none()
            && self.etcd.is_none()
            && matches!(self.advertise, Advertise::Skipped)
        {
            return None;
        }
        let (p50_target, p95_target) = self.handover_target();
        let etcd = self.etcd.as_ref();
        let mut rows = Vec::new();
        for (kind, today, advertised, rival, etcd_how) in [
            (
                "graceful",
                self.graceful.as_ref(),
                self.advertise.graceful(),
                etcd.and_then(|e| e.graceful.as_ref()),
                "SIGTERM to its process group",
            ),
            (
                "voluntary",
                self.voluntary.as_ref(),
                self.advertise.voluntary(),
                etcd.and_then(|e| e.voluntary.as_ref()),
                "the child exits",
            ),
        ] {
            let rival_p50 = rival.and_then(|h| Stats::of(&h.latencies)).map(|s| s.p50);
            // leasehold today: the part-one targets.
            let (n, cells) = handover_cells(today);
            let verdict = match today.and_then(|h| Stats::of(&h.latencies).map(|s| (h, s))) {
                Some((h, _)) if h.timeouts > 0 => {
                    Verdict::Missed(format!("{} trials without a new leader", h.timeouts))
                }
                Some((_, s)) => both(at_most(s.p50, p50_target), at_most(s.p95, p95_target)),
                None => Verdict::Info,
            };
            rows.push((
                [
                    vec![kind.to_owned(), "leasehold (no `advertise`)".into(), n],
                    cells,
                    vec![format!(
                        "p50 ≤ {} · p95 ≤ {} (today's)",
                        human(p50_target),
                        human(p95_target)
                    )],
                ]
                .concat(),
                verdict,
            ));
            // leasehold with advertise: median no slower than etcdctl lock's plus one storage
            // round trip (a lease handover needs the successor's own acquire after the
            // change) and 2 ms.
            let rtt = self.requests.as_ref().and_then(round_trip);
            let limit = rival_p50.map(|p| p + rtt.map_or(Duration::ZERO, |r| r + SLACK));
            let target = match (rival_p50, rtt, limit) {
                (Some(p), Some(r), Some(l)) => format!(
                    "p50 ≤ `etcdctl lock`'s p50 ({}) + the storage round trip ({}) + 2 ms = {}",
                    fine(p),
                    fine(r),
                    fine(l)
                ),
                (Some(p), _, _) => format!("p50 ≤ `etcdctl lock`'s p50 ({})", human(p)),
                _ => "p50 ≤ `etcdctl lock`'s p50".into(),
            };
            let (n, cells, verdict) = match &self.advertise {
                Advertise::NotBuilt => (
                    "–".into(),
                    vec![
                        "not built yet (the binary refuses `[election].advertise`)".into(),
                        String::new(),
                        String::new(),
                    ],
                    Verdict::Info,
                ),
                Advertise::Skipped => {
                    let (n, cells) = handover_cells(None);
                    (n, cells, Verdict::Info)
                }
                Advertise::Ran { .. } => {
                    let (n, cells) = handover_cells(advertised);
                    let verdict = match (advertised, rival_p50) {
                        (Some(h), _) if h.timeouts > 0 => {
                            Verdict::Missed(format!("{} trials without a new leader", h.timeouts))
                        }
                        (Some(h), Some(_)) => match (Stats::of(&h.latencies), limit) {
                            (Some(s), Some(l)) => at_most_fine(s.p50, l),
                            _ => Verdict::Missed("no data".into()),
                        },
                        _ => Verdict::Info,
                    };
                    (n, cells, verdict)
                }
            };
            rows.push((
                [
                    vec![kind.to_owned(), "leasehold with `advertise`".into(), n],
                    cells,
                    vec![target],
                ]
                .concat(),
                verdict,
            ));
            let (n, cells) = handover_cells(rival);
            rows.push((
                [
                    vec![kind.to_owned(), format!("`etcdctl lock` ({etcd_how})"), n],
                    cells,
                    vec!["(the yardstick)".into()],
                ]
                .concat(),
                Verdict::Info,
            ));
        }
        let mut out = String::new();
        let _ = writeln!(
            out,
            "### Handover, side by side\n\n3 instances of each, the same witness child, from \
             the old child's end (or the signal) to the new child's start; leasehold's trials \
             with `advertise` and `etcdctl lock`'s take turns in one window:\n"
        );
        table(
            &mut out,
            &["handover", "tool", "trials", "p50", "p95", "max", "target"],
            rows,
        );
        if let Some(e) = etcd.filter(|e| !e.lone_sigterm.is_empty()) {
            let kept = e.lone_sigterm.iter().filter(|k| **k).count();
            let _ = writeln!(
                out,
                "\nSIGTERM to the holding `etcdctl` alone (not its process group): its child \
                 was still running, the lock still held and no other child started {} later \
                 in {kept} of {} trials ({}).",
                human(e.waited),
                e.lone_sigterm.len(),
                e.version
            );
        }
        Some(out)
    }

    /// "Cost by role": each part's storage requests a minute by price class (measured), a
    /// month, and what groups of 3 and 50 cost at the price sheet; today's parts beside ordered
    /// succession's (measured once the binary has it, the lead's model until then).
    fn cost_by_role(&self) -> Option<String> {
        let steady = self.footprint.as_ref()?;
        let t = self.timing.unwrap_or_default();
        let measured = measured_roles(&steady.parts, &t);
        let model = cost::succession_model(&t);
        let succession_measured = measured.contains_key(&Role::Successor);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "### Cost by role\n\nStorage requests a minute by Azure price class, from each \
             daemon's own `/metrics` over the {:.0} s window (3 daemons, default settings); a \
             month is 730 h; prices: {}, per 10,000: other {} · list {} · write {} (a List \
             costs {:.1} others).{}\n",
            steady.parts.window.as_secs_f64(),
            SHEET.name,
            dollars(SHEET.other),
            dollars(SHEET.list),
            dollars(SHEET.write),
            SHEET.list_ratio(),
            listing_by_config(Role::OtherFollower, steady.parts.window, &t).map_or(
                String::new(),
                |per_minute| format!(
                    " The other followers list every 5-6 minutes, longer than the window: \
                     their list column is that configured rate ({per_minute:.2} a minute), \
                     not the window's count of 0 or 1 listing (the window is kept at {:.0} s so \
                     that the whole bench stays near 20 minutes).",
                    steady.parts.window.as_secs_f64()
                )
            )
        );
        let mut rows = Vec::new();
        let row = |role: &str, source: &str, r: &Rates| {
            vec![
                role.to_owned(),
                source.to_owned(),
                r.text(),
                format!("{:.1}", r.weighted()),
                format!("{:.2} M", r.monthly() / 1e6),
                dollars(r.monthly_cost(&SHEET)),
            ]
        };
        for (role, r) in &measured {
            rows.push(row(role.name(), "measured", r));
        }
        if !succession_measured {
            for (role, r) in &model {
                rows.push(row(
                    &format!("{} (succession)", role.name()),
                    "model (not built yet)",
                    r,
                ));
            }
        }
        let unpriced: Vec<&str> = steady
            .parts
            .parts
            .iter()
            .flat_map(|p| p.ops.0.keys())
            .filter(|op| cost::class_of(op) == Class::Unpriced)
            .map(String::as_str)
            .collect();
        plain_table(
            &mut out,
            &[
                "role",
                "from",
                "requests /min by class",
                "/min, a List as 10",
                "a month",
                "$ a month",
            ],
            rows,
        );
        if !unpriced.is_empty() {
            let _ = writeln!(
                out,
                "\n**Unpriced operations** (priced as writes until `cost::class_of` knows \
                 them): {}",
                unpriced.join(", ")
            );
        }

        // Groups of 3 and 50.
        let today_leader = measured.get(&Role::Leader);
        let today_follower = measured.get(&Role::Follower);
        let (s_leader, s_successor, s_other, s_source) = if succession_measured {
            (
                measured.get(&Role::Leader),
                measured.get(&Role::Successor),
                measured.get(&Role::OtherFollower),
                "measured",
            )
        } else {
            (
                model.get(&Role::Leader),
                model.get(&Role::Successor),
                model.get(&Role::OtherFollower),
                "model",
            )
        };
        let mut groups = Vec::new();
        for n in [3.0, 50.0] {
            let mut cells = vec![format!("{n:.0}")];
            let mut cell = |rates: Option<Rates>| match rates {
                Some(r) => cells.push(format!(
                    "{:.2} M · {}",
                    r.monthly() / 1e6,
                    dollars(r.monthly_cost(&SHEET))
                )),
                None => cells.push("–".into()),
            };
            cell(
                today_leader
                    .zip(today_follower)
                    .map(|(l, f)| cost::group_rates(&[(l, 1.0), (f, n - 1.0)])),
            );
            cell(match (s_leader, s_successor, s_other) {
                (Some(l), Some(s), Some(o)) => {
                    Some(cost::group_rates(&[(l, 1.0), (s, 1.0), (o, n - 2.0)]))
                }
                _ => None,
            });
            groups.push(cells);
        }
        let _ = writeln!(
            out,
            "\nA group a month (transactions · dollars), today's parts (measured: a leader and \
             *n* − 1 followers that all poll) beside ordered succession's (a leader, one \
             successor, *n* − 2 others; {s_source}):\n"
        );
        plain_table(
            &mut out,
            &[
                "instances",
                "today",
                &format!("with succession ({s_source})"),
            ],
            groups,
        );

        // The target: a non-successor costs at most a third of the successor (List as ten).
        if let (Some(s), Some(o)) = (s_successor, s_other) {
            let ratio = o.weighted() / s.weighted();
            let _ = writeln!(
                out,
                "\nTarget: a follower that is not the successor costs at most a third of the \
                 successor, a List counted as ten: {:.1} against {:.1} requests a minute, \
                 {:.2} of it ({s_source}){}.",
                o.weighted(),
                s.weighted(),
                ratio,
                if succession_measured {
                    if ratio <= 1.0 / 3.0 {
                        ": **met**".to_owned()
                    } else {
                        format!(": **missed** by {:.2}", ratio - 1.0 / 3.0)
                    }
                } else {
                    "; checked from measured figures once succession is built".to_owned()
                }
            );
        }
        Some(out.trim_end().to_owned())
    }
}

/// A row of times until a new child ran (a failover, a refill): min, p50 and max of those that
/// came (`missing` never did), the max held to `limit`.
fn times_row(
    figure: String,
    done: &[Duration],
    missing: usize,
    target: String,
    limit: Duration,
) -> Row {
    match Stats::of(done) {
        Some(s) => Row::new(
            figure,
            format!(
                "min {} · p50 {} · max {}",
                human(s.min),
                human(s.p50),
                human(s.max)
            ),
            target,
            if missing > 0 {
                Verdict::Missed(format!("{missing} trials without a new child"))
            } else {
                at_most(s.max, limit)
            },
        ),
        None => no_data(figure),
    }
}

/// The measured parts, by role, each role's requests a minute averaged over its daemons; a role
/// that lists less often than the window lasts (the other followers: every 5-6 minutes) gets the
/// configured listing rate in its List column instead of the window's count (0 or 1 listing,
/// 0 or 1 a minute: neither is its cost), see [`listing_by_config`].
fn measured_roles(parts: &Parts, timing: &Timing) -> BTreeMap<Role, Rates> {
    let minutes = parts.window.as_secs_f64() / 60.0;
    let mut by_role: BTreeMap<Role, Vec<Rates>> = BTreeMap::new();
    for p in &parts.parts {
        by_role
            .entry(p.role)
            .or_default()
            .push(Rates::measured(&p.ops, minutes));
    }
    by_role
        .into_iter()
        .filter(|(role, _)| *role != Role::Other)
        .map(|(role, all)| {
            let n = all.len() as f64;
            let mut sum = all
                .iter()
                .fold(Rates::default(), |sum, r| sum.plus(r, 1.0 / n));
            if let Some(configured) = listing_by_config(role, parts.window, timing) {
                sum.0.insert(Class::List, configured);
            }
            (role, sum)
        })
        .collect()
}

/// The configured listings a minute of `role`, when its listing period is longer than
/// `window` (a window that short cannot measure them): the other followers' 5-6 minutes.
fn listing_by_config(role: Role, window: Duration, timing: &Timing) -> Option<f64> {
    let per_minute = cost::succession_model(timing).get(&role)?.get(Class::List);
    let period = Duration::from_secs_f64(60.0 / per_minute.max(1e-9));
    (period > window).then_some(per_minute)
}

/// The storage round trip the handover targets add: the official Python SDK's paced renew
/// median on the bench's Azurite.
fn round_trip(r: &Requests) -> Option<Duration> {
    Stats::of(&r.sdk.paced_renew).map(|s| s.p50)
}

/// One storage request, leasehold's store beside the official Python SDK's, by kind.
fn requests_rows(r: &Requests, rows: &mut Vec<Row>) {
    let build = if r.optimized {
        ""
    } else {
        " (**debug build of the bench**: not the binary's figure)"
    };
    let kinds = [
        (
            "a lease renew after a pause",
            Latencies::paced_renew as fn(&Latencies) -> &[Duration],
        ),
        (
            "an acquire refused with 409 (a follower's poll) after a pause",
            Latencies::paced_acquire,
        ),
        ("renews back to back", Latencies::burst_renew),
    ];
    if let Some(rtt) = round_trip(r) {
        rows.push(Row::new(
            format!(
                "Storage round trip: a lease renew through the official Python SDK ({}), one every {}",
                r.sdk_version,
                human(r.period)
            ),
            format!("p50 {}", fine(rtt)),
            "(the yardstick)",
            Verdict::Info,
        ));
    }
    for (kind, of) in kinds {
        let figure = format!(
            "leasehold's lease request: {kind} ({} each, every {}{})",
            of(&r.leasehold).len(),
            human(r.period),
            build
        );
        match (Stats::of(of(&r.leasehold)), Stats::of(of(&r.sdk))) {
            (Some(ours), Some(sdk)) => rows.push(Row::new(
                figure,
                format!(
                    "p50 {} · p95 {} · mean {} (the SDK: p50 {} · p95 {} · mean {})",
                    fine(ours.p50),
                    fine(ours.p95),
                    fine(ours.mean),
                    fine(sdk.p50),
                    fine(sdk.p95),
                    fine(sdk.mean)
                ),
                format!("p50 ≤ the SDK's ({})", fine(sdk.p50)),
                at_most_fine(ours.p50, sdk.p50),
            )),
            _ => rows.push(no_data(figure)),
        }
    }
    rows.push(Row::new(
        "What one request costs the client: CPU time of its process over its requests (not its pauses), and the connections to storage it kept over the rounds",
        format!(
            "leasehold {} a request, {} connection(s) · the SDK {} a request, {} connection(s)",
            fine(r.leasehold.cpu_per_request),
            r.leasehold.connections,
            fine(r.sdk.cpu_per_request),
            r.sdk.connections
        ),
        "",
        Verdict::Info,
    ));
}

/// [`at_most`] for request times: "missed by 0.42 ms".
fn at_most_fine(value: Duration, limit: Duration) -> Verdict {
    if value <= limit {
        Verdict::Met
    } else {
        Verdict::Missed(format!("by {}", fine(value - limit)))
    }
}

/// Milliseconds to the microsecond, for storage requests.
fn ms3(d: Duration) -> f64 {
    (d.as_secs_f64() * 1_000_000.0).round() / 1000.0
}

fn latencies_json(l: &Latencies) -> Value {
    let stats = |samples: &[Duration]| {
        Stats::of(samples).map(|s| {
            json!({
                "n": s.n, "min_ms": ms3(s.min), "p50_ms": ms3(s.p50), "p95_ms": ms3(s.p95),
                "max_ms": ms3(s.max), "mean_ms": ms3(s.mean),
            })
        })
    };
    let samples = |samples: &[Duration]| samples.iter().map(|d| ms3(*d)).collect::<Vec<_>>();
    json!({
        "paced_renew": stats(&l.paced_renew),
        "paced_acquire_refused": stats(&l.paced_acquire),
        "burst_renew": stats(&l.burst_renew),
        "cpu_per_request_ms": ms3(l.cpu_per_request),
        "connections": l.connections,
        "samples_ms": {
            "paced_renew": samples(&l.paced_renew),
            "paced_acquire_refused": samples(&l.paced_acquire),
            "burst_renew": samples(&l.burst_renew),
        },
    })
}

fn dollars(d: f64) -> String {
    if d < 0.1 {
        format!("${d:.4}")
    } else {
        format!("${d:.2}")
    }
}
