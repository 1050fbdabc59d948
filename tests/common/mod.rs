//! The integration-test harness: a real Azurite (from npm, pinned in tests/package.json) on its
//! own loopback port and data folder, real `leasehold` daemons as processes, the witness child
//! (examples/witness.rs) and the checks on its history (`check`), a fault-injecting proxy
//! (`proxy`), and the stand-ins the Entra ID paths need (`identity`: a private CA, tokens, a fake
//! `az`, a token endpoint).
//!
//! `examples/chaos.rs` includes this module too (through `#[path]`), so nothing here may need
//! what only test targets get from cargo (`CARGO_BIN_EXE_*`, `CARGO_TARGET_TMPDIR`) at compile
//! time.
#![allow(dead_code)]

mod azurite;
pub mod build;
pub mod check;
pub mod identity;
pub mod proxy;
pub use azurite::*;
pub use build::{cargo_command, manifest_dir};
// Not every test target uses every part.
#[allow(unused_imports)]
pub use check::{Deadlines, Life, Verdict, check};
#[allow(unused_imports)]
pub use proxy::{Direction, Fault, FaultProxy, ProxiedRequest};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// CLOCK_MONOTONIC, the clock the witness writes: comparable across processes.
pub fn mono_now() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// `target/<profile>`: tests run from `target/<profile>/deps`, examples from
/// `target/<profile>/examples`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("target dir")
        .to_owned()
}

/// `target/<profile>/examples/<name>`. `cargo test` builds the examples with the tests; when
/// only one test target was built (`cargo test --test run`), or this runs from an example, and
/// the example is missing or older than its source, it is built here.
pub fn example_bin(name: &str) -> PathBuf {
    let profile_dir = profile_dir();
    let bin = profile_dir.join("examples").join(name);
    let source = manifest_dir().join("examples").join(format!("{name}.rs"));
    let modified = |p: &Path| fs::metadata(p).and_then(|m| m.modified()).ok();
    if modified(&bin) >= modified(&source) {
        return bin;
    }
    let lock = fs::File::create(profile_dir.join("example-build.lock")).expect("build lock");
    lock.lock().expect("lock");
    if modified(&bin) < modified(&source) {
        let mut build = cargo_command();
        build.args(["build", "--quiet", "--example", name]);
        if profile_dir.ends_with("release") {
            build.arg("--release");
        }
        let status = build.status().expect("cargo build --example");
        assert!(status.success(), "cannot build example {name}");
    }
    bin
}

