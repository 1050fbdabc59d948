//! What the replicas of a group whose lease is held on a majority of storage accounts
//! (`[[storage.replica]]`, docs/quorum.md) say of it, as an operator reads them: one row a
//! replica, and whether one holder has a majority.
//!
//! The count keeps the core's rules as far as a reader of the blobs can (`leasehold_core::quorum`,
//! the rules *Counting* and *One replica set*): a replica counts for the holder it is leased to
//! (as `status` names the holder of one account) when its blob carries this config's replica set
//! and an id that no replica before it in the set's order carries; a holder that `k = n/2 + 1`
//! count for has a majority. A reader sees no member's deadlines or lock-delays, so this is
//! where the leases are, not a promise that their holder's body runs.

use super::held::LeaseHolder;
use crate::store::LeaseState;
use leasehold_core::quorum::{ReplicaSet, Stamp};
use serde::Serialize;
use std::collections::BTreeMap;

/// Whether a replica's blob carries this config's replica set (the rule *One replica set*).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StampFit {
    /// This set's fingerprint and an id of the blob's own: the replica can count.
    ThisSet,
    /// Another set's fingerprint (another list of accounts, or another order): it counts for
    /// no member of this one.
    OtherSet,
    /// No fingerprint, or no id: no member of a replica set created the blob, and it counts for
    /// nobody.
    #[serde(rename = "none")]
    Unstamped,
}

impl StampFit {
    /// How `stamp` fits `set`.
    pub fn of(stamp: &Stamp, set: &ReplicaSet) -> Self {
        match (stamp.fingerprint, stamp.id) {
            _ if stamp.matches(set) => Self::ThisSet,
            (Some(_), Some(_)) => Self::OtherSet,
            _ => Self::Unstamped,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::ThisSet => "this set",
            Self::OtherSet => "other set",
            Self::Unstamped => "none",
        }
    }
}

/// One replica as `status` shows it (a `replicas` item of `status --json`). The JSON field
/// names are part of the contract (docs/operations.md, "status").
#[derive(Debug, Clone, Serialize)]
pub struct ReplicaRow {
    /// Its place in the set's order, from 1: `[storage.replica N]`.
    pub replica: usize,
    /// The storage account's name.
    pub account: String,
    /// Its blob endpoint (a SAS in it redacted): where it was read.
    pub endpoint: String,
    /// Its lease's state; null when it did not answer.
    pub lease_state: Option<LeaseState>,
    /// Who holds the lease there: its recorded holder while it is leased under that holder's
    /// lease id (or that could not be checked), as `leader` of one account; else null.
    pub holder: Option<String>,
    /// While leased: whether the recorded holder holds it (`recorded`, `unrecorded`,
    /// `unverified`), as `lease_holder` of one account.
    pub lease_holder: Option<LeaseHolder>,
    /// The last holder its metadata records.
    pub last_holder: Option<String>,
    /// The epoch its metadata records.
    pub epoch: Option<u64>,
    /// When that holder's leadership began (RFC 3339, UTC).
    pub acquired_at: Option<String>,
    /// The replica set's fingerprint its blob carries (16 hex digits), if any.
    pub fingerprint: Option<String>,
    /// Its blob's own id (32 hex digits), if any.
    pub replica_id: Option<String>,
    /// Whether that stamp is this config's set (`this_set`, `other_set`, `none`); null when it
    /// did not answer.
    pub stamp: Option<StampFit>,
    /// Whether it counts for its holder: leased by it, stamped by this set, with an id no
    /// replica before it carries, and old enough (`young_for_s`).
    pub counts: bool,
    /// While its blob is younger than the lock-delay `L + M` (and a second: the service's clock
    /// counts whole seconds), the seconds until it is that old: until then it counts for nobody
    /// (the rule *Lock-delay per replica*, docs/quorum.md); null once it is older, or when it
    /// did not answer.
    pub young_for_s: Option<u64>,
    /// How long its read took (the Get Blob Properties), in milliseconds; for one that failed,
    /// how long until it failed.
    pub latency_ms: f64,
    /// Why it could not be read, in one line; null when it was.
    pub error: Option<String>,
    /// Whether storage refused the credentials there: the command's exit code, not shown.
    #[serde(skip)]
    pub denied: bool,
}

impl ReplicaRow {
    /// A replica that could not be read: `error` says why.
    pub fn failed(replica: usize, account: &str, endpoint: &str, error: String) -> Self {
        Self {
            replica,
            account: account.to_owned(),
            endpoint: endpoint.to_owned(),
            lease_state: None,
            holder: None,
            lease_holder: None,
            last_holder: None,
            epoch: None,
            acquired_at: None,
            fingerprint: None,
            replica_id: None,
            stamp: None,
            counts: false,
            young_for_s: None,
            latency_ms: 0.0,
            error: Some(error),
            denied: false,
        }
    }

    /// Whether it answered.
    pub fn answered(&self) -> bool {
        self.error.is_none()
    }
}

