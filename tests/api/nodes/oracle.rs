//! The tree against a from-scratch computation over the final resources:
//! concurrent requests, killed workers, owed work done by the periodic
//! reconciliation, and an engine that panics.

use std::{collections::BTreeMap, time::Duration};

use sea_orm::ConnectionTrait;
use serde_json::{Value, json};

use crate::{
    helpers::{AppOptions, Backend, TestDatabase, spawn_app, spawn_app_with},
    jobs::wait_terminal,
};

use super::{Client, chain, instance};

crate::on_both_backends!(
    concurrent_requests_end_in_the_from_scratch_tree,
    owed_work_is_done_by_the_periodic_reconciliation,
    a_panicking_engine_fails_its_task_once_and_records_it,
);

crate::on_every_runner!(killed_workers_leave_the_from_scratch_tree,);

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
