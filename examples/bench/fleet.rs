//! The daemons under measurement: leadership groups (one blob each, the test kit's [`Group`])
//! running `leasehold run` with the settings every figure is taken with, HTTP on (and, for the
//! succession figures, `[election].advertise` naming it), what their `/metrics` count, and the
//! part each one plays (`/status`).

use leasehold_testkit::{Azurite, Daemon, Group, History, Metrics, leasehold_command, secs};
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
    /// `[lease].slots = N`: the witness of each slot records into that slot's history (the
    /// test kit's `slot_witness_child`).
    Slots(u32),
}

/// One leadership group under measurement: its blob, its folder (configs, logs, the witness
/// history), the child its daemons run.
pub struct Fleet<'a> {
    pub env: &'a Env<'a>,
    pub group: Group,
    workload: Workload,
    spawned: usize,
    /// Each daemon sets `[election].advertise` to its own HTTP address.
    advertise: bool,
}

impl<'a> Fleet<'a> {
    pub fn new(env: &'a Env<'a>, blob: &str, workload: Workload) -> Self {
        Self {
            group: Group::in_folder(env.azurite, &env.work.join(blob), "bench", blob),
            env,
            workload,
            spawned: 0,
            advertise: false,
        }
    }

    /// Every daemon of the group advertises its own HTTP listener (`[election].advertise =
    /// "http://ADDR"`), where peers wake it up (`POST /wake`). Only for a binary that takes the
    /// key: see [`advertise_supported`].
    pub fn advertising(mut self) -> Self {
        self.advertise = true;
        self
    }

    /// Where its configs, logs and history are: what explains a failure.
    pub fn dir(&self) -> String {
        self.group.dir().display().to_string()
    }

    /// The [lease] and [child] tables of every daemon of the group.
    fn tables(&self) -> (String, String) {
        let t = self.env.timing;
        let ms = |d: Duration| format!("\"{}ms\"", d.as_millis());
        let mut lease = format!(
            "duration = {}\nrenew_interval = {}\nacquire_interval = {}\nsafety_margin = {}",
            ms(t.duration),
            ms(t.renew_interval),
            ms(t.acquire_interval),
            ms(t.safety_margin)
        );
        let rest = format!(
            "stop_timeout = {}\non_exit = \"release\"\n",
            ms(t.stop_timeout)
        );
        if let Workload::Slots(n) = self.workload {
            lease.push_str(&format!("\nslots = {n}"));
            let child =
                leasehold_testkit::slots::slot_witness_child(&self.group, &["--beat", "1s"], &rest);
            return (lease, child);
        }
        let command = match &self.workload {
            Workload::Witness(extra) => {
                // One history line a second is plenty; starts and stops are what is timed.
                let mut options = vec!["--beat", "1s"];
                options.extend(extra.iter().map(String::as_str));
                self.group.witness(&options)
            }
            Workload::Idle | Workload::Slots(_) => "[\"sleep\", \"1000000\"]".to_owned(),
        };
        let child = format!("command = {command}\n{rest}");
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
        let config = self.group.config(identity, &lease, &child);
        let launch = if self.advertise {
            // The address goes into the config, so it is chosen here, not by the kit.
            let addr = leasehold_testkit::free_addr();
            append(&config, &election_table(&addr));
            Daemon::launch(&config, identity).http_on(&addr)
        } else {
            // HTTP on without advertise would be advertise = "auto": wake-ups on.
            append(&config, "\n[election]\nadvertise = \"off\"\n");
            Daemon::launch(&config, identity).http()
        };
        launch
            .echo(false)
            .each_line(move |line| {
                let _ = writeln!(log.lock().unwrap(), "{line}");
            })
            .spawn()
    }

    pub fn history(&self) -> History {
        self.group.history()
    }

    /// Starts the daemon `identity` and waits (30 s at most) until it logs `line`.
    pub fn spawn_until(&mut self, identity: &str, line: &str) -> Daemon {
        let d = self.spawn(identity);
        assert!(
            d.wait_log(line, secs(30)),
            "{} did not log {line:?} within 30 s; see {}",
            d.identity,
            self.dir()
        );
        d
    }

    /// Starts `n` daemons named `<prefix>-1..n`: the first alone until its child runs, then the
    /// rest, each until it says it follows. Returns them with the first as leader.
    pub fn start(&mut self, prefix: &str, n: usize) -> Vec<Daemon> {
        let mut daemons = Vec::with_capacity(n);
        daemons.push(self.spawn_until(&format!("{prefix}-1"), "child started"));
        for i in 2..=n {
            daemons.push(self.spawn(&format!("{prefix}-{i}")));
        }
        for d in &daemons[1..] {
            d.assert_follows(secs(60));
        }
        daemons
    }
}

/// The `[election]` table of a daemon that advertises its HTTP listener at `addr`.
fn election_table(addr: &str) -> String {
    format!("\n[election]\nadvertise = \"http://{addr}\"\n")
}

fn append(path: &std::path::Path, text: &str) {
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .expect("open a config");
    file.write_all(text.as_bytes()).expect("write a config");
}

/// Whether the binary under measurement takes `[election].advertise` (ordered succession,
/// issue 16): `leasehold check --offline` on a config that sets it. `Err` when the check failed
/// for another reason than that key (the bench's own mistake: it says so rather than guess).
pub fn advertise_supported(group: &Group) -> Result<bool, String> {
    let config = group.config("advertise-probe", "", "");
    append(&config, &election_table("127.0.0.1:9"));
    let output = leasehold_command(&["check", "--offline", "-c"])
        .arg(&config)
        .output()
        .expect("run leasehold check");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::remove_file(&config);
    if output.status.success() {
        Ok(true)
    } else if text.contains("election") && text.contains("unknown") {
        Ok(false)
    } else {
        Err(format!(
            "leasehold check --offline refused the bench's advertise probe: {}",
            text.trim()
        ))
    }
}

/// The part a daemon plays, from its `/status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Leader,
    /// First in line (ordered succession): the only follower that polls the lease.
    Successor,
    /// In line behind the successor: watches a cheap sign, lists now and then.
    OtherFollower,
    /// A follower of a binary without a line of members: every follower polls the lease.
    Follower,
    /// None of the above (starting, stepping down, standby, cooling down, or no answer).
    Other,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Self::Leader => "leader",
            Self::Successor => "successor",
            Self::OtherFollower => "other follower",
            Self::Follower => "follower (no line of members)",
            Self::Other => "other",
        }
    }

    /// From a `/status` body: `role` says leader or follower; a follower's place comes from
    /// the line of members (`line.members[].role` of its own row), when the binary has one.
    pub fn from_status(body: &str) -> Self {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(body) else {
            return Self::Other;
        };
        match v["role"].as_str() {
            Some("leader") => return Self::Leader,
            Some("follower") => {}
            _ => return Self::Other,
        }
        let me = v["identity"].as_str().unwrap_or_default();
        let part = v["line"]["members"].as_array().and_then(|members| {
            members
                .iter()
                .find(|m| m["identity"].as_str() == Some(me))
                .and_then(|m| m["role"].as_str())
        });
        match part {
            None => Self::Follower,
            Some("successor") => Self::Successor,
            Some("follower") => Self::OtherFollower,
            Some(_) => Self::Other,
        }
    }

    pub fn of(daemon: &Daemon) -> Self {
        daemon
            .get("/status")
            .map_or(Self::Other, |(_, body)| Self::from_status(&body))
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
