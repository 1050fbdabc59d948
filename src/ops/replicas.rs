//! `status` and `break` on a group whose lease is held on a majority of storage accounts
//! (`[[storage.replica]]`, docs/quorum.md): every replica read, or broken, side by side, each
//! request with its own timeout (an account down costs its own timeout, never another's
//! answer), and what the answers say of the group.
//!
//! `status` answers while a majority of the replicas answers: with fewer, whether anyone leads
//! cannot be told (the others may hold the majority), and the report says so (`error`). `break`
//! succeeds once a majority is broken or free: then no holder keeps a majority.

use super::break_lease::{BreakOutcome, break_lease};
use super::held::{LeaseHolder, verified};
use super::majority::{self, Majority, ReplicaRow, StampFit};
use super::request::{storage_error_line, within};
use super::status::{LeaseReport, local_status};
use crate::store::target::StorageTarget;
use crate::store::{BlobState, Failure, LeaseStore, MemberRecord, StoreError};
use futures::future::join_all;
use leasehold_core::quorum::{ReplicaSet, Stamp};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// One replica of the group: its store and where it is. `n` counts from 1, in the set's order.
pub struct Replica<'a, S> {
    pub n: usize,
    pub store: &'a S,
    pub target: &'a StorageTarget,
}

/// What one replica's read gave: its blob, who holds it, its stamp.
type Read = (BlobState, Option<LeaseHolder>, Stamp);

/// No replica answered `status`.
#[derive(Debug, Clone)]
pub struct Unanswered {
    /// Why, in one line, naming each replica.
    pub line: String,
    /// Each replica's row, with its error.
    pub replicas: Vec<ReplicaRow>,
}

impl Unanswered {
    /// Whether storage refused the credentials on one of them.
    pub fn denied(&self) -> bool {
        self.replicas.iter().any(|r| r.denied)
    }
}

