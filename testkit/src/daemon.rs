//! `leasehold` as the tests run it: `leasehold run` daemons as processes ([`Daemon`], started
//! with [`Daemon::launch`], or without a config file with [`Daemon::one_liner`]), whose output
//! is collected, waited on, stalled and judged; and the one-shot commands (`status`, `check`,
//! `break`) run to completion ([`leasehold`]).
//!
//! Every daemon is tied to the process that started it (a killed test run leaves none behind),
//! and none sees the credentials of the machine running the tests ([`AMBIENT_VARIABLES`]).

use crate::binaries::leasehold_bin;
use crate::check::{Deadlines, logged_deadlines};
use crate::metrics::Metrics;
use crate::process::{output_within, spawn_tied_to_this_process};
use crate::wait::{wait_until, wait_until_some};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The `RUST_LOG` that makes a daemon log each kill deadline it computes (the debug line
/// `lease deadline` of src/elector.rs), for [`Deadlines`].
pub const DEADLINE_LOG: (&str, &str) = ("RUST_LOG", "info,leasehold::elector=debug");

/// The daemons' `RUST_LOG`: `LEASEHOLD_TEST_LOG`, else `info` (docs/testing.md).
fn test_log() -> String {
    std::env::var("LEASEHOLD_TEST_LOG").unwrap_or_else(|_| "info".into())
}

/// The variables leasehold reads its config and credentials from: removed from the environment
/// of every `leasehold` the kit starts, so that the credentials of the machine running the tests
/// (a CI runner's) never change what a test configured. Each test passes the ones it means.
pub const AMBIENT_VARIABLES: [&str; 17] = [
    "LEASEHOLD_CONFIG",
    "LEASEHOLD_IDENTITY",
    "LEASEHOLD_PRIORITY",
    "LEASEHOLD_ADVERTISE",
    "LEASEHOLD_HTTP_LISTEN",
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

/// `leasehold ARGS`, with [`AMBIENT_VARIABLES`] removed and stdin closed, not yet run.
pub fn leasehold_command(args: &[&str]) -> Command {
    let mut command = Command::new(leasehold_bin());
    command.args(args).stdin(Stdio::null());
    for name in AMBIENT_VARIABLES {
        command.env_remove(name);
    }
    command
}

/// Runs a one-shot `leasehold` command (status, check, break) to completion, with `env` added.
pub fn leasehold(args: &[&str], env: &[(&str, &str)]) -> Output {
    leasehold_command(args)
        .envs(env.iter().copied())
        .output()
        .expect("run leasehold")
}

/// Runs `leasehold ARGS` that ought to end by itself (bad input, say) for at most `timeout`:
/// its output, and whether it ended in time (if not, it was killed).
pub fn leasehold_within(args: &[&str], timeout: Duration) -> (Output, bool) {
    output_within(leasehold_command(args), timeout)
}

/// How to start a daemon: built by [`Daemon::launch`], started by [`Launch::spawn`].
#[must_use]
pub struct Launch {
    /// The program to run instead of `leasehold run` (a program that embeds the library).
    program: Option<PathBuf>,
    /// `-c CONFIG`; none for a one-liner.
    config: Option<PathBuf>,
    identity: String,
    args: Vec<String>,
    env: Vec<(String, String)>,
    open_files: Option<(u64, u64)>,
    http: bool,
    /// Where it serves, when the caller chose (to advertise it in the config).
    http_addr: Option<String>,
    echo: bool,
    each_line: Option<LineHook>,
}

/// Called with every line a daemon writes.
type LineHook = Arc<dyn Fn(&str) + Send + Sync>;

impl Launch {
    /// More arguments after `run -c CONFIG` (after `run` for a one-liner).
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| a.to_string()));
        self
    }

    /// A variable in its environment (after [`AMBIENT_VARIABLES`] are removed).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Variables in its environment, as [`Launch::env`].
    pub fn envs(self, env: &[(&str, &str)]) -> Self {
        env.iter().fold(self, |launch, (k, v)| launch.env(k, v))
    }

    /// Logs each kill deadline it computes ([`DEADLINE_LOG`], on top of `LEASEHOLD_TEST_LOG`),
    /// for the checker.
    pub fn deadline_log(self) -> Self {
        let log = format!("{},leasehold::elector=debug", test_log());
        self.env(DEADLINE_LOG.0, &log)
    }

    /// Starts with this RLIMIT_NOFILE, as `ulimit -Sn SOFT -Hn HARD` would.
    pub fn open_files(mut self, soft: u64, hard: u64) -> Self {
        self.open_files = Some((soft, hard));
        self
    }

    /// Serves its HTTP endpoint on a free loopback port ([`Daemon::http`]); [`Launch::spawn`]
    /// then returns once the endpoint answers.
    pub fn http(mut self) -> Self {
        self.http = true;
        self
    }

    /// Serves its HTTP endpoint on `addr` (chosen by the caller, e.g. with
    /// [`crate::free_addr`], so that its config can advertise it); as [`Launch::http`] otherwise.
    pub fn http_on(mut self, addr: &str) -> Self {
        self.http = true;
        self.http_addr = Some(addr.to_owned());
        self
    }

    /// Whether its output is also echoed to this process's stderr, each line tagged with its
    /// identity (the default: `cargo test` shows it for a failed test).
    pub fn echo(mut self, on: bool) -> Self {
        self.echo = on;
        self
    }

    /// Also hands every line of its output to `hook` as it comes (to show it, or to keep it in
    /// a file), from the threads that read it.
    pub fn each_line(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.each_line = Some(Arc::new(hook));
        self
    }

    /// Starts the daemon. With [`Launch::http`], waits until its endpoint answers, on another
    /// port if the one chosen was taken meanwhile.
    pub fn spawn(self) -> Daemon {
        if !self.http {
            return self.start(None);
        }
        for _ in 0..5 {
            let addr = self
                .http_addr
                .clone()
                .unwrap_or_else(crate::http::free_addr);
            let mut daemon = self.start(Some(addr.clone()));
            let up = wait_until_some(Duration::from_secs(10), || {
                match daemon.process.try_wait() {
                    Ok(Some(status)) => Some(Err(status)),
                    _ => daemon.get("/healthz").map(|_| Ok(())),
                }
            });
            match up {
                Some(Ok(())) => return daemon,
                // Someone else took the port between the check and the bind: another one.
                Some(Err(status))
                    if status.code() == Some(2)
                        && daemon.log().contains("cannot listen")
                        && self.http_addr.is_none() => {}
                Some(Err(status)) => {
                    panic!(
                        "{} exited at once ({status}):\n{}",
                        self.identity,
                        daemon.log()
                    )
                }
                None => panic!(
                    "{} did not answer on {addr} within 10 s:\n{}",
                    self.identity,
                    daemon.log()
                ),
            }
        }
        panic!("no free HTTP port for {}", self.identity);
    }

    fn start(&self, http: Option<String>) -> Daemon {
        use std::os::unix::process::CommandExt;
        let mut command = match &self.program {
            Some(program) => {
                let mut command = Command::new(program);
                command.stdin(Stdio::null()).env("NO_COLOR", "1");
                for name in AMBIENT_VARIABLES {
                    command.env_remove(name);
                }
                command
            }
            None => leasehold_command(&["run"]),
        };
        // Its own process group: a Ctrl-C in the terminal reaches the program that started it,
        // which stops its daemons in order, and not each daemon at once.
        command.process_group(0);
        if let Some((soft, hard)) = self.open_files {
            use nix::sys::resource::{Resource, setrlimit};
            // SAFETY: between fork and exec, only setrlimit, which is async-signal-safe.
            unsafe {
                command.pre_exec(move || {
                    setrlimit(Resource::RLIMIT_NOFILE, soft, hard).map_err(std::io::Error::from)
                });
            }
        }
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        // Before the test's arguments, which may end with `-- COMMAND`.
        if let Some(addr) = &http {
            command.args(["--http-listen", addr]);
        }
        command
            .args(&self.args)
            .env("RUST_LOG", test_log())
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut process = spawn_tied_to_this_process(command).expect("start leasehold");
        let log = Arc::new(Log {
            text: Mutex::new(Text::default()),
            grew: Condvar::new(),
            echo: self.echo.then(|| self.identity.clone()),
            each_line: self.each_line.clone(),
        });
        // The daemon's stderr (its log) and stdout (the child's output, passed through) are
        // collected in one buffer, in arrival order.
        let stdout = process.stdout.take().expect("stdout");
        let stderr = process.stderr.take().expect("stderr");
        let gate = Arc::new(Gate::default());
        let readers = vec![
            collect(stdout, log.clone(), gate.clone(), " out"),
            collect(stderr, log.clone(), gate.clone(), ""),
        ];
        Daemon {
            identity: self.identity.clone(),
            http,
            process,
            log,
            readers,
            gate,
        }
    }
}

