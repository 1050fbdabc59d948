//! The watch of a member that is not next in line (docs/succession.md): one read of the lease blob
//! every watch period; a new ETag (a new epoch, or a handoff notice) placed in the line as last
//! listed, and the members listed again only when that is what places this instance.

use super::slots::SlotWatch;
use crate::clock;
use crate::elector::instance::Elector;
use crate::elector::members::{self, Line};
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::store::{BlobState, ETag, Failure, LeaseState, LeaseStore, MemberRecord, StoreError};
use leasehold_core::Pace;
use leasehold_core::candidate::Outcome;
use leasehold_core::watch::{BlobRead, BlobWatch, Read, Why, ahead_moved};
use tokio::time::Instant;

/// What a member that does not lead watches: the lease blob, and with slots the record of the
/// member ahead.
#[derive(Debug, Default)]
pub(super) struct Watches {
    /// The lease blob's reads so far (the core's).
    pub(super) blob: BlobWatch<Instant, ETag>,
    /// With slots: the record of the member ahead.
    pub(super) slots: SlotWatch,
}

/// Takes one read of the lease blob (`state`) into the watch `w` and the line `l`, now, and
/// says what it calls for ([`BlobWatch::read`]).
pub(super) fn read(w: &mut BlobWatch<Instant, ETag>, l: &mut Line, state: &BlobState) -> Read {
    let read = BlobRead {
        leased: state.lease == LeaseState::Leased,
        recreated: state.recreated.is_some(),
        etag: &state.etag,
        seen: members::seen(state),
    };
    let read = w.read(&mut l.succession, read, clock::now(), clock::wall());
    l.note_holder(state);
    read
}

impl<S: LeaseStore> Elector<S> {
    /// One round of a member that is not the successor: one read of the lease blob, taken into
    /// the line ([`BlobWatch::read`]). A new ETag (a new epoch, or a handoff notice) is placed in
    /// the line as last listed; the members are listed again only when that makes this
    /// instance the successor or names a member the line does not know, so that a change of
    /// leader costs one listing, not one per member. A lease held by nobody is read once more a
    /// polling period later, and then acquired: that fallback bounds a dead successor, or a
    /// line that is out of date, to about a lease duration and a watch period.
    pub(super) async fn watch_blob(&mut self, w: &mut Watches) -> Result<Outcome, StoreError> {
        let Some(m) = &self.membership else {
            return Ok(Outcome::Acquire);
        };
        if w.blob.listing_due(Instant::now()) {
            let limit = clock::now() + self.timing.request_timeout();
            if let Err(e) = m.list(&*self.store, &*self.observer, limit).await {
                tracing::debug!(error = %e, "could not list the members");
            }
            (w.blob).listed(Instant::now(), m.with(|l| l.is_successor()));
            // The blob is read in this round too: a listing that takes a round's place would
            // leave the blob unread for two watch periods (rule (f) of docs/safety.md).
        }
        let limit = clock::now() + self.timing.request_timeout();
        let state = match timed(&*self.observer, LeaseOp::Read, limit, self.store.read()).await {
            Ok(state) => state,
            // Nobody watches a leader that is gone (docs/safety.md, "Recovery from anything"): the
            // blob was deleted, and whoever leads next does so under the lock-delay.
            Err(e) if e.failure() == Failure::Missing => {
                self.authorized = true;
                self.vanished.missing(0, &self.timing);
                tracing::info!("the lease blob is gone; campaigning for it");
                return Ok(Outcome::Acquire);
            }
            Err(e) => return Err(e),
        };
        self.authorized = true;
        // Marked, the blob's lock-delay runs from its creation; an epoch on it ends one.
        self.vanished.looked(0, Some(&state), &self.timing);
        if self.note_count(state.lease, state.holder.as_ref()) {
            return Ok(Outcome::Wait(Pace::MISMATCH_RECHECK));
        }
        let read = m.with(|l| read(&mut w.blob, l, &state));
        let (list_now, list_later) = match read {
            Read::Acquire(why) => {
                if why == Why::Named {
                    self.observer.line(&m.view());
                }
                say_acquire(why);
                return Ok(Outcome::Acquire);
            }
            Read::Unleased => return Ok(Outcome::Wait(self.timing.longest_poll())),
            Read::Same => return Ok(Outcome::Look),
            Read::Moved {
                list_now,
                list_later,
            } => (list_now, list_later),
        };
        self.observer.line(&m.view());
        // A new term: the member just ahead of this one in line may have left or died since
        // the last listing, which nothing on the lease blob shows: one read of its record, and
        // a listing when it is gone or not the one listed (rule (f) of docs/safety.md).
        let list_now = list_now
            || match m.with(|l| l.ahead().cloned()) {
                Some(ahead) if !self.mutant.on(crate::mutant::Mutant::WatcherStays) => {
                    self.ahead_moved(&ahead).await
                }
                _ => false,
            };
        if list_now && !self.mutant.on(crate::mutant::Mutant::WatcherStays) {
            return Ok(Outcome::Wait(w.blob.list_soon(Instant::now(), list_later)));
        }
        Ok(Outcome::Look)
    }

    /// Whether the member just ahead of this one in line (`ahead`, as last listed) has left,
    /// died, rejoined or stood by since, by one read of its record.
    async fn ahead_moved(&self, ahead: &MemberRecord) -> bool {
        let limit = clock::now() + self.timing.request_timeout();
        let read = timed(
            &*self.observer,
            LeaseOp::MemberRead,
            limit,
            self.store.read_record(&ahead.key),
        )
        .await;
        match read {
            Ok(fresh) => ahead_moved(ahead, fresh.as_ref(), clock::wall()),
            Err(e) => e.failure() == Failure::Missing,
        }
    }
}