/// The daemon under test: the one cargo built for the tests, else `LEASEHOLD_BIN`, else
/// `target/<profile>/leasehold` (an example must build it first).
pub fn leasehold_bin() -> PathBuf {
    match option_env!("CARGO_BIN_EXE_leasehold") {
        Some(bin) => PathBuf::from(bin),
        None => std::env::var_os("LEASEHOLD_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| profile_dir().join("leasehold")),
    }
}

/// The `RUST_LOG` that makes a daemon log each kill deadline it computes (the debug line
/// `lease deadline` of src/elector.rs), for [`Deadlines`].
pub const DEADLINE_LOG: (&str, &str) = ("RUST_LOG", "info,leasehold::elector=debug");

/// Whether daemons' log lines are echoed to stderr (the tests' default); the chaos command
/// turns it off and keeps the logs in files.
static ECHO_LOGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

pub fn echo_daemon_logs(on: bool) {
    ECHO_LOGS.store(on, std::sync::atomic::Ordering::SeqCst);
}

/// The variables leasehold reads credentials from; removed from every daemon's environment.
pub const AMBIENT_CREDENTIALS: [&str; 12] = [
    "AZURE_STORAGE_CONNECTION_STRING",
    "AZURE_STORAGE_KEY",
    "AZURE_STORAGE_SAS_TOKEN",
    "AZURE_STORAGE_ACCOUNT",
    "AZURE_TENANT_ID",
    "AZURE_CLIENT_ID",
    "AZURE_CLIENT_SECRET",
    "AZURE_FEDERATED_TOKEN_FILE",
    "AZURE_AUTHORITY_HOST",
    "AZURE_POD_IDENTITY_AUTHORITY_HOST",
    "IDENTITY_ENDPOINT",
    "IDENTITY_HEADER",
];

/// A running `leasehold` process; SIGKILLed on drop (its child follows by parent-death signal).
pub struct Daemon {
    pub identity: String,
    process: Child,
    log: Arc<(Mutex<String>, Condvar)>,
    /// The threads reading its stdout and stderr into `log`.
    readers: Vec<std::thread::JoinHandle<()>>,
    /// Holds the readers back while the test stalls the daemon's output.
    gate: Arc<Gate>,
}

/// What the harness writes into a daemon's output pipes to fill them (see
/// [`Daemon::stall_output`]); the readers skip it.
const FILLER: &str = "~ harness filler: the consumer of this pipe is stalled ~";

/// The witness's `--chatter` lines: counted as output, never kept or echoed.
const CHATTER: &str = "witness chatter";

/// The readers' gate: while closed, they read nothing, so the daemon's pipes fill up.
#[derive(Default)]
struct Gate {
    /// (closed, readers parked at the gate)
    state: Mutex<(bool, usize)>,
    changed: Condvar,
}

impl Gate {
    /// Called by a reader before each line: waits while the gate is closed.
    fn pass(&self) {
        let mut state = self.state.lock().unwrap();
        if !state.0 {
            return;
        }
        state.1 += 1;
        self.changed.notify_all();
        while state.0 {
            state = self.changed.wait(state).unwrap();
        }
        state.1 -= 1;
    }

    fn is_closed(&self) -> bool {
        self.state.lock().unwrap().0
    }

    fn set(&self, closed: bool) {
        self.state.lock().unwrap().0 = closed;
        self.changed.notify_all();
    }

    /// Waits until `n` readers are parked.
    fn parked(&self, n: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.state.lock().unwrap();
        while state.1 < n {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self.changed.wait_timeout(state, left).unwrap().0;
        }
        true
    }
}

impl Daemon {
    pub fn spawn(config: &Path, identity: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::spawn_with_open_files(config, identity, args, env, None)
    }

    /// Like [`Daemon::spawn`]; with `open_files = Some((soft, hard))`, the daemon starts with
    /// that RLIMIT_NOFILE, as `ulimit -Sn SOFT -Hn HARD` would.
    pub fn spawn_with_open_files(
        config: &Path,
        identity: &str,
        args: &[&str],
        env: &[(&str, &str)],
        open_files: Option<(u64, u64)>,
    ) -> Self {
        let mut command = Command::new(leasehold_bin());
        if let Some((soft, hard)) = open_files {
            use nix::sys::resource::{Resource, setrlimit};
            use std::os::unix::process::CommandExt;
            // SAFETY: between fork and exec, only setrlimit, which is async-signal-safe.
            unsafe {
                command.pre_exec(move || {
                    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).map_err(std::io::Error::from)
                });
            }
        }
        command
            .args(["run", "-c"])
            .arg(config)
            .args(args)
            .env(
                "RUST_LOG",
                std::env::var("LEASEHOLD_TEST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // Credentials of the machine running the tests (a CI runner's) must not change what a
        // test configured: each test passes the ones it means.
        for name in AMBIENT_CREDENTIALS {
            command.env_remove(name);
        }
        for (k, v) in env {
            command.env(k, v);
        }
        // Tied to the test process: a killed test run leaves no daemon behind.
        let mut process = spawn_tied_to_this_process(command).expect("start leasehold");
        let log = Arc::new((Mutex::new(String::new()), Condvar::new()));
        // The daemon's stderr (its log) and stdout (the child's output, passed through) are
        // collected in one buffer, in arrival order.
        let stdout = process.stdout.take().expect("stdout");
        let stderr = process.stderr.take().expect("stderr");
        let gate = Arc::new(Gate::default());
        let readers = vec![
            collect(stdout, log.clone(), gate.clone(), format!("{identity} out")),
            collect(stderr, log.clone(), gate.clone(), identity.to_owned()),
        ];
        Self {
            readers,
            identity: identity.to_owned(),
            process,
            log,
            gate,
        }
    }

    /// Stalls the consumer of the daemon's stdout and stderr, as a log driver that has fallen
    /// behind does (Docker's default blocking mode, a stuck journald): nothing reads them any
    /// more, and what is in them fills them to the brim, so that the next write of the daemon
    /// (or of its child, which shares them) blocks. Returns whether both pipes are full.
    pub fn stall_output(&self) -> bool {
        self.gate.set(true);
        // A reader blocked in read() passes the gate only once it has read something: the
        // filler wakes it, and the second round fills what it took.
        let full = self.fill_pipes();
        let parked = self.gate.parked(self.readers.len(), Duration::from_secs(5));
        parked && full && self.fill_pipes()
    }

    /// Drains the daemon's output again.
    pub fn resume_output(&self) {
        self.gate.set(false);
    }

    /// Writes filler lines into the daemon's stdout and stderr (through /proc, a second open
    /// file description of each pipe, non-blocking) until they take no more.
    fn fill_pipes(&self) -> bool {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let line = format!("{FILLER}\n");
        [1, 2].into_iter().all(|fd| {
            let Ok(mut pipe) = fs::OpenOptions::new()
                .write(true)
                .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
                .open(format!("/proc/{}/fd/{fd}", self.process.id()))
            else {
                return false;
            };
            // Each write is one whole line, under PIPE_BUF: written whole or not at all.
            loop {
                match pipe.write(line.as_bytes()) {
                    Ok(n) if n == line.len() => continue,
                    // Cannot happen to a line under PIPE_BUF; a torn filler line would show.
                    Ok(_) => return false,
                    Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
                }
            }
        })
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal the daemon");
    }

    /// Everything the daemon wrote to stderr so far.
    pub fn log(&self) -> String {
        self.log.0.lock().unwrap().clone()
    }

    /// Waits until the daemon's log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let (text, ready) = &*self.log;
        let deadline = Instant::now() + timeout;
        let mut text = text.lock().unwrap();
        while !text.contains(needle) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            text = ready.wait_timeout(text, left).unwrap().0;
        }
        true
    }

    /// Once the daemon and its children are gone: waits until all they wrote has been read
    /// into [`Daemon::log`].
    pub fn wait_log_complete(&self, timeout: Duration) -> bool {
        wait_until(timeout, || self.readers.iter().all(|r| r.is_finished()))
    }

    /// Waits for the daemon to exit, then (up to 2 s more) for everything it wrote to be read
    /// into [`Daemon::log`]: the exit can be seen before the reader threads drain the pipes.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let mut status = None;
        wait_until(timeout, || {
            status = self.process.try_wait().ok().flatten();
            status.is_some()
        });
        // Stalled readers (see `stall_output`) read nothing until resumed.
        if status.is_some() && !self.gate.is_closed() {
            self.wait_log_complete(Duration::from_secs(2));
        }
        status
    }
}

