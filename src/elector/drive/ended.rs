//! The log lines of a term's end: the handoff's, its confirmation's and the choice of a
//! successor's (a lease that could not be handed at WARN, with its error), and the one line
//! that says how the term ended and what became of the lease.

use super::voice::Voice;
use crate::elector::observe::Handoff as Gave;
use crate::fmt::human;
use crate::store::{MemberRecord, StoreError};
use leasehold_core::confirmation::{Note as Confirmed, Wake};
use leasehold_core::handoff::{self, Outcome, Surrender};
use leasehold_core::leading::{Ended, Say};
use leasehold_core::term::TermEnd;
use tokio::time::Instant;

impl Voice {
    /// The term's end's lines; how the handoff gave the lease up, for the observer.
    pub(super) fn leading(&self, say: Say<MemberRecord, StoreError>) -> Option<Gave> {
        match say {
            Say::Handoff(handoff::Note::Gave(outcome)) => return Some(gave(outcome)),
            Say::Handoff(note) => handed(note),
            Say::Choice(note) => chose(note),
        }
        None
    }

    /// How the term ended, and what became of the lease.
    pub(super) fn ended(&self, ended: &Ended<Instant, MemberRecord>) {
        let (identity, epoch) = (self.identity.as_str(), self.epoch);
        let gave = match &ended.surrender {
            Surrender::HandedTo(next) => format!("handed the lease to {}", next.member.identity),
            Surrender::Released(true) => "released the lease".to_owned(),
            Surrender::Released(false) => {
                "the lease was not released; it expires on its own".to_owned()
            }
            Surrender::Lost => "the lease was no longer ours".to_owned(),
        };
        let (ended_so, body) = (self.body_ended, self.body);
        let line = match ended.end {
            TermEnd::Exit(code) => {
                return tracing::info!(
                    identity,
                    epoch,
                    code,
                    "released leadership: {ended_so}; {gave}; exiting with its code"
                );
            }
            TermEnd::Overran if ended.outlived => {
                return tracing::warn!(
                    identity,
                    epoch,
                    "lost leadership: {body} outlived its kill and its lease; {gave}"
                );
            }
            TermEnd::Released => format!("released leadership: {ended_so}; {gave}"),
            TermEnd::Lost => "lost leadership: the lease is no longer ours".to_owned(),
            TermEnd::Expired => {
                format!("lost leadership: no renew succeeded before the stop deadline; {gave}")
            }
            TermEnd::Shutdown => format!("released leadership: shutting down; {gave}"),
            TermEnd::Unhealthy { .. } => format!("stepped down: child unhealthy; {gave}"),
            TermEnd::CrashLoop { .. } => format!("stepped down: child crash-looping; {gave}"),
            TermEnd::Preempted => format!("stepped down for a preferred leader; {gave}"),
            TermEnd::Overran => {
                format!("released leadership: {ended_so} after its kill deadline; {gave}")
            }
        };
        tracing::info!(identity, epoch, "{line}");
    }
}

/// How the handoff gave the lease up, as the observer counts it.
fn gave(outcome: Outcome) -> Gave {
    match outcome {
        Outcome::HandedOver => Gave::HandedOver,
        Outcome::NoSuccessor => Gave::NoSuccessor,
        Outcome::Fallback => Gave::Fallback,
        Outcome::Lost => Gave::Lost,
        Outcome::Released => Gave::Released,
    }
}

/// What the handoff says.
fn handed(note: handoff::Note<MemberRecord, StoreError>) {
    use handoff::Note as Said;
    let (e, successor, text) = match note {
        Said::Gave(_) => return,
        Said::Confirmation(note) => return confirmed(note),
        Said::Nobody => {
            return tracing::info!("no other live member to hand the lease to; releasing it");
        }
        Said::NotRekeyed(e) => {
            return unchanged(
                &e,
                "could not hand the lease to the successor's new lease id",
            );
        }
        Said::NotHandedOn(e) => return unchanged(&e, "the lease was not handed on"),
        Said::Unlisted(e) => (
            e,
            None,
            "cannot list the members to hand the lease over; releasing it",
        ),
        Said::Lost(e) => (e, None, "the lease is no longer ours; nothing to hand over"),
        Said::Unanswered(e, next) => (
            e,
            Some(next.member.identity.clone()),
            "no answer to the handoff; releasing the lease with this instance's own id (refused if the handoff landed)",
        ),
    };
    tracing::warn!(error = %e, successor = successor.as_deref(), "{text}");
}

/// A handoff step that changed nothing (the confirmation goes on).
fn unchanged(e: &StoreError, text: &str) {
    tracing::debug!(error = %e, "{text}");
}

/// What the choice of a successor says.
fn chose(note: leasehold_core::choice::Note<MemberRecord, StoreError>) {
    use leasehold_core::choice::Note;
    match note {
        Note::NoticeFailed(e) => {
            tracing::debug!(error = %e, "could not write the handoff notice");
        }
        Note::NotConfirmed(guess) => tracing::debug!(
            successor = guess.member.identity.as_str(),
            "its record or the notice did not confirm it the successor; listing the members"
        ),
        Note::HandingOverWithoutNotice(e) => {
            tracing::warn!(error = %e, "could not write the handoff notice; handing over anyway");
        }
    }
}

/// What the confirmation says: a successor that did not take the lease as it should have at
/// WARN, the rest at INFO, each naming the successor.
fn confirmed(note: Confirmed<MemberRecord>) {
    let (to, text) = match note {
        Confirmed::TakenAtItsOwnPoll(to) => {
            return tracing::warn!(
                successor = to.member.identity.as_str(),
                url = to.member.advertise.as_deref().unwrap_or_default(),
                "the successor took the lease at its own poll: nothing listens at its advertised \
                 URL (check its [election].advertise)"
            );
        }
        Confirmed::NotTaken {
            member,
            waited,
            window,
            wake,
        } => return not_taken(&member, waited, window, wake),
        Confirmed::AnotherProcessAnswers(to) => (
            Some(to),
            "another process answers at the URL of the member handed the lease; passing it over",
        ),
        Confirmed::Rejoined(to) => (
            Some(to),
            "the member handed the lease rejoined the line since it was listed",
        ),
        Confirmed::LedSince(to) => (
            Some(to),
            "the member handed the lease led since it was listed and may hold a slot; listing the \
             members",
        ),
        Confirmed::Left(to) => (
            Some(to),
            "the member handed the lease has left the line (its record is gone); passing it over",
        ),
        Confirmed::NewLeaseId(to) => (
            Some(to),
            "handed the lease to the new lease id of the same successor",
        ),
        Confirmed::NobodyElse => (None, "nobody else to hand the lease to; releasing it"),
        Confirmed::HandedOn(to) => (Some(to), "handed the lease on"),
    };
    let successor = to.as_ref().map(|r| r.member.identity.as_str());
    tracing::info!(successor, "{text}");
}

/// A successor that did not take the lease within its window.
fn not_taken(
    member: &MemberRecord,
    waited: std::time::Duration,
    window: std::time::Duration,
    wake: Wake,
) {
    let wake = match wake {
        Wake::Accepted => "it took the wake-up",
        Wake::Missed => "not woken",
        Wake::Unreachable => "nothing listens at its URL",
        Wake::Refused => "another process answers at its URL",
    };
    tracing::warn!(
        successor = member.member.identity.as_str(),
        "the member handed the lease did not take it ({} of a {} window, {wake}); passing it over",
        human(waited),
        human(window)
    );
}
