//! Resources & Nodes end to end: the operations through GraphQL and the
//! HTTP contract, the tree they build (checked against a from-scratch
//! computation over the final resources), orphaned subtrees going away,
//! indirect impact through class dependencies, status patches, the
//! `nodeStatusChanged` subscription, and the node configuration.

use std::{
    collections::{BTreeMap, BTreeSet},
    time::Duration,
};

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::{
    helpers::{
        AppOptions, Backend, TestApp, TestDatabase, spawn_app, spawn_app_with, trellis_command,
    },
    jobs::wait_terminal,
    on_both_backends,
    websocket::{next, subscribe},
};

on_both_backends!(
    resources_build_the_tree_and_orphans_are_pruned,
    dependent_classes_and_patches_follow_their_rules,
    a_service_is_at_least_degraded_while_a_shared_database_is_not_healthy,
    http_contract_answers_202_and_replays_by_key,
    a_retry_gets_its_task_whatever_happened_to_the_target,
    bad_requests_change_nothing,
    concurrent_requests_end_in_the_from_scratch_tree,
    dashboard_sees_a_leaf_change_climb_to_the_root,
    owed_work_is_done_by_the_periodic_reconciliation,
    a_changed_node_configuration_reconciles_the_whole_tree,
    tree_fields_of_many_nodes_agree_with_the_tree,
    a_panicking_engine_fails_its_task_once_and_records_it,
);

crate::on_every_runner!(killed_workers_leave_the_from_scratch_tree);

const TREE: &str = "query($root: ID, $depth: Int!) { nodeTree(rootId: $root, depth: $depth) { \
    id class positionToken parentId depth status aggregatedStatus properties } }";

/// A signed-in member and the calls the tests make.
struct Client<'a> {
    app: &'a TestApp,
    token: String,
}

impl<'a> Client<'a> {
    async fn new(app: &'a TestApp) -> Self {
        Client {
            app,
            token: app.member("ops").await.access,
        }
    }

    async fn data(&self, query: &str, variables: Value) -> Value {
        self.app
            .gql(query, variables)
            .bearer(&self.token)
            .send()
            .await
            .data()
            .clone()
    }

    /// Runs a mutation returning a Task and waits for it to end.
    async fn run(&self, mutation: &str, variables: Value) -> Value {
        let data = self.data(mutation, variables).await;
        let task = data.as_object().unwrap().values().next().unwrap().clone();
        let id = task["id"].as_str().unwrap().to_owned();
        wait_terminal(self.app, &self.token, &id).await
    }

    async fn create(&self, attributes: Value) -> String {
        let task = self
            .run(
                "mutation($a: JSON!, $k: String!) { createResource(attributes: $a, idempotencyKey: $k) { id } }",
                json!({ "a": attributes, "k": uuid::Uuid::new_v4().to_string() }),
            )
            .await;
        assert_ne!(task["status"], "FAILED", "{task}");
        task["id"].as_str().unwrap().to_owned()
    }

    async fn update(&self, which: &str, id: &str, patch: Value) -> Value {
        let mutation = format!(
            "mutation($id: ID!, $p: JSON!, $k: String!) {{ updateResource{which}(id: $id, patch: $p, idempotencyKey: $k) {{ id }} }}"
        );
        let task = self
            .run(
                &mutation,
                json!({ "id": id, "p": patch, "k": uuid::Uuid::new_v4().to_string() }),
            )
            .await;
        assert_ne!(task["status"], "FAILED", "{task}");
        task
    }

    async fn delete(&self, id: &str) -> Value {
        self.run(
            "mutation($id: ID!, $k: String!) { deleteResource(id: $id, idempotencyKey: $k) { id } }",
            json!({ "id": id, "k": uuid::Uuid::new_v4().to_string() }),
        )
        .await
    }

    /// The whole tree, keyed by the chain of position tokens from the root.
    async fn tree(&self) -> BTreeMap<Vec<String>, Value> {
        let nodes = self.data(TREE, json!({ "depth": 10 })).await["nodeTree"].clone();
        let nodes = nodes.as_array().unwrap();
        let by_id: BTreeMap<&str, &Value> = nodes
            .iter()
            .map(|node| (node["id"].as_str().unwrap(), node))
            .collect();
        let mut tree = BTreeMap::new();
        for node in nodes {
            let mut chain = vec![node["positionToken"].as_str().unwrap().to_owned()];
            let mut parent = node["parentId"].as_str();
            while let Some(id) = parent {
                let up = by_id[id];
                chain.insert(0, up["positionToken"].as_str().unwrap().to_owned());
                parent = up["parentId"].as_str();
            }
            tree.insert(chain, node.clone());
        }
        tree
    }
}

