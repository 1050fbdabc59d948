//! The daemons under measurement and what can be seen of them from outside: leadership groups
//! (one blob each), `leasehold run` processes with their logs and HTTP endpoints, the witness
//! history, and `/proc` (resident memory, CPU time, open storage connections).

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::io::{Read, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT/SIGTERM; every wait checks it, so Ctrl-C unwinds and the drop guards stop
/// every process the bench started.
pub static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn check_interrupted() {
    if INTERRUPTED.load(Ordering::SeqCst) {
        panic!("interrupted");
    }
}

/// Sleeps in small steps so that Ctrl-C is noticed.
pub fn pause(d: Duration) {
    let until = Instant::now() + d;
    while Instant::now() < until {
        check_interrupted();
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
    }
}

/// Polls `cond` every `every` until it yields a value or `timeout` passes.
pub fn poll<T>(
    timeout: Duration,
    every: Duration,
    mut cond: impl FnMut() -> Option<T>,
) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        check_interrupted();
        if let Some(v) = cond() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every);
    }
}

/// CLOCK_MONOTONIC, the clock the witness writes its history with.
pub fn mono_now() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// The lease settings every group runs with: the daemon's defaults, written out so that the
/// figures stay comparable if a default ever changes.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub duration: Duration,
    pub renew_interval: Duration,
    pub acquire_interval: Duration,
    pub safety_margin: Duration,
    pub stop_timeout: Duration,
}

pub const DEFAULTS: Timing = Timing {
    duration: Duration::from_secs(15),
    renew_interval: Duration::from_secs(4),
    acquire_interval: Duration::from_secs(1),
    safety_margin: Duration::from_secs(1),
    stop_timeout: Duration::from_secs(5),
};

/// What every group shares: the binaries, the storage, where the files go.
pub struct Env {
    pub leasehold: PathBuf,
    pub witness: PathBuf,
    pub connection_string: String,
    pub azurite_port: u16,
    pub work: PathBuf,
    pub timing: Timing,
}

/// The child a group's daemons run.
#[derive(Debug, Clone)]
pub enum Workload {
    /// The witness, with extra options: it records starts and stops in the group's history.
    Witness(Vec<String>),
    /// `sleep`: a child that costs nothing, so the daemon's own footprint is all there is.
    Idle,
}

/// One leadership group: a blob, and a folder with its configs, logs and witness history.
pub struct Group<'a> {
    pub env: &'a Env,
    pub blob: String,
    pub dir: PathBuf,
    workload: Workload,
    spawned: usize,
}

impl<'a> Group<'a> {
    pub fn new(env: &'a Env, blob: &str, workload: Workload) -> Self {
        let dir = env.work.join(blob);
        fs::create_dir_all(&dir).expect("group folder");
        Self {
            env,
            blob: blob.to_owned(),
            dir,
            workload,
            spawned: 0,
        }
    }

    pub fn history_path(&self) -> PathBuf {
        self.dir.join("history")
    }

    fn command(&self) -> Vec<String> {
        match &self.workload {
            Workload::Witness(extra) => {
                let mut c = vec![
                    self.env.witness.display().to_string(),
                    "--history".into(),
                    self.history_path().display().to_string(),
                    "--lock".into(),
                    self.dir.join("witness.lock").display().to_string(),
                    // One history line a second is plenty; starts and stops are what we time.
                    "--beat".into(),
                    "1s".into(),
                ];
                c.extend(extra.iter().cloned());
                c
            }
            Workload::Idle => vec!["sleep".into(), "1000000".into()],
        }
    }

