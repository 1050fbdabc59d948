//! Azurite for tests, the demo, the chaos command and the benchmark: the pinned npm package
//! (testkit/package.json), installed with `npm ci` on first use, started on a free loopback port
//! with its own data folder, tied to the process that starts it, and stopped on drop.

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::binaries::workspace_root;
use crate::process::spawn_until_ready;
use crate::wait::{wait_until, wait_until_some};

/// Azurite's well-known development account, and its published key.
pub const EMULATOR_ACCOUNT: &str = "devstoreaccount1";
pub const EMULATOR_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// A connection string for `account` with `key` at a blob endpoint (Azurite's, or a proxy's).
pub fn connection_string(account: &str, key: &str, endpoint: &str) -> String {
    format!(
        "DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};BlobEndpoint={endpoint}"
    )
}

/// Installs the pinned Azurite with `npm ci` the first time any test needs it.
pub fn azurite_bin() -> PathBuf {
    let kit = workspace_root().join("testkit");
    let bin = kit.join("node_modules/.bin/azurite-blob");
    if bin.exists() {
        return bin;
    }
    let lock_path = kit.join(".npm-install.lock");
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
            .current_dir(&kit)
            .stdin(Stdio::null())
            .status()
            .expect("npm is needed to install Azurite (Node 20 and npm)");
        assert!(status.success(), "npm ci failed in {}", kit.display());
    }
    drop(lock);
    bin
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
    /// `--inMemoryPersistence` instead of a data folder: nothing survives a restart.
    pub in_memory: bool,
    /// `--skipApiVersionCheck`: also answer clients whose storage API version is newer than
    /// Azurite knows (the official Python SDK's, which the bench compares with).
    pub skip_api_version_check: bool,
    /// `--blobKeepAliveTimeout` in seconds (Azurite's default: 5); runs the full `azurite`
    /// (blob, queue and table) instead of `azurite-blob`, which ignores the flag.
    pub keep_alive_secs: Option<u32>,
}

/// One Azurite blob service, on its own port and data folder; stopped on drop.
pub struct Azurite {
    /// In a lock only for the shared one, which [`Azurite::shared`] starts again if it died.
    process: Mutex<Option<Child>>,
    pub port: u16,
    pub data: tempfile::TempDir,
    options: AzuriteOptions,
}

impl Azurite {
    pub fn start() -> Self {
        Self::start_preferring(None)
    }

