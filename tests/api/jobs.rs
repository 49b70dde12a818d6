//! The job runner's conformance suite, driven through the GraphQL API,
//! `GET /tasks/{id}` and the database's effect table. Runs on the embedded
//! dispatcher over SQLite and over PostgreSQL.

use std::time::Duration;

use chrono::{DateTime, Utc};
use sea_orm::{ConnectionTrait, Statement, TransactionTrait};
use serde_json::{Value, json};

use crate::{
    helpers::{AppOptions, Backend, TestApp, spawn_app_with},
    on_every_runner,
    websocket::{next, subscribe},
};

on_every_runner!(
    probe_task_runs_every_stage_and_is_readable_everywhere,
    tasks_that_write_nothing_end_together_in_the_group_commit,
    task_updated_streams_each_change_until_terminal,
    failing_attempts_are_retried_with_backoff_then_fail,
    queued_and_running_tasks_can_be_cancelled,
    each_queue_respects_its_concurrency_cap,
    short_jobs_are_not_stuck_behind_long_ones,
    concurrent_identical_requests_create_one_task,
    newer_generation_supersedes_without_writing,
    expired_lease_is_reclaimed_and_resumes_at_the_uncommitted_stage,
    members_see_only_their_own_tasks,
    a_heartbeat_keeps_a_task_longer_than_its_lease,
    the_events_of_one_task_write_are_delivered_one_by_one,
    slots_freed_by_the_group_commit_take_the_next_task_within_the_cap,
);

mod across_processes {
    #[tokio::test]
    async fn api_process_sees_a_task_run_by_a_worker_process() {
        super::api_process_sees_a_task_run_by_a_worker_process().await
    }

    #[tokio::test]
    async fn periodic_jobs_fire_once_per_period_across_processes() {
        super::periodic_jobs_fire_once_per_period_across_processes().await
    }

    #[tokio::test]
    async fn sigterm_releases_a_running_task_for_another_worker() {
        super::sigterm_releases_a_running_task_for_another_worker().await
    }

    #[tokio::test]
    async fn claimed_ids_leave_the_redis_lists() {
        super::claimed_ids_leave_the_redis_lists().await
    }

    #[tokio::test]
    async fn a_gone_workers_redis_list_is_swept() {
        super::a_gone_workers_redis_list_is_swept().await
    }
}

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

/// The payload of the last `task.updated` event the outbox holds for `id`.
async fn last_task_event(app: &TestApp, id: &str) -> Value {
    let db = app.database().await;
    trellis::jobs::outbox::stored_events(&db, "task.updated")
        .await
        .unwrap()
        .iter()
        .rev()
        .find(|event| event.aggregate_id == id)
        .and_then(|event| event.payload())
        .expect("an event for the task")
}

/// A task's JSON with its timestamps (`…At`) parsed, so that two
/// spellings of one instant (SQL's six digits, chrono's as few as needed)
/// compare equal.
fn same_instants(mut task: Value) -> Value {
    for (key, value) in task.as_object_mut().unwrap() {
        if key.ends_with("At") && value.is_string() {
            *value = json!(time(value).timestamp_micros());
        }
    }
    task
}

