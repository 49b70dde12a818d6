//! How the runner schedules: the group commit, the queues' caps, short
//! jobs beside long ones, heartbeats and expired leases.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::helpers::{Backend, spawn_app_with};

use super::{effects, fast_retries, probe, task, time, wait_status, wait_terminal};

crate::on_every_runner!(
    tasks_that_write_nothing_end_together_in_the_group_commit,
    each_queue_respects_its_concurrency_cap,
    short_jobs_are_not_stuck_behind_long_ones,
    expired_lease_is_reclaimed_and_resumes_at_the_uncommitted_stage,
    a_heartbeat_keeps_a_task_longer_than_its_lease,
    slots_freed_by_the_group_commit_take_the_next_task_within_the_cap,
);

/// Tasks whose last stage writes nothing of its own end through the
/// group commit, several endings to one statement: each still ends
/// `SUCCEEDED` after all its stages, once, and only for the worker that
/// holds it.
async fn tasks_that_write_nothing_end_together_in_the_group_commit(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries()).await;
    let admin = app.admin().await;
    let mut ids = Vec::new();
    for _ in 0..24 {
        ids.push(
            probe(
                &app,
                &admin.access,
                json!({ "stages": 2, "effects": false }),
            )
            .await,
        );
    }
    for id in &ids {
        let done = wait_terminal(&app, &admin.access, id).await;
        assert_eq!(done["status"], "SUCCEEDED", "{done}");
        assert_eq!(done["stagesDone"], 2);
        assert_eq!(done["attemptCount"], 1);
        assert!(done["result"].is_null() && done["progress"].is_null());
        assert!(done["finishedAt"].is_string());
        assert!(effects(&app, id).await.is_empty());
    }
}

/// The most intervals `[startedAt, finishedAt]` that overlap at one instant.
fn max_overlap(tasks: &[Value]) -> usize {
    let mut edges: Vec<(DateTime<Utc>, i32)> = Vec::new();
    for task in tasks {
        edges.push((time(&task["startedAt"]), 1));
        edges.push((time(&task["finishedAt"]), -1));
    }
    edges.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut max) = (0i32, 0i32);
    for (_, delta) in edges {
        now += delta;
        max = max.max(now);
    }
    max as usize
}

/// Tasks whose last stage writes nothing end through the group commit,
/// which claims each freed slot's next task in the same commit. The
/// handed-off tasks still respect the queue's cap, and each runs once.
async fn slots_freed_by_the_group_commit_take_the_next_task_within_the_cap(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries().env("TRELLIS_QUEUE_LONG_CONCURRENCY", "2"),
    )
    .await;
    let admin = app.admin().await;
    let mut ids = Vec::new();
    for _ in 0..8 {
        ids.push(
            probe(
                &app,
                &admin.access,
                json!({ "sleepMs": 150, "queue": "LONG", "effects": false }),
            )
            .await,
        );
    }
    let mut done = Vec::new();
    for id in &ids {
        done.push(wait_terminal(&app, &admin.access, id).await);
    }
    for task in &done {
        assert_eq!(task["status"], "SUCCEEDED");
        assert_eq!(task["attemptCount"], 1, "each runs once");
    }
    assert_eq!(
        max_overlap(&done),
        2,
        "q:long runs exactly its 2 workers at once"
    );
}

