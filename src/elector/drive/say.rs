//! The log lines a member calls for ([`Voice::say`]), as the shell has always written them
//! (the tests read many): what a line says is data, with one macro call per level (clippy's
//! `cognitive_complexity` counts what tracing's macros expand to). The campaign's, the term's
//! end and the record keeper's are in the files beside this one.

use super::deadline::log_deadline;
use super::voice::Voice;
use crate::fmt::human;
use crate::store::Shell;
use crate::store::StoreError;
use leasehold_core::holder::Note as Renewal;
use leasehold_core::late::Said;
use leasehold_core::member::{Note, Say};
use leasehold_core::term::TermEnd;
use std::time::Duration;
use tokio::time::Instant;

impl Voice {
    /// Logs what the member calls for.
    pub(super) fn say(&mut self, say: Say<Instant, Shell, StoreError>) {
        match say {
            Say::Campaign(say) => self.campaign(say),
            Say::Keeper(say) => self.keeper(say),
            Say::Late(said) => late(said),
            Say::Settled(_) => {}
            Say::Leading(say) => drop(self.leading(*say)),
            Say::Renewal(note) => self.renewal(note),
            Say::Pending(_) => {}
            Say::Won(term) => self.won(&term),
            Say::Outlasting { kill_at, expiry } => self.outlasting(kill_at, expiry),
            Say::TermEnded(ended) => self.ended(&ended),
            Say::Resting { why, until } => self.resting(why, until),
            Say::PassedOver(member) => passed_over(&member),
            Say::Ghost(member) => ghost(&member),
            Say::Reserved { epoch, failed } => reserved(epoch, failed.as_ref()),
            Say::Unreleased(e) => tracing::warn!(
                error = %e,
                "could not release the lease; it expires on its own within {}",
                human(self.timing.duration)
            ),
            Say::StoppedFollowing => {
                tracing::info!(identity = self.identity.as_str(), "stopped as a follower");
            }
        }
    }

    /// Logs what a question answered from what the member knows changed.
    pub(super) fn note(&self, note: Note) {
        match note {
            Note::Mismatch(Some(recorded)) => self.mismatch(recorded),
            Note::Mismatch(None) => tracing::info!(
                configured = self.slots,
                "the group's slot count now matches this instance's; campaigning"
            ),
            Note::LockDelay { slot, left } => lock_delay(slot, left),
            Note::CountsOtherwise(n) => tracing::debug!(
                recorded = n,
                "released slot 0: the group counts other slots"
            ),
        }
    }

    /// A slot count that differs from the group's.
    fn mismatch(&self, recorded: u32) {
        tracing::error!(
            configured = self.slots,
            recorded,
            "[lease].slots = {} here, but this group leads with slots = {recorded} \
             (recorded on its blob by the leader of slot 0): this instance does not \
             lead; set [lease].slots = {recorded} (or change every instance of the \
             group, see docs/slots.md); looking again every {}",
            self.slots,
            human(leasehold_core::Pace::MISMATCH_RECHECK)
        );
    }

    /// A term was won.
    fn won(&mut self, term: &leasehold_core::member::Term<Instant, time::OffsetDateTime>) {
        let (identity, epoch) = (self.identity.as_str(), term.epoch);
        self.epoch = epoch;
        log_deadline(&term.deadline, epoch);
        if self.slots > 1 {
            tracing::info!(identity, epoch, slot = term.slot, "acquired leadership");
        } else if term.reserved {
            tracing::info!(
                identity,
                epoch,
                "acquired leadership, on the epoch its handoff reserved"
            );
        } else {
            tracing::info!(identity, epoch, "acquired leadership");
        }
    }

    /// What a renew's answer changed.
    fn renewal(&self, note: Renewal<Instant>) {
        match note {
            Renewal::Renewed {
                deadline,
                took,
                slow,
                failures,
            } => {
                log_deadline(&deadline, self.epoch);
                let left = human(deadline.stop_at.saturating_duration_since(self.clock.now()));
                renewed(took, slow, failures, &left);
            }
            Renewal::Retrying { .. } | Renewal::Lost { .. } if self.replicas > 1 => {
                replica_renewal(note);
            }
            Renewal::Retrying { left, .. } => tracing::warn!(
                left = %human(left),
                "renew failed; retrying until the stop deadline"
            ),
            Renewal::Lost { .. } => tracing::warn!("the lease was lost"),
            Renewal::Expired { failures } => tracing::warn!(
                failures,
                "no renew succeeded before the stop deadline; stepping down"
            ),
        }
    }