    /// The one Azurite that every test of this process shares, started at its first use, for
    /// the tests that do not fault storage itself (each takes a blob of its own). It keeps
    /// nothing on disk (`--inMemoryPersistence`), and dies with this process (as every process
    /// the kit starts). Tests that stop, freeze or restart Azurite, or need it with other
    /// options, start their own ([`Azurite::start`]).
    pub fn shared() -> &'static Self {
        static SHARED: std::sync::OnceLock<Azurite> = std::sync::OnceLock::new();
        let shared = SHARED.get_or_init(|| {
            // Its data is in memory; its folder (its working directory and log) must stay while
            // it runs, for Azurite creates it again when it finds it gone, and dies if it cannot.
            let options = AzuriteOptions {
                in_memory: true,
                ..AzuriteOptions::default()
            };
            Self::launch_in(None, options, Self::shared_folder())
        });
        shared.revive_if_dead();
        shared
    }

    /// The shared Azurite's folder, named after this process: a static is never dropped, so
    /// the folder outlives the process, and the next process to share an Azurite removes the
    /// folders of processes that are gone.
    fn shared_folder() -> tempfile::TempDir {
        const PREFIX: &str = "leasehold-shared-azurite-";
        let temp = std::env::temp_dir();
        for entry in fs::read_dir(&temp).into_iter().flatten().flatten() {
            let name = entry.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix(PREFIX))
                .and_then(|pid| pid.parse::<i32>().ok())
            else {
                continue;
            };
            if kill(Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH) {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{}", std::process::id()))
            .rand_bytes(0)
            .tempdir_in(temp)
            .expect("the shared Azurite's folder")
    }

    /// The shared Azurite died a few times in hundreds of runs: every test after it failed.
    /// Its death is reported with its log, on stderr of the test that finds it and in
    /// [`Azurite::deaths_file`], and it starts again on the same port and folder (in memory, so
    /// empty: tests in flight fail, later ones run).
    fn revive_if_dead(&self) {
        let mut process = self.process.lock().unwrap_or_else(|e| e.into_inner());
        let Some(status) = process.as_mut().and_then(|p| p.try_wait().ok().flatten()) else {
            return;
        };
        let log = fs::read_to_string(self.data.path().join("azurite.log")).unwrap_or_default();
        let report = format!(
            "the shared Azurite on port {} died ({status}); its log:\n{log}\nstarting it again",
            self.port
        );
        eprintln!("{report}");
        // Also where CI shows it (.ci/run prints the file): the test that finds the death passes,
        // and its stderr is not shown.
        if let Ok(mut file) = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(Self::deaths_file())
        {
            let _ = writeln!(file, "{report}");
        }
        let again = wait_until_some(Duration::from_secs(30), || {
            Self::spawn(self.port, self.data.path(), &self.options)
        })
        .unwrap_or_else(|| {
            panic!(
                "the shared Azurite does not start again on port {}",
                self.port
            )
        });
        *process = Some(again);
    }

    /// Where each death of the shared Azurite is written, with its log: CI prints it.
    pub fn deaths_file() -> PathBuf {
        workspace_root()
            .join("target")
            .join("shared-azurite-deaths.log")
    }

    /// `n` Azurites, each on a port and a data folder of its own and keeping nothing on disk:
    /// the storage accounts of a group whose lease is held on a majority of them
    /// (`[[storage.replica]]`), one per region. Each serves the well-known account, at its own
    /// endpoint: `n` accounts to storage and to leasehold.
    pub fn start_replicas(n: usize) -> Vec<Self> {
        let options = AzuriteOptions {
            in_memory: true,
            ..AzuriteOptions::default()
        };
        (0..n).map(|_| Self::start_with(options.clone())).collect()
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
        Self::launch_in(port, options, tempfile::tempdir().expect("tempdir"))
    }

    fn launch_in(port: Option<u16>, options: AzuriteOptions, data: tempfile::TempDir) -> Self {
        let preferred = port.filter(|p| TcpListener::bind(("127.0.0.1", *p)).is_ok());
        for attempt in 0..5 {
            let port = match (attempt, preferred) {
                (0, Some(p)) => p,
                _ => crate::http::free_port(),
            };
            if let Some(process) = Self::spawn(port, data.path(), &options) {
                return Self {
                    process: Mutex::new(Some(process)),
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
        let mut command = match options.keep_alive_secs {
            None => Command::new(azurite_bin()),
            // `azurite-blob` 3.35.0 parses `--blobKeepAliveTimeout` but reads another flag, so
            // it keeps Node's 5 s whatever it is told; the full `azurite` reads it. Its queue
            // and table services go to ports of the system's choosing, on loopback too.
            Some(secs) => {
                let mut full = Command::new(azurite_bin().with_file_name("azurite"));
                full.args(["--blobKeepAliveTimeout", &secs.to_string()]);
                for service in ["queue", "table"] {
                    full.arg(format!("--{service}Host")).arg("127.0.0.1");
                    full.arg(format!("--{service}Port")).arg("0");
                }
                full
            }
        };
        command.args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()]);
        if options.in_memory {
            command.arg("--inMemoryPersistence");
        } else {
            command.arg("--location").arg(data.join("db"));
        }
        command
            .current_dir(data)
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
        if options.skip_api_version_check {
            command.arg("--skipApiVersionCheck");
        }
        command
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        if crate::wait::stops_its_own() {
            // A Ctrl-C at the terminal reaches the program, which stops its daemons first (they
            // hand over and release through Azurite), and Azurite when it drops it.
            use std::os::unix::process::CommandExt;
            command.process_group(0);
        }
        // Azurite prints this line even with --silent; a bare TCP connect could reach whoever
        // else took the port meanwhile.
        spawn_until_ready(command, "Azurite", Duration::from_secs(30), || {
            // (the full `azurite` says it per service, the table's last)
            fs::read_to_string(&log_path).is_ok_and(|l| {
                l.contains("successfully listens")
                    || l.contains("Table service is successfully listening")
            })
        })
    }

    /// Whether a connection left idle for `idle` after an answer still serves the next
    /// request: sends an anonymous request (any answer will do, a 403 too), waits, sends again.
    pub fn keeps_idle_connections_for(&self, idle: Duration) -> bool {
        let ask = |stream: &mut TcpStream| -> bool {
            let request = "GET /devstoreaccount1?comp=list HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
            let mut answer = [0u8; 4096];
            stream.write_all(request.as_bytes()).is_ok()
                && stream
                    .read(&mut answer)
                    .is_ok_and(|n| answer[..n].starts_with(b"HTTP/1.1"))
        };
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        stream.set_read_timeout(Some(Duration::from_secs(5))).ok();
        if !ask(&mut stream) {
            return false;
        }
        std::thread::sleep(idle);
        ask(&mut stream)
    }

    pub fn pid(&self) -> Pid {
        let process = self.process.lock().unwrap_or_else(|e| e.into_inner());
        Pid::from_raw(process.as_ref().expect("running").id() as i32)
    }

    /// The account's name and key.
    pub fn account(&self) -> (&str, &str) {
        match &self.options.account {
            Some((name, key)) => (name, key),
            None => (EMULATOR_ACCOUNT, EMULATOR_KEY),
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
        connection_string(name, key, &self.endpoint())
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
        if let Some(mut p) = self.process_mut().take() {
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
        if let Some(mut p) = self.process_mut().take() {
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
        self.process
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    fn process_mut(&mut self) -> &mut Option<Child> {
        self.process.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    /// Starts again on the same port with the same data.
    pub fn start_again(&mut self) {
        assert!(self.process_mut().is_none(), "Azurite is still running");
        let process = wait_until_some(Duration::from_secs(30), || {
            Self::spawn(self.port, self.data.path(), &self.options)
        })
        .expect("Azurite restarts on its port");
        *self.process_mut() = Some(process);
    }

    /// Stops ([`Azurite::stop`]) and starts again on the same port with the same data.
    pub fn restart(&mut self) {
        self.stop();
        self.start_again();
    }
}

impl Drop for Azurite {
    fn drop(&mut self) {
        self.kill();
    }
}
