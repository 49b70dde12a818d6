//! `cargo bench --bench node_reconcile`
//!
//! Resources & Nodes on a generated tree of about 100,000 nodes (depth 6:
//! 2 regions × 5 zones × 2 clusters × 5 namespaces × 10 services × 98
//! instances, one resource per instance), on SQLite and on PostgreSQL,
//! through the real job runner and pipeline, in-process:
//!
//! - the statements each reconciliation phase runs for a leaf change, on
//!   the big tree and on a small one (they must not grow with the tree);
//! - latency of a leaf Update A from the request to `SUCCEEDED` (p50/p99,
//!   sequential requests);
//! - throughput of 1,000 concurrent Update A requests spread over the tree;
//! - deleting a zone's subtree (9,913 nodes): the one `DELETE` statement,
//!   and the whole reconciliation after its 9,800 resources are deleted.
//!
//! - through the API (every resource created by a request, as a client
//!   would): the build's resources/s; a leaf Update A from the request until
//!   the tree shows it (p50/p95); and under sustained Update A on one leaf
//!   at 50, 200 and 400 requests/s, the lag of a marker update on another
//!   leaf to the tree. For (a) it also prints when the task was first seen
//!   with each stage done, and the server's statements by total time. It
//!   measures once the build's tasks have ended and their events are
//!   published. The last line is
//!   `nodes_visible_p50_ms=<n> nodes_marker_lag_ms_at_400=<m>` (the worse
//!   backend's).
//!
//! Not a test: it prints figures. Knobs: `BENCH_UPDATES` (200 sequential
//! updates), `BENCH_CONCURRENT` (1000), `BENCH_INSTANCES` (98 per service),
//! `BENCH_VISIBLE_SAMPLES` (50), `BENCH_SUSTAINED_SECONDS` (20),
//! `TRELLIS_TEST_PG_URL`; `api-only` as an argument skips the seeded part,
//! `seeded-only` the part through the API.

mod support;

use std::{
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use clap::Parser;
use entity::user::Role;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement, TransactionTrait};
use serde_json::{Map, Value, json};
use support::{BenchDatabase, env_or};
use trellis::{
    auth::Viewer,
    cli::Cli,
    jobs::{self, Jobs, model::TASK_UPDATED},
    nodes::{
        engine::RuleEngine,
        ops::Operation,
        pipeline::{self, Pipeline},
        reconcile,
        service::NodesService,
    },
};
use uuid::Uuid;

const SHAPE: [usize; 5] = [2, 5, 2, 5, 10];

fn attributes(path: [usize; 5], instance: usize, health: i64) -> Value {
    json!({
        "region": format!("r{}", path[0]),
        "zone": format!("z{}", path[1]),
        "cluster": format!("c{}", path[2]),
        "namespace": format!("n{}", path[3]),
        "service": format!("s{}", path[4]),
        "instance": format!("i{instance}"),
        "health": health,
        "cpu": 1,
    })
}

/// Every leaf's position, in a fixed order.
fn leaves(instances: usize) -> Vec<([usize; 5], usize)> {
    let mut out = Vec::new();
    for r in 0..SHAPE[0] {
        for z in 0..SHAPE[1] {
            for c in 0..SHAPE[2] {
                for n in 0..SHAPE[3] {
                    for s in 0..SHAPE[4] {
                        for i in 0..instances {
                            out.push(([r, z, c, n, s], i));
                        }
                    }
                }
            }
        }
    }
    out
}

