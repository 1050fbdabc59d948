//! The pauses between attempts of whatever is retried (a renew, a campaign after storage
//! failed): a delay from a least one doubling up to a longest one, of which each pause takes a
//! random half to whole, so that members do not retry in step and no pause exceeds the longest.
//!
//! The core draws no random numbers: the shell passes a uniform draw in `[0, 1)` with each
//! pause it asks for.

use std::time::Duration;

/// One run of doubling pauses.
#[derive(Debug, Clone)]
pub struct Backoff {
    least: Duration,
    longest: Duration,
    /// The delay of the last pause, before its random part; none before the first.
    delay: Option<Duration>,
}

impl Backoff {
    /// Pauses from `least` doubling up to `longest`.
    pub fn new(least: Duration, longest: Duration) -> Self {
        Self {
            least,
            longest,
            delay: None,
        }
    }

    /// The next pause: its delay (the last doubled, at most the longest) times `0.5 + 0.5 *
    /// draw`.
    pub fn next_pause(&mut self, draw: f64) -> Duration {
        let delay = match self.delay {
            None => self.least,
            Some(last) => last.saturating_mul(2).min(self.longest),
        };
        self.delay = Some(delay);
        delay.mul_f64(0.5 + 0.5 * draw)
    }

    /// The longest pause it gives.
    pub fn longest(&self) -> Duration {
        self.longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_longest_and_take_a_random_half_to_whole() {
        let mut b = Backoff::new(Duration::from_millis(200), Duration::from_secs(1));
        let whole: Vec<Duration> = (0..5).map(|_| b.next_pause(1.0)).collect();
        let ms = |d: &Duration| d.as_millis();
        assert_eq!(
            whole.iter().map(ms).collect::<Vec<_>>(),
            [200, 400, 800, 1000, 1000]
        );
        let mut b = Backoff::new(Duration::from_millis(200), Duration::from_secs(1));
        assert_eq!(b.next_pause(0.0), Duration::from_millis(100));
        assert_eq!(ms(&b.next_pause(0.5)), 300);
    }
}
