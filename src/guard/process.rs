//! The guard's process and the daemon's end of it: the pipe of [`Order`]s, the stop token, the
//! guard's loop on a CLOCK_BOOTTIME timer (the module doc of `crate::guard` says why). The
//! rules it obeys are `crate::guard`'s [`Deadlines`], which the simulator's guard obeys too.

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::Duration;
use tokio::time::Instant;

use super::rules::{Deadlines, Order};

/// The guard's subcommand (kept out of clap: no help page, completion or man page offers it).
pub const SUBCOMMAND: &str = "__guard";

/// The file descriptor the stop token is passed on as.
pub(crate) const TOKEN_FD: i32 = 3;

/// How long one [`Order`] is on the pipe. Writes of at most `PIPE_BUF` bytes are atomic, so
/// the guard reads whole orders.
const ORDER_LEN: usize = 16;

impl Order {
    fn encode(self) -> [u8; ORDER_LEN] {
        let mut bytes = [0; ORDER_LEN];
        bytes[..8].copy_from_slice(&self.kill_at.to_le_bytes());
        bytes[8..].copy_from_slice(&self.stop_begun.to_le_bytes());
        bytes
    }

    fn decode(bytes: &[u8]) -> Self {
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        Self {
            kill_at: word(0),
            stop_begun: word(8),
        }
    }
}

/// CLOCK_BOOTTIME now, in nanoseconds.
fn boottime_now() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_BOOTTIME)
        .map_or(0, |t| Duration::from(t).as_nanos() as u64)
}

/// The instant `at` of the lease clock ([`crate::clock`]) as CLOCK_BOOTTIME nanoseconds: the
/// lease clock is CLOCK_BOOTTIME less a constant, so the distance from now carries over.
fn boottime_of(at: Instant) -> u64 {
    let (lease_now, boot_now) = (crate::clock::now(), boottime_now());
    match at.checked_duration_since(lease_now) {
        Some(ahead) => boot_now.saturating_add(ahead.as_nanos() as u64),
        None => boot_now.saturating_sub((lease_now - at).as_nanos() as u64),
    }
}

/// The token whose holder sends a child its stop signal: one byte in a pipe that nobody
/// writes to again, read without blocking by the daemon and by the guard (the same open pipe,
/// passed on as [`TOKEN_FD`]). Exactly one read gets the byte.
pub(crate) struct StopToken(OwnedFd);

impl StopToken {
    pub fn new() -> io::Result<Self> {
        use nix::fcntl::OFlag;
        let (read, write) = nix::unistd::pipe2(OFlag::O_CLOEXEC | OFlag::O_NONBLOCK)?;
        nix::unistd::write(&write, &[1])?;
        Ok(Self(read))
    }

    /// A copy of the read end for the guard, numbered 10 or more so that placing the guard's
    /// stdin and stdout cannot overwrite it before it is moved to [`TOKEN_FD`].
    pub fn for_guard(&self) -> io::Result<OwnedFd> {
        use std::os::fd::FromRawFd;
        let raw = nix::fcntl::fcntl(&self.0, nix::fcntl::FcntlArg::F_DUPFD_CLOEXEC(10))?;
        // SAFETY: fcntl just made this descriptor, and nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(raw) })
    }

    /// Takes the token: true when the byte was still there (this caller sends the stop).
    pub fn take(&self) -> bool {
        claim(self.0.as_fd())
    }
}

fn claim(fd: BorrowedFd<'_>) -> bool {
    let mut byte = [0u8; 1];
    loop {
        match nix::unistd::read(fd, &mut byte) {
            Ok(n) => return n == 1,
            Err(Errno::EINTR) => continue,
            // Taken (EAGAIN cannot happen once the writer is gone: an empty pipe reads EOF).
            Err(Errno::EAGAIN) => return false,
            // No token was passed: nobody else can send the stop.
            Err(_) => return true,
        }
    }
}

