//! When a member's record keeper does what ([`Rounds`]), and how its last join or renewal went
//! ([`Kept`]).

use crate::pace::Pace;
use crate::timing::{Moment, POLL_JITTER};
use std::time::Duration;

/// How the last attempt to join or keep the record went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kept {
    /// In line; next renew after [`Pace::RECORD_RENEW`].
    Ok,
    /// Try again after [`Pace::RECORD_RETRY`].
    Retry,
    /// Try again after this long: a [`Pace::RECORD_RENEW`] (another instance holds the record)
    /// or a [`Pace::LIST_EVERY`] (the credentials are refused member records).
    Later(Duration),
}

/// When the keeper does what: the record's next renewal, the next listing (stretched a little,
/// so that members do not list in step), the listing soon after a term begins, and a leader's
/// tidying of long-dead records.
#[derive(Debug, Clone)]
pub struct Rounds<I> {
    /// When the record is next joined or renewed.
    next_keep: I,
    /// When the line was last listed or tried.
    last_try: I,
    /// How much this round's listing period is stretched.
    stretch: f64,
    /// When a leader last deleted long-dead records. Listings by others (the preemption
    /// watch) keep the line fresh, so that the keeper may never list itself while it leads:
    /// tidying goes by the line, however it was listed.
    tidied: Option<I>,
    /// The terms this member had begun at the last look: each one lists soon after it began
    /// (counted, not a flag, so that a term that ended and another that began between two
    /// looks still count).
    terms_seen: u64,
    /// When the listing of a term that began is due.
    term_list_at: Option<I>,
}

impl<I: Moment> Rounds<I> {
    /// The rounds of a keeper starting at `now`: it joins at once; `draw` (uniform in `[0, 1)`,
    /// the shell's) stretches the first listing period.
    pub fn new(now: I, draw: f64) -> Self {
        Self {
            next_keep: now,
            last_try: now,
            stretch: 1.0 + POLL_JITTER * draw,
            tidied: None,
            terms_seen: 0,
            term_list_at: None,
        }
    }

    /// Whether the record's join or renewal is due at `now`.
    pub fn keep_due(&self, now: I) -> bool {
        now >= self.next_keep
    }

    /// The record was renewed (or joined) at `now`, or not: when to try again.
    pub fn kept(&mut self, now: I, kept: Kept) {
        self.next_keep = now
            + match kept {
                Kept::Ok => Pace::RECORD_RENEW,
                Kept::Retry => Pace::RECORD_RETRY,
                Kept::Later(d) => d,
            };
    }

    /// A first look at the line, at `now`, after joining: the listing period runs from it.
    pub fn first_look(&mut self, now: I) {
        self.last_try = now;
    }

    /// When the next listing is due: a leader and a poller (`often`) list every
    /// [`Pace::LEADER_LIST_EVERY`], the others every [`Pace::LIST_EVERY`].
    pub fn next_list(&self, listed: Option<I>, often: bool) -> I {
        let period = match often {
            true => Pace::LEADER_LIST_EVERY,
            false => Pace::LIST_EVERY,
        };
        listed.map_or(self.last_try, |at| at.max(self.last_try)) + period.mul_f64(self.stretch)
    }

    /// A new leader lists once its body has started (`Pace::TERM_START_QUIET`): its line was
    /// listed up to a period ago, as a poller, and members that rejoined meanwhile (the one
    /// that just handed it the lease, in a rolling restart), or that published a new lease id
    /// since, stand otherwise now. A handoff at the end of this term then finds its successor
    /// in the line as it is, and needs nothing but the `change`.
    pub fn terms(&mut self, now: I, terms_begun: u64, leading: bool) {
        if terms_begun != self.terms_seen {
            self.terms_seen = terms_begun;
            self.term_list_at = Some(now + Pace::TERM_START_QUIET);
        }
        if !leading {
            self.term_list_at = None;
        }
    }

    /// Whether the listing of a term that began is due at `now`.
    pub fn term_listing_due(&self, now: I) -> bool {
        self.term_list_at.is_some_and(|at| now >= at)
    }