/// Whether one holder has a majority of the replicas (`status --json`'s `majority`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Majority {
    /// How many accounts the set lists, `n`.
    pub replicas: usize,
    /// How many must count for a holder: `k = n/2 + 1`.
    pub needed: usize,
    /// How many answered.
    pub answered: usize,
    /// Whether a holder has a majority.
    pub reached: bool,
    /// That holder; null without one.
    pub holder: Option<String>,
    /// How many replicas count for it (0 without one).
    pub counted: usize,
    /// The replica the report's own fields (`lease_state`, `epoch`, ...) were read from: the
    /// holder's with the largest epoch, or without a holder, the one with the largest epoch of
    /// those that answered; null when none did.
    pub read_from: Option<usize>,
}

impl Majority {
    /// Why nobody leads, as the `leader` line says it.
    pub fn why_none(&self) -> String {
        if self.answered < self.needed {
            format!(
                "only {} of {} replicas answered, fewer than a majority ({}): whether anyone \
                 leads cannot be told",
                self.answered, self.replicas, self.needed
            )
        } else {
            format!(
                "no holder has a majority of the replicas ({} of {})",
                self.needed, self.replicas
            )
        }
    }
}

/// Marks the rows that count for their holder, and finds the holder with a majority, if one
/// has. `needed` is `k`.
pub fn count(rows: &mut [ReplicaRow], needed: usize) -> Majority {
    let mut ids: Vec<String> = Vec::new();
    let mut tally: BTreeMap<String, usize> = BTreeMap::new();
    for row in rows.iter_mut() {
        // A young replica counts for nobody, and its id is no other's concern yet.
        let stamped = row.stamp == Some(StampFit::ThisSet) && row.young_for_s.is_none();
        let id = row.replica_id.clone().unwrap_or_default();
        // One account listed twice shows one id twice: it counts once.
        row.counts = match &row.holder {
            Some(holder) if stamped && !ids.contains(&id) => {
                *tally.entry(holder.clone()).or_default() += 1;
                ids.push(id);
                true
            }
            _ => false,
        };
    }
    let winner = tally.into_iter().find(|(_, n)| *n >= needed);
    let answered = rows.iter().filter(|r| r.answered()).count();
    let read_from = match &winner {
        Some((holder, _)) => latest(
            rows.iter()
                .filter(|r| r.counts && r.holder.as_ref() == Some(holder)),
        ),
        None => latest(rows.iter().filter(|r| r.answered())),
    };
    Majority {
        replicas: rows.len(),
        needed,
        answered,
        reached: winner.is_some(),
        counted: winner.as_ref().map_or(0, |(_, n)| *n),
        holder: winner.map(|(h, _)| h),
        read_from,
    }
}

/// The row of `rows` with the largest epoch (the first of equals, a row without one last).
fn latest<'a>(rows: impl Iterator<Item = &'a ReplicaRow>) -> Option<usize> {
    let mut best: Option<&ReplicaRow> = None;
    for row in rows {
        if best.is_none_or(|b| row.epoch > b.epoch) {
            best = Some(row);
        }
    }
    best.map(|r| r.replica)
}