/// The log line of a watcher that acquires, by why.
fn say_acquire(why: Why) {
    match why {
        Why::Recreated => {}
        Why::NextInLine => {
            tracing::info!("the lease is free and this instance is next in line; acquiring it")
        }
        Why::FreeForAPoll => {
            tracing::info!("the lease has been held by nobody for a polling period; acquiring it")
        }
        Why::Named => {
            tracing::info!("the leader is handing the lease to this instance; acquiring it")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::members::{Standing, order};
    use crate::elector::testing::record;
    use crate::store::{Holder, Member};
    use time::OffsetDateTime;

    /// The line of `me` among `a`, `me`, `c` (in that order), listed, `a` leading.
    fn line(me: &str) -> Line {
        let mut members: Vec<_> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let mut r = record(id, 0);
                r.joined += time::Duration::seconds(i as i64);
                r
            })
            .collect();
        order(&mut members);
        let published: Member = members
            .iter()
            .find(|r| r.identity() == me)
            .unwrap()
            .member
            .clone();
        let mut l = Line::new(published);
        l.succession.standing = Standing::Joined;
        l.succession.members = members;
        l.succession.listed = Some(Instant::now());
        l.succession.leader = Some("a".into());
        l
    }

    fn blob(lease: LeaseState, holder: Option<&str>, etag: &str) -> BlobState {
        BlobState {
            lease,
            holder: holder.map(|identity| Holder {
                identity: identity.into(),
                epoch: 7,
                acquired_at: OffsetDateTime::UNIX_EPOCH,
                lease: None,
                slots: None,
            }),
            etag: ETag(etag.into()),
            successor: None,
            passed_over: Vec::new(),
            reserved: None,
            recreated: None,
            age: std::time::Duration::ZERO,
        }
    }

    /// The same ETag is nothing new; a new epoch of the same leader moves nothing either.
    #[test]
    fn a_watcher_acts_only_on_news() {
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
        let leased = blob(LeaseState::Leased, Some("a"), "1");
        let moved = read(&mut w, &mut l, &leased);
        assert_eq!(
            moved,
            Read::Moved {
                list_now: false,
                list_later: false
            },
            "c is not next (b is)"
        );
        assert_eq!(read(&mut w, &mut l, &leased), Read::Same);
        let renotice = blob(LeaseState::Leased, Some("a"), "2");
        assert!(matches!(
            read(&mut w, &mut l, &renotice),
            Read::Moved {
                list_now: false,
                ..
            }
        ));
    }

    /// A notice that names this instance: acquire now.
    #[test]
    fn a_notice_naming_this_instance_is_acquired() {
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
        let mut handing = blob(LeaseState::Leased, Some("a"), "1");
        handing.successor = Some("c".into());
        assert_eq!(read(&mut w, &mut l, &handing), Read::Acquire(Why::Named));
    }

    /// A new leader nobody announced: the member that would be next without the old one
    /// lists now, and once more when a crashed leader's record has surely expired; the others
    /// do not list.
    #[test]
    fn a_new_leader_makes_only_the_member_next_without_the_old_one_list() {
        let b_leads = blob(LeaseState::Leased, Some("b"), "2");
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
        assert_eq!(
            read(&mut w, &mut l, &b_leads),
            Read::Moved {
                list_now: true,
                list_later: true
            }
        );
        assert_eq!(l.succession.leader.as_deref(), Some("b"));
        // Announced by a notice read before: no second look.
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
        let mut handing = blob(LeaseState::Leased, Some("a"), "1");
        handing.successor = Some("b".into());
        read(&mut w, &mut l, &handing);
        assert_eq!(
            read(&mut w, &mut l, &b_leads),
            Read::Moved {
                list_now: true,
                list_later: false
            }
        );
    }

    /// A member whose own record a listing showed lapsed, and which renewed it since (a renew of
    /// a lapsed lease nobody took succeeds): its line counts it alive again, so it moves up when
    /// the member ahead of it leads (simulator seed 9211: rule (f)).
    #[test]
    fn a_member_that_renewed_its_lapsed_record_moves_up() {
        let b_leads = blob(LeaseState::Leased, Some("b"), "2");
        let lists = |renewed: bool| {
            let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
            for r in l
                .succession
                .members
                .iter_mut()
                .filter(|r| r.identity() == "c")
            {
                r.lease = LeaseState::Expired;
            }
            if renewed {
                l.succession.own_record_held();
            }
            matches!(
                read(&mut w, &mut l, &b_leads),
                Read::Moved { list_now: true, .. }
            )
        };
        assert!(!lists(false), "a line showing c dead does not move c");
        assert!(
            lists(true),
            "c renewed its record: it lists, next without a"
        );
    }

    /// A free lease: the member next in line after the last leader acquires at once; another
    /// reads once more a polling period later, then acquires; a blob created again after a
    /// deletion is acquired whatever the line says.
    #[test]
    fn a_free_lease_is_taken_by_the_next_in_line_or_after_a_poll() {
        let free = blob(LeaseState::Available, Some("a"), "3");
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("b"));
        assert_eq!(read(&mut w, &mut l, &free), Read::Acquire(Why::NextInLine));
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
        assert_eq!(read(&mut w, &mut l, &free), Read::Unleased);
        assert_eq!(
            read(&mut w, &mut l, &free),
            Read::Acquire(Why::FreeForAPoll)
        );
        let mut recreated = blob(LeaseState::Available, None, "4");
        recreated.recreated = Some("b".into());
        let (mut w, mut l) = (BlobWatch::<Instant, ETag>::default(), line("c"));
        assert_eq!(
            read(&mut w, &mut l, &recreated),
            Read::Acquire(Why::Recreated)
        );
    }
}