    /// A listing begins at `now`; the next one is stretched anew by `draw`.
    pub fn listing(&mut self, now: I, draw: f64) {
        self.term_list_at = None;
        self.last_try = now;
        self.stretch = 1.0 + POLL_JITTER * draw;
    }

    /// A leader deleted long-dead records (or looked for them) at `now`.
    pub fn tidied(&mut self, now: I) {
        self.tidied = Some(now);
    }

    /// Whether a leader's tidying is due at `now`: the line was listed since the last, which is
    /// a leader's listing period old.
    pub fn tidy_due(&self, now: I, listed: Option<I>) -> bool {
        let listed_since_tidy = listed.is_some_and(|at| self.tidied.is_none_or(|t| at > t));
        let due = (self.tidied).is_none_or(|t| now >= t + Pace::LEADER_LIST_EVERY);
        listed_since_tidy && due
    }

    /// When the keeper looks again: the first of the record's renewal, the next listing, a
    /// term's listing, and the record's settling (`settle_at`).
    pub fn next_round(&self, next_list: I, settle_at: Option<I>) -> I {
        let next = self.next_keep.min(next_list);
        let next = self.term_list_at.map_or(next, |at| next.min(at));
        settle_at.map_or(next, |at| next.min(at))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// A member renews every `RECORD_RENEW`, lists every `LIST_EVERY` (stretched by its draw),
    /// and, once leading, lists `TERM_START_QUIET` into a term, then every
    /// `LEADER_LIST_EVERY`, tidying after each listing.
    #[test]
    fn a_member_renews_lists_and_as_leader_lists_soon_and_tidies() {
        let t0 = Instant::now();
        let mut r = Rounds::new(t0, 0.5);
        assert!(r.keep_due(t0), "joins at once");
        r.kept(t0, Kept::Ok);
        assert!(!r.keep_due(t0 + Pace::RECORD_RENEW - Duration::from_millis(1)));
        assert!(r.keep_due(t0 + Pace::RECORD_RENEW));
        r.first_look(t0);
        let stretched = Pace::LIST_EVERY.mul_f64(1.1);
        assert_eq!(r.next_list(Some(t0), false), t0 + stretched);
        assert_eq!(
            r.next_round(r.next_list(Some(t0), false), None),
            t0 + Pace::RECORD_RENEW
        );
        // A term begins: its listing is due TERM_START_QUIET later, and only while it leads.
        let t1 = t0 + Duration::from_secs(3);
        r.terms(t1, 1, true);
        assert!(!r.term_listing_due(t1));
        assert!(r.term_listing_due(t1 + Pace::TERM_START_QUIET));
        assert_eq!(
            r.next_round(t1 + stretched, None),
            t1 + Pace::TERM_START_QUIET
        );
        r.terms(t1, 1, false);
        assert!(
            !r.term_listing_due(t1 + Pace::TERM_START_QUIET),
            "the term ended"
        );
        // A leader tidies after each listing, a leader's listing period apart.
        let t2 = t1 + Pace::TERM_START_QUIET;
        assert!(r.tidy_due(t2, Some(t2)), "never tidied");
        r.tidied(t2);
        assert!(!r.tidy_due(t2, Some(t2)), "not listed since");
        let t3 = t2 + Duration::from_secs(1);
        assert!(!r.tidy_due(t3, Some(t3)), "too soon");
        let t4 = t2 + Pace::LEADER_LIST_EVERY;
        assert!(r.tidy_due(t4, Some(t3)));
        // Failures: again soon, or later.
        r.kept(t4, Kept::Retry);
        assert!(r.keep_due(t4 + Pace::RECORD_RETRY));
        r.kept(t4, Kept::Later(Pace::LIST_EVERY));
        assert!(!r.keep_due(t4 + Pace::RECORD_RENEW));
        r.listing(t4, 0.0);
        assert_eq!(r.next_list(None, true), t4 + Pace::LEADER_LIST_EVERY);
    }
}
