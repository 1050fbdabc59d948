//! What slots add to a member (docs/slots.md): the group's count as slot 0 records it, and the
//! watch a member waiting for a slot keeps on the record of the member just ahead of it.
//!
//! - [`Count`]: whether this member counts the slots its group counts. The group's count is what
//!   the holder of slot 0 recorded (absent: 1) while slot 0 is leased; a member that counts
//!   otherwise does not campaign, and looks again every
//!   [`Pace::MISMATCH_RECHECK`](crate::Pace::MISMATCH_RECHECK).
//! - [`PollRound`]: a poller's round, the slots tried one by one in the line's order.
//! - [`WaitRound`]: the round of a member waiting for a slot, by [`AheadWatch`].
//! - [`AheadWatch`]: a member that does not poll reads the record of the member ahead of it and
//!   lists the line only when that record changed (the member won a slot and published a new
//!   lease id) or died, so that one listing per change, by the one member it concerns, moves the
//!   line on.

use crate::failure::Failure;

/// Up to this many slots, a poller's round acquires on every slot (N acquires); past it, it
/// lists the group first (a listing is priced as about ten acquires) and then tries only the
/// free slots ([`Line::slots_to_try`](crate::line::Line::slots_to_try)).
pub const ACQUIRE_ALL_UP_TO: u32 = 10;

/// The count a blob's holder recorded (`recorded`: its `leasehold_slots`, `None` when absent;
/// `led`: whether a leader ever wrote the blob): `None` on a blob no leader wrote.
pub fn recorded(led: bool, recorded: Option<u32>) -> Option<u32> {
    led.then(|| recorded.unwrap_or(1))
}

/// What a holder of a member counting `slots` records of the count: nothing with one slot, so
/// that one slot writes what it always wrote.
pub fn to_record(slots: u32) -> Option<u32> {
    (slots != 1).then_some(slots)
}

/// The group's count beside this member's, as slot 0 last showed it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Count {
    /// The group's count while it differs from this member's.
    pub mismatch: Option<u32>,
}

/// What a look at slot 0 changed of the count ([`Count::note`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CountChange {
    /// A mismatch began: the group counts this many (say so once, loudly).
    Began(u32),
    /// A mismatch goes on.
    Goes(u32),
    /// The mismatch with this count is over: campaign again.
    Ended(u32),
    /// The counts match, as they did.
    Matches,
}

impl Count {
    /// Takes what slot 0 says of the group's count (`recorded`, by [`recorded`]; `leased`: slot 0
    /// is leased, so the count stands: only while its lease is held) beside this member's
    /// (`configured`, its `[lease].slots`).
    pub fn note(&mut self, configured: u32, recorded: Option<u32>, leased: bool) -> CountChange {
        let group = recorded.filter(|n| leased && *n != configured);
        let was = std::mem::replace(&mut self.mismatch, group);
        match (was, group) {
            (Some(was), Some(now)) if was == now => CountChange::Goes(now),
            (_, Some(now)) => CountChange::Began(now),
            (Some(was), None) => CountChange::Ended(was),
            (None, None) => CountChange::Matches,
        }
    }

    /// Whether this member counts otherwise than its group (it does not campaign).
    pub fn mismatched(&self) -> bool {
        self.mismatch.is_some()
    }
}

/// What a member waiting for a slot saw last of the record of the member ahead of it: whose
/// record (`K`), at which version (`E`, its ETag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AheadWatch<K, E> {
    seen: Option<(K, E)>,
}

impl<K, E> Default for AheadWatch<K, E> {
    fn default() -> Self {
        Self { seen: None }
    }
}

/// What one read of the record ahead calls for ([`AheadWatch::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ahead {
    /// The record changed (the member won a slot, or joined again): list the line, and take the
    /// version as seen only once that listing is (a failed listing leaves the change to be seen
    /// again next round).
    Changed,
    /// The record is the same, and its member is alive: nothing to list. (Whether its process
    /// still answers is the probe's to say.)
    Same,
    /// The record is the same, and its member is dead (its record's lease is gone): list.
    Dead,
}

