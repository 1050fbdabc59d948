//! The optional HTTP endpoint (`[http].listen`): health, readiness, status and metrics.
//!
//! It shares the daemon's runtime but only reads [`Telemetry`]; nothing a client sends can reach
//! the lease or the child. The one route that is not a GET, `POST /wake`, carries no authority:
//! it makes this instance try its acquire now ([`Waker`]), which storage refuses unless a
//! leader handed it the lease (or nobody holds it). Only members can send one: it must carry
//! this member's wake token (from its member record) in `X-Leasehold-Wake`, or it is refused
//! with 401 and costs no storage request; it is answered at once, without waiting for storage,
//! and at most one a second has an effect.
//!
//! | route | answer |
//! |---|---|
//! | `GET /healthz` | 200 while the daemon loop is alive (it sent a storage request recently) |
//! | `GET /readyz` | 200 only while this instance leads; 503 otherwise |
//! | `GET /status` | JSON: identity, role, epoch, leader since, deadlines, child, the line of members |
//! | `GET /metrics` | Prometheus / OpenMetrics text |
//! | `POST /wake` | with `X-Leasehold-Probe`: 204 when `X-Leasehold-Wake` carries this member's wake token, 401 otherwise, and nothing done (a member asking whether this is the process a record names); without: 202: this instance tries its acquire now (with `X-Leasehold-Handoff`, the epoch its handoff reserved for it: it writes that epoch beside the acquire); 401: without this member's wake token in `X-Leasehold-Wake`; 429: another wake-up came less than a second ago |
//!
//! Clients cannot hold on to the daemon's memory or files ([`Limits`]): a connection serves one
//! request, its request head must arrive within [`HEADER_READ_TIMEOUT`] and be at most
//! [`MAX_REQUEST_HEAD`] long (hyper's own settings), a route has [`ANSWER_TIMEOUT`] to answer
//! (tower-http's timeout layer), a connection lives at most [`CONNECTION_LIFETIME`], and at
//! most [`Limits::max_connections`] are open at once (sized by [`crate::open_files`] so that
//! storage, the child and its guard always find files).
//!
//! That cap is the one piece written here: when a new connection comes beyond it, the oldest is
//! closed. The connections open longest are the idle and the slow ones, since an answer takes a
//! millisecond, so a probe is answered at once however many idle connections a client holds.
//! tower's concurrency limit does not do that: it bounds requests being answered, once their
//! heads are read, and makes the next one wait for a permit; a flood of connections that never
//! send a head never reaches it, and a semaphore on accept would make a probe wait behind them.

use crate::elector::{HANDOFF_HEADER, PROBE_HEADER, WAKE_HEADER, WakeAnswer, Waker};
use crate::fmt::human;
use crate::telemetry::{Telemetry, WakeTaken};
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::{AbortHandle, JoinSet};
use tokio::time::{Instant, sleep};
use tower_http::timeout::TimeoutLayer;

/// A connection's request head must be complete this long after the connection was accepted;
/// a client that sends nothing, or a header a byte at a time, is cut off then.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// No connection lives longer than this, whatever it does (a client reading its answer slowly).
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(10);

/// The largest request head read: probes send a few hundred bytes.
pub const MAX_REQUEST_HEAD: usize = 16 * 1024;

/// A route that has not answered this long after its request head arrived is answered 503: the
/// routes only read the daemon's state, so one that takes this long has found the runtime
/// starved, and a probe had better see a failure than wait.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);

/// What clients may hold of the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once; a new one beyond this closes the oldest.
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub connection_lifetime: Duration,
}

impl Limits {
    /// The timeouts above, and as many connections as this process's open-file budget allows.
    pub fn for_this_process() -> Self {
        Self {
            max_connections: crate::open_files::http_connection_cap(),
            header_read_timeout: HEADER_READ_TIMEOUT,
            connection_lifetime: CONNECTION_LIFETIME,
        }
    }
}

/// What the routes see: the daemon's telemetry, and its elector's waker.
#[derive(Clone)]
struct Endpoint {
    telemetry: Arc<Telemetry>,
    waker: Waker,
}

