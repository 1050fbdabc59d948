//! The pauses between attempts of whatever is retried (a renew, the loop after a storage
//! failure, a campaign's wait on a refused acquire): jittered, so that instances do not retry in
//! step.

use std::time::Duration;

/// Exponential backoff: a delay from `min` doubling up to `max`, of which each pause takes a
/// random half to whole, so that instances do not retry in step and no pause exceeds `max`.
pub(crate) fn backoff(min: Duration, max: Duration) -> impl Iterator<Item = Duration> {
    use backon::BackoffBuilder;
    backon::ExponentialBuilder::default()
        .with_min_delay(min)
        .with_max_delay(max)
        .without_max_times()
        .build()
        .map(|delay| delay.mul_f64(0.5 + 0.5 * fastrand::f64()))
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