struct Lab {
    db: DatabaseConnection,
    /// A connection of its own for the phases run directly, so that its
    /// statement counts hold only theirs.
    direct: DatabaseConnection,
    jobs: Jobs,
    nodes: NodesService,
    pipeline: Arc<Pipeline>,
    viewer: Viewer,
    statements: Arc<AtomicU64>,
    node_deletes: Arc<AtomicU64>,
    /// The server's statements, timed while `profiling` is on.
    profile: Arc<StatementProfile>,
    stop: tokio::sync::watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

async fn lab(url: &str, dir: &std::path::Path) -> Lab {
    let args = [
        "trellis",
        "--data-dir",
        &dir.display().to_string(),
        "--database-url",
        url,
        "--db-max-connections",
        "16",
        "--task-poll-ms",
        "20",
    ];
    let cli = Cli::try_parse_from(args).expect("bench config");
    let config = cli.config;
    let mut db = trellis::db::connect(&config).await.expect("database");
    let profile = Arc::new(StatementProfile::default());
    let recorder = profile.clone();
    db.set_metric_callback(move |info| recorder.record(&info.statement.sql, info.elapsed));
    // The same settings as the server's pool (SQLite's busy timeout).
    let mut direct = trellis::db::connect(&config).await.expect("database");
    let statements = Arc::new(AtomicU64::new(0));
    let counter = statements.clone();
    let node_deletes = Arc::new(AtomicU64::new(0));
    let deletes = node_deletes.clone();
    direct.set_metric_callback(move |info| {
        counter.fetch_add(1, Ordering::Relaxed);
        if info.statement.sql.starts_with("DELETE FROM nodes") {
            deletes.fetch_add(1, Ordering::Relaxed);
        }
    });
    let user_id = Uuid::now_v7();
    db.execute_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "INSERT INTO users (id, username, password_hash, role, created_at, updated_at) \
         VALUES ($1, 'bench', 'x', 'MEMBER', $2, $2)",
        vec![user_id.into(), chrono::Utc::now().into()],
    ))
    .await
    .expect("bench user");
    let node_config = Arc::new(cli.domains.nodes.load().expect("node config"));
    let pipeline = Arc::new(Pipeline {
        config: node_config.clone(),
        engine: Arc::new(RuleEngine),
    });
    let mut registry = jobs::registry(
        &db,
        jobs::sweep::Retention {
            outbox: Duration::from_secs(3600),
            tasks: Duration::from_secs(7 * 86_400),
        },
    );
    pipeline::register(&mut registry, pipeline.clone());
    let jobs = Jobs::new(
        db.clone(),
        config.runner_settings(),
        registry,
        jobs::Backend::Embedded,
    );
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let handles = jobs.start(stop_rx);
    Lab {
        nodes: NodesService::new(db.clone(), jobs.clone(), node_config),
        db,
        direct,
        jobs,
        pipeline,
        viewer: Viewer {
            user_id,
            username: "bench".into(),
            role: Role::Member,
            session_id: Uuid::nil(),
        },
        statements,
        node_deletes,
        profile,
        stop,
        handles,
    }
}

impl Lab {
    /// Writes the resources in bulk and reconciles them in one pass (the
    /// tree is a fixture; the requests measured below go through tasks).
    async fn seed(&self, instances: usize) -> Vec<Uuid> {
        let now = chrono::Utc::now();
        let mut ids = Vec::new();
        let backend = self.db.get_database_backend();
        for chunk in leaves(instances).chunks(500) {
            let mut values: Vec<sea_orm::Value> = Vec::new();
            let mut rows = Vec::new();
            for (path, instance) in chunk {
                let id = Uuid::now_v7();
                ids.push(id);
                let i = values.len();
                rows.push(format!("(${}, ${}, 1, $1, $2, $3, $3)", i + 4, i + 5));
                values.push(id.into());
                values.push(attributes(*path, *instance, 0).into());
            }
            let mut all: Vec<sea_orm::Value> = vec![false.into(), true.into(), now.into()];
            all.extend(values);
            // Like a mutation stage: written while holding the scope.
            let txn = self.direct.begin().await.expect("begin");
            lock_scope(&txn).await;
            txn.execute_raw(Statement::from_sql_and_values(
                    backend,
                    format!(
                        "INSERT INTO resources (id, attributes, version, deleting, needs_mapping, created_at, updated_at) VALUES {}",
                        rows.join(", ")
                    ),
                    all,
                ))
                .await
                .expect("seed resources");
            txn.commit().await.expect("commit");
        }
        self.reconcile_directly().await;
        ids
    }

