//! `cargo bench --bench search_latency`
//!
//! The ranked search (`search(query:)`) on `BENCH_ITEMS` items (100,000) of
//! one user, on SQLite (FTS5) and on PostgreSQL (tsvector + GIN), through
//! the same [`Searcher`] the API uses, in-process. The corpus is generated
//! (seeded): titles of 6 and bodies of 60 words drawn from 2,000 made-up
//! words with a Zipf-like skew, so one-letter prefixes match most items
//! and whole rare words a handful. Each query runs `BENCH_RUNS` (20) times
//! in a row; reported: p50, p99 and max latency, and how many runs the
//! default limit (`TRELLIS_SEARCH_TIMEOUT_MS` 2000) would have stopped
//! (the bench itself runs with a 60 s limit so slow plans show their
//! real cost).
//!
//! Not a test: it prints figures. Knobs: `BENCH_ITEMS`, `BENCH_RUNS`,
//! `TRELLIS_TEST_PG_URL`.

mod support;

use std::time::{Duration, Instant};

use clap::Parser;
use sea_orm::{ConnectionTrait, DatabaseConnection, Statement};
use support::{BenchDatabase, env_or};
use trellis::{
    cli::Cli,
    feeds::{search::ranked_items, service::FeedsService},
    fulltext::{SearchLimits, Searcher},
};
use uuid::Uuid;

const QUERIES: [&str; 6] = ["a", "b", "a b c", "kalo", "kalomi", "zuvexa rimo"];

/// A small deterministic generator (xorshift), so every run has the same corpus.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Index in `0..n`, skewed to small ones (roughly Zipf).
    fn skewed(&mut self, n: usize) -> usize {
        let u = (self.next() % 1_000_000) as f64 / 1_000_000.0;
        ((n as f64).powf(u) as usize).saturating_sub(1).min(n - 1)
    }
}

fn vocabulary() -> Vec<String> {
    const SYLLABLES: [&str; 20] = [
        "ka", "lo", "mi", "zu", "ve", "xa", "ri", "mo", "ne", "ta", "bi", "co", "du", "fe", "ga",
        "hu", "ji", "pe", "so", "wy",
    ];
    let mut words = Vec::with_capacity(2000);
    'outer: for a in SYLLABLES {
        for b in SYLLABLES {
            for c in SYLLABLES {
                words.push(format!("{a}{b}{c}"));
                if words.len() == 1990 {
                    break 'outer;
                }
            }
        }
    }
    // A few short common words, so one-letter prefixes match broadly.
    words.splice(
        0..0,
        [
            "a", "and", "be", "by", "at", "as", "ball", "cat", "can", "bee",
        ]
        .map(String::from),
    );
    words
}

