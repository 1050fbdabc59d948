//! What one storage request costs: leasehold's own store (`leasehold::store::AzureStore`, on a
//! runtime like the daemon's: multi-threaded, two workers) beside the official Python SDK
//! (azure-storage-blob, `python_sdk.py`), on the same Azurite, in the same minute.
//!
//! Both hold a lease on a blob of their own and send rounds on one CLOCK_MONOTONIC schedule,
//! the SDK at `start + i * period` and leasehold half a period later, so that they never
//! overlap and share whatever else the machine does: first one request after the pause (a renew
//! on even rounds, an acquire that their own lease refuses with 409 on odd ones: a follower's
//! poll), then `burst` renews back to back. A paced request is what a daemon sends (a renew
//! every 4 s, a poll every second, on a connection kept open); the burst shows the client's own
//! cost with nothing idle in between.
//!
//! The SDK's paced renew median is the bench's **storage round trip**: the floor a handover's
//! requests cannot beat, which the handover targets add to `etcdctl lock`'s figure.
//!
//! The SDK runs from a venv the bench makes under `target/bench-python` with the pinned
//! `requirements.txt` (pip from PyPI, once; again when the pins change). Azurite answers it only
//! with `--skipApiVersionCheck` (its API version is newer than Azurite 3.35 knows), which the
//! bench's Azurite is started with.

use crate::fleet::Env;
use crate::say;
use leasehold::store::{AzureStore, LeaseId, LeaseStore, StorageTarget, StoreError};
use leasehold_testkit::procfs::storage_connections;
use leasehold_testkit::{mono_now, workspace_root};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The latencies of one client, by kind of request.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    /// A renew after a pause of about one period.
    pub paced_renew: Vec<Duration>,
    /// An acquire refused with 409 (another lease holds the blob) after such a pause.
    pub paced_acquire: Vec<Duration>,
    /// Renews back to back after each paced request.
    pub burst_renew: Vec<Duration>,
    /// The client process's CPU time over its requests (not its pauses), per request.
    pub cpu_per_request: Duration,
    /// Distinct connections to storage it had open at the end of a round, over all rounds.
    pub connections: usize,
}

impl Latencies {
    pub fn paced_renew(&self) -> &[Duration] {
        &self.paced_renew
    }

    pub fn paced_acquire(&self) -> &[Duration] {
        &self.paced_acquire
    }

    pub fn burst_renew(&self) -> &[Duration] {
        &self.burst_renew
    }
}

/// The phase's figures.
#[derive(Debug, Clone)]
pub struct Requests {
    /// The official Python SDK's.
    pub sdk: Latencies,
    /// leasehold's store's.
    pub leasehold: Latencies,
    /// `azure-storage-blob <version>, Python <version>`.
    pub sdk_version: String,
    /// Between two paced requests of one client.
    pub period: Duration,
    /// Renews back to back after each paced request.
    pub burst: usize,
    /// Whether the bench measuring leasehold's store was built with optimizations (the daemon
    /// is: a debug bench's figures for leasehold are not the binary's).
    pub optimized: bool,
}

/// The venv's interpreter, made (or made again, when the pins changed) with `python3 -m venv`
/// and `pip install -r examples/bench/requirements.txt`. `Err` is the one line that says why
/// it cannot be had.
pub fn ensure_python() -> Result<PathBuf, String> {
    let requirements = workspace_root().join("examples/bench/requirements.txt");
    let pins = fs::read_to_string(&requirements)
        .map_err(|e| format!("cannot read {}: {e}", requirements.display()))?;
    let venv = workspace_root().join("target/bench-python");
    let python = venv.join("bin/python");
    let stamp = venv.join("installed-requirements.txt");
    if python.exists() && fs::read_to_string(&stamp).is_ok_and(|s| s == pins) {
        return Ok(python);
    }
    say("installing the official Python SDK (azure-storage-blob, pinned) into target/bench-python");
    let run = |command: &mut Command, what: &str| -> Result<(), String> {
        let output = command
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {what} ({e}); the bench needs python3 with venv"))?;
        if output.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        Err(format!("{what} failed ({}): {last}", output.status))
    };
    run(
        Command::new("python3")
            .args(["-m", "venv", "--clear"])
            .arg(&venv),
        "python3 -m venv",
    )?;
    run(
        Command::new(&python)
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                "-r",
            ])
            .arg(&requirements),
        "pip install -r examples/bench/requirements.txt",
    )?;
    fs::write(&stamp, pins).map_err(|e| format!("cannot write {}: {e}", stamp.display()))?;
    Ok(python)
}

