//! Which of the store's two connection pools a request goes out on: the choice that keeps a
//! second connection open for the two requests a woken successor sends side by side.
//!
//! A woken successor sends its acquire and its epoch write (or read) at once (docs/succession.md,
//! "The handoff"). With one pool, a member polling every second keeps one connection open, and the
//! second request of the pair opened a new one on the handover's path: on Azurite a request on a
//! new connection took 1.96 ms against 0.91 ms on an open one (p50, raw sockets, this machine); on
//! Azure it is a TCP and TLS handshake, two or three round trips more. So there are two pools, and
//! once requests have kept coming often enough for both to stay open for as long as a connection is
//! kept (a poller's, a second apart; a leader's renews on a server that keeps connections long),
//! they alternate, so that each pool's connection is used often enough to stay open; otherwise they
//! keep to the pool last used, whose connection is open: one connection, as before (a leader's
//! renews every 4 s against Azurite's 5 s, and the bursts of a record's renew and a listing just
//! after one, which alternating opened a connection for each time: 3 a minute). A request never
//! waits: when the pool it would take is busy and the other is not, it takes the other.

use std::time::Duration;
use tokio::time::Instant;

/// The two pools' state: what each has in flight, which one went last, and when.
#[derive(Debug, Default)]
pub(super) struct Lanes {
    in_flight: [u32; 2],
    last: usize,
    last_sent: Option<Instant>,
    /// Since when requests have kept coming at most half the idle limit apart: the first of
    /// them.
    often_since: Option<Instant>,
}

impl Lanes {
    /// The pool the next request goes out on, at `now`, with connections reused for `idle`;
    /// counted in flight until [`Lanes::done`].
    pub(super) fn take(&mut self, now: Instant, idle: Duration) -> usize {
        let other = 1 - self.last;
        // Alternating, each pool's connection is used every other request: both stay open
        // while requests come at most half the idle limit apart. Only once they have for a
        // whole idle limit: a burst (a record's renew and a listing just after a renew) would
        // open a connection in the other pool, dropped unused.
        let soon = self
            .last_sent
            .is_some_and(|sent| now.saturating_duration_since(sent) < idle / 2);
        self.often_since = match soon {
            true => self.often_since.or(self.last_sent),
            false => None,
        };
        let often = self
            .often_since
            .is_some_and(|since| now.saturating_duration_since(since) >= idle);
        let busy = |lane: usize| self.in_flight[lane] > 0;
        let lane = match (often, busy(self.last), busy(other)) {
            (_, true, false) | (true, false, false) => other,
            _ => self.last,
        };
        self.in_flight[lane] += 1;
        self.last = lane;
        self.last_sent = Some(now);
        lane
    }

    /// The request `lane` carried is answered (or given up).
    pub(super) fn done(&mut self, lane: usize) {
        self.in_flight[lane] = self.in_flight[lane].saturating_sub(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const IDLE: Duration = Duration::from_millis(4500);

    /// Requests one at a time, `gap` apart: the pools they went out on.
    fn one_at_a_time(gap: Duration, n: usize) -> Vec<usize> {
        let mut lanes = Lanes::default();
        let start = Instant::now();
        (0..n)
            .map(|i| {
                let lane = lanes.take(start + gap * i as u32, IDLE);
                lanes.done(lane);
                lane
            })
            .collect()
    }

    /// A poller (a request a second) alternates once it has polled for the idle limit, so
    /// both connections stay open; a leader's renews 4 s apart keep to one pool, and so do
    /// the bursts just after them (a record's renew, a listing and its read).
    #[test]
    fn frequent_requests_alternate_and_sparse_ones_keep_to_one_pool() {
        assert_eq!(
            one_at_a_time(Duration::from_secs(1), 9),
            vec![0, 0, 0, 0, 0, 1, 0, 1, 0]
        );
        assert_eq!(one_at_a_time(Duration::from_secs(4), 5), vec![0; 5]);
        let mut lanes = Lanes::default();
        let t = Instant::now();
        for at in [0.0, 4.0, 8.0, 8.1, 8.3, 8.4, 12.0, 16.0, 18.1, 18.2, 20.0] {
            let lane = lanes.take(t + Duration::from_secs_f64(at), IDLE);
            lanes.done(lane);
            assert_eq!(lane, 0, "at {at} s");
        }
    }

    /// Two requests side by side go out on both pools, whatever came before; a third while
    /// both are busy joins the one last used.
    #[test]
    fn side_by_side_requests_take_both_pools() {
        for gap in [Duration::from_secs(1), Duration::from_secs(4)] {
            let mut lanes = Lanes::default();
            let t = Instant::now();
            let first = lanes.take(t, IDLE);
            lanes.done(first);
            let a = lanes.take(t + gap, IDLE);
            let b = lanes.take(t + gap, IDLE);
            assert_ne!(a, b, "after {gap:?}");
            let c = lanes.take(t + gap, IDLE);
            assert_eq!(c, b);
            for lane in [a, b, c] {
                lanes.done(lane);
            }
            assert_eq!(lanes.in_flight, [0, 0]);
        }
    }
}
