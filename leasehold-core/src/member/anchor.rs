//! On several replicas, the term's replica for the handoff (docs/quorum.md, Handover): which
//! it is ([`anchor`] at the term's start, [`Member::anchor_now`] at its end's first request on
//! the lease blob, [`Member::reanchor_notice`] when a notice finds it no longer the term's),
//! what goes there ([`Member::on_anchor`]), and what is mirrored to the others
//! ([`Member::mirror`]), a hand-on's `change` awaited on every replica ([`Member::send_leading`]).

use super::kinds::Kinds;
use super::machine::{Member, Stage, Who};
use super::messages::{Output, Request};
use super::replies::Asked;
use crate::campaign::Failed;
use crate::exchange::Send;
use crate::leading;
use crate::timing::Moment;

impl<I, K, E> Member<I, K, E>
where
    I: Moment,
    K: Kinds,
    E: Failed + std::fmt::Display,
{
    /// The term's `request` goes out under its tag `tag`, to the replica it addresses
    /// ([`Self::on_anchor`]) and, for a handoff's change or conditional release, mirrored to
    /// the others ([`Self::mirror`]): a hand-on's or a rekey's `change` is judged by every
    /// replica's answer, the mirrored ones awaited beside the handoff's replica's
    /// (`fan::on_a_majority`); the others go on alone.
    pub(super) fn send_leading(
        &mut self,
        tag: crate::exchange::Tag,
        request: leading::Request<I, K::Record, K::ETag>,
        now: I,
        out: &mut Vec<Output<I, K, E>>,
    ) {
        let mirrored = match &request {
            leading::Request::Store {
                request: store,
                limit,
            } => self.mirror(store, *limit),
            _ => Vec::new(),
        };
        let asked = Asked::Leading(request.clone());
        let awaited = !mirrored.is_empty()
            && matches!(&request, leading::Request::Store { request: store, .. }
                if matches!(**store, crate::handoff::Request::Change { from: Some(_), .. }));
        let request = self.on_anchor(request);
        if awaited {
            let anchor = match request {
                Request::OnReplica { replica, request } => (replica, *request),
                request => (0, request),
            };
            let parts = std::iter::once(anchor).chain(mirrored).collect();
            return self.send_parts((Who::Leading, tag), parts, asked, now, out);
        }
        for (replica, request) in mirrored {
            let request = Request::OnReplica {
                replica,
                request: Box::new(request),
            };
            let tag = self.tags.fresh();
            out.push(Output::Send(Send { tag, request }));
            out.push(Output::Forget(tag));
        }
        self.send((Who::Leading, tag), request, asked, now, out);
    }

    /// On several replicas, a handoff's change of the lease on the first replica (or its
    /// conditional release) goes to every other replica this term wrote its epoch to as well,
    /// conditional on that replica's ETag after the write (docs/quorum.md, Handover: the lease
    /// changed on every replica the leader holds, and the successor acquires a majority). One
    /// another member wrote its epoch to since is not the term's to change (the successor's
    /// write there refuses a hand-on's change away from it), as the notice's ETag guards the
    /// first. Returns each replica's request: the handoff's first `change` and a release each
    /// go on alone (the successor's acquire is what tells); a hand-on's and a rekey's are
    /// awaited ([`Self::send_leading`]).
    fn mirror(
        &self,
        store: &crate::handoff::Request<K::Record, K::ETag>,
        limit: I,
    ) -> Vec<(usize, Request<I, K>)> {
        use crate::handoff::Request as H;
        if self.settings.set.len() == 1 || !matches!(store, H::Change { .. } | H::ReleaseIf { .. })
        {
            return Vec::new();
        }
        let anchor = self.kept.anchor;
        let mut mirrored = Vec::new();
        for (replica, etag) in self.kept.replica_etags.iter().enumerate() {
            let Some(etag) = etag.clone().filter(|_| replica != anchor) else {
                continue;
            };
            let request = match store {
                H::Change { from, to, .. } => H::Change {
                    from: from.clone(),
                    to: to.clone(),
                    etag: Some(etag),
                },
                H::ReleaseIf { from, .. } => H::ReleaseIf {
                    from: from.clone(),
                    etag,
                },
                _ => continue,
            };
            let store = leading::Request::Store {
                request: Box::new(request),
                limit,
            };
            mirrored.push((replica, Request::Leading(store)));
        }
        mirrored
    }

    /// The handoff's replica, fixed at the term's end's first request on the lease blob: the
    /// first the term holds then with its epoch written there (one it counted at its start may
    /// have been refused since), else the one chosen at its start.
    pub(super) fn anchor_now(&mut self) {
        if self.anchored || self.settings.set.len() == 1 {
            return;
        }
        self.anchored = true;
        let Stage::Leading(l) = &self.stage else {
            return;
        };
        let etags = &self.kept.replica_etags;
        if let Some(i) = (0..etags.len()).find(|i| etags[*i].is_some() && l.holds(*i)) {
            self.kept.anchor = i;
        }
    }

    /// A hand-on's notice refused on the handoff's replica because that replica is no longer
    /// as the term left it (wiped, rolled back, or its lease gone: 404, 412, 409) goes to the
    /// next replica the term wrote its epoch to, whose ETag since still stands as far as it
    /// knows, and that replica is the handoff's from then on (docs/quorum.md, Handover): the
    /// lease changed there to the member the notice names is not left to run out under an id
    /// nobody acquires with. The one refused is dropped from the term's replicas (its ETag no
    /// longer stands), so each is tried once. Returns whether the notice went out again.
    pub(super) fn reanchor_notice(
        &mut self,
        now: I,
        route: &super::machine::Route<I, K>,
        came: &super::messages::Reply<K, E>,
        out: &mut Vec<Output<I, K, E>>,
    ) -> bool {
        use crate::failure::Failure;
        use crate::handoff::Request as H;
        let refused = matches!(came,
            super::messages::Reply::Leading(leading::Reply::Noticed(Err(e)))
                if e.condition_failed()
                    || matches!(e.failure(), Failure::LeaseLost | Failure::Missing));
        let (Who::Leading, true, Asked::Leading(leading::Request::Store { request, limit })) =
            (route.who, refused, &route.asked)
        else {
            return false;
        };
        let H::Notice {
            from,
            to,
            passed_over,
            ..
        } = &**request
        else {
            return false;
        };
        let was = self.kept.anchor;
        let etags = &self.kept.replica_etags;
        let Some((next, etag)) = (0..etags.len())
            .filter(|i| *i != was)
            .find_map(|i| etags[i].clone().map(|etag| (i, etag)))
        else {
            return false;
        };
        if let Some(gone) = self.kept.replica_etags.get_mut(was) {
            *gone = None;
        }
        self.kept.anchor = next;
        let notice = H::Notice {
            from: from.clone(),
            to: to.clone(),
            passed_over: passed_over.clone(),
            etag,
        };
        let request = leading::Request::Store {
            request: Box::new(notice),
            limit: *limit,
        };
        self.send_leading(route.tag, request, now, out);
        true
    }

    /// A term's request as sent: on several replicas, what the term addresses to the lease
    /// blob (the handoff's requests, the confirmation's reads, a choice's notice) goes to the
    /// handoff's replica ([`anchor`]), and a release of that replica beyond the handoff's to
    /// the first, whose place it takes.
    fn on_anchor(&self, request: leading::Request<I, K::Record, K::ETag>) -> Request<I, K> {
        use crate::choice::Request as Choice;
        use leading::Request as L;
        let anchor = self.kept.anchor;
        match request {
            _ if anchor == 0 => Request::Leading(request),
            L::ReleaseReplica { replica, limit } if replica == anchor => {
                Request::Leading(L::ReleaseReplica { replica: 0, limit })
            }
            // A confirmation's read goes to every replica (`member::fan`).
            L::Store {
                request: store,
                limit,
            } if matches!(*store, crate::handoff::Request::Read { .. }) => {
                Request::Leading(L::Store {
                    request: store,
                    limit,
                })
            }
            L::Store { .. } => Request::OnReplica {
                replica: anchor,
                request: Box::new(Request::Leading(request)),
            },
            L::Choice {
                request: choice,
                limit,
            } if matches!(*choice, Choice::Notice(_)) => Request::OnReplica {
                replica: anchor,
                request: Box::new(Request::Leading(L::Choice {
                    request: choice,
                    limit,
                })),
            },
            request => Request::Leading(request),
        }
    }
}

/// On several replicas, the replica a term's handoff goes through (docs/quorum.md, Handover):
/// the first the term counts (its lease renewed) with its epoch written there, so that the
/// notice, the `change` the others mirror, and the confirmation's reads are on a lease the
/// term holds as long as its lead; the first written to, else the first, if none counts.
pub(super) fn anchor<D, T>(leases: &[Option<D>], etags: &[Option<T>]) -> usize {
    let written = |i: &usize| etags.get(*i).is_some_and(Option::is_some);
    (0..leases.len())
        .find(|i| leases[*i].is_some() && written(i))
        .or_else(|| (0..etags.len()).find(written))
        .unwrap_or(0)
}
