//! Clocks and waiting: the CLOCK_MONOTONIC that the witness and the daemon's deadline lines are
//! written on, polling with a deadline, the witness lock's verdict on when the last child died,
//! and Ctrl-C for the programs built on the kit (every wait notices it).

use nix::sys::signal::{SigHandler, Signal, signal};
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGINT or SIGTERM once [`catch_interrupts`] was called.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Whether waits unwind once interrupted (see [`finish_in_order`]).
static UNWIND: AtomicBool = AtomicBool::new(true);

/// Whether [`catch_interrupts`] was called: this program stops what it started itself.
static CAUGHT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_interrupt(_: i32) {
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// For the programs on the kit (the demo, the chaos command, the benchmark): SIGINT and SIGTERM
/// no longer end the process at once but set a flag, which every wait of the kit checks: it
/// panics with "interrupted", so that the thread unwinds and the drop guards stop every process
/// the program started (daemons, Azurite). Such panics print one line, not a backtrace.
pub fn catch_interrupts(program: &'static str) {
    CAUGHT.store(true, Ordering::SeqCst);
    // SAFETY: the handler only stores to an atomic.
    unsafe {
        signal(Signal::SIGINT, SigHandler::Handler(on_interrupt)).expect("SIGINT handler");
        signal(Signal::SIGTERM, SigHandler::Handler(on_interrupt)).expect("SIGTERM handler");
    }
    static REPORTED: AtomicBool = AtomicBool::new(false);
    let report_panic = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !interrupted() {
            report_panic(info);
        } else if !REPORTED.swap(true, Ordering::SeqCst) {
            eprintln!("{program}: interrupted; stopping everything it started");
        }
    }));
}

/// Whether this program stops what it started itself, once interrupted ([`catch_interrupts`]):
/// then what it starts goes into process groups of its own, out of reach of the Ctrl-C that a
/// terminal sends to its whole foreground group (a daemon stopped in order still needs storage).
pub(crate) fn stops_its_own() -> bool {
    CAUGHT.load(Ordering::SeqCst)
}

/// Whether SIGINT or SIGTERM came (see [`catch_interrupts`]).
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// For a program that, once interrupted, stops what it started in order (the demo stops its
/// daemons with SIGTERM and waits for them): the kit's waits no longer unwind.
pub fn finish_in_order() {
    UNWIND.store(false, Ordering::SeqCst);
}

/// Unwinds (panics) once interrupted, unless the program is [`finish_in_order`]ing: for loops
/// of a program's own.
pub fn check_interrupted() {
    if interrupted() && UNWIND.load(Ordering::SeqCst) {
        panic!("interrupted");
    }
}

/// Sleeps for `d`, noticing an interrupt within 50 ms.
pub fn pause(d: Duration) {
    let until = Instant::now() + d;
    loop {
        check_interrupted();
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return;
        }
        std::thread::sleep(left.min(Duration::from_millis(50)));
    }
}

/// CLOCK_MONOTONIC, the clock the witness writes its history with and the daemon logs its kill
/// deadlines on: comparable across processes.
pub fn mono_now() -> Duration {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("clock");
    Duration::new(t.tv_sec() as u64, t.tv_nsec() as u32)
}

/// `n` seconds: the unit bounds and timeouts are written in.
pub const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A measured figure as tests print it next to its bound: `1.234s`, `12.000ms`.
pub fn figure(d: Duration) -> String {
    format!("{d:.3?}")
}

/// Polls `cond` every 10 ms until it holds or `timeout` passes; whether it held.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    wait_until_some(timeout, || cond().then_some(())).is_some()
}

/// Polls `f` every 10 ms until it yields a value or `timeout` passes.
pub fn wait_until_some<T>(timeout: Duration, f: impl FnMut() -> Option<T>) -> Option<T> {
    poll(timeout, Duration::from_millis(10), f)
}

/// Polls `f` every `every` until it yields a value or `timeout` passes.
pub fn poll<T>(timeout: Duration, every: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + timeout;
    loop {
        check_interrupted();
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(every.min(deadline.saturating_duration_since(Instant::now())));
    }
}

/// Blocks until the witness lock is free (every witness process and its descendants are dead),
/// up to `timeout`; returns the CLOCK_MONOTONIC instant it became free. Releases it at once.
pub fn lock_freed(lock: &Path, timeout: Duration) -> Option<Duration> {
    let file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(lock)
        .ok()?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Ok(held) = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive) {
            let at = mono_now();
            drop(held);
            let _ = tx.send(at);
        }
    });
    rx.recv_timeout(timeout).ok()
}
