//! One attempt to win the group's lease on a majority of its replicas, as a state machine over
//! the exchange ([`crate::exchange`]), keeping the rules of quorum.rs's top doc: the acquires go
//! to every replica side by side, each cut at its own limit; each replica won is read (its epoch
//! counts only if read at or after the acquire there, its stamp must be the set's, its age puts
//! it under a lock-delay); once every acquire and read settled, the replicas that count
//! ([`count`]) give the term's epoch ([`new_epoch`]), written to every replica held
//! ([`to_write`]); the term is won once a majority confirmed the write and the k-th latest
//! deadline of the replicas that count is at least `G` away. Once a majority counts, the acquires
//! still on their way are awaited as long again as the round took, then cut, so that a replica
//! out of reach does not hold up an election by `R`. A minority won is a split vote
//! ([`split_vote`]): retried once by the member holding the first replica that answered, yielded
//! with a growing pause ([`split_pause`]) by every other. Nor does a replica out of reach hold
//! up a round whose outcome the answers heard decide ([`before_settled`]): a member yields at
//! once if a replica earlier than any it won refused it; the member that retries whatever comes
//! retries the replicas that refused it as long again as its round took after; an attempt no
//! answer on its way can give a majority awaits them that long, then gives up. A member that
//! gives up releases
//! every replica it holds or may hold ([`to_release`]); an answer heard after its limit counts
//! for nobody, and a lease it says was won is released at once.
//!
//! # A set of one
//!
//! With a set of one it keeps today's rules of the single lease ([`crate::attempt`]), step for
//! step: the acquire cut at `R` from its send ([`Awaited::Acquire`](crate::attempt::Awaited));
//! a refusal ends it ([`Why::NoneWon`](super::Why), `Outcome::Held` there); a missing blob is
//! created again and this attempt fails (`Request::Recreate` there); the read after the acquire
//! (`Beside::Nothing` there); the lock-delay the member's own, asked after the read
//! ([`Grounds::single_lock_delay`], `Grounds::delayed` there: [`Why::TooFew`](super::Why),
//! `GaveBack::LockDelay` there); the epoch [`epoch::next`](crate::epoch::next) of what the blob
//! carries (not the member's seen epoch, not the wall clock unless the blob has none); a
//! shutdown asked after the epoch, giving the lease back before its write; the write cut at
//! `R` and at the stop deadline, and confirmed strictly before that deadline; the term's
//! deadline from the acquire's send. Its blob needs no stamp. What it leaves to the member:
//! the lease id spent once a term is won or a lease given back (`Action::SpendId`), the
//! lock-delay's notes (`Action::Delay`: the replicas [`Attempt::outcomes`] says refused were
//! led), members passed over (`Grounds::pass_over`), and a late acquire's pause
//! ([`crate::late`]: here the late answer is awaited and a success released, but the member's
//! pause out of the election is its own). What the single attempt does and this one does not:
//! slots (`ReadCount`, `counts_otherwise`: slots with replicas are refused by `check`) and a
//! wake-up's acquire with a read or a reserved epoch's write beside it (`Beside::Read`,
//! `Beside::ReservedEpoch`: with replicas, a wake-up would carry one ETag a replica). One
//! step differs: an acquire without an answer by its limit ends the attempt as there
//! (`Outcome::NoAnswer`), but its replica is released at once (the rule *Counting*), not only
//! once a late answer says it was won.

use super::messages::{Failed, Grounds, Input, Output, Reply, Request, Settings, Unheld, Why, Won};
use super::rules::{
    Count, Early, Outcome, Read, Replica, Split, before_settled, count, new_epoch, split_pause,
    split_vote, to_release, to_write,
};
use crate::exchange::{Answer, Send, Tag, Tags, Waiting};
use crate::pace::Pace;
use crate::timing::{Deadline, Moment};
use std::time::Duration;

#[cfg(test)]
mod histories;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod world;

/// What a request on its way asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Acquire,
    Read,
    Write(u64),
}

/// A request on its way whose answer the attempt waits for.
#[derive(Debug, Clone, Copy)]
struct Flight<I> {
    tag: Tag,
    replica: usize,
    kind: Kind,
    sent: I,
    until: I,
}

impl<I> Flight<I> {
    fn acquires(&self, replica: usize) -> bool {
        self.replica == replica && self.kind == Kind::Acquire
    }
}