fn time(value: &Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

/// Tasks whose last stage writes nothing of its own end through the
/// group commit, several endings to one statement: each still ends
/// `SUCCEEDED` after all its stages, once, and only for the worker that
/// holds it.
async fn tasks_that_write_nothing_end_together_in_the_group_commit(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let mut ids = Vec::new();
    for _ in 0..24 {
        ids.push(
            probe(
                &app,
                &admin.access,
                json!({ "stages": 2, "effects": false }),
            )
            .await,
        );
    }
    for id in &ids {
        let done = wait_terminal(&app, &admin.access, id).await;
        assert_eq!(done["status"], "SUCCEEDED", "{done}");
        assert_eq!(done["stagesDone"], 2);
        assert_eq!(done["attemptCount"], 1);
        assert!(done["result"].is_null() && done["progress"].is_null());
        assert!(done["finishedAt"].is_string());
        assert!(effects(&app, id).await.is_empty());
    }
}

async fn probe_task_runs_every_stage_and_is_readable_everywhere(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let response = app
        .gql(PROBE, json!({ "i": { "stages": 3 } }))
        .bearer(&admin.access)
        .send()
        .await;
    let queued = &response.data()["probeTask"];
    assert_eq!(queued["stage"], "stage-1");
    assert_eq!(queued["queue"], "SHORT");
    let id = queued["id"].as_str().unwrap();

    let done = wait_terminal(&app, &admin.access, id).await;
    assert_eq!(done["status"], "SUCCEEDED");
    assert_eq!(done["kind"], "system.probe");
    assert_eq!(done["stagesDone"], 3);
    assert_eq!(done["attemptCount"], 1);
    assert_eq!(done["result"], json!({ "stages": 3 }));
    assert_eq!(done["progress"], json!({ "done": 3, "total": 3 }));
    assert!(done["error"].is_null());
    assert_eq!(effects(&app, id).await, vec![(0, 1), (1, 1), (2, 1)]);

    let http = app
        .client
        .get(app.url(&format!("/tasks/{id}")))
        .bearer_auth(&admin.access)
        .send()
        .await
        .unwrap();
    assert_eq!(http.status(), 200);
    let body: Value = http.json().await.unwrap();
    assert_eq!(
        (body["id"].as_str(), body["status"].as_str()),
        (Some(id), Some("SUCCEEDED"))
    );
    assert_eq!(body["attemptCount"], 1);
    // The last event carries the same task as `GET /tasks/{id}`, to the
    // letter (on PostgreSQL the write stores a snapshot of the row, which
    // the publisher renders as the API does).
    assert_eq!(last_task_event(&app, id).await, body);

    let anonymous = app
        .client
        .get(app.url(&format!("/tasks/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let missing = app
        .client
        .get(app.url(&format!("/tasks/{}", uuid::Uuid::new_v4())))
        .bearer_auth(&admin.access)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 404);

    let list = app
        .gql(
            "{ tasks(filter: { kind: \"system.probe\" }) { totalCount nodes { id status } } }",
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(list.data()["tasks"]["totalCount"], 1);
    assert_eq!(list.data()["tasks"]["nodes"][0]["id"], id);

    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for name in [
        "trellis_queue_depth{queue=\"q:short\"}",
        "trellis_tasks_enqueued_total{queue=\"short\",kind=\"system.probe\"} 1",
        "trellis_task_pickup_seconds_count{queue=\"short\"}",
        "trellis_task_run_seconds_count{queue=\"short\",status=\"SUCCEEDED\"}",
    ] {
        assert!(metrics.contains(name), "{name} missing from /metrics");
    }
}

async fn task_updated_streams_each_change_until_terminal(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let id = probe(
        &app,
        &admin.access,
        json!({ "stages": 2, "sleepMs": 300, "queue": "LONG" }),
    )
    .await;
    let seen = watch_task(&app, &admin.access, &id).await;
    let last = seen.last().unwrap();
    assert_eq!(last["status"], "SUCCEEDED");
    assert_eq!(last["stagesDone"], 2);
    assert!(seen.iter().any(|t| t["status"] == "RUNNING"), "{seen:?}");
    // Every stage commit is visible: stagesDone climbs to 1 then 2, never back.
    let done: Vec<i64> = seen
        .iter()
        .map(|t| t["stagesDone"].as_i64().unwrap())
        .collect();
    assert!(done.windows(2).all(|w| w[0] <= w[1]), "{done:?}");
    assert!(done.contains(&1), "{done:?}");
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

async fn failing_attempts_are_retried_with_backoff_then_fail(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let recovers = probe(
        &app,
        &admin.access,
        json!({ "stages": 2, "failAttempts": 2, "maxAttempts": 5 }),
    )
    .await;
    let gives_up = probe(
        &app,
        &admin.access,
        json!({ "failAttempts": 9, "maxAttempts": 3 }),
    )
    .await;

    let done = wait_terminal(&app, &admin.access, &recovers).await;
    assert_eq!(done["status"], "SUCCEEDED");
    assert_eq!(done["attemptCount"], 3);
    assert!(done["error"].is_null());
    assert_eq!(effects(&app, &recovers).await, vec![(0, 3), (1, 3)]);

    let failed = wait_terminal(&app, &admin.access, &gives_up).await;
    assert_eq!(failed["status"], "FAILED");
    assert_eq!(failed["attemptCount"], 3);
    assert!(
        failed["error"]
            .as_str()
            .unwrap()
            .contains("attempt 3 on purpose"),
        "{failed}"
    );
    assert!(effects(&app, &gives_up).await.is_empty());
}

async fn queued_and_running_tasks_can_be_cancelled(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries().env("TRELLIS_QUEUE_LONG_CONCURRENCY", "1"),
    )
    .await;
    let admin = app.admin().await;
    let cancel = "mutation($id: ID!) { cancelTask(id: $id) { status } }";
    let running = probe(
        &app,
        &admin.access,
        json!({ "stages": 4, "sleepMs": 400, "queue": "LONG" }),
    )
    .await;
    let waiting = probe(&app, &admin.access, json!({ "queue": "LONG" })).await;
    wait_status(&app, &admin.access, &running, "RUNNING").await;

    let response = app
        .gql(cancel, json!({ "id": waiting }))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(response.data()["cancelTask"]["status"], "CANCELLED");
    let response = app
        .gql(cancel, json!({ "id": running }))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(response.data()["cancelTask"]["status"], "RUNNING");

    let stopped = wait_terminal(&app, &admin.access, &running).await;
    assert_eq!(stopped["status"], "CANCELLED");
    assert!(stopped["stagesDone"].as_i64().unwrap() < 4, "{stopped}");
    assert_eq!(
        effects(&app, &running).await.len() as i64,
        stopped["stagesDone"].as_i64().unwrap()
    );
    assert!(effects(&app, &waiting).await.is_empty());

    let again = app
        .gql(cancel, json!({ "id": waiting }))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(again.error_code(), Some("CONFLICT"));
}

/// The most intervals `[startedAt, finishedAt]` that overlap at one instant.
fn max_overlap(tasks: &[Value]) -> usize {
    let mut edges: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for task in tasks {
        edges.push((time(&task["startedAt"]), 1));
        edges.push((time(&task["finishedAt"]), -1));
    }
    edges.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in edges {
        now += delta;
        max = max.max(now);
    }
    max as usize
}

/// Tasks whose last stage writes nothing end through the group commit,
/// which claims each freed slot's next task in the same commit. The
/// handed-off tasks still respect the queue's cap, and each runs once.
async fn slots_freed_by_the_group_commit_take_the_next_task_within_the_cap(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries().env("TRELLIS_QUEUE_LONG_CONCURRENCY", "2"),
    )
    .await;
    let admin = app.admin().await;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(
            probe(
                &app,
                &admin.access,
                json!({ "sleepMs": 150, "queue": "LONG", "effects": false }),
            )
            .await,
        );
    }
    let mut done = Vec::new();
    for id in &ids {
        done.push(wait_terminal(&app, &admin.access, id).await);
    }
    for task in &done {
        assert_eq!(task["status"], "SUCCEEDED");
        assert_eq!(task["attemptCount"], 1, "each runs once");
    }
    assert_eq!(
        max_overlap(&done),
        2,
        "q:long runs exactly its 2 workers at once"
    );
}

async fn each_queue_respects_its_concurrency_cap(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries()
            .env("TRELLIS_QUEUE_LONG_CONCURRENCY", "2")
            .env("TRELLIS_QUEUE_MEDIUM_CONCURRENCY", "1"),
    )
    .await;
    let admin = app.admin().await;
    let mut long = Vec::new();
    let mut medium = Vec::new();
    for _ in 0..5 {
        long.push(
            probe(
                &app,
                &admin.access,
                json!({ "sleepMs": 300, "queue": "LONG" }),
            )
            .await,
        );
        medium.push(
            probe(
                &app,
                &admin.access,
                json!({ "sleepMs": 200, "queue": "MEDIUM" }),
            )
            .await,
        );
    }
    let mut long_done = Vec::new();
    for id in &long {
        long_done.push(wait_terminal(&app, &admin.access, id).await);
    }
    let mut medium_done = Vec::new();
    for id in &medium {
        medium_done.push(wait_terminal(&app, &admin.access, id).await);
    }
    assert!(
        long_done
            .iter()
            .chain(&medium_done)
            .all(|t| t["status"] == "SUCCEEDED")
    );
    assert_eq!(
        max_overlap(&long_done),
        2,
        "q:long runs exactly its 2 workers at once"
    );
    assert_eq!(max_overlap(&medium_done), 1, "q:medium runs one at a time");
}

async fn short_jobs_are_not_stuck_behind_long_ones(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries().env("TRELLIS_QUEUE_LONG_CONCURRENCY", "1"),
    )
    .await;
    let admin = app.admin().await;
    let first_long = probe(
        &app,
        &admin.access,
        json!({ "sleepMs": 1500, "queue": "LONG" }),
    )
    .await;
    let second_long = probe(
        &app,
        &admin.access,
        json!({ "sleepMs": 1500, "queue": "LONG" }),
    )
    .await;
    wait_status(&app, &admin.access, &first_long, "RUNNING").await;
    let short = probe(&app, &admin.access, json!({ "queue": "SHORT" })).await;

    let short_done = wait_terminal(&app, &admin.access, &short).await;
    let still_waiting = task(&app, &admin.access, &second_long).await;
    assert_eq!(short_done["status"], "SUCCEEDED");
    assert_eq!(
        still_waiting["status"], "QUEUED",
        "the saturated long queue has not reached its second job"
    );
    let first_long_done = wait_terminal(&app, &admin.access, &first_long).await;
    assert!(time(&short_done["finishedAt"]) < time(&first_long_done["finishedAt"]));
}

