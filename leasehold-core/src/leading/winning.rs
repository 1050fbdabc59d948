//! A leader on several replicas winning back those it does not hold (docs/quorum.md, the rule
//! *Renewing*: a leader keeps trying to win the replicas it does not hold, so that it can lose
//! one later without losing the lead). Each replica not held (never won in this term, or
//! refused since) is tried at the renew pace, `R` after its last try, on its own: its acquire
//! with the term's lease id, cut at `R`; then a read of its blob; then the term's epoch written
//! there, conditional on that read's ETag; and only once that write is confirmed does it count,
//! from its acquire's send, and the [`Holder`] renews it like the others.
//!
//! The rules it keeps are quorum.rs's, by its functions: a replica counts only as [`count`]
//! says (a lease whose success was heard, not passed, out of its lock-delay, stamped with the
//! set, the term's epoch written there); its lock-delay is [`Replica::aged`]'s from the read;
//! its id must be none of the replicas' held (the rule *One replica set*: one account listed
//! twice counts once); and a replica that carries a later epoch than the term's is never
//! written (the rule *Epochs*: an epoch on a replica never goes back). A try that fails after
//! its acquire was heard, or of unknown outcome, releases that replica at once (the rule
//! *Counting*), the release going on alone.

use super::messages::{Outbox, Request};
use crate::exchange::Tag;
use crate::holder::Holder;
use crate::pace::Pace;
use crate::quorum::{self, Mutants, Replica, ReplicaSet, Stamp, Unheld, count};
use crate::timing::{Moment, Timing};

/// Where one replica's winning back stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Try<I> {
    /// Held: the holder renews it.
    Held,
    /// Its next acquire is due at this instant.
    Due(I),
    /// Its acquire is on its way under this tag, awaited until this instant (the shell does not
    /// cut an acquire: its outcome is unknown from then on).
    Acquiring(Tag, I),
    /// Its read is on its way under this tag.
    Reading(Tag),
    /// The term's epoch is being written there under this tag.
    Writing(Tag),
    /// Never tried again: its blob's id is a replica's held (one account listed twice).
    Never,
}

/// The winning back of the replicas a term does not hold.
#[derive(Debug, Clone)]
pub(super) struct Winning<I> {
    set: ReplicaSet,
    timing: Timing,
    epoch: u64,
    /// What the term knows of each replica it tries, one a place (a place held: as it was
    /// won back, or default).
    replicas: Vec<Replica<I>>,
    /// Each place's stamp as last read: a replica won back must carry an id of its own.
    stamps: Vec<Stamp>,
    tries: Vec<Try<I>>,
}

impl<I: Moment> Winning<I> {
    /// The winning back for a term of `epoch` on `set`, won with `unheld` as its attempt left
    /// it: each replica not held is first tried at the instant it names.
    pub(super) fn new(set: ReplicaSet, timing: Timing, epoch: u64, unheld: &Unheld<I>) -> Self {
        let n = set.len();
        let tries = (0..n)
            .map(|i| match unheld.from.get(i).copied().flatten() {
                Some(from) => Try::Due(from),
                None => Try::Held,
            })
            .collect();
        let mut stamps = unheld.stamps.clone();
        stamps.resize(n, Stamp::default());
        Self {
            set,
            timing,
            epoch,
            replicas: vec![Replica::default(); n],
            stamps,
            tries,
        }
    }

    /// When the next try is due, or an acquire on its way is cut.
    pub(super) fn until(&self) -> Option<I> {
        (self.tries.iter())
            .filter_map(|t| match t {
                Try::Due(at) | Try::Acquiring(_, at) => Some(*at),
                _ => None,
            })
            .min()
    }

    /// The answers awaited, pushed onto `answers`.
    pub(super) fn answers(&self, answers: &mut Vec<Tag>) {
        answers.extend(self.tries.iter().filter_map(|t| match t {
            Try::Acquiring(tag, _) | Try::Reading(tag) | Try::Writing(tag) => Some(*tag),
            _ => None,
        }));
    }

    /// Whether `tag` is one of its requests on their way.
    pub(super) fn owns(&self, tag: Tag) -> bool {
        let mut answers = Vec::new();
        self.answers(&mut answers);
        answers.contains(&tag)
    }

    /// At `now`: a replica the holder was refused since is tried `R` from now; an acquire
    /// unanswered by its limit is of unknown outcome, its replica released and tried again at
    /// once (`R` after that acquire's send); every try due sends its acquire.
    pub(super) fn poll<R, T, E>(
        &mut self,
        now: I,
        holder: &Holder<I>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let rt = self.request_timeout();
        for replica in 0..self.tries.len() {
            if self.tries[replica] == Try::Held && !holder.holds(replica) {
                self.replicas[replica].released();
                self.tries[replica] = Try::Due(now + rt);
            }
            if let Try::Acquiring(tag, until) = self.tries[replica]
                && now >= until
            {
                out.push(super::messages::Output::Forget(tag));
                self.tries[replica] = self.give_back(replica, Try::Due(now), out);
            }
            if let Try::Due(at) = self.tries[replica]
                && now >= at
            {
                let until = now + rt;
                let acquire = quorum::Request::Acquire { replica, until };
                let tag = out.send(Request::WinBack(acquire));
                self.tries[replica] = Try::Acquiring(tag, until);
            }
        }
    }

