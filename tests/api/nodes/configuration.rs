//! The node configuration: refused at start-up naming the problem, and a
//! changed one reconciling the whole tree.

use serde_json::json;

use crate::{
    helpers::{Backend, TestDatabase, spawn_app, trellis_command},
    jobs::wait_terminal,
};

use super::{Client, chain, instance};

crate::on_both_backends!(a_changed_node_configuration_reconciles_the_whole_tree,);

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

    let shipped = include_str!("../../../config/nodes.toml");
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
