//! The questions of a leader's term answered from what the member knows ([`Leader`]: the
//! successor a term hands its lease to, whether a fresh read shows it still the successor,
//! what a notice names, the guess of a handoff, a pass-over).

use super::kinds::Kinds;
use super::known::Known;
use crate::leading;
use crate::line::Record;
use crate::timing::Moment;

/// What a member knows at one instant, as its term asks it.
pub(super) struct Leader<'a, I, K: Kinds> {
    pub known: &'a mut Known<I, K>,
    pub now: I,
    pub wall: K::Wall,
}

impl<I: Moment, K: Kinds> leading::Grounds<K::Record, K::Notice, K::ETag> for Leader<'_, I, K> {
    fn successor(&mut self, named: Option<&str>) -> Option<K::Record> {
        let line = &self.known.line;
        line.handoff_successor(named, self.now, self.wall).cloned()
    }

    fn still_successor(&mut self, listed: &K::Record, fresh: &K::Record) -> bool {
        let line = &self.known.line;
        line.still_successor(listed, fresh, self.now, self.wall)
    }

    fn names(&mut self, notice: &K::Notice, next: &K::Record) -> bool {
        K::names(notice, next)
    }

    fn etag(&mut self, notice: K::Notice) -> K::ETag {
        K::notice_etag(notice)
    }

    /// Before the line was listed in this term, it is a poller's line, which may still name
    /// the leader before this one as its successor: no guess.
    fn guess(&mut self) -> Option<K::Record> {
        if !self.known.line.listed_this_term() {
            return None;
        }
        self.successor(None)
    }

    fn pass_over(&mut self, member: Option<&K::Record>) -> Option<K::Record> {
        if let Some(member) = member {
            self.known.line.pass_over(member.identity(), self.now);
        }
        self.successor(None)
    }
}
