//! Acquires on replicas whose outcome the member does not know, and the leases they may have
//! left behind; and a term's id once the term expired, whose held renews may take a lease
//! again (docs/quorum.md, *Leases left by a partition*).
//!
//! An acquire cut at its limit on a replica may still be applied there, and late: a
//! partition holds it, and delivers it as it ends, long after the member gave up waiting for
//! its answer (`L` after its send). The lease it takes is held under the id of an attempt that
//! is over, and runs out only after `L`: on a replica the others need for a majority, nobody
//! leads until then. So the member keeps the ids of such acquires per replica (the newest
//! [`KEPT_PER_REPLICA`]), and when that replica refuses one of its acquires as held, releases
//! each of them there. Safe by the rule *Counting*: none of them is the id of a term or of
//! the attempt under way (the refusal comes to a campaign, and the id it acquires under is
//! never released here), so no member counts a lease held under it; a release under an id
//! that holds nothing is refused, harmlessly.

use super::kinds::Kinds;
use super::machine::{Member, Stray};
use super::messages::{Output, Request};
use super::replies::Asked;
use crate::campaign::{self, Failed};
use crate::exchange::{Send, Tag};
use crate::failure::Failure;
use crate::quorum;
use crate::timing::Moment;

/// How many ids of acquires with an unknown outcome are kept per replica. Kept newest first:
/// a partition's newest connections are retransmitted first as it ends (their back-off is the
/// shortest), and a lease an older one takes runs out within `L` as without this.
pub(super) const KEPT_PER_REPLICA: usize = 16;

impl<I, K, E> Member<I, K, E>
where
    I: Moment,
    K: Kinds,
    E: Failed + std::fmt::Display,
{
    /// The acquire the attempt under way sent to `replica` got no answer in time: its id is
    /// kept for that replica, unless a term runs (the attempt that won it passes on its late
    /// acquires as the term begins: its leases are the term's to win back and release).
    pub(super) fn unsure(&mut self, replica: usize) {
        if self.term.is_some() {
            return;
        }
        if let Some(id) = self.kept.id.clone() {
            self.keep_stray(replica, id);
        }
    }

    /// The term ended at its stop deadline, no renew heard on a majority: its lease id is kept
    /// on every replica of the set. Its renews, its acquires winning a replica back and its
    /// releases that a partition held may be applied as the partition ends, long after the
    /// term: a renew of a lease that ran out and nobody took since takes it again, under an
    /// id nobody renews or counts any more (the member spent it when it won the term).
    /// Released where a replica refuses this member's acquire as held, as an acquire's; where
    /// the term's lease is gone, the release is refused, harmlessly. (A term that ended any
    /// other way was still renewed on a majority: what a replica cut off from it keeps runs
    /// out within `L`, as an acquire's older than the list does.)
    pub(super) fn term_expired(&mut self) {
        let n = self.settings.set.len();
        if n == 1 {
            return;
        }
        if let Some(id) = self.kept.id.clone() {
            for replica in 0..n {
                self.keep_stray(replica, id.clone());
            }
        }
    }

    /// `id` is kept among `replica`'s strays, once, the newest [`KEPT_PER_REPLICA`].
    fn keep_stray(&mut self, replica: usize, id: K::LeaseId) {
        let on_it: Vec<usize> = (0..self.strays.len())
            .filter(|i| self.strays[*i].replica == replica)
            .collect();
        if on_it.iter().any(|i| self.strays[*i].id == id) {
            return;
        }
        if on_it.len() >= KEPT_PER_REPLICA {
            // This replica's oldest goes: the list is in the order of the cuts, so of sends.
            self.strays.remove(on_it[0]);
        }
        self.strays.push(Stray { replica, id });
    }

    /// An answer to a campaign's request on a replica: a refusal of its acquire as held
    /// releases there every lease this member may have left behind on it.
    pub(super) fn strays_on_refusal(
        &mut self,
        now: I,
        asked: &Asked<I, K>,
        came: &super::messages::Reply<K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let Asked::Campaign(
            campaign::Request::Replica(quorum::Request::Acquire { replica, .. }),
            _,
        ) = asked
        else {
            return;
        };
        let super::messages::Reply::Acquired(Err(e)) = came else {
            return;
        };
        if e.failure() != Failure::Held {
            return;
        }
        let (replica, next) = (*replica, &self.next_id);
        let released: Vec<Stray<K::LeaseId>> = (self.strays)
            .extract_if(.., |s| s.replica == replica && s.id != *next)
            .collect();
        for stray in released {
            self.release_on(now, replica, Some(stray.id), out);
        }
    }

    /// A release of `id`'s lease on `replica`, going on alone: its answer changes nothing (a
    /// lease not released runs out within `L`).
    fn release_on(
        &mut self,
        now: I,
        replica: usize,
        id: Option<K::LeaseId>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let limit = now + self.settings.timing.request_timeout();
        let request = Request::Release {
            slot: 0,
            replica,
            id,
            limit,
        };
        let tag = self.tags.fresh();
        out.push(Output::Send(Send { tag, request }));
        out.push(Output::Forget(tag));
    }

    /// The answer to an acquire on a replica, awaited past its attempt (`Asked::LateReplica`):
    /// its outcome is known; a success is released at once with the attempt's lease id, on
    /// that replica; any other answer took nothing this member could give back.
    pub(super) fn late_replica(
        &mut self,
        now: I,
        mine: Tag,
        asked: Asked<I, K>,
        came: &super::messages::Reply<K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        self.late_replicas.retain(|(tag, _)| *tag != mine);
        let Asked::LateReplica { replica, id } = asked else {
            return;
        };
        (self.strays).retain(|s| !(s.replica == replica && Some(&s.id) == id.as_ref()));
        if !matches!(came, super::messages::Reply::Acquired(Ok(()))) {
            return;
        }
        self.release_on(now, replica, id, out);
    }

    /// The late acquires on replicas whose leases have surely expired by `now` are no longer
    /// awaited (their ids stay among the strays: a partition may still deliver them).
    pub(super) fn late_replicas_expired(&mut self, now: I, out: &mut Vec<Output<I, K, E>>) {
        let expired: Vec<Tag> = (self.late_replicas.iter())
            .filter(|(_, until)| *until <= now)
            .map(|(tag, _)| *tag)
            .collect();
        for tag in expired {
            self.late_replicas.retain(|(t, _)| *t != tag);
            self.routes.remove(&tag);
            out.push(Output::Forget(tag));
        }
    }
}
