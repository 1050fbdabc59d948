//! A leadership group: one lease blob on an Azurite, and a folder with the daemons' configs and
//! the witness history and lock that every child of the group shares.

use crate::azurite::Azurite;
use crate::binaries::witness_bin;
use crate::check::{Deadlines, Verdict, check};
use crate::daemon::{Daemon, Launch};
use crate::history::{Event, History};
use crate::proxy::FaultProxy;
use crate::storage::BlobAdmin;
use crate::wait::{wait_until, wait_until_some};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where a group keeps its files.
enum Folder {
    /// Deleted with the group.
    Temporary(tempfile::TempDir),
    /// Left in place (a benchmark's, kept to explain a failure).
    Kept(PathBuf),
}

/// One leadership group: a blob, and the files its daemons and witnesses share.
pub struct Group {
    folder: Folder,
    /// How the group's daemons reach storage (unless a [`FaultProxy`] stands between).
    pub connection_string: String,
    pub container: String,
    pub blob: String,
}

impl Group {
    /// A group on a blob of its own (`group-<random>`) in container `tests`, with its files in
    /// a temporary folder.
    pub fn new(azurite: &Azurite) -> Self {
        Self {
            folder: Folder::Temporary(tempfile::tempdir().expect("tempdir")),
            connection_string: azurite.connection_string(),
            container: "tests".into(),
            blob: format!("group-{}", fastrand::u32(..)),
        }
    }

    /// A group on the Azurite that the tests of this process share ([`Azurite::shared`]): what
    /// most tests start with.
    pub fn shared() -> Self {
        Self::new(Azurite::shared())
    }

    /// A group on a new Azurite of its own: for tests that stop, freeze or restart storage.
    pub fn on_new_azurite() -> (Azurite, Self) {
        let azurite = Azurite::start();
        let group = Self::new(&azurite);
        (azurite, group)
    }

    /// A group on `container`/`blob` whose files stay in `dir` (created if missing).
    pub fn in_folder(azurite: &Azurite, dir: &Path, container: &str, blob: &str) -> Self {
        fs::create_dir_all(dir).expect("group folder");
        Self {
            folder: Folder::Kept(dir.to_owned()),
            connection_string: azurite.connection_string(),
            container: container.into(),
            blob: blob.into(),
        }
    }

    pub fn dir(&self) -> &Path {
        match &self.folder {
            Folder::Temporary(dir) => dir.path(),
            Folder::Kept(dir) => dir,
        }
    }

    /// Keeps the group's files after the group is gone; where they are.
    pub fn keep(self) -> PathBuf {
        match self.folder {
            Folder::Temporary(dir) => dir.keep(),
            Folder::Kept(dir) => dir,
        }
    }

    pub fn history_path(&self) -> PathBuf {
        self.dir().join("history")
    }

    pub fn lock_path(&self) -> PathBuf {
        self.dir().join("witness.lock")
    }

    /// The witness as a TOML array, with extra witness options: it records into the group's
    /// history and holds the group's lock.
    pub fn witness(&self, options: &[&str]) -> String {
        self.witness_locking(&self.lock_path(), options)
    }

    /// The witness as the arguments of a command line (after `--`), as [`Group::witness`].
    pub fn witness_argv(&self, options: &[&str]) -> Vec<String> {
        self.witness_argv_locking(&self.lock_path(), options)
    }

    fn witness_argv_locking(&self, lock: &Path, options: &[&str]) -> Vec<String> {
        let mut argv = vec![
            witness_bin().display().to_string(),
            "--history".into(),
            self.history_path().display().to_string(),
            "--lock".into(),
            lock.display().to_string(),
        ];
        argv.extend(options.iter().map(|s| s.to_string()));
        argv
    }