/// Where an attempt stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Begin,
    /// The acquires (and the reads of the replicas won) are on their way; `retried`: this is the
    /// retry of a split vote.
    Acquiring {
        retried: bool,
    },
    /// The term's epoch is being written.
    Writing(u64),
    /// The term was won with this epoch; writes still on their way may join it.
    Won(u64),
    /// Failed.
    Over,
}

/// One attempt on the replicas of a set.
#[derive(Debug)]
pub struct Attempt<I> {
    settings: Settings<I>,
    pace: Pace,
    replicas: Vec<Replica<I>>,
    /// What this round's acquire got from each replica (a split vote's retry keeps those won).
    outcomes: Vec<Outcome>,
    flights: Vec<Flight<I>>,
    /// Acquires whose answers came too late or not yet: a lease one says was won is released.
    late: Vec<(Tag, usize)>,
    tags: Tags,
    stage: Stage,
    /// When this round's acquires went out (a split vote's retry begins a round).
    round_sent: Option<I>,
    /// When a split vote decided before its round settled is retried ([`Early::Retry`]).
    retry_at: Option<I>,
    /// The replicas found missing and left so (no `create_if_missing`): [`Failed::missing`].
    missing: u8,
}

impl<I: Moment> Attempt<I> {
    /// An attempt with these settings; nothing goes out before [`Input::Start`].
    pub fn new(settings: Settings<I>) -> Self {
        let n = settings.set.len();
        debug_assert_eq!(settings.young_until.len(), n, "one lock-delay a place");
        let replicas = (0..n)
            .map(|i| Replica {
                young_until: settings.young_until.get(i).copied().flatten(),
                ..Replica::default()
            })
            .collect();
        Self {
            pace: Pace::new(&settings.timing),
            settings,
            replicas,
            outcomes: vec![Outcome::Unknown; n],
            flights: Vec::new(),
            late: Vec::new(),
            tags: Tags::default(),
            stage: Stage::Begin,
            round_sent: None,
            retry_at: None,
            missing: 0,
        }
    }

    /// What the attempt knows of each replica, in the set's order (the member keeps their
    /// lock-delays for its next attempt).
    pub fn replicas(&self) -> &[Replica<I>] {
        &self.replicas
    }