fn sentence(rng: &mut Rng, words: &[String], n: usize) -> String {
    (0..n)
        .map(|_| words[rng.skewed(words.len())].as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

async fn fill(db: &DatabaseConnection, user: Uuid, feed: i64, items: usize) {
    let words = vocabulary();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let backend = db.get_database_backend();
    let now = chrono::Utc::now();
    const BATCH: usize = 500;
    for start in (0..items).step_by(BATCH) {
        let rows = (start..(start + BATCH).min(items)).collect::<Vec<_>>();
        let mut values = Vec::new();
        let mut tuples = Vec::new();
        for (i, n) in rows.iter().enumerate() {
            let p = i * 7;
            // created_at and updated_at are the publication time too.
            tuples.push(format!(
                "(${}, ${}, ${}, ${}, ${}, ${}, ${}, TRUE, FALSE, ${}, ${}, ${}, ${})",
                p + 1,
                p + 2,
                p + 3,
                p + 4,
                p + 5,
                p + 6,
                p + 7,
                p + 7,
                p + 7,
                // The search text is the (plain) title and content.
                p + 4,
                p + 5
            ));
            values.push(user.into());
            values.push(feed.into());
            values.push(format!("g{n}").into());
            values.push(sentence(&mut rng, &words, 6).into());
            values.push(sentence(&mut rng, &words, 60).into());
            values.push(format!("h{n}").into());
            values.push((now - chrono::Duration::seconds(*n as i64)).into());
        }
        let sql = format!(
            "INSERT INTO items (user_id, feed_id, guid, title, content, content_hash, pub_date, \
             unread, starred, created_at, updated_at, search_title, search_body) VALUES {}",
            tuples.join(", ")
        );
        db.execute_raw(Statement::from_sql_and_values(backend, sql, values))
            .await
            .expect("insert items");
    }
    if backend == sea_orm::DatabaseBackend::Postgres {
        db.execute_unprepared("VACUUM ANALYZE items")
            .await
            .expect("analyze");
    } else {
        db.execute_unprepared("ANALYZE").await.expect("analyze");
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1]
}

async fn run(postgres: bool, items: usize, runs: usize) -> Vec<(String, Duration)> {
    let dir = tempfile::tempdir().expect("temp dir");
    let database = BenchDatabase::create(postgres, dir.path()).await;
    let args = [
        "trellis",
        "--data-dir",
        &dir.path().display().to_string(),
        "--database-url",
        &database.url,
    ];
    let config = Cli::try_parse_from(args).expect("bench config").config;
    let db = trellis::db::connect(&config).await.expect("database");
    let backend = db.get_database_backend();
    let name = if postgres { "postgres" } else { "sqlite" };
    let user = Uuid::now_v7();
    db.execute_raw(Statement::from_sql_and_values(
        backend,
        "INSERT INTO users (id, username, password_hash, role, created_at, updated_at) \
         VALUES ($1, 'bench', 'x', 'MEMBER', $2, $2)",
        vec![user.into(), chrono::Utc::now().into()],
    ))
    .await
    .expect("bench user");
    let service = FeedsService::new(db.clone());
    let group = service.default_group(user).await.expect("group");
    let feed: i64 = db
        .query_one_raw(Statement::from_sql_and_values(
            backend,
            "INSERT INTO feeds (user_id, group_id, name, link, suspended, created_at, updated_at) \
             VALUES ($1, $2, 'bench', 'https://bench.example/feed', FALSE, $3, $3) RETURNING id",
            vec![user.into(), group.id.into(), chrono::Utc::now().into()],
        ))
        .await
        .expect("bench feed")
        .expect("a row")
        .try_get("", "id")
        .expect("id");
    let filling = Instant::now();
    fill(&db, user, feed, items).await;
    println!(
        "{name}: {items} items stored in {:.1} s",
        filling.elapsed().as_secs_f64()
    );

    let searcher = Searcher::new(
        db.clone(),
        SearchLimits {
            timeout: Duration::from_secs(60),
            concurrency: 4,
        },
    );
    let default_limit = SearchLimits::default().timeout;
    let mut medians = Vec::new();
    for query in QUERIES {
        let mut times = Vec::with_capacity(runs);
        let mut found = 0;
        for _ in 0..runs {
            let started = Instant::now();
            found = ranked_items(&searcher, user, query, 50)
                .await
                .expect("search")
                .len();
            times.push(started.elapsed());
        }
        times.sort();
        let over = times.iter().filter(|t| **t > default_limit).count();
        let p50 = percentile(&times, 0.5);
        println!(
            "{name}: search {query:?}: {found} items; p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; \
             over the default {} ms limit: {over}/{runs}",
            p50.as_secs_f64() * 1e3,
            percentile(&times, 0.99).as_secs_f64() * 1e3,
            times[times.len() - 1].as_secs_f64() * 1e3,
            default_limit.as_millis(),
        );
        medians.push((format!("{name}_{}", query.replace(' ', "_")), p50));
    }

    db.close().await.ok();
    database.drop_now().await;
    medians
}

#[tokio::main]
async fn main() {
    let items = env_or("BENCH_ITEMS", 100_000usize);
    let runs = env_or("BENCH_RUNS", 20usize).max(1);
    let mut summary = Vec::new();
    for postgres in [false, true] {
        summary.extend(run(postgres, items, runs).await);
    }
    println!(
        "{}",
        summary
            .iter()
            .map(|(name, p50)| format!("{name}_p50_ms={:.2}", p50.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(" ")
    );
}
