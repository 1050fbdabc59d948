//! The point of comparison: `etcdctl lock NAME -- CHILD` (etcd's own "run this while holding
//! the lock", push-based: each waiter watches the key before its own), handing over the same
//! child the leasehold groups run (the witness, recording into a history and holding a lock
//! file of its own group), timed the same way: from the old child's end (or the signal) to the
//! new child's `start` line.
//!
//! What it does on a stop, read from its source (etcdctl/ctlv3/command/lock_command.go) and
//! measured here: it catches SIGINT and SIGTERM, and the handler only cancels its *wait* for
//! the lock; once its child runs, it waits for the child and neither forwards the signal nor
//! kills it, so a SIGTERM to etcdctl alone leaves the child running and the lock held. Only a
//! signal to the whole process group (a terminal's Ctrl-C, systemd's default
//! `KillMode=control-group`) stops the child; then etcdctl deletes its key and exits. It also
//! exits when its child exits: a waiter runs its child at most once, so the bench starts a new
//! waiter for the one that ended after each trial (it joins the back of the line), as a
//! supervisor restarting it would.

use crate::fleet::Env;
use crate::phases::{Handovers, Trials, random_pause, terminate_child};
use leasehold_testkit::wait::{check_interrupted, poll};
use leasehold_testkit::{Deadlines, Etcd, Group, LockWaiter, check, mono_now};
use nix::sys::signal::Signal;
use std::time::Duration;

/// The waiters of one lock, the child they run and where it records.
struct Line<'a> {
    etcd: &'a Etcd,
    group: Group,
    name: String,
    waiters: Vec<LockWaiter>,
}

impl<'a> Line<'a> {
    /// `n` waiters `<name>-1..n` on lock `name`: the first until its child runs, then the
    /// others, until etcd has all their keys.
    fn start(env: &Env, etcd: &'a Etcd, name: &str, n: usize) -> Self {
        let group = Group::in_folder(env.azurite, &env.work.join(name), "bench", name);
        let mut line = Self {
            etcd,
            group,
            name: name.to_owned(),
            waiters: Vec::new(),
        };
        line.join(&format!("{name}-1"));
        assert!(
            line.group
                .wait_first_start(Duration::from_secs(30))
                .is_some(),
            "the first etcdctl lock did not run its child; see {}",
            line.group.dir().display()
        );
        for i in 2..=n {
            line.join(&format!("{name}-{i}"));
        }
        line
    }

    /// A waiter for `identity` at the back of the line, once etcd has its key.
    fn join(&mut self, identity: &str) {
        let before = self.etcd.lock_keys(&self.name);
        let child = self
            .group
            .witness_argv(&["--beat", "1s", "--die-with-parent"]);
        let log = self.group.dir().join(format!("{identity}.log"));
        self.waiters
            .push(self.etcd.lock(&self.name, identity, &child, &log));
        assert!(
            poll(Duration::from_secs(15), Duration::from_millis(20), || {
                (self.etcd.lock_keys(&self.name) > before).then_some(())
            })
            .is_some(),
            "etcdctl lock for {identity} did not queue; see {}",
            log.display()
        );
    }

    fn index_of(&self, identity: &str) -> usize {
        self.waiters
            .iter()
            .position(|w| w.identity == identity)
            .unwrap_or_else(|| panic!("the leading child belongs to no waiter: {identity}"))
    }

    /// The waiter at `index` ended (or is ending): waits for its exit, and puts a new one for
    /// the same identity at the back of the line.
    fn replace(&mut self, index: usize) {
        let identity = self.waiters[index].identity.clone();
        assert!(
            self.waiters[index]
                .wait_exit(Duration::from_secs(15))
                .is_some(),
            "etcdctl lock for {identity} did not exit after its child did; see {}",
            self.group.dir().display()
        );
        self.waiters.remove(index);
        self.join(&identity);
    }

    fn next_leader(&self) -> Option<leasehold_testkit::Event> {
        random_pause();
        poll(Duration::from_secs(30), Duration::from_millis(20), || {
            self.group.history().current_leader().cloned()
        })
    }

    fn overlaps(&self) -> usize {
        check(&self.group.history(), &Deadlines::default())
            .overlaps
            .len()
    }
}

