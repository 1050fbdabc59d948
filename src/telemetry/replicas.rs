//! The metrics of a group on a majority of storage accounts (`[[storage.replica]]`,
//! docs/quorum.md), one series per replica (label `replica`, from 1 in the set's order): its
//! requests by result, their latency, whether it answered last, and how many answer against the
//! majority the group needs. Registered only with replicas: one account shows none of them.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::sync::Mutex;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReplicaLabel {
    replica: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReplicaResult {
    replica: u32,
    result: String,
}

/// Each replica's series, and the count of those answering.
pub(super) struct ReplicaMetrics {
    requests: Family<ReplicaResult, Counter>,
    seconds: Family<ReplicaLabel, Histogram>,
    reachable: Family<ReplicaLabel, Gauge>,
    answering: Gauge,
    /// Whether each replica answered its last request, in the set's order.
    answered: Mutex<Vec<bool>>,
}

impl ReplicaMetrics {
    /// The metrics of a set of `n` replicas, registered in `registry`; every replica counted as
    /// answering until a request says otherwise.
    pub(super) fn new(n: usize, registry: &mut Registry) -> Self {
        let metrics = Self {
            requests: Family::default(),
            seconds: Family::new_with_constructor(|| {
                // 1 ms .. ~16 s, as leasehold_lease_operation_seconds.
                Histogram::new(exponential_buckets(0.001, 2.0, 15))
            }),
            reachable: Family::default(),
            answering: Gauge::default(),
            answered: Mutex::new(vec![true; n]),
        };
        registry.register(
            "leasehold_replica_requests",
            "With [[storage.replica]]: storage requests to each replica (label replica, from 1 in the set's order), by result (ok, the storage error code, timeout or unreachable)",
            metrics.requests.clone(),
        );
        registry.register(
            "leasehold_replica_request_seconds",
            "With [[storage.replica]]: storage request latency by replica",
            metrics.seconds.clone(),
        );
        registry.register(
            "leasehold_replica_reachable",
            "With [[storage.replica]]: 1 while the replica answered this instance's last request to it (a refusal is an answer), 0 after a timeout or a connection that failed",
            metrics.reachable.clone(),
        );
        registry.register(
            "leasehold_replicas_reachable",
            "With [[storage.replica]]: how many replicas answered this instance's last request to each",
            metrics.answering.clone(),
        );
        let majority = Gauge::<i64>::default();
        majority.set((n / 2 + 1) as i64);
        registry.register(
            "leasehold_replicas_majority",
            "With [[storage.replica]]: how many replicas a leader must hold (n/2 + 1); fewer reachable, and nobody can lead",
            majority,
        );
        for replica in 1..=n as u32 {
            metrics
                .reachable
                .get_or_create(&ReplicaLabel { replica })
                .set(1);
            metrics
                .requests
                .get_or_create(&ReplicaResult {
                    replica,
                    result: "ok".to_owned(),
                })
                .inc_by(0);
        }
        metrics.answering.set(n as i64);
        metrics
    }

    /// A request to replica `i` (from 0) ended after `elapsed` with `result`; `answered`: the
    /// replica answered it (ok or refused), rather than timing out or not being reached.
    pub(super) fn request(&self, i: usize, elapsed: Duration, result: String, answered: bool) {
        let replica = i as u32 + 1;
        self.requests
            .get_or_create(&ReplicaResult { replica, result })
            .inc();
        self.seconds
            .get_or_create(&ReplicaLabel { replica })
            .observe(elapsed.as_secs_f64());
        self.reachable
            .get_or_create(&ReplicaLabel { replica })
            .set(i64::from(answered));
        let mut all = self.answered.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(was) = all.get_mut(i) {
            *was = answered;
        }
        self.answering
            .set(all.iter().filter(|a| **a).count() as i64);
    }
}
