//! etcd beside Azurite, for the benchmark's side-by-side with `etcdctl lock`: Debian's
//! `etcd-server` and `etcd-client` packages (installed with apt-get when missing and this
//! process runs as root; otherwise a one-line refusal saying how to install them), one etcd on
//! free loopback ports with a data folder of its own, tied to the process that starts it and
//! killed by its pid on drop, and `etcdctl lock` waiters ([`LockWaiter`]), each in a process
//! group of its own with the child it runs.

use crate::process::{spawn_tied_to_this_process, spawn_until_ready};
use crate::wait::wait_until_some;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use std::fs;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

/// The packages that hold `etcd` and `etcdctl` on Debian and Ubuntu.
pub const PACKAGES: [&str; 2] = ["etcd-server", "etcd-client"];

/// `etcd --version`'s first line, if `etcd` and `etcdctl` both run.
fn installed_version() -> Option<String> {
    crate::debian::version_of("etcdctl", &["version"])?;
    crate::debian::version_of("etcd", &["--version"])
}

/// Makes sure `etcd` and `etcdctl` are installed: as they are, or with
/// `apt-get update && apt-get install -y etcd-server etcd-client` when this process is root
/// and has apt-get. Returns etcd's version line, or the one line that says why not and what
/// to do.
pub fn ensure_installed() -> Result<String, String> {
    crate::debian::ensure_installed(&PACKAGES, installed_version)
}

/// One etcd member, alone in its cluster, on loopback; SIGKILLed by its pid on drop.
pub struct Etcd {
    process: Option<Child>,
    pub client_port: u16,
    pub data: tempfile::TempDir,
    /// `etcd --version`'s first line.
    pub version: String,
}

impl Etcd {
    /// Starts etcd on free loopback ports (client and peer) with a fresh data folder. Panics
    /// with the reason if it cannot be installed ([`ensure_installed`]) or does not start.
    pub fn start() -> Self {
        let version = ensure_installed().unwrap_or_else(|why| panic!("{why}"));
        let data = tempfile::Builder::new()
            .prefix("leasehold-etcd-")
            .tempdir()
            .expect("etcd data folder");
        for _ in 0..5 {
            let (client, peer) = (crate::http::free_port(), crate::http::free_port());
            if client == peer {
                continue;
            }
            if let Some(process) = Self::spawn(data.path(), client, peer) {
                return Self {
                    process: Some(process),
                    client_port: client,
                    data,
                    version,
                };
            }
        }
        panic!("etcd did not start; see {}/etcd.log", data.path().display());
    }

    /// Starts etcd and waits until `/health` says so; None if it exited (a port was taken).
    fn spawn(data: &Path, client: u16, peer: u16) -> Option<Child> {
        let log = fs::File::create(data.join("etcd.log")).expect("etcd log");
        let client_url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let mut command = Command::new("etcd");
        command
            .args(["--name", "bench", "--data-dir"])
            .arg(data.join("member"))
            .args(["--listen-client-urls", &client_url])
            .args(["--advertise-client-urls", &client_url])
            .args(["--listen-peer-urls", &peer_url])
            .args(["--initial-advertise-peer-urls", &peer_url])
            .args(["--initial-cluster", &format!("bench={peer_url}")])
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log);
        // Whatever ETCD_* variables this machine has would change what etcd does.
        for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("ETCD")) {
            command.env_remove(name);
        }
        let addr = format!("127.0.0.1:{client}");
        spawn_until_ready(command, "etcd", Duration::from_secs(30), || {
            crate::http::get(&addr, "/health")
                .is_some_and(|(code, body)| code == 200 && body.contains("true"))
        })
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.client_port)
    }

    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.as_ref().expect("running").id() as i32)
    }

    /// `etcdctl` against this etcd, not yet run.
    pub fn etcdctl(&self, args: &[&str]) -> Command {
        let mut command = Command::new("etcdctl");
        for (name, _) in std::env::vars().filter(|(k, _)| k.starts_with("ETCDCTL")) {
            command.env_remove(name);
        }
        command
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.endpoint()])
            .args(args)
            .stdin(Stdio::null());
        command
    }

    /// The waiters queued on lock `name`, the holder included: the keys under its prefix.
    pub fn lock_keys(&self, name: &str) -> usize {
        self.etcdctl(&["get", "--prefix", "--keys-only", &format!("{name}/")])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map_or(0, |o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .filter(|l| !l.trim().is_empty())
                    .count()
            })
    }

    /// `etcdctl lock NAME -- COMMAND...` as `identity` (its `LEASEHOLD_IDENTITY`, which the
    /// child inherits), in a process group of its own, its output (and its child's) appended
    /// to `log`.
    pub fn lock(&self, name: &str, identity: &str, command: &[String], log: &Path) -> LockWaiter {
        use std::os::unix::process::CommandExt;
        let out = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .expect("etcdctl log");
        let mut etcdctl = self.etcdctl(&["lock", name, "--"]);
        etcdctl
            .args(command)
            .env("LEASEHOLD_IDENTITY", identity)
            .process_group(0)
            .stdout(out.try_clone().expect("log"))
            .stderr(out);
        let process = spawn_tied_to_this_process(etcdctl).expect("start etcdctl lock");
        LockWaiter {
            identity: identity.to_owned(),
            process,
        }
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        if let Some(mut p) = self.process.take() {
            let _ = kill(Pid::from_raw(p.id() as i32), Signal::SIGKILL);
            let _ = p.wait();
        }
    }
}

/// One `etcdctl lock NAME -- COMMAND` process: waiting for the lock, or holding it while its
/// child runs. Its process group (it and its child) is SIGKILLed on drop.
pub struct LockWaiter {
    pub identity: String,
    process: Child,
}

impl LockWaiter {
    pub fn pid(&self) -> Pid {
        Pid::from_raw(self.process.id() as i32)
    }

    /// `signal` to etcdctl alone.
    pub fn signal(&self, signal: Signal) {
        let _ = kill(self.pid(), signal);
    }

    /// `signal` to etcdctl's process group: it and its child, as a terminal's Ctrl-C or
    /// systemd's default `KillMode=control-group` would send it.
    pub fn signal_group(&self, signal: Signal) {
        let _ = killpg(self.pid(), signal);
    }

    /// Its exit status, once it exited within `timeout`.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_until_some(timeout, || self.process.try_wait().ok().flatten())
    }

    pub fn has_exited(&mut self) -> bool {
        self.process.try_wait().ok().flatten().is_some()
    }
}

impl Drop for LockWaiter {
    fn drop(&mut self) {
        let _ = killpg(self.pid(), Signal::SIGKILL);
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}