/// Everything measured of `etcdctl lock`.
#[derive(Debug, Clone, Default)]
pub struct EtcdLock {
    /// `etcd --version`'s first line.
    pub version: String,
    /// SIGTERM to the holding etcdctl's process group -> the next child starts.
    pub graceful: Option<Handovers>,
    /// The child exits -> the next child starts.
    pub voluntary: Option<Handovers>,
    /// SIGTERM to the holding etcdctl alone: per trial, whether its child was still running
    /// (and no other had started) `waited` later.
    pub lone_sigterm: Vec<bool>,
    pub waited: Duration,
}

/// How a trial ends the holder's child, and so where its handover is timed from.
#[derive(Debug, Clone, Copy)]
enum Ending {
    /// SIGTERM to the holding etcdctl's process group; timed from the signal.
    Group,
    /// The child exits by itself (SIGTERM to the child alone, as in leasehold's voluntary
    /// trials); timed from the child's own last line.
    Child,
}

/// A line of `etcdctl lock` waiters handing over their witness, trial by trial: the
/// counterpart of the bench's leasehold groups ([`Trials`]), with which its trials take turns.
pub struct Locking<'a> {
    line: Line<'a>,
    ending: Ending,
}

impl<'a> Locking<'a> {
    /// Graceful handovers: SIGTERM to the holder's process group.
    pub fn graceful(env: &Env, etcd: &'a Etcd, n: usize) -> Self {
        Self {
            line: Line::start(env, etcd, "etcd-graceful", n),
            ending: Ending::Group,
        }
    }

    /// Voluntary handovers: the holder's child exits by itself.
    pub fn voluntary(env: &Env, etcd: &'a Etcd, n: usize) -> Self {
        Self {
            line: Line::start(env, etcd, "etcd-voluntary", n),
            ending: Ending::Child,
        }
    }
}

impl Trials for Locking<'_> {
    /// One handover, ended as `ending` says; the waiter that ended joins the back of the line.
    fn trial(&mut self, out: &mut Handovers) {
        let line = &mut self.line;
        let Some(leader) = line.next_leader() else {
            out.timeouts += 1;
            return;
        };
        let index = line.index_of(&leader.identity);
        let sent = mono_now();
        match self.ending {
            Ending::Group => line.waiters[index].signal_group(Signal::SIGTERM),
            Ending::Child => terminate_child(leader.pid),
        }
        match line
            .group
            .wait_start_after(sent, Some(&leader.identity), Duration::from_secs(15))
        {
            Some(next) => {
                let mark = match self.ending {
                    Ending::Group => sent,
                    Ending::Child => line.group.history().stop_of(leader.pid).unwrap_or(sent),
                };
                out.record(next.t.saturating_sub(mark), &leader.identity, &next, "rev");
            }
            None => out.timeouts += 1,
        }
        line.replace(index);
    }

    fn overlaps(&self) -> usize {
        self.line.overlaps()
    }
}

/// SIGTERM to the holding etcdctl alone, `trials` times: is its child still running, and no
/// other started, `wait` later? Each trial then ends the child itself so the line moves on.
pub fn lone_sigterm(env: &Env, etcd: &Etcd, n: usize, trials: usize, wait: Duration) -> Vec<bool> {
    let mut line = Line::start(env, etcd, "etcd-sigterm", n);
    let mut out = Vec::new();
    for _ in 0..trials {
        check_interrupted();
        let Some(leader) = line.next_leader() else {
            continue;
        };
        let index = line.index_of(&leader.identity);
        let sent = mono_now();
        line.waiters[index].signal(Signal::SIGTERM);
        let moved = line
            .group
            .wait_start_after(sent, Some(&leader.identity), wait)
            .is_some();
        let history = line.group.history();
        let child_ended = history
            .events
            .iter()
            .any(|e| e.pid == leader.pid && (e.kind == "stop" || e.kind == "exit"));
        let etcdctl_alive = !line.waiters[index].has_exited();
        out.push(!moved && !child_ended && etcdctl_alive);
        terminate_child(leader.pid);
        line.replace(index);
    }
    out
}