    fn config(&self, identity: &str, http: &str) -> PathBuf {
        let t = self.env.timing;
        let secs = |d: Duration| format!("\"{}ms\"", d.as_millis());
        let command = self
            .command()
            .iter()
            .map(|p| format!("{p:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let text = format!(
            "identity = {identity:?}\n\n\
             [storage]\nconnection_string = {:?}\ncontainer = \"bench\"\nblob = {:?}\n\n\
             [lease]\nduration = {}\nrenew_interval = {}\nacquire_interval = {}\nsafety_margin = {}\n\n\
             [child]\ncommand = [{command}]\nstop_timeout = {}\non_exit = \"release\"\n\n\
             [http]\nlisten = {http:?}\n",
            self.env.connection_string,
            self.blob,
            secs(t.duration),
            secs(t.renew_interval),
            secs(t.acquire_interval),
            secs(t.safety_margin),
            secs(t.stop_timeout),
        );
        let path = self.dir.join(format!("{identity}.toml"));
        fs::write(&path, text).expect("write config");
        path
    }

    /// Starts `leasehold run` for `identity` on a free HTTP port, and waits until that answers.
    pub fn spawn(&mut self, identity: &str) -> Daemon {
        for _ in 0..5 {
            self.spawned += 1;
            let http = format!("127.0.0.1:{}", crate::azurite::free_port());
            let config = self.config(identity, &http);
            let log_path = self.dir.join(format!("{identity}.{}.log", self.spawned));
            let log = fs::File::create(&log_path).expect("daemon log");
            let mut command = Command::new(&self.env.leasehold);
            command
                .args(["run", "-c"])
                .arg(&config)
                .env("RUST_LOG", "info")
                .env_remove("LEASEHOLD_CONFIG")
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log);
            for var in leasehold::cli::STORAGE_ENV_VARS {
                command.env_remove(var);
            }
            // SAFETY: prctl is async-signal-safe. If the bench itself is killed, its daemons
            // die with it (and their guards take the children down): nothing is left running.
            // The signal fires when the *thread* that spawned the daemon ends, so daemons are
            // spawned only from the thread that also drops them.
            unsafe {
                command.pre_exec(|| {
                    nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
                });
            }
            let process = command.spawn().expect("start leasehold");
            let mut daemon = Daemon {
                identity: identity.to_owned(),
                process,
                http,
                log: log_path,
            };
            // Up once its HTTP endpoint answers. A port taken meanwhile by someone else is the
            // only quick exit (code 2, "cannot listen"): then try another one.
            let up = poll(
                Duration::from_secs(10),
                Duration::from_millis(10),
                || match daemon.process.try_wait() {
                    Ok(Some(status)) => Some(Err(status)),
                    _ => daemon.get("/healthz").map(|_| Ok(())),
                },
            );
            match up {
                Some(Ok(())) => return daemon,
                Some(Err(status))
                    if status.code() == Some(2) && daemon.log_text().contains("cannot listen") => {}
                Some(Err(status)) => panic!(
                    "{identity} exited at once ({status}); see {}",
                    daemon.log.display()
                ),
                None => panic!(
                    "{identity} did not answer on {} within 10 s; see {}",
                    daemon.http,
                    daemon.log.display()
                ),
            }
        }
        panic!("no free HTTP port for {identity}");
    }

    pub fn history(&self) -> History {
        History::read(&self.history_path())
    }

    /// The first child start after `after` (CLOCK_MONOTONIC), by any daemon but `not_by`.
    pub fn wait_start(
        &self,
        after: Duration,
        not_by: Option<&str>,
        timeout: Duration,
    ) -> Option<Event> {
        poll(timeout, Duration::from_millis(5), || {
            self.history()
                .events
                .into_iter()
                .find(|e| e.kind == "start" && e.t > after && Some(e.identity.as_str()) != not_by)
        })
    }
}

/// A running `leasehold run`; SIGKILLed on drop (its guard then kills its child's group).
pub struct Daemon {
    pub identity: String,
    process: Child,
    /// Where its `/readyz`, `/status` and `/metrics` answer.
    pub http: String,
    pub log: PathBuf,
}

impl Daemon {
    pub fn pid(&self) -> u32 {
        self.process.id()
    }

    pub fn signal(&self, signal: Signal) {
        let _ = kill(Pid::from_raw(self.pid() as i32), signal);
    }

