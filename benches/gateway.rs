//! `cargo bench --bench gateway`
//!
//! Two measurements of the provider gateway (issue 21):
//!
//! 1. **The public metadata cache**: `BENCH_LOOKUPS` (10,000) lookups over
//!    `BENCH_KEYS` (4,000) distinct requests drawn with a Zipf
//!    distribution (s = 1.1), payloads of 1–64 KiB with one in fifty of
//!    1 MiB, through `MetadataCache` (1,024 entries and 32 MiB). Reported:
//!    hit rate, p50/p99 of a lookup (a miss includes building and
//!    inserting its payload), and the most bytes ever held (never above
//!    32 MiB).
//! 2. **Confirmed events**: `BENCH_EVENTS` (1,000) progress events for
//!    `BENCH_USERS` (100) users (two titles each, progress rising), through
//!    the real delivery task on the real runner and an SQLite database,
//!    against a loopback AniList fake that makes `BENCH_AMBIGUOUS_PCT` (5)
//!    per cent of writes ambiguous: applied, then answered 500. Reported:
//!    upstream writes per confirmed event (goal exactly 1.00: an ambiguous
//!    write is verified by read-back, not repeated), duplicates (a write
//!    of a value already applied; goal 0) and events per second.
//!
//! Not a test: it prints figures. The last line is
//! `gateway_writes_per_event=<x> gateway_duplicates=<n>`.

mod support;

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{Router, body::Bytes, extract::State, http::HeaderMap, response::IntoResponse};
use chrono::Utc;
use clap::Parser;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sea_orm::{ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, Set};
use serde_json::{Value, json};
use support::{BenchDatabase, env_or};
use trellis::{
    auth::{Viewer, keys::ServerSecret},
    cli::Cli,
    gateway::{
        action::Action,
        anilist::AniList,
        cache::{Fingerprint, MetadataCache},
        cooldown::Cooldowns,
        delivery::DeliverHandler,
        events::{Budgets, Events},
        kavita::Kavita,
        links::Links,
        provider::{Account, ProviderKind},
        saved::SavedManifest,
        service::{GatewayService, Parts, Providers},
    },
    jobs::{self, Jobs, handler::Registry},
};
use uuid::Uuid;

const CACHE_BYTES: usize = 32 * 1024 * 1024;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((p / 100.0) * sorted.len() as f64)
        .floor()
        .min(sorted.len() as f64 - 1.0) as usize]
}

/// A Zipf sampler over `1..=n` (inverse of the cumulative weights).
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: usize, s: f64) -> Self {
        let mut total = 0.0;
        let cumulative = (1..=n)
            .map(|k| {
                total += 1.0 / (k as f64).powf(s);
                total
            })
            .collect::<Vec<_>>();
        Zipf {
            cumulative: cumulative.iter().map(|c| c / total).collect(),
        }
    }

    fn sample(&self, rng: &mut StdRng) -> usize {
        let u: f64 = rng.random();
        self.cumulative.partition_point(|c| *c < u)
    }
}

fn cache_bench() {
    let lookups: usize = env_or("BENCH_LOOKUPS", 10_000);
    let keys: usize = env_or("BENCH_KEYS", 4_000);
    let zipf = Zipf::new(keys, 1.1);
    let mut rng = StdRng::seed_from_u64(21);
    let mut cache = MetadataCache::default();
    let mut latencies = Vec::with_capacity(lookups);
    let (mut hits, mut most_bytes) = (0usize, 0usize);
    let now = Utc::now();
    for _ in 0..lookups {
        let key = zipf.sample(&mut rng);
        let started = Instant::now();
        let id = key.to_string();
        let fingerprint = Fingerprint::new(ProviderKind::Anilist, "title", [("id", id.as_str())]);
        if cache.get(&fingerprint, now).is_some() {
            hits += 1;
        } else {
            let size = if key % 50 == 7 {
                1024 * 1024
            } else {
                1024 + (key * 7919) % (63 * 1024)
            };
            let payload: Arc<str> = "x".repeat(size).into();
            cache.insert(fingerprint, payload, Duration::from_secs(3600), now);
        }
        latencies.push(started.elapsed().as_secs_f64() * 1e6);
        most_bytes = most_bytes.max(cache.usage().bytes);
    }
    latencies.sort_by(f64::total_cmp);
    let usage = cache.usage();
    println!(
        "cache: {lookups} lookups over {keys} keys (Zipf 1.1): hit rate {:.1}%, p50 {:.1} µs, p99 {:.1} µs, \
         most bytes held {:.1} MiB (cap 32 MiB), now {} entries / {:.1} MiB",
        100.0 * hits as f64 / lookups as f64,
        percentile(&latencies, 50.0),
        percentile(&latencies, 99.0),
        most_bytes as f64 / 1048576.0,
        usage.entries,
        usage.bytes as f64 / 1048576.0,
    );
    assert!(most_bytes <= CACHE_BYTES, "the cache held more than 32 MiB");
}