/// Serves until the task is dropped or aborted (which closes every connection too).
pub async fn serve(
    listener: tokio::net::TcpListener,
    telemetry: Arc<Telemetry>,
    waker: Waker,
    limits: Limits,
) {
    let app = bounded(
        Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz))
            .route("/status", get(status))
            .route("/metrics", get(metrics))
            .route("/wake", post(wake))
            .with_state(Endpoint {
                telemetry: telemetry.clone(),
                waker,
            }),
    );
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        // A request head is a few hundred bytes; a larger one is refused (431) rather than
        // buffered, so each connection holds at most this much.
        .max_buf_size(MAX_REQUEST_HEAD)
        // One request per connection: no idle connection waits for a next request.
        .keep_alive(false);
    telemetry.http_connection_limit(limits.max_connections);
    let mut connections = JoinSet::new();
    // The open connections, oldest first.
    let mut open: VecDeque<AbortHandle> = VecDeque::new();
    let mut warned_at: Option<Instant> = None;
    loop {
        tokio::select! {
            biased;
            Some(done) = connections.join_next_with_id() => {
                let id = match done {
                    Ok((id, ())) => id,
                    Err(e) => e.id(),
                };
                open.retain(|c| c.id() != id);
                telemetry.http_connections(open.len(), 0);
            }
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    // Make room first. An aborted connection holds its buffers and its socket
                    // until its task is dropped, so wait for that too: never more than
                    // `max_connections` exist, however fast new ones come.
                    let mut evicted = 0;
                    while connections.len() >= limits.max_connections {
                        if let Some(oldest) = open.pop_front() {
                            // Dropping the connection's future closes its socket.
                            oldest.abort();
                            evicted += 1;
                        }
                        if let Some(done) = connections.join_next_with_id().await {
                            let id = match done {
                                Ok((id, ())) => id,
                                Err(e) => e.id(),
                            };
                            open.retain(|c| c.id() != id);
                        }
                    }
                    let connection =
                        http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
                    let lifetime = limits.connection_lifetime;
                    open.push_back(connections.spawn(async move {
                        // What ends a connection early is the client's doing (a reset, a head
                        // that never came): nothing to report.
                        let _ = tokio::time::timeout(lifetime, connection).await;
                    }));
                    telemetry.http_connections(open.len(), evicted);
                }
                Err(e) => {
                    // Out of files (or another passing failure): the connections still open
                    // close within their lifetime; until then, do not spin on accept.
                    if warned_at.is_none_or(|t| t.elapsed() >= Duration::from_secs(10)) {
                        tracing::warn!(error = %e, open = open.len(), "the HTTP endpoint cannot accept a connection");
                        warned_at = Some(Instant::now());
                    }
                    sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

/// The routes with their time to answer bounded ([`ANSWER_TIMEOUT`]).
fn bounded(routes: Router) -> Router {
    routes.layer(TimeoutLayer::with_status_code(
        StatusCode::SERVICE_UNAVAILABLE,
        ANSWER_TIMEOUT,
    ))
}

async fn healthz(State(e): State<Endpoint>) -> Response {
    match e.telemetry.liveness() {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(idle) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stalled: no storage request for {}\n", human(idle)),
        )
            .into_response(),
    }
}

async fn readyz(State(e): State<Endpoint>) -> Response {
    if e.telemetry.is_ready() {
        (StatusCode::OK, "leader\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not leader\n").into_response()
    }
}

async fn status(State(e): State<Endpoint>) -> Response {
    axum::Json(e.telemetry.status()).into_response()
}

/// Never waits: the elector acts on it in its own time. The token is compared, never logged.
async fn wake(State(e): State<Endpoint>, headers: axum::http::HeaderMap) -> Response {
    let token = headers
        .get(WAKE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let handoff = headers.get(HANDOFF_HEADER).and_then(|v| v.to_str().ok());
    if headers.contains_key(PROBE_HEADER) {
        // A member asking whether this is the process the record names: nothing is done.
        return match e.waker.probe(token) {
            WakeAnswer::Accepted => StatusCode::NO_CONTENT.into_response(),
            _ => (
                StatusCode::UNAUTHORIZED,
                "not the member whose wake token this is\n",
            )
                .into_response(),
        };
    }
    match e.waker.wake_handed(token, handoff) {
        WakeAnswer::Accepted => {
            e.telemetry.wake_received(WakeTaken::Accepted);
            (StatusCode::ACCEPTED, "trying the acquire now\n").into_response()
        }
        WakeAnswer::TooSoon => {
            e.telemetry.wake_received(WakeTaken::RateLimited);
            (
                StatusCode::TOO_MANY_REQUESTS,
                "another wake-up came less than a second ago\n",
            )
                .into_response()
        }
        // Without this member's token (`WakeAnswer::WrongToken`).
        _ => {
            e.telemetry.wake_received(WakeTaken::Unauthorized);
            (
                StatusCode::UNAUTHORIZED,
                "a wake-up must carry this member's wake token in X-Leasehold-Wake\n",
            )
                .into_response()
        }
    }
}

async fn metrics(State(e): State<Endpoint>) -> Response {
    let t = &e.telemetry;
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        t.metrics_text(),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    /// A route that does not answer within [`ANSWER_TIMEOUT`] is answered 503 then; one that
    /// does is answered as it says.
    #[tokio::test(start_paused = true)]
    async fn a_route_that_does_not_answer_in_time_is_answered_503() {
        let app = bounded(
            Router::new()
                .route(
                    "/stuck",
                    get(|| async {
                        sleep(Duration::from_secs(60)).await;
                        "late"
                    }),
                )
                .route("/quick", get(|| async { "ok" })),
        );
        let ask = |path: &str| {
            axum::http::Request::get(path)
                .body(axum::body::Body::empty())
                .unwrap()
        };
        let asked = Instant::now();
        let stuck = app.clone().oneshot(ask("/stuck")).await.unwrap();
        assert_eq!(stuck.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(asked.elapsed(), ANSWER_TIMEOUT);
        let quick = app.oneshot(ask("/quick")).await.unwrap();
        assert_eq!(quick.status(), StatusCode::OK);
    }
}
