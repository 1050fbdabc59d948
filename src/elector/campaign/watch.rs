//! The watch of a member that is not next in line (docs/succession.md): one read of the lease blob
//! every watch period; a new ETag (a new epoch, or a handoff notice) placed in the line as last
//! listed, and the members listed again only when that is what places this instance. A round
//! is the core's [`Round`]; this is its driver.

use super::slots::SlotWatch;
use crate::elector::instance::Elector;
use crate::elector::members::{self, Line};
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::store::{BlobState, ETag, LeaseState, LeaseStore, MemberRecord, StoreError};
use leasehold_core::candidate::Outcome;
use leasehold_core::watch::{
    Action, BlobRead, BlobWatch, Event, Grounds, Read, Request, Round, Why, ahead_moved,
};
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
    let read = w.read(&mut l.succession, read, l.clock.now(), l.clock.wall());
    l.note_holder(state);
    read
}

impl<S: LeaseStore> Elector<S> {
    /// One round of a member that is not the successor ([`Round`], the core's: the listing
    /// put off if it is due, one read of the lease blob taken into the line, and after a new
    /// term one read of the record ahead). A new ETag (a new epoch, or a handoff notice) is
    /// placed in the line as last listed; the members are listed again only when that makes
    /// this instance the successor or names a member the line does not know, so that a change
    /// of leader costs one listing, not one per member. A lease held by nobody is read once
    /// more a polling period later, and then acquired: that fallback bounds a dead successor,
    /// or a line that is out of date, to about a lease duration and a watch period.
    pub(super) async fn watch_blob(&mut self, w: &mut Watches) -> Result<Outcome, StoreError> {
        if self.membership.is_none() {
            return Ok(Outcome::Acquire);
        }
        let stays = self.mutant.on(crate::mutant::Mutant::WatcherStays);
        let mut round = Round::new(&self.timing, stays);
        let clock = self.clock;
        let mut driver = Driver {
            elector: self,
            state: None,
            ahead: None,
        };
        let mut event = Event::Start;
        loop {
            let mut next = None;
            for action in round.step(clock.now(), event, &mut w.blob, &mut driver) {
                match action {
                    Action::Send(request) => next = Some(driver.send(request).await),
                    Action::Authorized => driver.elector.authorized = true,
                    Action::Missing => {
                        (driver.elector.vanished).missing(0, &driver.elector.timing);
                        tracing::info!("the lease blob is gone; campaigning for it");
                    }
                    Action::ShowLine => driver.show_line(),
                    Action::Acquiring(why) => say_acquire(why),
                    Action::Done(end) => return end,
                }
            }
            // Each step ends with a request, or with the round's end.
            event =
                next.ok_or_else(|| StoreError::Client("a watch round ended unfinished".into()))?;
        }
    }
}

/// One watcher's round on its way: the elector, and what its reads found.
struct Driver<'a, S: LeaseStore> {
    elector: &'a mut Elector<S>,
    /// The lease blob as just read.
    state: Option<BlobState>,
    /// The member just ahead in line, as last listed.
    ahead: Option<MemberRecord>,
}

impl<S: LeaseStore> Driver<'_, S> {
    fn membership(&self) -> &members::Membership {
        (self.elector.membership.as_ref()).expect("a watcher is a member")
    }

    fn show_line(&self) {
        self.elector.observer.line(&self.membership().view());
    }

    /// Sends `request` and waits for its answer.
    async fn send(&mut self, request: Request<Instant>) -> Event<StoreError> {
        let (store, observer) = (self.elector.store.clone(), self.elector.observer.clone());
        let clock = self.elector.clock;
        match request {
            Request::List { until } => {
                if let Err(e) = self.membership().list(&*store, &*observer, until).await {
                    tracing::debug!(error = %e, "could not list the members");
                }
                Event::Listed
            }
            Request::ReadBlob { until } => {
                let read = timed(clock, &*observer, LeaseOp::Read, until, store.read()).await;
                Event::BlobRead(read.map(|state| self.state = Some(state)))
            }
            Request::ReadAhead { until } => {
                let Some(ahead) = self.ahead.take() else {
                    return Event::AheadRead(Ok(false));
                };
                let read = store.read_record(&ahead.key);
                let read = timed(clock, &*observer, LeaseOp::MemberRead, until, read).await;
                Event::AheadRead(
                    read.map(|fresh| ahead_moved(&ahead, fresh.as_ref(), clock.wall())),
                )
            }
        }
    }
}

impl<S: LeaseStore> Grounds<Instant, ETag> for Driver<'_, S> {
    fn is_successor(&mut self) -> bool {
        self.membership().with(|l| l.is_successor())
    }

    fn looked(&mut self) {
        let e = &*self.elector;
        e.vanished.looked(0, self.state.as_ref(), &e.timing);
    }

    fn counts_otherwise(&mut self) -> bool {
        let Some(state) = &self.state else {
            return false;
        };
        self.elector.note_count(state.lease, state.holder.as_ref())
    }

    /// (At the lease clock's now, which `read` reads itself.)
    fn read(&mut self, watch: &mut BlobWatch<Instant, ETag>, _now: Instant) -> Read {
        let Some(state) = &self.state else {
            return Read::Same;
        };
        self.membership().with(|l| read(watch, l, state))
    }

    fn has_ahead(&mut self) -> bool {
        self.ahead = self.membership().with(|l| l.ahead().cloned());
        self.ahead.is_some()
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
        let mut l = Line::new(published, crate::clock::Clock::Host);
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