    /// The answer under `tag`, sent at `sent`, came at `now`: the try goes on, fails, or the
    /// replica counts and `holder` renews it from now on.
    pub(super) fn answered<R, T, E>(
        &mut self,
        now: I,
        (tag, sent, reply): (Tag, I, quorum::Reply),
        holder: &mut Holder<I>,
        out: &mut Outbox<I, R, T, E>,
    ) {
        let Some(i) = (self.tries.iter()).position(|t| match t {
            Try::Acquiring(t, _) | Try::Reading(t) | Try::Writing(t) => *t == tag,
            _ => false,
        }) else {
            return;
        };
        let retry = Try::Due(now + self.request_timeout());
        self.tries[i] = match (self.tries[i], reply) {
            (Try::Acquiring(_, until), quorum::Reply::Done) if now <= until => {
                // Its deadline counts from the send; the read, sent after the success was
                // heard, shows the blob at or after the acquire.
                self.replicas[i].won(sent, now, &self.timing);
                let until = self.cut(i, now);
                let read = quorum::Request::Read { replica: i, until };
                Try::Reading(out.send(Request::WinBack(read)))
            }
            (Try::Acquiring(..), quorum::Reply::Refused | quorum::Reply::Missing) => retry,
            (
                Try::Reading(_),
                quorum::Reply::Read {
                    epoch, stamp, age, ..
                },
            ) => self.read(i, now, (sent, epoch, stamp, age), holder, out),
            (Try::Writing(_), quorum::Reply::Done) => {
                self.replicas[i].written(self.epoch);
                self.join(i, now, holder, out)
            }
            (
                Try::Reading(_) | Try::Writing(_),
                quorum::Reply::Refused | quorum::Reply::Missing,
            ) => {
                self.replicas[i].refused();
                retry
            }
            (_, _) => self.give_back(i, retry, out),
        };
    }

    /// The read of replica `i` after its acquire: the term's epoch is written there if it may
    /// count once written (stamped with the set and an id of its own, out of its lock-delay,
    /// carrying no later epoch than the term's); else it is given back.
    fn read<R, T, E>(
        &mut self,
        i: usize,
        now: I,
        (sent, epoch, stamp, age): (I, Option<u64>, Stamp, std::time::Duration),
        holder: &Holder<I>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Try<I> {
        let r = &mut self.replicas[i];
        r.read(sent, false, epoch, stamp);
        r.aged(
            now,
            age,
            Pace::new(&self.timing).lock_delay() + Pace::SERVICE_CLOCK,
        );
        self.stamps[i] = stamp;
        let twice = (self.stamps.iter().enumerate())
            .any(|(j, s)| j != i && holder.holds(j) && s.id.is_some() && s.id == stamp.id);
        if twice {
            return self.give_back(i, Try::Never, out);
        }
        let young = r.young_until.filter(|until| *until > now);
        let later = epoch.is_some_and(|e| e > self.epoch);
        if !stamp.matches(&self.set) || later || young.is_some() {
            let rt = self.request_timeout();
            let at = young.map_or(now + rt, |until| until.max(now + rt));
            return self.give_back(i, Try::Due(at), out);
        }
        let until = self.cut(i, now);
        let write = quorum::Request::WriteEpoch {
            replica: i,
            epoch: self.epoch,
            until,
        };
        Try::Writing(out.send(Request::WinBack(write)))
    }

    /// The term's epoch was confirmed on replica `i`: it counts now if [`count`] says so, and
    /// the holder renews it from its acquire's deadline; else it is given back.
    fn join<R, T, E>(
        &mut self,
        i: usize,
        now: I,
        holder: &mut Holder<I>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Try<I> {
        let c = count(
            &self.set,
            &self.replicas,
            Some(self.epoch),
            now,
            Mutants::default(),
        );
        match c.counted().iter().find(|c| c.place == i) {
            Some(counted) if holder.join(i, counted.deadline) => Try::Held,
            _ => {
                let retry = Try::Due(now + self.request_timeout());
                self.give_back(i, retry, out)
            }
        }
    }

    /// Replica `i` is released (its answer changes nothing), and tried again as `next` says.
    fn give_back<R, T, E>(
        &mut self,
        i: usize,
        next: Try<I>,
        out: &mut Outbox<I, R, T, E>,
    ) -> Try<I> {
        self.replicas[i].released();
        let release = quorum::Request::Release { replica: i };
        let tag = out.send(Request::WinBack(release));
        out.push(super::messages::Output::Forget(tag));
        next
    }

    /// The limit of a read or a write on replica `i` sent at `now`: `R`, never past its
    /// lease's stop deadline (rule 4 of docs/safety.md).
    fn cut(&self, i: usize, now: I) -> I {
        let until = now + self.request_timeout();
        (self.replicas[i].lease).map_or(until, |l| until.min(l.deadline.stop_at))
    }

    fn request_timeout(&self) -> std::time::Duration {
        Pace::new(&self.timing).request_timeout()
    }

    /// The term's lead is over, or its lease lost: no answer on its way is wanted, no replica
    /// tried again, none given back (every replica is released at the term's end, none while
    /// the body lives).
    pub(super) fn end<R, T, E>(&mut self, out: &mut Outbox<I, R, T, E>) {
        let mut answers = Vec::new();
        self.answers(&mut answers);
        out.extend(answers.into_iter().map(super::messages::Output::Forget));
        for t in &mut self.tries {
            if !matches!(t, Try::Held | Try::Never) {
                *t = Try::Never;
            }
        }
    }
}