    pub fn log_text(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        poll(timeout, Duration::from_millis(20), || {
            self.log_text().contains(needle).then_some(())
        })
        .is_some()
    }

    /// Waits for the daemon to exit; true if it did.
    pub fn wait_exit(&mut self, timeout: Duration) -> bool {
        poll(timeout, Duration::from_millis(10), || {
            self.process.try_wait().ok().flatten()
        })
        .is_some()
    }

    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http_get(&self.http, path)
    }

    pub fn lease_ops(&self) -> Option<LeaseOps> {
        let (code, body) = self.get("/metrics")?;
        (code == 200).then(|| LeaseOps::parse(&body))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// `GET path` over HTTP/1.0 with short timeouts: the status code and the body.
pub fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let addr_parsed: std::net::SocketAddr = addr.parse().ok()?;
    let mut stream =
        std::net::TcpStream::connect_timeout(&addr_parsed, Duration::from_secs(2)).ok()?;
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

/// `leasehold_lease_operations_total`, by operation (summed over results).
#[derive(Debug, Clone, Default)]
pub struct LeaseOps(pub BTreeMap<String, f64>);

impl LeaseOps {
    pub fn parse(metrics: &str) -> Self {
        let mut ops = BTreeMap::new();
        for line in metrics.lines() {
            let Some(labels) = line.strip_prefix("leasehold_lease_operations_total{") else {
                continue;
            };
            let Some(op) = labels
                .split_once("op=\"")
                .and_then(|(_, rest)| rest.split_once('"'))
                .map(|(op, _)| op.to_owned())
            else {
                continue;
            };
            let value: f64 = line
                .rsplit(' ')
                .next()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0.0);
            *ops.entry(op).or_insert(0.0) += value;
        }
        Self(ops)
    }

    pub fn total(&self) -> f64 {
        self.0.values().sum()
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &LeaseOps) -> LeaseOps {
        LeaseOps(
            self.0
                .iter()
                .map(|(op, n)| (op.clone(), n - earlier.0.get(op).copied().unwrap_or(0.0)))
                .filter(|(_, n)| *n > 0.0)
                .collect(),
        )
    }
}

/// One line of a witness history: `<mono ns> <event> <identity> <epoch> <pid> [detail]`.
#[derive(Debug, Clone)]
pub struct Event {
    pub t: Duration,
    pub kind: String,
    pub identity: String,
    pub epoch: u64,
    pub pid: u32,
}

#[derive(Debug, Clone, Default)]
pub struct History {
    pub events: Vec<Event>,
}

impl History {
    pub fn read(path: &Path) -> Self {
        let text = fs::read_to_string(path).unwrap_or_default();
        // Only whole lines: the witness may be writing the last one right now.
        let complete = text.rfind('\n').map_or("", |end| &text[..end]);
        let events = complete
            .lines()
            .filter_map(|line| {
                let mut f = line.split(' ');
                let ns: u64 = f.next()?.parse().ok()?;
                Some(Event {
                    t: Duration::from_nanos(ns),
                    kind: f.next()?.to_owned(),
                    identity: f.next()?.to_owned(),
                    epoch: f.next()?.parse().ok()?,
                    pid: f.next()?.parse().ok()?,
                })
            })
            .collect();
        Self { events }
    }

    pub fn of_kind(&self, kind: &str) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |e| e.kind == kind)
    }

    /// Who leads now, as far as the children tell: the last child started, if it has not
    /// stopped or exited since.
    pub fn current_leader(&self) -> Option<&Event> {
        let start = self.of_kind("start").last()?;
        let ended = self
            .events
            .iter()
            .any(|e| e.pid == start.pid && (e.kind == "stop" || e.kind == "exit"));
        (!ended).then_some(start)
    }

    /// Times a witness started while another was alive (the kernel's flock verdict).
    pub fn overlaps(&self) -> usize {
        self.of_kind("overlap").count()
    }
}