/// Runs the phase: `rounds` rounds `period` apart for each client, `burst` renews after each
/// paced request. Panics with the reason when either client fails.
pub fn requests(
    env: &Env,
    python: &Path,
    rounds: usize,
    period: Duration,
    burst: usize,
) -> Requests {
    let connection_string = env.azurite.connection_string();
    let target = StorageTarget::from_connection_string(&connection_string, "bench", "requests")
        .expect("the bench's storage target");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let store = Arc::new(AzureStore::new(&target).expect("leasehold's store"));
    // The container and leasehold's blob first: the SDK's blob goes into the same container.
    runtime
        .block_on(store.prepare(true))
        .expect("prepare leasehold's blob");
    // Late enough for the interpreter to import the SDK and warm up (about a second here).
    let start = mono_now() + Duration::from_secs(5);
    let mut sdk = Command::new(python);
    sdk.arg(workspace_root().join("examples/bench/python_sdk.py"))
        .args(["bench", "requests-sdk"])
        .arg(format!("{:.6}", start.as_secs_f64()))
        .arg(format!("{:.6}", period.as_secs_f64()))
        .arg(rounds.to_string())
        .arg(burst.to_string())
        .env("LEASEHOLD_BENCH_CONNECTION_STRING", &connection_string)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let sdk = leasehold_testkit::process::spawn_tied_to_this_process(sdk)
        .unwrap_or_else(|e| panic!("start {}: {e}", python.display()));
    // On a worker thread, as the daemon's elector runs (not on the thread that blocks on it).
    let round = Round {
        store,
        period,
        burst,
        storage_port: env.azurite.port,
        sdk_pid: sdk.id(),
    };
    let ours = runtime
        .block_on(runtime.spawn(leasehold_side(round, start + period / 2, rounds)))
        .expect("leasehold's side")
        .unwrap_or_else(|e| panic!("leasehold's store failed in the requests phase: {e}"));
    let output = sdk.wait_with_output().expect("wait for the Python SDK");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the Python SDK failed in the requests phase ({}): {}",
        output.status,
        stderr.trim()
    );
    let answer: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("the Python SDK's JSON");
    let seconds = |kind: &str| -> Vec<Duration> {
        answer[kind]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_f64())
                    .map(Duration::from_secs_f64)
                    .collect()
            })
            .unwrap_or_default()
    };
    let late = answer["late"].as_u64().unwrap_or(0) + ours.late as u64;
    if late > 0 {
        say(&format!(
            "requests: {late} rounds began more than 10 ms late (a busy machine)"
        ));
    }
    Requests {
        sdk: Latencies {
            paced_renew: seconds("paced_renew"),
            paced_acquire: seconds("paced_acquire"),
            burst_renew: seconds("burst_renew"),
            cpu_per_request: Duration::from_secs_f64(
                answer["cpu_s"].as_f64().unwrap_or(0.0)
                    / answer["requests"].as_f64().unwrap_or(1.0),
            ),
            connections: ours.sdk_connections,
        },
        leasehold: ours.latencies,
        sdk_version: answer["version"].as_str().unwrap_or("?").to_owned(),
        period,
        burst,
        optimized: !cfg!(debug_assertions),
    }
}

/// What leasehold's side of the phase works with.
struct Round {
    store: Arc<AzureStore>,
    period: Duration,
    burst: usize,
    /// Azurite's, where both clients' connections go.
    storage_port: u16,
    /// The Python SDK's process, whose connections are counted between its rounds.
    sdk_pid: u32,
}

