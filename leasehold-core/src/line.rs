//! The line of succession as one member knows it (docs/succession.md; docs/slots.md): the order
//! ([`order`]), the successor a leader hands its lease to ([`successor`]), and what the line says
//! of this member's part ([`Line::place`]: the successor polls, the others watch; with slots, the
//! first F members holding no slot poll ([`Line::pollers`]), and the others watch the record of
//! the member just ahead of them ([`Line::predecessor`])).
//!
//! The line is facts the shell hands in (listings, reads of the lease blob, what this member did)
//! and judgements made of them at the instant the shell says: it reads no clock. Two clocks enter
//! it: the instant `I` (the lease clock: how long a member stays passed over, how long a record
//! has been dead) and the wall clock `W` of the records (when a member joined, until when it
//! stands by: written by other machines, compared as written).
//!
//! What it knows of a member record or a slot blob is what [`Record`] and [`SlotBlob`] say: the
//! shell's store types implement them, and keep the rest (metadata, ETags, lease ids) to itself.

use crate::pace::Pace;
use crate::timing::Moment;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::time::Duration;

#[cfg(test)]
mod tests;

/// A member's record as the line reads it.
pub trait Record {
    /// The record's name below the members prefix: one per identity.
    type Key: Ord + Clone + Debug;
    /// The wall clock its times are written on.
    type Wall: Ord + Copy + Debug;
    /// Its name.
    fn key(&self) -> &Self::Key;
    /// The member's identity.
    fn identity(&self) -> &str;
    /// `[election].priority`: higher leads first.
    fn priority(&self) -> i64;
    /// When the record was created, by the service's clock: when the member joined.
    fn joined(&self) -> Self::Wall;
    /// Whether the member lives: its record's lease is held.
    fn is_alive(&self) -> bool;
    /// Whether it stays out of the election at `wall` (a health cooldown).
    fn in_standby(&self, wall: Self::Wall) -> bool;
    /// Its `[lease].slots`.
    fn slots(&self) -> u32;
    /// How long the member had been a member, by its own clock, when it said so (once, at its
    /// `preempt_after`): the proof of life a preempting leader asks for.
    fn settled(&self) -> Option<Duration>;
    /// How old the record was when it was listed, by the service's clock.
    fn age(&self) -> Duration;
    /// Its record's lease is held again (by this member, which renewed it).
    fn set_alive(&mut self);
    /// `[election].advertise`: where it takes wake-ups, if it says.
    fn advertise(&self) -> Option<&str>;
    /// Whether `other`, a read of the same member's record, publishes the lease id this one
    /// does: a member publishes a new one after each lease it wins.
    fn acquires_as(&self, other: &Self) -> bool;
}

/// A slot blob as the line reads it (docs/slots.md).
pub trait SlotBlob {
    /// The wall clock a holder's term is dated on.
    type Wall;
    /// Slot `slot`, free, as the line has it before any look.
    fn free(slot: u32) -> Self;
    /// Which slot: 0 is the group's blob.
    fn slot(&self) -> u32;
    /// Whether its lease is held.
    fn is_leased(&self) -> bool;
    /// The last holder its metadata names, held or not.
    fn last_holder(&self) -> Option<&str>;
    /// The member holding it: the last holder, while the lease is held.
    fn held_by(&self) -> Option<&str> {
        self.last_holder().filter(|_| self.is_leased())
    }
    /// Held by `identity` from `wall` (a term of a group of `slots`), or free (`None`), as this
    /// member learnt without a listing.
    fn set_held_by(&mut self, identity: Option<&str>, wall: Self::Wall, slots: u32);
    /// The member a handoff notice on it names (`leasehold_successor`), if any.
    fn successor(&self) -> Option<&str> {
        None
    }
}

/// What a read of the lease blob said of its holder and its notice.
#[derive(Debug, Clone, Copy)]
pub struct BlobSeen<'a> {
    /// Who holds the lease (the holder its metadata names, while the lease is held).
    pub leader: Option<&'a str>,
    /// Whom its metadata names, held or not.
    pub named: Option<&'a str>,
    /// The handoff notice: the member the lease is being handed to.
    pub notice: Option<&'a str>,
    /// Members that handoff passed over.
    pub passed_over: &'a [String],
}