/// The replicas as `status` shows them: a line with the count, a table in the set's order, and
/// a line for each replica that could not be read.
pub fn render(majority: &Majority, rows: &[ReplicaRow]) -> String {
    let m = majority;
    let verdict = match &m.holder {
        Some(holder) => format!("{holder} holds a majority ({} count for it)", m.counted),
        None if m.answered < m.needed => format!("only {} answered", m.answered),
        None => "no holder has one".to_owned(),
    };
    let mut out = format!(
        "replicas     {} accounts, a majority is {}: {verdict}\n",
        m.replicas, m.needed
    );
    let dash = || "-".to_owned();
    let mut table = vec![
        [
            "#", "account", "endpoint", "lease", "holder", "epoch", "stamp", "counts", "read",
        ]
        .map(str::to_owned),
    ];
    for r in rows {
        let holder = match (&r.holder, r.lease_holder) {
            (Some(h), Some(LeaseHolder::Unverified)) => format!("{h} (unverified)"),
            (Some(h), _) => h.clone(),
            (None, Some(LeaseHolder::Unrecorded)) => "(unrecorded)".to_owned(),
            (None, _) => dash(),
        };
        table.push([
            r.replica.to_string(),
            r.account.clone(),
            r.endpoint.clone(),
            r.lease_state.map_or_else(dash, |s| s.to_string()),
            holder,
            r.epoch.map_or_else(dash, |e| e.to_string()),
            r.stamp.map_or_else(dash, |s| s.name().to_owned()),
            match (r.counts, r.young_for_s) {
                (true, _) => "yes".to_owned(),
                (false, Some(s)) => format!("no (young, {s}s)"),
                (false, None) => "no".to_owned(),
            },
            match r.error {
                None => format!("{:.1}ms", r.latency_ms),
                Some(_) => format!("failed after {:.1}ms", r.latency_ms),
            },
        ]);
    }
    out += &crate::fmt::columns(&table);
    for r in rows {
        if let Some(e) = &r.error {
            out += &format!("  replica {}: {e}\n", r.replica);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        replica: usize,
        holder: Option<&str>,
        epoch: u64,
        stamp: StampFit,
        id: &str,
    ) -> ReplicaRow {
        let mut r = ReplicaRow::failed(replica, "acct", "http://e", String::new());
        r.error = None;
        r.lease_state = Some(if holder.is_some() {
            LeaseState::Leased
        } else {
            LeaseState::Available
        });
        r.holder = holder.map(str::to_owned);
        r.epoch = Some(epoch);
        r.stamp = Some(stamp);
        r.replica_id = Some(id.to_owned());
        r
    }

    /// Two of three leased by one holder and stamped by this set: a majority, read from its
    /// replica with the largest epoch.
    #[test]
    fn a_holder_on_two_of_three_has_a_majority() {
        let mut rows = [
            row(1, Some("w1"), 5, StampFit::ThisSet, "a"),
            row(2, None, 3, StampFit::ThisSet, "b"),
            row(3, Some("w1"), 6, StampFit::ThisSet, "c"),
        ];
        let m = count(&mut rows, 2);
        assert!(m.reached);
        assert_eq!(
            (m.holder.as_deref(), m.counted, m.answered),
            (Some("w1"), 2, 3)
        );
        assert_eq!(m.read_from, Some(3));
        assert_eq!(rows.map(|r| r.counts), [true, false, true]);
    }

    /// What does not count: another set's stamp, no stamp, one id seen before (one account
    /// listed twice), a replica that did not answer, two holders with one each.
    #[test]
    fn what_does_not_count_is_no_majority() {
        let cases = [
            [
                row(1, Some("w1"), 5, StampFit::ThisSet, "a"),
                row(2, Some("w1"), 5, StampFit::OtherSet, "b"),
                row(3, None, 5, StampFit::ThisSet, "c"),
            ],
            [
                row(1, Some("w1"), 5, StampFit::Unstamped, "a"),
                row(2, Some("w1"), 5, StampFit::ThisSet, "b"),
                row(3, None, 5, StampFit::ThisSet, "c"),
            ],
            [
                row(1, Some("w1"), 5, StampFit::ThisSet, "a"),
                row(2, Some("w1"), 5, StampFit::ThisSet, "a"),
                row(3, None, 5, StampFit::ThisSet, "c"),
            ],
            [
                row(1, Some("w1"), 5, StampFit::ThisSet, "a"),
                row(2, Some("w2"), 7, StampFit::ThisSet, "b"),
                ReplicaRow::failed(3, "acct", "http://e", "unreachable".into()),
            ],
        ];
        for mut rows in cases {
            let m = count(&mut rows, 2);
            assert!(!m.reached, "{rows:?}");
            assert_eq!((m.holder.clone(), m.counted), (None, 0));
            assert!(
                m.why_none().starts_with("no holder has a majority"),
                "{m:?}"
            );
        }
    }

    /// A replica younger than the lock-delay counts for nobody (the rule *Lock-delay per
    /// replica*): two held of three, one of them young, is no majority until it is old, and the
    /// table says why.
    #[test]
    fn a_young_replica_counts_for_nobody_until_it_is_old() {
        let mut rows = [
            row(1, Some("w1"), 5, StampFit::ThisSet, "a"),
            row(2, None, 5, StampFit::ThisSet, "b"),
            row(3, Some("w1"), 5, StampFit::ThisSet, "c"),
        ];
        rows[2].young_for_s = Some(12);
        let m = count(&mut rows, 2);
        assert!(!m.reached, "{m:?}");
        assert_eq!(rows.clone().map(|r| r.counts), [true, false, false]);
        let shown = render(&m, &rows);
        assert!(shown.contains("no (young, 12s)"), "{shown}");
        assert!(
            shown.contains("a majority is 2: no holder has one"),
            "{shown}"
        );
        rows[2].young_for_s = None;
        let m = count(&mut rows, 2);
        assert_eq!((m.holder.as_deref(), m.counted), (Some("w1"), 2));
    }

    /// One of three answered: no majority can be told, and the line says so.
    #[test]
    fn fewer_than_a_majority_answered() {
        let mut rows = [
            row(1, Some("w1"), 5, StampFit::ThisSet, "a"),
            ReplicaRow::failed(2, "acct", "http://e2", "cannot reach storage".into()),
            ReplicaRow::failed(3, "acct", "http://e3", "cannot reach storage".into()),
        ];
        let m = count(&mut rows, 2);
        assert_eq!((m.reached, m.answered, m.read_from), (false, 1, Some(1)));
        assert!(m.why_none().starts_with("only 1 of 3 replicas answered"));
        let text = render(&m, &rows);
        assert!(
            text.starts_with("replicas     3 accounts, a majority is 2: only 1 answered\n"),
            "{text}"
        );
        assert!(
            text.contains("  replica 2: cannot reach storage\n"),
            "{text}"
        );
    }
}
