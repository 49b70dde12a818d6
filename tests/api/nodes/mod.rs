//! Resources & Nodes end to end: the operations through GraphQL and the
//! HTTP contract, the tree they build (checked against a from-scratch
//! computation over the final resources), orphaned subtrees going away,
//! indirect impact through class dependencies, status patches, the
//! `nodeStatusChanged` subscription, and the node configuration.

mod configuration;
mod contract;
mod oracle;
mod tree;

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::{helpers::TestApp, jobs::wait_terminal};

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
