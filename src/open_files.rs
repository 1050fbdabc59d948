//! The daemon's budget of open files (RLIMIT_NOFILE): what the HTTP endpoint may take, what is
//! kept for storage, the child and its guard, and what the programs the daemon starts inherit.
//!
//! * At start-up the soft limit is raised to the hard one, as Go's runtime does: systemd's
//!   default is a soft limit of 1024 under a much higher hard limit, and the soft limit exists
//!   only for programs that still use `select()`.
//! * Every program the daemon starts (the child, its guard, health check commands) gets the
//!   inherited soft limit back, so the child sees the limit it was configured with.
//! * The HTTP endpoint serves at most [`MAX_HTTP_CONNECTIONS`] connections, fewer when the limit
//!   leaves less than that beside [`RESERVE`] and the files already open.
//! * A follower campaigns only with [`TERM_HEADROOM`] files free: winning the lease spends an
//!   epoch, and a term whose child cannot be started would spend it for nothing.

use rlimit::Resource;
use std::sync::OnceLock;

/// Files the HTTP endpoint never takes: storage connections (a renew, a retry on a new
/// connection, Entra ID token requests), the child and its guard (pipes, `/dev/null`, pidfds),
/// health checks, and the logs.
pub const RESERVE: u64 = 64;

/// At most this many HTTP connections are open at once. Probes and scrapes make one short
/// request per connection; more than this at once is a flood.
pub const MAX_HTTP_CONNECTIONS: usize = 128;

/// Free files needed to campaign: a term starts the child and its guard (a few pipes and
/// descriptors each, briefly more while forking), health checks, and renews.
pub const TERM_HEADROOM: u64 = 32;

/// The soft limit the daemon was started with, recorded once, when [`raise_limit`] changed it:
/// a fact of the process from then on, which every program it starts reads (between fork and
/// exec too, where a read of it is a plain load).
static INHERITED_SOFT: OnceLock<u64> = OnceLock::new();

/// What [`raise_limit`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raised {
    /// The soft limit the daemon was started with; its children get it back.
    pub inherited: u64,
    /// The soft limit now (the hard limit).
    pub now: u64,
}

/// Raises the soft open-file limit to the hard limit (`rlimit`'s `increase_nofile_limit`,
/// which also respects the kernel's per-process maximum where there is one), and remembers the
/// inherited one for the programs the daemon starts. Call once, at start-up, before anything
/// is started.
pub fn raise_limit() -> std::io::Result<Raised> {
    let (soft, _) = Resource::NOFILE.get()?;
    let now = rlimit::increase_nofile_limit(u64::MAX)?;
    if now > soft {
        // Raised once: a second call finds the soft limit already at the hard one.
        let _ = INHERITED_SOFT.set(soft);
    }
    Ok(Raised {
        inherited: soft,
        now: now.max(soft),
    })
}

/// Gives a program about to be executed the soft limit the daemon inherited. Runs between fork
/// and exec: only a load (a set `OnceLock` is read without a lock) and `getrlimit`/`setrlimit`
/// (rlimit's thin wrappers over the system calls, which are async-signal-safe and allocate
/// nothing on Linux).
pub fn restore_inherited_limit() -> std::io::Result<()> {
    let Some(soft) = inherited_soft_limit() else {
        return Ok(());
    };
    let (_, hard) = rlimit::getrlimit(Resource::NOFILE)?;
    rlimit::setrlimit(Resource::NOFILE, soft, hard)
}

/// The soft limit the daemon was started with, if [`raise_limit`] changed it: what a program
/// the daemon starts gets back.
pub fn inherited_soft_limit() -> Option<u64> {
    INHERITED_SOFT.get().copied()
}

/// The current soft limit.
pub fn limit() -> u64 {
    Resource::NOFILE.get().map_or(u64::MAX, |(soft, _)| soft)
}

/// Files open in this process now, from `/proc/self/fd` (not counting the directory handle that
/// reading it takes); None where that cannot be read.
pub fn in_use() -> Option<u64> {
    let entries = std::fs::read_dir("/proc/self/fd").ok()?;
    Some((entries.count() as u64).saturating_sub(1))
}

/// How many HTTP connections may be open at once, given the limit and the files open now.
pub fn http_connection_cap() -> usize {
    cap_for(limit(), in_use().unwrap_or(0))
}

/// What the limit leaves beside the files in use and the reserve; at least one connection, so
/// that probes are still answered one at a time (each new connection closes the oldest).
fn cap_for(limit: u64, in_use: u64) -> usize {
    let free = limit.saturating_sub(in_use + RESERVE);
    usize::try_from(free)
        .unwrap_or(usize::MAX)
        .clamp(1, MAX_HTTP_CONNECTIONS)
}

/// Files that are in use, and the limit, when fewer than [`TERM_HEADROOM`] are free.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shortage {
    pub in_use: u64,
    pub limit: u64,
}

/// Whether a term could start its child now: `Err` when fewer than [`TERM_HEADROOM`] files are
/// free. Where `/proc/self/fd` cannot be read, there is no telling, and a term may start.
pub fn room_for_a_term() -> Result<(), Shortage> {
    let limit = limit();
    match in_use() {
        Some(in_use) if in_use + TERM_HEADROOM > limit => Err(Shortage { in_use, limit }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_http_cap_leaves_the_reserve_free() {
        // systemd's default soft limit, a raised one, a tight one, and one below the reserve.
        assert_eq!(cap_for(1024, 20), MAX_HTTP_CONNECTIONS);
        assert_eq!(cap_for(524_288, 20), MAX_HTTP_CONNECTIONS);
        assert_eq!(cap_for(150, 20), 66);
        assert_eq!(cap_for(64, 20), 1);
    }

    /// The shipped systemd unit (deploy/systemd/leasehold.service): the child keeps systemd's
    /// soft default, and the hard limit (which leasehold raises its own soft limit to) holds
    /// the HTTP cap, the reserve and the headroom to campaign with room to spare, on every
    /// systemd version.
    #[test]
    fn the_shipped_systemd_unit_leaves_room_for_the_http_cap_and_the_reserve() {
        let unit = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/deploy/systemd/leasehold.service"
        ))
        .unwrap();
        let (soft, hard) = unit
            .lines()
            .find_map(|l| l.strip_prefix("LimitNOFILE="))
            .and_then(|v| v.trim().split_once(':'))
            .map(|(s, h)| (s.parse::<u64>().unwrap(), h.parse::<u64>().unwrap()))
            .expect("LimitNOFILE=SOFT:HARD");
        assert!(soft >= 1024, "LimitNOFILE soft {soft}");
        assert!(
            hard >= 4 * (MAX_HTTP_CONNECTIONS as u64 + RESERVE + TERM_HEADROOM),
            "LimitNOFILE hard {hard}"
        );
    }

    #[test]
    fn this_process_counts_its_open_files() {
        // stdin, stdout and stderr at least, and not the handle reading /proc/self/fd.
        let n = in_use().expect("/proc/self/fd");
        assert!((3..limit()).contains(&n), "{n}");
    }
}
