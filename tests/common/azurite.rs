//! Azurite for tests, the demo and benchmarks: the pinned npm package (tests/package.json),
//! installed with `npm ci` on first use, started on a free loopback port with its own data
//! folder, and stopped on drop. Shared by `tests/` and `examples/` through `#[path]`.
#![allow(dead_code)]

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::build::manifest_dir;

pub const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// The emulator account's connection string for a blob endpoint (Azurite's, or a proxy's).
pub fn connection_string_for(endpoint: &str) -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={EMULATOR_KEY};BlobEndpoint={endpoint}"
    )
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Installs the pinned Azurite with `npm ci` the first time any test needs it.
pub fn azurite_bin() -> PathBuf {
    let tests = manifest_dir().join("tests");
    let bin = tests.join("node_modules/.bin/azurite-blob");
    if bin.exists() {
        return bin;
    }
    let lock_path = tests.join(".npm-install.lock");
    let lock = fs::File::create(&lock_path).expect("install lock");
    lock.lock().expect("lock");
    if !bin.exists() {
        eprintln!("installing the pinned Azurite with npm ci (once)...");
        let status = Command::new("npm")
            .args([
                "ci",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--loglevel=error",
            ])
            .current_dir(&tests)
            .stdin(Stdio::null())
            .status()
            .expect("npm is needed to install Azurite (Node 20 and npm)");
        assert!(status.success(), "npm ci failed in {}", tests.display());
    }
    drop(lock);
    bin
}

/// Spawns `command` so that it dies with this process, however this process ends (a test run
/// or a benchmark killed with SIGKILL leaves no Azurite behind). The parent-death signal fires
/// when the *thread* that forked the child exits, and tests, the chaos command and the benchmark
/// start Azurite from threads that come and go; so every such child is forked by one thread that
/// lives as long as the process, the way the daemon forks its own children.
pub fn spawn_tied_to_this_process(mut command: Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    use std::sync::mpsc::{Sender, channel};
    use std::sync::{Mutex, OnceLock};
    type Job = (Command, Sender<std::io::Result<Child>>);
    static LAUNCHER: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();
    let launcher = LAUNCHER.get_or_init(|| {
        let (jobs, queue) = channel::<Job>();
        std::thread::spawn(move || {
            for (mut command, reply) in queue {
                let _ = reply.send(command.spawn());
            }
        });
        Mutex::new(jobs)
    });
    let parent = nix::unistd::getpid();
    // SAFETY: between fork and exec, only prctl and getppid, which are async-signal-safe.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from(nix::errno::Errno::ESRCH));
            }
            Ok(())
        });
    }
    let (reply, answer) = channel();
    launcher
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((command, reply))
        .map_err(|_| std::io::Error::other("the launcher thread is gone"))?;
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the launcher thread is gone"))?
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