    /// Like [`Group::witness`], holding the lock `lock` instead of the group's (children that
    /// must be able to run side by side).
    pub fn witness_locking(&self, lock: &Path, options: &[&str]) -> String {
        let parts = self.witness_argv_locking(lock, options);
        format!(
            "[{}]",
            parts
                .iter()
                .map(|p| format!("{p:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    /// A `[child]` body: the witness with `options` as the command, then `lines`.
    pub fn witness_child(&self, options: &[&str], lines: &str) -> String {
        format!("command = {}\n{lines}\n", self.witness(options))
    }

    /// Writes a config for `identity`: `lease` is the body of the `[lease]` table, `child` the
    /// body of `[child]` (the witness is the command unless `child` names one; stop_timeout is 2 s
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
        let storage = format!("connection_string = {connection_string:?}\n");
        self.write_config(identity, &storage, "", lease, child)
    }

    /// A daemon's config: `storage` the lines of `[storage]` besides the container and blob,
    /// `replicas` the `[[storage.replica]]` tables.
    fn write_config(
        &self,
        identity: &str,
        storage: &str,
        replicas: &str,
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
            "identity = {identity:?}\n\n[storage]\n{storage}container = {:?}\nblob = {:?}\n\n\
             {replicas}[lease]\n{lease}\n\n[child]\n{child_table}\n",
            self.container, self.blob
        );
        let path = self.dir().join(format!("{identity}.toml"));
        fs::write(&path, text).expect("write config");
        path
    }

    /// Like [`Group::config`], on a majority of accounts (docs/quorum.md): one
    /// `[[storage.replica]]` table for each of `connection_strings`, in that order (each a
    /// [`FaultProxy`]'s in front of an Azurite of its own, for a region that can go down).
    pub fn config_on_replicas(
        &self,
        identity: &str,
        connection_strings: &[String],
        lease: &str,
        child: &str,
    ) -> PathBuf {
        let replicas: String = (connection_strings.iter())
            .map(|c| format!("[[storage.replica]]\nconnection_string = {c:?}\n\n"))
            .collect();
        self.write_config(identity, "", &replicas, lease, child)
    }

    /// A daemon for `identity` with the config [`Group::config`] writes, to be set up further.
    pub fn launch(&self, identity: &str, lease: &str, child: &str) -> Launch {
        Daemon::launch(&self.config(identity, lease, child), identity)
    }

    pub fn start(&self, identity: &str, lease: &str, child: &str) -> Daemon {
        self.launch(identity, lease, child).spawn()
    }

    /// Starts a daemon that logs its kill deadlines (for the checker), reaching storage
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
        Daemon::launch(&config, identity).deadline_log().spawn()
    }

    /// The fault suite's usual start: `a` leads (through `proxy` when given, with `child` as its
    /// `[child]` lines), then `b` follows; both log their kill deadlines. Returns `a`, its first
    /// child's start, and `b`.
    pub fn leader_and_follower(
        &self,
        proxy: Option<&FaultProxy>,
        lease: &str,
        child: &str,
    ) -> (Daemon, Event, Daemon) {
        let a = self.start_watched("a", proxy, lease, child);
        let first = self
            .wait_first_start(Duration::from_secs(15))
            .unwrap_or_else(|| panic!("a did not lead:\n{}", a.log()));
        let b = self.start_watched("b", None, lease, "");
        b.assert_follows(Duration::from_secs(10));
        (a, first, b)
    }

    pub fn history(&self) -> History {
        History::read(&self.history_path())
    }

    /// The checker's verdict on the group's history, each child held to the deadlines its
    /// daemon logged.
    pub fn verdict(&self, daemons: &[&Daemon]) -> Verdict {
        let judge = || {
            let deadlines: Deadlines = daemons.iter().map(|d| d.deadlines()).collect();
            check(&self.history(), &deadlines)
        };
        // A daemon logs a term's deadline before it starts the child, but its log reaches us
        // through a pipe, a moment after the child's own start line: a child just started may
        // be judged before its daemon's line is read. Up to 2 s for it.
        wait_until_some(Duration::from_secs(2), || {
            let verdict = judge();
            verdict.undated.is_empty().then_some(verdict)
        })
        .unwrap_or_else(judge)
    }

    /// Prints the checker's verdict on the group's history (each child held to its daemon's
    /// deadlines), asserts that it is safe, and returns it.
    pub fn assert_safe(&self, daemons: &[&Daemon]) -> Verdict {
        let verdict = self.verdict(daemons);
        eprintln!("{verdict}");
        verdict.assert_safe();
        verdict
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

    /// The group's first child, once it started.
    pub fn wait_first_start(&self, timeout: Duration) -> Option<Event> {
        self.wait_nth_start(1, timeout)
    }

    /// The group's `n`th child (from 1), once it started.
    pub fn wait_nth_start(&self, n: usize, timeout: Duration) -> Option<Event> {
        wait_until_some(timeout, || {
            self.history().starts().get(n - 1).map(|e| (*e).clone())
        })
    }

    /// The first child `identity` started, once it did.
    pub fn wait_start_of(&self, identity: &str, timeout: Duration) -> Option<Event> {
        wait_until_some(timeout, || self.history().first_start_of(identity))
    }

    /// The first child started after `after` (CLOCK_MONOTONIC) by any daemon but `not_by`.
    pub fn wait_start_after(
        &self,
        after: Duration,
        not_by: Option<&str>,
        timeout: Duration,
    ) -> Option<Event> {
        wait_until_some(timeout, || {
            self.history()
                .events
                .into_iter()
                .find(|e| e.kind == "start" && e.t > after && Some(e.identity.as_str()) != not_by)
        })
    }

    /// Member `identity` of the group (docs/succession.md), to be set up and then started with
    /// [`Member::launch`] or [`Member::join`]: the group's defaults, an `[election]` table, and its
    /// kill deadlines logged for the checker.
    pub fn member(&self, identity: &str) -> Member<'_> {
        Member {
            group: self,
            identity: identity.to_owned(),
            lease: String::new(),
            child: String::new(),
            election: String::new(),
            proxy: None,
            advertised: false,
            served: false,
            address: None,
        }
    }

    /// Waits until a listing of the member records shows `identity` alive (what a leader sees
    /// of it). False if it never did within `timeout`.
    pub fn wait_member(&self, identity: &str, timeout: Duration) -> bool {
        let admin = self.admin();
        wait_until(timeout, || {
            admin
                .member_records()
                .is_ok_and(|records| records.iter().any(|r| r.identity == identity && r.alive))
        })
    }

    /// The identities of the live member records, as storage lists them, sorted.
    pub fn live_members(&self) -> Vec<String> {
        let mut alive: Vec<String> = self
            .admin()
            .member_records()
            .expect("list the member records")
            .into_iter()
            .filter(|r| r.alive)
            .map(|r| r.identity)
            .collect();
        alive.sort();
        alive
    }

    /// The group's blob, as an operator reaches it.
    pub fn admin(&self) -> BlobAdmin {
        BlobAdmin::new(&self.connection_string, &self.container, &self.blob)
    }

    /// Whether nobody holds the group's lease (see [`BlobAdmin::lease_is_free`]).
    pub fn lease_is_free(&self) -> bool {
        self.admin().lease_is_free()
    }
}

/// A member of a group's line of succession, as [`Group::member`] sets it up.
#[must_use]
pub struct Member<'g> {
    group: &'g Group,
    identity: String,
    /// The body of its `[lease]` table.
    lease: String,
    /// Its `[child]` lines (the witness unless they name a command).
    child: String,
    /// The body of its `[election]` table.
    election: String,
    /// Reaches storage through this connection string (a proxy's).
    proxy: Option<String>,
    /// Serves its HTTP endpoint and advertises it for wake-ups.
    advertised: bool,
    /// Serves its HTTP endpoint; the config does not name `advertise` (so "auto").
    served: bool,
    /// The address it serves and advertises (else a free one).
    address: Option<String>,
}