fn collect(
    stream: impl std::io::Read + Send + 'static,
    sink: Arc<(Mutex<String>, Condvar)>,
    gate: Arc<Gate>,
    name: String,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stream);
        loop {
            gate.pass();
            let mut bytes = Vec::new();
            match reader.read_until(b'\n', &mut bytes) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
            let raw = String::from_utf8_lossy(&bytes);
            let line = raw.trim_end_matches(['\n', '\r']);
            if line == FILLER || line.contains(CHATTER) {
                continue;
            }
            if ECHO_LOGS.load(std::sync::atomic::Ordering::SeqCst) {
                eprintln!("[{name}] {line}");
            }
            let (text, ready) = &*sink;
            let mut text = text.lock().unwrap();
            text.push_str(line);
            text.push('\n');
            ready.notify_all();
        }
    })
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // Parked readers would never see the end of the pipes.
        self.resume_output();
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// One leadership group: a blob on an Azurite, a history file and a lock file for witnesses.
pub struct Group {
    pub dir: tempfile::TempDir,
    pub connection_string: String,
    pub blob: String,
}

impl Group {
    pub fn new(azurite: &Azurite) -> Self {
        Self {
            dir: tempfile::tempdir().expect("tempdir"),
            connection_string: azurite.connection_string(),
            blob: format!("group-{}", fastrand::u32(..)),
        }
    }

