//! The world's own random draws, apart from the protocol's: what the director does, how each
//! member's network and each body behave come from streams of their own, each seeded from the
//! history's seed and its name, while the elector draws its jitter, lease ids and wake tokens
//! from the thread's generator. So a change in how often the elector draws leaves the world's
//! faults where they were, and a scripted schedule's faults never depend on the protocol's
//! draws at all.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One stream of the world's draws: its generator's whole state, one word. A history runs on
/// one thread, so its draws never overlap: the word is loaded and stored, as an atomic only so
/// that the tokio engine's tasks may share the stream, rather than locked at every draw (the
/// synchronous engine draws several times per event).
pub(crate) struct Dice(AtomicU64);

/// The streams, by what draws from them.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Stream {
    /// The director: which fault, to whom, when.
    Director,
    /// A member's network, for one start of it.
    Network(usize, u64),
    /// A member's bodies, for one start of it.
    Bodies(usize, u64),
    /// A member's wake-ups as they travel.
    Wakes(usize),
    /// Forgers and wake-up storms.
    Mischief,
    /// What each member runs on: a daemon with guards or the library; a freeze of the daemon
    /// alone or a pause of its whole machine.
    Hosts,
    /// Broken deploys: when, whose, for how long.
    Deploys,
    /// The group's birth: whether its blobs exist before its first member.
    Birth,
    /// A replica set's regions: its size, their links, their faults (src/sim/sync/replicas.rs).
    Replicas,
}

/// splitmix64: spreads nearby seeds far apart.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

impl Dice {
    /// The stream `stream` of the history with `seed`.
    pub fn new(seed: u64, stream: Stream) -> Self {
        let (kind, a, b) = match stream {
            Stream::Director => (1, 0, 0),
            Stream::Network(m, i) => (2, m as u64, i),
            Stream::Bodies(m, i) => (3, m as u64, i),
            Stream::Wakes(m) => (4, m as u64, 0),
            Stream::Mischief => (5, 0, 0),
            Stream::Hosts => (6, 0, 0),
            Stream::Deploys => (7, 0, 0),
            Stream::Birth => (8, 0, 0),
            Stream::Replicas => (9, 0, 0),
        };
        let key = mix(seed ^ mix(kind ^ mix(a ^ mix(b))));
        Self(AtomicU64::new(fastrand::Rng::with_seed(key).get_seed()))
    }

    fn with<T>(&self, f: impl FnOnce(&mut fastrand::Rng) -> T) -> T {
        let mut rng = fastrand::Rng::with_seed(self.0.load(Ordering::Relaxed));
        let drawn = f(&mut rng);
        self.0.store(rng.get_seed(), Ordering::Relaxed);
        drawn
    }

    /// A duration in `[lo, hi)`, to the microsecond.
    pub fn between(&self, lo: Duration, hi: Duration) -> Duration {
        // In whole microseconds, as `as_micros` counts them, without its 128-bit arithmetic.
        let micros = |d: Duration| {
            (d.as_secs().wrapping_mul(1_000_000)).wrapping_add(u64::from(d.subsec_micros()))
        };
        let (lo, hi) = (micros(lo), micros(hi));
        Duration::from_micros(self.with(|r| r.u64(lo..hi.max(lo + 1))))
    }

    /// A number in `[0, n)`.
    pub fn below(&self, n: u32) -> u32 {
        self.with(|r| r.u32(0..n.max(1)))
    }

    /// An index into `len` things.
    pub fn index(&self, len: usize) -> usize {
        self.with(|r| r.usize(0..len.max(1)))
    }

    /// A number in `[lo, hi)`.
    pub fn u64(&self, lo: u64, hi: u64) -> u64 {
        self.with(|r| r.u64(lo..hi.max(lo + 1)))
    }

    /// Heads or tails.
    pub fn coin(&self) -> bool {
        self.with(|r| r.bool())
    }
}
