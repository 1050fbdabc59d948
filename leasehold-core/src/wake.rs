//! Wake-ups, from the woken member's side: which it accepts ([`Wakes`]), and what a handoff's
//! wake-up tells it ([`Reserved`]: the epoch its old leader reserved for it, and the blob's
//! version as the notice left it; docs/succession.md, "The handoff").
//!
//! A wake-up carries no authority: an accepted one only makes the member try its acquire now
//! instead of at its next poll, and it never leads without its own acquire. So the rules here
//! bound the cost of wake-ups, not their effect: one carrying another member's token is refused
//! and not counted, and one in each [`Pace::WAKE_INTERVAL`](crate::Pace::WAKE_INTERVAL) is
//! acted on.

use crate::pace::Pace;
use crate::timing::Moment;

/// How a member took a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WakeAnswer {
    /// The member tries its acquire now (or at its next pause, if an attempt is in flight).
    Accepted,
    /// It carried the token, but the last accepted one came less than
    /// [`Pace::WAKE_INTERVAL`](crate::Pace::WAKE_INTERVAL) ago: nothing done (the member is
    /// awake already). The daemon answers 429.
    TooSoon,
    /// It did not carry this member's token: nothing done, nothing counted. The daemon answers
    /// 401.
    WrongToken,
}

/// What a handoff's wake-up tells the woken member: the epoch reserved for it, and the blob's
/// version (`E`, its ETag) as the notice that reserved it left the blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reserved<E> {
    /// The epoch to write: the old leader's + 1.
    pub epoch: u64,
    /// The write is conditional on it: it succeeds only while nothing wrote the blob since the
    /// notice (not the old leader handing the lease on, not another leader).
    pub etag: E,
}

/// The longest ETag a wake-up's reservation may carry (the service's are about 20 characters).
const LONGEST_ETAG: usize = 128;

impl<E: AsRef<str>> Reserved<E> {
    /// The value of the header that carries it: `<epoch> <etag>`.
    pub fn to_header(&self) -> String {
        format!("{} {}", self.epoch, self.etag.as_ref())
    }
}

impl<E: for<'a> From<&'a str>> Reserved<E> {
    /// From the header's value; `None` unless it is `<epoch> <etag>` with an ETag of at most
    /// 128 characters.
    pub fn parse(value: &str) -> Option<Self> {
        let (epoch, etag) = value.trim().split_once(' ')?;
        let etag = etag.trim();
        if etag.is_empty() || etag.len() > LONGEST_ETAG {
            return None;
        }
        Some(Self {
            epoch: epoch.parse().ok()?,
            etag: E::from(etag),
        })
    }
}

/// The wake-ups a member accepted: when the last one was, and the epoch its handoff reserved.
#[derive(Debug, Clone)]
pub struct Wakes<I, E> {
    last: Option<I>,
    reserved: Option<Reserved<E>>,
}

impl<I, E> Default for Wakes<I, E> {
    fn default() -> Self {
        Self {
            last: None,
            reserved: None,
        }
    }
}

impl<I: Moment, E: for<'a> From<&'a str>> Wakes<I, E> {
    /// A wake-up at `now` that carried this member's token or not (`token_matches`, compared
    /// with [`same`]) and, from a handoff, its reservation (`handoff`: the header's value; one
    /// that does not parse is ignored). Accepted, the reservation replaces the last one.
    pub fn wake(&mut self, token_matches: bool, now: I, handoff: Option<&str>) -> WakeAnswer {
        if !token_matches {
            return WakeAnswer::WrongToken;
        }
        if self.last.is_some_and(|at| now < at + Pace::WAKE_INTERVAL) {
            return WakeAnswer::TooSoon;
        }
        self.last = Some(now);
        self.reserved = handoff.and_then(Reserved::parse);
        WakeAnswer::Accepted
    }
}

impl<I, E> Wakes<I, E> {
    /// The epoch the handoff of the last accepted wake-up reserved for this member, once.
    pub fn take_reserved(&mut self) -> Option<Reserved<E>> {
        self.reserved.take()
    }
}

/// Whether `a` and `b` are equal, in a time that does not depend on where they differ (so that
/// answers do not tell a guesser how much of a token was right).
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    type Tag = String;

    #[test]
    fn one_wake_up_per_interval_and_only_with_the_token() {
        let t0 = Instant::now();
        let mut w = Wakes::<Instant, Tag>::default();
        assert_eq!(w.wake(false, t0, None), WakeAnswer::WrongToken);
        assert_eq!(
            w.wake(true, t0, None),
            WakeAnswer::Accepted,
            "a refusal is not counted"
        );
        let soon = t0 + Pace::WAKE_INTERVAL - Duration::from_millis(1);
        assert_eq!(w.wake(true, soon, Some("7 tag")), WakeAnswer::TooSoon);
        assert_eq!(
            w.take_reserved(),
            None,
            "a wake-up too soon reserves nothing"
        );
        let later = t0 + Pace::WAKE_INTERVAL;
        assert_eq!(w.wake(true, later, Some("7 tag")), WakeAnswer::Accepted);
        let reserved = w.take_reserved();
        assert_eq!(
            reserved,
            Some(Reserved {
                epoch: 7,
                etag: "tag".to_owned()
            })
        );
        assert_eq!(w.take_reserved(), None, "once");
        assert_eq!(reserved.map(|r| r.to_header()).as_deref(), Some("7 tag"));
    }

    #[test]
    fn a_reservation_that_does_not_parse_is_ignored() {
        for bad in ["", "7", "x tag", "7 ", &format!("7 {}", "e".repeat(129))] {
            assert_eq!(Reserved::<Tag>::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            Reserved::<Tag>::parse(" 8  \"0x8D\" ").map(|r| (r.epoch, r.etag)),
            Some((8, "\"0x8D\"".to_owned()))
        );
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"abcd"));
        assert!(!same(b"", b"a"));
    }
}
