//! Operational endpoints: liveness, readiness, metrics.

use std::net::IpAddr;

use axum::{
    Json, Router,
    extract::{FromRef, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use ipnet::IpNet;
use metrics_exporter_prometheus::PrometheusHandle;
use sea_orm::DatabaseConnection;
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use sha2::{Digest, Sha256};

use super::{Web, bearer_token, client::RequestMeta};
use crate::error::AppError;

/// What the operational endpoints read.
#[derive(Clone)]
pub struct Ops {
    pub web: Web,
    pub db: DatabaseConnection,
    pub redis: Option<redis::aio::ConnectionManager>,
    pub metrics: PrometheusHandle,
    /// `TRELLIS_METRICS_TOKEN`.
    pub metrics_token: Option<SecretString>,
    /// `TRELLIS_METRICS_ALLOW`.
    pub metrics_allow: Vec<IpNet>,
}

impl FromRef<Ops> for Web {
    fn from_ref(state: &Ops) -> Web {
        state.web.clone()
    }
}

/// `/healthz`, `/readyz` and `/metrics`.
pub fn routes(ops: Ops) -> Router {
    Router::new()
        .route("/healthz", axum::routing::get(healthz))
        .route("/readyz", axum::routing::get(readyz))
        .route("/metrics", axum::routing::get(metrics))
        .with_state(ops)
}

/// Liveness: the process is up and serving.
async fn healthz() -> impl IntoResponse {
    Json(json!({ "status": "ok" }))
}

/// Readiness: the database (and Redis, when configured) answer.
async fn readyz(State(services): State<Ops>) -> impl IntoResponse {
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
    // Not a readiness condition: Trellis analyzes what autovacuum does not
    // (`system.analyze`); said here so operators see it.
    let autovacuum = match crate::jobs::analyze::autovacuum_on(&services.db).await {
        Ok(Some(true)) => "on",
        Ok(Some(false)) => "off",
        Ok(None) => "not_applicable",
        Err(_) => "unknown",
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
            "checks": { "database": database, "redis": redis, "autovacuum": autovacuum },
        })),
    )
}

/// Prometheus text exposition, for the addresses in `TRELLIS_METRICS_ALLOW`
/// and, when `TRELLIS_METRICS_TOKEN` is set, only with that bearer token.
async fn metrics(State(state): State<Ops>, meta: RequestMeta, headers: HeaderMap) -> Response {
    let expected = state
        .metrics_token
        .as_ref()
        .map(|token| token.expose_secret());
    if let Err(error) = metrics_access(
        meta.client_ip,
        &state.metrics_allow,
        expected,
        bearer_token(&headers),
    ) {
        return error.into_response();
    }
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
        .into_response()
}

/// Who may read the metrics: an allowed address, with the token when one is
/// configured. Tokens are compared as digests, so the time taken says
/// nothing about how much of a guess was right.
fn metrics_access(
    client: IpAddr,
    allow: &[IpNet],
    expected: Option<&str>,
    presented: Option<&str>,
) -> Result<(), AppError> {
    let client = client.to_canonical();
    if !allow.iter().any(|net| net.contains(&client)) {
        return Err(AppError::Forbidden(
            "this address may not read the metrics (TRELLIS_METRICS_ALLOW)",
        ));
    }
    match (expected, presented) {
        (None, _) => Ok(()),
        (Some(expected), Some(presented))
            if Sha256::digest(expected.as_bytes()) == Sha256::digest(presented.as_bytes()) =>
        {
            Ok(())
        }
        (Some(_), _) => Err(AppError::Unauthenticated(
            "the metrics need the bearer token (TRELLIS_METRICS_TOKEN)",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nets(list: &[&str]) -> Vec<IpNet> {
        list.iter().map(|net| net.parse().unwrap()).collect()
    }

    #[test]
    fn only_allowed_addresses_read_the_metrics() {
        let allow = nets(&["127.0.0.0/8", "::1/128", "10.1.0.0/16"]);
        for ok in ["127.0.0.1", "::1", "10.1.2.3", "::ffff:127.0.0.1"] {
            assert!(
                metrics_access(ok.parse().unwrap(), &allow, None, None).is_ok(),
                "{ok}"
            );
        }
        for refused in ["10.2.0.1", "192.168.1.1", "2001:db8::1"] {
            let error = metrics_access(refused.parse().unwrap(), &allow, None, None).unwrap_err();
            assert_eq!(error.code(), "FORBIDDEN", "{refused}");
        }
    }

    #[test]
    fn a_configured_token_is_required_even_from_an_allowed_address() {
        let allow = nets(&["127.0.0.0/8"]);
        let local = "127.0.0.1".parse().unwrap();
        assert!(metrics_access(local, &allow, Some("s3cret"), Some("s3cret")).is_ok());
        for presented in [None, Some("s3cre"), Some("s3cret ")] {
            let error = metrics_access(local, &allow, Some("s3cret"), presented).unwrap_err();
            assert_eq!(error.code(), "UNAUTHENTICATED");
        }
        // The address check comes first: a right token from elsewhere is still refused.
        let error = metrics_access(
            "192.0.2.1".parse().unwrap(),
            &allow,
            Some("s3cret"),
            Some("s3cret"),
        )
        .unwrap_err();
        assert_eq!(error.code(), "FORBIDDEN");
    }
}