impl<K: PartialEq, E: PartialEq> AheadWatch<K, E> {
    /// A read of `ahead`'s record found it at `version`, leased (`alive`) or not; `listed` is the
    /// version the last listing showed. The first read of a member's record is compared with
    /// the listing's: taken as the baseline, a change made between the listing and this read
    /// (the member winning a slot) would never be seen, and the line would stand still.
    pub fn read(&self, ahead: &K, version: &E, listed: Option<&E>, alive: bool) -> Ahead {
        let changed = match &self.seen {
            Some((key, seen)) if key == ahead => seen != version,
            _ => listed.is_some_and(|listed| listed != version),
        };
        match (changed, alive) {
            (true, _) => Ahead::Changed,
            (false, true) => Ahead::Same,
            (false, false) => Ahead::Dead,
        }
    }

    /// `ahead`'s record at `version` is seen (for a change: once the listing after it is).
    pub fn saw(&mut self, ahead: K, version: E) {
        self.seen = Some((ahead, version));
    }
}

/// A request of a poller's round ([`PollRound`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PollRequest<I> {
    /// List the line first (past [`ACQUIRE_ALL_UP_TO`] slots), cut at `until`.
    List {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Create the blob of this slot again, if this member found it deleted and is to: at once,
    /// so that its lock-delay (which counts from its creation for the members that find it
    /// marked) does not start only once this member's own is over.
    Recreate(u32),
    /// Read this slot's blob during its lock-delay (deleted again, the delay begins again).
    Look(u32),
    /// An acquisition attempt on this slot ([`crate::attempt::Attempt`]).
    Try(u32),
}

/// What the driver of a poller's round reports.
#[derive(Debug, Clone)]
pub enum PollEvent<E> {
    /// The round begins.
    Start,
    /// The listing answered.
    Listed(Result<(), E>),
    /// The blob was created again, or not (the next rounds see to it).
    Recreated,
    /// The blob under a lock-delay was looked at.
    Looked,
    /// The attempt on the slot ended: `true` with a term.
    Tried(Result<bool, E>),
}

/// What the driver of a poller's round does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PollAction<I, E> {
    /// Send this request; then its [`PollEvent`].
    Send(PollRequest<I>),
    /// The round is over: `Ok(true)` with a term (the driver's), `Ok(false)` with none.
    Done(Result<bool, E>),
}

/// What a poller's round asks of the member it runs in, answered at the moment asked.
pub trait PollGrounds {
    /// The slots to try, in order (`listed`: just listed, only the free ones:
    /// [`Line::slots_to_try`](crate::line::Line::slots_to_try)).
    fn order(&mut self, listed: bool) -> Vec<u32>;
    /// Whether `slot`'s blob is under a lock-delay.
    fn delayed(&mut self, slot: u32) -> bool;
    /// Whether a look at `slot`'s blob under its lock-delay is due (one per watch period).
    fn look_due(&mut self, slot: u32) -> bool;
    /// Whether this member counts other slots than its group (the attempt just read slot 0).
    fn mismatched(&mut self) -> bool;
}

/// One round of a poller (docs/slots.md): the slots one by one, in the line's order, until one
/// is won; past [`ACQUIRE_ALL_UP_TO`] slots, one listing first and then only the free slots. A
/// slot under a lock-delay is not acquired: its blob is created again if this member is to,
/// and looked at every watch period. An error ends the round (an acquire without an answer
/// keeps this member out of every slot until it is settled), and so does a count of slots that
/// differs from the group's.
#[derive(Debug)]
pub struct PollRound {
    request_timeout: std::time::Duration,
    /// Whether it lists first.
    lists: bool,
    /// The slots left to try, the next one last.
    left: Vec<u32>,
    /// The slot under a lock-delay being seen to.
    delayed: Option<u32>,
}

impl PollRound {
    /// The round of a member with `slots` slots (`member`: one in the line, which can list).
    pub fn new(timing: &crate::Timing, slots: u32, member: bool) -> Self {
        Self {
            request_timeout: timing.request_timeout(),
            lists: member && slots > ACQUIRE_ALL_UP_TO,
            left: Vec::new(),
            delayed: None,
        }
    }