/// The AniList fake: tokens `tok-<id>`, list entries, and what was written.
#[derive(Default)]
struct Fake {
    entries: Mutex<HashMap<(i64, i64), i64>>,
    /// (user, media, progress) → how many writes applied it.
    applied: Mutex<HashMap<(i64, i64, i64), u64>>,
    writes: AtomicU64,
    ambiguous_every: u64,
}

async fn anilist(
    State(fake): State<Arc<Fake>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let limits = [("x-ratelimit-limit", "90"), ("x-ratelimit-remaining", "60")];
    let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let query = request["query"].as_str().unwrap_or_default();
    let vars = &request["variables"];
    let user: Option<i64> = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer tok-"))
        .and_then(|id| id.parse().ok());
    let Some(user) = user else {
        return (
            axum::http::StatusCode::BAD_REQUEST,
            limits,
            axum::Json(json!({ "errors": [{ "message": "Invalid token" }] })),
        );
    };
    if query.contains("SaveMediaListEntry") {
        let media = vars["mediaId"].as_i64().unwrap_or_default();
        let progress = vars["progress"].as_i64().unwrap_or_default();
        let n = fake.writes.fetch_add(1, Ordering::SeqCst) + 1;
        fake.entries.lock().unwrap().insert((user, media), progress);
        *fake
            .applied
            .lock()
            .unwrap()
            .entry((user, media, progress))
            .or_default() += 1;
        if fake.ambiguous_every > 0 && n % fake.ambiguous_every == 0 {
            return (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                limits,
                axum::Json(json!({ "errors": [{ "message": "Internal Server Error" }] })),
            );
        }
        return (
            axum::http::StatusCode::OK,
            limits,
            axum::Json(
                json!({ "data": { "SaveMediaListEntry": { "id": media, "progress": progress } } }),
            ),
        );
    }
    if query.contains("MediaList(") {
        let media = vars["mediaId"].as_i64().unwrap_or_default();
        return match fake.entries.lock().unwrap().get(&(user, media)) {
            Some(progress) => (
                axum::http::StatusCode::OK,
                limits,
                axum::Json(
                    json!({ "data": { "MediaList": { "id": media, "status": "CURRENT", "progress": progress } } }),
                ),
            ),
            None => (
                axum::http::StatusCode::NOT_FOUND,
                limits,
                axum::Json(
                    json!({ "errors": [{ "message": "Not Found.", "status": 404 }], "data": { "MediaList": null } }),
                ),
            ),
        };
    }
    (
        axum::http::StatusCode::OK,
        limits,
        axum::Json(
            json!({ "data": { "Viewer": { "id": user, "mediaListOptions": { "scoreFormat": "POINT_100" } } } }),
        ),
    )
}

