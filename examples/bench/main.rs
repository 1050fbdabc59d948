//! `cargo run --release --example bench`: how fast leadership moves, what a daemon costs, and
//! how a group of 50 behaves, measured against a local Azurite and printed as a table.
//!
//! It builds the release `leasehold` binary and the witness child, starts its own Azurite
//! (npm package azurite@3.35.0, installed on first use) and its own daemons, all through the
//! test kit, and writes `performance.md` (the page docs/performance.md is: the figures and what
//! bounds each one), `bench.json` and `bench-handover.svg` into the output folder (default
//! `target/bench`; `--out docs` for the repository's page). Everything it starts is stopped
//! when it ends, also on Ctrl-C or a panic; if the bench itself is SIGKILLed, its daemons die
//! with it (parent-death signal).
//!
//! It also hands the same child over with `etcdctl lock` (Debian's `etcd-server` and
//! `etcd-client`, installed with apt-get when missing and the bench runs as root; otherwise it
//! refuses with a one-line hint: leave etcd out with `--only`), on an etcd of its own on
//! loopback, and, once the binary has ordered succession (it takes `[election].advertise`),
//! leasehold with every daemon advertising its HTTP listener.
//!
//! It first times single storage requests (`requests`): leasehold's own store beside the
//! official Python SDK (azure-storage-blob, pinned in `requirements.txt`, installed by the bench
//! into a venv under `target/bench-python`), on the same Azurite, alone; the SDK's renew median
//! is the storage round trip that the handover targets add to `etcdctl lock`'s figures.
//!
//! What runs when, and why (about 22 minutes):
//! 0. the requests of both clients, interleaved on one schedule, alone (about 45 s).
//! 1. graceful handovers, the five crash failovers and the 60 s footprint window together, each
//!    on its own blob of one Azurite. Only the handovers are timed in milliseconds, and the
//!    daemons of the other two sit idle around them; the crash figures are seconds of lease
//!    expiry, and the footprint is CPU *time* and memory of two idle daemons, which other work on
//!    the machine does not change.
//! 2. voluntary handovers, alone: timed in milliseconds too.
//! 3. the handovers with `advertise` (when the binary takes the key) and `etcdctl lock`'s, 40
//!    of each kind, taking turns trial by trial (graceful, then voluntary), so that the drift
//!    of the machine over the window falls on both tools alike; then SIGTERM to a holding
//!    etcdctl alone.
//! 4. 50 daemons on one blob, alone: they load the machine and Azurite.
//! 5. 10 daemons with `[lease].slots = 3`, alone: their requests over a minute once settled,
//!    and five refills after a holder's SIGKILL (about 4½ minutes).
//! 6. three daemons on one account, then on three replicas (`[[storage.replica]]`), each
//!    account an Azurite of its own 30 ms away: the first leader, five graceful handovers and
//!    five crash failovers, and a minute of requests once settled (about 6 minutes).
//!
//! Options: `--out DIR`, `--note TEXT` (printed above the table, e.g. "preliminary: busy
//! machine"), `--only requests,graceful,voluntary,crash,footprint,advertise,etcd,scale,slots,quorum`,
//! `--quick` (fewer trials, for
//! checking the bench itself), `--keep` (keep the daemons' configs, logs and witness histories;
//! they are kept anyway when the bench fails, or a slot refill saw no new child). `LEASEHOLD_BIN` names a prebuilt binary to
//! measure instead of building one.

mod cost;
mod etcdlock;
mod fleet;
mod phases;
mod quorum;
mod report;
mod requests;
mod slots;

use fleet::Env;
use leasehold_testkit::binaries::{build_leasehold, use_leasehold_bin};
use leasehold_testkit::wait::catch_interrupts;
use leasehold_testkit::{Azurite, AzuriteOptions, Etcd, witness_bin, workspace_root};
use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// How many trials, how long the windows.
struct Plan {
    daemons: usize,
    graceful: usize,
    voluntary: usize,
    /// Stage 3: handovers of each kind, leasehold's with `advertise` and etcd's taking turns.
    turns: usize,
    crash: usize,
    /// SIGTERMs to a holding `etcdctl` alone.
    lone_sigterm: usize,
    footprint_window: Duration,
    status_runs: usize,
    scale_daemons: usize,
    scale_window: Duration,
    scale_handovers: usize,
    scale_status_runs: usize,
    /// The slots group: members, slots, request window, holders SIGKILLed.
    slots_members: usize,
    slots: u32,
    slots_window: Duration,
    slots_trials: usize,
    /// The quorum phase: handovers and failovers of each kind on each group, request window.
    quorum_trials: usize,
    quorum_window: Duration,
    /// The requests phase: rounds per client, between two rounds, renews after each paced one.
    requests_rounds: usize,
    requests_period: Duration,
    requests_burst: usize,
}

