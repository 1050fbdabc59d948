//! What /proc tells of the processes under test: process groups and guards, resident memory,
//! CPU time, and the TCP connections a daemon keeps to storage.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
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
    fn read(pid: u32) -> Option<Self> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the parenthesised command: state ppid pgrp ...
        let fields: Vec<&str> = stat.rsplit_once(") ")?.1.split_whitespace().collect();
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        Some(Self {
            pid,
            state: fields.first()?.to_string(),
            ppid: fields.get(1)?.parse().ok()?,
            pgrp: fields.get(2)?.parse().ok()?,
            args: cmdline
                .split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect(),
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
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_string_lossy().parse::<u32>().ok())
        .filter_map(Process::read)
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

/// A `Name: value kB` field of a /proc text file.
fn kib_field(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Resident memory from `/proc/PID/status`: now and the peak (`VmHWM`), in KiB.
pub fn memory_kib(pid: u32) -> Option<(u64, u64)> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    Some((kib_field(&status, "VmRSS")?, kib_field(&status, "VmHWM")?))
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
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rollup = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    Some(MemoryDetail {
        anon_kib: kib_field(&status, "RssAnon")?,
        file_kib: kib_field(&status, "RssFile")?,
        pss_kib: kib_field(&rollup, "Pss")?,
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
