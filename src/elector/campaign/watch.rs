//! The watch of a member that is not next in line (docs/succession.md): one read of the lease
//! blob every watch period, taken into the line as last listed ([`read`]); the round around it is
//! the core's ([`leasehold_core::watch::Round`]), run by the campaign.

use crate::elector::members::Line;
use crate::store::{BlobState, ETag};
use leasehold_core::blob::LeaseBlob;
use leasehold_core::watch::{BlobWatch, Read};
use tokio::time::Instant;

/// Takes one read of the lease blob (`state`) into the watch `w` and the line `l`, now, and
/// says what it calls for ([`BlobWatch::read`]).
pub(super) fn read(w: &mut BlobWatch<Instant, ETag>, l: &mut Line, state: &BlobState) -> Read {
    let (now, wall) = (l.clock.now(), l.clock.wall());
    let read = w.read(&mut l.succession, state.watch_read(), now, wall);
    l.note_holder(state);
    read
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::elector::members::{Standing, order};
    use crate::elector::testing::record;
    use crate::store::{Holder, LeaseState, Member};
    use leasehold_core::watch::Why;
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
