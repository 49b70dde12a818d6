//! The job runner's conformance suite, driven through the GraphQL API,
//! `GET /tasks/{id}` and the database's effect table. Runs on the embedded
//! dispatcher over SQLite and over PostgreSQL.

mod events;
mod lifecycle;
mod processes;
mod scheduling;

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::{
    helpers::{AppOptions, TestApp},
    websocket::{next, subscribe},
};

const PROBE: &str =
    "mutation($i: ProbeTaskInput!) { probeTask(input: $i) { id status stage queue attemptCount } }";

const TASK: &str = "query($id: ID!) { task(id: $id) { id kind status stage stagesDone attemptCount maxAttempts error result progress startedAt finishedAt } }";

fn fast_retries() -> AppOptions {
    AppOptions::default()
        .env("TRELLIS_TASK_RETRY_BASE_MS", "50")
        .env("TRELLIS_TASK_RETRY_MAX", "1")
        .env("TRELLIS_TASK_POLL_MS", "50")
}

async fn probe(app: &TestApp, token: &str, input: Value) -> String {
    let response = app
        .gql(PROBE, json!({ "i": input }))
        .bearer(token)
        .send()
        .await;
    let task = &response.data()["probeTask"];
    assert_eq!(task["status"], "QUEUED");
    task["id"].as_str().unwrap().to_owned()
}

pub(crate) async fn task(app: &TestApp, token: &str, id: &str) -> Value {
    app.gql(TASK, json!({ "id": id }))
        .bearer(token)
        .send()
        .await
        .data()["task"]
        .clone()
}

/// Polls until the task is terminal (bounded: the server is local and fast).
pub(crate) async fn wait_terminal(app: &TestApp, token: &str, id: &str) -> Value {
    for _ in 0..600 {
        let task = task(app, token, id).await;
        if ["SUCCEEDED", "FAILED", "SUPERSEDED", "CANCELLED"]
            .contains(&task["status"].as_str().unwrap_or_default())
        {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("task {id} did not finish");
}

async fn wait_status(app: &TestApp, token: &str, id: &str, status: &str) -> Value {
    for _ in 0..600 {
        let task = task(app, token, id).await;
        if task["status"] == status {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("task {id} never reached {status}");
}

async fn effects(app: &TestApp, id: &str) -> Vec<(i64, i64)> {
    let db = app.database().await;
    let backend = db.get_database_backend();
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            backend,
            "SELECT stage, attempt FROM probe_effects WHERE task_id = $1 ORDER BY stage",
            vec![uuid::Uuid::parse_str(id).unwrap().into()],
        ))
        .await
        .unwrap();
    rows.iter()
        .map(|row| {
            let stage: i32 = row.try_get("", "stage").unwrap();
            let attempt: i32 = row.try_get("", "attempt").unwrap();
            (stage as i64, attempt as i64)
        })
        .collect()
}

fn time(value: &Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

/// Follows `taskUpdated` over WebSocket until the server completes it.
async fn watch_task(app: &TestApp, token: &str, id: &str) -> Vec<Value> {
    let mut socket = subscribe(
        app,
        token,
        "s",
        "subscription($id: ID!) { taskUpdated(id: $id) { status stage stagesDone } }",
        json!({ "id": id }),
    )
    .await;
    let mut seen = Vec::new();
    loop {
        let message = next(&mut socket)
            .await
            .expect("stream stays open until complete");
        match message["type"].as_str() {
            Some("next") => seen.push(message["payload"]["data"]["taskUpdated"].clone()),
            Some("complete") => break,
            other => panic!("unexpected {other:?}: {message}"),
        }
    }
    seen
}