/// How to run Azurite beyond the defaults (plain http, the well-known account).
#[derive(Debug, Clone, Default)]
pub struct AzuriteOptions {
    /// One account `(name, base64 key)` instead of the well-known `devstoreaccount1`
    /// (`AZURITE_ACCOUNTS`), so that tests can look for a key nobody else knows.
    pub account: Option<(String, String)>,
    /// Serve https with this certificate and key (PEM files).
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--oauth basic`: accept Entra ID bearer tokens (Azurite checks their issuer, audience and
    /// lifetime, not their signature; https only).
    pub oauth: bool,
}

/// One Azurite blob service, on its own port and data folder; stopped on drop.
pub struct Azurite {
    process: Option<Child>,
    pub port: u16,
    pub data: tempfile::TempDir,
    options: AzuriteOptions,
}

impl Azurite {
    pub fn start() -> Self {
        Self::start_preferring(None)
    }

    /// Starts on `port` when it is free, else on any free port.
    pub fn start_preferring(port: Option<u16>) -> Self {
        Self::launch(port, AzuriteOptions::default())
    }

    /// Starts with `options` on any free port.
    pub fn start_with(options: AzuriteOptions) -> Self {
        Self::launch(None, options)
    }

    fn launch(port: Option<u16>, options: AzuriteOptions) -> Self {
        let data = tempfile::tempdir().expect("tempdir");
        let preferred = port.filter(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok());
        for attempt in 0..5 {
            let port = match (attempt, preferred) {
                (0, Some(p)) => p,
                _ => free_port(),
            };
            if let Some(process) = Self::spawn(port, data.path(), &options) {
                return Self {
                    process: Some(process),
                    port,
                    data,
                    options,
                };
            }
        }
        panic!(
            "Azurite did not start; see {}/azurite.log",
            data.path().display()
        );
    }

    /// Starts Azurite and waits until it says it listens; None if it exited (port taken).
    fn spawn(port: u16, data: &Path, options: &AzuriteOptions) -> Option<Child> {
        let log_path = data.join("azurite.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(&log_path)
            .expect("azurite log");
        let mut command = Command::new(azurite_bin());
        command
            .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
            .arg("--location")
            .arg(data.join("db"))
            .args(["--silent", "--disableTelemetry"])
            .env_remove("AZURITE_ACCOUNTS");
        if let Some((name, key)) = &options.account {
            command.env("AZURITE_ACCOUNTS", format!("{name}:{key}"));
        }
        if let Some((cert, key)) = &options.tls {
            command.arg("--cert").arg(cert).arg("--key").arg(key);
        }
        if options.oauth {
            command.args(["--oauth", "basic"]);
        }
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        let mut process = spawn_tied_to_this_process(command).expect("start Azurite");
        // Azurite prints this line even with --silent; a bare TCP connect could reach whoever
        // else took the port meanwhile.
        let ready = wait_until(Duration::from_secs(30), || {
            fs::read_to_string(&log_path).is_ok_and(|l| l.contains("successfully listens"))
                || process.try_wait().ok().flatten().is_some()
        });
        if ready && process.try_wait().ok().flatten().is_none() {
            Some(process)
        } else {
            let _ = process.kill();
            let _ = process.wait();
            None
        }
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.as_ref().expect("running").id() as i32)
    }

    /// The account's name and key.
    pub fn account(&self) -> (&str, &str) {
        match &self.options.account {
            Some((name, key)) => (name, key),
            None => ("devstoreaccount1", EMULATOR_KEY),
        }
    }

    pub fn endpoint(&self) -> String {
        let scheme = if self.options.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://127.0.0.1:{}/{}", self.port, self.account().0)
    }

    pub fn connection_string(&self) -> String {
        let (name, key) = self.account();
        format!(
            "DefaultEndpointsProtocol=http;AccountName={name};AccountKey={key};BlobEndpoint={}",
            self.endpoint()
        )
    }

    /// SIGSTOP: connections are accepted by the kernel but never answered.
    pub fn freeze(&self) {
        kill(self.pid(), Signal::SIGSTOP).expect("SIGSTOP Azurite");
    }

    pub fn thaw(&self) {
        kill(self.pid(), Signal::SIGCONT).expect("SIGCONT Azurite");
    }

    /// SIGKILLs Azurite; its data folder stays for [`Azurite::start_again`]. Careful: Azurite
    /// saves its database only every 5 s (LokiJS autosave) and when it stops, so a SIGKILL can
    /// lose lease operations it already acknowledged, which Azure never does. Fault tests use
    /// [`Azurite::stop`].
    pub fn kill(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = kill(Pid::from_raw(p.id() as i32), Signal::SIGCONT);
            let _ = p.kill();
            let _ = p.wait();
        }
    }

    /// Stops Azurite abruptly for its clients but keeps everything it acknowledged: SIGTERM
    /// (it stops listening, drops its connections and saves its database), and SIGKILL only if
    /// it is still there after 10 s. Returns how long it took to exit.
    pub fn stop(&mut self) -> Duration {
        let began = Instant::now();
        if let Some(mut p) = self.process.take() {
            let pid = Pid::from_raw(p.id() as i32);
            let _ = kill(pid, Signal::SIGCONT);
            let _ = kill(pid, Signal::SIGTERM);
            if !wait_until(Duration::from_secs(10), || {
                p.try_wait().ok().flatten().is_some()
            }) {
                let _ = p.kill();
            }
            let _ = p.wait();
        }
        began.elapsed()
    }

    pub fn is_running(&self) -> bool {
        self.process.is_some()
    }

    /// Starts again on the same port with the same data.
    pub fn start_again(&mut self) {
        assert!(self.process.is_none(), "Azurite is still running");
        let process = wait_until_some(Duration::from_secs(30), || {
            Self::spawn(self.port, self.data.path(), &self.options)
        })
        .expect("Azurite restarts on its port");
        self.process = Some(process);
    }

    /// Stops ([`Azurite::stop`]) and starts again on the same port with the same data.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }
}

pub fn wait_until_some<T>(timeout: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let mut out = None;
    wait_until(timeout, || {
        out = f();
        out.is_some()
    });
    out
}

impl Drop for Azurite {
    fn drop(&mut self) {
        self.kill();
    }
}
