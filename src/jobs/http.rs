//! `GET /tasks/{id}` for clients that do not speak GraphQL.

use axum::{
    Json, Router,
    extract::{FromRef, State},
    http::HeaderMap,
    response::{IntoResponse, Response},
};

use super::Jobs;
use crate::{
    error::AppError,
    http::{Web, identify, path::PathParam},
};

#[derive(Clone)]
struct TaskRoute {
    web: Web,
    jobs: Jobs,
}

impl FromRef<TaskRoute> for Web {
    fn from_ref(state: &TaskRoute) -> Web {
        state.web.clone()
    }
}

/// `GET /tasks/{id}`.
pub fn routes(web: Web, jobs: Jobs) -> Router {
    Router::new()
        .route("/tasks/{id}", axum::routing::get(get_task))
        .with_state(TaskRoute { web, jobs })
}

/// The task as JSON (the GraphQL `Task` fields); 401 without credentials,
/// 400 when the path is not a task id, 404 when absent or not the caller's.
async fn get_task(
    State(state): State<TaskRoute>,
    headers: HeaderMap,
    PathParam(id): PathParam<String>,
) -> Response {
    let result = async {
        let viewer = identify(&state.web.auth, &headers)
            .await?
            .ok_or(AppError::Unauthenticated("sign in to read tasks"))?;
        // Read as GraphQL's `task(id:)` and the resource routes read an id:
        // not an id at all is 400 `BAD_USER_INPUT`; an id of no task, 404.
        let id = super::graphql::parse_id("id", &async_graphql::ID(id))?;
        let jobs = &state.jobs;
        let task = jobs
            .get(viewer.audience(), id)
            .await?
            .ok_or(AppError::NotFound("task"))?;
        jobs.view(&task).await
    }
    .await;
    match result {
        Ok(task) => Json(task).into_response(),
        Err(error) => error.into_response(),
    }
}
