//! Crash test: worker processes are SIGKILLed at random instants while
//! staged tasks run, and restarted. Every task must still finish, every
//! stage's effect must be applied exactly once (`probe_effects` has the
//! stage in its primary key, and we count), and no outbox event is lost.

use std::time::Duration;

use rand::Rng;
use sea_orm::{ConnectionTrait, Statement};
use serde_json::json;

use crate::{
    helpers::{AppOptions, Backend, TestApp, spawn_app_with},
    on_every_runner,
};

on_every_runner!(killed_workers_lose_no_task_and_duplicate_no_effect);

const TASKS: usize = 24;
const STAGES: usize = 3;

async fn count(db: &sea_orm::DatabaseConnection, sql: &str) -> i64 {
    let row = db
        .query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap()
        .unwrap();
    row.try_get_by_index::<i64>(0).unwrap()
}

/// Starts worker process number `*spawned` (named `worker-<n>`).
pub(crate) async fn start_worker(
    app: &TestApp,
    spawned: &mut usize,
) -> (String, tokio::process::Child) {
    let name = format!("worker-{spawned}");
    *spawned += 1;
    let child = app
        .sibling(&[("TRELLIS_ROLE", "worker"), ("TRELLIS_WORKER_ID", &name)])
        .await
        .0;
    (name, child)
}

/// Polls (bounded) until `sql` counts `expected`.
async fn wait_count(db: &sea_orm::DatabaseConnection, sql: &str, expected: i64) {
    for _ in 0..1200 {
        if count(db, sql).await == expected {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn killed_workers_lose_no_task_and_duplicate_no_effect(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_ROLE", "api")
            .env("TRELLIS_TASK_LEASE", "2")
            .env("TRELLIS_TASK_MAX_ATTEMPTS", "50")
            .env("TRELLIS_TASK_RETRY_BASE_MS", "50")
            .env("TRELLIS_TASK_RETRY_MAX", "1")
            .env("TRELLIS_TASK_POLL_MS", "50")
            // Few slots per worker, so the tasks run in waves the chaos can hit.
            .env("TRELLIS_QUEUE_SHORT_CONCURRENCY", "2"),
    )
    .await;
    // Named workers, so the chaos can aim at one that holds a lease.
    let mut spawned = 0;
    let mut workers = Vec::new();
    for _ in 0..3 {
        workers.push(start_worker(&app, &mut spawned).await);
    }
    let admin = app.admin().await;
    for _ in 0..TASKS {
        let response = app
            .gql(
                "mutation($i: ProbeTaskInput!) { probeTask(input: $i) { id } }",
                json!({ "i": { "stages": STAGES, "sleepMs": 300 } }),
            )
            .bearer(&admin.access)
            .send()
            .await;
        response.data();
    }

    // Chaos: at random instants, kill a worker that holds a lease (else a
    // random one) and start a fresh one in its place.
    let db = app.database().await;
    for _ in 0..8 {
        let (pause, random_victim) = {
            let mut rng = rand::rng();
            (
                rng.random_range(50..600),
                rng.random_range(0..workers.len()),
            )
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
        let holder = db
            .query_one_raw(Statement::from_string(
                db.get_database_backend(),
                "SELECT lease_owner FROM tasks WHERE status = 'RUNNING' AND lease_owner LIKE 'worker-%' LIMIT 1",
            ))
            .await
            .unwrap()
            .and_then(|row| row.try_get_by_index::<String>(0).ok());
        let victim = holder
            .and_then(|owner| workers.iter().position(|(name, _)| *name == owner))
            .unwrap_or(random_victim);
        workers[victim].1.kill().await.unwrap();
        workers[victim] = start_worker(&app, &mut spawned).await;
    }

    let finished = "SELECT COUNT(*) FROM tasks WHERE kind = 'system.probe' AND status IN ('SUCCEEDED','FAILED','CANCELLED','SUPERSEDED')";
    wait_count(&db, finished, TASKS as i64).await;
    assert_eq!(
        count(
            &db,
            "SELECT COUNT(*) FROM tasks WHERE kind = 'system.probe' AND status = 'SUCCEEDED'"
        )
        .await,
        TASKS as i64,
        "every task succeeded"
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM probe_effects").await,
        (TASKS * STAGES) as i64,
        "each stage's effect exactly once"
    );
    assert_eq!(
        count(&db, "SELECT COUNT(*) FROM (SELECT task_id FROM probe_effects GROUP BY task_id HAVING COUNT(*) = 3) AS complete").await,
        TASKS as i64
    );

    // The chaos really interrupted work: some tasks needed another worker.
    assert!(
        count(
            &db,
            "SELECT COUNT(*) FROM tasks WHERE kind = 'system.probe' AND attempt_count > 1"
        )
        .await
            > 0
    );

    // Every task's final state reached the outbox and was published.
    let succeeded: std::collections::HashSet<String> =
        trellis::jobs::outbox::stored_events(&db, "task.updated")
            .await
            .expect("stored events")
            .iter()
            .filter_map(|event| {
                let task: serde_json::Value = event.payload()?;
                (task["kind"] == "system.probe" && task["status"] == "SUCCEEDED")
                    .then(|| event.aggregate_id.clone())
            })
            .collect();
    assert_eq!(succeeded.len(), TASKS);
    // …and was published: the publication position is past every event.
    let mut unpublished = -1;
    for _ in 0..1200 {
        unpublished = trellis::jobs::outbox::unpublished(&db)
            .await
            .expect("unpublished events");
        if unpublished == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(unpublished, 0, "every event was published");
}