    pub fn history_path(&self) -> PathBuf {
        self.dir.path().join("history")
    }

    pub fn lock_path(&self) -> PathBuf {
        self.dir.path().join("witness.lock")
    }

    /// The witness as a TOML array, with extra witness options.
    pub fn witness(&self, options: &[&str]) -> String {
        let mut parts = vec![
            example_bin("witness").display().to_string(),
            "--history".into(),
            self.history_path().display().to_string(),
            "--lock".into(),
            self.lock_path().display().to_string(),
        ];
        parts.extend(options.iter().map(|s| s.to_string()));
        format!(
            "[{}]",
            parts
                .iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// Writes a config for `identity`: `lease` is the body of the [lease] table, `child` the
    /// body of [child] (the witness is the command unless `child` names one; stop_timeout is 2 s
    /// unless given).
    pub fn config(&self, identity: &str, lease: &str, child: &str) -> PathBuf {
        self.config_via(identity, &self.connection_string, lease, child)
    }

    /// Like [`Group::config`], reaching storage through `connection_string` (a
    /// [`FaultProxy`]'s, for one).
    pub fn config_via(
        &self,
        identity: &str,
        connection_string: &str,
        lease: &str,
        child: &str,
    ) -> PathBuf {
        let mut child_table = String::new();
        if !child.contains("command") {
            child_table.push_str(&format!("command = {}\n", self.witness(&[])));
        }
        if !child.contains("stop_timeout") {
            child_table.push_str("stop_timeout = \"2s\"\n");
        }
        child_table.push_str(child);
        let text = format!(
            "identity = {identity:?}\n\n[storage]\nconnection_string = {connection_string:?}\ncontainer = \"tests\"\nblob = {:?}\n\n[lease]\n{lease}\n\n[child]\n{child_table}\n",
            self.blob
        );
        let path = self.dir.path().join(format!("{identity}.toml"));
        fs::write(&path, text).expect("write config");
        path
    }

    pub fn start(&self, identity: &str, lease: &str, child: &str) -> Daemon {
        Daemon::spawn(&self.config(identity, lease, child), identity, &[], &[])
    }

    /// Starts a daemon that logs its kill deadlines ([`DEADLINE_LOG`]), reaching storage
    /// through `proxy` when given.
    pub fn start_watched(
        &self,
        identity: &str,
        proxy: Option<&FaultProxy>,
        lease: &str,
        child: &str,
    ) -> Daemon {
        let connection_string =
            proxy.map_or(self.connection_string.clone(), |p| p.connection_string());
        let config = self.config_via(identity, &connection_string, lease, child);
        Daemon::spawn(&config, identity, &[], &[DEADLINE_LOG])
    }

    pub fn history(&self) -> History {
        History::read(&self.history_path())
    }

    /// Polls the history until `cond` holds.
    pub fn wait_history(
        &self,
        timeout: Duration,
        mut cond: impl FnMut(&History) -> bool,
    ) -> Option<History> {
        wait_until_some(timeout, || {
            let h = self.history();
            cond(&h).then_some(h)
        })
    }
}

/// One line of a witness history.
#[derive(Debug, Clone)]
pub struct Event {
    pub t: Duration,
    pub kind: String,
    pub identity: String,
    pub epoch: u64,
    pub pid: u32,
    pub detail: String,
}

#[derive(Debug, Clone, Default)]
pub struct History {
    pub events: Vec<Event>,
}

impl History {
    pub fn read(path: &Path) -> Self {
        Self::parse(&fs::read_to_string(path).unwrap_or_default())
    }

    /// Parses history lines (whole lines: the witness writes each with a single `write`).
    pub fn parse(text: &str) -> Self {
        let events = text
            .lines()
            .filter_map(|line| {
                let mut f = line.splitn(6, ' ');
                let ns: u128 = f.next()?.parse().ok()?;
                Some(Event {
                    t: Duration::from_nanos(ns as u64),
                    kind: f.next()?.to_owned(),
                    identity: f.next()?.to_owned(),
                    epoch: f.next()?.parse().ok()?,
                    pid: f.next()?.parse().ok()?,
                    detail: f.next().unwrap_or("").trim().to_owned(),
                })
            })
            .collect();
        Self { events }
    }

    pub fn of_kind(&self, kind: &str) -> Vec<&Event> {
        self.events.iter().filter(|e| e.kind == kind).collect()
    }

    pub fn starts(&self) -> Vec<&Event> {
        self.of_kind("start")
    }

    /// The last event of each child, by pid: the latest instant it is known to have lived.
    pub fn last_seen(&self, pid: u32) -> Duration {
        self.events
            .iter()
            .filter(|e| e.pid == pid)
            .map(|e| e.t)
            .max()
            .unwrap_or_default()
    }

    /// No two witnesses alive at once: the kernel's flock verdict (no `overlap` line) and the
    /// recorded lifetimes (each start after the previous child's last sign of life).
    pub fn assert_no_overlap(&self) {
        let overlaps = self.of_kind("overlap");
        assert!(overlaps.is_empty(), "children overlapped: {overlaps:#?}");
        let starts = self.starts();
        for pair in starts.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let a_end = self.last_seen(a.pid);
            assert!(
                b.t >= a_end,
                "{} (epoch {}) started {:?} before {} (epoch {}) was last seen",
                b.identity,
                b.epoch,
                a_end - b.t,
                a.identity,
                a.epoch
            );
        }
    }

    /// Epochs never go down in start order, and grow whenever the leading daemon changes.
    pub fn assert_epochs_grow(&self) {
        for pair in self.starts().windows(2) {
            let (a, b) = (pair[0], pair[1]);
            if a.identity == b.identity {
                assert!(b.epoch >= a.epoch, "epoch went down: {a:?} -> {b:?}");
            } else {
                assert!(
                    b.epoch > a.epoch,
                    "a new leader without a larger epoch: {a:?} -> {b:?}"
                );
            }
        }
    }
}

/// Processes whose process group is `pgid`, from /proc.
pub fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesised command: state ppid pgrp ...
        let Some(rest) = stat.rsplit_once(") ").map(|(_, r)| r) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid)
            && !matches!(fields[0], "Z" | "X")
        {
            members.push(pid);
        }
    }
    members
}

