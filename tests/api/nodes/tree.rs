//! The tree resources build: orphaned subtrees pruned, class dependencies
//! and status patches, the shipped rules, tree fields of many nodes, and
//! a leaf change climbing to the root in the `nodeStatusChanged` stream.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::{
    helpers::{Backend, spawn_app},
    websocket::{next, subscribe},
};

use super::{Client, chain, instance};

crate::on_both_backends!(
    resources_build_the_tree_and_orphans_are_pruned,
    dependent_classes_and_patches_follow_their_rules,
    a_service_is_at_least_degraded_while_a_shared_database_is_not_healthy,
    dashboard_sees_a_leaf_change_climb_to_the_root,
    tree_fields_of_many_nodes_agree_with_the_tree,
    a_negative_zero_is_one_token_on_every_backend,
    numbers_round_trip_with_their_text_over_graphql_and_http,
);

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

/// `-0.0` is `0.0` once accepted, on SQLite and PostgreSQL alike: in the
/// position token it makes and in the attributes read back.
async fn a_negative_zero_is_one_token_on_every_backend(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    let id = ops
        .create(
            serde_json::from_str(
                r#"{"region": -0.0, "zone": "a", "health": 0, "load": [-0.0, 1.0]}"#,
            )
            .unwrap(),
        )
        .await;
    let tree = ops.tree().await;
    let region = tree
        .keys()
        .find(|chain| chain.len() == 1)
        .expect("a region node")
        .clone();
    assert_eq!(region, ["0.0"], "{tree:#?}");
    assert!(tree.contains_key(&chain(&["0.0", "a"])));
    let text = attributes_text(&ops, &id).await;
    assert!(text.contains(r#""region":0.0"#), "{text}");
    assert!(text.contains(r#""load":[0.0,1.0]"#), "{text}");
    assert!(!text.contains("-0"), "{text}");
}

/// An integer beyond 64 bits stays that integer (not `1e+20`) and makes
/// its token from what was sent; other numbers take the canonical decimal
/// form on both backends, through GraphQL variables and HTTP bodies alike.
async fn numbers_round_trip_with_their_text_over_graphql_and_http(backend: Backend) {
    let app = spawn_app(backend).await;
    let ops = Client::new(&app).await;
    // Parsed from text: no Rust integer holds these.
    let attributes: Value = serde_json::from_str(
        r#"{"region": 100000000000000000000, "zone": 1e2, "health": 0,
            "big": -123456789012345678901234567890, "ratio": 2.50, "tiny": 1e-7}"#,
    )
    .unwrap();
    let id = ops.create(attributes).await;
    let tree = ops.tree().await;
    assert!(
        tree.contains_key(&chain(&["100000000000000000000", "100.0"])),
        "{:?}",
        tree.keys().collect::<Vec<_>>()
    );
    let text = attributes_text(&ops, &id).await;
    for kept in [
        r#""region":100000000000000000000"#,
        r#""zone":100.0"#,
        r#""big":-123456789012345678901234567890"#,
        r#""ratio":2.5"#,
        r#""tiny":0.0000001"#,
    ] {
        assert!(text.contains(kept), "{kept} in {text}");
    }

    // Over HTTP, a raw body with a longer integer still.
    let body = r#"{"patch": {"big": 340282366920938463463374607431768211457000}}"#;
    let response = app
        .client
        .post(app.url(&format!("/resources/{id}/update-a")))
        .bearer_auth(&ops.token)
        .header("content-type", "application/json")
        .header("Idempotency-Key", "big-1")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    let task: Value = response.json().await.unwrap();
    let done =
        crate::jobs::wait_terminal(&app, &ops.token, task["task_id"].as_str().unwrap()).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    let text = attributes_text(&ops, &id).await;
    assert!(
        text.contains(r#""big":340282366920938463463374607431768211457000"#),
        "{text}"
    );

    // A number no double holds is refused, with the field named.
    let refused = app
        .client
        .post(app.url(&format!("/resources/{id}/update-a")))
        .bearer_auth(&ops.token)
        .header("content-type", "application/json")
        .header("Idempotency-Key", "big-2")
        .body(r#"{"patch": {"ratio": 1e400}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 400);
    let error: Value = refused.json().await.unwrap();
    assert!(error.to_string().contains("out of range"), "{error}");
}

/// A resource's attributes as the response's text (numbers as written).
async fn attributes_text(ops: &Client<'_>, id: &str) -> String {
    ops.app
        .gql(
            "query($id: ID!) { resource(id: $id) { attributes } }",
            json!({ "id": id }),
        )
        .bearer(&ops.token)
        .send()
        .await
        .body
        .to_string()
}
