//! What a resource task promises its client (issue 18): nothing accepted
//! is dropped silently — a request whose resource is gone by the time it
//! applies ends `FAILED` (`NOT_FOUND`) and changes nothing — and a task
//! ends only once its change is in the tree, with `generation` and the
//! scope's `reconciledGeneration` to wait on.
//!
//! The races are made deterministic by accepting requests while no worker
//! runs (an API-only server), then starting one: every request is then
//! queued before any applies, which is what a burst does by chance.

use serde_json::{Value, json};
use tokio::process::Child;

use crate::{
    helpers::{AppOptions, Backend, TestApp, spawn_app_with},
    jobs::wait_terminal,
};

crate::on_every_runner!(
    a_request_whose_resource_is_gone_fails_and_changes_nothing,
    a_finished_task_is_visible_in_the_tree,
);

/// An API-only server: requests are accepted, nothing runs until a worker starts.
async fn api_only(backend: Backend) -> TestApp {
    spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_ROLE", "api")
            .env("TRELLIS_TASK_POLL_MS", "50"),
    )
    .await
}

async fn worker(app: &TestApp) -> Child {
    app.sibling(&[("TRELLIS_ROLE", "worker")]).await.0
}

/// POSTs a resource request; its task id.
async fn post(app: &TestApp, token: &str, path: &str, body: Value) -> String {
    let response = app
        .client
        .post(app.url(path))
        .bearer_auth(token)
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    assert_eq!(status, 202, "{path}: {body}");
    body["task_id"].as_str().unwrap().to_owned()
}

fn instance(name: &str, health: i64) -> Value {
    json!({
        "region": "eu", "zone": "a", "cluster": "k1", "namespace": "shop",
        "service": "cart", "instance": name, "health": health, "cpu": 1.0,
    })
}

/// Ended with its change applied: by its own pass (`SUCCEEDED`) or by
/// another task's that included it (`SUPERSEDED`).
fn assert_done(task: &Value) {
    assert!(
        ["SUCCEEDED", "SUPERSEDED"].contains(&task["status"].as_str().unwrap_or_default()),
        "{task}"
    );
}

async fn attributes(app: &TestApp, token: &str, id: &str) -> Value {
    app.gql(
        "query($id: ID!) { resource(id: $id) { attributes } }",
        json!({ "id": id }),
    )
    .bearer(token)
    .send()
    .await
    .data()["resource"]["attributes"]
        .clone()
}

async fn a_request_whose_resource_is_gone_fails_and_changes_nothing(backend: Backend) {
    let app = api_only(backend).await;
    let token = app.member("ops").await.access;
    let mut running = worker(&app).await;
    let mut created = Vec::new();
    for name in ["r", "a", "b"] {
        let task = post(
            &app,
            &token,
            "/resources",
            json!({ "attributes": instance(name, 0) }),
        )
        .await;
        assert_done(&wait_terminal(&app, &token, &task).await);
        created.push(task);
    }
    let [r, a, b] = [&created[0], &created[1], &created[2]];
    running.kill().await.unwrap();

    // A delete, and at once an update of the same resource; a delete of A,
    // and at once an Update C replacing B and A. All accepted: nothing has
    // applied yet.
    let delete_r = post(&app, &token, &format!("/resources/{r}/delete"), json!({})).await;
    let update_r = post(
        &app,
        &token,
        &format!("/resources/{r}/update-a"),
        json!({ "patch": { "health": 3 } }),
    )
    .await;
    let delete_a = post(&app, &token, &format!("/resources/{a}/delete"), json!({})).await;
    let replace = post(
        &app,
        &token,
        &format!("/resources/{b}/update-c"),
        json!({ "attributes": instance("b", 2), "others": [{ "id": a, "attributes": instance("a", 2) }] }),
    )
    .await;

    let _running = worker(&app).await;
    let mut ended = Vec::new();
    for task in [&delete_r, &update_r, &delete_a, &replace] {
        ended.push(wait_terminal(&app, &token, task).await);
    }
    assert_done(&ended[0]);
    assert_done(&ended[2]);
    for (task, gone) in [(&ended[1], r), (&ended[3], a)] {
        assert_eq!(task["status"], "FAILED", "{task}");
        let error = task["error"].as_str().unwrap();
        assert!(
            error.starts_with("NOT_FOUND") && error.contains(gone.as_str()),
            "{error}"
        );
        assert!(task["result"].is_null(), "{task}");
    }
    // Nothing of the failed requests applied: R and A are gone, B is as it was.
    assert!(attributes(&app, &token, r).await.is_null());
    assert!(attributes(&app, &token, a).await.is_null());
    assert_eq!(attributes(&app, &token, b).await, instance("b", 0));
    // The passes counted exactly what they applied: four requests, two of
    // them not applicable.
    let (applied, skipped) = ended
        .iter()
        .filter_map(|task| task["result"]["stages"]["mutation"].as_object())
        .fold((0, 0), |(applied, skipped), report| {
            (
                applied + report["applied"].as_u64().unwrap(),
                skipped + report["skipped"].as_u64().unwrap(),
            )
        });
    assert!(applied <= 2 && skipped <= 2, "{ended:?}");
}

const TASK: &str = "query($id: ID!) { task(id: $id) { status generation reconciledGeneration } }";
const LEAF: &str = "query($id: ID!) { resource(id: $id) { nodes { status } } }";

async fn a_finished_task_is_visible_in_the_tree(backend: Backend) {
    let app = api_only(backend).await;
    let token = app.member("ops").await.access;
    let mut running = worker(&app).await;
    let first = post(
        &app,
        &token,
        "/resources",
        json!({ "attributes": instance("one", 0) }),
    )
    .await;
    let second = post(
        &app,
        &token,
        "/resources",
        json!({ "attributes": instance("two", 0) }),
    )
    .await;
    for task in [&first, &second] {
        assert_done(&wait_terminal(&app, &token, task).await);
    }
    running.kill().await.unwrap();

    // R1's change, then twenty to another resource, all waiting.
    let marker = post(
        &app,
        &token,
        &format!("/resources/{first}/update-a"),
        json!({ "patch": { "health": 3 } }),
    )
    .await;
    let mut others = Vec::new();
    for health in 0..20 {
        others.push(
            post(
                &app,
                &token,
                &format!("/resources/{second}/update-a"),
                json!({ "patch": { "health": health % 4 } }),
            )
            .await,
        );
    }

    let _running = worker(&app).await;
    assert_done(&wait_terminal(&app, &token, &marker).await);
    // Ended means visible: read right after, R1's change is in the tree.
    let leaf = app
        .gql(LEAF, json!({ "id": first }))
        .bearer(&token)
        .send()
        .await;
    assert_eq!(
        leaf.data()["resource"]["nodes"][0]["status"],
        3,
        "{:?}",
        leaf.data()
    );
    let task = app
        .gql(TASK, json!({ "id": marker }))
        .bearer(&token)
        .send()
        .await;
    let task = &task.data()["task"];
    assert!(
        task["generation"].as_i64().unwrap() <= task["reconciledGeneration"].as_i64().unwrap(),
        "{task}"
    );
    // Every other request ends too, and the last one's change is what shows.
    for task in &others {
        assert_done(&wait_terminal(&app, &token, task).await);
    }
    let leaf = app
        .gql(LEAF, json!({ "id": second }))
        .bearer(&token)
        .send()
        .await;
    assert_eq!(
        leaf.data()["resource"]["nodes"][0]["status"],
        19 % 4,
        "{:?}",
        leaf.data()
    );
}
