//! The request contract: `202` and replays by `Idempotency-Key` over
//! HTTP, retries that get their task whatever happened to the target, and
//! bad requests that change nothing.

use serde_json::{Value, json};

use crate::{
    helpers::{Backend, spawn_app},
    jobs::wait_terminal,
};

use super::{Client, instance};

crate::on_both_backends!(
    http_contract_answers_202_and_replays_by_key,
    a_retry_gets_its_task_whatever_happened_to_the_target,
    bad_requests_change_nothing,
);

async fn http_contract_answers_202_and_replays_by_key(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    let post = |path: &str, key: Option<&str>, body: Value| {
        let mut request = app
            .client
            .post(app.url(path))
            .bearer_auth(&ops.token)
            .json(&body);
        if let Some(key) = key {
            request = request.header("Idempotency-Key", key);
        }
        request.send()
    };

    let body = json!({ "attributes": instance("cart", "cart-1", 2, 0.5) });
    let response = post("/resources", Some("create-1"), body.clone())
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let first: Value = response.json().await.unwrap();
    let task_id = first["task_id"].as_str().unwrap().to_owned();

    // The same key and payload: the same task, nothing new.
    let again: Value = post("/resources", Some("create-1"), body)
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(again["task_id"], task_id.as_str());
    // The same key, another payload: 422.
    let reused = post(
        "/resources",
        Some("create-1"),
        json!({ "attributes": instance("cart", "cart-9", 0, 0.1) }),
    )
    .await
    .unwrap();
    assert_eq!(reused.status(), 422);
    let error: Value = reused.json().await.unwrap();
    assert_eq!(
        error["errors"][0]["extensions"]["code"],
        "IDEMPOTENCY_KEY_REUSED"
    );

    let done = wait_terminal(&app, &ops.token, &task_id).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    let polled: Value = app
        .client
        .get(app.url(&format!("/tasks/{task_id}")))
        .bearer_auth(&ops.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(polled["status"], "SUCCEEDED");
    assert_eq!(polled["stagesDone"], 7);
    assert_eq!(polled["result"]["resourceIds"], json!([task_id]));
    assert!(
        polled["result"]["stages"]["topology_sync"]["newNodes"]
            .as_u64()
            .unwrap()
            >= 6
    );

    // The resource's id is its create task's id.
    for (path, body) in [
        (
            format!("/resources/{task_id}/update-a"),
            json!({ "patch": { "health": 0 } }),
        ),
        (
            format!("/resources/{task_id}/update-b"),
            json!({ "patch": { "instance": "cart-2" } }),
        ),
        (
            format!("/resources/{task_id}/update-c"),
            json!({ "attributes": instance("cart", "cart-3", 1, 0.5) }),
        ),
        (format!("/resources/{task_id}/delete"), json!({})),
    ] {
        let response = post(&path, Some(&path), body).await.unwrap();
        assert_eq!(response.status(), 202, "{path}");
        let accepted: Value = response.json().await.unwrap();
        let task = wait_terminal(&app, &ops.token, accepted["task_id"].as_str().unwrap()).await;
        assert_eq!(task["status"], "SUCCEEDED", "{path}: {task}");
    }
    let tree = ops.tree().await;
    assert!(
        tree.is_empty(),
        "the last resource is gone, and its nodes: {tree:#?}"
    );

    // Missing key, bad body, unknown resource, no credentials.
    let missing = post("/resources", None, json!({ "attributes": {} }))
        .await
        .unwrap();
    assert_eq!(missing.status(), 400);
    let bad = post("/resources", Some("bad"), json!({ "attributes": [1] }))
        .await
        .unwrap();
    assert_eq!(bad.status(), 400);
    let unknown = post(
        &format!("/resources/{}/update-a", uuid::Uuid::new_v4()),
        Some("unknown"),
        json!({ "patch": { "health": 1 } }),
    )
    .await
    .unwrap();
    assert_eq!(unknown.status(), 404);
    // Not an id at all: the same answer over HTTP and GraphQL.
    let malformed = post(
        "/resources/not-a-uuid/update-a",
        Some("malformed"),
        json!({ "patch": { "health": 1 } }),
    )
    .await
    .unwrap();
    assert_eq!(malformed.status(), 400);
    let body: Value = malformed.json().await.unwrap();
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{body}"
    );
    assert_eq!(body["errors"][0]["extensions"]["field"], "id", "{body}");
    let over_graphql = app
        .gql(
            "mutation { updateResourceA(id: \"not-a-uuid\", patch: {health: 1}, idempotencyKey: \"m\") { id } }",
            json!({}),
        )
        .bearer(&ops.token)
        .send()
        .await;
    assert_eq!(
        over_graphql.error_code(),
        Some("BAD_USER_INPUT"),
        "{:?}",
        over_graphql.body
    );
    let anonymous = app
        .client
        .post(app.url("/resources"))
        .header("Idempotency-Key", "anon")
        .json(&json!({ "attributes": {} }))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
}