/// Blocks until the witness lock is free (every witness process and its descendants are dead),
/// up to `timeout`; returns the CLOCK_MONOTONIC instant it became free. Releases it at once.
pub fn lock_freed(lock: &Path, timeout: Duration) -> Option<Duration> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock)
        .ok()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok(held) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive) {
            let at = mono_now();
            drop(held);
            let _ = tx.send(at);
        }
    });
    rx.recv_timeout(timeout).ok()
}

/// The lease state of a blob, as a separate client sees it, through `leasehold`'s own library.
pub fn lease_is_free(group: &Group) -> bool {
    // An acquire with a fresh id succeeds only when nobody holds the lease; release it at once.
    use leasehold::store::{LeaseId, LeaseStore};
    let store = group_store(group);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let id = LeaseId::random();
        match store.acquire(id, 15).await {
            Ok(()) => {
                store.release(id).await.expect("release the probe lease");
                true
            }
            Err(_) => false,
        }
    })
}

pub fn group_store(group: &Group) -> leasehold::store::AzureStore {
    let target = leasehold::store::StorageTarget::from_connection_string(
        &group.connection_string,
        "tests",
        &group.blob,
    )
    .unwrap();
    leasehold::store::AzureStore::new(&target).unwrap()
}

/// `GET path` over plain HTTP/1.0: the status code and the body, or None if nothing answers.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let code = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((code, body))
}

/// A free loopback address for a daemon's HTTP endpoint.
pub fn free_addr() -> String {
    format!("127.0.0.1:{}", free_port())
}