impl Member<'_> {
    /// A line of its `[election]` table (`priority = 10`, `preempt_after = "4s"`, ...).
    pub fn election(mut self, line: &str) -> Self {
        self.election.push_str(line);
        self.election.push('\n');
        self
    }

    /// `[election].priority`.
    pub fn priority(self, priority: i64) -> Self {
        self.election(&format!("priority = {priority}"))
    }

    /// Its `[child]` lines.
    pub fn child(mut self, lines: &str) -> Self {
        self.child.push_str(lines);
        self.child.push('\n');
        self
    }

    /// The body of its `[lease]` table.
    pub fn lease(mut self, lines: &str) -> Self {
        self.lease.push_str(lines);
        self.lease.push('\n');
        self
    }

    /// Reaches storage through `proxy`.
    pub fn via(mut self, proxy: &FaultProxy) -> Self {
        self.proxy = Some(proxy.connection_string());
        self
    }

    /// Serves its HTTP endpoint on a free loopback address and advertises it there
    /// (`[election].advertise`), so that a leader handing it the lease wakes it up.
    pub fn advertised(mut self) -> Self {
        self.advertised = true;
        self
    }

    /// Serves its HTTP endpoint on `addr` (`127.0.0.1:port`, one a daemon of this identity
    /// served before it: a restart on the same address) and advertises it for wake-ups.
    pub fn advertised_on(mut self, addr: &str) -> Self {
        self.advertised = true;
        self.address = Some(addr.to_owned());
        self
    }

    /// Serves its HTTP endpoint on a free loopback address, and its config says nothing of
    /// `advertise`: the daemon advertises what it picks (`advertise = "auto"`).
    pub fn served(mut self) -> Self {
        self.served = true;
        self
    }

    /// Starts it; does not wait for it to join the line.
    pub fn launch(self) -> Daemon {
        let addr = match self.address {
            Some(addr) => Some(addr),
            None => self.advertised.then(crate::http::free_addr),
        };
        let mut election = self.election;
        if let Some(addr) = &addr {
            election.push_str(&format!("advertise = \"http://{addr}\"\n"));
        }
        let child = format!("{}\n[election]\n{election}", self.child);
        let connection_string = self
            .proxy
            .unwrap_or_else(|| self.group.connection_string.clone());
        let config = self
            .group
            .config_via(&self.identity, &connection_string, &self.lease, &child);
        let launch = Daemon::launch(&config, &self.identity).deadline_log();
        match &addr {
            Some(addr) => launch.http_on(addr).spawn(),
            None if self.served => launch.http().spawn(),
            None => launch.spawn(),
        }
    }

    /// Starts it and returns once it says it joined the line of members; panics with its log
    /// if it does not within 15 s.
    pub fn join(self) -> Daemon {
        let daemon = self.launch();
        daemon.assert_joined(Duration::from_secs(15));
        daemon
    }
}