async fn bad_requests_change_nothing(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    let id = ops.create(instance("cart", "cart-1", 0, 0.5)).await;
    let before = ops.tree().await;

    let attempts = [
        (
            "mutation($id: ID!) { updateResourceA(id: $id, patch: { cluster: \"k2\" }, idempotencyKey: \"a\") { id } }",
            "BAD_USER_INPUT",
        ),
        (
            "mutation { createResource(attributes: [1, 2], idempotencyKey: \"b\") { id } }",
            "BAD_USER_INPUT",
        ),
        (
            "mutation($id: ID!) { updateResourceB(id: $id, patch: {}, idempotencyKey: \"c\") { id } }",
            "BAD_USER_INPUT",
        ),
        (
            "mutation { updateResourceA(id: \"4b8f6a52-0f55-4b8e-9a4e-7d1c0f4e2a10\", patch: { health: 1 }, idempotencyKey: \"d\") { id } }",
            "NOT_FOUND",
        ),
        (
            "mutation($id: ID!) { updateResourceC(id: $id, attributes: {}, others: [{ id: $id, attributes: {} }], idempotencyKey: \"e\") { id } }",
            "BAD_USER_INPUT",
        ),
    ];
    for (mutation, code) in attempts {
        let response = app
            .gql(mutation, json!({ "id": id }))
            .bearer(&ops.token)
            .send()
            .await;
        assert_eq!(
            response.error_code(),
            Some(code),
            "{mutation}: {}",
            response.body
        );
    }
    let anonymous = app.gql("{ nodeTree { id } }", json!({})).send().await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
    let anonymous = app
        .gql(
            "mutation { createResource(attributes: {}, idempotencyKey: \"x\") { id } }",
            json!({}),
        )
        .send()
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));

    let tasks = ops
        .data(
            r#"{ tasks(filter: { kind: "resources.update_a" }) { edges { node { id } } } }"#,
            json!({}),
        )
        .await;
    assert_eq!(tasks["tasks"]["edges"], json!([]), "no task was created");
    assert_eq!(ops.tree().await, before);
}

/// Issue 18 item 2: the key is looked up before the target is checked, so a
/// retry after the delete succeeded (or after an updated resource was
/// deleted) gets its task, over HTTP and GraphQL, instead of 404.
async fn a_retry_gets_its_task_whatever_happened_to_the_target(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    let post = |path: String, key: &'static str, body: Value| {
        let request = app
            .client
            .post(app.url(&path))
            .bearer_auth(&ops.token)
            .header("Idempotency-Key", key)
            .json(&body);
        async move {
            let response = request.send().await.unwrap();
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap();
            (
                status,
                body["task_id"].as_str().unwrap_or_default().to_owned(),
                body,
            )
        }
    };

    // A delete that succeeded, retried with its key.
    let gone = ops.create(instance("cart", "cart-1", 0, 1.0)).await;
    let (status, deleted, _) = post(format!("/resources/{gone}/delete"), "del-1", json!({})).await;
    assert_eq!(status, 202);
    assert_eq!(
        wait_terminal(&app, &ops.token, &deleted).await["status"],
        "SUCCEEDED"
    );
    let (status, again, body) = post(format!("/resources/{gone}/delete"), "del-1", json!({})).await;
    assert_eq!((status, again.as_str()), (202, deleted.as_str()), "{body}");

    // An update whose resource was deleted afterwards, retried with its key.
    let later = ops.create(instance("cart", "cart-2", 0, 1.0)).await;
    let patch = json!({ "patch": { "health": 3 } });
    let (status, updated, _) = post(
        format!("/resources/{later}/update-a"),
        "upd-1",
        patch.clone(),
    )
    .await;
    assert_eq!(status, 202);
    wait_terminal(&app, &ops.token, &updated).await;
    assert_eq!(ops.delete(&later).await["status"], "SUCCEEDED");
    let (status, again, body) = post(format!("/resources/{later}/update-a"), "upd-1", patch).await;
    assert_eq!((status, again.as_str()), (202, updated.as_str()), "{body}");
    // A new key for the gone resource is still refused.
    let (status, _, body) = post(
        format!("/resources/{later}/update-a"),
        "upd-2",
        json!({ "patch": { "health": 1 } }),
    )
    .await;
    assert_eq!(status, 404, "{body}");

    // The same over GraphQL.
    let delete = "mutation($id: ID!) { deleteResource(id: $id, idempotencyKey: \"del-g\") { id } }";
    let third = ops.create(instance("web", "web-1", 0, 1.0)).await;
    let first = ops.run(delete, json!({ "id": third })).await;
    assert_eq!(first["status"], "SUCCEEDED");
    let retried = ops.data(delete, json!({ "id": third })).await;
    assert_eq!(retried["deleteResource"]["id"], first["id"]);
}