async fn concurrent_identical_requests_create_one_task(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let input = json!({ "stages": 1, "idempotencyKey": "import-42" });
    let requests = (0..50).map(|_| {
        app.gql(PROBE, json!({ "i": input.clone() }))
            .bearer(&admin.access)
            .send()
    });
    let responses = futures_util::future::join_all(requests).await;
    let ids: std::collections::HashSet<String> = responses
        .iter()
        .map(|r| r.data()["probeTask"]["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 1, "one task for 50 identical requests");
    let count = app
        .gql(
            "{ tasks(filter: { kind: \"system.probe\" }) { totalCount } }",
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(count.data()["tasks"]["totalCount"], 1);

    let reused = app
        .gql(
            PROBE,
            json!({ "i": { "stages": 2, "idempotencyKey": "import-42" } }),
        )
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(reused.error_code(), Some("IDEMPOTENCY_KEY_REUSED"));
}

async fn newer_generation_supersedes_without_writing(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let older = probe(
        &app,
        &admin.access,
        json!({ "stages": 2, "sleepMs": 800, "scope": "s1" }),
    )
    .await;
    wait_status(&app, &admin.access, &older, "RUNNING").await;
    let newer = probe(&app, &admin.access, json!({ "stages": 2, "scope": "s1" })).await;

    let older_done = wait_terminal(&app, &admin.access, &older).await;
    let newer_done = wait_terminal(&app, &admin.access, &newer).await;
    assert_eq!(older_done["status"], "SUPERSEDED");
    assert_eq!(newer_done["status"], "SUCCEEDED");
    assert!(
        effects(&app, &older).await.is_empty(),
        "a superseded stage writes nothing"
    );
    assert_eq!(effects(&app, &newer).await.len(), 2);
}

/// A stage may run longer than the lease: the worker's heartbeat renews
/// it, so the reaper leaves the task alone and it ends in one attempt.
async fn a_heartbeat_keeps_a_task_longer_than_its_lease(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries().env("TRELLIS_TASK_LEASE", "1")).await;
    let admin = app.admin().await;
    let long = probe(&app, &admin.access, json!({ "stages": 1, "sleepMs": 2500 })).await;
    let short = probe(&app, &admin.access, json!({ "stages": 2, "sleepMs": 100 })).await;
    for id in [&long, &short] {
        let done = wait_terminal(&app, &admin.access, id).await;
        assert_eq!(done["status"], "SUCCEEDED", "{done}");
        assert_eq!(done["attemptCount"], 1, "{done}");
        assert!(done["error"].is_null(), "{done}");
    }
}

async fn expired_lease_is_reclaimed_and_resumes_at_the_uncommitted_stage(backend: Backend) {
    let mut app = spawn_app_with(backend, fast_retries().env("TRELLIS_TASK_LEASE", "2")).await;
    let admin = app.admin().await;
    let id = probe(&app, &admin.access, json!({ "stages": 2, "sleepMs": 1500 })).await;
    // Wait for stage 1 to commit, then kill the worker inside stage 2.
    for _ in 0..200 {
        if task(&app, &admin.access, &id).await["stagesDone"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.kill().await;
    app.restart(&[]).await;
    let admin = app.admin().await;

    let done = wait_terminal(&app, &admin.access, &id).await;
    assert_eq!(done["status"], "SUCCEEDED");
    assert_eq!(done["attemptCount"], 2, "the second worker's attempt");
    // Stage 1 ran once (attempt 1), stage 2 once (attempt 2): no effect twice.
    assert_eq!(effects(&app, &id).await, vec![(0, 1), (1, 2)]);
}

async fn members_see_only_their_own_tasks(backend: Backend) {
    let app = spawn_app_with(backend, AppOptions::default()).await;
    let admin = app.admin().await;
    let member = app.member("max").await;
    let id = probe(&app, &admin.access, json!({})).await;

    assert!(task(&app, &member.access, &id).await.is_null());
    let list = app
        .gql("{ tasks { totalCount } }", json!({}))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(list.data()["tasks"]["totalCount"], 0);
    let cancel = app
        .gql(
            "mutation($id: ID!) { cancelTask(id: $id) { status } }",
            json!({ "id": id }),
        )
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(cancel.error_code(), Some("NOT_FOUND"));
    let http = app
        .client
        .get(app.url(&format!("/tasks/{id}")))
        .bearer_auth(&member.access)
        .send()
        .await
        .unwrap();
    assert_eq!(http.status(), 404);
    let probe_as_member = app
        .gql(PROBE, json!({ "i": {} }))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(probe_as_member.error_code(), Some("FORBIDDEN"));
    let anonymous = app.gql(TASK, json!({ "id": id })).send().await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
}

async fn api_process_sees_a_task_run_by_a_worker_process() {
    let app = spawn_app_with(
        Backend::PostgresRedis,
        fast_retries().env("TRELLIS_ROLE", "api"),
    )
    .await;
    let (_worker, _) = app.sibling(&[("TRELLIS_ROLE", "worker")]).await;
    let admin = app.admin().await;
    let id = probe(&app, &admin.access, json!({ "stages": 2, "sleepMs": 100 })).await;
    // The API process runs no workers: every change seen here was made by
    // the worker process and reached this one through Redis.
    let seen = watch_task(&app, &admin.access, &id).await;
    assert_eq!(seen.last().unwrap()["status"], "SUCCEEDED");
    assert!(seen.iter().any(|t| t["status"] == "RUNNING"), "{seen:?}");
    assert_eq!(effects(&app, &id).await.len(), 2);
}

/// Redis holds an id only until a worker has claimed its task: the
/// worker's processing list is cleared once the claim commits (the lease
/// guards the task from then on), so finished work leaves nothing behind.
async fn claimed_ids_leave_the_redis_lists() {
    let app = spawn_app_with(Backend::PostgresRedis, fast_retries()).await;
    let admin = app.admin().await;
    let mut ids = Vec::new();
    for stages in 1..=12 {
        let input = json!({ "stages": stages % 3 + 1, "effects": stages % 2 == 0 });
        ids.push(probe(&app, &admin.access, input).await);
    }
    for id in &ids {
        assert_eq!(
            wait_terminal(&app, &admin.access, id).await["status"],
            "SUCCEEDED"
        );
    }
    let prefix = app.env_var("TRELLIS_REDIS_PREFIX").expect("a Redis prefix");
    let client = redis::Client::open(crate::helpers::redis_url()).expect("redis url");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let mut held = Vec::new();
    // The clearing is sent right after the claim; give it a moment.
    for _ in 0..50 {
        let keys: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query_async(&mut redis)
            .await
            .expect("keys");
        held = Vec::new();
        let lists = keys
            .iter()
            .filter(|key| key.contains(":processing:") || key.contains(":q:"));
        for key in lists {
            let ids: Vec<String> = redis::cmd("LRANGE")
                .arg(key)
                .arg(0)
                .arg(-1)
                .query_async(&mut redis)
                .await
                .expect("lrange");
            held.extend(ids.into_iter().map(|id| format!("{key}: {id}")));
        }
        if held.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(held.is_empty(), "ids left in Redis lists: {held:?}");
}

/// A worker that died leaves its processing list behind; the live workers'
/// maintenance gives its ids back to the queue and deletes it, and leaves
/// a live worker's alone.
async fn a_gone_workers_redis_list_is_swept() {
    let app = spawn_app_with(Backend::PostgresRedis, fast_retries()).await;
    let prefix = app.env_var("TRELLIS_REDIS_PREFIX").expect("a Redis prefix");
    let client = redis::Client::open(crate::helpers::redis_url()).expect("redis url");
    let mut redis = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let ghost = format!("{prefix}:processing:ghost-worker:long");
    let living = format!("{prefix}:processing:living-worker:long");
    let stranded = uuid::Uuid::now_v7().to_string();
    for key in [&ghost, &living] {
        redis::cmd("LPUSH")
            .arg(key)
            .arg(&stranded)
            .query_async::<()>(&mut redis)
            .await
            .expect("lpush");
    }
    redis::cmd("SET")
        .arg(format!("{prefix}:alive:living-worker"))
        .arg(1)
        .arg("EX")
        .arg(600)
        .query_async::<()>(&mut redis)
        .await
        .expect("set");
    // The maintenance loop sweeps every few seconds (bounded wait).
    let mut swept = false;
    for _ in 0..300 {
        let exists: bool = redis::cmd("EXISTS")
            .arg(&ghost)
            .query_async(&mut redis)
            .await
            .expect("exists");
        if !exists {
            swept = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(swept, "the gone worker's list is still there");
    let kept: Vec<String> = redis::cmd("LRANGE")
        .arg(&living)
        .arg(0)
        .arg(-1)
        .query_async(&mut redis)
        .await
        .expect("lrange");
    assert_eq!(kept, vec![stranded]);
    // The server's own worker says it is alive.
    let alive: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:alive:*"))
        .query_async(&mut redis)
        .await
        .expect("keys");
    assert!(alive.len() >= 2, "{alive:?}");
}

async fn periodic_jobs_fire_once_per_period_across_processes() {
    // Three processes start together on one database; each checks the
    // hourly sweep at start-up. Exactly one may fire it this hour.
    let app = spawn_app_with(Backend::Postgres, fast_retries()).await;
    let (_second, _) = app.sibling(&[]).await;
    let (_third, _) = app.sibling(&[]).await;
    let admin = app.admin().await;
    let sweeps = "{ tasks(filter: { kind: \"system.sweep\" }) { totalCount nodes { status } } }";
    let mut last = Value::Null;
    for _ in 0..100 {
        last = app
            .gql(sweeps, json!({}))
            .bearer(&admin.access)
            .send()
            .await
            .data()["tasks"]
            .clone();
        if last["nodes"][0]["status"] == "SUCCEEDED" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(last["totalCount"], 1, "{last}");
    assert_eq!(last["nodes"][0]["status"], "SUCCEEDED");
}

async fn sigterm_releases_a_running_task_for_another_worker() {
    let mut app = spawn_app_with(Backend::Postgres, fast_retries()).await;
    let admin = app.admin().await;
    let id = probe(&app, &admin.access, json!({ "stages": 3, "sleepMs": 600 })).await;
    wait_status(&app, &admin.access, &id, "RUNNING").await;
    // A graceful stop hands the task back at its next stage boundary
    // without spending an attempt; no lease has to expire.
    assert!(app.terminate().await.success());
    let db = app.database().await;
    let row = db
        .query_one_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "SELECT status, attempt_count, lease_owner FROM tasks WHERE id = $1",
            vec![uuid::Uuid::parse_str(&id).unwrap().into()],
        ))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.try_get::<String>("", "status").unwrap(), "QUEUED");
    assert_eq!(row.try_get::<i32>("", "attempt_count").unwrap(), 0);
    assert_eq!(
        row.try_get::<Option<String>>("", "lease_owner").unwrap(),
        None
    );

    app.restart(&[]).await;
    let admin = app.admin().await;
    let done = wait_terminal(&app, &admin.access, &id).await;
    assert_eq!(done["status"], "SUCCEEDED");
    assert_eq!(done["attemptCount"], 1);
    assert_eq!(effects(&app, &id).await.len(), 3);
}

crate::per_backend!(
    [postgres => Postgres, postgres_redis => PostgresRedis];
    an_event_committed_late_is_published_before_its_aggregates_next,
);

crate::per_backend!(
    [postgres => Postgres];
    the_task_event_type_holds_the_snapshot_columns,
    task_event_snapshots_migrate_down_to_one_event_rows,
);

/// Undoing `m20261201_000010_task_event_snapshots` turns each stored
/// snapshot back into the one-event row an earlier version reads, with
/// the payload the publisher would have rendered; redoing it keeps them.
async fn task_event_snapshots_migrate_down_to_one_event_rows(backend: Backend) {
    use migration::MigratorTrait;

    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    migration::Migrator::up(&db, None).await.unwrap();
    let new = trellis::jobs::model::NewTask::new(
        "system.probe",
        trellis::jobs::model::Queue::Short,
        json!({ "stages": 1 }),
    );
    let ids = [uuid::Uuid::now_v7(), uuid::Uuid::now_v7()];
    let txn = db.begin().await.unwrap();
    trellis::jobs::store::insert_tasks(&txn, &[(ids[0], &new), (ids[1], &new)], 3)
        .await
        .unwrap();
    txn.commit().await.unwrap();
    let rendered = trellis::jobs::outbox::stored_events(&db, "task.updated")
        .await
        .unwrap();
    assert_eq!(rendered.len(), 2);

    // Down to just before the snapshot migration, whatever came after it.
    let after = {
        use migration::MigratorTrait;
        let names: Vec<String> = migration::Migrator::migrations()
            .iter()
            .map(|m| m.name().to_owned())
            .collect();
        let at = names
            .iter()
            .position(|name| name == "m20261201_000010_task_event_snapshots")
            .unwrap();
        (names.len() - at) as u32
    };
    migration::Migrator::down(&db, Some(after)).await.unwrap();
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT aggregate_id, CAST(payload AS TEXT) AS payload FROM outbox_events ORDER BY id",
        ))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2, "one row per event");
    for (row, event) in rows.iter().zip(&rendered) {
        assert_eq!(
            row.try_get::<String>("", "aggregate_id").unwrap(),
            event.aggregate_id
        );
        let payload: Value =
            serde_json::from_str(&row.try_get::<String>("", "payload").unwrap()).unwrap();
        assert_eq!(
            same_instants(payload),
            same_instants(event.payload::<Value>().unwrap())
        );
    }

    migration::Migrator::up(&db, None).await.unwrap();
    let again = trellis::jobs::outbox::stored_events(&db, "task.updated")
        .await
        .unwrap();
    assert_eq!(
        again
            .iter()
            .map(|e| e.payload::<Value>())
            .collect::<Vec<_>>(),
        rendered
            .iter()
            .map(|e| e.payload::<Value>())
            .collect::<Vec<_>>()
    );
    db.close().await.unwrap();
}

/// The SQL type a task write snapshots its rows into has the attributes,
/// in order, that the write fills and the publisher reads back.
async fn the_task_event_type_holds_the_snapshot_columns(backend: Backend) {
    let app = spawn_app_with(backend, AppOptions::default()).await;
    let db = app.database().await;
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            "SELECT a.attname::text AS name FROM pg_attribute a JOIN pg_type t ON t.typrelid = a.attrelid \
             WHERE t.typname = 'task_event' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
        ))
        .await
        .unwrap();
    let names: Vec<String> = rows
        .iter()
        .map(|row| row.try_get::<String>("", "name").unwrap())
        .collect();
    assert_eq!(names, trellis::jobs::model::TASK_EVENT_COLUMNS);
}