    async fn reconcile_directly(&self) -> [f64; 4] {
        let mut times = [0.0; 4];
        for (phase, time) in times.iter_mut().enumerate() {
            let started = Instant::now();
            self.reconcile_phase(phase).await;
            *time = started.elapsed().as_secs_f64();
        }
        times
    }

    /// Runs one phase directly; returns the statements it ran. The
    /// transaction first locks the `resources` scope's row, as a stage's
    /// generation check does, so it never overlaps a task's stage (the
    /// periodic reconciliation may be running).
    /// One phase run directly: its statements and its time in ms
    /// (commit included).
    async fn reconcile_phase(&self, phase: usize) -> (u64, f64) {
        let config = &self.pipeline.config;
        let engine = self.pipeline.engine.as_ref();
        let started = Instant::now();
        let txn = self.direct.begin().await.expect("begin");
        lock_scope(&txn).await;
        let before = self.statements.load(Ordering::Relaxed);
        reconcile::Phase::ALL[phase]
            .run(&txn, config, engine)
            .await
            .expect("phase");
        let statements = self.statements.load(Ordering::Relaxed) - before;
        txn.commit().await.expect("commit");
        let ms = (started.elapsed().as_secs_f64() * 10_000.0).round() / 10.0;
        (statements, ms)
    }

    /// Statements and time (ms) of each phase when one leaf's status
    /// changes, run directly (the runner adds a fixed few per stage around
    /// them).
    async fn leaf_statements(&self, id: Uuid) -> Vec<(u64, f64)> {
        let txn = self.direct.begin().await.expect("begin");
        lock_scope(&txn).await;
        txn.execute_raw(Statement::from_sql_and_values(
            txn.get_database_backend(),
            "UPDATE resources SET attributes = $1, needs_mapping = $2 WHERE id = $3",
            vec![
                attributes([0, 0, 0, 0, 0], 0, 3).into(),
                true.into(),
                id.into(),
            ],
        ))
        .await
        .expect("mark a leaf");
        txn.commit().await.expect("commit");
        let mut counts = Vec::new();
        for phase in 0..4 {
            counts.push(self.reconcile_phase(phase).await);
        }
        counts
    }

    async fn count(&self, sql: &str) -> i64 {
        let row = self
            .db
            .query_one_raw(Statement::from_string(self.db.get_database_backend(), sql))
            .await
            .expect("count")
            .expect("a row");
        row.try_get_by_index(0).expect("count value")
    }

    /// Submits an Update A and returns its task id.
    async fn update_a(&self, id: Uuid, health: i64) -> Uuid {
        let mut patch = Map::new();
        patch.insert("health".into(), json!(health));
        let enqueued = self
            .nodes
            .submit(
                &self.viewer,
                Operation::UpdateA {
                    resource_id: id,
                    patch,
                },
                Uuid::now_v7().to_string(),
            )
            .await
            .expect("submit");
        enqueued.task.id
    }

    async fn stop(self) {
        let _ = self.stop.send(true);
        for handle in self.handles {
            let _ = tokio::time::timeout(Duration::from_secs(5), handle).await;
        }
        self.db.close().await.ok();
        self.direct.close().await.ok();
    }
}

/// Holds the tree's lock and then the `resources` scope's row for the
/// transaction, in the order a stage takes them (the tree first, the scope
/// row when it records what it reconciled), so that writes made directly
/// never overlap a task's stage (the periodic reconciliation may be
/// running) and never deadlock with one.
async fn lock_scope(txn: &sea_orm::DatabaseTransaction) {
    // PostgreSQL's row lock; SQLite's write lock is held already.
    reconcile::lock_tree(txn).await.expect("lock the tree");
    txn.execute_raw(Statement::from_sql_and_values(
        txn.get_database_backend(),
        "INSERT INTO task_scopes (scope, generation, updated_at) VALUES ($1, 0, $2) \
         ON CONFLICT (scope) DO UPDATE SET updated_at = excluded.updated_at",
        vec!["resources".into(), chrono::Utc::now().into()],
    ))
    .await
    .expect("lock the scope");
}