async fn events_bench() -> (f64, u64) {
    let total: usize = env_or("BENCH_EVENTS", 1_000);
    let users: usize = env_or("BENCH_USERS", 100);
    let ambiguous_pct: u64 = env_or("BENCH_AMBIGUOUS_PCT", 5);
    let fake = Arc::new(Fake {
        ambiguous_every: 100u64.checked_div(ambiguous_pct).unwrap_or(0),
        ..Fake::default()
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr: SocketAddr = listener.local_addr().expect("addr");
    let router = Router::new().fallback(anilist).with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, router).await });

    let dir = tempfile::tempdir().expect("temp dir");
    let postgres = env_or("BENCH_POSTGRES", 0u8) == 1;
    let database = BenchDatabase::create(postgres, dir.path()).await;
    let cli = Cli::try_parse_from([
        "trellis".to_owned(),
        "--data-dir".into(),
        dir.path().display().to_string(),
        "--database-url".into(),
        database.url.clone(),
        "--task-poll-ms".into(),
        "20".into(),
        "--anilist-api-url".into(),
        format!("http://{addr}/graphql"),
        "--anilist-requests-per-minute".into(),
        "600".into(),
    ])
    .expect("bench config");
    let config = cli.config;
    let db = trellis::db::connect(&config).await.expect("database");
    let secret = Arc::new(ServerSecret::load(&config).expect("server secret"));
    let cooldowns = Cooldowns::new(db.clone());
    let providers = Providers::new(
        Kavita::new(None, None, cooldowns.clone()).expect("kavita"),
        AniList::new(&cli.domains.gateway, cooldowns.clone()).expect("anilist"),
    );
    let links = Links::new(db.clone(), secret);
    let events = Events::new(db.clone(), Budgets::default());
    let mut registry = Registry::default();
    registry.register(Arc::new(DeliverHandler {
        events: events.clone(),
        providers: providers.clone(),
        links: links.clone(),
    }));
    let runner = Jobs::new(
        db.clone(),
        config.runner_settings(),
        registry,
        jobs::Backend::Embedded,
    );
    let service = GatewayService::new(
        Parts {
            admission: SavedManifest::current(&providers),
            providers,
            links: links.clone(),
            cooldowns,
            events,
            public_url: Default::default(),
        },
        runner.clone(),
    );
    let mut viewers = Vec::with_capacity(users);
    for n in 0..users {
        let id = Uuid::now_v7();
        entity::user::Entity::insert(entity::user::ActiveModel {
            id: Set(id),
            username: Set(format!("reader{n}")),
            password_hash: Set("!".into()),
            role: Set(entity::user::Role::Member),
            created_at: Set(Utc::now()),
            updated_at: Set(Utc::now()),
        })
        .exec(&db)
        .await
        .expect("user");
        let account = Account {
            remote_id: Some((n + 1).to_string()),
            name: Some(format!("reader{n}")),
        };
        links
            .save(
                id,
                ProviderKind::Anilist,
                &format!("tok-{}", n + 1),
                &account,
                None,
            )
            .await
            .expect("link");
        viewers.push(Viewer {
            user_id: id,
            username: format!("reader{n}"),
            role: entity::user::Role::Member,
            session_id: Uuid::now_v7(),
        });
    }
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let handles = runner.start(stop_rx);
    let started = Instant::now();
    let per_user = total / users;
    for step in 0..per_user {
        for viewer in &viewers {
            let media = 1000 + (step % 2) as i64;
            let chapters = (step / 2 + 1) as u32;
            service
                .submit(
                    viewer,
                    ProviderKind::Anilist,
                    &media.to_string(),
                    Action::Progress { chapters },
                    None,
                )
                .await
                .expect("admitted");
        }
    }
    let admitted = (per_user * users) as u64;
    loop {
        let confirmed = entity::gateway_event::Entity::find()
            .filter(entity::gateway_event::Column::Status.eq("CONFIRMED"))
            .count(&db)
            .await
            .expect("count");
        if confirmed >= admitted {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(1200),
            "events did not confirm: {confirmed} of {admitted}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let _ = stop.send(true);
    for handle in handles {
        let _ = handle.await;
    }
    let writes = fake.writes.load(Ordering::SeqCst);
    let duplicates: u64 = fake
        .applied
        .lock()
        .unwrap()
        .values()
        .map(|n| n.saturating_sub(1))
        .sum();
    let per_event = writes as f64 / admitted as f64;
    drop(db);
    database.drop_now().await;
    println!(
        "events: {admitted} progress events for {users} users, {ambiguous_pct}% ambiguous writes: \
         {writes} upstream writes ({per_event:.2} per confirmed event), {duplicates} duplicates, \
         {:.0} events/s ({elapsed:.1} s)",
        admitted as f64 / elapsed
    );
    (per_event, duplicates)
}

fn main() {
    cache_bench();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (per_event, duplicates) = runtime.block_on(events_bench());
    println!("gateway_writes_per_event={per_event:.2} gateway_duplicates={duplicates}");
}