/// The line of succession: priority (higher first), then joined (earlier first), then identity.
pub fn order<R: Record>(records: &mut [R]) {
    records.sort_by(|a, b| {
        b.priority()
            .cmp(&a.priority())
            .then_with(|| a.joined().cmp(&b.joined()))
            .then_with(|| a.identity().cmp(b.identity()))
    });
}

/// The member a leader hands its lease to: the first in `line` (in succession order) that is
/// alive, not in a cooldown at `wall`, not `leader`, and not `skipped` (for slots: members that
/// hold one already).
pub fn successor<'a, R: Record>(
    line: &'a [R],
    leader: Option<&str>,
    wall: R::Wall,
    skipped: impl Fn(&R) -> bool,
) -> Option<&'a R> {
    line.iter().find(|r| {
        r.is_alive() && !r.in_standby(wall) && Some(r.identity()) != leader && !skipped(r)
    })
}

/// What a probe of a member's URL, with the wake token of its record, found there
/// (docs/succession.md, docs/slots.md). The shell says what the HTTP request met; the core
/// judges it ([`Found::gone_for_a_slot`], and a watcher's [`Round`](crate::watch::Round)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Found {
    /// The member answered: its process runs at its URL.
    Itself,
    /// Another process answered there (it refused the token): the record's process is gone.
    Another,
    /// Nothing listens there (the connection was refused): its process is gone, or the URL it
    /// advertises is wrong.
    Nothing,
    /// No answer in time (a frozen process, a slow network), or no URL to probe: it stands.
    NoAnswer,
}

impl Found {
    /// Whether a member waiting for a slot passes the record over: a URL where nothing, or
    /// another process, answers (docs/slots.md). A watcher passes over only [`Found::Another`]:
    /// it reads the record of one where [`Found::Nothing`] listens (docs/succession.md).
    pub fn gone_for_a_slot(self) -> bool {
        matches!(self, Self::Another | Self::Nothing)
    }
}

/// Where this member's record stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// Not (yet) in line: joining, or storage failed meanwhile.
    Joining,
    /// In line: the record exists under its lease.
    Joined,
    /// Another live instance holds the record of this identity (or this instance before a
    /// restart, whose record lease has not yet expired): no place in line.
    Duplicate,
    /// Storage refuses member records to these credentials (they need to list, create and
    /// delete blobs in the container): no records, and this member polls as without them.
    Refused(String),
}

pub use crate::candidate::Place;

/// The line as one member knows it. `I` is the lease clock's instant, `R` a member record and
/// `S` a slot blob as the shell's store has them.
#[derive(Debug)]
pub struct Line<I, R: Record, S> {
    /// This member's identity.
    pub me: String,
    /// Where its record stands.
    pub standing: Standing,
    /// The members in succession order, as last listed.
    pub members: Vec<R>,
    /// When they were listed (`None`: never).
    pub listed: Option<I>,
    /// The leader as last known: whom the lease blob named while leased, this member while it
    /// leads, the member it handed the lease to.
    pub leader: Option<String>,
    /// Whom the lease blob's metadata named last, leased or not: while the lease is free (its
    /// leader crashed, or released with nobody to hand it to), the successor is the first live
    /// member after that one, as for a held lease, and not that leader itself, whose record
    /// may stay alive for up to [`Pace::RECORD_LEASE`] after a crash.
    pub last_leader: Option<String>,
    /// Leaders seen to give the lease up since the last listing. In a rolling restart each of
    /// them stopped (its record deleted) and came back at the back of the line, while a
    /// watcher's listing, minutes old, still shows its old record ahead: judging the line
    /// without them is what lets the member next in line learn it at its next read, not at its
    /// next listing. A wrong guess costs one listing, which clears this.
    pub former: Vec<String>,
    /// With slots, members whose record a handoff read since the last listing showed with a
    /// new lease id (each won a slot since) or made anew (each rejoined, and may have won one
    /// since): each may hold a slot, which only a listing shows. Until one, each counts as
    /// holding a slot: no candidate for the handoff (handed the slot again, it would be found
    /// so again at once, hop after hop), and not waiting (this member, waiting behind it, would
    /// watch a slot holder's record, which no longer changes, and poll never).
    pub led_since: Vec<String>,
    /// The handoff notice last read on the lease blob.
    pub notice: Option<String>,
    /// Whether this member leads (then it also deletes long-dead records).
    pub leading: bool,
    /// Terms this member began (the record keeper lists after each: `Pace::TERM_START_QUIET`).
    pub terms_begun: u64,
    /// `terms_begun` at the last listing.
    listed_in_term: u64,
    /// `[lease].slots` of this member (docs/slots.md).
    pub slots: u32,
    /// The slot blobs as last listed (only with more than one slot), as this member has
    /// updated them since (its own terms and handoffs).
    pub slot_states: Vec<S>,
    /// The slot this member holds, while it leads.
    pub holding: Option<u32>,
    /// When each dead record was first seen dead by this member, on the wall clock (for people).
    pub dead_since: BTreeMap<R::Key, R::Wall>,
    /// Same, on the lease clock, for the rule that deletes long-dead records.
    dead_seen: BTreeMap<R::Key, I>,
    /// Members that were handed the lease and did not take it, until when each is passed
    /// over, and the creation of its record then (as the line had it, or as the next listing
    /// shows it): seen by this member, or named by a notice it read (docs/succession.md). A
    /// pass-over is of that record: a member that joined again since (a new record: a new
    /// process) stands in line.
    pub passed_over: BTreeMap<String, (I, Option<R::Wall>)>,
    /// Records whose lease runs on though their process is gone (a probe of its URL found none,
    /// or another), by when each was created: out of line until that record is gone or made
    /// anew (docs/slots.md; for a watcher, docs/succession.md).
    pub ghosts: BTreeMap<R::Key, R::Wall>,
    /// The record just ahead whose URL a watcher's probe found nothing listening at, by its
    /// name and creation, and since when ([`Line::read_unheard`]).
    unheard: Option<(R::Key, R::Wall, I)>,
}

