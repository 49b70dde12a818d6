//! `GET /tasks/{id}` for clients that do not speak GraphQL.

use axum::{
    Json,
    extract::State,
    http::HeaderMap,
    response::{IntoResponse, Response},
};
use uuid::Uuid;

use crate::{
    app::AppState,
    error::AppError,
    http::{identify, path::PathParam},
};

/// The task as JSON (the GraphQL `Task` fields); 401 without credentials,
/// 404 when absent or not the caller's.
pub async fn get_task(
    State(state): State<AppState>,
    headers: HeaderMap,
    PathParam(id): PathParam<String>,
) -> Response {
    let result = async {
        let viewer = identify(&state.services.auth, &headers)
            .await?
            .ok_or(AppError::Unauthenticated("sign in to read tasks"))?;
        let id = Uuid::parse_str(&id).map_err(|_| AppError::NotFound("task"))?;
        let jobs = &state.services.jobs;
        let task = jobs
            .get(&viewer, id)
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
