//! A member on several replicas keeps its record on every replica, and reads the line from
//! every one (docs/quorum.md: member records live on every replica; a member's view of the
//! line is the union of what the replicas it reached show). Its record keeper's requests on
//! its record and its listings, and a leader's listings, go to every replica side by side
//! ([`fans_out`]), each carried to its replica ([`Request::OnReplica`]), and what came back is
//! one answer for the role that asked ([`merge`]) once every replica answered (each request is
//! cut at its limit, so every one does): a listing the union of the listings that answered, a
//! record request done if it was done on any replica (the record lives on as long as one
//! replica keeps it, and shows in the union). The read of the lease blob stays the first
//! replica's.

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
        let whole = self.tags.fresh();
        for replica in 0..n {
            let part = super::machine::Who::Part(whole);
            let mine = self.route(part, tag, super::replies::Asked::Part, now);
            let request = Request::OnReplica {
                replica,
                request: Box::new(again(&request)),
            };
            out.push(Output::Send(crate::exchange::Send { tag: mine, request }));
        }
        let route = Route {
            who,
            tag,
            asked,
            sent: now,
        };
        let fan = Fan {
            route,
            left: n,
            came: Vec::new(),
        };
        self.fans.insert(whole, fan);
    }

    /// One replica's `answer` to the request sent to every replica under `whole`: once every
    /// replica answered, the request's route and its one answer ([`merge`]).
    pub(super) fn part(
        &mut self,
        whole: crate::exchange::Tag,
        answer: Answered<I, K, E>,
    ) -> Option<Whole<I, K, E>> {
        let fan = self.fans.get_mut(&whole)?;
        fan.came.push(answer.answer);
        fan.left -= 1;
        if fan.left > 0 {
            return None;
        }
        let fan = self.fans.remove(&whole)?;
        let answer = crate::exchange::Answer {
            tag: whole,
            sent: fan.route.sent,
            answer: merge(fan.came),
        };
        Some((fan.route, answer))
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
