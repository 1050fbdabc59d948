//! The campaign's log lines ([`Say`]): what a line says is data, with one macro call per level
//! (clippy's `cognitive_complexity` counts what tracing's macros expand to).

use crate::elector::instance::Elector;
use crate::elector::members::Place;
use crate::fmt::human;
use crate::store::{Failure, LeaseStore, StoreError};
use crate::timing::POLL_JITTER;
use leasehold_core::candidate::Note;
use leasehold_core::watch::Why;
use tokio::time::Instant;

type Say = leasehold_core::campaign::Say<Instant, StoreError>;

impl<S: LeaseStore> Elector<S> {
    /// Logs what the campaign calls for: a failure at WARN (storage refusing the credentials
    /// at ERROR), with its error; the rest at INFO (watching, which is the usual state of most
    /// members, at DEBUG).
    pub(super) fn say(&self, say: Say) {
        let text = match say {
            Say::Candidate(note) => return self.say_note(note),
            Say::Acquiring(why) => return say_acquire(why),
            Say::BlobGone => "the lease blob is gone; campaigning for it",
            Say::ShuttingDown => {
                "shutting down: releasing the lease just acquired, before writing an epoch"
            }
            Say::Unsettled(expired) => {
                let within = human(expired.saturating_duration_since(self.clock.now()));
                return tracing::warn!(
                    "stopping without the answer to an earlier acquire; if it took the lease, the lease expires unrenewed within {within}"
                );
            }
        };
        tracing::info!("{text}");
    }

    /// The candidate's lines.
    fn say_note(&self, note: Note<Instant, StoreError>) {
        let text = match note {
            Note::CountUnread(e) => {
                return say_failed(&e, "cannot read the group's blob; retrying");
            }
            Note::NoAnswer(e) => {
                let expires = self
                    .timing
                    .duration
                    .saturating_sub(self.timing.request_timeout());
                let text = format!(
                    "no answer to the acquire in time; not sending it again (it may have taken the lease on the server): waiting for its answer, or at most until that lease would have expired, in {}",
                    human(expires)
                );
                return say_failed(&e, &text);
            }
            Note::Retrying(e, pause) => {
                let what = match e.failure() {
                    Failure::Denied => "storage refused the credentials",
                    _ => "cannot acquire the lease",
                };
                return say_failed(&e, &format!("{what}; retrying in {}", human(pause)));
            }
            // (The period's range, not a draw: a log line must not take a random number, or a
            // simulated history would depend on the log level.)
            Note::Place {
                place: Place::Watch,
                moved,
            } => return self.say_watching(moved),
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
}

impl<S: LeaseStore> Elector<S> {
    /// The log line of a member that watches: at DEBUG when it begins so (most members do),
    /// at INFO when it was next in line before (`moved`), as that was said at INFO.
    /// (The period's range, not a draw: a log line must not take a random number, or a
    /// simulated history would depend on the log level.)
    fn say_watching(&self, moved: bool) {
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
}

/// The log line of a failure: at ERROR when storage refused the credentials, else at WARN.
fn say_failed(e: &StoreError, text: &str) {
    match e.failure() {
        Failure::Denied => tracing::error!(error = %e, "{text}"),
        _ => tracing::warn!(error = %e, "{text}"),
    }
}

/// The log line of a watcher that acquires, by why.
fn say_acquire(why: Why) {
    let text = match why {
        Why::Recreated => return,
        Why::NextInLine => "the lease is free and this instance is next in line; acquiring it",
        Why::FreeForAPoll => "the lease has been held by nobody for a polling period; acquiring it",
        Why::Named => "the leader is handing the lease to this instance; acquiring it",
    };
    tracing::info!("{text}");
}
