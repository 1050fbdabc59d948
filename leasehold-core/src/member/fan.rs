//! A member on several replicas keeps its record on every replica, and reads the line from
//! every one (docs/quorum.md: member records live on every replica; a member's view of the
//! line is the union of what the replicas it reached show). Its record keeper's requests on
//! its record and its listings, and a leader's listings, go to every replica side by side
//! ([`fans_out`]), each carried to its replica ([`Request::OnReplica`]), and what came back is
//! one answer for the role that asked ([`merge`]) once every replica answered (each request is
//! cut at its limit, so every one does): a listing the union of the listings that answered, a
//! record request done if it was done on any replica (the record lives on as long as one
//! replica keeps it, and shows in the union). A handoff's confirmation reads every replica
//! too, as one read ([`Member::confirmed_on`]); a hand-on's and a rekey's `change` go to the
//! handoff's replica and the others the term wrote to, each its own request
//! ([`Member::send_parts`]), and are decided by their answers together ([`on_a_majority`]),
//! as soon as they can be, on the handoff's replica unless its lease there is gone
//! ([`judged_on`]). The record keeper's read of the lease blob stays the first
//! replica's.
//!
//! [`Member::confirmed_on`]: super::machine::Member::confirmed_on
//! [`Member::send_parts`]: super::machine::Member::send_parts

use super::kinds::Kinds;
use super::machine::{Fan, Route};
use super::messages::{Listing, Reply, Request};
use crate::leading;
use crate::line::Record;
use crate::record;

/// An answer of the store to a member's request.
type Answered<I, K, E> = crate::exchange::Answer<I, Reply<K, E>>;

/// A request sent to every replica, as its role sent it, and its one answer.
type Whole<I, K, E> = (Route<I, K>, Answered<I, K, E>);

/// Whether `request` goes to every replica of a set: a request on this member's record, a
/// listing of the line, a successor's choice's read of a record.
pub(super) fn fans_out<I, K: Kinds>(request: &Request<I, K>) -> bool {
    match request {
        Request::Keeper(record::Request::Read) => false,
        Request::Keeper(_) => true,
        Request::Leading(leading::Request::List { .. } | leading::Request::Relist { .. }) => true,
        // A confirmation's read: the successor may lead on a majority without the handoff's
        // replica, and its record may be lost on one replica alone.
        Request::Leading(leading::Request::Store { request, .. }) => {
            matches!(**request, crate::handoff::Request::Read { .. })
        }
        // A successor's choice lists the line, and reads its record, from every replica.
        Request::Leading(leading::Request::Choice { request, .. }) => {
            !matches!(**request, crate::choice::Request::Notice(_))
        }
        _ => false,
    }
}

/// What every replica answered, as one answer: listings merged into their union (a member
/// listed by several replicas once, alive if any replica shows its record leased, else as the
/// first showed it), failing only if none answered; a request done on any replica is done,
/// else it failed as the first replica said.
pub(super) fn merge<K: Kinds, E>(came: Vec<Reply<K, E>>) -> Reply<K, E> {
    let mut came = came.into_iter();
    let Some(mut merged) = came.next() else {
        unreachable!("a set has at least one replica")
    };
    for reply in came {
        merged = match (merged, reply) {
            (Reply::Listed(Ok(mut union)), Reply::Listed(Ok(listing))) => {
                for record in listing.records {
                    join(&mut union, record);
                }
                Reply::Listed(Ok(union))
            }
            (Reply::Listed(Err(_)), listed @ Reply::Listed(Ok(_))) => listed,
            (Reply::Done(Err(_)), done @ Reply::Done(Ok(()))) => done,
            // A successor's record read: the one a replica found, alive first.
            (
                Reply::Leading(leading::Reply::Choice(was)),
                Reply::Leading(leading::Reply::Choice(read)),
            ) => Reply::Leading(leading::Reply::Choice(match (*was, *read) {
                (crate::choice::Reply::Read(Some(a)), crate::choice::Reply::Read(Some(b)))
                    if !a.is_alive() && b.is_alive() =>
                {
                    Box::new(crate::choice::Reply::Read(Some(b)))
                }
                (crate::choice::Reply::Read(None), read @ crate::choice::Reply::Read(Some(_))) => {
                    Box::new(read)
                }
                (was, _) => Box::new(was),
            })),
            (merged, _) => merged,
        };
    }
    merged
}