fn instance(service: &str, name: &str, health: i64, cpu: f64) -> Value {
    json!({
        "region": "eu", "zone": "a", "cluster": "k1", "namespace": "shop",
        "service": service, "instance": name, "health": health, "cpu": cpu,
    })
}

fn chain(tokens: &[&str]) -> Vec<String> {
    tokens.iter().map(|token| (*token).to_owned()).collect()
}

async fn resources_build_the_tree_and_orphans_are_pruned(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    let a = ops.create(instance("cart", "cart-1", 0, 0.5)).await;
    let b = ops.create(instance("cart", "cart-2", 1, 0.25)).await;

    let tree = ops.tree().await;
    assert_eq!(
        tree.len(),
        7,
        "region, zone, cluster, namespace, service, 2 instances: {tree:#?}"
    );
    let root = &tree[&chain(&["eu"])];
    assert_eq!(root["class"], "region");
    assert_eq!(root["aggregatedStatus"], 1);
    assert_eq!(root["properties"]["instances"], 2);
    let service = &tree[&chain(&["eu", "a", "k1", "shop", "cart"])];
    assert_eq!(service["properties"]["cpu"], 0.75);
    assert_eq!(service["properties"]["replicas"], 2);
    assert_eq!(service["status"], 1);
    assert_eq!(
        tree[&chain(&["eu", "a", "k1", "shop", "cart", "cart-1"])]["status"],
        0
    );

    let resource = ops
        .data(
            "query($id: ID!) { resource(id: $id) { version attributes nodes { class } } }",
            json!({ "id": a }),
        )
        .await;
    let classes: Vec<&str> = resource["resource"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| node["class"].as_str().unwrap())
        .collect();
    assert_eq!(
        classes,
        [
            "region",
            "zone",
            "cluster",
            "namespace",
            "service",
            "instance"
        ]
    );

    // Update A: a status change climbs to the root.
    ops.update("A", &b, json!({ "health": 3 })).await;
    let tree = ops.tree().await;
    assert_eq!(tree[&chain(&["eu"])]["aggregatedStatus"], 3);
    assert_eq!(
        tree[&chain(&["eu", "a", "k1", "shop", "cart", "cart-2"])]["status"],
        3
    );

    // Update B: the resource moves; its old instance node is an orphan and goes.
    ops.update(
        "B",
        &b,
        json!({ "service": "checkout", "instance": "co-1", "health": 0 }),
    )
    .await;
    let tree = ops.tree().await;
    assert!(!tree.contains_key(&chain(&["eu", "a", "k1", "shop", "cart", "cart-2"])));
    assert!(tree.contains_key(&chain(&["eu", "a", "k1", "shop", "checkout", "co-1"])));
    assert_eq!(
        tree[&chain(&["eu", "a", "k1", "shop", "cart"])]["properties"]["replicas"],
        1
    );
    assert_eq!(
        tree[&chain(&["eu"])]["aggregatedStatus"],
        0,
        "the failing instance left"
    );

    // Delete: the whole `cart` subtree loses its last resource.
    let deleted = ops.delete(&a).await;
    assert_ne!(deleted["status"], "FAILED", "{deleted}");
    let tree = ops.tree().await;
    let paths: BTreeSet<Vec<String>> = tree.keys().cloned().collect();
    assert_eq!(
        paths,
        BTreeSet::from([
            chain(&["eu"]),
            chain(&["eu", "a"]),
            chain(&["eu", "a", "k1"]),
            chain(&["eu", "a", "k1", "shop"]),
            chain(&["eu", "a", "k1", "shop", "checkout"]),
            chain(&["eu", "a", "k1", "shop", "checkout", "co-1"]),
        ])
    );
    let gone = ops
        .data(
            "query($id: ID!) { resource(id: $id) { id } }",
            json!({ "id": a }),
        )
        .await;
    assert_eq!(gone["resource"], Value::Null);
    let node = &tree[&chain(&["eu", "a", "k1", "shop", "checkout"])];
    let detail = ops
        .data(
            "query($id: ID!) { node(id: $id) { ancestors { class } children { positionToken } resources { id } } }",
            json!({ "id": node["id"] }),
        )
        .await;
    assert_eq!(detail["node"]["ancestors"].as_array().unwrap().len(), 4);
    assert_eq!(detail["node"]["children"][0]["positionToken"], "co-1");
    assert_eq!(detail["node"]["resources"][0]["id"], b.as_str());
}

