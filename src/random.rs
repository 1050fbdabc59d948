//! Where random choices come from on this thread: the operating system, or, on the thread of a
//! simulated history or a paused-time scenario (feature `test-util`), the seed `fastrand` was
//! given there, so that a seed replays exactly. The simulator (or the scenario's first instance)
//! says which; lease ids and wake tokens ask.

use std::cell::Cell;

thread_local! {
    static SEEDED: Cell<bool> = const { Cell::new(false) };
}

/// From now on, random choices on this thread come from the history's seed (`true`), or from
/// the operating system again (`false`).
pub(crate) fn from_seed(on: bool) {
    SEEDED.with(|s| s.set(on));
}

/// Whether random choices on this thread come from the history's seed.
pub(crate) fn seeded() -> bool {
    SEEDED.with(Cell::get)
}