/// `leasehold status` on a replica group: each replica's blob and member records, read side by
/// side, and the local daemon's view. With fewer than a majority answering, the report's
/// `error` says so; with none, there is no report. A replica whose blob is younger than
/// `young` (the lock-delay `L + M` and a second) counts for nobody.
pub async fn status<S: LeaseStore>(
    replicas: &[Replica<'_, S>],
    set: &ReplicaSet,
    young: Duration,
    local: Option<SocketAddr>,
) -> Result<LeaseReport, Unanswered> {
    let reads = join_all(replicas.iter().map(|r| async move {
        let started = Instant::now();
        let read = read_stamped(r.store).await;
        (read, started.elapsed())
    }));
    let lists = join_all(replicas.iter().map(|r| within(r.store.list_members())));
    let asked = async {
        match local {
            Some(addr) => local_status(addr).await,
            None => None,
        }
    };
    let (reads, lists, local) = tokio::join!(reads, lists, asked);
    let mut rows: Vec<ReplicaRow> = replicas
        .iter()
        .zip(&reads)
        .map(|(r, (read, latency))| row(r, read, *latency, set, young))
        .collect();
    let majority = majority::count(&mut rows, set.majority());
    // `read_from` names a replica that answered.
    let Some(Ok((state, holder, _))) = majority.read_from.map(|from| &reads[from - 1].0) else {
        return Err(Unanswered {
            line: unread_line(&majority, &rows),
            replicas: rows,
        });
    };
    let from = majority.read_from.unwrap_or(1);
    let mut report = LeaseReport::from_state(replicas[from - 1].target, state, *holder);
    if !majority.reached {
        report.leader = None;
    }
    report = report.with_members(union(lists));
    if majority.answered < majority.needed {
        report.error = Some(unread_line(&majority, &rows));
    }
    report.local = local;
    report.majority = Some(majority);
    report.replicas = rows;
    Ok(report)
}

/// A replica's blob with its stamp (one request), and who holds it.
async fn read_stamped<S: LeaseStore>(store: &S) -> Result<Read, StoreError> {
    let (state, stamp) = within(store.read_stamped()).await?;
    let (state, holder) = verified(store, state).await?;
    Ok((state, holder, stamp))
}

/// Replica `r`'s row, from its read (which took `latency`); a blob younger than `young`
/// counts for nobody yet.
fn row<S>(
    r: &Replica<'_, S>,
    read: &Result<Read, StoreError>,
    latency: Duration,
    set: &ReplicaSet,
    young: Duration,
) -> ReplicaRow {
    let endpoint = crate::secret::redact_urls(&r.target.endpoint);
    let mut row = match read {
        Err(e) => {
            let mut row = ReplicaRow::failed(r.n, &r.target.account, &endpoint, error_line(e, r));
            row.denied = e.failure() == Failure::Denied;
            row
        }
        Ok((state, holder, stamp)) => {
            let seen = LeaseReport::from_state(r.target, state, *holder);
            let mut row = ReplicaRow::failed(r.n, &r.target.account, &endpoint, String::new());
            row.error = None;
            row.lease_state = Some(seen.lease_state);
            row.holder = seen.leader;
            row.lease_holder = seen.lease_holder;
            row.last_holder = seen.last_holder;
            row.epoch = seen.epoch;
            row.acquired_at = seen.acquired_at;
            row.fingerprint = stamp.fingerprint.map(|f| f.to_string());
            row.replica_id = stamp.id.map(|id| id.to_string());
            row.stamp = Some(StampFit::of(stamp, set));
            row.young_for_s = young
                .checked_sub(state.age)
                .filter(|left| !left.is_zero())
                .map(|left| left.as_secs() + u64::from(left.subsec_nanos() > 0));
            row
        }
    };
    row.latency_ms = (latency.as_secs_f64() * 10_000.0).round() / 10.0;
    row
}

/// A replica's failed request in one line, its hint naming the replica's table.
fn error_line<S>(e: &StoreError, r: &Replica<'_, S>) -> String {
    if e.failure() == Failure::Denied {
        return format!("storage refused the credentials ({e}); {}", e.denied_hint());
    }
    storage_error_line(e, r.target).replace(
        "[storage].endpoint",
        &format!("[storage.replica {}].endpoint", r.n),
    )
}

/// The line of a report that cannot tell whether anyone leads: how many answered, and which
/// replicas did not.
fn unread_line(m: &Majority, rows: &[ReplicaRow]) -> String {
    let failed = rows
        .iter()
        .filter(|r| !r.answered())
        .map(|r| (r.replica, &r.endpoint, r.denied));
    let which = match m.answered {
        0 => format!("none of the {} replicas answered", m.replicas),
        a => format!(
            "only {a} of {} replicas answered, fewer than a majority ({})",
            m.replicas, m.needed
        ),
    };
    format!(
        "{which}: whether the group has a leader cannot be told; {}; `leasehold check` proves \
         each account",
        not_reached(failed)
    )
}

/// "could not reach replica 2 at URL, replica 3 at URL" (and "storage refused the credentials
/// of replica N at URL" for those that refused).
fn not_reached<'a>(failed: impl Iterator<Item = (usize, &'a String, bool)>) -> String {
    let (mut unreached, mut refused) = (Vec::new(), Vec::new());
    for (n, endpoint, denied) in failed {
        let named = format!("replica {n} at {endpoint}");
        if denied {
            refused.push(named);
        } else {
            unreached.push(named);
        }
    }
    let mut said = Vec::new();
    if !unreached.is_empty() {
        said.push(format!("could not reach {}", unreached.join(", ")));
    }
    if !refused.is_empty() {
        said.push(format!(
            "storage refused the credentials of {}",
            refused.join(", ")
        ));
    }
    said.join("; ")
}

