//! The preferred leader (docs/preferred.md): while this instance leads, [`watch`] lists the
//! line at the core's cadence and around the moment a member should mark its record, asks the
//! core's `preemption::PreemptionWatch` whether a member of higher priority is due, and says so;
//! the loop then stops the body and hands the lease to that member
//! ([`TermEnd::Preempted`](super::TermEnd::Preempted)).
//!
//! Preemption counts only members confirmed alive (docs/safety.md, "Recovery from anything"): a
//! member passed over after failing to take a handoff is no candidate while it is passed over, and
//! a member with an advertised URL must answer a wake-up there before the leader stops its body for
//! it (one that does not is passed over: [`answers`]). Without `advertise` the settled mark is all
//! there is; a handoff to a member that died since is then caught by the confirmed handoff.

use super::Observer;
use super::members::{Line, Membership};
use super::wake::{self, WakeSent};
use crate::clock;
use crate::store::{LeaseStore, MemberRecord};
use crate::timing::Timing;
use leasehold_core::Pace;
pub(crate) use leasehold_core::preemption::{self, Preemption};
use std::time::Duration;
use tokio::time::Instant;

/// The core's watch of a leader on the store's records.
type PreemptionWatch = preemption::PreemptionWatch<Instant, MemberRecord>;

/// The members a leader may hand over to by preemption, now ([`preemption::candidates`]).
fn candidates(l: &Line) -> Vec<MemberRecord> {
    preemption::candidates(&l.succession, clock::now())
}

/// The leader's listing period, drawn anew ([`preemption::cadence`]).
fn cadence(after: Duration) -> Duration {
    preemption::cadence(after, fastrand::f64())
}

/// Who lists for preemption: with slots, only the holder of slot 0 (the group's blob) lists at
/// the preemption [`cadence`]; holders of the other slots look at the line as their member
/// record task lists it anyway while they lead (every
/// [`Pace::LEADER_LIST_EVERY`](Pace::LEADER_LIST_EVERY)), so that the group's
/// listings do not grow with N. Those preempt up to one such period after the moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// This leader lists at the cadence, and probes around a member's moment.
    Own,
    /// This leader lists nothing for preemption; it reads the line as others list it.
    Borrowed,
}

impl Listing {
    /// The listing a holder of `slot` does.
    pub fn for_slot(slot: u32) -> Self {
        match slot {
            0 => Listing::Own,
            _ => Listing::Borrowed,
        }
    }
}

/// While this instance leads: resolves when it should hand over to a member of higher
/// priority (never, with `preempt_after = "off"`). Lists the members at the [`cadence`], and
/// every [`Pace::PROBE`] while a member should be marking its record. (Wake-ups do not make it list:
/// `POST /wake` carries no authority, and must not make a leader spend List requests.)
#[allow(clippy::too_many_arguments)]
pub(crate) async fn watch<S: LeaseStore>(
    store: &S,
    observer: &dyn Observer,
    membership: &Membership,
    timing: &Timing,
    after: Option<Duration>,
    ours: i64,
    listing: Listing,
    sender: &wake::Sender,
) -> Preemption {
    let Some(after) = after else {
        return std::future::pending().await;
    };
    let me = membership.with(|l| l.published.identity.clone());
    let mut w = PreemptionWatch::new(after, ours, &me);
    if listing == Listing::Borrowed {
        return borrowed(membership, observer, &mut w, sender).await;
    }
    // The line as last listed tells of members already known: the first listing of the term
    // comes at the cadence (or when one of them is about to be eligible), not at once.
    let (cached, listed) = membership.with(|l| (candidates(l), l.succession.listed));
    let mut next = match listed {
        Some(at) => {
            w.listed(&cached, at);
            w.next_list(Instant::now(), cadence(after))
        }
        None => Instant::now(),
    };
    loop {
        if Instant::now() >= next {
            let sent = Instant::now();
            let limit = clock::now() + timing.request_timeout();
            match membership.list(store, observer, limit).await {
                Ok(()) => {
                    let line = membership.with(|l| candidates(l));
                    w.listed(&line, sent);
                    if let Some(p) = w.due(&line, Instant::now(), crate::clock::wall())
                        && answers(&line, &p, membership, observer, sender).await
                    {
                        membership.with(|l| l.preempting = None);
                        return p;
                    }
                    let pending = w.first(Instant::now()).and_then(|(k, at)| {
                        let r = line.iter().find(|r| &r.key == k)?;
                        let ahead = at.saturating_duration_since(Instant::now());
                        Some((r.identity().to_owned(), crate::clock::wall() + ahead))
                    });
                    let changed = membership.with(|l| {
                        let changed = l.preempting != pending;
                        l.preempting = pending;
                        changed
                    });
                    if changed {
                        observer.line(&membership.view());
                    }
                }
                Err(e) => {
                    tracing::debug!(error = %e, "could not list the members to look for a preferred leader")
                }
            }
            next = w.next_list(Instant::now(), cadence(after));
        }
        tokio::time::sleep_until(next).await;
    }
}

/// The watch of a holder that lists nothing for preemption: each time the line was listed
/// (by the member record task), the same rule on it.
async fn borrowed(
    membership: &Membership,
    observer: &dyn Observer,
    w: &mut PreemptionWatch,
    sender: &wake::Sender,
) -> Preemption {
    let mut seen = None;
    loop {
        let (listed, line) = membership.with(|l| (l.succession.listed, candidates(l)));
        if let Some(at) = listed.filter(|at| seen != Some(*at)) {
            seen = Some(at);
            w.listed(&line, at);
            if let Some(p) = w.due(&line, Instant::now(), crate::clock::wall())
                && answers(&line, &p, membership, observer, sender).await
            {
                return p;
            }
        }
        tokio::time::sleep(Pace::BORROWED_LISTING_LOOK).await;
    }
}

/// Whether the member `p` names is confirmed alive, as far as it can be: one with an
/// advertised URL must answer a probe there, a `POST /wake` without its wake token (any
/// answer, 401 as a rule: it is a process that listens; the probe costs it no attempt, no
/// storage request, and not its one wake-up a second, which the handoff's wake-up then has);
/// one that does not is passed over, and the leader stays. Without `advertise` its settled
/// record is all there is.
async fn answers(
    line: &[MemberRecord],
    p: &Preemption,
    membership: &Membership,
    observer: &dyn Observer,
    sender: &wake::Sender,
) -> bool {
    let Some(url) = line
        .iter()
        .find(|r| r.identity() == p.to)
        .and_then(|r| r.member.advertise.as_deref())
    else {
        return true;
    };
    if !matches!(
        sender.send(url, None, None).await,
        WakeSent::Failed | WakeSent::Unreachable
    ) {
        return true;
    }
    tracing::warn!(
        member = p.to,
        "not stepping down for a member of higher priority that does not answer at its \
         advertised URL; passing it over"
    );
    membership.with(|l| l.pass_over(&p.to));
    observer.line(&membership.view());
    false
}