/// Resident memory from `/proc/PID/status`: now and the peak (`VmHWM`), in KiB.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resident memory in more detail, in KiB: anonymous (heap, stacks) and file-backed (the
/// binary's pages, shared by every process running it) parts of RSS, and PSS (shared pages
/// divided among the processes sharing them: the fair share when adding up many daemons).
#[derive(Debug, Clone, Copy, Default)]
pub struct MemoryDetail {
    pub anon_kib: u64,
    pub file_kib: u64,
    pub pss_kib: u64,
}

pub fn memory_detail(pid: u32) -> Option<MemoryDetail> {
    let field = |text: &str, name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
    };
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    Some(MemoryDetail {
        anon_kib: field(&status, "RssAnon:")?,
        file_kib: field(&status, "RssFile:")?,
        pss_kib: field(&rollup, "Pss:")?,
    })
}

/// CPU time used by a process so far, two ways: `/proc/PID/stat` (the whole process, exited
/// threads included, in 10 ms ticks) and the sum of its threads' `schedstat` (nanoseconds, but
/// only threads still alive).
#[derive(Debug, Clone)]
pub struct CpuTime {
    ticks_ns: u64,
    threads: BTreeMap<u32, u64>,
}

impl CpuTime {
    pub fn read(pid: u32) -> Option<Self> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
        // utime and stime are fields 14 and 15 of stat(5), the 12th and 13th after the name.
        // USER_HZ is 100 on every Linux architecture's user ABI.
        let ticks: u64 =
            fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
        let mut threads = BTreeMap::new();
        for entry in fs::read_dir(format!("/proc/{pid}/task")).ok()?.flatten() {
            let Ok(tid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if let Some(ns) = fs::read_to_string(entry.path().join("schedstat"))
                .ok()
                .and_then(|s| s.split_whitespace().next()?.parse().ok())
            {
                threads.insert(tid, ns);
            }
        }
        Some(Self {
            ticks_ns: ticks * 10_000_000,
            threads,
        })
    }

    /// CPU time used between `earlier` and `self`: nanosecond-exact when no thread ended in
    /// between, else the tick count.
    pub fn since(&self, earlier: &CpuTime) -> Duration {
        let all_alive = earlier.threads.keys().all(|t| self.threads.contains_key(t));
        if all_alive {
            let now: u64 = self.threads.values().sum();
            let then: u64 = earlier.threads.values().sum();
            Duration::from_nanos(now.saturating_sub(then))
        } else {
            Duration::from_nanos(self.ticks_ns.saturating_sub(earlier.ticks_ns))
        }
    }
}

/// The inodes of the established TCP connections from `pid` to `port` on loopback.
pub fn storage_connections(pid: u32, port: u16) -> BTreeSet<u64> {
    let sockets: BTreeSet<u64> = fs::read_dir(format!("/proc/{pid}/fd"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| fs::read_link(e.path()).ok())
        .filter_map(|target| {
            target
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect();
    let mut found = BTreeSet::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local rem st ... inode (10th column); state 01 = ESTABLISHED.
            let (Some(remote), Some(state), Some(inode)) = (f.get(2), f.get(3), f.get(9)) else {
                continue;
            };
            let remote_port = remote
                .rsplit_once(':')
                .and_then(|(_, p)| u16::from_str_radix(p, 16).ok());
            let inode: u64 = inode.parse().unwrap_or(0);
            if remote_port == Some(port) && *state == "01" && sockets.contains(&inode) {
                found.insert(inode);
            }
        }
    }
    found
}

/// The guard process (`leasehold __guard`) the daemon `pid` started for its child, if any.
pub fn guard_of(pid: u32) -> Option<u32> {
    for entry in fs::read_dir("/proc").ok()?.flatten() {
        let Ok(candidate) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(") ")
            .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
        if ppid != Some(pid) {
            continue;
        }
        let cmdline = fs::read(entry.path().join("cmdline")).unwrap_or_default();
        if cmdline.split(|b| *b == 0).any(|arg| arg == b"__guard") {
            return Some(candidate);
        }
    }
    None
}