/// The shipped configuration does what its comment says: a service's
/// status is its worst instance's health, and at least 1 (degraded) while
/// any shared database is not healthy; without a database, the health
/// alone.
async fn a_service_is_at_least_degraded_while_a_shared_database_is_not_healthy(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    ops.create(instance("cart", "cart-1", 0, 1.0)).await;
    ops.create(instance("checkout", "co-1", 2, 1.0)).await;
    let cart = chain(&["eu", "a", "k1", "shop", "cart"]);
    let checkout = chain(&["eu", "a", "k1", "shop", "checkout"]);
    let statuses = |tree: &BTreeMap<Vec<String>, Value>, node: &Vec<String>| {
        (
            tree[node]["status"].as_i64().unwrap(),
            tree[node]["aggregatedStatus"].as_i64().unwrap(),
        )
    };
    let tree = ops.tree().await;
    assert_eq!(statuses(&tree, &cart), (0, 0), "no database: the health");
    assert_eq!(statuses(&tree, &checkout), (2, 2));

    let db = ops
        .create(json!({ "database": "pg-main", "health": 2 }))
        .await;
    let tree = ops.tree().await;
    assert_eq!(statuses(&tree, &cart), (1, 1), "a failing database");
    assert_eq!(
        statuses(&tree, &checkout),
        (2, 2),
        "worse than degraded stays"
    );
    assert_eq!(
        statuses(&tree, &chain(&["eu", "a", "k1", "shop", "cart", "cart-1"])),
        (0, 0),
        "instances do not read databases"
    );

    ops.update("A", &db, json!({ "health": 1 })).await;
    let tree = ops.tree().await;
    assert_eq!(statuses(&tree, &cart), (1, 1), "a degraded database");

    ops.update("A", &db, json!({ "health": 0 })).await;
    let tree = ops.tree().await;
    assert_eq!(statuses(&tree, &cart), (0, 0), "every database healthy");

    ops.create(json!({ "database": "redis-cache", "health": 3 }))
        .await;
    let tree = ops.tree().await;
    assert_eq!(statuses(&tree, &cart), (1, 1), "any database: one is down");
    assert_eq!(tree[&cart]["properties"]["databaseStatus"], 3);

    let config = ops
        .data(
            "{ nodeConfig { classes { name properties { name rule } } } }",
            json!({}),
        )
        .await;
    let service = config["nodeConfig"]["classes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|class| class["name"] == "service")
        .unwrap()
        .clone();
    assert!(
        service["properties"].as_array().unwrap().contains(&json!({
            "name": "status",
            "rule": "max(max(attr.health), min(max(database.status), 1))"
        })),
        "{service}"
    );
}

async fn dependent_classes_and_patches_follow_their_rules(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    ops.create(instance("cart", "cart-1", 0, 1.0)).await;
    let db = ops
        .create(json!({ "database": "pg-main", "health": 3, "connections": 40 }))
        .await;

    let tree = ops.tree().await;
    let database = &tree[&chain(&["pg-main"])];
    assert_eq!(database["class"], "database");
    assert_eq!(database["status"], 3);
    assert_eq!(
        database["aggregatedStatus"], 2,
        "patched: min(aggregated, 2)"
    );
    // `service` depends on `database`: every service was recomputed.
    let service = &tree[&chain(&["eu", "a", "k1", "shop", "cart"])];
    assert_eq!(service["properties"]["databaseStatus"], 3);

    ops.update("A", &db, json!({ "health": 1 })).await;
    let tree = ops.tree().await;
    assert_eq!(tree[&chain(&["pg-main"])]["aggregatedStatus"], 1);
    assert_eq!(
        tree[&chain(&["eu", "a", "k1", "shop", "cart"])]["properties"]["databaseStatus"],
        1
    );

    let config = ops
        .data(
            "{ nodeConfig { maxFixpointIterations positionAttributes classes { name parent depth position dependsOn patchAggregatedStatus cyclic properties { name rule } } } }",
            json!({}),
        )
        .await;
    let classes = config["nodeConfig"]["classes"].as_array().unwrap();
    let service = classes
        .iter()
        .find(|class| class["name"] == "service")
        .unwrap();
    assert_eq!(service["parent"], "namespace");
    assert_eq!(service["depth"], 4);
    assert_eq!(service["dependsOn"], json!(["database"]));
    assert!(
        service["properties"]
            .as_array()
            .unwrap()
            .contains(&json!({ "name": "databaseStatus", "rule": "max(database.status)" }))
    );
    assert!(
        config["nodeConfig"]["positionAttributes"]
            .as_array()
            .unwrap()
            .contains(&json!("region"))
    );
}

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

/// The reference: the tree a from-scratch computation gives for the final
/// resources, with the default configuration's instance chain (status and
/// aggregated status are the worst health below a node).
fn reference(resources: &[Value]) -> BTreeMap<Vec<String>, (i64, usize)> {
    let levels = [
        "region",
        "zone",
        "cluster",
        "namespace",
        "service",
        "instance",
    ];
    let mut tree: BTreeMap<Vec<String>, (i64, usize)> = BTreeMap::new();
    for attributes in resources {
        let mut chain = Vec::new();
        for level in levels {
            chain.push(attributes[level].as_str().unwrap().to_owned());
            let entry = tree.entry(chain.clone()).or_insert((0, 0));
            entry.0 = entry.0.max(attributes["health"].as_i64().unwrap());
            entry.1 += 1;
        }
    }
    tree
}

/// The stored tree as the reference states it: each node's aggregated
/// status (equal to its status here) and resource count.
fn observed(tree: &BTreeMap<Vec<String>, Value>) -> BTreeMap<Vec<String>, (i64, usize)> {
    comparable(
        tree.iter()
            .map(|(chain, node)| {
                assert_eq!(node["status"], node["aggregatedStatus"], "{node}");
                let count = node["properties"]["instances"]
                    .as_u64()
                    .or(node["properties"]["replicas"].as_u64())
                    .unwrap_or(1) as usize;
                (
                    chain.clone(),
                    (node["aggregatedStatus"].as_i64().unwrap(), count),
                )
            })
            .collect(),
    )
}

/// Namespaces count nothing and instances are one resource each: only the
/// other levels' counts are compared.
fn comparable(tree: BTreeMap<Vec<String>, (i64, usize)>) -> BTreeMap<Vec<String>, (i64, usize)> {
    tree.into_iter()
        .map(|(chain, (status, count))| {
            let count = if chain.len() == 4 || chain.len() == 6 {
                1
            } else {
                count
            };
            (chain, (status, count))
        })
        .collect()
}

async fn concurrent_requests_end_in_the_from_scratch_tree(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_QUEUE_SHORT_CONCURRENCY", "4")
            .env("TRELLIS_QUEUE_MEDIUM_CONCURRENCY", "4"),
    )
    .await;
    let ops = Client::new(&app).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(
            ops.create(instance("cart", &format!("cart-{i}"), 0, 0.5))
                .await,
        );
    }
    // Thirty requests at once: status changes and moves between services.
    let mut requests = Vec::new();
    let client = &ops;
    for round in 0..30usize {
        let id = ids[round % ids.len()].clone();
        let (which, patch) = if round % 3 == 0 {
            let service = ["cart", "checkout", "search"][(round / 3) % 3];
            (
                "B",
                json!({ "service": service, "health": (round % 4) as i64 }),
            )
        } else {
            ("A", json!({ "health": (round % 4) as i64 }))
        };
        let mutation = format!(
            "mutation($id: ID!, $p: JSON!, $k: String!) {{ updateResource{which}(id: $id, patch: $p, idempotencyKey: $k) {{ id }} }}"
        );
        requests.push(async move {
            let data = client
                .data(
                    &mutation,
                    json!({ "id": id, "p": patch, "k": format!("burst-{round}") }),
                )
                .await;
            data.as_object().unwrap().values().next().unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned()
        });
    }
    let tasks = futures_util::future::join_all(requests).await;
    let mut outcomes = BTreeMap::new();
    for id in &tasks {
        let task = wait_terminal(&app, &ops.token, id).await;
        *outcomes
            .entry(task["status"].as_str().unwrap().to_owned())
            .or_insert(0) += 1;
    }
    assert!(
        outcomes
            .keys()
            .all(|status| status == "SUCCEEDED" || status == "SUPERSEDED"),
        "{outcomes:?}"
    );

    let resources = ops
        .data(
            "{ resources(first: 50) { edges { node { attributes version } } } }",
            json!({}),
        )
        .await;
    let finals: Vec<Value> = resources["resources"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| edge["node"]["attributes"].clone())
        .collect();
    assert_eq!(finals.len(), 4);
    let versions: i64 = resources["resources"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| edge["node"]["version"].as_i64().unwrap())
        .sum();
    assert_eq!(
        versions,
        4 + 30,
        "every request's mutation was applied, superseded or not"
    );

    assert_eq!(observed(&ops.tree().await), comparable(reference(&finals)));
}