/// Tasks written by one statement (here three inserted at once, as a bulk
/// enqueue does) have their events stored together — on PostgreSQL as one
/// outbox entry of row snapshots — and delivered one by one: each with its
/// own id, its task as aggregate, and that task as payload.
async fn the_events_of_one_task_write_are_delivered_one_by_one(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let mut socket = subscribe(
        &app,
        &admin.access,
        "e",
        "subscription { events(topics: [\"task.updated\"]) { id aggregateId payload } }",
        json!({}),
    )
    .await;
    // The subscription is live once an event sent after it arrives.
    let ready = probe(&app, &admin.access, json!({ "effects": false })).await;
    loop {
        let message = next(&mut socket).await.unwrap();
        if message["payload"]["data"]["events"]["aggregateId"] == ready.as_str() {
            break;
        }
    }

    let db = app.database().await;
    let new = trellis::jobs::model::NewTask::new(
        "system.probe",
        trellis::jobs::model::Queue::Short,
        json!({ "stages": 1, "sleepMs": 0, "failAttempts": 0, "effects": false }),
    );
    let ids: Vec<uuid::Uuid> = (0..3).map(|_| uuid::Uuid::now_v7()).collect();
    let txn = db.begin().await.unwrap();
    let rows: Vec<(uuid::Uuid, &trellis::jobs::model::NewTask)> =
        ids.iter().map(|id| (*id, &new)).collect();
    let inserted = trellis::jobs::store::insert_tasks(&txn, &rows, 3)
        .await
        .unwrap();
    txn.commit().await.unwrap();
    assert_eq!(inserted.iter().map(|t| t.id).collect::<Vec<_>>(), ids);

    if db.get_database_backend() == sea_orm::DbBackend::Postgres {
        // The entry that holds the first one's QUEUED snapshot (workers
        // may have claimed some already: later entries).
        let entry = db
            .query_one_raw(Statement::from_sql_and_values(
                sea_orm::DbBackend::Postgres,
                "SELECT cardinality(o.tasks) AS n FROM outbox_events o WHERE EXISTS \
                 (SELECT 1 FROM unnest(o.tasks) s WHERE s.id = $1 AND s.status = 'QUEUED') \
                 ORDER BY o.id LIMIT 1",
                vec![ids[0].into()],
            ))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            entry.try_get::<i32>("", "n").unwrap(),
            3,
            "one entry for the three"
        );
    }

    // Their QUEUED events, in order, each once (later ones may follow as
    // the workers run them).
    let mut queued = Vec::new();
    while queued.len() < 3 {
        let event = next(&mut socket).await.unwrap()["payload"]["data"]["events"].clone();
        if event["payload"]["status"] == "QUEUED" {
            queued.push(event);
        }
    }
    let aggregates: Vec<String> = queued
        .iter()
        .map(|event| event["aggregateId"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        aggregates,
        ids.iter().map(|id| id.to_string()).collect::<Vec<_>>()
    );
    for event in &queued {
        assert_eq!(event["payload"]["id"], event["aggregateId"]);
        assert_eq!(event["payload"]["kind"], "system.probe");
    }
    let event_ids: Vec<i64> = queued
        .iter()
        .map(|event| event["id"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        event_ids.windows(2).all(|pair| pair[0] < pair[1]),
        "distinct ids in order: {event_ids:?}"
    );
    // And all three run to the end.
    for id in &ids {
        assert_eq!(
            wait_terminal(&app, &admin.access, &id.to_string()).await["status"],
            "SUCCEEDED"
        );
    }
}

/// The publisher reads the outbox by id. An event whose transaction was
/// still open when later ids were published (a gap) is published once it
/// commits, and before the next event of its aggregate. (SQLite has one
/// writer at a time, so ids commit in order there.)
async fn an_event_committed_late_is_published_before_its_aggregates_next(backend: Backend) {
    let app = spawn_app_with(backend, AppOptions::default()).await;
    let admin = app.admin().await;
    let mut socket = subscribe(
        &app,
        &admin.access,
        "e",
        "subscription { events(topics: [\"probe.order\"]) { id aggregateId payload } }",
        json!({}),
    )
    .await;
    let db = app.database().await;
    let insert = |label: &str, aggregate: &str| {
        Statement::from_sql_and_values(
            db.get_database_backend(),
            "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at) \
             VALUES ('probe.order', $1, NULL, $2, $3)",
            vec![
                aggregate.into(),
                json!({ "label": label }).into(),
                Utc::now().into(),
            ],
        )
    };
    let received = |message: Value| -> (i64, String) {
        let event = &message["payload"]["data"]["events"];
        (
            event["id"].as_str().unwrap().parse().unwrap(),
            event["payload"]["label"].as_str().unwrap().to_owned(),
        )
    };
    // The subscription is live once an event sent after it arrives.
    db.execute_raw(insert("ready", "x")).await.unwrap();
    assert_eq!(received(next(&mut socket).await.unwrap()).1, "ready");

    // `late` takes its id, then waits while `other` is published after it.
    let open_txn = db.begin().await.unwrap();
    open_txn.execute_raw(insert("late", "a")).await.unwrap();
    db.execute_raw(insert("other", "b")).await.unwrap();
    let (other_id, label) = received(next(&mut socket).await.unwrap());
    assert_eq!(label, "other");
    open_txn.commit().await.unwrap();
    // The aggregate's next event follows the late one.
    db.execute_raw(insert("after", "a")).await.unwrap();
    let (late_id, first) = received(next(&mut socket).await.unwrap());
    let (_, second) = received(next(&mut socket).await.unwrap());
    assert_eq!((first.as_str(), second.as_str()), ("late", "after"));
    assert!(late_id < other_id, "the late event's id came before");
}

crate::on_both_backends!(
    events_unpublished_before_publication_became_a_position_are_published,
    tasks_are_listed_newest_first_page_by_page,
);

/// `tasks` lists the newest first and pages with its cursors: ids are
/// UUIDv7, so id order is creation order.
async fn tasks_are_listed_newest_first_page_by_page(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let mut created = Vec::new();
    for _ in 0..5 {
        created.push(probe(&app, &admin.access, json!({ "effects": false })).await);
    }
    let page = "query($after: String) { tasks(filter: { kind: \"system.probe\" }, first: 2, after: $after) \
                { totalCount pageInfo { hasNextPage endCursor } nodes { id } } }";
    let mut listed = Vec::new();
    let mut after = Value::Null;
    loop {
        let response = app
            .gql(page, json!({ "after": after }))
            .bearer(&admin.access)
            .send()
            .await;
        let tasks = &response.data()["tasks"];
        assert_eq!(tasks["totalCount"], 5);
        let nodes = tasks["nodes"].as_array().unwrap();
        assert!(nodes.len() <= 2);
        listed.extend(
            nodes
                .iter()
                .map(|node| node["id"].as_str().unwrap().to_owned()),
        );
        if tasks["pageInfo"]["hasNextPage"] != true {
            break;
        }
        after = tasks["pageInfo"]["endCursor"].clone();
    }
    created.reverse();
    assert_eq!(listed, created);
}

/// Migrating a database whose outbox still marked events one by one loses
/// none: events published before stay published, and one not yet
/// published is behind the new position, so the publisher sends it.
async fn events_unpublished_before_publication_became_a_position_are_published(backend: Backend) {
    use migration::MigratorTrait;

    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    // Up to the migration before `m20261201_000008_outbox_position`.
    migration::Migrator::up(&db, Some(7)).await.unwrap();
    let now = Utc::now();
    for (label, published) in [("old", Some(now)), ("pending", None)] {
        db.execute_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at, \
             published_at) VALUES ('probe.order', 'a', NULL, $1, $2, $3)",
            vec![
                json!({ "label": label }).into(),
                now.into(),
                published.into(),
            ],
        ))
        .await
        .unwrap();
    }
    assert_eq!(
        trellis::jobs::outbox::unpublished(&db).await.ok(),
        None,
        "no position yet"
    );

    migration::Migrator::up(&db, None).await.unwrap();
    assert_eq!(trellis::jobs::outbox::unpublished(&db).await.unwrap(), 1);
    // A new event after the migration is pending too.
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "INSERT INTO outbox_events (topic, aggregate_id, owner_id, payload, created_at) \
         VALUES ('probe.order', 'a', NULL, $1, $2)",
        vec![json!({ "label": "after" }).into(), now.into()],
    ))
    .await
    .unwrap();
    assert_eq!(trellis::jobs::outbox::unpublished(&db).await.unwrap(), 2);
    db.close().await.unwrap();
}
