//! The witness: a child for leasehold's tests, chaos runs and benchmark (the program is the
//! example `witness`, whose `main` is [`main`]).
//!
//! Run as `[child].command`, it appends one line per event to a shared history file (the format
//! and the events are [`crate::history`]'s). The overlap test is the kernel's:
//! every witness holds an exclusive `flock` on a shared lock file for as long as it *or any
//! process it started* lives (they inherit the descriptor), so a process killed by SIGKILL still
//! releases it at the exact moment of its death.
//!
//! Options: `--history FILE --lock FILE [--beat 100ms] [--exit-after DUR] [--exit-code N]
//! [--grandchild] [--ignore-stop] [--linger DUR] [--serve-health ADDR --stall-file FILE]
//! [--chatter DUR] [--die-with-parent]`.
//! With both `--grandchild` and `--ignore-stop`, the grandchild ignores the stop signal too.
//!
//! `--chatter` writes a line (`witness chatter ...`) to stderr every DUR from a thread of its
//! own, like a service that logs a lot; stderr is its daemon's, so when nobody drains it that
//! thread blocks, and the rest of the witness (beats, the stop signal) carries on.
//!
//! `--die-with-parent` makes it die (SIGKILL) with the process that started it: for a child
//! run by a tool that does not take its child down with it (`etcdctl lock`), so that a killed
//! benchmark leaves no witness behind.
//!
//! Its epoch is `LEASEHOLD_EPOCH`, or else `ETCD_LOCK_REV` (the revision `etcdctl lock` hands its
//! child: it grows with every holder too).
//!
//! `--serve-health` answers `GET` on ADDR with 200, except while FILE exists: then it accepts
//! connections and never answers, like a stalled service.
//!
//! It writes every line with one `write` on an `O_APPEND` file: lines from concurrent witnesses
//! never interleave.

use crate::history::Event;
use crate::wait::mono_now;
use nix::fcntl::{Flock, FlockArg};
use nix::poll::ppoll;
use nix::sys::signal::{SigHandler, SigSet, Signal, signal};
use nix::sys::time::TimeSpec;
use std::fs::OpenOptions;
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Signals received and not yet handled, one bit per signal number.
static PENDING: AtomicU64 = AtomicU64::new(0);

/// The signals the witness records (a stop, or a line for the others).
const HANDLED: [Signal; 6] = [
    Signal::SIGTERM,
    Signal::SIGINT,
    Signal::SIGHUP,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGQUIT,
];

extern "C" fn on_signal(sig: i32) {
    PENDING.fetch_or(1 << sig, Ordering::SeqCst);
}

/// Where and as whom the witness records.
struct Recorder {
    path: String,
    identity: String,
    epoch: u64,
}

impl Recorder {
    fn record(&self, kind: &str, detail: &str) {
        let line = Event {
            t: mono_now(),
            kind: kind.to_owned(),
            identity: self.identity.clone(),
            epoch: self.epoch,
            pid: std::process::id(),
            detail: detail.to_owned(),
        }
        .line();
        if let Ok(mut f) = OpenOptions::new()
            .append(true)
            .create(true)
            .open(&self.path)
        {
            let _ = f.write_all(line.as_bytes());
        }
    }
}