async fn dashboard_sees_a_leaf_change_climb_to_the_root(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    let id = ops.create(instance("cart", "cart-1", 0, 0.5)).await;
    let ready = ops.create(instance("ready", "ready-1", 0, 0.5)).await;
    let us = ops
        .create(json!({ "region": "us", "zone": "b", "health": 0 }))
        .await;
    let tree = ops.tree().await;
    let root = tree[&chain(&["eu"])]["id"].as_str().unwrap().to_owned();

    let mut socket = subscribe(
        &app,
        &ops.token,
        "s",
        "subscription($root: ID) { nodeStatusChanged(subtreeOf: $root) { id class aggregatedStatus previousAggregatedStatus } }",
        json!({ "root": root }),
    )
    .await;
    // The subscription is live once it hears a change made after it: one
    // instance goes degraded and back, which ends with the root back at 0.
    ops.update("A", &ready, json!({ "health": 1 })).await;
    ops.update("A", &ready, json!({ "health": 0 })).await;
    loop {
        let message = next(&mut socket)
            .await
            .expect("a nodeStatusChanged message");
        let change = &message["payload"]["data"]["nodeStatusChanged"];
        if change["class"] == "region" && change["aggregatedStatus"] == 0 {
            break;
        }
    }
    // A change outside the subtree is not heard: the first message is
    // about the next change, inside it.
    ops.update("A", &us, json!({ "health": 1 })).await;
    ops.update("A", &id, json!({ "health": 2 })).await;

    let mut classes = Vec::new();
    while classes.len() < 6 {
        let message = next(&mut socket)
            .await
            .expect("a nodeStatusChanged message");
        assert_eq!(message["type"], "next", "{message}");
        let change = &message["payload"]["data"]["nodeStatusChanged"];
        assert_eq!(change["aggregatedStatus"], 2, "{change}");
        assert_eq!(change["previousAggregatedStatus"], 0);
        classes.push(change["class"].as_str().unwrap().to_owned());
    }
    assert_eq!(
        classes,
        [
            "instance",
            "service",
            "namespace",
            "cluster",
            "zone",
            "region"
        ],
        "deepest first, up to the root"
    );
}

