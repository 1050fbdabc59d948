//! The optional HTTP endpoint (`[http].listen`): health, readiness, status and metrics.
//!
//! It shares the daemon's runtime but only reads [`Telemetry`]; nothing a client sends can reach
//! the lease or the child. Every route is a GET.
//!
//! | route | answer |
//! |---|---|
//! | `/healthz` | 200 while the daemon loop is alive (it sent a storage request recently) |
//! | `/readyz` | 200 only while this instance leads; 503 otherwise |
//! | `/status` | JSON: identity, role, epoch, leader since, deadlines, child |
//! | `/metrics` | Prometheus / OpenMetrics text |

use crate::telemetry::Telemetry;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use std::sync::Arc;

/// Serves until the task is dropped or aborted.
pub async fn serve(listener: tokio::net::TcpListener, telemetry: Arc<Telemetry>) {
    let app = Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .with_state(telemetry);
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "the HTTP endpoint stopped");
    }
}

async fn healthz(State(t): State<Arc<Telemetry>>) -> Response {
    match t.liveness() {
        Ok(()) => (StatusCode::OK, "ok\n").into_response(),
        Err(idle) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("stalled: no storage request for {}\n", crate::human(idle)),
        )
            .into_response(),
    }
}

async fn readyz(State(t): State<Arc<Telemetry>>) -> Response {
    if t.is_ready() {
        (StatusCode::OK, "leader\n").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not leader\n").into_response()
    }
}

async fn status(State(t): State<Arc<Telemetry>>) -> Response {
    axum::Json(t.status()).into_response()
}

async fn metrics(State(t): State<Arc<Telemetry>>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        t.metrics_text(),
    )
        .into_response()
}