/// A running `leasehold run`; SIGKILLed on drop (its guard then kills its child's group).
pub struct Daemon {
    pub identity: String,
    /// Where its `/healthz`, `/readyz`, `/status` and `/metrics` answer, if it serves them.
    pub http: Option<String>,
    process: Child,
    log: Arc<Log>,
    /// The threads reading its stdout and stderr into `log`.
    readers: Vec<std::thread::JoinHandle<()>>,
    /// Holds the readers back while the test stalls the daemon's output.
    gate: Arc<Gate>,
}

/// What a daemon wrote, as read so far.
struct Log {
    text: Mutex<Text>,
    /// Signalled whenever `text` grows.
    grew: Condvar,
    /// Echo each line to stderr, tagged with this identity.
    echo: Option<String>,
    each_line: Option<LineHook>,
}

/// A daemon's output as read so far: all of it, and each line with the CLOCK_MONOTONIC instant
/// it was read.
#[derive(Default)]
struct Text {
    all: String,
    lines: Vec<(Duration, String)>,
}

/// What the kit writes into a daemon's output pipes to fill them (see
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
    /// `leasehold run -c CONFIG` for `identity`, to be set up further and started with
    /// [`Launch::spawn`].
    pub fn launch(config: &Path, identity: &str) -> Launch {
        Launch {
            program: None,
            config: Some(config.to_owned()),
            identity: identity.to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            open_files: None,
            http: false,
            http_addr: None,
            echo: true,
            each_line: None,
        }
    }

    /// `PROGRAM -c CONFIG` for `identity`: a program that embeds the leasehold library and takes
    /// a config file as the daemon does (`examples/embedded`), run and watched as a daemon is.
    /// It has no HTTP endpoint the kit knows of ([`Launch::http`] does not apply).
    pub fn program(program: &Path, config: &Path, identity: &str) -> Launch {
        Launch {
            program: Some(program.to_owned()),
            ..Self::launch(config, identity)
        }
    }

    /// `leasehold run` without a config file, for `identity` (the name its output is tagged
    /// with; pass `--identity` in the arguments to give the daemon the same): everything comes
    /// from [`Launch::args`] and [`Launch::env`].
    pub fn one_liner(identity: &str) -> Launch {
        Launch {
            config: None,
            ..Self::launch(Path::new(""), identity)
        }
    }

    /// Starts `leasehold run -c CONFIG ARGS` for `identity` with `env` added.
    pub fn spawn(config: &Path, identity: &str, args: &[&str], env: &[(&str, &str)]) -> Self {
        Self::launch(config, identity).args(args).envs(env).spawn()
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }

    pub fn signal(&self, signal: Signal) {
        kill(self.pid(), signal).expect("signal the daemon");
    }

    /// Everything the daemon (and its child) wrote so far.
    pub fn log(&self) -> String {
        self.log.text.lock().unwrap().all.clone()
    }

    /// Waits until the daemon's log contains `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut text = self.log.text.lock().unwrap();
        while !text.all.contains(needle) {
            crate::wait::check_interrupted();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let step = left.min(Duration::from_millis(100));
            text = self.log.grew.wait_timeout(text, step).unwrap().0;
        }
        true
    }

    /// The first line of its output holding `needle`, with the CLOCK_MONOTONIC instant it was
    /// read ([`crate::mono_now`]), waiting up to `timeout` for it.
    pub fn wait_line(&self, needle: &str, timeout: Duration) -> Option<(Duration, String)> {
        let deadline = Instant::now() + timeout;
        let mut text = self.log.text.lock().unwrap();
        loop {
            if let Some(found) = text.lines.iter().find(|(_, l)| l.contains(needle)) {
                return Some(found.clone());
            }
            crate::wait::check_interrupted();
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            let step = left.min(Duration::from_millis(100));
            text = self.log.grew.wait_timeout(text, step).unwrap().0;
        }
    }

    /// Where the first line holding `needle` is among the lines of its output read so far, in
    /// the order they were read (the lines of one stream keep the order they were written in).
    pub fn line_position(&self, needle: &str) -> Option<usize> {
        let text = self.log.text.lock().unwrap();
        text.lines.iter().position(|(_, l)| l.contains(needle))
    }

    /// Waits up to `timeout` until the daemon says it follows another instance; panics with
    /// its log if it does not.
    pub fn assert_follows(&self, timeout: Duration) {
        assert!(
            self.wait_log("following", timeout),
            "{} does not follow:\n{}",
            self.identity,
            self.log()
        );
    }

    /// Waits up to `timeout` until the daemon says it joined the line of members
    /// (docs/succession.md); panics with its log if it does not.
    pub fn assert_joined(&self, timeout: Duration) {
        assert!(
            self.wait_log("joined the line of members", timeout),
            "{} did not join the line:\n{}",
            self.identity,
            self.log()
        );
    }

    /// Every kill deadline the daemon logged (with [`Launch::deadline_log`]), latest per term.
    pub fn deadlines(&self) -> Deadlines {
        Deadlines::from_log(&self.identity, &self.log())
    }

    /// The latest kill deadline it logged, whatever the term.
    pub fn latest_deadline(&self) -> Option<Duration> {
        logged_deadlines(&self.log()).map(|(_, at)| at).max()
    }

    /// Every kill deadline it logged, in order: one per lease won or renewed.
    pub fn renewals(&self) -> Vec<Duration> {
        logged_deadlines(&self.log()).map(|(_, at)| at).collect()
    }

    /// `GET path` on its HTTP endpoint (see [`Launch::http`]).
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        crate::http::get(self.http.as_deref()?, path)
    }

    /// Its `/metrics`, parsed.
    pub fn metrics(&self) -> Option<Metrics> {
        let (code, text) = self.get("/metrics")?;
        (code == 200).then(|| Metrics::parse(&text))
    }

    /// Its `/status`.
    pub fn status(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&self.get("/status")?.1).ok()
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

    /// Once the daemon and its children are gone: waits until all they wrote has been read
    /// into [`Daemon::log`].
    pub fn wait_log_complete(&self, timeout: Duration) -> bool {
        wait_until(timeout, || self.readers.iter().all(|r| r.is_finished()))
    }

    /// Waits for the daemon to exit, then (up to 2 s more) for everything it wrote to be read
    /// into [`Daemon::log`]: the exit can be seen before the reader threads drain the pipes.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let status = wait_until_some(timeout, || self.process.try_wait().ok().flatten());
        // Stalled readers (see `stall_output`) read nothing until resumed.
        if status.is_some() && !self.gate.is_closed() {
            self.wait_log_complete(Duration::from_secs(2));
        }
        status
    }

    /// SIGTERM, then a clean exit (code 0) within `timeout`; panics with its log otherwise.
    pub fn stop(&mut self, timeout: Duration) {
        self.signal(Signal::SIGTERM);
        let status = self.wait_exit(timeout);
        assert_eq!(
            status.and_then(|s| s.code()),
            Some(0),
            "{} did not stop cleanly ({status:?}):\n{}",
            self.identity,
            self.log()
        );
    }
}

fn collect(
    stream: impl std::io::Read + Send + 'static,
    log: Arc<Log>,
    gate: Arc<Gate>,
    stream_name: &'static str,
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
            if let Some(identity) = &log.echo {
                eprintln!("[{identity}{stream_name}] {line}");
            }
            if let Some(hook) = &log.each_line {
                hook(line);
            }
            let read = crate::wait::mono_now();
            let mut text = log.text.lock().unwrap();
            text.all.push_str(line);
            text.all.push('\n');
            text.lines.push((read, line.to_owned()));
            log.grew.notify_all();
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
