//! Who speaks in the log ([`Voice`]: the member's identity, clocks, timing, what its body is
//! called, the epoch of its term), and the campaign's and the record keeper's lines: a
//! failure at WARN (storage refusing the credentials at ERROR), the rest at INFO (watching,
//! which is the usual state of most members, at DEBUG; a record request tried again at DEBUG).

use crate::clock::Clock;
use crate::fmt::human;
use crate::store::{Failure, MemberKey, StoreError};
use crate::timing::{POLL_JITTER, Timing};
use leasehold_core::Pace;
use leasehold_core::candidate::Note;
use leasehold_core::line::{Place, Standing};
use leasehold_core::record::{self, Keep};
use leasehold_core::watch::Why;
use tokio::time::Instant;

/// Who speaks in the log.
pub(super) struct Voice {
    pub identity: String,
    pub clock: Clock,
    pub timing: Timing,
    pub slots: u32,
    /// How many storage accounts the lease is held on (1, or the replicas of a set).
    pub replicas: usize,
    /// What the body is ("the child"), and how one that ended by itself is told of.
    pub body: &'static str,
    pub body_ended: &'static str,
    /// The epoch of the term won last.
    pub epoch: u64,
}

impl Voice {
    /// The campaign's lines.
    pub(super) fn campaign(&self, say: leasehold_core::campaign::Say<Instant, StoreError>) {
        use leasehold_core::campaign::Say;
        let text = match say {
            Say::Candidate(note) => return self.candidate(note),
            Say::Acquiring(why) => return acquiring(why),
            Say::BlobGone => "the lease blob is gone; campaigning for it",
            Say::ShuttingDown => {
                "shutting down: releasing the lease just acquired, before writing an epoch"
            }
            Say::Foreign(places) => return self.replicas_unusable(&places, true),
            Say::Missing(places) => return self.replicas_unusable(&places, false),
            Say::Unsettled(expired) => {
                let within = human(expired.saturating_duration_since(self.clock.now()));
                return tracing::warn!(
                    "stopping without the answer to an earlier acquire; if it took the lease, the lease expires unrenewed within {within}"
                );
            }
        };
        tracing::info!("{text}");
    }

    /// A replica set's members leading on none of `places`: stamped for another set
    /// (`foreign`), or missing and not to be created.
    fn replicas_unusable(&self, places: &[usize], foreign: bool) {
        let (replicas, n) = (counted_from_one(places), self.replicas);
        match foreign {
            true => tracing::warn!(
                "replica {replicas} of {n} (in the config's order) holds a lease blob another replica set made (its members list other accounts, or the same in another order), or one made for a single account: it counts for nobody here; every member of a group must list the same [[storage.replica]] tables in the same order (docs/quorum.md)"
            ),
            false => tracing::warn!(
                "the lease blob of replica {replicas} of {n} (in the config's order) does not exist and [storage].create_if_missing = false: it counts for nobody until it is created; create it, or set create_if_missing = true"
            ),
        }
    }

    /// The candidate's lines.
    fn candidate(&self, note: Note<Instant, StoreError>) {
        let text = match note {
            Note::CountUnread(e) => {
                return failed(&e, "cannot read the group's blob; retrying");
            }
            Note::NoAnswer(e) => {
                let expires = (self.timing.duration).saturating_sub(self.timing.request_timeout());
                let text = format!(
                    "no answer to the acquire in time; not sending it again (it may have taken the lease on the server): waiting for its answer, or at most until that lease would have expired, in {}",
                    human(expires)
                );
                return failed(&e, &text);
            }
            Note::Retrying(e, pause) => {
                let what = match e.failure() {
                    Failure::Denied => "storage refused the credentials",
                    _ => "cannot acquire the lease",
                };
                return failed(&e, &format!("{what}; retrying in {}", human(pause)));
            }
            Note::Place {
                place: Place::Watch,
                moved,
            } => return self.watching(moved),
            Note::LockDelay(until) => format!(
                "waiting out the lock-delay of the deleted lease blob, {}",
                human(until.saturating_duration_since(self.clock.now()))
            ),
            Note::Place {
                place: Place::Poll, ..
            } => "next in line: polling the lease every acquire_interval".to_owned(),
            Note::Following => "another instance holds the lease; following".to_owned(),
        };
        tracing::info!(identity = %self.identity, "{text}");
    }