/// Whether `asked` is a `change` sent to every replica it mirrors to ([`Member::send_parts`]):
/// a hand-on's or a rekey's.
///
/// [`Member::send_parts`]: super::machine::Member::send_parts
fn changes<I, K: Kinds>(asked: &super::replies::Asked<I, K>) -> bool {
    matches!(asked, super::replies::Asked::Leading(leading::Request::Store { request, .. })
        if matches!(**request, crate::handoff::Request::Change { from: Some(_), .. }))
}

/// A `change` sent to the handoff's replica and mirrored to the others this term wrote its
/// epoch to (a hand-on's, a rekey's: [`changes`]), as one answer once it is decided: refused
/// once more than `n - k` replicas refused it as written since the term's write (412: the
/// successor wrote its epoch there, and leads on a majority; no next member could hold one),
/// else the handoff's replica's (`anchor`) answer, once no more refusals could pass that
/// count. A replica leased under another id (409) shows no leader: a member's attempt holds
/// a replica for a moment before it gives it back, and a successor that leads wrote there.
/// Neither does one that did not answer, whose blob is gone, or that the term never wrote to:
/// none of them counts against the change (the next member may still win it).
pub(super) fn on_a_majority<K: Kinds, E: crate::campaign::Failed>(
    came: &mut Vec<(usize, Reply<K, E>)>,
    left: usize,
    n: usize,
    anchor: usize,
) -> Option<Reply<K, E>> {
    let written_since = |r: &Reply<K, E>| matches!(r, Reply::Leading(leading::Reply::Changed(Err(e))) if e.condition_failed());
    let refused = came.iter().filter(|(_, r)| written_since(r)).count();
    let most = n - (n / 2 + 1);
    let at_anchor = came.iter().position(|(replica, _)| *replica == anchor);
    if refused > most {
        let at = at_anchor
            .filter(|at| written_since(&came[*at].1))
            .or_else(|| came.iter().position(|(_, r)| written_since(r)))?;
        return Some(came.swap_remove(at).1);
    }
    match at_anchor {
        Some(at) if refused + left <= most || left == 0 => Some(came.swap_remove(at).1),
        None if left == 0 => Some(Reply::Leading(leading::Reply::Changed(Err(E::timed_out(
            std::time::Duration::ZERO,
        ))))),
        _ => None,
    }
}

/// The replica whose answer decides a hand-on's or a rekey's `change` ([`changes`]), from what
/// `came` so far with `left` to come: the handoff's replica (`anchor`), unless its lease there
/// is no longer the term's (409: it ran out and another member took it; 404: the blob is gone)
/// while another replica the term wrote to took the change. That one is the handoff's replica
/// from then on, as for a notice ([`Member::reanchor_notice`]): the lease changed there and on
/// the others is not left under an id the handoff no longer follows. `None` while the anchor
/// lost it and no other took it yet.
///
/// [`Member::reanchor_notice`]: super::machine::Member::reanchor_notice
pub(super) fn judged_on<K: Kinds, E: crate::campaign::Failed>(
    came: &[(usize, Reply<K, E>)],
    left: usize,
    anchor: usize,
) -> Option<usize> {
    use crate::failure::Failure;
    let lost = came.iter().any(|(replica, r)| {
        *replica == anchor
            && matches!(r, Reply::Leading(leading::Reply::Changed(Err(e)))
                if matches!(e.failure(), Failure::LeaseLost | Failure::Missing))
    });
    if !lost {
        return Some(anchor);
    }
    let took = |r: &Reply<K, E>| matches!(r, Reply::Leading(leading::Reply::Changed(Ok(()))));
    match came.iter().find(|(_, r)| took(r)) {
        Some((replica, _)) => Some(*replica),
        None if left > 0 => None,
        None => Some(anchor),
    }
}

