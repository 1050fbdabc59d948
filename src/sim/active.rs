//! Whether this thread runs a simulated history now: then lease ids and wake tokens are drawn
//! from the history's seed, not from the OS. A leaf, so that the store and the elector may ask
//! without reaching into the simulator that drives them.

use std::cell::Cell;

thread_local! {
    static ACTIVE: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is running a simulated history now (lease ids then come from its seed).
pub(crate) fn active() -> bool {
    ACTIVE.with(Cell::get)
}

/// From now on this thread runs a simulated history (`true`), or no longer.
pub(crate) fn set(on: bool) {
    ACTIVE.with(|a| a.set(on));
}