const FULL: Plan = Plan {
    daemons: 3,
    graceful: 20,
    voluntary: 20,
    turns: 40,
    crash: 5,
    lone_sigterm: 3,
    footprint_window: Duration::from_secs(60),
    status_runs: 20,
    scale_daemons: 50,
    scale_window: Duration::from_secs(30),
    scale_handovers: 10,
    scale_status_runs: 10,
    slots_members: 10,
    slots: 3,
    slots_window: Duration::from_secs(60),
    slots_trials: 5,
    quorum_trials: 5,
    quorum_window: Duration::from_secs(60),
    requests_rounds: 40,
    requests_period: Duration::from_secs(1),
    requests_burst: 5,
};

const QUICK: Plan = Plan {
    daemons: 3,
    graceful: 5,
    voluntary: 5,
    turns: 5,
    crash: 2,
    lone_sigterm: 1,
    footprint_window: Duration::from_secs(15),
    status_runs: 5,
    scale_daemons: 10,
    scale_window: Duration::from_secs(10),
    scale_handovers: 3,
    scale_status_runs: 5,
    slots_members: 10,
    slots: 3,
    slots_window: Duration::from_secs(15),
    slots_trials: 2,
    quorum_trials: 2,
    quorum_window: Duration::from_secs(15),
    requests_rounds: 10,
    requests_period: Duration::from_secs(1),
    requests_burst: 5,
};

const PHASES: [&str; 10] = [
    "requests",
    "graceful",
    "voluntary",
    "crash",
    "footprint",
    "advertise",
    "etcd",
    "scale",
    "slots",
    "quorum",
];