#[tokio::test]
async fn an_invalid_node_configuration_stops_start_up_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(Backend::Sqlite, dir.path()).await;
    let path = dir.path().join("nodes.toml");
    std::fs::write(
        &path,
        "[[classes]]\nname = \"cluster\"\nparent = \"regoin\"\nposition = \"{cluster}\"\n",
    )
    .unwrap();
    let output = trellis_command(dir.path(), &db.url)
        .arg("serve")
        .env("TRELLIS_NODE_CONFIG", &path)
        .env("TRELLIS_LISTEN", "127.0.0.1:0")
        .output()
        .await
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("class `cluster`, `parent`: no class is named `regoin`"),
        "{stderr}"
    );
}

async fn owed_work_is_done_by_the_periodic_reconciliation(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    ops.create(instance("cart", "cart-1", 0, 0.5)).await;
    // A mutation applied whose reconciliation nobody finished (its task,
    // the newest, failed): the resource is marked, its nodes missing.
    let db = app.database().await;
    db.execute_raw(sea_orm::Statement::from_sql_and_values(
        db.get_database_backend(),
        "INSERT INTO resources (id, attributes, version, deleting, needs_mapping, created_at, updated_at) \
         VALUES ($1, $2, 1, $3, $4, $5, $5)",
        vec![
            uuid::Uuid::now_v7().into(),
            instance("cart", "cart-2", 3, 0.5).into(),
            false.into(),
            true.into(),
            chrono::Utc::now().into(),
        ],
    ))
    .await
    .unwrap();
    assert_eq!(ops.tree().await.len(), 6);

    let admin = app.admin().await;
    let task = app
        .gql(
            r#"mutation { runPeriodicJob(name: "resources.reconcile") { id } }"#,
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    let id = task.data()["runPeriodicJob"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = wait_terminal(&app, &admin.access, &id).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    let tree = ops.tree().await;
    assert_eq!(tree.len(), 7);
    assert_eq!(tree[&chain(&["eu"])]["aggregatedStatus"], 3);
}

/// Worker processes are SIGKILLed while a burst of updates runs through the
/// seven stages: every request is applied exactly once and the tree is the
/// from-scratch one.
async fn killed_workers_leave_the_from_scratch_tree(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_ROLE", "api")
            .env("TRELLIS_TASK_LEASE", "2")
            .env("TRELLIS_TASK_MAX_ATTEMPTS", "50")
            .env("TRELLIS_TASK_RETRY_BASE_MS", "50")
            .env("TRELLIS_TASK_RETRY_MAX", "1")
            .env("TRELLIS_TASK_POLL_MS", "50"),
    )
    .await;
    let mut spawned = 0;
    let mut workers = Vec::new();
    for _ in 0..2 {
        workers.push(crate::crash::start_worker(&app, &mut spawned).await);
    }
    let ops = Client::new(&app).await;
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(
            ops.create(instance("cart", &format!("cart-{i}"), 0, 0.5))
                .await,
        );
    }
    let mut tasks = Vec::new();
    for round in 0..24usize {
        let id = &ids[round % ids.len()];
        let (which, patch) = if round % 2 == 0 {
            let service = ["cart", "checkout", "search"][(round / 2) % 3];
            (
                "B",
                json!({ "service": service, "health": (round % 4) as i64 }),
            )
        } else {
            ("A", json!({ "health": (round % 4) as i64 }))
        };
        let data = ops
            .data(
                &format!(
                    "mutation($id: ID!, $p: JSON!, $k: String!) {{ updateResource{which}(id: $id, patch: $p, idempotencyKey: $k) {{ id }} }}"
                ),
                json!({ "id": id, "p": patch, "k": format!("crash-{round}") }),
            )
            .await;
        tasks.push(
            data.as_object().unwrap().values().next().unwrap()["id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
        if round % 5 == 4 {
            // Kill a worker mid-flight and start another in its place.
            let victim = (round / 5) % workers.len();
            workers[victim].1.kill().await.unwrap();
            workers[victim] = crate::crash::start_worker(&app, &mut spawned).await;
        }
    }
    for id in &tasks {
        let task = wait_terminal(&app, &ops.token, id).await;
        assert!(
            task["status"] == "SUCCEEDED" || task["status"] == "SUPERSEDED",
            "{task}"
        );
    }
    let resources = ops
        .data(
            "{ resources(first: 50) { edges { node { attributes version } } } }",
            json!({}),
        )
        .await;
    let edges = resources["resources"]["edges"].as_array().unwrap();
    let versions: i64 = edges
        .iter()
        .map(|edge| edge["node"]["version"].as_i64().unwrap())
        .sum();
    assert_eq!(versions, 4 + 24, "every request applied exactly once");
    let finals: Vec<Value> = edges
        .iter()
        .map(|edge| edge["node"]["attributes"].clone())
        .collect();
    assert_eq!(observed(&ops.tree().await), comparable(reference(&finals)));
}

/// A server started with another node configuration recomputes the tree
/// under it: the mapping (a changed position template), properties (a
/// changed rule) and aggregated status (a changed patch rule).
async fn a_changed_node_configuration_reconciles_the_whole_tree(backend: Backend) {
    let mut app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    ops.create(instance("cart", "cart-1", 0, 1.0)).await;
    ops.create(instance("cart", "cart-2", 1, 3.0)).await;
    ops.create(json!({ "database": "pg-main", "health": 3 }))
        .await;
    let tree = ops.tree().await;
    assert_eq!(tree[&chain(&["eu", "a", "k1"])]["properties"]["cpu"], 4.0);
    assert_eq!(tree[&chain(&["pg-main"])]["aggregatedStatus"], 2);

    let shipped = include_str!("../../config/nodes.toml");
    let changed = shipped
        .replace(
            "position = \"{namespace}\"",
            "position = \"ns-{namespace}\"",
        )
        .replace(
            "cpu = \"sum(attr.cpu)\", instances",
            "cpu = \"max(attr.cpu)\", instances",
        )
        .replace("min(aggregated, 2)", "min(aggregated, 1)");
    assert_ne!(changed, shipped);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nodes.toml");
    std::fs::write(&path, changed).unwrap();
    app.kill().await;
    app.restart(&[("TRELLIS_NODE_CONFIG", path.to_str().unwrap())])
        .await;

    let ops = Client {
        app: &app,
        token: app.login("ops", "ops-password").await.access,
    };
    // Start-up adopted the new configuration with a reconciliation task;
    // once it has ended, its work is in the tree ("done" means visible).
    let admin = app.admin().await.access;
    let reconciles = app
        .gql(
            r#"{ tasks(filter: { kind: "resources.reconcile" }) { edges { node { id } } } }"#,
            json!({}),
        )
        .bearer(&admin)
        .send()
        .await;
    let reconciles = reconciles.data()["tasks"]["edges"]
        .as_array()
        .unwrap()
        .clone();
    assert!(!reconciles.is_empty(), "a reconciliation was enqueued");
    for task in &reconciles {
        let id = task["node"]["id"].as_str().unwrap();
        let ended = wait_terminal(&app, &admin, id).await;
        assert_eq!(ended["status"], "SUCCEEDED", "{ended}");
    }
    let tree = ops.tree().await;
    assert_eq!(tree[&chain(&["pg-main"])]["aggregatedStatus"], 1);
    // Remapped: the old namespace and its subtree are gone.
    assert!(
        tree.keys()
            .all(|key| key.get(3).is_none_or(|ns| ns == "ns-shop")),
        "{tree:?}"
    );
    let service = &tree[&chain(&["eu", "a", "k1", "ns-shop", "cart"])];
    assert_eq!(service["properties"]["replicas"], 2);
    assert_eq!(service["aggregatedStatus"], 1);
    assert!(tree.contains_key(&chain(&["eu", "a", "k1", "ns-shop", "cart", "cart-2"])));
    // Recomputed with the new rule, and patched with the new patch.
    assert_eq!(tree[&chain(&["eu", "a", "k1"])]["properties"]["cpu"], 3.0);
    assert_eq!(tree[&chain(&["pg-main"])]["aggregatedStatus"], 1);
    assert_eq!(tree.len(), 8, "{tree:?}");
}

/// `parent`, `children`, `ancestors`, `resources` and `Resource.nodes` on
/// every node of a page (each batched by a DataLoader across the page)
/// agree with the tree, including per-node limits inside one batch.
async fn tree_fields_of_many_nodes_agree_with_the_tree(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    ops.create(instance("cart", "cart-1", 0, 1.0)).await;
    ops.create(instance("cart", "cart-2", 1, 1.0)).await;
    ops.create(instance("web", "web-1", 2, 1.0)).await;
    let data = ops
        .data(
            "{ nodeTree(depth: 10, first: 20) { id parentId path \
               parent { id } children(first: 1) { id } all: children(first: 20) { id } \
               ancestors { id } resources(first: 1) { id } \
               everything: resources(first: 20) { id nodes { id } } } }",
            json!({}),
        )
        .await;
    let nodes = data["nodeTree"].as_array().unwrap();
    assert_eq!(
        nodes.len(),
        9,
        "eu, a, k1, shop, cart, web and three instances"
    );
    let ids = |value: &Value| -> Vec<String> {
        value
            .as_array()
            .unwrap()
            .iter()
            .map(|node| node["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let by_id: BTreeMap<&str, &Value> = nodes
        .iter()
        .map(|node| (node["id"].as_str().unwrap(), node))
        .collect();
    for node in nodes {
        let id = node["id"].as_str().unwrap();
        assert_eq!(node["parent"]["id"], node["parentId"], "{node}");
        let mut children: Vec<String> = nodes
            .iter()
            .filter(|other| other["parentId"] == id)
            .map(|other| other["id"].as_str().unwrap().to_owned())
            .collect();
        children.sort_by_key(|child| child.parse::<i64>().unwrap());
        assert_eq!(ids(&node["all"]), children, "{node}");
        assert_eq!(
            ids(&node["children"]),
            children.into_iter().take(1).collect::<Vec<_>>()
        );
        // Ancestors: the chain of parents, root first.
        let mut chain = Vec::new();
        let mut up = node["parentId"].as_str();
        while let Some(parent) = up {
            chain.insert(0, parent.to_owned());
            up = by_id[parent]["parentId"].as_str();
        }
        assert_eq!(ids(&node["ancestors"]), chain, "{node}");
        // Resources: every one maps to this node; the limit holds per node.
        let everything = node["everything"].as_array().unwrap();
        assert!(!everything.is_empty(), "{node}");
        assert_eq!(node["resources"].as_array().unwrap().len(), 1);
        assert_eq!(node["resources"][0]["id"], everything[0]["id"]);
        for resource in everything {
            assert!(
                ids(&resource["nodes"]).contains(&id.to_owned()),
                "{resource}"
            );
        }
    }
    // The region holds all three resources; an instance only its own.
    let region = nodes
        .iter()
        .find(|node| node["parentId"].is_null())
        .unwrap();
    assert_eq!(region["everything"].as_array().unwrap().len(), 3);
}

/// An Engine with a bug: computing any class's properties panics.
struct PanickingEngine;

impl trellis::nodes::engine::Engine for PanickingEngine {
    fn properties(
        &self,
        _class: &trellis::nodes::config::Class,
        _context: &trellis::nodes::engine::ClassContext<'_>,
    ) -> Vec<serde_json::Map<String, Value>> {
        panic!("the engine has a bug");
    }

    fn patch_aggregated_status(
        &self,
        _class: &trellis::nodes::config::Class,
        _node: &trellis::nodes::engine::PatchInput<'_>,
    ) -> Option<i32> {
        None
    }
}

/// A stage whose handler panics (here, the Engine it calls) leaves nothing
/// unrecorded: the task ends `FAILED` at its first attempt with the cause
/// and its event, the lease is gone, and the stage's writes rolled back.
/// The runner in-process, because only a test can plug in a broken Engine.
async fn a_panicking_engine_fails_its_task_once_and_records_it(backend: Backend) {
    use std::sync::Arc;

    use migration::{Migrator, MigratorTrait};
    use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter};
    use trellis::{
        jobs::{self, handler::Registry, model::NewTask, runner::RunnerSettings},
        nodes::{
            config::{DEFAULT_CONFIG, NodeConfig},
            ops,
            pipeline::{self, Pipeline},
        },
    };

    let dir = tempfile::tempdir().unwrap();
    let database = TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    Migrator::up(&db, None).await.unwrap();
    let mut registry = Registry::default();
    pipeline::register(
        &mut registry,
        Arc::new(Pipeline {
            config: Arc::new(NodeConfig::parse(DEFAULT_CONFIG).unwrap()),
            engine: Arc::new(PanickingEngine),
        }),
    );
    let settings = RunnerSettings {
        worker_id: "panicking-engine".into(),
        concurrency_short: 1,
        concurrency_medium: 1,
        concurrency_long: 1,
        lease: Duration::from_secs(30),
        max_attempts: 5,
        retry_base: Duration::from_millis(10),
        retry_max: Duration::from_millis(50),
        idempotency_ttl: Duration::from_secs(3600),
        poll_interval: Duration::from_millis(50),
    };
    let jobs = jobs::Jobs::new(db.clone(), settings, registry, jobs::Backend::Embedded);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let workers = jobs.start(stopped);

    // The periodic reconciliation fires as the runner starts; the request
    // comes after it, so it is the scope's newest and is not superseded.
    for _ in 0..600 {
        let fired = entity::task::Entity::find()
            .filter(entity::task::Column::Kind.eq(ops::RECONCILE_KIND))
            .count(&db)
            .await
            .unwrap();
        if fired > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut new = NewTask::new(
        ops::CREATE_KIND,
        jobs::model::Queue::Short,
        json!({ "op": "create", "attributes": instance("cart", "cart-1", 1, 0.5) }),
    );
    new.scope = Some(ops::SCOPE.to_owned());
    let id = jobs.enqueue(new).await.unwrap().task.id;

    let mut task = None;
    for _ in 0..600 {
        let found = entity::task::Entity::find_by_id(id)
            .one(&db)
            .await
            .unwrap()
            .unwrap();
        if !matches!(
            found.status,
            entity::task::Status::Queued | entity::task::Status::Running
        ) {
            task = Some(found);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let task = task.expect("the task ends");
    assert_eq!(task.status, entity::task::Status::Failed, "{task:?}");
    assert_eq!(
        task.error.as_deref(),
        Some(jobs::runner::PANICKED),
        "{task:?}"
    );
    assert_eq!(task.attempt_count, 1, "a panic is not retried: {task:?}");
    assert!(task.finished_at.is_some(), "{task:?}");
    assert_eq!(task.lease_owner, None, "{task:?}");
    // The stages before the panicking one committed (the resource and its
    // chain); the panicking stage's did not, so its work is still owed.
    assert_eq!(
        task.stages_done, 4,
        "accept, mutation, mapping and topology sync committed: {task:?}"
    );
    let owed = db
        .query_one_raw(sea_orm::Statement::from_string(
            db.get_database_backend(),
            "SELECT COUNT(*) AS n FROM node_dirty",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<i64>("", "n")
        .unwrap();
    assert!(owed > 0, "the properties stage rolled back, its marks stay");
    let event: Value = trellis::jobs::outbox::stored_events(&db, "task.updated")
        .await
        .unwrap()
        .iter()
        .rev()
        .find(|event| event.aggregate_id == id.to_string())
        .and_then(|event| event.payload())
        .expect("an event for the task");
    assert_eq!(event["status"], "FAILED", "{event}");

    let _ = stop.send(true);
    for worker in workers {
        let _ = worker.await;
    }
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