/// Waits for the terminal `task.updated` events of `ids`; returns how many
/// succeeded and were superseded.
async fn wait_all(
    events: &mut tokio::sync::broadcast::Receiver<Arc<jobs::bus::Event>>,
    ids: &[Uuid],
) -> (usize, usize) {
    let mut pending: std::collections::HashSet<String> =
        ids.iter().map(ToString::to_string).collect();
    let (mut succeeded, mut superseded) = (0, 0);
    while !pending.is_empty() {
        let event = match tokio::time::timeout(Duration::from_secs(120), events.recv()).await {
            Ok(Ok(event)) => event,
            Ok(Err(tokio::sync::broadcast::error::RecvError::Lagged(_))) => continue,
            _ => panic!("tasks did not finish: {} left", pending.len()),
        };
        if event.topic != TASK_UPDATED || !pending.contains(&event.aggregate_id) {
            continue;
        }
        let payload = event.payload::<serde_json::Value>().unwrap_or_default();
        match payload["status"].as_str() {
            Some("SUCCEEDED") => succeeded += 1,
            Some("SUPERSEDED") => superseded += 1,
            Some("FAILED" | "CANCELLED") => panic!("task failed: {payload}"),
            _ => continue,
        }
        pending.remove(&event.aggregate_id);
    }
    (succeeded, superseded)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p / 100.0) * sorted.len() as f64)
        .floor()
        .min(sorted.len() as f64 - 1.0) as usize]
}

