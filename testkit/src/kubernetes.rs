//! A stand-in for the Kubernetes API server, for the one call leasehold makes (`[kubernetes]`,
//! its pod label): `PATCH /api/v1/namespaces/NS/pods/NAME` with a JSON merge patch of the pod's
//! labels. No kube-apiserver can be installed here (neither Debian nor PyPI ship one), so this
//! checks each request as the API server would (authentication, method, path, content type,
//! the patch's JSON, label keys and values by the API server's own rules, the pod's existence)
//! and answers as it does (the patched Pod, or a `Status` with the API's code and reason). What
//! it records (every request, every label change with its instant on CLOCK_MONOTONIC, every
//! departure from what leasehold must send) is for the tests to judge.
//!
//! The daemons reach it through a kubeconfig ([`KubeApi::kubeconfig`]), as kube-rs finds one
//! outside a pod; in a pod the same client uses the service account instead.

use crate::wait::mono_now;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the stand-in got.
#[derive(Debug, Clone)]
pub struct ApiRequest {
    pub method: String,
    /// Path and query, as sent.
    pub uri: String,
    pub content_type: Option<String>,
    pub body: String,
}

/// A label change on a pod: when (CLOCK_MONOTONIC), which pod, the key, and the new value.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelChange {
    pub at: Duration,
    pub pod: String,
    pub key: String,
    pub value: String,
}

#[derive(Default)]
struct ApiState {
    /// Pods by name, with their labels.
    pods: BTreeMap<String, BTreeMap<String, String>>,
    requests: Vec<ApiRequest>,
    changes: Vec<LabelChange>,
    /// What leasehold sent that it must not: each with the request.
    departures: Vec<String>,
    /// Answer every patch with 403, as an API server whose RBAC denies it.
    forbid: bool,
    resource_version: u64,
}

/// The stand-in, serving on a loopback port from a thread of its own.
pub struct KubeApi {
    pub namespace: String,
    pub token: String,
    pub addr: String,
    state: Arc<Mutex<ApiState>>,
    dir: tempfile::TempDir,
}

impl KubeApi {
    /// An API server with `pods` in `namespace`, each with `labels`, accepting `token`.
    pub fn start(namespace: &str, pods: &[&str], labels: &[(&str, &str)]) -> Self {
        let state = Arc::new(Mutex::new(ApiState {
            pods: pods
                .iter()
                .map(|p| {
                    let labels = labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect();
                    (p.to_string(), labels)
                })
                .collect(),
            ..ApiState::default()
        }));
        let token = format!("stand-in-token-{}", fastrand::u64(..));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr").to_string();
        let served = Arc::new(Served {
            state: state.clone(),
            namespace: namespace.to_owned(),
            token: token.clone(),
        });
        let app = axum::Router::new().fallback(answer).with_state(served);
        crate::http::serve_in_background(listener, app);
        Self {
            namespace: namespace.to_owned(),
            token,
            addr,
            state,
            dir: tempfile::tempdir().expect("tempdir"),
        }
    }

    /// A kubeconfig that points at this server with its token, `namespace` as the context's.
    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.dir.path().join("kubeconfig");
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: stand-in\n  cluster:\n    server: \
             http://{}\ncontexts:\n- name: stand-in\n  context:\n    cluster: stand-in\n    \
             user: leasehold\n    namespace: {}\ncurrent-context: stand-in\nusers:\n- name: \
             leasehold\n  user:\n    token: {}\n",
            self.addr, self.namespace, self.token
        );
        std::fs::write(&path, text).expect("write kubeconfig");
        path
    }

    fn with<T>(&self, f: impl FnOnce(&mut ApiState) -> T) -> T {
        f(&mut self.state.lock().unwrap())
    }

    /// The value of label `key` on `pod` now.
    pub fn label(&self, pod: &str, key: &str) -> Option<String> {
        self.with(|s| s.pods.get(pod)?.get(key).cloned())
    }

    /// Every change of a label value, in order.
    pub fn changes(&self) -> Vec<LabelChange> {
        self.with(|s| s.changes.clone())
    }

    pub fn requests(&self) -> Vec<ApiRequest> {
        self.with(|s| s.requests.clone())
    }

    /// What was sent that leasehold must not send (another method, content type, field...).
    pub fn departures(&self) -> Vec<String> {
        self.with(|s| s.departures.clone())
    }

    /// From now on answer every patch 403 Forbidden (`true`), or serve again.
    pub fn forbid(&self, forbidden: bool) {
        self.with(|s| s.forbid = forbidden);
    }
}

struct Served {
    state: Arc<Mutex<ApiState>>,
    namespace: String,
    token: String,
}

/// A `Status` object, as the API server answers a failure.
fn status(code: u16, reason: &str, message: &str) -> axum::response::Response {
    json(
        code,
        serde_json::json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }),
    )
}