impl<I: Moment, R: Record, S: SlotBlob<Wall = R::Wall>> Line<I, R, S> {
    /// The line of member `me`, joining, configured for `slots`.
    pub fn new(me: String, slots: u32) -> Self {
        Self {
            me,
            standing: Standing::Joining,
            members: Vec::new(),
            listed: None,
            leader: None,
            last_leader: None,
            former: Vec::new(),
            led_since: Vec::new(),
            notice: None,
            leading: false,
            terms_begun: 0,
            listed_in_term: 0,
            slots,
            slot_states: Vec::new(),
            holding: None,
            dead_since: BTreeMap::new(),
            dead_seen: BTreeMap::new(),
            passed_over: BTreeMap::new(),
            ghosts: BTreeMap::new(),
            unheard: None,
        }
    }

    /// A watcher's probe found nothing listening at the URL of `ahead`, the record just ahead,
    /// at `now`: whether to read that record (docs/succession.md). A process gone leaves its
    /// record leased for a record lease at most (and a renew's way, `renew_way`), after which a
    /// read finds it ran out, or made anew by a process of its identity started elsewhere; so
    /// the watcher reads it at every round until a record lease, a renew's way and a watch
    /// (`watch`) have passed since nothing first answered there. A record still unchanged then
    /// is a live member whose URL is wrong: it stands, read no more (a storage read a watch
    /// for as long as a URL is wrong would cost more than it could find).
    pub fn read_unheard(
        &mut self,
        ahead: &R,
        now: I,
        renew_way: Duration,
        watch: Duration,
    ) -> bool {
        let since = match &self.unheard {
            Some((key, joined, since)) if key == ahead.key() && *joined == ahead.joined() => *since,
            _ => {
                self.unheard = Some((ahead.key().clone(), ahead.joined(), now));
                now
            }
        };
        now <= since + Pace::RECORD_LEASE + renew_way + watch
    }

    /// Something answered at the URL of the record just ahead (or nothing was probed): the
    /// count of [`Line::read_unheard`] starts again at the next probe that finds nothing.
    pub fn heard(&mut self) {
        self.unheard = None;
    }

    /// Whether `r` is a record whose process is gone ([`Line::ghosts`]).
    pub fn is_ghost(&self, r: &R) -> bool {
        self.ghosts.get(r.key()) == Some(&r.joined())
    }