/// Sequential leaf updates: latency percentiles.
async fn sequential(lab: &Lab, ids: &[Uuid], updates: usize) -> (f64, f64) {
    let mut events = lab.jobs.bus().subscribe();
    let mut latencies = Vec::with_capacity(updates);
    for n in 0..updates {
        let id = ids[(n * 7919) % ids.len()];
        let started = Instant::now();
        let task = lab.update_a(id, (n % 4) as i64).await;
        wait_all(&mut events, &[task]).await;
        latencies.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    latencies.sort_by(f64::total_cmp);
    (percentile(&latencies, 50.0), percentile(&latencies, 99.0))
}

async fn run(postgres: bool, instances: usize, updates: usize, concurrent: usize) {
    let name = if postgres { "postgres" } else { "sqlite" };

    // Statements per task on a small tree, for comparison.
    let dir = tempfile::tempdir().expect("temp dir");
    let database = BenchDatabase::create(postgres, dir.path()).await;
    let small = lab(&database.url, dir.path()).await;
    let small_ids = small.seed(1).await;
    let small_nodes = small.count("SELECT COUNT(*) FROM nodes").await;
    let small_statements = small.leaf_statements(small_ids[0]).await;
    small.stop().await;
    database.drop_now().await;

    let dir = tempfile::tempdir().expect("temp dir");
    let database = BenchDatabase::create(postgres, dir.path()).await;
    let lab = lab(&database.url, dir.path()).await;
    let started = Instant::now();
    let ids = lab.seed(instances).await;
    let nodes = lab.count("SELECT COUNT(*) FROM nodes").await;
    println!(
        "{name}: seeded {} resources into {nodes} nodes in {:.1} s",
        ids.len(),
        started.elapsed().as_secs_f64()
    );

    let statements = lab.leaf_statements(ids[0]).await;
    println!(
        "{name}: (statements, ms) per phase (orphans, topology, properties, aggregated status) \
         for a leaf change, run directly: {statements:?} with {nodes} nodes, \
         {small_statements:?} with {small_nodes} nodes"
    );
    let (p50, p99) = sequential(&lab, &ids, updates).await;
    println!("{name}: leaf Update A, request → SUCCEEDED: p50 {p50:.1} ms, p99 {p99:.1} ms");

    // Concurrent updates spread over the tree.
    let mut events = lab.jobs.bus().subscribe();
    let started = Instant::now();
    let submissions = (0..concurrent).map(|n| {
        let id = ids[(n * 104_729) % ids.len()];
        lab.update_a(id, ((n + 1) % 4) as i64)
    });
    let tasks = futures_util::future::join_all(submissions).await;
    let accepted = started.elapsed().as_secs_f64();
    let (succeeded, superseded) = wait_all(&mut events, &tasks).await;
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "{name}: {concurrent} concurrent Update A: all accepted in {accepted:.2} s, all done in \
         {elapsed:.2} s ({:.0} updates/s; {succeeded} succeeded, {superseded} superseded)",
        concurrent as f64 / elapsed
    );

    // A zone's subtree: one statement, then the whole reconciliation.
    let zone_path: String = {
        let row = lab
            .db
            .query_one_raw(Statement::from_string(
                lab.db.get_database_backend(),
                "SELECT path FROM nodes WHERE class = 'zone' ORDER BY id LIMIT 1",
            ))
            .await
            .expect("zone")
            .expect("a zone");
        row.try_get("", "path").expect("path")
    };
    let (lower, upper) = trellis::nodes::plan::subtree_range(&zone_path);
    let subtree = lab
        .count(&format!(
            "SELECT COUNT(*) FROM nodes WHERE path >= '{lower}' AND path < '{upper}'"
        ))
        .await;
    let txn = lab.direct.begin().await.expect("begin");
    lock_scope(&txn).await;
    let started = Instant::now();
    let deletes_before = lab.node_deletes.load(Ordering::Relaxed);
    reconcile::delete_subtree(&txn, &zone_path)
        .await
        .expect("delete");
    let one_statement = started.elapsed().as_secs_f64() * 1000.0;
    let used = lab.node_deletes.load(Ordering::Relaxed) - deletes_before;
    txn.rollback().await.expect("rollback");
    println!(
        "{name}: deleting a subtree of {subtree} nodes: {used} DELETE statement(s), {one_statement:.0} ms"
    );
    let txn = lab.direct.begin().await.expect("begin");
    lock_scope(&txn).await;
    txn.execute_raw(Statement::from_sql_and_values(
        txn.get_database_backend(),
        "UPDATE resources SET deleting = $1, needs_mapping = $1 WHERE id IN \
             (SELECT rn.resource_id FROM resource_nodes rn JOIN nodes n ON n.id = rn.node_id \
              WHERE n.path = $2)",
        vec![true.into(), zone_path.clone().into()],
    ))
    .await
    .expect("mark deletes");
    txn.commit().await.expect("commit");
    let deleting = lab
        .count("SELECT COUNT(*) FROM resources WHERE deleting")
        .await;
    let times = lab.reconcile_directly().await;
    println!(
        "{name}: reconciling the delete of {deleting} resources: orphans {:.0} ms, topology {:.0} ms, \
         properties {:.0} ms, aggregated status {:.0} ms; {} nodes left",
        times[0] * 1000.0,
        times[1] * 1000.0,
        times[2] * 1000.0,
        times[3] * 1000.0,
        lab.count("SELECT COUNT(*) FROM nodes").await
    );
    lab.stop().await;
    database.drop_now().await;
}

// ------------------------------------------------ the task contract, through the API

/// Submits requests from any task.
#[derive(Clone)]
struct Submitter {
    nodes: NodesService,
    viewer: Viewer,
}

impl Submitter {
    async fn submit(&self, operation: Operation) -> Uuid {
        self.nodes
            .submit(&self.viewer, operation, Uuid::now_v7().to_string())
            .await
            .expect("submit")
            .task
            .id
    }

    async fn update_a(&self, id: Uuid, health: i64) -> Uuid {
        let mut patch = Map::new();
        patch.insert("health".into(), json!(health));
        self.submit(Operation::UpdateA {
            resource_id: id,
            patch,
        })
        .await
    }
}

