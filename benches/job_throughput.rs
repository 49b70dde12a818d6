//! `cargo bench --bench job_throughput`
//!
//! End-to-end throughput of no-op jobs (enqueue → SUCCEEDED) through the
//! real job runner, in-process, and pickup latency (enqueue → start) at half
//! of that peak rate; for the Redis backend on PostgreSQL, the embedded
//! backend on SQLite and on PostgreSQL; and the same workload on BullMQ
//! (`benches/bullmq/bench.mjs`, run with Node against the same Redis at the
//! same concurrency). Not a test: it prints figures, the last line being
//! `trellis_redis_jobs_per_s=<n> bullmq_jobs_per_s=<m>`.
//!
//! Knobs: `BENCH_JOBS` (20000), `BENCH_CONCURRENCY` (64),
//! `BENCH_LATENCY_SECONDS` (5), `TRELLIS_TEST_PG_URL`, `TRELLIS_TEST_REDIS_URL`.
//! Needs PostgreSQL, Redis and Node (`npm install` in `benches/bullmq` is
//! run when `node_modules` is missing).

mod support;

use std::{
    process::Command,
    sync::Arc,
    time::{Duration, Instant},
};

use clap::Parser;
use entity::task;
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder};
use serde_json::json;
use trellis::{
    cli::Cli,
    jobs::{
        self, Jobs,
        handler::{Registry, StageError, StageRun, TaskHandler},
        model::{NewTask, Queue},
    },
};

use support::{BenchDatabase, env_or};

const KIND: &str = "bench.noop";

struct Noop;

#[async_trait::async_trait]
impl TaskHandler for Noop {
    fn kind(&self) -> &'static str {
        KIND
    }
    fn queue(&self) -> Queue {
        Queue::Short
    }
    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        vec!["run"]
    }
    async fn run_stage(&self, _run: &mut StageRun<'_>) -> Result<(), StageError> {
        Ok(())
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Setup {
    RedisPostgres,
    EmbeddedSqlite,
    EmbeddedPostgres,
}

impl Setup {
    fn name(self) -> &'static str {
        match self {
            Setup::RedisPostgres => "trellis redis+postgres",
            Setup::EmbeddedSqlite => "trellis embedded sqlite",
            Setup::EmbeddedPostgres => "trellis embedded postgres",
        }
    }
}

struct Figures {
    jobs_per_s: f64,
    half_rate: u64,
    p50_ms: f64,
    p99_ms: f64,
}

fn redis_url() -> String {
    std::env::var("TRELLIS_TEST_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((p / 100.0) * sorted.len() as f64)
        .floor()
        .min(sorted.len() as f64 - 1.0) as usize]
}

async fn succeeded(db: &sea_orm::DatabaseConnection) -> u64 {
    task::Entity::find()
        .filter(task::Column::Kind.eq(KIND))
        .filter(task::Column::Status.eq("SUCCEEDED"))
        .count(db)
        .await
        .expect("count")
}

/// Whether any bench job is still queued or running: two lookups in the
/// partial indexes of work in flight, however many jobs ran before.
async fn in_flight(db: &sea_orm::DatabaseConnection) -> bool {
    for status in ["QUEUED", "RUNNING"] {
        let any = task::Entity::find()
            .filter(task::Column::Status.eq(status))
            .filter(task::Column::Kind.eq(KIND))
            .one(db)
            .await
            .expect("look for work in flight");
        if any.is_some() {
            return true;
        }
    }
    false
}

