//! The leader's pod label (`[kubernetes]`, feature `kubernetes`): the daemon keeps a label on
//! its own pod, `"true"` while it leads with its child running (started, not stopping, not
//! between restarts) and `"false"` otherwise, through
//! the Kubernetes API (kube-rs: in a pod, its service account; elsewhere, the kubeconfig). A
//! Service that selects the label sends traffic to the leader alone, while readiness stays
//! "this daemon is healthy", so that rollouts complete (Patroni's and Stolon's way).
//!
//! The label is routing, not fencing. It goes to `"false"` as soon as the child is told to stop
//! (traffic drains while it stops), and to `"true"` only once this instance leads; a patch that
//! fails is retried with backoff and logged, and never touches the lease or the child. During a
//! failover two pods can carry `"true"` for as long as the old leader's patch takes (or, if the
//! API cannot be reached, until its pod is gone or not Ready); what the leader's child writes
//! downstream is fenced by the epoch, as always.

use crate::config::PodLabel;
use crate::fmt::human;
use crate::telemetry::Presence;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, Patch, PatchParams};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// The longest pause between two attempts at a patch that failed.
const MAX_RETRY: Duration = Duration::from_secs(30);

/// How long the daemon waits on its way out for the label to say `"false"`.
pub(crate) const FINAL_PATCH: Duration = Duration::from_secs(2);

/// The pod's API, and what to write.
pub(crate) struct Labeller {
    pods: Api<Pod>,
    label: PodLabel,
    /// Where the pod is, for messages.
    namespace: String,
}

/// Why the label cannot be kept at all: a start-up error (exit 2).
#[derive(Debug, thiserror::Error)]
#[error(
    "[kubernetes]: cannot reach the Kubernetes API to keep the label {key} on pod {pod}: {why} \
     (in a pod, the service account token must be mounted: automountServiceAccountToken; \
     elsewhere, KUBECONFIG)"
)]
pub(crate) struct NoApi {
    key: String,
    pod: String,
    why: String,
}

impl Labeller {
    /// The client (in a pod: its service account, `KUBERNETES_SERVICE_HOST`; elsewhere:
    /// `KUBECONFIG` or `~/.kube/config`), for `label`'s pod.
    pub(crate) async fn connect(label: &PodLabel) -> Result<Self, NoApi> {
        let client = kube::Client::try_default().await.map_err(|e| NoApi {
            key: label.key.clone(),
            pod: label.pod.clone(),
            why: crate::secret::redact(&e.to_string()),
        })?;
        let namespace = label
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        Ok(Self {
            pods: Api::namespaced(client, &namespace),
            label: label.clone(),
            namespace,
        })
    }

    /// One merge patch of the pod's labels: `{"metadata":{"labels":{KEY:"true"|"false"}}}`.
    async fn set(&self, leading: bool) -> Result<(), String> {
        let value = if leading { "true" } else { "false" };
        let patch = serde_json::json!({ "metadata": { "labels": { &self.label.key: value } } });
        self.pods
            .patch(
                &self.label.pod,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(drop)
            .map_err(|e| describe(&e))
    }
}

/// A failed patch in one line, with what to check when the API said no.
fn describe(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) if status.code == 403 => format!(
            "{} (forbidden: the pod's service account needs get and patch on pods in its \
             namespace; deploy/kubernetes/rbac.yaml)",
            status.message
        ),
        kube::Error::Api(status) if status.code == 404 => format!(
            "{} (no such pod: set POD_NAME from the downward API, or [kubernetes].pod)",
            status.message
        ),
        kube::Error::Api(status) => format!("{} ({})", status.message, status.code),
        other => crate::secret::redact(&other.to_string()),
    }
}

/// Keeps the label in step with `presence` until `stop` is cancelled; `applied` says what the
/// pod carries as far as this daemon knows (`None`: not set yet, or a patch is failing).
pub(crate) async fn keep(
    labeller: Labeller,
    mut presence: watch::Receiver<Presence>,
    applied: watch::Sender<Option<bool>>,
    stop: CancellationToken,
) {
    let (key, pod, namespace) = (
        labeller.label.key.as_str(),
        labeller.label.pod.as_str(),
        labeller.namespace.as_str(),
    );
    let mut retry = Duration::from_secs(1);
    let mut failing = false;
    loop {
        let leading = presence.borrow_and_update().serving && !stop.is_cancelled();
        let wait = if *applied.borrow() == Some(leading) {
            None
        } else {
            match labeller.set(leading).await {
                Ok(()) => {
                    applied.send_replace(Some(leading));
                    retry = Duration::from_secs(1);
                    if failing {
                        tracing::info!(key, pod, namespace, leading, "pod label set again");
                    } else {
                        tracing::debug!(key, pod, namespace, leading, "pod label set");
                    }
                    failing = false;
                    None
                }
                Err(why) => {
                    applied.send_replace(None);
                    if !failing {
                        tracing::warn!(
                            key,
                            pod,
                            namespace,
                            leading,
                            "cannot set the pod label: {why}; retrying (the lease and the child \
                             are not affected)"
                        );
                    }
                    failing = true;
                    let pause = retry;
                    retry = (retry * 2).min(MAX_RETRY);
                    Some(pause)
                }
            }
        };
        if stop.is_cancelled() && *applied.borrow() == Some(false) {
            return;
        }
        tokio::select! {
            changed = presence.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            () = stop.cancelled(), if !stop.is_cancelled() => {}
            () = async {
                match wait {
                    Some(pause) => tokio::time::sleep(pause).await,
                    None => std::future::pending().await,
                }
            } => {}
        }
    }
}

/// The label kept by a task of its own for as long as the daemon runs.
pub(crate) struct KeptLabel {
    stop: CancellationToken,
    applied: watch::Receiver<Option<bool>>,
    task: tokio::task::JoinHandle<()>,
}

impl KeptLabel {
    /// Connects to the API and starts keeping `label` in step with `presence` (at once: a
    /// label left `"true"` by a container that crashed is set back to `"false"`).
    pub(crate) async fn start(
        label: &PodLabel,
        presence: watch::Receiver<Presence>,
    ) -> Result<Self, NoApi> {
        let labeller = Labeller::connect(label).await?;
        let stop = CancellationToken::new();
        let (applied, seen) = watch::channel(None);
        let task = tokio::spawn(keep(labeller, presence, applied, stop.clone()));
        Ok(Self {
            stop,
            applied: seen,
            task,
        })
    }

    /// On the way out: the label set to `"false"`, waiting at most [`FINAL_PATCH`].
    pub(crate) async fn finish(mut self) {
        self.stop.cancel();
        let unlabelled = self.applied.wait_for(|a| *a == Some(false));
        if tokio::time::timeout(FINAL_PATCH, unlabelled).await.is_err() {
            tracing::warn!(
                "the pod label could not be set to \"false\" within {}; the pod keeps it until \
                 it is gone or not Ready",
                human(FINAL_PATCH)
            );
        }
        self.task.abort();
    }
}
