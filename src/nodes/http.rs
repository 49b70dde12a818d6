//! HTTP for clients that do not speak GraphQL: `POST /resources`,
//! `POST /resources/{id}/update-a|update-b|update-c`,
//! `POST /resources/{id}/delete`. Each needs an `Idempotency-Key` header and
//! answers `202 Accepted` with `{ "task_id": … }`; the client polls
//! `GET /tasks/{id}`. Errors are the GraphQL error codes with their HTTP
//! statuses (400 bad input, 401, 404, 422 `IDEMPOTENCY_KEY_REUSED`).

use axum::{
    Json, Router,
    extract::{FromRef, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    ops::{Operation, Replacement},
    service::NodesService,
};
use crate::{
    error::{AppError, AppResult},
    http::{Web, body::JsonBody, client::RequestMeta, path::PathParam},
};

/// What the resource routes need.
#[derive(Clone)]
struct NodesHttp {
    web: Web,
    nodes: NodesService,
}

impl FromRef<NodesHttp> for Web {
    fn from_ref(state: &NodesHttp) -> Web {
        state.web.clone()
    }
}

pub fn routes(web: Web, nodes: NodesService) -> Router {
    Router::new()
        .route("/resources", post(create))
        .route("/resources/{id}/update-a", post(update_a))
        .route("/resources/{id}/update-b", post(update_b))
        .route("/resources/{id}/update-c", post(update_c))
        .route("/resources/{id}/delete", post(delete))
        .with_state(NodesHttp { web, nodes })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CreateBody {
    attributes: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PatchBody {
    patch: Map<String, Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplaceBody {
    attributes: Map<String, Value>,
    #[serde(default)]
    others: Vec<Replacement>,
}

/// The body, or why it was refused (answered after authentication).
type Body<T> = AppResult<JsonBody<T>>;

fn body<T>(body: Body<T>) -> AppResult<T> {
    body.map(|JsonBody(body)| body)
}

/// The path's resource id, read as GraphQL reads one: a value that is not
/// an id at all is the caller's mistake (400 `BAD_USER_INPUT`, field
/// `id`), a well-formed id of no resource is 404.
fn resource_id(id: &str) -> AppResult<Uuid> {
    crate::jobs::graphql::parse_id("id", &async_graphql::ID(id.to_owned()))
}

async fn create(
    State(state): State<NodesHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    request: Body<CreateBody>,
) -> Response {
    accept(&state, &meta, &headers, || {
        Ok(Operation::Create {
            attributes: body(request)?.attributes,
        })
    })
    .await
}

async fn update_a(
    state: State<NodesHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    id: PathParam<String>,
    request: Body<PatchBody>,
) -> Response {
    patch(state, meta, headers, id, request, |resource_id, patch| {
        Operation::UpdateA { resource_id, patch }
    })
    .await
}

async fn update_b(
    state: State<NodesHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    id: PathParam<String>,
    request: Body<PatchBody>,
) -> Response {
    patch(state, meta, headers, id, request, |resource_id, patch| {
        Operation::UpdateB { resource_id, patch }
    })
    .await
}

/// Update A and B: the same body, another operation.
async fn patch(
    State(state): State<NodesHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    PathParam(id): PathParam<String>,
    request: Body<PatchBody>,
    operation: fn(Uuid, Map<String, Value>) -> Operation,
) -> Response {
    accept(&state, &meta, &headers, || {
        Ok(operation(resource_id(&id)?, body(request)?.patch))
    })
    .await
}

async fn update_c(
    State(state): State<NodesHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    PathParam(id): PathParam<String>,
    request: Body<ReplaceBody>,
) -> Response {
    accept(&state, &meta, &headers, || {
        let body = body(request)?;
        let mut resources = vec![Replacement {
            id: resource_id(&id)?,
            attributes: body.attributes,
        }];
        resources.extend(body.others);
        Ok(Operation::UpdateC { resources })
    })
    .await
}

async fn delete(
    State(state): State<NodesHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    PathParam(id): PathParam<String>,
) -> Response {
    accept(&state, &meta, &headers, || {
        Ok(Operation::Delete {
            resource_id: resource_id(&id)?,
        })
    })
    .await
}

/// Authenticates, reads the idempotency key, submits; `202 { task_id }`.
async fn accept(
    state: &NodesHttp,
    meta: &RequestMeta,
    headers: &HeaderMap,
    operation: impl FnOnce() -> AppResult<Operation>,
) -> Response {
    let result = async {
        let viewer = state
            .web
            .viewer(meta, headers, "sign in to change resources")
            .await?;
        let key = headers
            .get("idempotency-key")
            .ok_or_else(|| {
                AppError::bad_input("Idempotency-Key", "the Idempotency-Key header is required")
            })?
            .to_str()
            .map_err(|_| {
                AppError::bad_input("Idempotency-Key", "the Idempotency-Key header must be text")
            })?
            .to_owned();
        let operation = operation()?;
        state.nodes.submit(&viewer, operation, key).await
    }
    .await;
    match result {
        Ok(enqueued) => (
            StatusCode::ACCEPTED,
            Json(json!({ "task_id": enqueued.task.id.to_string() })),
        )
            .into_response(),
        Err(error) => error.into_response(),
    }
}