    /// The body outlived its kill.
    fn outlasting(&self, kill_at: Instant, expiry: Instant) {
        let _ = kill_at;
        tracing::error!(
            epoch = self.epoch,
            "{} did not end when killed; no longer renewing its lease, which expires in {} at \
             the latest",
            self.body,
            human(expiry.saturating_duration_since(self.clock.now()))
        );
    }

    /// The pause after a term that ended for `why`, until `until`.
    fn resting(&self, why: TermEnd, until: Instant) {
        let identity = self.identity.as_str();
        let text = match why {
            TermEnd::Unhealthy { cooldown } => {
                format!("staying out of the election for {}", human(cooldown))
            }
            TermEnd::CrashLoop { backoff } => format!(
                "staying out of the election for {} (crash-loop backoff)",
                human(backoff)
            ),
            _ => format!(
                "staying out of the election until the lease this instance last renewed has surely expired, for {}",
                human(until.saturating_duration_since(self.clock.now()))
            ),
        };
        tracing::info!(identity, "{text}");
    }
}

/// The write of the epoch a handoff reserved for this member answered (`failed`: refused, or
/// no answer; the attempt reads the blob and writes the next epoch as without it).
fn reserved(epoch: u64, failed: Option<&StoreError>) {
    match failed {
        None => tracing::debug!(
            epoch,
            "wrote the epoch the handoff reserved for this instance"
        ),
        Some(e) => {
            tracing::debug!(error = %e, "the reserved epoch was not written; reading the blob");
        }
    }
}

/// A renew that succeeded slowly, or late after failures.
fn renewed(took: Duration, slow: bool, failures: u32, left: &str) {
    if slow {
        tracing::warn!(took = %human(took), left, "slow renew; the lease is kept");
    }
    if failures > 0 {
        tracing::info!(failures, left, "renewed late; lease kept");
    }
}

/// A replica's renew failed, or its lease was lost: on a set one of several, so the term holds
/// while a majority does, and its stop deadline (`left`) is the majority's.
fn replica_renewal(note: Renewal<Instant>) {
    match note {
        Renewal::Retrying { left, .. } => tracing::warn!(
            left = %human(left),
            "a replica's renew failed; retrying it (the lease holds on a majority until the stop \
             deadline)"
        ),
        _ => tracing::warn!("a replica's lease was lost; the lease holds while a majority does"),
    }
}

/// What the settling of a late acquire says.
fn late(said: Said<StoreError>) {
    match said {
        Said::NoAnswer => {
            tracing::debug!("no answer to the late acquire within the lease duration");
        }
        Said::Failed {
            refused,
            late,
            error,
        } => late_failed(refused, late, &error),
        Said::Releasing { late } => tracing::warn!(
            late = %human(late),
            "the acquire that got no answer in time had taken the lease; releasing it at once (storage answers this instance too late for it to lead)"
        ),
        Said::Unreleased { error, left } => unreleased(error, left),
    }
}

/// The late acquire failed so (`refused`: the service refused it), `late` after its send.
fn late_failed(refused: bool, late: Duration, error: &StoreError) {
    let what = match refused {
        true => "the late acquire was refused",
        false => "the late acquire may have been applied",
    };
    tracing::debug!(late = %human(late), error = %error, "{what}");
}

/// The release of a late success got no confirmation (`error`: its answer, if any).
fn unreleased(error: Option<StoreError>, left: Duration) {
    let error = error.map(|e| e.to_string()).unwrap_or_default();
    tracing::warn!(
        error = %error,
        "no answer to that release either; if it did not reach storage, the lease expires unrenewed within {}",
        human(left)
    );
}

/// A lock-delay of `left` began on the blob of `slot`.
fn lock_delay(slot: u32, left: Duration) {
    tracing::warn!(
        slot,
        "the lease blob was deleted (under its leader?): no body starts on it before a \
         lock-delay of the lease duration and the safety margin, in {}",
        human(left)
    );
}

/// The lookout's probe found nothing at the URL of the member due.
fn passed_over(member: &str) {
    tracing::warn!(
        member,
        "not stepping down for a member of higher priority that does not answer at its \
         advertised URL; passing it over"
    );
}

/// The member ahead is not the process its record names.
fn ghost(member: &str) {
    tracing::info!(
        member,
        "the member ahead in line is not the process its record names (its URL answers \
         for another, or for none); passing its record over"
    );
}
