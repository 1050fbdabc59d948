//! The preferred leader (docs/preferred.md): while this instance leads, [`watch`] carries out
//! the core's lookout (`leasehold_core::preemption::lookout`: when to list the line, what a
//! listing means, the probe of a due member) and says when a member of higher priority is due;
//! the loop then stops the body and hands the lease to that member
//! ([`TermEnd::Preempted`](super::TermEnd::Preempted)).
//!
//! Preemption counts only members confirmed alive (docs/safety.md, "Recovery from anything"): a
//! member passed over after failing to take a handoff is no candidate while it is passed over, and
//! a member with an advertised URL must answer a probe there before the leader stops its body for
//! it (one that does not is passed over: [`answers`]). Without `advertise` the settled mark is all
//! there is; a handoff to a member that died since is then caught by the confirmed handoff.

use super::Observer;
use super::members::{Line, Membership};
use super::wake::{self, WakeSent};
use crate::store::{LeaseStore, MemberRecord};
use crate::timing::Timing;
pub(crate) use leasehold_core::preemption::lookout::Listing;
use leasehold_core::preemption::lookout::{Action, Event};
pub(crate) use leasehold_core::preemption::{self, Preemption};
use std::time::Duration;
use tokio::time::Instant;

/// The core's lookout of a leader, on the store's records.
type Lookout = preemption::lookout::Lookout<Instant, MemberRecord>;

/// The members a leader may hand over to by preemption, now ([`preemption::candidates`]).
fn candidates(l: &Line) -> Vec<MemberRecord> {
    preemption::candidates(&l.succession, l.clock.now())
}

/// While this instance leads: resolves when it should hand over to a member of higher
/// priority (never, with `preempt_after = "off"`). The core's [`Lookout`] says when to list
/// (or, with [`Listing::Borrowed`], to look at the line as the record keeper listed it), whom
/// to probe and what each answer means; this carries it out.
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
    let me = membership.with(|l| l.own.published.identity.clone());
    let clock = membership.clock();
    let mut lookout = Lookout::new(timing, after, ours, &me, listing);
    let (line, listed) = membership.with(|l| (candidates(l), l.succession.listed));
    let mut event = Event::Start { line, listed };
    loop {
        let actions = lookout.step(clock.now(), clock.wall(), event, &mut fastrand::f64);
        let mut next = None;
        for action in actions {
            next = Some(match action {
                Action::List { limit } => match membership.list(store, observer, limit).await {
                    Ok(()) => Event::Listed(Some(membership.with(|l| candidates(l)))),
                    Err(e) => {
                        tracing::debug!(error = %e, "could not list the members to look for a preferred leader");
                        Event::Listed(None)
                    }
                },
                Action::Look => membership.with(|l| Event::Looked {
                    listed: l.succession.listed,
                    line: candidates(l),
                }),
                Action::Probe { url, .. } => Event::Probed(answers(sender, &url).await),
                Action::PassOver(to) => {
                    tracing::warn!(
                        member = to,
                        "not stepping down for a member of higher priority that does not answer \
                         at its advertised URL; passing it over"
                    );
                    membership.with(|l| l.pass_over(&to));
                    observer.line(&membership.view());
                    continue;
                }
                Action::Pending(pending) => {
                    show_pending(membership, observer, pending);
                    continue;
                }
                Action::Sleep(Some(at)) => {
                    clock.sleep_until(at).await;
                    Event::Woke
                }
                Action::Sleep(None) => return std::future::pending().await,
                Action::Preempt(p) => {
                    membership.with(|l| l.preempting = None);
                    return p;
                }
            });
        }
        event = next.expect("every step of the lookout ends with what to wait for");
    }
}

/// The line shows the member of higher priority that will be eligible first, and when.
fn show_pending(
    membership: &Membership,
    observer: &dyn Observer,
    pending: Option<(String, Duration)>,
) {
    let pending = pending.map(|(member, ahead)| (member, membership.clock().wall() + ahead));
    let changed = membership.with(|l| {
        let changed = l.preempting != pending;
        l.preempting = pending;
        changed
    });
    if changed {
        observer.line(&membership.view());
    }
}

/// Whether a member answers at its advertised `url`: a `POST /wake` without its wake token
/// (any answer, 401 as a rule: it is a process that listens; the probe costs it no attempt, no
/// storage request, and not its one wake-up a second, which the handoff's wake-up then has).
async fn answers(sender: &wake::Sender, url: &str) -> bool {
    !matches!(
        sender.send(url, None, None).await,
        WakeSent::Failed | WakeSent::Unreachable
    )
}