fn main() {
    let mut out = workspace_root().join("target/bench");
    let mut note = None;
    let mut quick = false;
    let mut keep = false;
    let mut only: Vec<String> = PHASES.iter().map(|p| p.to_string()).collect();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| usage(&format!("{arg} needs a value")))
        };
        match arg.as_str() {
            "--out" => out = PathBuf::from(value()),
            "--note" => note = Some(value()),
            "--quick" => quick = true,
            "--keep" => keep = true,
            "--only" => {
                only = value().split(',').map(|p| p.trim().to_owned()).collect();
                if let Some(bad) = only.iter().find(|p| !PHASES.contains(&p.as_str())) {
                    usage(&format!("unknown phase {bad:?}"));
                }
            }
            other => usage(&format!("unknown option {other}")),
        }
    }
    let plan = if quick { QUICK } else { FULL };
    let runs = |phase: &str| only.iter().any(|p| p == phase);
    // Ctrl-C unwinds every thread so that the drop guards stop what the bench started.
    catch_interrupts("bench");
    fs::create_dir_all(&out).expect("create the output folder");

    let began = Instant::now();
    // Always release: the figures are those of the binary users run, whatever profile the
    // bench itself was built with.
    say("building the release leasehold binary and the witness child");
    let leasehold = build_leasehold(true);
    use_leasehold_bin(leasehold.clone());
    witness_bin();
    // Before anything runs: a bench that cannot compare with etcd says so at once.
    if runs("etcd")
        && let Err(why) = leasehold_testkit::etcd::ensure_installed()
    {
        eprintln!("bench: {why}; or leave etcd out with --only");
        std::process::exit(2);
    }
    let python = runs("requests").then(|| {
        requests::ensure_python().unwrap_or_else(|why| {
            eprintln!("bench: {why}; or leave the SDK out with --only");
            std::process::exit(2);
        })
    });
    say("starting Azurite (npm package azurite@3.35.0; installed on first use)");
    // --skipApiVersionCheck: the Python SDK's API version is newer than Azurite 3.35 knows.
    let azurite = Azurite::start_with(AzuriteOptions {
        skip_api_version_check: true,
        ..AzuriteOptions::default()
    });
    let mut work = WorkDir::new(keep);
    let env = Env {
        azurite: &azurite,
        work: work.path(),
        timing: leasehold::Timing::default(),
    };
    let mut report = report::Report {
        timing: Some(env.timing),
        binary_bytes: fs::metadata(&leasehold).map(|m| m.len()).unwrap_or(0),
        ..Default::default()
    };
    report.header.load_before = load_average();

    if let Some(python) = &python {
        say("stage 0: one storage request at a time, leasehold's store and the Python SDK's");
        let r = requests::requests(
            &env,
            python,
            plan.requests_rounds,
            plan.requests_period,
            plan.requests_burst,
        );
        say(&requests::summary(&r));
        report.requests = Some(r);
    }

    if ["graceful", "crash", "footprint"].iter().any(|p| runs(p)) {
        say(&format!(
            "stage 1: graceful handovers, crash failovers and the {} s footprint window, on separate blobs",
            plan.footprint_window.as_secs()
        ));
    }
    std::thread::scope(|s| {
        let env = &env;
        let footprint = runs("footprint").then(|| {
            s.spawn(move || phases::footprint(env, plan.footprint_window, plan.status_runs))
        });
        let crash =
            runs("crash").then(|| s.spawn(move || phases::crash(env, plan.daemons, plan.crash)));
        if runs("graceful") {
            let kind = phases::Handing::graceful(env, plan.daemons, false);
            report.graceful = Some(phases::handovers(kind, plan.graceful));
            say("graceful handovers done");
        }
        report.crash = crash.map(|h| h.join().expect("crash failovers"));
        report.footprint = footprint.map(|h| h.join().expect("footprint"));
    });
    if runs("voluntary") {
        say("stage 2: voluntary handovers");
        let kind = phases::Handing::voluntary(&env, plan.daemons, false);
        report.voluntary = Some(phases::handovers(kind, plan.voluntary));
    }
    let advertise = runs("advertise") && {
        let probe = leasehold_testkit::Group::in_folder(
            &azurite,
            &work.path().join("probe"),
            "bench",
            "probe",
        );
        match fleet::advertise_supported(&probe) {
            Ok(supported) => supported,
            Err(why) => panic!("{why}"),
        }
    };
    if runs("advertise") && !advertise {
        say(
            "stage 3: the binary refuses [election].advertise (succession not built yet): no advertise handovers",
        );
        report.advertise = report::Advertise::NotBuilt;
    }
    let etcd = runs("etcd").then(|| {
        say("starting etcd (for etcdctl lock, handing over the same child)");
        Etcd::start()
    });
    if advertise || etcd.is_some() {
        let (n, turns) = (plan.daemons, plan.turns);
        say(&format!(
            "stage 3: {turns} graceful, then {turns} voluntary handovers of each: {}",
            match (advertise, &etcd) {
                (true, Some(_)) =>
                    "leasehold with [election].advertise on every daemon and etcdctl lock, taking turns",
                (true, None) => "leasehold with [election].advertise on every daemon",
                _ => "etcdctl lock",
            }
        ));
        let graceful = side_by_side(
            advertise.then(|| phases::Handing::graceful(&env, n, true)),
            etcd.as_ref()
                .map(|etcd| etcdlock::Locking::graceful(&env, etcd, n)),
            n,
            turns,
        );
        let voluntary = side_by_side(
            advertise.then(|| phases::Handing::voluntary(&env, n, true)),
            etcd.as_ref()
                .map(|etcd| etcdlock::Locking::voluntary(&env, etcd, n)),
            n,
            turns,
        );
        if advertise {
            report.advertise = report::Advertise::Ran {
                graceful: graceful.0,
                voluntary: voluntary.0,
            };
        }
        if let Some(etcd) = &etcd {
            say("stage 3: SIGTERM to a holding etcdctl alone");
            report.etcd = Some(etcdlock::EtcdLock {
                version: etcd.version.clone(),
                graceful: graceful.1,
                voluntary: voluntary.1,
                lone_sigterm: etcdlock::lone_sigterm(
                    &env,
                    etcd,
                    n,
                    plan.lone_sigterm,
                    env.timing.stop_timeout,
                ),
                waited: env.timing.stop_timeout,
            });
        }
    }
    drop(etcd);
    if runs("scale") {
        say(&format!(
            "stage 4: {} daemons on one blob",
            plan.scale_daemons
        ));
        report.scale = Some(phases::scale(
            &env,
            azurite.pid().as_raw() as u32,
            plan.scale_daemons,
            plan.scale_window,
            plan.scale_handovers,
            plan.scale_status_runs,
        ));
    }
    if runs("slots") {
        say(&format!(
            "stage 5: {} daemons with [lease].slots = {}: requests, and refills after a holder's SIGKILL",
            plan.slots_members, plan.slots
        ));
        let run = slots::slots(
            &env,
            plan.slots_members,
            plan.slots,
            plan.slots_window,
            plan.slots_trials,
        );
        // A refill that saw no new child is a liveness fault to explain: its daemons' logs
        // are kept whatever `--keep` says.
        if run.refills.iter().any(|r| r.took.is_none()) {
            say("a slot refill saw no new child within its bound; keeping the logs");
            work.keep = true;
        }
        report.slots = Some(run);
    }
    if runs("quorum") {
        say(
            "stage 6: three daemons on one account, then on three replicas, each account 30 ms away: first leader, handovers, failovers, requests",
        );
        report.quorum = Some(quorum::quorum(&env, plan.quorum_trials, plan.quorum_window));
    }
    drop(azurite);

    report.header = report::Header {
        date: now_utc(),
        commit: commit(),
        machine: machine(),
        load_after: load_average(),
        note,
        quick,
        elapsed: began.elapsed(),
        ..report.header
    };
    let markdown = report.markdown();
    fs::write(out.join("performance.md"), report.page(&markdown)).expect("write performance.md");
    fs::write(
        out.join("bench.json"),
        serde_json::to_string_pretty(&report.json()).expect("json") + "\n",
    )
    .expect("write bench.json");
    fs::write(out.join("bench-handover.svg"), report.svg()).expect("write the plot");
    println!("\n{markdown}");
    say(&format!(
        "wrote performance.md, bench.json and bench-handover.svg to {} in {}",
        out.display(),
        report::human_long(began.elapsed())
    ));
    drop(work);
}