    /// A member that watches: at DEBUG when it begins so (most members do), at INFO when it
    /// was next in line before (`moved`), as that was said at INFO. (The period's range, not a
    /// draw: a log line must not take a random number, or a simulated history would depend
    /// on the log level.)
    fn watching(&self, moved: bool) {
        let period = self.timing.acquire_interval * leasehold_core::pace::WATCH_PERIODS;
        let longest = human(period.mul_f64(1.0 + POLL_JITTER));
        let period = human(period);
        match moved {
            true => tracing::info!(
                identity = %self.identity,
                "no longer next in line: watching the lease blob every {period} to {longest}"
            ),
            false => tracing::debug!(
                "not next in line: watching the lease blob every {period} to {longest}"
            ),
        }
    }

    /// The record keeper's lines.
    pub(super) fn keeper(&self, say: record::Say<StoreError>) {
        use record::Say;
        let (text, e) = match say {
            Say::Standing(standing) => return self.standing(standing),
            Say::Left(left) => return left_the_line(left),
            Say::RecordGone => {
                return tracing::warn!("this instance's member record is gone; joining again");
            }
            Say::Failed(keep, e) => {
                let what = match keep {
                    Keep::DeleteOld { .. } => "delete the old member record",
                    Keep::Create => "create the member record",
                    Keep::TakeLease => "take the member record's lease",
                    Keep::Renew => "renew the member record's lease",
                };
                (format!("could not {what}; trying again"), e)
            }
            // The renew sorts out what became of the record.
            Say::WriteLost(e) => ("could not write the member record".to_owned(), e),
            Say::WriteFailed(e) => (
                "could not write the member record; again soon".to_owned(),
                e,
            ),
        };
        tracing::debug!(error = %e, "{text}");
    }

    fn standing(&self, standing: Standing) {
        match standing {
            Standing::Joined => tracing::info!("joined the line of members"),
            Standing::Duplicate => tracing::warn!(
                record = %MemberKey::of(&self.identity),
                "another instance holds the member record of this identity (another instance \
                 with this identity, or this instance before a restart whose record lease has \
                 not expired yet, within {}): this instance stays out of line (it still takes \
                 a lease nobody holds) and tries again every {}",
                human(Pace::RECORD_LEASE),
                human(Pace::RECORD_RENEW)
            ),
            Standing::Refused(why) => tracing::warn!(
                "{why}; this instance has no member record and polls the lease every \
                 acquire_interval as without members; trying again every {}",
                human(Pace::LIST_EVERY)
            ),
            Standing::Joining => {}
        }
    }
}

/// A failure: at ERROR when storage refused the credentials, else at WARN.
fn failed(e: &StoreError, text: &str) {
    match e.failure() {
        Failure::Denied => tracing::error!(error = %e, "{text}"),
        _ => tracing::warn!(error = %e, "{text}"),
    }
}

/// A watcher that acquires, by why.
fn acquiring(why: Why) {
    let text = match why {
        Why::Recreated => return,
        Why::NextInLine => "the lease is free and this instance is next in line; acquiring it",
        Why::FreeForAPoll => "the lease has been held by nobody for a polling period; acquiring it",
        Why::Named => "the leader is handing the lease to this instance; acquiring it",
    };
    tracing::info!("{text}");
}

/// Leaving the line.
fn left_the_line(left: Result<(), StoreError>) {
    match left {
        Ok(()) => tracing::info!("left the line of members"),
        Err(e) => tracing::warn!(
            error = %e,
            "could not delete this instance's member record; it counts as dead within {}",
            human(Pace::RECORD_LEASE)
        ),
    }
}

/// Replicas' places as people count them, from 1: "1, 3".
fn counted_from_one(places: &[usize]) -> String {
    let counted: Vec<String> = places.iter().map(|p| (p + 1).to_string()).collect();
    counted.join(", ")
}