/// Runs a one-shot `leasehold` command (status, check, break) to completion.
pub fn leasehold(args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
    let mut command = Command::new(leasehold_bin());
    command
        .args(args)
        .env_remove("LEASEHOLD_CONFIG")
        .env_remove("AZURE_STORAGE_CONNECTION_STRING")
        .env_remove("AZURE_STORAGE_KEY")
        .env_remove("AZURE_STORAGE_SAS_TOKEN")
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("run leasehold")
}

/// The value of an unlabelled metric, or the sum of a labelled one's series matching `labels`.
pub fn metric(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.starts_with(&format!("{name} "))
                || (l.starts_with(&format!("{name}{{")) && l.contains(labels))
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        // fold from +0.0: an empty f64 sum is -0.0, which prints as "-0".
        .fold(0.0, |sum, v| sum + v)
}

/// What an operator (or a cleanup script) does to a group's blob with the storage SDK itself,
/// beside the daemons: things leasehold never does.
pub struct BlobAdmin {
    blob: azure_storage_blobs::prelude::BlobClient,
    rt: tokio::runtime::Runtime,
}

impl BlobAdmin {
    pub fn new(group: &Group) -> Self {
        use azure_storage::{CloudLocation, StorageCredentials};
        let endpoint = group
            .connection_string
            .split(';')
            .find_map(|part| part.strip_prefix("BlobEndpoint="))
            .expect("the group's connection string names its blob endpoint")
            .to_owned();
        let credentials = StorageCredentials::access_key(
            "devstoreaccount1",
            azure_core::auth::Secret::new(EMULATOR_KEY.to_owned()),
        );
        let location = CloudLocation::Custom {
            account: "devstoreaccount1".to_owned(),
            uri: endpoint,
        };
        let blob =
            azure_storage_blobs::prelude::ClientBuilder::with_location(location, credentials)
                .blob_client("tests", group.blob.clone());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Self { blob, rt }
    }

    /// Breaks whatever lease the blob has, at once (period 0).
    pub fn break_lease(&self) {
        self.rt
            .block_on(
                self.blob
                    .break_lease()
                    .lease_break_period(azure_core::request_options::LeaseBreakPeriod::from(
                        Duration::ZERO,
                    ))
                    .into_future(),
            )
            .expect("break the lease");
    }

    /// Deletes the blob, with its metadata and so its epoch. Fails while it is leased.
    pub fn delete(&self) {
        self.rt
            .block_on(self.blob.delete().into_future())
            .expect("delete the blob");
    }

    pub fn exists(&self) -> bool {
        self.rt
            .block_on(self.blob.exists())
            .expect("ask whether the blob exists")
    }

    /// Replaces the blob's metadata. While a daemon holds the lease for a moment (an attempt
    /// that is refused and released), the write is refused (412) and tried again, for up to 5 s.
    pub fn set_metadata(&self, pairs: &[(&str, &str)]) {
        let mut metadata = azure_core::prelude::Metadata::new();
        for (k, v) in pairs {
            metadata.insert(k.to_string(), v.to_string());
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let written = self.rt.block_on(
                self.blob
                    .set_metadata()
                    .metadata(metadata.clone())
                    .into_future(),
            );
            match written {
                Ok(_) => return,
                Err(e) if Instant::now() < deadline => {
                    eprintln!("set the metadata: {e}; again");
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => panic!("set the metadata: {e}"),
            }
        }
    }

    /// Creates the blob, empty, with this metadata.
    pub fn create(&self, pairs: &[(&str, &str)]) {
        let mut metadata = azure_core::prelude::Metadata::new();
        for (k, v) in pairs {
            metadata.insert(k.to_string(), v.to_string());
        }
        let container = self.blob.container_client();
        let _ = self.rt.block_on(container.create().into_future());
        self.rt
            .block_on(
                self.blob
                    .put_block_blob(Vec::<u8>::new())
                    .metadata(metadata)
                    .into_future(),
            )
            .expect("create the blob");
    }
}
