//! The pauses between attempts of whatever is retried (a renew, the loop after a storage
//! failure, a campaign's wait on a refused acquire): the core's doubling
//! [`Backoff`](leasehold_core::backoff::Backoff), each pause jittered by a draw of this
//! process's random source, so that instances do not retry in step.

use leasehold_core::backoff::Backoff;
use std::time::Duration;

/// Pauses from `min` doubling up to `max`, of which each takes a random half to whole, so that
/// instances do not retry in step and no pause exceeds `max`.
pub(crate) fn backoff(min: Duration, max: Duration) -> impl Iterator<Item = Duration> {
    let mut pauses = Backoff::new(min, max);
    std::iter::repeat_with(move || pauses.next_pause(fastrand::f64()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_stays_within_its_bounds() {
        let pauses: Vec<Duration> = backoff(Duration::from_millis(200), Duration::from_secs(1))
            .take(200)
            .collect();
        assert!(pauses[0] >= Duration::from_millis(100) && pauses[0] <= Duration::from_millis(200));
        assert!(
            pauses.iter().all(|p| *p <= Duration::from_secs(1)),
            "{pauses:?}"
        );
        assert!(
            pauses[10..].iter().any(|p| *p < Duration::from_secs(1)),
            "still jittered"
        );
    }
}
