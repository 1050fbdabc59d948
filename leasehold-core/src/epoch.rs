//! The fencing token of a term (docs/safety.md, rule 6 and "Fencing that never goes back"): the
//! next epoch is computed here and nowhere else.
//!
//! A term's epoch is one more than the last written on the blob ([`after`]). A blob without one
//! (new, created again after a deletion, its metadata removed) gets the wall clock in
//! milliseconds since 1970 ([`first`]): every later term adds 1, and a blob sees far fewer than
//! 1000 terms a second (each takes at least three requests in a row), so the first epoch is above
//! every epoch handed out before on that name as long as the clock of the member writing it is
//! not behind, by more than the blob's lifetime, the clock of the one that wrote the previous
//! first epoch. A lease held on several storage accounts will take the largest of its replicas'
//! here too.

/// The epoch after `epoch`: the next term's, or the one a handoff reserves for its successor.
/// `None` past `u64::MAX` (metadata no leader wrote).
pub fn after(epoch: u64) -> Option<u64> {
    epoch.checked_add(1)
}

/// The first epoch of a blob without one, at `wall_ms` milliseconds since 1970 (at least 1).
pub fn first(wall_ms: u64) -> u64 {
    wall_ms.max(1)
}

/// The epoch of a term won on a blob whose last epoch is `last` (`None`: none written), at
/// `wall_ms` milliseconds since 1970.
pub fn next(last: Option<u64>, wall_ms: u64) -> Option<u64> {
    match last {
        Some(epoch) => after(epoch),
        None => Some(first(wall_ms)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_more_than_the_last_or_the_wall_clock_on_a_blob_without_one() {
        assert_eq!(next(Some(7), 1_800_000_000_000), Some(8));
        assert_eq!(next(None, 1_800_000_000_000), Some(1_800_000_000_000));
        assert_eq!(next(None, 0), Some(1), "never 0");
        assert_eq!(next(Some(u64::MAX), 5), None);
        assert_eq!(after(41), Some(42));
    }
}
