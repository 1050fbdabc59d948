//! Lists kept for their room between steps: a machine takes one out of itself
//! (`std::mem::take`) while it is borrowed whole, fills and drains it, and puts it back
//! ([`put_back`]).

use std::collections::VecDeque;

/// A list that may own nothing: no room and no items.
pub trait Room: Default {
    /// Whether it owns nothing (dropping it would free nothing and drop nothing).
    fn owns_nothing(&self) -> bool;
}

impl<T> Room for Vec<T> {
    fn owns_nothing(&self) -> bool {
        self.capacity() == 0 && self.is_empty()
    }
}

impl<T> Room for VecDeque<T> {
    fn owns_nothing(&self) -> bool {
        self.capacity() == 0 && self.is_empty()
    }
}

/// Puts `list` back in `slot`, where `std::mem::take` left an empty list: that one is
/// forgotten rather than dropped when it owns nothing, as it always does unless something
/// filled the slot meanwhile (a drop is a call at every step, for nothing).
pub fn put_back<L: Room>(slot: &mut L, list: L) {
    let left = std::mem::replace(slot, list);
    if left.owns_nothing() {
        std::mem::forget(left);
    }
}
