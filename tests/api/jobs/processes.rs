//! Several processes over one PostgreSQL and Redis: API and worker
//! processes, the Redis lists, periodic jobs and SIGTERM.

use std::time::Duration;

use sea_orm::{ConnectionTrait, Statement};
use serde_json::{Value, json};

use crate::helpers::{Backend, spawn_app_with};

use super::{effects, fast_retries, probe, wait_status, wait_terminal, watch_task};

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