/// Waits until every enqueued bench job has ended, checks that `total`
/// succeeded, and returns when the last one finished (its `finished_at`,
/// the commit that ended it). The check looks for work in flight every
/// 50 ms; counting the whole tasks table that often cost PostgreSQL a
/// quarter of this machine at 60,000 jobs, which the figures would have
/// charged to the runner.
async fn wait_for(db: &sea_orm::DatabaseConnection, total: u64) -> chrono::DateTime<chrono::Utc> {
    while in_flight(db).await {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(succeeded(db).await, total, "every bench job succeeds");
    task::Entity::find()
        .filter(task::Column::Kind.eq(KIND))
        .order_by_desc(task::Column::FinishedAt)
        .one(db)
        .await
        .expect("last task")
        .and_then(|task| task.finished_at)
        .expect("finished_at")
}

fn noop_batch(n: usize) -> Vec<NewTask> {
    (0..n)
        .map(|_| NewTask::new(KIND, Queue::Short, json!({})))
        .collect()
}

async fn run_trellis(setup: Setup, total: usize, concurrency: usize, latency_secs: u64) -> Figures {
    let dir = tempfile::tempdir().expect("temp dir");
    let database = BenchDatabase::create(setup != Setup::EmbeddedSqlite, dir.path()).await;
    let url = database.url.clone();
    let mut args = vec![
        "trellis".to_owned(),
        "--data-dir".into(),
        dir.path().display().to_string(),
        "--database-url".into(),
        url,
        "--queue-short-concurrency".into(),
        concurrency.to_string(),
        "--db-max-connections".into(),
        "16".into(),
        "--task-poll-ms".into(),
        "20".into(),
    ];
    if setup == Setup::RedisPostgres {
        args.extend(["--redis-url".into(), redis_url()]);
    }
    let config = Cli::try_parse_from(args).expect("bench config").config;
    let db = trellis::db::connect(&config).await.expect("database");
    let backend = match setup {
        Setup::RedisPostgres => {
            let client = ::redis::Client::open(redis_url()).expect("redis url");
            let commands = ::redis::aio::ConnectionManager::new(client.clone())
                .await
                .expect("redis");
            jobs::Backend::Redis {
                client,
                commands,
                prefix: format!("trellis-bench-{}", uuid::Uuid::new_v4().simple()),
            }
        }
        _ => jobs::Backend::Embedded,
    };
    let mut registry: Registry = jobs::registry(
        &db,
        jobs::sweep::Retention {
            outbox: Duration::from_secs(3600),
            tasks: Duration::from_secs(7 * 86_400),
        },
    );
    registry.register(Arc::new(Noop));
    let runner = Jobs::new(db.clone(), config.runner_settings(), registry, backend);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let handles = runner.start(stop_rx);

    // Peak throughput: everything enqueued in batches of 1000 while workers run.
    let started = Instant::now();
    let started_at = chrono::Utc::now();
    for offset in (0..total).step_by(1000) {
        runner
            .enqueue_batch(noop_batch((total - offset).min(1000)))
            .await
            .expect("enqueue");
    }
    let enqueued_in = started.elapsed();
    let finished_at = wait_for(&db, total as u64).await;
    let elapsed = (finished_at - started_at)
        .num_microseconds()
        .expect("elapsed") as f64
        / 1e6;
    let jobs_per_s = total as f64 / elapsed;
    println!(
        "  ({}: the {total} enqueues took {:.2} s of that)",
        setup.name(),
        enqueued_in.as_secs_f64()
    );

    // Pickup latency at half of that rate, in 10 ms ticks.
    let per_tick = ((jobs_per_s / 2.0) / 100.0).round().max(1.0) as usize;
    let ticks = (latency_secs * 100) as usize;
    let begin = Instant::now();
    let marker = chrono::Utc::now();
    for tick in 0..ticks {
        runner
            .enqueue_batch(noop_batch(per_tick))
            .await
            .expect("enqueue");
        let next = begin + Duration::from_millis(10 * (tick as u64 + 1));
        tokio::time::sleep_until(next.into()).await;
    }
    wait_for(&db, (total + ticks * per_tick) as u64).await;
    let rows = task::Entity::find()
        .filter(task::Column::Kind.eq(KIND))
        .filter(task::Column::CreatedAt.gte(marker))
        .all(&db)
        .await
        .expect("rows");
    let mut pickups: Vec<f64> = rows
        .iter()
        .filter_map(|t| Some((t.started_at? - t.created_at).num_microseconds()? as f64 / 1000.0))
        .collect();
    pickups.sort_by(|a, b| a.total_cmp(b));

    let _ = stop_tx.send(true);
    for handle in handles {
        let _ = tokio::time::timeout(Duration::from_secs(5), handle).await;
    }
    db.close().await.ok();
    database.drop_now().await;
    Figures {
        jobs_per_s,
        half_rate: (per_tick * 100) as u64,
        p50_ms: percentile(&pickups, 50.0),
        p99_ms: percentile(&pickups, 99.0),
    }
}

fn run_bullmq(total: usize, concurrency: usize, latency_secs: u64) -> Option<Figures> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/bullmq");
    if !std::path::Path::new(dir).join("node_modules").exists() {
        let status = Command::new("npm")
            .args(["install", "--no-audit", "--no-fund"])
            .current_dir(dir)
            .status()
            .ok()?;
        if !status.success() {
            eprintln!("npm install in benches/bullmq failed; skipping BullMQ");
            return None;
        }
    }
    let output = Command::new("node")
        .arg("bench.mjs")
        .current_dir(dir)
        .env("JOBS", total.to_string())
        .env("CONCURRENCY", concurrency.to_string())
        .env("LATENCY_SECONDS", latency_secs.to_string())
        .env("REDIS_URL", redis_url())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout);
    let line = text.lines().last()?;
    let value: serde_json::Value = serde_json::from_str(line).ok()?;
    Some(Figures {
        jobs_per_s: value["jobs_per_s"].as_f64()?,
        half_rate: value["half_rate"].as_u64()?,
        p50_ms: value["p50_ms"].as_f64()?,
        p99_ms: value["p99_ms"].as_f64()?,
    })
}

fn print(name: &str, figures: &Figures) {
    println!(
        "{name:<28} {:>10.0} jobs/s   pickup at {:>5} jobs/s: p50 {:>7.1} ms  p99 {:>7.1} ms",
        figures.jobs_per_s, figures.half_rate, figures.p50_ms, figures.p99_ms
    );
}

fn main() {
    let total: usize = env_or("BENCH_JOBS", 20_000);
    let concurrency: usize = env_or("BENCH_CONCURRENCY", 64);
    let latency_secs: u64 = env_or("BENCH_LATENCY_SECONDS", 5);
    // `cargo bench` passes `--bench`; any other argument filters setups by name.
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f.as_str()));

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    println!(
        "job_throughput: {total} no-op jobs, concurrency {concurrency}, latency phase {latency_secs} s at half the peak rate"
    );
    let mut redis_figures = None;
    for setup in [
        Setup::RedisPostgres,
        Setup::EmbeddedSqlite,
        Setup::EmbeddedPostgres,
    ] {
        if !wanted(setup.name()) {
            continue;
        }
        let figures = runtime.block_on(run_trellis(setup, total, concurrency, latency_secs));
        print(setup.name(), &figures);
        if setup == Setup::RedisPostgres {
            redis_figures = Some(figures);
        }
    }
    let bullmq = if wanted("bullmq") {
        run_bullmq(total, concurrency, latency_secs)
    } else {
        None
    };
    if let Some(figures) = &bullmq {
        print("bullmq (node, same redis)", figures);
    }
    println!(
        "trellis_redis_jobs_per_s={} bullmq_jobs_per_s={}",
        redis_figures
            .map(|f| format!("{:.0}", f.jobs_per_s))
            .unwrap_or_else(|| "n/a".into()),
        bullmq
            .map(|f| format!("{:.0}", f.jobs_per_s))
            .unwrap_or_else(|| "n/a".into()),
    );
}