/// Waits until no task is queued or running, checking the table every
/// 100 ms; panics when none has ended for two minutes.
async fn until_no_task_is_open(lab: &Lab) {
    let (mut last, mut since) = (i64::MAX, Instant::now());
    loop {
        let open = lab
            .count("SELECT COUNT(*) FROM tasks WHERE status IN ('QUEUED', 'RUNNING')")
            .await;
        if open == 0 {
            return;
        }
        if open < last {
            (last, since) = (open, Instant::now());
        }
        assert!(
            since.elapsed() < Duration::from_secs(120),
            "tasks stopped ending: {open} still open"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The leaf node's status of a resource, as the tree shows it.
async fn leaf_status(db: &DatabaseConnection, id: Uuid) -> Option<i64> {
    db.query_one_raw(Statement::from_sql_and_values(
        db.get_database_backend(),
        "SELECT n.status FROM nodes n JOIN resource_nodes rn ON rn.node_id = n.id \
         WHERE rn.resource_id = $1 AND n.class = 'instance'",
        vec![id.into()],
    ))
    .await
    .expect("leaf status")
    .map(|row| row.try_get::<i32>("", "status").expect("status").into())
}

/// Polls the tree until the resource's leaf shows `health`; the time it took.
async fn until_visible(db: &DatabaseConnection, id: Uuid, health: i64, since: Instant) -> f64 {
    loop {
        if leaf_status(db, id).await == Some(health) {
            return since.elapsed().as_secs_f64() * 1000.0;
        }
        assert!(
            since.elapsed() < Duration::from_secs(300),
            "{id} never showed {health}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Where the server's statements spend their time: per statement text (its
/// first 100 characters), how many ran and their total milliseconds, while
/// `on`. The time includes waiting for a lock or for SQLite's writer.
#[derive(Default)]
struct StatementProfile {
    on: std::sync::atomic::AtomicBool,
    seen: std::sync::Mutex<std::collections::HashMap<String, (u64, f64)>>,
}

impl StatementProfile {
    fn record(&self, sql: &str, elapsed: Duration) {
        if !self.on.load(Ordering::Relaxed) {
            return;
        }
        let key: String = sql.chars().take(100).collect();
        let mut seen = self.seen.lock().expect("profile");
        let entry = seen.entry(key).or_default();
        entry.0 += 1;
        entry.1 += elapsed.as_secs_f64() * 1000.0;
    }

    /// The `top` statements by total time, as lines.
    fn report(&self, top: usize) -> Vec<String> {
        let seen = self.seen.lock().expect("profile");
        let mut rows: Vec<_> = seen.iter().collect();
        rows.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
        rows.into_iter()
            .take(top)
            .map(|(sql, (count, total))| {
                format!(
                    "{total:9.1} ms {count:6}× {:6.2} ms  {sql}",
                    total / *count as f64
                )
            })
            .collect()
    }
}

/// Polls the tree and the task until the resource's leaf shows `health`:
/// the time it took, and when (ms after `since`) the task was first seen
/// with each number of stages done (index = stages done; NaN if never seen
/// at that count between two polls).
async fn until_visible_traced(
    db: &DatabaseConnection,
    id: Uuid,
    task: Uuid,
    health: i64,
    since: Instant,
) -> (f64, Vec<f64>) {
    let mut seen = vec![f64::NAN; pipeline::STAGES.len() + 1];
    loop {
        let row = db
            .query_one_raw(Statement::from_sql_and_values(
                db.get_database_backend(),
                "SELECT stages_done, status FROM tasks WHERE id = $1",
                vec![task.into()],
            ))
            .await
            .expect("task row")
            .expect("the task");
        let done: i32 = row.try_get("", "stages_done").expect("stages_done");
        let now = since.elapsed().as_secs_f64() * 1000.0;
        if let Some(slot) = seen.get_mut(done.max(0) as usize)
            && slot.is_nan()
        {
            *slot = now;
        }
        if leaf_status(db, id).await == Some(health) {
            return (now, seen);
        }
        assert!(
            since.elapsed() < Duration::from_secs(300),
            "{id} never showed {health}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Update A on `hot` at `rate` per second for `seconds`, and a marker update
/// on `marker` two seconds in: the marker's lag to the tree (ms), and the
/// rate achieved.
async fn sustained(
    lab: &Lab,
    submitter: &Submitter,
    hot: Uuid,
    marker: Uuid,
    marker_health: i64,
    rate: u32,
    seconds: u64,
) -> (f64, f64) {
    let stop_at = Instant::now() + Duration::from_secs(seconds);
    let load = {
        let submitter = submitter.clone();
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval(Duration::from_secs(1) / rate);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let in_flight = Arc::new(tokio::sync::Semaphore::new(64));
            let sent = Arc::new(AtomicU64::new(0));
            let started = Instant::now();
            let mut n = 0i64;
            while Instant::now() < stop_at {
                ticks.tick().await;
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let submitter = submitter.clone();
                let sent = sent.clone();
                n += 1;
                let health = n % 3;
                tokio::spawn(async move {
                    submitter.update_a(hot, health).await;
                    sent.fetch_add(1, Ordering::Relaxed);
                    drop(permit);
                });
            }
            let _ = in_flight.acquire_many(64).await;
            sent.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64()
        })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let since = Instant::now();
    submitter.update_a(marker, marker_health).await;
    let lag = until_visible(&lab.db, marker, marker_health, since).await;
    let achieved = load.await.expect("load");
    (lag, achieved)
}

/// Builds the tree through the API, then measures what a client sees:
/// (a) a leaf Update A until visible in the tree, (b) a marker's lag under
/// sustained updates of another leaf, (c) the build's resources/s.
/// Returns (p50 of a, lag of b at 400/s).
async fn through_the_api(
    postgres: bool,
    instances: usize,
    samples: usize,
    seconds: u64,
) -> (f64, f64) {
    let name = if postgres { "postgres" } else { "sqlite" };
    let dir = tempfile::tempdir().expect("temp dir");
    let database = BenchDatabase::create(postgres, dir.path()).await;
    let lab = lab(&database.url, dir.path()).await;
    let submitter = Submitter {
        nodes: lab.nodes.clone(),
        viewer: lab.viewer.clone(),
    };

    // (c) the build: every resource created by a request, 256 in flight.
    let started = Instant::now();
    let mut ids = Vec::new();
    for chunk in leaves(instances).chunks(256) {
        let creates = chunk.iter().map(|(path, instance)| {
            let submitter = submitter.clone();
            let attributes = match attributes(*path, *instance, 0) {
                Value::Object(map) => map,
                _ => unreachable!(),
            };
            async move { submitter.submit(Operation::Create { attributes }).await }
        });
        ids.extend(futures_util::future::join_all(creates).await);
    }
    let accepted = started.elapsed().as_secs_f64();
    // Read from the table: a pass ends up to a thousand tasks at once, more
    // events than the bus keeps for a slow listener.
    until_no_task_is_open(&lab).await;
    let built = started.elapsed().as_secs_f64();
    // A server idle after the build has published its events too: the
    // publisher catching up meanwhile would take its share of the machine
    // from the measurements below.
    let publishing = Instant::now();
    while jobs::outbox::unpublished(&lab.db)
        .await
        .expect("unpublished")
        > 0
    {
        assert!(
            publishing.elapsed() < Duration::from_secs(600),
            "the outbox never drained"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let published = publishing.elapsed().as_secs_f64();
    let nodes = lab.count("SELECT COUNT(*) FROM nodes").await;
    println!(
        "{name}: built {} resources into {nodes} nodes through the API in {built:.1} s \
         ({:.0} resources/s; all accepted in {accepted:.1} s; its events published \
         {published:.1} s later)",
        ids.len(),
        ids.len() as f64 / built
    );

    // (a) a leaf change until it shows in the tree.
    let mut latencies = Vec::with_capacity(samples);
    let mut timelines: Vec<Vec<f64>> = vec![Vec::new(); pipeline::STAGES.len() + 1];
    let mut accepted_ms = Vec::with_capacity(samples);
    lab.profile.on.store(true, Ordering::Relaxed);
    for n in 0..samples {
        let id = ids[(n * 7919 + 13) % ids.len()];
        let health = 1 + (n % 3) as i64;
        let since = Instant::now();
        let task = submitter.update_a(id, health).await;
        accepted_ms.push(since.elapsed().as_secs_f64() * 1000.0);
        let (latency, seen) = until_visible_traced(&lab.db, id, task, health, since).await;
        latencies.push(latency);
        for (stages_done, at) in seen.into_iter().enumerate() {
            if !at.is_nan() {
                timelines[stages_done].push(at);
            }
        }
        // Back to healthy, so the next sample's change is a change.
        submitter.update_a(id, 0).await;
        until_visible(&lab.db, id, 0, Instant::now()).await;
    }
    latencies.sort_by(f64::total_cmp);
    let (p50, p95) = (percentile(&latencies, 50.0), percentile(&latencies, 95.0));
    println!(
        "{name}: leaf Update A, request → visible in the tree: p50 {p50:.1} ms, p95 {p95:.1} ms \
         ({samples} samples)"
    );
    lab.profile.on.store(false, Ordering::Relaxed);
    println!(
        "{name}: the server's statements during (a), by total time (the bench's own polling included):"
    );
    for line in lab.profile.report(14) {
        println!("    {line}");
    }
    // Where the request's time goes: the submission, then when the task
    // was first seen with each number of stages done (medians).
    accepted_ms.sort_by(f64::total_cmp);
    let mut stage_line = format!("submitted {:.1}", percentile(&accepted_ms, 50.0));
    for (stages_done, mut times) in timelines.into_iter().enumerate() {
        if times.is_empty() {
            continue;
        }
        times.sort_by(f64::total_cmp);
        let label = match stages_done {
            0 => "queued",
            done => pipeline::STAGES[done - 1],
        };
        stage_line += &format!(", {label} {:.1}", percentile(&times, 50.0));
    }
    println!(
        "{name}: median ms from the request until the task showed each stage done: {stage_line}"
    );
    // The same phases run directly on this tree, without the runner: what
    // of the latency is the tree's, and what the task's bookkeeping.
    let phases = lab.leaf_statements(ids[0]).await;
    println!(
        "{name}: (statements, ms) per phase (orphans, topology, properties, aggregated status) \
         for a leaf change, run directly on the tree built through the API: {phases:?}"
    );

    // (b) sustained load on one leaf, a marker on another.
    let (hot, marker) = (ids[1], ids[ids.len() / 2]);
    let mut lag_at_400 = f64::NAN;
    for (round, rate) in [50u32, 200, 400].into_iter().enumerate() {
        let health = 1 + (round % 3) as i64;
        let (lag, achieved) = sustained(&lab, &submitter, hot, marker, health, rate, seconds).await;
        println!(
            "{name}: Update A at {rate}/s for {seconds} s (achieved {achieved:.0}/s): \
             a marker update 2 s in showed in the tree after {lag:.0} ms"
        );
        if rate == 400 {
            lag_at_400 = lag;
        }
    }
    lab.stop().await;
    database.drop_now().await;
    (p50, lag_at_400)
}

#[tokio::main]
async fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    let api_only = filter.iter().any(|f| f == "api-only");
    let seeded_only = filter.iter().any(|f| f == "seeded-only");
    let backends: Vec<&String> = filter
        .iter()
        .filter(|f| *f != "api-only" && *f != "seeded-only")
        .collect();
    let wanted =
        |name: &str| backends.is_empty() || backends.iter().any(|f| name.contains(f.as_str()));
    let updates = env_or("BENCH_UPDATES", 200usize);
    let concurrent = env_or("BENCH_CONCURRENT", 1000usize);
    let instances = env_or("BENCH_INSTANCES", 98usize);
    let samples = env_or("BENCH_VISIBLE_SAMPLES", 50usize);
    let seconds = env_or("BENCH_SUSTAINED_SECONDS", 20u64);
    let mut worst = (0.0f64, 0.0f64);
    for (postgres, name) in [(false, "sqlite"), (true, "postgres")] {
        if wanted(name) {
            if !api_only {
                run(postgres, instances, updates, concurrent).await;
            }
            if !seeded_only {
                let (p50, lag) = through_the_api(postgres, instances, samples, seconds).await;
                worst = (worst.0.max(p50), worst.1.max(lag));
            }
        }
    }
    // The worst backend's figures, for scripts.
    println!(
        "nodes_visible_p50_ms={:.1} nodes_marker_lag_ms_at_400={:.0}",
        worst.0, worst.1
    );
}