/// What leasehold's side measured.
struct Ours {
    latencies: Latencies,
    /// Rounds that began more than 10 ms late.
    late: usize,
    /// The SDK's connections to storage, seen between its rounds.
    sdk_connections: usize,
}

/// leasehold's rounds, on the schedule the SDK's follow half a period earlier.
async fn leasehold_side(r: Round, start: Duration, rounds: usize) -> Result<Ours, StoreError> {
    let (store, period, burst) = (&r.store, r.period, r.burst);
    let ours = LeaseId::random();
    // A lease of 15 s (the bench's Azurite is new: nobody else holds it), renewed every round.
    store.acquire(ours, 15).await?;
    // Warmed up a period before the first round, as the SDK is: the connection is then as
    // fresh as it is between two rounds.
    sleep_until_mono(start.saturating_sub(period)).await;
    for _ in 0..burst {
        store.renew(ours).await?;
    }
    let mut out = Latencies::default();
    let (mut late, mut cpu, mut requests) = (0, Duration::ZERO, 0u32);
    let (mut mine, mut theirs) = (BTreeSet::new(), BTreeSet::new());
    for i in 0..rounds {
        let at = start + period * i as u32;
        if mono_now().saturating_sub(at) > Duration::from_millis(10) {
            late += 1;
        }
        sleep_until_mono(at).await;
        let cpu_before = process_cpu();
        let began = Instant::now();
        if i % 2 == 0 {
            store.renew(ours).await?;
            out.paced_renew.push(began.elapsed());
        } else {
            match store.acquire(LeaseId::random(), 15).await {
                Err(StoreError::Status { status: 409, .. }) => {}
                other => panic!("an acquire that should have been refused: {other:?}"),
            }
            out.paced_acquire.push(began.elapsed());
        }
        for _ in 0..burst {
            let began = Instant::now();
            store.renew(ours).await?;
            out.burst_renew.push(began.elapsed());
        }
        cpu += process_cpu().saturating_sub(cpu_before);
        requests += 1 + burst as u32;
        // Outside what is timed: the connections each client holds now (the SDK is between
        // two rounds of its own).
        mine.extend(storage_connections(std::process::id(), r.storage_port));
        theirs.extend(storage_connections(r.sdk_pid, r.storage_port));
    }
    store.release(ours).await?;
    out.cpu_per_request = cpu / requests.max(1);
    out.connections = mine.len();
    Ok(Ours {
        latencies: out,
        late,
        sdk_connections: theirs.len(),
    })
}

/// This process's CPU time so far, all threads.
fn process_cpu() -> Duration {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map(|t| Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32))
        .unwrap_or_default()
}

/// Sleeps until `at` on CLOCK_MONOTONIC (the schedule both clients read).
async fn sleep_until_mono(at: Duration) {
    let now = mono_now();
    if at > now {
        tokio::time::sleep(at - now).await;
    }
}

/// The line the bench prints when the phase is done: the round trip it measured, and
/// leasehold's requests beside the SDK's.
pub fn summary(r: &Requests) -> String {
    use crate::report::{Stats, fine};
    let p50 = |samples: &[Duration]| Stats::of(samples).map_or("–".to_owned(), |s| fine(s.p50));
    format!(
        "storage round trip (the Python SDK's renew median) {}; leasehold's store: renew p50 {} \
         (SDK {}), refused acquire p50 {} (SDK {}), renews back to back p50 {} (SDK {}); CPU a \
         request {} (SDK {}); connections {} (SDK {})",
        p50(&r.sdk.paced_renew),
        p50(&r.leasehold.paced_renew),
        p50(&r.sdk.paced_renew),
        p50(&r.leasehold.paced_acquire),
        p50(&r.sdk.paced_acquire),
        p50(&r.leasehold.burst_renew),
        p50(&r.sdk.burst_renew),
        fine(r.leasehold.cpu_per_request),
        fine(r.sdk.cpu_per_request),
        r.leasehold.connections,
        r.sdk.connections,
    )
}