/// Stage 3's handovers of one kind: leasehold's and `etcdctl lock`'s, whichever run, taking
/// turns trial by trial (`phases::take_turns`). Returns (leasehold's, etcd's).
fn side_by_side(
    mut leasehold: Option<phases::Handing>,
    mut etcd: Option<etcdlock::Locking>,
    daemons: usize,
    trials: usize,
) -> (Option<phases::Handovers>, Option<phases::Handovers>) {
    let mut kinds: Vec<&mut dyn phases::Trials> = Vec::new();
    if let Some(kind) = leasehold.as_mut() {
        kinds.push(kind);
    }
    if let Some(kind) = etcd.as_mut() {
        kinds.push(kind);
    }
    let mut out = phases::take_turns(&mut kinds, daemons, trials).into_iter();
    let leasehold = leasehold.map(|_| out.next().expect("leasehold's handovers"));
    (
        leasehold,
        etcd.map(|_| out.next().expect("etcd's handovers")),
    )
}

fn usage(problem: &str) -> ! {
    eprintln!("bench: {problem}; see the top of examples/bench/main.rs");
    std::process::exit(2);
}

fn say(what: &str) {
    eprintln!("bench: {what}");
}

/// The daemons' configs, logs and witness histories. Deleted at the end unless `--keep`, the
/// bench failed, or a slot refill saw no new child: then they are what explains why.
struct WorkDir {
    dir: Option<tempfile::TempDir>,
    keep: bool,
}

impl WorkDir {
    fn new(keep: bool) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("leasehold-bench-")
            .tempdir()
            .expect("work folder");
        Self {
            dir: Some(dir),
            keep,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.as_ref().expect("work folder").path().to_owned()
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if let Some(dir) = self.dir.take()
            && (self.keep || std::thread::panicking())
        {
            eprintln!(
                "bench: daemon configs, logs and witness histories kept in {}",
                dir.keep().display()
            );
        }
    }
}

fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|m| m.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{cores} cores ({model}), Linux {}", kernel.trim())
}

fn commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(workspace_root())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(head) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty { format!("{head}-dirty") } else { head }
        }
        None => "unknown".into(),
    }
}

fn now_utc() -> String {
    let now = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02} UTC",
        now.year(),
        u8::from(now.month()),
        now.day(),
        now.hour(),
        now.minute()
    )
}