/// The one `answer` to the request sent to every replica under `whole`, for its `route`.
fn one_answer<I: Copy, K: Kinds, E>(
    whole: crate::exchange::Tag,
    route: Route<I, K>,
    answer: Reply<K, E>,
) -> Whole<I, K, E> {
    let sent = route.sent;
    let answer = crate::exchange::Answer {
        tag: whole,
        sent,
        answer,
    };
    (route, answer)
}

/// Another of `request`, one that [`fans_out`].
fn again<I: Copy, K: Kinds>(request: &Request<I, K>) -> Request<I, K> {
    match request {
        Request::Keeper(r) => Request::Keeper(r.clone()),
        Request::Leading(r) => Request::Leading(r.clone()),
        _ => unreachable!("only a record's request and a listing go to every replica"),
    }
}

/// `record` joins the union `listing`: a member already listed stays once, alive if either
/// read shows it alive.
fn join<R: Record, S>(listing: &mut Listing<R, S>, record: R) {
    match listing.records.iter_mut().find(|r| r.key() == record.key()) {
        Some(listed) if !listed.is_alive() && record.is_alive() => *listed = record,
        Some(_) => {}
        None => listing.records.push(record),
    }
}

impl<I, K, E> super::machine::Member<I, K, E>
where
    I: crate::timing::Moment,
    K: Kinds,
    E: crate::campaign::Failed + std::fmt::Display,
{
    /// `who`'s `request` (under its tag `tag`) goes out: under a fresh tag of the member's,
    /// or on a set, when it [`fans_out`], to every replica, each under a tag of its own.
    pub(super) fn send(
        &mut self,
        (who, tag): (super::machine::Who, crate::exchange::Tag),
        request: Request<I, K>,
        asked: super::replies::Asked<I, K>,
        now: I,
        out: &mut Vec<super::messages::Output<I, K, E>>,
    ) {
        use super::messages::Output;
        let n = self.settings.set.len();
        if n == 1 || !fans_out(&request) {
            let mine = self.route(who, tag, asked, now);
            let send = crate::exchange::Send { tag: mine, request };
            return out.push(Output::Send(send));
        }
        let parts = (0..n).map(|replica| (replica, again(&request))).collect();
        self.send_parts((who, tag), parts, asked, now, out);
    }

    /// `who`'s request (under its tag `tag`) goes out as `parts`, each replica's own (its
    /// place, its request), each under a tag of its own: one answer comes back once they
    /// answered ([`Self::part`]).
    pub(super) fn send_parts(
        &mut self,
        (who, tag): (super::machine::Who, crate::exchange::Tag),
        parts: Vec<(usize, Request<I, K>)>,
        asked: super::replies::Asked<I, K>,
        now: I,
        out: &mut Vec<super::messages::Output<I, K, E>>,
    ) {
        use super::messages::Output;
        let whole = self.tags.fresh();
        let left = parts.len();
        for (replica, request) in parts {
            let part = super::machine::Who::Part(whole);
            let mine = self.route(part, tag, super::replies::Asked::Part(replica), now);
            let request = Request::OnReplica {
                replica,
                request: Box::new(request),
            };
            out.push(Output::Send(crate::exchange::Send { tag: mine, request }));
        }
        let route = Route {
            who,
            tag,
            asked,
            sent: now,
        };
        let came = Vec::new();
        self.fans.insert(whole, Fan { route, left, came });
    }

    /// One replica's `answer` to the request sent to every replica under `whole`, from the
    /// replica at `replica`: once every replica answered, the request's route and its one
    /// answer ([`merge`]; a confirmation's read, [`Self::confirmed_on`]).
    pub(super) fn part(
        &mut self,
        whole: crate::exchange::Tag,
        replica: usize,
        answer: Answered<I, K, E>,
    ) -> Option<Whole<I, K, E>> {
        let (n, anchor) = (self.settings.set.len(), self.kept.anchor);
        let fan = self.fans.get_mut(&whole)?;
        fan.came.push((replica, answer.answer));
        fan.left -= 1;
        // A hand-on's or a rekey's `change` is decided as soon as it can be.
        if changes(&fan.route.asked) {
            let judge = judged_on(&fan.came, fan.left, anchor)?;
            let decided = on_a_majority(&mut fan.came, fan.left, n, judge)?;
            let fan = self.fans.remove(&whole)?;
            if judge != anchor {
                self.kept.anchor = judge;
                if let Some(gone) = self.kept.replica_etags.get_mut(anchor) {
                    *gone = None;
                }
            }
            return Some(one_answer(whole, fan.route, decided));
        }
        if fan.left > 0 {
            return None;
        }
        let fan = self.fans.remove(&whole)?;
        let answer = match &fan.route.asked {
            super::replies::Asked::Leading(leading::Request::Store { request, .. }) => {
                match &**request {
                    crate::handoff::Request::Read { successor, .. } => {
                        self.confirmed_on(successor, fan.came)
                    }
                    _ => merge(fan.came.into_iter().map(|(_, r)| r).collect()),
                }
            }
            _ => merge(fan.came.into_iter().map(|(_, r)| r).collect()),
        };
        Some(one_answer(whole, fan.route, answer))
    }

    /// A confirmation's read of every replica (`came`, each with its replica's place) as one
    /// read of the blob and one of the successor's record, for [`confirmation::read_of`] and
    /// [`confirmation::judge`] to judge as on one account (docs/quorum.md, Handover). The blob:
    /// one where `successor` wrote its epoch, if any (it won a majority, with the handoff's
    /// replica or without it); else the handoff's replica's, whose ETag the hand-on's notice is
    /// conditional on, unless that one is no longer as the handoff left it while another the
    /// term wrote still is: then that other's, and it is the handoff's replica from then on. The record: the union's, as the choice's (alive first, then any found);
    /// gone only if no replica showed it and some said it was gone.
    ///
    /// [`confirmation::read_of`]: crate::confirmation::read_of
    /// [`confirmation::judge`]: crate::confirmation::judge
    pub(super) fn confirmed_on(
        &mut self,
        successor: &K::Record,
        came: Vec<(usize, Reply<K, E>)>,
    ) -> Reply<K, E> {
        use crate::blob::LeaseBlob;
        use crate::confirmation::{Read, read_of};
        use crate::failure::Failure;
        let (me, epoch) = (self.known.line.me.as_str(), self.kept.epoch);
        let mut reads: Vec<(usize, Box<super::messages::Confirming<K, E>>)> = (came.into_iter())
            .filter_map(|(replica, reply)| match reply {
                Reply::Confirming(read) => Some((replica, read)),
                _ => None,
            })
            .collect();
        let judged = |read: &super::messages::Confirming<K, E>| match (&read.blob, epoch) {
            (Ok(blob), Some(epoch)) => read_of(blob, me, successor.identity(), epoch),
            _ => Read::Unanswered,
        };
        // Another member's epoch above the term's on a majority: it leads.
        let newer = |read: &super::messages::Confirming<K, E>| match (&read.blob, epoch) {
            (Ok(blob), Some(epoch)) => {
                blob.epoch().is_some_and(|e| e > epoch) && blob.named().is_some_and(|n| n != me)
            }
            _ => false,
        };
        let led = reads.iter().filter(|(_, r)| newer(r)).count() >= self.settings.set.majority();
        // The handoff's replica no longer as the handoff left it (wiped and created again,
        // rolled back, written by another member) while another replica the term wrote still
        // is: that one is the handoff's replica from then on, as for a notice refused there
        // (`reanchor_notice`); judged "not the holder's to move", the lease changed on the
        // others would be left to run out under an id the handoff no longer follows.
        let anchor = self.kept.anchor;
        let ours = |read: &super::messages::Confirming<K, E>| matches!(judged(read), Read::Ours(_));
        let wrote = |replica: usize| {
            self.kept
                .replica_etags
                .get(replica)
                .is_some_and(Option::is_some)
        };
        let blob_of = (reads.iter())
            .position(|(_, r)| judged(r) == Read::Taken)
            .or_else(
                || match reads.iter().position(|(replica, _)| *replica == anchor) {
                    Some(at) if !ours(&reads[at].1) => (reads.iter())
                        .position(|(replica, r)| *replica != anchor && wrote(*replica) && ours(r))
                        .or(Some(at)),
                    at => at,
                },
            );
        let reanchored = (blob_of.filter(|at| ours(&reads[*at].1)))
            .map(|at| reads[at].0)
            .filter(|replica| *replica != anchor);
        // A replica that carries neither the term's write nor a later leader's (wiped and
        // created again, rolled back) holds no lease of the term's: a hand-on's or a rekey's
        // `change` is not mirrored there, where its refusal (the ETag the term wrote is gone)
        // would read as a successor's write and outweigh the handoff's replica.
        let lost: Vec<usize> = (reads.iter())
            .filter(|(_, r)| r.blob.is_ok() && judged(r) == Read::Other && !newer(r))
            .map(|(replica, _)| *replica)
            .filter(|replica| Some(*replica) != reanchored.or(Some(anchor)))
            .collect();
        // The record: found alive, then found, then unanswered (it stands), then gone.
        let rank = |record: &Option<Result<Option<K::Record>, E>>| match record {
            Some(Ok(Some(r))) if r.is_alive() => 0,
            Some(Ok(Some(_))) => 1,
            Some(Err(e)) if e.failure() != Failure::Missing => 2,
            Some(_) => 3,
            None => 4,
        };
        let record = (reads.iter_mut())
            .min_by_key(|(_, r)| rank(&r.record))
            .and_then(|(_, r)| r.record.take());
        let blob = match blob_of {
            Some(i) => reads.swap_remove(i).1.blob,
            None => Err(E::timed_out(std::time::Duration::ZERO)),
        };
        if let Some(next) = reanchored {
            if let Some(gone) = self.kept.replica_etags.get_mut(anchor) {
                *gone = None;
            }
            self.kept.anchor = next;
        }
        for replica in lost {
            if let Some(gone) = self.kept.replica_etags.get_mut(replica) {
                *gone = None;
            }
        }
        Reply::Confirming(Box::new(super::messages::Confirming { blob, record, led }))
    }

    /// The requests sent to every replica whose route `gone` picks are no longer wanted: the
    /// member's tags of their parts still on their way.
    pub(super) fn unfan(
        &mut self,
        gone: impl Fn(&Route<I, K>) -> bool,
    ) -> Vec<crate::exchange::Tag> {
        let wholes: Vec<crate::exchange::Tag> = (self.fans.iter())
            .filter(|(_, fan)| gone(&fan.route))
            .map(|(whole, _)| *whole)
            .collect();
        let mut parts = Vec::new();
        for whole in wholes {
            self.fans.remove(&whole);
            let of_it: Vec<crate::exchange::Tag> = (self.routes.iter())
                .filter(|(_, r)| r.who == super::machine::Who::Part(whole))
                .map(|(mine, _)| *mine)
                .collect();
            for mine in of_it {
                self.routes.remove(&mine);
                parts.push(mine);
            }
        }
        parts
    }
}