fn json(code: u16, body: serde_json::Value) -> axum::response::Response {
    use axum::response::IntoResponse;
    (
        axum::http::StatusCode::from_u16(code).expect("a status code"),
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

async fn answer(
    axum::extract::State(served): axum::extract::State<Arc<Served>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20)
        .await
        .unwrap_or_default();
    let body = String::from_utf8_lossy(&body).into_owned();
    let seen = ApiRequest {
        method: parts.method.to_string(),
        uri: parts.uri.to_string(),
        content_type: header_of(&parts, "content-type"),
        body: body.clone(),
    };
    let mut departures = Vec::new();
    let response = judge(&served, &parts, &body, &mut departures);
    let mut state = served.state.lock().unwrap();
    state
        .departures
        .extend(departures.into_iter().map(|d| format!("{d}: {seen:?}")));
    state.requests.push(seen);
    response
}

/// A request header's value, as text.
fn header_of(parts: &axum::http::request::Parts, name: &str) -> Option<String> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// The API server's answer to one request; what leasehold must not send goes to `departures`.
fn judge(
    served: &Served,
    parts: &axum::http::request::Parts,
    body: &str,
    departures: &mut Vec<String>,
) -> axum::response::Response {
    let header = |name: &str| header_of(parts, name);
    let mut depart = |what: String| departures.push(what);
    if header("authorization") != Some(format!("Bearer {}", served.token)) {
        depart("no bearer token, or the wrong one".into());
        return status(401, "Unauthorized", "Unauthorized");
    }
    let prefix = format!("/api/v1/namespaces/{}/pods/", served.namespace);
    let Some(pod) = parts.uri.path().strip_prefix(&prefix) else {
        depart(format!("not the pods of namespace {}", served.namespace));
        return status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        );
    };
    let pod = pod.to_owned();
    if parts.method != axum::http::Method::PATCH {
        depart(format!("{} instead of PATCH", parts.method));
        return status(
            405,
            "MethodNotAllowed",
            "the server does not allow this method",
        );
    }
    if let Some(query) = parts.uri.query()
        && query.contains("dryRun")
    {
        depart(format!("a dry run: {query}"));
    }
    if header("content-type").as_deref() != Some("application/merge-patch+json") {
        depart(format!("content type {:?}", header("content-type")));
        return status(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: \
             application/json-patch+json, application/merge-patch+json, \
             application/apply-patch+yaml",
        );
    }
    let Ok(patch) = serde_json::from_str::<serde_json::Value>(body) else {
        depart(format!("a body that is not JSON: {body}"));
        return status(400, "BadRequest", "error decoding patch");
    };
    // Only the labels: anything else in the patch would change more of the pod than its label.
    let only_labels = patch.as_object().is_some_and(|o| o.len() == 1)
        && patch["metadata"].as_object().is_some_and(|m| m.len() == 1)
        && patch["metadata"]["labels"].is_object();
    if !only_labels {
        depart(format!("a patch of more than the labels: {patch}"));
    }
    let mut state = served.state.lock().unwrap();
    if state.forbid {
        return status(
            403,
            "Forbidden",
            &format!(
                "pods \"{pod}\" is forbidden: User \"system:serviceaccount:{}:my-app\" cannot \
                 patch resource \"pods\" in API group \"\" in the namespace \"{}\"",
                served.namespace, served.namespace
            ),
        );
    }
    if !state.pods.contains_key(&pod) {
        return status(404, "NotFound", &format!("pods \"{pod}\" not found"));
    }
    let mut labels = state.pods[&pod].clone();
    let mut changed = Vec::new();
    if let Some(patched) = patch["metadata"]["labels"].as_object() {
        for (key, value) in patched {
            match value {
                serde_json::Value::Null => {
                    labels.remove(key);
                }
                serde_json::Value::String(v) => {
                    if let Some(problem) = key_problem(key).or_else(|| value_problem(v)) {
                        return status(
                            422,
                            "Invalid",
                            &format!(
                                "Pod \"{pod}\" is invalid: metadata.labels: Invalid value: \
                                 \"{key}\": {problem}"
                            ),
                        );
                    }
                    if labels.get(key) != Some(v) {
                        changed.push((key.clone(), v.clone()));
                    }
                    labels.insert(key.clone(), v.clone());
                }
                other => {
                    return status(
                        400,
                        "BadRequest",
                        &format!("json: cannot unmarshal {other} into a label value"),
                    );
                }
            }
        }
    }
    let at = mono_now();
    for (key, value) in changed {
        state.changes.push(LabelChange {
            at,
            pod: pod.clone(),
            key,
            value,
        });
    }
    state.pods.insert(pod.clone(), labels.clone());
    state.resource_version += 1;
    json(
        200,
        serde_json::json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod,
                "namespace": served.namespace,
                "labels": labels,
                "resourceVersion": state.resource_version.to_string(),
                "uid": "00000000-0000-0000-0000-000000000001",
            },
            "spec": { "containers": [ { "name": "app", "image": "my-app" } ] },
            "status": { "phase": "Running" },
        }),
    )
}

/// A label key by the API server's rules (an optional DNS subdomain prefix, then a name).
fn key_problem(key: &str) -> Option<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(prefix) = prefix {
        let ok = !prefix.is_empty()
            && prefix.len() <= 253
            && prefix.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                    && !l.starts_with('-')
                    && !l.ends_with('-')
            });
        if !ok {
            return Some("a prefix must be a DNS subdomain".into());
        }
    }
    value_problem(name).or_else(|| {
        name.is_empty()
            .then(|| "name part must be non-empty".into())
    })
}

/// A label value by the API server's rules: empty, or at most 63 characters, alphanumeric at
/// both ends, `-`, `_` and `.` inside.
fn value_problem(value: &str) -> Option<String> {
    if value.is_empty() {
        return None;
    }
    let ok = value.len() <= 63
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    (!ok).then(|| {
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' \
         or '.', and must start and end with an alphanumeric character"
            .into()
    })
}