/// The witness program: options from the command line, identity and epoch from leasehold's
/// `LEASEHOLD_IDENTITY` and `LEASEHOLD_EPOCH`.
pub fn main() {
    let mut args = std::env::args().skip(1);
    let mut history = None;
    let mut lock = None;
    let mut beat = Duration::from_millis(100);
    let mut exit_after = None;
    let mut exit_code = 0;
    let mut grandchild = false;
    let mut ignore_stop = false;
    let mut linger = Duration::ZERO;
    let mut serve_health = None;
    let mut stall_file = None;
    let mut chatter = None;
    let mut die_with_parent = false;
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("option needs a value");
        match arg.as_str() {
            "--history" => history = Some(value()),
            "--lock" => lock = Some(value()),
            "--beat" => beat = humantime::parse_duration(&value()).expect("duration"),
            "--exit-after" => {
                exit_after = Some(humantime::parse_duration(&value()).expect("duration"))
            }
            "--exit-code" => exit_code = value().parse().expect("code"),
            "--grandchild" => grandchild = true,
            "--ignore-stop" => ignore_stop = true,
            "--linger" => linger = humantime::parse_duration(&value()).expect("duration"),
            "--serve-health" => serve_health = Some(value()),
            "--stall-file" => stall_file = Some(value()),
            "--chatter" => chatter = Some(humantime::parse_duration(&value()).expect("duration")),
            "--die-with-parent" => die_with_parent = true,
            other => panic!("unknown option {other}"),
        }
    }
    let history = Recorder {
        path: history.expect("--history"),
        identity: std::env::var("LEASEHOLD_IDENTITY").unwrap_or_else(|_| "-".into()),
        epoch: ["LEASEHOLD_EPOCH", "ETCD_LOCK_REV"]
            .iter()
            .find_map(|name| std::env::var(name).ok()?.parse().ok())
            .unwrap_or(0),
    };
    if die_with_parent {
        let parent = nix::unistd::getppid();
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).expect("parent-death signal");
        // The parent may have died before the line above: then nobody will signal us.
        if nix::unistd::getppid() != parent {
            std::process::exit(1);
        }
    }
    let credentials: Vec<String> = std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| k.starts_with("AZURE_STORAGE_"))
        .collect();

    let mut handled = SigSet::empty();
    for sig in HANDLED {
        handled.add(sig);
        // SAFETY: the handler only stores to an atomic.
        unsafe {
            signal(sig, SigHandler::Handler(on_signal)).expect("signal handler");
        }
    }
    // Blocked everywhere but in the loop's wait, before any thread starts (threads inherit the
    // mask): a signal that comes while the loop works stays pending, and the wait, which
    // unblocks them atomically, returns on it at once. (`thread::sleep` resumes after a
    // signal, so a stop waited out the rest of its 10 ms: 0 to 10 ms added to every stop.)
    handled.thread_block().expect("block the handled signals");

    let lock_file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock.expect("--lock"))
        .expect("lock file");
    let _held = match Flock::lock(lock_file, FlockArg::LockExclusiveNonblock) {
        Ok(held) => held,
        Err((file, _)) => {
            history.record("overlap", "another witness is alive");
            Flock::lock(file, FlockArg::LockExclusive)
                .map_err(|(_, e)| e)
                .expect("flock")
        }
    };
    history.record(
        "start",
        &format!("env_credentials={}", credentials.join(",")),
    );

    if grandchild {
        // Inherits the locked descriptor: the lock is free only once this process is gone too.
        let mut sleeper = std::process::Command::new("sleep");
        sleeper.arg("1000");
        if ignore_stop {
            use std::os::unix::process::CommandExt;
            // A stubborn grandchild too: only SIGKILL of the group takes it down.
            // SAFETY: between fork and exec, only signal(2), which is async-signal-safe.
            unsafe {
                sleeper.pre_exec(|| {
                    for sig in [Signal::SIGTERM, Signal::SIGINT] {
                        let _ = signal(sig, SigHandler::SigIgn);
                    }
                    Ok(())
                });
            }
        }
        let _ = sleeper.spawn();
    }

    if let Some(addr) = serve_health {
        serve(addr, stall_file);
    }
    if let Some(every) = chatter {
        std::thread::spawn(move || {
            let line = format!(
                "witness chatter pid {} {}\n",
                std::process::id(),
                "x".repeat(60)
            );
            loop {
                let _ = std::io::stderr().write_all(line.as_bytes());
                std::thread::sleep(every);
            }
        });
    }

    let started = Instant::now();
    let mut last_beat: Option<Instant> = None;
    loop {
        let pending = PENDING.swap(0, Ordering::SeqCst);
        for sig in (1..64).filter(|n| pending & (1 << n) != 0) {
            let name = Signal::try_from(sig).map(|s| s.as_str()).unwrap_or("?");
            match Signal::try_from(sig) {
                Ok(Signal::SIGHUP | Signal::SIGUSR1 | Signal::SIGUSR2) => {
                    history.record("signal", name);
                }
                _ if ignore_stop => history.record("signal", name),
                _ => {
                    if !linger.is_zero() {
                        std::thread::sleep(linger);
                    }
                    history.record("stop", name);
                    std::process::exit(0);
                }
            }
        }
        if let Some(after) = exit_after
            && started.elapsed() >= after
        {
            history.record("exit", &exit_code.to_string());
            std::process::exit(exit_code);
        }
        if last_beat.is_none_or(|t| t.elapsed() >= beat) {
            history.record("beat", "");
            last_beat = Some(Instant::now());
        }
        // The only place the handled signals are let in: a stop is handled at once.
        let _ = ppoll(
            &mut [],
            Some(TimeSpec::from_duration(Duration::from_millis(10))),
            Some(SigSet::empty()),
        );
    }
}

/// A health endpoint in a thread of its own: 200 for every request, unless `stall_file`
/// exists; then the request is held, unanswered.
fn serve(addr: String, stall_file: Option<String>) {
    let listener = std::net::TcpListener::bind(&addr).expect("health address");
    let answer = move || {
        let stalled = stall_file
            .as_deref()
            .is_some_and(|f| std::path::Path::new(f).exists());
        async move {
            if stalled {
                std::future::pending::<()>().await;
            }
            "ok\n"
        }
    };
    crate::http::serve_in_background(listener, axum::Router::new().fallback(answer));
}