/// The line of members as the replicas that answered show it (the rule: a member's view of
/// the line is the union of what the replicas it reached show): each record once, by its name.
fn union(
    lists: Vec<Result<Vec<MemberRecord>, StoreError>>,
) -> Result<Vec<MemberRecord>, StoreError> {
    let mut first_error = None;
    let mut records: BTreeMap<_, MemberRecord> = BTreeMap::new();
    let mut listed = false;
    for list in lists {
        match list {
            Ok(list) => {
                listed = true;
                for record in list {
                    // A live record wins over a dead one of the same member.
                    let keep = records
                        .get(&record.key)
                        .is_none_or(|kept| !kept.is_alive() && record.is_alive());
                    if keep {
                        records.insert(record.key.clone(), record);
                    }
                }
            }
            Err(e) => first_error = first_error.or(Some(e)),
        }
    }
    match (listed, first_error) {
        (false, Some(e)) => Err(e),
        _ => Ok(records.into_values().collect()),
    }
}

/// What `break` did on one replica.
pub struct ReplicaBreak {
    /// Its place in the set's order, from 1.
    pub n: usize,
    /// Its endpoint, as shown.
    pub endpoint: String,
    /// What `break` did there, or why it could not (one line).
    pub outcome: Result<BreakOutcome, String>,
    /// Whether storage refused the credentials there.
    pub denied: bool,
}

/// What `break` did on each replica of a group, in the set's order.
pub struct GroupBreak {
    /// Each replica's outcome.
    pub outcomes: Vec<ReplicaBreak>,
    /// `k`.
    pub needed: usize,
}

/// `leasehold break` on a replica group: breaks the lease on every replica it reaches, side by
/// side, each as `break` breaks one account's.
pub async fn break_group<S: LeaseStore>(
    replicas: &[Replica<'_, S>],
    set: &ReplicaSet,
    period: Duration,
) -> GroupBreak {
    let outcomes = join_all(replicas.iter().map(|r| async move {
        let broken = match break_lease(r.store, r.target, period).await {
            // A replica without its blob holds no lease: it counts for no holder (docs/quorum.md).
            Err(e) if e.failure() == Failure::Missing => Ok(BreakOutcome::NoBlob {
                at: format!("{}/{}", r.target.container, r.target.blob),
            }),
            broken => broken,
        };
        ReplicaBreak {
            n: r.n,
            endpoint: crate::secret::redact_urls(&r.target.endpoint),
            denied: broken
                .as_ref()
                .is_err_and(|e| e.failure() == Failure::Denied),
            outcome: broken.map_err(|e| error_line(&e, r)),
        }
    }))
    .await;
    GroupBreak {
        outcomes,
        needed: set.majority(),
    }
}

impl GroupBreak {
    /// How many replicas are broken or were not leased: free of their holder's lease.
    pub fn freed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.outcome.is_ok()).count()
    }

    /// Whether a majority is free: no holder keeps a majority.
    pub fn succeeded(&self) -> bool {
        self.freed() >= self.needed
    }

    /// Whether storage refused the credentials on a replica that failed.
    pub fn denied(&self) -> bool {
        self.outcomes.iter().any(|o| o.denied)
    }

    /// One line a replica, and on success a last line saying the group's lease is broken.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for ReplicaBreak {
            n,
            endpoint,
            outcome,
            ..
        } in &self.outcomes
        {
            let said = match outcome {
                Ok(outcome) => outcome.render().trim_end().to_owned(),
                Err(line) => format!("failed: {line}"),
            };
            out += &format!("replica {n} ({endpoint}): {said}\n");
        }
        if self.succeeded() {
            out += &format!(
                "the group's lease is broken: {} of {} replicas broken or not held, a majority \
                 ({}); its holder stops leading at its next renew\n",
                self.freed(),
                self.outcomes.len(),
                self.needed
            );
        }
        out
    }

    /// Why `break` failed, in one line: not a majority, and which replicas it could not break.
    pub fn failure_line(&self) -> String {
        let failed = self
            .outcomes
            .iter()
            .filter(|o| o.outcome.is_err())
            .map(|o| (o.n, &o.endpoint, o.denied));
        format!(
            "broke or found free {} of {} replicas, fewer than a majority ({}): {}; the holder \
             may keep its majority: run break again once they answer",
            self.freed(),
            self.outcomes.len(),
            self.needed,
            not_reached(failed)
        )
    }
}