    /// This member's place at `now`, from the line as last listed.
    pub fn place(&self, now: I, wall: R::Wall) -> Place {
        let first = match &self.standing {
            Standing::Joining | Standing::Refused(_) => true,
            Standing::Duplicate => false,
            Standing::Joined if self.listed.is_none() => true,
            Standing::Joined if self.slots > 1 => self.polling(wall).any(|id| id == self.me),
            Standing::Joined => self.is_successor(now, wall),
        };
        if first { Place::Poll } else { Place::Watch }
    }

    /// Whether this member is the successor: named by a handoff notice, or first in line after
    /// the leader.
    pub fn is_successor(&self, now: I, wall: R::Wall) -> bool {
        let me = self.me.as_str();
        if self.notice.as_deref() == Some(me) && self.leader.as_deref() != Some(me) {
            return true;
        }
        // The first in line `successor` finds, without passed-over members nor records whose
        // process a probe found gone, and whether it is this one: asked at every step of a
        // campaign, each member ahead judged once.
        let leader = self.leading_next();
        for r in &self.members {
            if !r.is_alive() || r.in_standby(wall) || self.is_ghost(r) {
                continue;
            }
            let identity = r.identity();
            if Some(identity) == leader {
                continue;
            }
            match self.is_passed_over(identity, now) {
                true => continue,
                false => return identity == me,
            }
        }
        false
    }

    /// Who leads, or is about to: the member a handoff notice names (the lease is being handed
    /// to it), else the leader as last known.
    fn leading_next(&self) -> Option<&str> {
        match self.notice.as_deref() {
            Some(named) if named != self.me => Some(named),
            _ => self.leader.as_deref().or(self.last_leader.as_deref()),
        }
    }

    /// Whether `identity` is passed over at `now`: it was handed the lease lately and did not
    /// take it.
    pub fn is_passed_over(&self, identity: &str, now: I) -> bool {
        if self.passed_over.is_empty() {
            return false;
        }
        self.passed_over.get(identity).is_some_and(|(until, of)| {
            let joined_again = self
                .members
                .iter()
                .any(|r| r.identity() == identity && of.is_some_and(|of| r.joined() != of));
            now < *until && !joined_again
        })
    }

    /// Passes `identity` over for [`Pace::PASSED_OVER_FOR`] from `now` (unless it is already,
    /// under the same record). Never this member itself: the mark tells the others not to wait
    /// for a member that did not take the lease, and this one, reading the blob, is alive; first
    /// in line, it polls (rule (f) of docs/safety.md), or nobody may.
    pub fn pass_over(&mut self, identity: &str, now: I) {
        if identity == self.me {
            return;
        }
        self.passed_over.retain(|_, (until, _)| *until > now);
        // A mark stands from when it was made; a mark of an older record is made anew.
        let of = self.joined_of(identity);
        let marked = self.passed_over.get(identity);
        if marked.is_none_or(|(_, old)| of.is_some() && *old != of) {
            let mark = (now + Pace::PASSED_OVER_FOR, of);
            self.passed_over.insert(identity.to_owned(), mark);
        }
    }

    /// When the record of `identity` in the line was created (its seniority), if the line has
    /// it.
    fn joined_of(&self, identity: &str) -> Option<R::Wall> {
        self.record_of(identity).map(Record::joined)
    }

    /// The member this member hands its lease to at `now` (`wall` on the wall clock): the first
    /// live member in line but itself, not in a cooldown, and no candidate less
    /// ([`Line::out_of_line`]); a preemption's member (`to`) first, while it is one
    /// (docs/succession.md, "The handoff").
    pub fn handoff_successor(&self, to: Option<&str>, now: I, wall: R::Wall) -> Option<&R> {
        let me = Some(self.me.as_str());
        let out = |r: &R| self.out_of_line(r, now);
        let preferred =
            to.and_then(|to| successor(&self.members, me, wall, |r| out(r) || r.identity() != to));
        preferred.or_else(|| successor(&self.members, me, wall, out))
    }

    /// Whether `r` is no candidate for a handoff at `now` whatever its place: passed over, or
    /// (with slots) holding a slot or counting other slots than this member (docs/slots.md).
    pub fn out_of_line(&self, r: &R, now: I) -> bool {
        self.is_passed_over(r.identity(), now)
            || self.slots > 1 && (r.slots() != self.slots || self.holds_slot(r.identity()))
    }