    /// The one transition: `event` came at `now`. Returns the next request, or the round's end
    /// (`Ok(true)`: a slot was won, its term is the driver's).
    pub fn step<I: crate::Moment, E>(
        &mut self,
        now: I,
        event: PollEvent<E>,
        grounds: &mut impl PollGrounds,
    ) -> PollAction<I, E> {
        match event {
            PollEvent::Start if self.lists => {
                let until = now + self.request_timeout;
                return PollAction::Send(PollRequest::List { until });
            }
            PollEvent::Start => self.order(grounds.order(false)),
            PollEvent::Listed(Err(e)) => return PollAction::Done(Err(e)),
            PollEvent::Listed(Ok(())) => self.order(grounds.order(true)),
            PollEvent::Recreated => {
                let slot = self.delayed.take();
                if let Some(slot) = slot.filter(|&s| grounds.look_due(s)) {
                    return PollAction::Send(PollRequest::Look(slot));
                }
            }
            PollEvent::Looked => {}
            PollEvent::Tried(Ok(true)) => return PollAction::Done(Ok(true)),
            PollEvent::Tried(Ok(false)) if grounds.mismatched() => {
                return PollAction::Done(Ok(false));
            }
            PollEvent::Tried(Ok(false)) => {}
            PollEvent::Tried(Err(e)) => return PollAction::Done(Err(e)),
        }
        self.next(grounds)
    }

    fn order(&mut self, mut order: Vec<u32>) {
        order.reverse();
        self.left = order;
    }

    /// The next slot: seen to under its lock-delay, or tried; none left, the round is over
    /// with every slot held.
    fn next<I, E>(&mut self, grounds: &mut impl PollGrounds) -> PollAction<I, E> {
        let Some(slot) = self.left.pop() else {
            return PollAction::Done(Ok(false));
        };
        if grounds.delayed(slot) {
            self.delayed = Some(slot);
            return PollAction::Send(PollRequest::Recreate(slot));
        }
        PollAction::Send(PollRequest::Try(slot))
    }
}

/// A request of the round of a member waiting for a slot ([`WaitRound`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitRequest<I, K> {
    /// List the line, cut at `until`.
    List {
        /// No answer by then is a timeout.
        until: I,
    },
    /// Read the record of the member ahead, cut at `until`.
    Read {
        /// Whose record.
        ahead: K,
        /// No answer by then is a timeout.
        until: I,
    },
    /// Probe the URL of the member ahead with its wake token: whether its process is gone (its
    /// URL answers for another process, or for none). A member without a URL, or one that does
    /// not answer in time (frozen, or its network slow), stands.
    Probe(K),
}

/// What the driver of a waiting member's round reports.
#[derive(Debug, Clone)]
pub enum WaitEvent<V, E> {
    /// The round begins.
    Start,
    /// The listing answered.
    Listed(Result<(), E>),
    /// The record ahead was read: whether its lease is held, and its version.
    Read(Result<(bool, V), E>),
    /// The probe answered: whether the process of the member ahead is gone (then the line
    /// already passes its record over).
    Probed(bool),
}

/// What the driver of a waiting member's round does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WaitAction<I, K, E> {
    /// Send this request; then its [`WaitEvent`].
    Send(WaitRequest<I, K>),
    /// Storage answered: the credentials are good.
    Authorized,
    /// The line changed: show it.
    ShowLine,
    /// The round is over: this member's place now.
    Done(Result<crate::Place, E>),
}

/// What a waiting member's round asks of the member it runs in, answered at the moment asked.
pub trait WaitGrounds<K, V> {
    /// The member just ahead of this one among those waiting, as the line says now.
    fn predecessor(&mut self) -> Option<K>;
    /// The version of `ahead`'s record the last listing showed.
    fn listed(&mut self, ahead: &K) -> Option<V>;
    /// This member's place in line now.
    fn place(&mut self) -> crate::Place;
    /// How many members the line lists.
    fn members(&mut self) -> usize;
}

