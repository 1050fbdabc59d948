//! The watch of a member that is not next in line (docs/succession.md): one read of the lease blob
//! every watch period; a new ETag (a new epoch, or a handoff notice) placed in the line as last
//! listed, and the members listed again only when that is what places this instance.

use super::slots::SlotWatch;
use crate::clock;
use crate::elector::instance::Elector;
use crate::elector::members::Line;
use crate::elector::observe::LeaseOp;
use crate::elector::request::timed;
use crate::store::{BlobState, ETag, Failure, LeaseState, LeaseStore, MemberRecord, StoreError};
use leasehold_core::Pace;
use leasehold_core::candidate::Outcome;
use tokio::time::Instant;

/// What a member that is not the successor saw of the lease blob so far.
#[derive(Debug, Default)]
pub(super) struct BlobWatch {
    /// The ETag of the last read: a new one means a new epoch or a handoff notice.
    pub(super) etag: Option<ETag>,
    /// The last read found the lease held by nobody.
    pub(super) unleased: bool,
    /// The last handoff notice read: a new leader it named was handed the lease; one it did not
    /// name took it after its predecessor crashed or lost it.
    pub(super) notice: Option<String>,
    /// A listing put off: a moment after a change of leader ([`Pace::LIST_AFTER_A_CHANGE`]), or until
    /// a crashed leader's record has surely expired.
    pub(super) list_at: Option<Instant>,
    /// The listing put off is the one after a change of leader that no notice announced: if
    /// it does not make this instance the successor, one more once a crashed leader's record
    /// has surely expired.
    pub(super) then_at_expiry: bool,
    /// With slots: the record of the member ahead.
    pub(super) slots: SlotWatch,
}

/// What one read of the lease blob calls for ([`BlobWatch::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    /// Acquire now, for this reason.
    Acquire(Why),
    /// The lease is held by nobody: read once more a polling period later (the successor
    /// should have taken it meanwhile).
    Unleased,
    /// Nothing new: the same ETag as the last read.
    Same,
    /// A new epoch or notice, placed in the line: list the members now (this instance may be
    /// next, or the line does not know whom the blob names), or only once a crashed leader's
    /// record has surely expired.
    Moved { list_now: bool, list_later: bool },
}

/// Why a watcher acquires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Why {
    /// The blob was created again after a deletion, and is free: whoever takes it waits out
    /// the lock-delay holding it.
    Recreated,
    /// The lease is free and this instance is next in line after the last leader.
    NextInLine,
    /// The lease has been free for a polling period.
    FreeForAPoll,
    /// The leader's handoff notice names this instance.
    Named,
}

impl BlobWatch {
    /// Takes one read of the lease blob (`state`) into this watch and into the line `l` of
    /// member `me`, and says what it calls for. No I/O: the read was made, the listings it
    /// calls for are made by the caller.
    pub(super) fn read(&mut self, l: &mut Line, state: &BlobState, me: &str) -> Read {
        if state.lease != LeaseState::Leased && state.recreated.is_some() {
            self.unleased = false;
            return Read::Acquire(Why::Recreated);
        }
        if state.lease != LeaseState::Leased {
            // Released with nobody to hand it to (a member that joined just after the leader's
            // last listing): the member next in line after the last leader takes it at once;
            // the others wait a polling period for it.
            let next = match l.succession.leader.clone() {
                Some(old) => l.is_successor_without(&old),
                None => l.is_successor(),
            };
            l.read(state);
            self.etag = None;
            if next {
                self.unleased = false;
                return Read::Acquire(Why::NextInLine);
            }
            if self.unleased {
                self.unleased = false;
                return Read::Acquire(Why::FreeForAPoll);
            }
            self.unleased = true;
            return Read::Unleased;
        }
        self.unleased = false;
        if self.etag.as_ref() == Some(&state.etag) {
            return Read::Same;
        }
        self.etag = Some(state.etag.clone());
        let handed = self.notice.clone();
        self.notice = state.successor.clone();
        let before = l.succession.leader.clone();
        l.read(state);
        let named_me = l.succession.notice.as_deref() == Some(me)
            && l.succession.leader.as_deref() != Some(me);
        let unknown = l
            .succession
            .leader
            .iter()
            .chain(l.succession.notice.iter())
            .any(|id| id != me && !l.succession.knows(id));
        // A new leader: whether the old one is still in line is what decides who is next now
        // (a clean stop deleted its record, a release kept it, a crash left it to expire), and
        // this instance's line cannot tell. Only the member that would be next without it
        // lists, at once: one listing per change of leader. A new leader that no notice named
        // (the notice lasts only until the new epoch is written, so this is what a watcher
        // usually sees; or the old leader crashed) may have left a record that has not expired
        // yet: that member looks again once it surely has.
        let next_without_old = match (&before, &l.succession.leader) {
            (Some(old), Some(new)) if old != new => {
                // The lease goes down the line: a member between the two leaders led in a term
                // this watch missed (handovers quicker than a watch period: the bench's 50
                // daemons), and is gone from the front as `old` is.
                let missed = l.succession.between(old, new);
                l.succession.gave_up(old);
                for between in &missed {
                    l.succession.gave_up(between);
                }
                l.is_successor_without(old)
            }
            _ => false,
        };
        let unannounced = match (&before, &l.succession.leader) {
            (Some(_), Some(new)) => handed.as_deref() != Some(new.as_str()),
            _ => false,
        };
        if named_me {
            return Read::Acquire(Why::Named);
        }
        Read::Moved {
            list_now: l.is_successor() || unknown || next_without_old,
            list_later: unannounced && next_without_old,
        }
    }
}