    /// Whether `fresh`, a read of the record of `listed` (the line's successor), shows that
    /// member still the successor: [`Line::still_in_place`], and with the same lease id (one
    /// that won since it was listed may hold a slot now, which only a listing shows).
    pub fn still_successor(&self, listed: &R, fresh: &R, now: I, wall: R::Wall) -> bool {
        fresh.acquires_as(listed) && self.still_in_place(listed, fresh, now, wall)
    }

    /// Whether `fresh`, a read of the record of `listed`, shows that member at the same place:
    /// the same record (not one made again when it rejoined: its seniority is its record's
    /// creation), its priority unchanged, alive, not in a cooldown, and no candidate less. With
    /// one slot, a member that won the lease since it was listed (and published a new lease id
    /// after its epoch) is still the successor under its new id: nobody acquires with the old
    /// one any more.
    pub fn still_in_place(&self, listed: &R, fresh: &R, now: I, wall: R::Wall) -> bool {
        fresh.key() == listed.key()
            && fresh.joined() == listed.joined()
            && fresh.priority() == listed.priority()
            && successor(std::slice::from_ref(fresh), Some(&self.me), wall, |r| {
                self.out_of_line(r, now)
            })
            .is_some()
    }

    /// The record of `identity`, as last listed.
    pub fn record_of(&self, identity: &str) -> Option<&R> {
        self.members.iter().find(|r| r.identity() == identity)
    }

    /// Whether this member would be the successor if `gone`, and every other leader seen to
    /// give the lease up since the last listing ([`Line::former`]), were not in line.
    pub fn is_successor_without(&self, gone: &str, now: I, wall: R::Wall) -> bool {
        successor(&self.members, self.leader.as_deref(), wall, |r| {
            r.identity() == gone
                || self.former.iter().any(|f| f == r.identity())
                || self.is_passed_over(r.identity(), now)
        })
        .is_some_and(|r| r.identity() == self.me)
    }

    /// With one slot: the member just ahead of this one in line, as [`Line::is_successor`]
    /// counts them (alive, not the leader, not in a cooldown, not passed over): the one whose
    /// place this member would take if it left. `None` when this member is next, or not in
    /// line.
    pub fn ahead(&self, now: I, wall: R::Wall) -> Option<&R> {
        let me = self.me.as_str();
        let leader = self.leading_next();
        // Asked at every round of a watcher: one walk, nothing collected.
        let mut before = None;
        for r in &self.members {
            if r.identity() == me {
                return before;
            }
            if r.is_alive()
                && !r.in_standby(wall)
                && Some(r.identity()) != leader
                && !self.is_passed_over(r.identity(), now)
                && !self.is_ghost(r)
            {
                before = Some(r);
            }
        }
        None
    }

    /// A leader this member saw give the lease up to another (it reads the blob; it does not
    /// list): until the next listing, the line is judged as if `old` had left it.
    pub fn gave_up(&mut self, old: &str) {
        if !self.former.iter().any(|f| f == old) {
            self.former.push(old.to_owned());
        }
    }