/// Why the guard can no longer be told: the child runs without its deadlines enforced outside
/// the daemon, so the supervisor stops it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuardLost {
    /// The pipe is gone: the guard died (killed by someone, the OOM killer).
    Gone,
    /// The pipe is full: the guard has not read for thousands of orders (it is frozen).
    Deaf,
}

impl std::fmt::Display for GuardLost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Gone => "the child's guard process is gone",
            Self::Deaf => "the child's guard process reads nothing (its pipe is full)",
        })
    }
}

/// The daemon's end of a child's guard: the pipe it writes [`Order`]s to, never waiting.
pub(crate) struct GuardLink {
    orders: OwnedFd,
    /// The last order told, as lease-clock instants (converted anew each time, they would
    /// differ by the nanoseconds between two clock readings).
    told: Option<(Instant, Option<Instant>)>,
    lost: Option<GuardLost>,
}

impl GuardLink {
    /// Over `orders`, the write end of the guard's stdin.
    pub fn new(orders: OwnedFd) -> io::Result<Self> {
        use nix::fcntl::{FcntlArg, OFlag, fcntl};
        let flags = OFlag::from_bits_truncate(fcntl(&orders, FcntlArg::F_GETFL)?);
        fcntl(&orders, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
        Ok(Self {
            orders,
            told: None,
            lost: None,
        })
    }

    /// Tells the guard the group must be dead by `kill_at`, and when the stop began (if it
    /// has), unless that is what it was told last. Never blocks: a guard that cannot be told
    /// is lost for good.
    pub fn tell(&mut self, kill_at: Instant, stop_begun: Option<Instant>) -> Result<(), GuardLost> {
        if let Some(lost) = self.lost {
            return Err(lost);
        }
        if self.told == Some((kill_at, stop_begun)) {
            return Ok(());
        }
        let order = Order {
            kill_at: boottime_of(kill_at),
            stop_begun: stop_begun.map_or(0, |s| boottime_of(s).max(1)),
        };
        let bytes = order.encode();
        let written = loop {
            match nix::unistd::write(&self.orders, &bytes) {
                Err(Errno::EINTR) => continue,
                other => break other,
            }
        };
        match written {
            Ok(ORDER_LEN) => {
                self.told = Some((kill_at, stop_begun));
                Ok(())
            }
            Err(Errno::EAGAIN) => Err(*self.lost.insert(GuardLost::Deaf)),
            // EPIPE (SIGPIPE is ignored), or a short write that cannot happen below PIPE_BUF.
            _ => Err(*self.lost.insert(GuardLost::Gone)),
        }
    }
}

/// `leasehold __guard PGID SIGNAL GRACE_NS KILL_AT_NS`: the guard process (see the module
/// doc). Its stdin is the daemon's pipe of orders, [`TOKEN_FD`] the stop token. Returns an
/// error for bad arguments only; otherwise it runs until the daemon closes the pipe (then it
/// SIGKILLs the group) or kills it.
pub fn run(args: &[String]) -> Result<(), String> {
    let [pgid, signal, grace, kill_at] = args else {
        return Err(format!(
            "usage: leasehold {SUBCOMMAND} PGID SIGNAL GRACE_NS KILL_AT_NS"
        ));
    };
    let number = |s: &str| s.parse::<u64>().map_err(|_| format!("not a number: {s:?}"));
    let pgid = pgid
        .parse::<i32>()
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| format!("not a process group: {pgid:?}"))?;
    let signal = signal
        .parse::<i32>()
        .ok()
        .and_then(|s| Signal::try_from(s).ok())
        .ok_or_else(|| format!("not a signal number: {signal:?}"))?;
    let mut watch = Deadlines::new(number(grace)?, number(kill_at)?);
    guard(Pid::from_raw(pgid), signal, &mut watch);
    Ok(())
}