    /// What each replica's acquire got in the last round, in the set's order (the member notes
    /// the replicas refused as led, for their lock-delays).
    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    /// The acquires whose answers it still awaits after their limit, by its tags: once the
    /// attempt is over, whoever outlives it awaits them instead, and releases a lease one says
    /// was won (the rule *Counting*: a member that gives up releases every replica such a
    /// request reached, whenever its answer comes).
    pub fn late(&self) -> impl Iterator<Item = Tag> + '_ {
        self.late.iter().map(|(tag, _)| *tag)
    }

    /// Whether the attempt ended, won or failed (late answers may still come: a lease one says
    /// was won is released).
    pub fn is_over(&self) -> bool {
        matches!(self.stage, Stage::Won(_) | Stage::Over)
    }

    /// What ends its wait: the answers to its requests on their way and to acquires heard late
    /// or not yet, or the earliest limit of those on their way (or of its split vote's retry).
    pub fn awaits(&self) -> Waiting<I> {
        let answers = (self.flights.iter().map(|f| f.tag))
            .chain(self.late.iter().map(|(tag, _)| *tag))
            .collect();
        let retry = (self.stage == Stage::Acquiring { retried: false })
            .then_some(self.retry_at)
            .flatten();
        Waiting {
            answers,
            until: self.flights.iter().map(|f| f.until).chain(retry).min(),
        }
    }

    /// The one transition: `input` came at `now`. Returns the requests to send and how the
    /// attempt ended, if it did.
    pub fn handle(
        &mut self,
        now: I,
        input: Input<I>,
        grounds: &mut impl Grounds<I>,
    ) -> Vec<Output<I>> {
        let mut out = Vec::new();
        match input {
            Input::Start if self.stage == Stage::Begin => {
                for replica in 0..self.replicas.len() {
                    self.acquire(replica, now, &mut out);
                }
                self.stage = Stage::Acquiring { retried: false };
                self.round_sent = Some(now);
            }
            Input::Start => debug_assert!(false, "an attempt starts once"),
            Input::Timer => {
                let (due, open): (Vec<Flight<I>>, Vec<Flight<I>>) =
                    self.flights.iter().partition(|f| f.until <= now);
                self.flights = open;
                for flight in due {
                    // No answer by its limit: its outcome is unknown, and counts for nobody.
                    self.settle(now, flight, now, Reply::Unknown, grounds, &mut out);
                }
            }
            Input::Answer(answer) => self.answered(now, answer, grounds, &mut out),
        }
        self.advance(now, grounds, &mut out);
        out
    }

    fn answered(
        &mut self,
        now: I,
        answer: Answer<I, Reply>,
        grounds: &mut impl Grounds<I>,
        out: &mut Vec<Output<I>>,
    ) {
        if let Some(at) = self.late.iter().position(|(tag, _)| *tag == answer.tag) {
            let (_, replica) = self.late.remove(at);
            return self.heard_late(replica, answer.answer, out);
        }
        let Some(at) = self.flights.iter().position(|f| f.tag == answer.tag) else {
            return;
        };
        let flight = self.flights.remove(at);
        if now > flight.until {
            // Heard after its limit (before the timer said so): as if never heard.
            self.settle(now, flight, answer.sent, Reply::Unknown, grounds, out);
            return self.heard_late(flight.replica, answer.answer, out);
        }
        self.settle(now, flight, answer.sent, answer.answer, grounds, out);
    }

    /// An acquire answered after its limit, or after the attempt gave up: it counts for nobody,
    /// and a lease it won is released at once (the rule *Counting*), unless a later acquire there
    /// (a split vote's retry, under the same lease id) won it or is on its way: that one's
    /// deadline, from its later send, is the one counted, and a release would undo it.
    fn heard_late(&mut self, replica: usize, reply: Reply, out: &mut Vec<Output<I>>) {
        let held = self.replicas[replica].lease.is_some();
        let acquiring =
            (self.flights.iter()).any(|f| f.replica == replica && f.kind == Kind::Acquire);
        if reply == Reply::Done && !held && !acquiring {
            self.release(replica, out);
        }
    }

    /// What `flight`'s request (sent at `sent`) got, heard at `now`.
    fn settle(
        &mut self,
        now: I,
        flight: Flight<I>,
        sent: I,
        reply: Reply,
        grounds: &mut impl Grounds<I>,
        out: &mut Vec<Output<I>>,
    ) {
        let i = flight.replica;
        let timing = self.settings.timing;
        match (flight.kind, reply) {
            (Kind::Acquire, Reply::Done) => {
                // Its deadline counts from the send; a read sent from now on sees the blob at or
                // after the acquire.
                self.replicas[i].won(sent, now, &timing);
                self.outcomes[i] = Outcome::Won;
                self.send_read(i, now, out);
            }
            (Kind::Acquire, Reply::Refused) => {
                self.replicas[i].refused();
                self.outcomes[i] = Outcome::Refused;
            }
            (Kind::Acquire, Reply::Missing) if !self.settings.create_if_missing => {
                self.missing |= 1 << i;
                self.outcomes[i] = Outcome::Unknown;
            }
            (Kind::Acquire, Reply::Missing) => {
                // Created again now: it counts for nobody until it is `L + M` old.
                let lock_delay = self.pace.lock_delay() + Pace::SERVICE_CLOCK;
                if !self.settings.mutants.no_replica_lock_delay {
                    self.replicas[i].aged(now, Duration::ZERO, lock_delay);
                }
                self.outcomes[i] = Outcome::Unknown;
                let fingerprint = self.settings.set.fingerprint();
                self.send(
                    Request::Create {
                        replica: i,
                        fingerprint,
                    },
                    out,
                );
            }
            (Kind::Acquire, Reply::Unknown) if self.settings.mutants.count_unknown_outcome => {
                self.replicas[i].won(flight.sent, now, &timing);
                self.outcomes[i] = Outcome::Won;
                self.send_read(i, now, out);
            }
            (Kind::Acquire, _) => {
                self.replicas[i].unanswered();
                self.outcomes[i] = Outcome::Unknown;
                self.late.push((flight.tag, i));
            }
            (
                Kind::Read,
                Reply::Read {
                    epoch,
                    stamp,
                    age,
                    same_etag,
                },
            ) => {
                self.replicas[i].read(sent, same_etag, epoch, stamp);
                self.lock_delay(i, epoch, age, now, grounds);
            }
            (Kind::Read | Kind::Write(_), Reply::Refused | Reply::Missing) => {
                self.replicas[i].refused();
            }
            (Kind::Read, _) => {}
            (Kind::Write(epoch), Reply::Done) => self.replicas[i].written(epoch),
            (Kind::Write(epoch), Reply::Unknown) if self.settings.mutants.count_unknown_outcome => {
                self.replicas[i].written(epoch)
            }
            (Kind::Write(_), _) => self.replicas[i].unanswered(),
        }
        if let (Kind::Write(epoch), Stage::Won(won)) = (flight.kind, self.stage) {
            debug_assert_eq!(epoch, won, "one epoch an attempt");
            self.joined(i, epoch, now, out);
        }
    }

    /// The lock-delay a read of replica `i` shows (the rule *Lock-delay per replica*): a blob
    /// younger than `L + M` (and a second: the service's clock counts whole seconds) counts for
    /// nobody until it is that old, unless this member created every blob of a brand-new group;
    /// a set of one keeps the single lease's lock-delay, the member's.
    fn lock_delay(
        &mut self,
        i: usize,
        epoch: Option<u64>,
        age: Duration,
        now: I,
        grounds: &mut impl Grounds<I>,
    ) {
        let replica = &mut self.replicas[i];
        if self.settings.set.len() == 1 {
            replica.young_until = grounds.single_lock_delay(epoch, age, now);
        } else if self.settings.brand_new || self.settings.mutants.no_replica_lock_delay {
            replica.fresh();
        } else {
            replica.aged(now, age, self.pace.lock_delay() + Pace::SERVICE_CLOCK);
        }
    }

    /// Moves the attempt on once what it waits for has settled.
    fn advance(&mut self, now: I, grounds: &mut impl Grounds<I>, out: &mut Vec<Output<I>>) {
        match self.stage {
            Stage::Acquiring { retried } => {
                let won = self.outcomes.iter().filter(|o| **o == Outcome::Won).count();
                let minority = usize::from(self.settings.mutants.minority_leads);
                let majority = won >= self.settings.set.majority() - minority;
                if majority {
                    // A split vote it was to retry is no longer one.
                    self.retry_at = None;
                }
                if majority && !self.flights.is_empty() {
                    return self.await_the_rest(now);
                }
                if majority {
                    return self.write(now, grounds, out);
                }
                if !self.flights.is_empty() {
                    let on_way: Vec<bool> = (0..self.replicas.len())
                        .map(|i| self.flights.iter().any(|f| f.acquires(i)))
                        .collect();
                    let set = &self.settings.set;
                    match before_settled(set, &self.outcomes, &on_way, retried) {
                        Some(Early::Yield) => self.give_up(Why::Split, out),
                        Some(Early::Cut) => self.cut_acquires(now),
                        Some(Early::Retry) => self.retry_refused(now, out),
                        None => {}
                    }
                    return;
                }
                match split_vote(&self.settings.set, &self.outcomes, retried) {
                    None => self.give_up(Why::NoneWon, out),
                    Some(Split::Yield) => self.give_up(Why::Split, out),
                    Some(Split::Retry) => {
                        for i in 0..self.replicas.len() {
                            if self.outcomes[i] != Outcome::Won {
                                self.acquire(i, now, out);
                            }
                        }
                        self.retried(now);
                    }
                }
            }
            Stage::Writing(epoch) => {
                let c = self.count(Some(epoch), now);
                // Strictly before the stop deadline, as a term on one lease (attempt.rs) and the
                // holder (a renew due at the stop deadline is too late) count it.
                let before_stop = c.kill_deadline().is_some_and(|d| now < d.stop_at);
                if c.confirmed() && c.may_start(now) && before_stop {
                    return self.won(epoch, &c, now, out);
                }
                if !self.flights.is_empty() {
                    // More confirmations can only bring the k-th latest deadline later.
                    return;
                }
                let why = match c.confirmed() {
                    true => Why::PastStopDeadline,
                    false => Why::TooFew,
                };
                self.give_up(why, out)
            }
            _ => {}
        }
    }

    /// A majority was won while acquires are still on their way: once the reads of the replicas
    /// won settled and a majority counts, the rest are awaited as long again as the round took so
    /// far, and then cut (their outcomes unknown: a lease one says was won is released, and the
    /// leader wins it back later, the rule *Renewing*). A replica out of reach then delays an
    /// election by a round trip, not by `R`; one that answers about as fast as the others still
    /// joins the term.
    fn await_the_rest(&mut self, now: I) {
        if self.flights.iter().any(|f| f.kind != Kind::Acquire) || !self.count(None, now).leads() {
            return;
        }
        self.cut_acquires(now);
    }

    /// This member retries its split vote whatever the acquires still on their way get
    /// ([`Early::Retry`]): once as long again as the round took has passed, the replicas that
    /// refused it are tried again (the members yielding to it have released them by then);
    /// an answer still on its way counts if it comes.
    fn retry_refused(&mut self, now: I, out: &mut Vec<Output<I>>) {
        let Some(sent) = self.round_sent else { return };
        let at = *self.retry_at.get_or_insert(now + (now - sent));
        if now < at {
            return;
        }
        for i in 0..self.replicas.len() {
            if self.outcomes[i] == Outcome::Refused {
                self.acquire(i, now, out);
            }
        }
        self.retried(now);
    }

    /// A split vote's retry went out at `now`: a round of its own.
    fn retried(&mut self, now: I) {
        self.stage = Stage::Acquiring { retried: true };
        self.round_sent = Some(now);
        self.retry_at = None;
    }

    /// The acquires on their way are awaited as long again as the round took so far, then cut:
    /// what they get no longer decides the round ([`Attempt::await_the_rest`], [`Early::Cut`]).
    fn cut_acquires(&mut self, now: I) {
        let Some(sent) = self.round_sent else { return };
        let cut = now + (now - sent);
        for flight in self.flights.iter_mut().filter(|f| f.kind == Kind::Acquire) {
            flight.until = flight.until.min(cut);
        }
    }

    /// Every acquire and read settled and a majority was won: if a majority counts, the term's
    /// epoch is written to every replica held of this set (the rule *Epochs*).
    fn write(&mut self, now: I, grounds: &mut impl Grounds<I>, out: &mut Vec<Output<I>>) {
        let c = self.count(None, now);
        if !c.leads() {
            return self.give_up(Why::TooFew, out);
        }
        let set = self.settings.set;
        let read = match self.settings.mutants.epoch_from_one {
            true => c.first_epoch(),
            false => c.largest_epoch(),
        };
        let Some(epoch) = new_epoch(&set, read, self.settings.seen, grounds.wall_ms()) else {
            return self.give_up(Why::LastEpoch, out);
        };
        if grounds.shutting_down() {
            return self.give_up(Why::ShuttingDown, out);
        }
        let timeout = self.pace.request_timeout();
        for i in to_write(&self.replicas, epoch, now) {
            let replica = &self.replicas[i];
            // Another set's blob is not this set's to write on.
            let Some(lease) = replica.lease.filter(|_| replica.stamp.matches(&set)) else {
                continue;
            };
            // Never waited for past this lease's stop deadline (rule 4 of docs/safety.md).
            let until = (now + timeout).min(lease.deadline.stop_at);
            self.send_flight(i, Kind::Write(epoch), now, until, out);
        }
        self.stage = Stage::Writing(epoch);
    }

    /// A majority confirmed the epoch, its k-th latest deadline at least `G` away: the term is
    /// won. A replica of unknown outcome, or held but not written, is released: it counts for
    /// nobody in this term.
    fn won(&mut self, epoch: u64, c: &Count<I>, now: I, out: &mut Vec<Output<I>>) {
        let mut leases = vec![None; self.replicas.len()];
        for counted in c.counted() {
            leases[counted.place] = Some(counted.deadline);
        }
        let kill = c.kill_deadline().expect("a majority counts");
        let writing: Vec<usize> = self.flights.iter().map(|f| f.replica).collect();
        let unheld = self.unheld(&leases, &writing, now);
        out.push(Output::Won(Won {
            epoch,
            leases,
            kill,
            unheld,
        }));
        self.stage = Stage::Won(epoch);
        for i in to_release(&self.replicas) {
            let r = &self.replicas[i];
            let held = r.lease.is_some_and(|l| l.written == Some(epoch));
            if !held && !writing.contains(&i) {
                self.release(i, out);
            }
        }
    }

    /// What the leader of the term won at `now` needs to win back the replicas it does not
    /// hold (the rule *Renewing*): their stamps, and when it may first try each. Not before
    /// every request of this attempt there has been answered or cut and a late success
    /// released, since the leader acquires with this attempt's lease id: an acquire of unknown
    /// outcome is awaited until `L` from now and its release cut `R` after; a write on its way,
    /// or a release sent now, is cut within `2R`.
    fn unheld(&self, leases: &[Option<Deadline<I>>], writing: &[usize], now: I) -> Unheld<I> {
        let (rt, duration) = (self.pace.request_timeout(), self.settings.timing.duration);
        let late: Vec<usize> = self.late.iter().map(|(_, replica)| *replica).collect();
        let from = (0..self.replicas.len())
            .map(|i| {
                let unknown = self.replicas[i].unknown || late.contains(&i);
                match (leases[i], unknown && !writing.contains(&i)) {
                    (Some(_), _) => None,
                    (None, true) => Some(now + duration + rt),
                    (None, false) => Some(now + 2 * rt),
                }
            })
            .collect();
        Unheld {
            stamps: self.replicas.iter().map(|r| r.stamp).collect(),
            from,
        }
    }

    /// A write settled after the term was won: confirmed, the replica counts now, if it does;
    /// else it counts for nobody in this term and is released.
    fn joined(&mut self, i: usize, epoch: u64, now: I, out: &mut Vec<Output<I>>) {
        let c = self.count(Some(epoch), now);
        match c.counted().iter().find(|c| c.place == i) {
            Some(counted) => out.push(Output::Joined {
                replica: i,
                deadline: counted.deadline,
            }),
            None => self.release(i, out),
        }
    }

    /// The attempt gives up: every replica held or perhaps held is released (the rule
    /// *Counting*), and, after a split vote it yields, it pauses (the rule *No split vote that
    /// lasts*).
    fn give_up(&mut self, why: Why, out: &mut Vec<Output<I>>) {
        let set = self.settings.set;
        let read = |r: &Replica<I>| r.lease.as_ref().is_some_and(|l| l.read != Read::Unread);
        let foreign = (self.replicas.iter().enumerate())
            .filter(|(_, r)| read(r) && !r.stamp.matches(&set))
            .fold(0u8, |bits, (i, _)| bits | 1 << i);
        for flight in std::mem::take(&mut self.flights) {
            if flight.kind == Kind::Acquire {
                self.late.push((flight.tag, flight.replica));
                self.replicas[flight.replica].unanswered();
            }
        }
        for i in to_release(&self.replicas) {
            self.release(i, out);
        }
        let (split_round, pause) = match why {
            Why::Split => {
                let round = self.settings.split_round.saturating_add(1);
                let pause = split_pause(&self.pace, round, self.settings.split_draw);
                (round, Some(pause))
            }
            _ => (0, None),
        };
        out.push(Output::Failed(Failed {
            why,
            pause,
            split_round,
            foreign,
            missing: self.missing,
        }));
        self.stage = Stage::Over;
    }

    fn count(&self, campaign: Option<u64>, now: I) -> Count<I> {
        let s = &self.settings;
        count(&s.set, &self.replicas, campaign, now, s.mutants)
    }

    fn acquire(&mut self, i: usize, now: I, out: &mut Vec<Output<I>>) {
        let until = now + self.pace.request_timeout();
        self.outcomes[i] = Outcome::Unknown;
        self.send_flight(i, Kind::Acquire, now, until, out);
    }

    fn send_read(&mut self, i: usize, now: I, out: &mut Vec<Output<I>>) {
        let until = now + self.pace.request_timeout();
        let until = self.replicas[i]
            .lease
            .map_or(until, |l| until.min(l.deadline.stop_at));
        self.send_flight(i, Kind::Read, now, until, out);
    }

    fn send_flight(
        &mut self,
        replica: usize,
        kind: Kind,
        now: I,
        until: I,
        out: &mut Vec<Output<I>>,
    ) {
        let request = match kind {
            Kind::Acquire => Request::Acquire { replica, until },
            Kind::Read => Request::Read { replica, until },
            Kind::Write(epoch) => Request::WriteEpoch {
                replica,
                epoch,
                until,
            },
        };
        let tag = self.send(request, out);
        self.flights.push(Flight {
            tag,
            replica,
            kind,
            sent: now,
            until,
        });
    }

    fn release(&mut self, replica: usize, out: &mut Vec<Output<I>>) {
        self.replicas[replica].released();
        self.send(Request::Release { replica }, out);
    }

    fn send(&mut self, request: Request<I>, out: &mut Vec<Output<I>>) -> Tag {
        let tag = self.tags.fresh();
        out.push(Output::Send(Send { tag, request }));
        tag
    }
}
