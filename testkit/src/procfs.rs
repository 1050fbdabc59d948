//! What /proc tells of the processes under test: process groups and guards, resident memory,
//! CPU time, and the TCP connections a daemon keeps to storage. The `procfs` crate reads and
//! parses /proc; this module keeps only what the tests ask of it.

use procfs::process::{FDTarget, Process as Proc};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// One process, as /proc shows it.
#[derive(Debug, Clone)]
pub struct Process {
    pub pid: u32,
    pub ppid: u32,
    /// Its process group.
    pub pgrp: u32,
    /// `R`, `S`, `Z` (a zombie), `X` (dead)...
    pub state: String,
    pub args: Vec<String>,
}

impl Process {
    fn read(process: &Proc) -> Option<Self> {
        let stat = process.stat().ok()?;
        Some(Self {
            pid: u32::try_from(stat.pid).ok()?,
            state: stat.state.to_string(),
            ppid: u32::try_from(stat.ppid).ok()?,
            pgrp: u32::try_from(stat.pgrp).ok()?,
            args: process.cmdline().unwrap_or_default(),
        })
    }

    /// Dead, or a zombie that only waits to be reaped.
    pub fn is_gone(&self) -> bool {
        matches!(self.state.as_str(), "Z" | "X")
    }

    /// A guard process: `leasehold __guard CHILD_PID`.
    fn guards(&self) -> Option<u32> {
        let at = self.args.iter().position(|a| a == "__guard")?;
        self.args.get(at + 1)?.parse().ok()
    }
}

/// Every process on the machine that can be read.
pub fn processes() -> Vec<Process> {
    procfs::process::all_processes()
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|p| Process::read(&p))
        .collect()
}

/// The living processes of process group `pgid`.
pub fn group_members(pgid: u32) -> Vec<u32> {
    processes()
        .into_iter()
        .filter(|p| p.pgrp == pgid && !p.is_gone())
        .map(|p| p.pid)
        .collect()
}

/// The guard process guarding the child `child` (a child's group is its pid), if any.
pub fn guard_of(child: u32) -> Option<u32> {
    processes()
        .into_iter()
        .find(|p| p.guards() == Some(child))
        .map(|p| p.pid)
}

/// The guard process the daemon `daemon` started for its child, if any.
pub fn guard_started_by(daemon: u32) -> Option<u32> {
    processes()
        .into_iter()
        .find(|p| p.ppid == daemon && p.guards().is_some())
        .map(|p| p.pid)
}

fn process(pid: u32) -> Option<Proc> {
    Proc::new(i32::try_from(pid).ok()?).ok()
}

/// Resident memory from `/proc/PID/status`: now and the peak (`VmHWM`), in KiB.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = process(pid)?.status().ok()?;
    Some((status.vmrss?, status.vmhwm?))
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
    let process = process(pid)?;
    let status = process.status().ok()?;
    let rollup = process.smaps_rollup().ok()?;
    // smaps_rollup has one entry; procfs gives its sizes in bytes.
    let pss_bytes = rollup
        .memory_map_rollup
        .0
        .first()?
        .extension
        .map
        .get("Pss")
        .copied()?;
    Some(MemoryDetail {
        anon_kib: status.rssanon?,
        file_kib: status.rssfile?,
        pss_kib: pss_bytes / 1024,
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
        let process = process(pid)?;
        let stat = process.stat().ok()?;
        let ticks = stat.utime + stat.stime;
        let tick_ns = 1_000_000_000 / procfs::ticks_per_second();
        let threads = process
            .tasks()
            .ok()?
            .flatten()
            .filter_map(|task| {
                let ns = task.schedstat().ok()?.sum_exec_runtime;
                Some((u32::try_from(task.tid).ok()?, ns))
            })
            .collect();
        Some(Self {
            ticks_ns: ticks * tick_ns,
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

/// The established TCP connections of `pid` whose ends `keep` takes (its local port, the remote
/// port), by their inodes.
fn connections(pid: u32, keep: impl Fn(u16, u16) -> bool) -> BTreeSet<u64> {
    let Some(process) = process(pid) else {
        return BTreeSet::new();
    };
    let sockets: BTreeSet<u64> = process
        .fd()
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|fd| match fd.target {
            FDTarget::Socket(inode) => Some(inode),
            _ => None,
        })
        .collect();
    // The process's own network namespace: /proc/PID/net/tcp and tcp6.
    [process.tcp(), process.tcp6()]
        .into_iter()
        .flatten()
        .flatten()
        .filter(|entry| {
            keep(entry.local_address.port(), entry.remote_address.port())
                && entry.state == procfs::net::TcpState::Established
                && sockets.contains(&entry.inode)
        })
        .map(|entry| entry.inode)
        .collect()
}

/// The inodes of the established TCP connections from `pid` to `port` on loopback.
pub fn storage_connections(pid: u32, port: u16) -> BTreeSet<u64> {
    connections(pid, |_, remote| remote == port)
}

/// Which of `pids` holds the established TCP connection from its port `local` to `port` on
/// loopback: a proxy listening on `port` learns its client's process by the peer port.
pub fn connection_owner(pids: &[u32], local: u16, port: u16) -> Option<u32> {
    (pids.iter().copied())
        .find(|&pid| !connections(pid, |l, remote| l == local && remote == port).is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This very process, as the tests read the daemons: its group, its memory, its CPU time,
    /// and a TCP connection it holds to a loopback port.
    #[test]
    fn this_process_reads_as_the_daemons_do() {
        let me = std::process::id();
        let listed = processes()
            .into_iter()
            .find(|p| p.pid == me)
            .expect("listed");
        assert_eq!(listed.pgrp, nix::unistd::getpgrp().as_raw() as u32);
        assert!(!listed.is_gone());
        assert!(
            listed.args[0].contains("leasehold_testkit"),
            "{:?}",
            listed.args
        );
        assert!(group_members(listed.pgrp).contains(&me));

        let (rss, peak) = memory_kib(me).expect("memory");
        assert!(rss > 0 && peak >= rss, "{rss} {peak}");
        let detail = memory_detail(me).expect("detail");
        assert!(detail.pss_kib > 0 && detail.anon_kib > 0, "{detail:?}");

        // Spin until the CPU time read grows by 20 ms (on a loaded machine 30 ms of spinning
        // can get less than 20 ms of CPU), within 10 s of wall time.
        let before = CpuTime::read(me).expect("cpu");
        let spin = std::time::Instant::now();
        let mut used = Duration::ZERO;
        while used < Duration::from_millis(20) && spin.elapsed() < Duration::from_secs(10) {
            let burn = std::time::Instant::now();
            while burn.elapsed() < Duration::from_millis(5) {}
            used = CpuTime::read(me).expect("cpu").since(&before);
        }
        assert!(
            used >= Duration::from_millis(20),
            "{used:?} of CPU time read after spinning {:?}",
            spin.elapsed()
        );

        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let _client = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert_eq!(storage_connections(me, port).len(), 1);
        assert_eq!(connection_owner(&[me], peer.port(), port), Some(me));
    }
}
