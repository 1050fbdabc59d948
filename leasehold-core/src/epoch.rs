//! The fencing token of a term (docs/safety.md, rule 6 and "Fencing that never goes back"): the
//! next epoch is computed here and nowhere else.
//!
//! A term's epoch is one more than the last written on the blob ([`after`]). A blob without one
//! (new, created again after a deletion, its metadata removed) gets the wall clock in
//! milliseconds since 1970 ([`first`]): every later term adds 1, and a blob sees far fewer than
//! 1000 terms a second (each takes at least three requests in a row), so the first epoch is above
//! every epoch handed out before on that name as long as the clock of the member writing it is
//! not behind, by more than the blob's lifetime, the clock of the one that wrote the previous
//! first epoch.
//!
//! A lease held on several storage accounts (a majority of replica leases, quorum.rs) takes the
//! largest of three ([`of_replicas`]): its counted replicas' largest epoch + 1, the largest this
//! member has seen + 1, and the wall clock. Any two majorities share a replica, so the first
//! grows while no replica forgets; the last covers a replica wiped or restored from an old copy,
//! as the first epoch of a blob without one does (while the members' wall clocks are closer than
//! the lock-delay `L + M`: docs/testing.md, "The quorum model").

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

/// The epoch of a term won on a majority of replicas: the largest of `read` + 1 (the largest
/// epoch read on the replicas it counts, `None`: none carries one), `seen` + 1 (the largest
/// this member has seen or handed out, `None`: none) and the wall clock's [`first`] at `wall_ms`.
/// `None` past `u64::MAX`.
pub fn of_replicas(read: Option<u64>, seen: Option<u64>, wall_ms: u64) -> Option<u64> {
    let read = read.map(after).unwrap_or(Some(0))?;
    let seen = seen.map(after).unwrap_or(Some(0))?;
    Some(read.max(seen).max(first(wall_ms)))
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

    #[test]
    fn of_replicas_the_largest_of_the_read_the_seen_and_the_wall_clock() {
        assert_eq!(of_replicas(Some(7), Some(3), 5), Some(8));
        assert_eq!(of_replicas(Some(7), Some(9), 5), Some(10));
        assert_eq!(of_replicas(Some(7), Some(9), 50), Some(50));
        assert_eq!(of_replicas(None, None, 0), Some(1), "never 0");
        assert_eq!(of_replicas(None, None, 42), Some(42));
        assert_eq!(of_replicas(Some(u64::MAX), None, 5), None);
        assert_eq!(of_replicas(None, Some(u64::MAX), 5), None);
    }
}