/// Where a waiting member's round stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Waiting<K, V> {
    Begin,
    /// Listing, as nobody is ahead while this member does not poll (the line is out of date).
    ListingAlone,
    Reading(K),
    Probing(K, V),
    /// Listing after the record ahead changed, taking its version as seen once listed.
    ListingChanged(K, V),
    /// Listing after the member ahead died.
    ListingDead,
    Over,
}

/// One round of a member waiting for a slot that does not poll (docs/slots.md): one read of
/// the record of the member just ahead of it ([`AheadWatch`]); when that record changed (that
/// member won a slot, and published a new lease id) or its member died, one listing; when it
/// is the same, a probe of its process. A listing that shows a new member ahead is followed at
/// once by that member's read (a crashed slot holder whose lease ran out stands ahead in line
/// as a waiter, and a watch period more before its probe would come on top of the lease
/// running out); at most one read per member in line.
#[derive(Debug)]
pub struct WaitRound<K, V> {
    request_timeout: std::time::Duration,
    stage: Waiting<K, V>,
    /// Reads left in this round.
    reads_left: usize,
    /// The member ahead when the last read began.
    before: Option<K>,
}

impl<K: Clone + PartialEq + std::fmt::Debug, V: Clone + PartialEq + std::fmt::Debug>
    WaitRound<K, V>
{
    /// A round with `timing`.
    pub fn new(timing: &crate::Timing) -> Self {
        Self {
            request_timeout: timing.request_timeout(),
            stage: Waiting::Begin,
            reads_left: 0,
            before: None,
        }
    }

    /// The one transition: `event` came at `now`; `watch` is what this member saw of the
    /// record ahead so far. Returns what to do, the last action being a request (whose answer
    /// is the next event) or [`WaitAction::Done`].
    pub fn step<I: crate::Moment, E: crate::StoreFailure>(
        &mut self,
        now: I,
        event: WaitEvent<V, E>,
        watch: &mut AheadWatch<K, V>,
        grounds: &mut impl WaitGrounds<K, V>,
    ) -> Vec<WaitAction<I, K, E>> {
        let until = now + self.request_timeout;
        let mut actions = Vec::new();
        let stage = std::mem::replace(&mut self.stage, Waiting::Over);
        match (stage, event) {
            (Waiting::Begin, WaitEvent::Start) => {
                self.reads_left = grounds.members() + 1;
                self.read(until, grounds, &mut actions);
            }
            (Waiting::ListingAlone, WaitEvent::Listed(Ok(()))) => {
                actions.push(WaitAction::Authorized);
                self.placed(until, grounds, &mut actions);
            }
            (Waiting::Reading(ahead), WaitEvent::Read(Ok((leased, version)))) => {
                actions.push(WaitAction::Authorized);
                let listed = grounds.listed(&ahead);
                match watch.read(&ahead, &version, listed.as_ref(), leased) {
                    Ahead::Same => {
                        self.stage = Waiting::Probing(ahead.clone(), version);
                        actions.push(WaitAction::Send(WaitRequest::Probe(ahead)));
                    }
                    Ahead::Dead => {
                        watch.saw(ahead, version);
                        self.list(Waiting::ListingDead, until, &mut actions);
                    }
                    Ahead::Changed => {
                        self.list(Waiting::ListingChanged(ahead, version), until, &mut actions)
                    }
                }
            }
            (Waiting::Reading(_), WaitEvent::Read(Err(e))) if e.failure() == Failure::Missing => {
                self.list(Waiting::ListingDead, until, &mut actions)
            }
            (Waiting::Probing(ahead, version), WaitEvent::Probed(gone)) => {
                if !gone {
                    watch.saw(ahead, version);
                }
                self.placed(until, grounds, &mut actions);
            }
            (Waiting::ListingChanged(ahead, version), WaitEvent::Listed(Ok(()))) => {
                actions.push(WaitAction::ShowLine);
                watch.saw(ahead, version);
                self.placed(until, grounds, &mut actions);
            }
            (Waiting::ListingDead, WaitEvent::Listed(Ok(()))) => {
                actions.push(WaitAction::ShowLine);
                self.placed(until, grounds, &mut actions);
            }
            (_, WaitEvent::Listed(Err(e)) | WaitEvent::Read(Err(e))) => {
                actions.push(WaitAction::Done(Err(e)))
            }
            (stage, event) => {
                debug_assert!(false, "a waiting round at {stage:?} got {event:?}")
            }
        }
        actions
    }

    /// One read of the record ahead; nobody ahead, a listing (the line is out of date).
    fn read<I, E>(
        &mut self,
        until: I,
        grounds: &mut impl WaitGrounds<K, V>,
        actions: &mut Vec<WaitAction<I, K, E>>,
    ) {
        self.reads_left -= 1;
        self.before = grounds.predecessor();
        match self.before.clone() {
            Some(ahead) => {
                self.stage = Waiting::Reading(ahead.clone());
                actions.push(WaitAction::Send(WaitRequest::Read { ahead, until }));
            }
            None => self.list(Waiting::ListingAlone, until, actions),
        }
    }

    fn list<I, E>(
        &mut self,
        then: Waiting<K, V>,
        until: I,
        actions: &mut Vec<WaitAction<I, K, E>>,
    ) {
        self.stage = then;
        actions.push(WaitAction::Send(WaitRequest::List { until }));
    }

    /// A read is over with this member's place: still watching, with a new member ahead since
    /// the read began, that one is read at once (while reads are left); else the round ends.
    fn placed<I, E>(
        &mut self,
        until: I,
        grounds: &mut impl WaitGrounds<K, V>,
        actions: &mut Vec<WaitAction<I, K, E>>,
    ) {
        let place = grounds.place();
        let after = grounds.predecessor();
        let again = place == crate::Place::Watch
            && after.is_some()
            && after != self.before
            && self.reads_left > 0;
        if again {
            return self.read(until, grounds, actions);
        }
        self.stage = Waiting::Over;
        actions.push(WaitAction::Done(Ok(place)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_group_counts_what_slot_0_records_while_leased() {
        assert_eq!(recorded(false, None), None, "no leader wrote it");
        assert_eq!(recorded(true, None), Some(1), "absent: one slot");
        assert_eq!(recorded(true, Some(3)), Some(3));
        assert_eq!(to_record(1), None);
        assert_eq!(to_record(4), Some(4));

        let mut count = Count::default();
        assert_eq!(count.note(3, Some(3), true), CountChange::Matches);
        assert_eq!(
            count.note(3, Some(2), false),
            CountChange::Matches,
            "not leased"
        );
        assert_eq!(count.note(3, Some(2), true), CountChange::Began(2));
        assert!(count.mismatched());
        assert_eq!(count.note(3, Some(2), true), CountChange::Goes(2));
        assert_eq!(
            count.note(3, Some(4), true),
            CountChange::Began(4),
            "another count"
        );
        assert_eq!(count.note(3, None, true), CountChange::Ended(4));
        assert!(!count.mismatched());
        assert_eq!(count.note(3, Some(2), true), CountChange::Began(2));
        assert_eq!(
            count.note(3, Some(2), false),
            CountChange::Ended(2),
            "slot 0 free"
        );
    }

    #[test]
    fn the_record_ahead_is_listed_after_only_when_it_changed_or_died() {
        let mut w = AheadWatch::<&str, u32>::default();
        // The first read compares with the listing.
        assert_eq!(w.read(&"a", &1, Some(&1), true), Ahead::Same);
        assert_eq!(w.read(&"a", &2, Some(&1), true), Ahead::Changed);
        assert_eq!(
            w.read(&"a", &1, None, true),
            Ahead::Same,
            "not in the listing"
        );
        assert_eq!(w.read(&"a", &1, Some(&1), false), Ahead::Dead);
        w.saw("a", 1);
        // Then with what was seen, whatever the listing says.
        assert_eq!(w.read(&"a", &1, Some(&7), true), Ahead::Same);
        assert_eq!(w.read(&"a", &2, Some(&7), false), Ahead::Changed);
        // Another member ahead: the listing again.
        assert_eq!(w.read(&"b", &5, Some(&5), true), Ahead::Same);
        assert_eq!(w.read(&"b", &6, Some(&5), true), Ahead::Changed);
    }

    /// A member around a poller's round: its order, the slots under a lock-delay, whether its
    /// count differs.
    struct Poller {
        order: Vec<u32>,
        delayed: Vec<u32>,
        mismatched: bool,
        listed: Option<bool>,
    }

    impl PollGrounds for Poller {
        fn order(&mut self, listed: bool) -> Vec<u32> {
            self.listed = Some(listed);
            self.order.clone()
        }
        fn delayed(&mut self, slot: u32) -> bool {
            self.delayed.contains(&slot)
        }
        fn look_due(&mut self, _: u32) -> bool {
            true
        }
        fn mismatched(&mut self) -> bool {
            self.mismatched
        }
    }

    type Action = PollAction<std::time::Instant, ()>;

    fn poller(order: Vec<u32>, delayed: Vec<u32>) -> Poller {
        Poller {
            order,
            delayed,
            mismatched: false,
            listed: None,
        }
    }

    /// The slots are tried in the line's order until one is won; one under a lock-delay is
    /// created again and looked at, not tried.
    #[test]
    fn a_poller_tries_the_slots_in_order_and_sees_to_the_delayed_ones() {
        let now = std::time::Instant::now();
        let mut g = poller(vec![2, 0, 1], vec![0]);
        let mut r = PollRound::new(&crate::Timing::default(), 3, true);
        let mut step = |e: PollEvent<()>| r.step(now, e, &mut g);
        assert_eq!(step(PollEvent::Start), Action::Send(PollRequest::Try(2)));
        let next = step(PollEvent::Tried(Ok(false)));
        assert_eq!(next, Action::Send(PollRequest::Recreate(0)));
        assert_eq!(
            step(PollEvent::Recreated),
            Action::Send(PollRequest::Look(0))
        );
        assert_eq!(step(PollEvent::Looked), Action::Send(PollRequest::Try(1)));
        assert_eq!(step(PollEvent::Tried(Ok(true))), Action::Done(Ok(true)));
        assert_eq!(g.listed, Some(false), "up to ten slots, no listing");
    }

    /// Past ten slots the round lists first and tries what the listing shows free; every slot
    /// held ends it with none, and so does a count that differs from the group's.
    #[test]
    fn a_poller_of_many_slots_lists_first_and_stops_at_a_mismatch() {
        let now = std::time::Instant::now();
        let rt = crate::Timing::default().request_timeout();
        let mut g = poller(vec![4, 7], vec![]);
        let mut r = PollRound::new(&crate::Timing::default(), 11, true);
        let list = r.step(now, PollEvent::<()>::Start, &mut g);
        assert_eq!(list, Action::Send(PollRequest::List { until: now + rt }));
        assert_eq!(
            r.step(now, PollEvent::Listed(Ok(())), &mut g),
            Action::Send(PollRequest::Try(4))
        );
        assert_eq!(g.listed, Some(true));
        g.mismatched = true;
        assert_eq!(
            r.step(now, PollEvent::Tried(Ok(false)), &mut g),
            Action::Done(Ok(false))
        );
        let mut r = PollRound::new(&crate::Timing::default(), 2, false);
        let mut g = poller(vec![0, 1], vec![]);
        r.step(now, PollEvent::<()>::Start, &mut g);
        r.step(now, PollEvent::<()>::Tried(Ok(false)), &mut g);
        let end = r.step(now, PollEvent::Tried(Ok(false)), &mut g);
        assert_eq!(end, Action::Done(Ok(false)));
    }

    /// A line as a waiting member's round sees it: who is ahead (changing after a listing),
    /// the versions listed, the place.
    struct Waiter {
        ahead: Vec<Option<&'static str>>,
        listed: Option<u32>,
        place: crate::Place,
    }

    impl WaitGrounds<&'static str, u32> for Waiter {
        fn predecessor(&mut self) -> Option<&'static str> {
            self.ahead[0]
        }
        fn listed(&mut self, _: &&'static str) -> Option<u32> {
            self.listed
        }
        fn place(&mut self) -> crate::Place {
            self.place
        }
        fn members(&mut self) -> usize {
            3
        }
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Gone;

    impl crate::StoreFailure for Gone {
        fn failure(&self) -> Failure {
            Failure::Missing
        }
    }

    type Wait = WaitAction<std::time::Instant, &'static str, Gone>;

    /// Now, and a request's cut-off sent now.
    fn at_once() -> (std::time::Instant, std::time::Instant) {
        let now = std::time::Instant::now();
        (now, now + crate::Timing::default().request_timeout())
    }

    /// A member watching, behind `b` as listed at version 1.
    fn behind_b() -> Waiter {
        Waiter {
            ahead: vec![Some("b")],
            listed: Some(1),
            place: crate::Place::Watch,
        }
    }

    /// The record ahead the same and its process there: nothing listed, the version seen; then
    /// changed: one listing, and the new member ahead it shows read at once.
    #[test]
    fn a_waiting_member_lists_only_when_the_record_ahead_changed() {
        let (now, until) = at_once();
        let (mut w, mut g) = (AheadWatch::default(), behind_b());
        let mut r = WaitRound::new(&crate::Timing::default());
        let read = r.step(now, WaitEvent::<u32, Gone>::Start, &mut w, &mut g);
        let read_b = WaitRequest::Read { ahead: "b", until };
        assert_eq!(read, [Wait::Send(read_b.clone())]);
        let probe = r.step(now, WaitEvent::Read(Ok((true, 1))), &mut w, &mut g);
        assert_eq!(
            probe,
            [Wait::Authorized, Wait::Send(WaitRequest::Probe("b"))]
        );
        let end = r.step(now, WaitEvent::Probed(false), &mut w, &mut g);
        assert_eq!(end, [Wait::Done(Ok(crate::Place::Watch))]);

        let mut r = WaitRound::new(&crate::Timing::default());
        r.step(now, WaitEvent::<u32, Gone>::Start, &mut w, &mut g);
        let list = r.step(now, WaitEvent::Read(Ok((true, 2))), &mut w, &mut g);
        assert_eq!(
            list,
            [Wait::Authorized, Wait::Send(WaitRequest::List { until })]
        );
        g.ahead = vec![Some("c")];
        let again = r.step(now, WaitEvent::Listed(Ok(())), &mut w, &mut g);
        let read_c = WaitRequest::Read { ahead: "c", until };
        assert_eq!(again, [Wait::ShowLine, Wait::Send(read_c)]);
    }

    /// A record ahead that is gone calls for a listing; nobody ahead of a member that does not
    /// poll, too (its line is out of date); a failed listing ends the round with its error.
    #[test]
    fn a_waiting_member_lists_when_the_member_ahead_is_gone() {
        let (now, until) = at_once();
        let (mut w, mut g) = (AheadWatch::default(), behind_b());
        let mut r = WaitRound::new(&crate::Timing::default());
        r.step(now, WaitEvent::<u32, Gone>::Start, &mut w, &mut g);
        let list = r.step(now, WaitEvent::Read(Err(Gone)), &mut w, &mut g);
        assert_eq!(list, [Wait::Send(WaitRequest::List { until })]);
        let failed = r.step(now, WaitEvent::Listed(Err(Gone)), &mut w, &mut g);
        assert_eq!(failed, [Wait::Done(Err(Gone))]);

        g.ahead = vec![None];
        let mut r = WaitRound::new(&crate::Timing::default());
        let list = r.step(now, WaitEvent::<u32, Gone>::Start, &mut w, &mut g);
        assert_eq!(list, [Wait::Send(WaitRequest::List { until })]);
        g.place = crate::Place::Poll;
        let end = r.step(now, WaitEvent::Listed(Ok(())), &mut w, &mut g);
        assert_eq!(end, [Wait::Authorized, Wait::Done(Ok(crate::Place::Poll))]);
    }
}
