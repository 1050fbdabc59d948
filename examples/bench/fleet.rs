//! The daemons under measurement: leadership groups (one blob each, the test kit's [`Group`])
//! running `leasehold run` with the settings every figure is taken with, HTTP on, and what their
//! `/metrics` count.

use leasehold_testkit::{Azurite, Daemon, Group, History, Metrics, secs};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// The lease settings the groups run with (the daemon's defaults); the report computes its bounds
/// from the same values, so a changed default moves figures and bounds together.
pub use leasehold::Timing;

/// What every group shares: the storage, where the files go, the settings.
pub struct Env<'a> {
    pub azurite: &'a Azurite,
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

/// One leadership group under measurement: its blob, its folder (configs, logs, the witness
/// history), the child its daemons run.
pub struct Fleet<'a> {
    pub env: &'a Env<'a>,
    pub group: Group,
    workload: Workload,
    spawned: usize,
}

impl<'a> Fleet<'a> {
    pub fn new(env: &'a Env<'a>, blob: &str, workload: Workload) -> Self {
        Self {
            group: Group::in_folder(env.azurite, &env.work.join(blob), "bench", blob),
            env,
            workload,
            spawned: 0,
        }
    }

    /// Where its configs, logs and history are: what explains a failure.
    pub fn dir(&self) -> String {
        self.group.dir().display().to_string()
    }

    /// The [lease] and [child] tables of every daemon of the group.
    fn tables(&self) -> (String, String) {
        let t = self.env.timing;
        let ms = |d: Duration| format!("\"{}ms\"", d.as_millis());
        let lease = format!(
            "duration = {}\nrenew_interval = {}\nacquire_interval = {}\nsafety_margin = {}",
            ms(t.duration),
            ms(t.renew_interval),
            ms(t.acquire_interval),
            ms(t.safety_margin)
        );
        let command = match &self.workload {
            Workload::Witness(extra) => {
                // One history line a second is plenty; starts and stops are what is timed.
                let mut options = vec!["--beat", "1s"];
                options.extend(extra.iter().map(String::as_str));
                self.group.witness(&options)
            }
            Workload::Idle => "[\"sleep\", \"1000000\"]".to_owned(),
        };
        let child = format!(
            "command = {command}\nstop_timeout = {}\non_exit = \"release\"\n",
            ms(t.stop_timeout)
        );
        (lease, child)
    }

    /// Starts `leasehold run` for `identity` with HTTP on, once its endpoint answers; its output
    /// goes to `<identity>.<n>.log` in the group's folder.
    pub fn spawn(&mut self, identity: &str) -> Daemon {
        self.spawned += 1;
        let (lease, child) = self.tables();
        let log_path = self
            .group
            .dir()
            .join(format!("{identity}.{}.log", self.spawned));
        let log = Mutex::new(std::fs::File::create(&log_path).expect("daemon log"));
        self.group
            .launch(identity, &lease, &child)
            .http()
            .echo(false)
            .each_line(move |line| {
                let _ = writeln!(log.lock().unwrap(), "{line}");
            })
            .spawn()
    }

    pub fn history(&self) -> History {
        self.group.history()
    }

    /// Starts `n` daemons named `<prefix>-1..n`: the first alone until its child runs, then the
    /// rest, each until it says it follows. Returns them with the first as leader.
    pub fn start(&mut self, prefix: &str, n: usize) -> Vec<Daemon> {
        let mut daemons = Vec::with_capacity(n);
        let first = self.spawn(&format!("{prefix}-1"));
        assert!(
            first.wait_log("child started", secs(30)),
            "{} did not lead; see {}",
            first.identity,
            self.dir()
        );
        daemons.push(first);
        for i in 2..=n {
            daemons.push(self.spawn(&format!("{prefix}-{i}")));
        }
        for d in &daemons[1..] {
            d.assert_follows(secs(60));
        }
        daemons
    }
}

/// A daemon's HTTP address (every daemon of the bench serves one).
pub fn http_of(daemon: &Daemon) -> String {
    daemon.http.clone().expect("the bench's daemons serve HTTP")
}

/// `leasehold_lease_operations_total`, by operation (summed over results).
#[derive(Debug, Clone, Default)]
pub struct LeaseOps(pub BTreeMap<String, f64>);

impl LeaseOps {
    /// From a daemon's `/metrics`.
    pub fn of(daemon: &Daemon) -> Option<Self> {
        daemon.metrics().map(|m| Self::from(&m))
    }

    pub fn from(metrics: &Metrics) -> Self {
        Self(metrics.by("leasehold_lease_operations_total", "op"))
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