/// The guard's loop: waits on the pipe and on a CLOCK_BOOTTIME timer (which, unlike a poll
/// timeout, counts a suspend) for whatever comes first.
fn guard(pgid: Pid, signal: Signal, watch: &mut Deadlines) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use nix::sys::time::TimeSpec;
    use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
    // Keystrokes at a terminal signal the foreground group; the guard sits in its own group,
    // and ignores hang-ups so that closing a terminal cannot disarm it.
    // SAFETY: setting a signal to SIG_IGN has no handler to be unsafe about.
    unsafe {
        let ignore = nix::sys::signal::SigHandler::SigIgn;
        let _ = nix::sys::signal::signal(Signal::SIGHUP, ignore);
        let _ = nix::sys::signal::signal(Signal::SIGINT, ignore);
    }
    let kill = || {
        let _ = killpg(pgid, Signal::SIGKILL);
    };
    // SAFETY: the daemon started this process with its order pipe as stdin and the stop
    // token as TOKEN_FD; both stay open for the process's life.
    let (orders, token) = unsafe { (BorrowedFd::borrow_raw(0), BorrowedFd::borrow_raw(TOKEN_FD)) };
    let Ok(timer) = TimerFd::new(
        ClockId::CLOCK_BOOTTIME,
        TimerFlags::TFD_CLOEXEC | TimerFlags::TFD_NONBLOCK,
    ) else {
        // No timer: without it the deadlines cannot be kept; the child must not run.
        kill();
        return;
    };
    let mut buffer = [0u8; ORDER_LEN * 64];
    let mut held = 0;
    loop {
        let due = watch.due(boottime_now());
        if due.stop && claim(token) {
            let _ = killpg(pgid, signal);
        }
        if due.kill {
            kill();
        }
        let armed = match watch.next() {
            // A zero instant would disarm the timer: the earliest there is instead.
            Some(at) => timer.set(
                Expiration::OneShot(TimeSpec::from(Duration::from_nanos(at.max(1)))),
                TimerSetTimeFlags::TFD_TIMER_ABSTIME,
            ),
            None => timer.unset(),
        };
        if armed.is_err() {
            kill();
            return;
        }
        let mut fds = [
            PollFd::new(orders, PollFlags::POLLIN),
            PollFd::new(timer.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => {
                kill();
                return;
            }
        }
        let readable = fds[0].revents().is_some_and(|r| !r.is_empty());
        if fds[1].revents().is_some_and(|r| !r.is_empty()) {
            let _ = nix::unistd::read(timer.as_fd(), &mut [0u8; 8]);
        }
        if !readable {
            continue;
        }
        match nix::unistd::read(orders, &mut buffer[held..]) {
            Err(Errno::EINTR | Errno::EAGAIN) => continue,
            // The daemon is gone, however it died: its child must not outlive it.
            Ok(0) | Err(_) => {
                kill();
                return;
            }
            Ok(n) => held += n,
        }
        let whole = held - held % ORDER_LEN;
        for order in buffer[..whole].chunks_exact(ORDER_LEN) {
            watch.order(Order::decode(order));
        }
        buffer.copy_within(whole..held, 0);
        held -= whole;
    }
}

/// The guard's arguments after [`SUBCOMMAND`]: the group, the stop signal, `G`, and the kill
/// deadline it starts with.
pub(crate) fn args(pgid: Pid, signal: Signal, grace: Duration, kill_at: Instant) -> [String; 4] {
    [
        pgid.as_raw().to_string(),
        (signal as i32).to_string(),
        grace.as_nanos().to_string(),
        boottime_of(kill_at).to_string(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    const S: u64 = 1_000_000_000;

    #[test]
    fn an_order_crosses_the_pipe_whole() {
        let order = Order {
            kill_at: 123 * S + 7,
            stop_begun: u64::MAX,
        };
        assert_eq!(Order::decode(&order.encode()), order);
    }

    #[test]
    fn the_stop_token_goes_to_one_taker() {
        let token = StopToken::new().unwrap();
        let other = token.for_guard().unwrap();
        assert!(token.0.as_raw_fd() != other.as_raw_fd());
        assert!(other.as_raw_fd() >= 10);
        assert!(claim(other.as_fd()), "the first read takes it");
        assert!(!token.take(), "nothing left for the second");
        assert!(!claim(other.as_fd()));
    }
}
