//! A task's life as a client sees it: every stage, the `taskUpdated`
//! stream, retries with back-off, cancelling, listing, per-user
//! visibility, one task for identical requests, and superseding.

use serde_json::{Value, json};

use crate::helpers::{AppOptions, Backend, TestApp, spawn_app_with};

use super::{
    PROBE, TASK, effects, fast_retries, probe, task, wait_status, wait_terminal, watch_task,
};

crate::on_every_runner!(
    probe_task_runs_every_stage_and_is_readable_everywhere,
    task_updated_streams_each_change_until_terminal,
    failing_attempts_are_retried_with_backoff_then_fail,
    queued_and_running_tasks_can_be_cancelled,
    concurrent_identical_requests_create_one_task,
    newer_generation_supersedes_without_writing,
    members_see_only_their_own_tasks,
);

crate::on_both_backends!(tasks_are_listed_newest_first_page_by_page,);

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
    // Not an id at all: the caller's mistake, answered as GraphQL's
    // `task(id:)` answers it.
    let not_an_id = app
        .client
        .get(app.url("/tasks/not-a-uuid"))
        .bearer_auth(&admin.access)
        .send()
        .await
        .unwrap();
    assert_eq!(not_an_id.status(), 400);
    let body: Value = not_an_id.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{body}"
    );
    let graphql = app
        .gql("{ task(id: \"not-a-uuid\") { id } }", json!({}))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        graphql.error_code(),
        Some("BAD_USER_INPUT"),
        "{:?}",
        graphql.body
    );

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
