//! Operational endpoints: liveness, readiness, metrics.

use axum::{Json, extract::State, http::StatusCode, response::IntoResponse};
use serde_json::json;

use crate::app::AppState;

/// Liveness: the process is up and serving.
pub async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// Readiness: the database (and Redis, when configured) answer.
pub async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let services = &state.services;
    let database = match services.db.ping().await {
        Ok(()) => "ok",
        Err(error) => {
            tracing::warn!(error = %error, "readiness: database unreachable");
            "unreachable"
        }
    };
    let redis = match &services.redis {
        None => "not_configured",
        Some(manager) => {
            let mut conn = manager.clone();
            match redis::cmd("PING").query_async::<String>(&mut conn).await {
                Ok(_) => "ok",
                Err(error) => {
                    tracing::warn!(error = %error, "readiness: redis unreachable");
                    "unreachable"
                }
            }
        }
    };
    let ready = database == "ok" && redis != "unreachable";
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "status": if ready { "ok" } else { "unavailable" },
            "checks": { "database": database, "redis": redis },
        })),
    )
}

/// Prometheus text exposition.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}