async fn each_queue_respects_its_concurrency_cap(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries()
            .env("TRELLIS_QUEUE_LONG_CONCURRENCY", "2")
            .env("TRELLIS_QUEUE_MEDIUM_CONCURRENCY", "1"),
    )
    .await;
    let admin = app.admin().await;
    let mut long = Vec::new();
    let mut medium = Vec::new();
    for _ in 0..5 {
        long.push(
            probe(
                &app,
                &admin.access,
                json!({ "sleepMs": 300, "queue": "LONG" }),
            )
            .await,
        );
        medium.push(
            probe(
                &app,
                &admin.access,
                json!({ "sleepMs": 200, "queue": "MEDIUM" }),
            )
            .await,
        );
    }
    let mut long_done = Vec::new();
    for id in &long {
        long_done.push(wait_terminal(&app, &admin.access, id).await);
    }
    let mut medium_done = Vec::new();
    for id in &medium {
        medium_done.push(wait_terminal(&app, &admin.access, id).await);
    }
    assert!(
        long_done
            .iter()
            .chain(&medium_done)
            .all(|t| t["status"] == "SUCCEEDED")
    );
    assert_eq!(
        max_overlap(&long_done),
        2,
        "q:long runs exactly its 2 workers at once"
    );
    assert_eq!(max_overlap(&medium_done), 1, "q:medium runs one at a time");
}

async fn short_jobs_are_not_stuck_behind_long_ones(backend: Backend) {
    let app = spawn_app_with(
        backend,
        fast_retries().env("TRELLIS_QUEUE_LONG_CONCURRENCY", "1"),
    )
    .await;
    let admin = app.admin().await;
    let first_long = probe(
        &app,
        &admin.access,
        json!({ "sleepMs": 1500, "queue": "LONG" }),
    )
    .await;
    let second_long = probe(
        &app,
        &admin.access,
        json!({ "sleepMs": 1500, "queue": "LONG" }),
    )
    .await;
    wait_status(&app, &admin.access, &first_long, "RUNNING").await;
    let short = probe(&app, &admin.access, json!({ "queue": "SHORT" })).await;

    let short_done = wait_terminal(&app, &admin.access, &short).await;
    let still_waiting = task(&app, &admin.access, &second_long).await;
    assert_eq!(short_done["status"], "SUCCEEDED");
    assert_eq!(
        still_waiting["status"], "QUEUED",
        "the saturated long queue has not reached its second job"
    );
    let first_long_done = wait_terminal(&app, &admin.access, &first_long).await;
    assert!(time(&short_done["finishedAt"]) < time(&first_long_done["finishedAt"]));
}

/// A stage may run longer than the lease: the worker's heartbeat renews
/// it, so the reaper leaves the task alone and it ends in one attempt.
async fn a_heartbeat_keeps_a_task_longer_than_its_lease(backend: Backend) {
    let app = spawn_app_with(backend, fast_retries().env("TRELLIS_TASK_LEASE", "1")).await;
    let admin = app.admin().await;
    let long = probe(&app, &admin.access, json!({ "stages": 1, "sleepMs": 2500 })).await;
    let short = probe(&app, &admin.access, json!({ "stages": 2, "sleepMs": 100 })).await;
    for id in [&long, &short] {
        let done = wait_terminal(&app, &admin.access, id).await;
        assert_eq!(done["status"], "SUCCEEDED", "{done}");
        assert_eq!(done["attemptCount"], 1, "{done}");
        assert!(done["error"].is_null(), "{done}");
    }
}

async fn expired_lease_is_reclaimed_and_resumes_at_the_uncommitted_stage(backend: Backend) {
    let mut app = spawn_app_with(backend, fast_retries().env("TRELLIS_TASK_LEASE", "2")).await;
    let admin = app.admin().await;
    let id = probe(&app, &admin.access, json!({ "stages": 2, "sleepMs": 1500 })).await;
    // Wait for stage 1 to commit, then kill the worker inside stage 2.
    for _ in 0..200 {
        if task(&app, &admin.access, &id).await["stagesDone"] == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    app.kill().await;
    app.restart(&[]).await;
    let admin = app.admin().await;

    let done = wait_terminal(&app, &admin.access, &id).await;
    assert_eq!(done["status"], "SUCCEEDED");
    assert_eq!(done["attemptCount"], 2, "the second worker's attempt");
    // Stage 1 ran once (attempt 1), stage 2 once (attempt 2): no effect twice.
    assert_eq!(effects(&app, &id).await, vec![(0, 1), (1, 2)]);
}