    /// The members in line strictly between `old` and `new` (none unless `old` comes first).
    pub fn between(&self, old: &str, new: &str) -> Vec<String> {
        let at = |id: &str| self.members.iter().position(|r| r.identity() == id);
        match (at(old), at(new)) {
            (Some(o), Some(n)) if o < n => self.members[o + 1..n]
                .iter()
                .map(|r| r.identity().to_owned())
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Whether the line as listed knows `identity`.
    pub fn knows(&self, identity: &str) -> bool {
        self.record_of(identity).is_some()
    }

    /// This member's place in line, from 1; `None` when not in it.
    pub fn position(&self) -> Option<usize> {
        self.members
            .iter()
            .filter(|r| r.is_alive())
            .position(|r| r.identity() == self.me)
            .map(|p| p + 1)
    }

    /// Takes a fresh listing, made at `now` (`wall`).
    pub fn listed(&mut self, mut records: Vec<R>, now: I, wall: R::Wall) {
        order(&mut records);
        let dead = |k: &R::Key| records.iter().any(|r| r.key() == k && !r.is_alive());
        self.dead_seen.retain(|k, _| dead(k));
        self.dead_since.retain(|k, _| dead(k));
        for r in records.iter().filter(|r| !r.is_alive()) {
            self.dead_seen.entry(r.key().clone()).or_insert(now);
            self.dead_since.entry(r.key().clone()).or_insert(wall);
        }
        self.ghosts.retain(|k, joined| {
            records
                .iter()
                .any(|r| r.key() == k && r.joined() == *joined)
        });
        // A member passed over before this member had its record: the pass-over is of the
        // record listed now.
        for (identity, (_, of)) in self
            .passed_over
            .iter_mut()
            .filter(|(_, (_, of))| of.is_none())
        {
            *of = records
                .iter()
                .find(|r| r.identity() == identity)
                .map(Record::joined);
        }
        self.members = records;
        self.listed = Some(now);
        self.listed_in_term = self.terms_begun;
        self.former.clear();
        self.led_since.clear();
    }

    /// Whether the line was listed since this member's last term began: before that listing
    /// (`Pace::TERM_START_QUIET` into the term) it is a poller's line, which may still name the
    /// leader before it (gone since) as its successor and miss members that joined since.
    pub fn listed_this_term(&self) -> bool {
        self.listed_in_term == self.terms_begun
    }

    /// This member holds its record's lease (renewed, or taken back after it lapsed): its own
    /// entry, which a listing during a lapse showed expired, is alive (its place is the
    /// record's, kept). Without this, the line would count this member out of its own place
    /// until its next listing, and it would not move up when the member ahead of it leads
    /// (rule (f) of docs/safety.md).
    pub fn own_record_held(&mut self) {
        let me = self.me.as_str();
        if let Some(r) = self.members.iter_mut().find(|r| r.identity() == me) {
            r.set_alive();
        }
    }

    /// Takes a fresh read of one member's record (the rest of the line as last listed).
    pub fn refresh(&mut self, record: R) {
        if let Some(r) = self.members.iter_mut().find(|r| r.key() == record.key()) {
            *r = record;
        }
    }

    /// Takes a fresh listing of the slot blobs; slot 0's holder is the leader people see. A
    /// member it shows holding a slot took a lease since it was passed over: it is not passed
    /// over now, as for a leader seen in a read of the lease blob ([`Line::read`]).
    pub fn slots_listed(&mut self, slots: Vec<S>) {
        if !self.leading
            && let Some(zero) = slots.iter().find(|s| s.slot() == 0)
        {
            self.leader = zero.held_by().map(str::to_owned);
        }
        for holder in slots.iter().filter_map(SlotBlob::held_by) {
            self.passed_over.remove(holder);
        }
        self.slot_states = slots;
    }

    /// Takes what a read of the lease blob at `now` said of its holder and notice.
    pub fn read(&mut self, seen: BlobSeen<'_>, now: I) {
        self.leader = seen.leader.map(str::to_owned);
        self.last_leader = seen.named.map(str::to_owned);
        // A member seen leading took a lease since it was passed over: it is not passed over
        // now (a mark made from a view that a fault cut short would else outlive the fault).
        if let Some(leader) = &self.leader {
            self.passed_over.remove(leader);
        }
        self.notice = seen.notice.map(str::to_owned);
        for identity in seen.passed_over {
            self.pass_over(identity, now);
        }
    }

    /// Records dead for longer than [`Pace::DEAD_RECORD_AGE`] at `now`, as this member has seen
    /// them.
    pub fn long_dead(&self, now: I) -> impl Iterator<Item = &R> {
        self.members.iter().filter(move |r| {
            !r.is_alive()
                && self
                    .dead_seen
                    .get(r.key())
                    .is_some_and(|at| now >= *at + Pace::DEAD_RECORD_AGE)
        })
    }
}

/// Slots (docs/slots.md).
impl<I: Moment, R: Record, S: SlotBlob<Wall = R::Wall>> Line<I, R, S> {
    /// Whether `identity` holds a slot, as this member knows.
    pub fn holds_slot(&self, identity: &str) -> bool {
        if identity == self.me {
            return self.holding.is_some();
        }
        self.led_since.iter().any(|l| l == identity)
            || self
                .slot_states
                .iter()
                .any(|s| s.slot() < self.slots && s.held_by() == Some(identity))
    }

    /// Slot `slot` is held by `identity` from `wall` (`None`: by nobody), as this member learnt
    /// without a listing.
    pub fn set_slot_holder(&mut self, slot: u32, identity: Option<&str>, wall: R::Wall) {
        let at = match self.slot_states.iter().position(|s| s.slot() == slot) {
            Some(at) => at,
            None => {
                self.slot_states.push(S::free(slot));
                self.slot_states.len() - 1
            }
        };
        self.slot_states[at].set_held_by(identity, wall, self.slots);
    }

    /// Whether the group counts other slots than this member, by what slot 0 `recorded` when it
    /// was found free (or handed to this member): that last count stands only while a live
    /// member other than this one still counts it (a group stopped and restarted with another
    /// count takes the new one).
    pub fn counts_otherwise(&self, recorded: Option<u32>) -> Option<u32> {
        let counted = |n: u32| {
            (self.members.iter()).any(|r| r.is_alive() && r.slots() == n && r.identity() != self.me)
        };
        recorded.filter(|n| *n != self.slots && counted(*n))
    }

    /// Whether slot `slot` was held at the last look.
    pub fn slot_held(&self, slot: u32) -> bool {
        self.slot_states
            .iter()
            .any(|s| s.slot() == slot && s.is_leased())
    }

    /// How many of the N slots nobody held at the last look.
    pub fn free_slots(&self) -> u32 {
        let held = (0..self.slots).filter(|i| self.slot_held(*i)).count() as u32;
        self.slots.saturating_sub(held)
    }

    /// The members that hold no slot and may take one, in line: alive, not in a cooldown at
    /// `wall`, counting the slots this member counts.
    pub fn waiting(&self, wall: R::Wall) -> Vec<&str> {
        self.waiting_in_line(wall).collect()
    }

    /// [`Line::waiting`], in line, without their list (a member's place is asked at every
    /// step of its campaign).
    fn waiting_in_line(&self, wall: R::Wall) -> impl Iterator<Item = &str> {
        self.members
            .iter()
            .filter(move |r| {
                r.is_alive()
                    && !r.in_standby(wall)
                    && r.slots() == self.slots
                    && !self.holds_slot(r.identity())
                    && !self.is_ghost(r)
            })
            .map(Record::identity)
    }

    /// The members that poll: the first F that hold no slot, F = max(1, free slots).
    pub fn pollers(&self, wall: R::Wall) -> Vec<&str> {
        self.polling(wall).collect()
    }

    /// [`Line::pollers`], without their list.
    fn polling(&self, wall: R::Wall) -> impl Iterator<Item = &str> {
        let f = self.free_slots().max(1) as usize;
        self.waiting_in_line(wall).take(f)
    }

    /// The member just ahead of this one among those waiting for a slot: the one whose record
    /// it watches. `None` when this member is first, or not waiting.
    pub fn predecessor(&self, wall: R::Wall) -> Option<&str> {
        let waiting = self.waiting(wall);
        let at = waiting.iter().position(|id| *id == self.me)?;
        at.checked_sub(1).map(|p| waiting[p])
    }

    /// Which of `n` slots a round tries first: those free at the last look, then the rest.
    pub fn round_order(&self, n: u32) -> Vec<u32> {
        let (mut free, taken): (Vec<u32>, Vec<u32>) = (0..n).partition(|i| !self.slot_held(*i));
        free.extend(taken);
        free
    }

    /// The slots a poller's round tries, in order, of `n`: after a listing of its own
    /// (`listed`: past [`ACQUIRE_ALL_UP_TO`](crate::slots::ACQUIRE_ALL_UP_TO) slots), only
    /// those free or handed to this member; else every slot, those free at the last look
    /// first. `refill_late` is the mutant `slot-refill-late`: only as many as the last look
    /// showed free.
    pub fn slots_to_try(&self, n: u32, listed: bool, refill_late: bool) -> Vec<u32> {
        if listed {
            let open = |i: &u32| {
                let state = self.slot_states.iter().find(|s| s.slot() == *i);
                state.is_none_or(|s| !s.is_leased() || s.successor() == Some(self.me.as_str()))
            };
            return (0..n).filter(open).collect();
        }
        let order = self.round_order(n);
        match refill_late {
            true => order.into_iter().take(self.free_slots() as usize).collect(),
            false => order,
        }
    }
}
