//! The GraphQL endpoints: `POST /graphql`, GraphiQL at `GET /graphql`, and
//! subscriptions over WebSocket at `/graphql/ws`.
//!
//! The POST handler is ours rather than the stock extractor so that every
//! failure before execution is a JSON error with a code too:
//! `PAYLOAD_TOO_LARGE` (413), `UNSUPPORTED_MEDIA_TYPE` (415, which also keeps
//! cookie-authenticated requests to CORS-preflighted ones), `BAD_REQUEST`
//! (400: malformed JSON, oversized batch) and `UNAUTHENTICATED` (401: a bad
//! bearer token).

use std::sync::Arc;

use async_graphql::{BatchRequest, Data, Executor};
use axum::{
    Json, Router,
    body::Bytes,
    extract::{FromRef, State, WebSocketUpgrade, rejection::BytesRejection},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
    routing::get,
};
use serde_json::json;

use super::ws::{self, WsLimits};
use crate::{
    error::AppError,
    http::{Web, client::RequestMeta, frontend::Frontend, identify},
};

/// Puts what one operation's resolvers read into its data: every domain's
/// typed service and fresh DataLoaders (the app composes it from the
/// domains).
pub type RequestData = Arc<dyn Fn(&mut Data) + Send + Sync>;

/// The GraphQL endpoints' state: the schema and what each request gets.
#[derive(Clone)]
pub struct Endpoint<E> {
    pub schema: E,
    pub web: Web,
    pub request_data: RequestData,
    /// `TRELLIS_MAX_BODY_BYTES`, for the error message and WebSocket frames.
    pub max_body_bytes: usize,
    /// `TRELLIS_GRAPHQL_MAX_BATCH`.
    pub max_batch: usize,
    pub ws_limits: WsLimits,
    /// The web client's build, which holds the playground's page.
    pub frontend: Frontend,
}

impl<E> FromRef<Endpoint<E>> for Web {
    fn from_ref(state: &Endpoint<E>) -> Web {
        state.web.clone()
    }
}

/// `/graphql` (POST and GraphiQL) and `/graphql/ws`.
pub fn routes<E: Executor>(endpoint: Endpoint<E>) -> Router {
    Router::new()
        .route("/graphql", get(graphiql::<E>).post(graphql_post::<E>))
        .route("/graphql/ws", get(graphql_ws::<E>))
        .with_state(endpoint)
}

fn http_error(status: StatusCode, code: &str, message: impl Into<String>) -> Response {
    let body = json!({ "errors": [{ "message": message.into(), "extensions": { "code": code } }] });
    (status, Json(body)).into_response()
}

/// `POST /graphql`: one operation or a batch (JSON array).
async fn graphql_post<E: Executor>(
    State(state): State<Endpoint<E>>,
    meta: RequestMeta,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return http_error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "PAYLOAD_TOO_LARGE",
                format!("request body exceeds {} bytes", state.max_body_bytes),
            );
        }
        Err(rejection) => {
            return http_error(rejection.status(), "BAD_REQUEST", rejection.body_text());
        }
    };
    let is_json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if !is_json {
        return http_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UNSUPPORTED_MEDIA_TYPE",
            "send GraphQL requests as Content-Type: application/json",
        );
    }
    let batch: BatchRequest = match serde_json::from_slice(&body) {
        Ok(batch) => batch,
        Err(error) => {
            return http_error(
                StatusCode::BAD_REQUEST,
                "BAD_REQUEST",
                format!("malformed GraphQL request: {error}"),
            );
        }
    };
    if batch.iter().any(|request| request.query.trim().is_empty()) {
        return http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            "malformed GraphQL request: `query` is missing or empty",
        );
    }
    let max_batch = state.max_batch;
    if let BatchRequest::Batch(requests) = &batch
        && (requests.is_empty() || requests.len() > max_batch)
    {
        return http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            format!("a batch must hold 1 to {max_batch} operations"),
        );
    }

    let viewer = match identify(&state.web.auth, &headers).await {
        Ok(viewer) => viewer,
        Err(error @ AppError::Unauthenticated(_)) => {
            let mut response = error.into_response();
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer error=\"invalid_token\""),
            );
            return response;
        }
        Err(error) => return error.into_response(),
    };
    let mut batch = batch.data(meta);
    if let Some(viewer) = viewer {
        batch = batch.data(viewer);
    }
    for request in batch.iter_mut() {
        (state.request_data)(&mut request.data);
    }

    let response = state.schema.execute_batch(batch).await;
    let extra_headers: Vec<_> = response.http_headers_iter().collect();
    let mut http = Json(response).into_response();
    for (name, value) in extra_headers {
        http.headers_mut().append(name, value);
    }
    // Responses can carry tokens and per-user data.
    http.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    http
}

/// `GET /graphql`: the GraphiQL playground, built into the web client
/// (`frontend/src/graphiql/`) and served from our own `/assets/`: it works
/// offline and loads nothing from another origin.
async fn graphiql<E: Executor>(State(state): State<Endpoint<E>>) -> Response {
    state.frontend.page("graphiql.html")
}

/// `GET /graphql/ws`: GraphQL over WebSocket (`graphql-transport-ws`; the
/// connection itself is `ws::serve`).
///
/// Authentication: a token in the `connection_init` payload
/// (`{"authorization": "Bearer …"}` or `{"token": "…"}`), else the session
/// cookie — the latter only when the page's `Origin` is allowed, so another
/// site cannot ride a user's cookie over a WebSocket.
async fn graphql_ws<E: Executor>(
    State(state): State<Endpoint<E>>,
    meta: RequestMeta,
    headers: HeaderMap,
    upgrade: WebSocketUpgrade,
) -> Response {
    let offers_protocol = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|protocol| protocol.trim() == PROTOCOL);
    if !offers_protocol {
        return http_error(
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
            format!("a GraphQL WebSocket must offer the `{PROTOCOL}` subprotocol"),
        );
    }
    let cookie_viewer = if state.web.origin_allowed(&meta) {
        let secret = crate::auth::cookie::session_secret(&headers);
        match secret {
            Some(secret) => state
                .web
                .auth
                .authenticate_cookie(&secret)
                .await
                .ok()
                .flatten(),
            None => None,
        }
    } else {
        None
    };
    let max_message = state.max_body_bytes;
    let connection = ws::Upgrade {
        limits: state.ws_limits,
        schema: state.schema.clone(),
        auth: state.web.auth.clone(),
        request_data: state.request_data.clone(),
        meta,
        cookie_viewer,
    };
    upgrade
        .protocols([PROTOCOL])
        // A document over the WebSocket gets the same size limit as over HTTP.
        .max_message_size(max_message)
        .max_frame_size(max_message)
        .on_upgrade(move |socket| ws::serve(socket, connection))
}

/// The WebSocket subprotocol we speak (graphql-ws's `graphql-transport-ws`).
const PROTOCOL: &str = "graphql-transport-ws";