impl<S: LeaseStore> Elector<S> {
    /// One round of a member that is not the successor: one read of the lease blob, taken into
    /// the line ([`BlobWatch::read`]). A new ETag (a new epoch, or a handoff notice) is placed in
    /// the line as last listed; the members are listed again only when that makes this
    /// instance the successor or names a member the line does not know, so that a change of
    /// leader costs one listing, not one per member. A lease held by nobody is read once more a
    /// polling period later, and then acquired: that fallback bounds a dead successor, or a
    /// line that is out of date, to about a lease duration and a watch period.
    pub(super) async fn watch_blob(&mut self, w: &mut BlobWatch) -> Result<Outcome, StoreError> {
        let Some(m) = &self.membership else {
            return Ok(Outcome::Acquire);
        };
        if w.list_at.is_some_and(|at| Instant::now() >= at) {
            w.list_at = None;
            let limit = clock::now() + self.timing.request_timeout();
            if let Err(e) = m.list(&*self.store, &*self.observer, limit).await {
                tracing::debug!(error = %e, "could not list the members");
            }
            if std::mem::take(&mut w.then_at_expiry) && !m.with(|l| l.is_successor()) {
                w.list_at = Some(Instant::now() + Pace::RECORD_LEASE);
            }
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
        if state.recreated.is_some() {
            self.vanished.marked(0, state.age, &self.timing);
        } else if state.holder.is_some() {
            self.vanished.over(0);
        }
        if self.note_count(state.lease, state.holder.as_ref()) {
            return Ok(Outcome::Wait(Pace::MISMATCH_RECHECK));
        }
        let read = m.with(|l| w.read(l, &state, &self.identity));
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
            // A moment later, when a leader that stopped has surely deleted its record.
            w.list_at = Some(Instant::now() + Pace::LIST_AFTER_A_CHANGE);
            w.then_at_expiry = list_later;
            return Ok(Outcome::Wait(Pace::LIST_AFTER_A_CHANGE));
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
            Ok(Some(fresh)) => {
                !fresh.is_alive()
                    || fresh.joined != ahead.joined
                    || fresh.member.in_standby(crate::clock::wall())
            }
            Ok(None) => true,
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
        let (mut w, mut l) = (BlobWatch::default(), line("c"));
        let leased = blob(LeaseState::Leased, Some("a"), "1");
        let moved = w.read(&mut l, &leased, "c");
        assert_eq!(
            moved,
            Read::Moved {
                list_now: false,
                list_later: false
            },
            "c is not next (b is)"
        );
        assert_eq!(w.read(&mut l, &leased, "c"), Read::Same);
        let renotice = blob(LeaseState::Leased, Some("a"), "2");
        assert!(matches!(
            w.read(&mut l, &renotice, "c"),
            Read::Moved {
                list_now: false,
                ..
            }
        ));
    }

    /// A notice that names this instance: acquire now.
    #[test]
    fn a_notice_naming_this_instance_is_acquired() {
        let (mut w, mut l) = (BlobWatch::default(), line("c"));
        let mut handing = blob(LeaseState::Leased, Some("a"), "1");
        handing.successor = Some("c".into());
        assert_eq!(w.read(&mut l, &handing, "c"), Read::Acquire(Why::Named));
    }

    /// A new leader nobody announced: the member that would be next without the old one
    /// lists now, and once more when a crashed leader's record has surely expired; the others
    /// do not list.
    #[test]
    fn a_new_leader_makes_only_the_member_next_without_the_old_one_list() {
        let b_leads = blob(LeaseState::Leased, Some("b"), "2");
        let (mut w, mut l) = (BlobWatch::default(), line("c"));
        assert_eq!(
            w.read(&mut l, &b_leads, "c"),
            Read::Moved {
                list_now: true,
                list_later: true
            }
        );
        assert_eq!(l.succession.leader.as_deref(), Some("b"));
        // Announced by a notice read before: no second look.
        let (mut w, mut l) = (BlobWatch::default(), line("c"));
        let mut handing = blob(LeaseState::Leased, Some("a"), "1");
        handing.successor = Some("b".into());
        w.read(&mut l, &handing, "c");
        assert_eq!(
            w.read(&mut l, &b_leads, "c"),
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
            let (mut w, mut l) = (BlobWatch::default(), line("c"));
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
                w.read(&mut l, &b_leads, "c"),
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
        let (mut w, mut l) = (BlobWatch::default(), line("b"));
        assert_eq!(w.read(&mut l, &free, "b"), Read::Acquire(Why::NextInLine));
        let (mut w, mut l) = (BlobWatch::default(), line("c"));
        assert_eq!(w.read(&mut l, &free, "c"), Read::Unleased);
        assert_eq!(w.read(&mut l, &free, "c"), Read::Acquire(Why::FreeForAPoll));
        let mut recreated = blob(LeaseState::Available, None, "4");
        recreated.recreated = Some("b".into());
        let (mut w, mut l) = (BlobWatch::default(), line("c"));
        assert_eq!(
            w.read(&mut l, &recreated, "c"),
            Read::Acquire(Why::Recreated)
        );
    }
}
