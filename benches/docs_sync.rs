//! `cargo bench --bench docs_sync`
//!
//! The docs mirror's sync engine through the real Notion adapter against a
//! fake Notion workspace of `BENCH_DOCS` documents (5,000: pages under
//! fifty roots, twenty databases with their rows, one image on every tenth
//! page with a few shared) served on loopback with the rate limit set high
//! (`TRELLIS_NOTION_QPS`-equivalent 10,000). A full run, then an
//! incremental run after editing ten pages.
//!
//! Reported: the requests the full run sent against the minimum it needs
//! (one search pass, one Markdown fetch per page and row, one query page
//! per database, one download per distinct asset), CPU time per document
//! (the process's, the fake server included), peak RSS, and the requests
//! of the incremental run (the search pages down to the checkpoint plus
//! about ten fetches). The last line is
//! `docs_full_requests=<n> docs_min_requests=<m> docs_incremental_requests=<k>`.
//!
//! Not a test: it prints figures. Knobs: `BENCH_DOCS`, `BENCH_POSTGRES=1`
//! (PostgreSQL at `TRELLIS_TEST_PG_URL` instead of SQLite).

mod support;

use std::{
    collections::HashMap,
    sync::{
        Arc, RwLock,
        atomic::{AtomicU64, Ordering},
    },
    time::Instant,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{Method, StatusCode, Uri},
    response::{IntoResponse, Response},
};
use migration::{Migrator, MigratorTrait};
use serde_json::{Value, json};
use support::{BenchDatabase, env_or};
use trellis::{
    docs::{
        engine::{Engine, EngineConfig, SystemClock},
        notion::{NotionAdapter, NotionConfig},
    },
    httpc::{Destination, HttpClient, HttpSettings},
};
use url::Url;

const PAGE_SIZE: usize = 100;
const DATABASES: usize = 20;
const ROOTS: usize = 50;
const EDITED: usize = 10;

/// The fake workspace and what was asked of it.
#[derive(Default)]
struct Workspace {
    /// Search results, newest edit first.
    objects: Vec<Value>,
    markdown: HashMap<String, String>,
    rows: HashMap<String, Vec<Value>>,
    files: HashMap<String, Vec<u8>>,
}

#[derive(Default)]
struct Fake {
    workspace: RwLock<Workspace>,
    requests: AtomicU64,
}

fn id(n: usize) -> String {
    format!("{n:08x}-0000-4000-8000-{n:012x}")
}

fn title(text: &str) -> Value {
    json!({"title": {"id": "title", "type": "title", "title": [{"type": "text", "text": {"content": text}, "plain_text": text}]}})
}

fn page(n: usize, name: &str, edited: &str, parent: Value) -> Value {
    json!({"object": "page", "id": id(n), "created_time": edited, "last_edited_time": edited,
           "in_trash": false, "archived": false, "parent": parent,
           "url": format!("https://www.notion.so/{name}-{}", id(n).replace('-', "")),
           "properties": title(name)})
}

/// The workspace: its documents, and the minimum requests a full run needs.
fn generate(docs: usize, base: &Url) -> (Workspace, u64) {
    let mut workspace = Workspace::default();
    let edited = "2026-11-30T12:00:00.000Z";
    let rows_total = docs / 5;
    let pages = docs - rows_total - DATABASES;
    let mut assets = 0u64;
    for n in 0..pages {
        let parent = if n < ROOTS {
            json!({"type": "workspace", "workspace": true})
        } else {
            json!({"type": "page_id", "page_id": id(n % ROOTS)})
        };
        workspace
            .objects
            .push(page(n, &format!("Page {n}"), edited, parent));
        let mut body = format!("# Page {n}\n\nSome text about page {n}.\n");
        if n % 10 == 0 {
            // Every other image is shared by two pages: one download.
            let file = format!("img-{}.png", n / 20);
            if !workspace.files.contains_key(&file) {
                assets += 1;
                let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
                png.extend_from_slice(file.as_bytes());
                workspace.files.insert(file.clone(), png);
            }
            body.push_str(&format!(
                "\n![diagram]({base}files/{file}?X-Amz-Signature=bench)\n"
            ));
        }
        workspace.markdown.insert(id(n), body);
    }
    let mut query_pages = 0u64;
    for d in 0..DATABASES {
        let source = pages + d;
        let rows_here = rows_total / DATABASES + usize::from(d < rows_total % DATABASES);
        query_pages += rows_here.div_ceil(PAGE_SIZE).max(1) as u64;
        workspace.objects.push(json!({
            "object": "data_source", "id": id(source), "last_edited_time": edited,
            "title": [{"plain_text": format!("Table {d}")}], "in_trash": false,
            "parent": {"type": "database_id", "database_id": id(source + 1_000_000)},
            "database_parent": {"type": "page_id", "page_id": id(d)},
            "properties": {},
        }));
        let mut rows = Vec::with_capacity(rows_here);
        for r in 0..rows_here {
            let n = pages + DATABASES + d * (rows_total / DATABASES + 1) + r;
            let parent = json!({"type": "data_source_id", "data_source_id": id(source)});
            let mut row = page(n, &format!("Row {d}-{r}"), edited, parent);
            row["properties"]["Points"] = json!({"id": "p", "type": "number", "number": r});
            workspace.objects.push(row.clone());
            rows.push(row);
            workspace
                .markdown
                .insert(id(n), format!("Row {d}-{r} notes.\n"));
        }
        workspace.rows.insert(id(source), rows);
    }
    // Edited a minute apart, newest first, as a real workspace's search
    // answers: an incremental run stops a few minutes past its checkpoint.
    let newest: chrono::DateTime<chrono::Utc> = "2026-11-30T12:00:00Z".parse().expect("a time");
    for (index, object) in workspace.objects.iter_mut().enumerate() {
        let at = newest - chrono::Duration::minutes(index as i64);
        object["last_edited_time"] = json!(at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true));
    }
    for rows in workspace.rows.values_mut() {
        for row in rows {
            let id = row["id"].clone();
            if let Some(listed) = workspace.objects.iter().find(|object| object["id"] == id) {
                row["last_edited_time"] = listed["last_edited_time"].clone();
            }
        }
    }
    let listed = workspace.objects.len();
    let fetched = workspace.markdown.len();
    let minimum = listed.div_ceil(PAGE_SIZE) as u64 + fetched as u64 + query_pages + assets;
    (workspace, minimum)
}

fn list(items: &[Value], body: &Value) -> Response {
    let start: usize = body["start_cursor"]
        .as_str()
        .and_then(|cursor| cursor.parse().ok())
        .unwrap_or(0);
    let end = (start + PAGE_SIZE).min(items.len());
    let more = end < items.len();
    axum::Json(json!({
        "object": "list", "results": items[start..end],
        "next_cursor": more.then(|| end.to_string()), "has_more": more,
        "type": "page_or_data_source", "page_or_data_source": {},
    }))
    .into_response()
}

async fn serve_request(
    State(fake): State<Arc<Fake>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> Response {
    fake.requests.fetch_add(1, Ordering::Relaxed);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let workspace = fake.workspace.read().expect("workspace lock");
    let parts: Vec<&str> = uri.path().trim_start_matches('/').split('/').collect();
    match (method, parts.as_slice()) {
        (Method::POST, ["v1", "search"]) => list(&workspace.objects, &body),
        (Method::POST, ["v1", "data_sources", id, "query"]) => list(
            workspace.rows.get(*id).map_or(&[][..], Vec::as_slice),
            &body,
        ),
        (Method::GET, ["v1", "pages", id, "markdown"]) => match workspace.markdown.get(*id) {
            Some(markdown) => axum::Json(json!({"object": "page_markdown", "id": id,
                "markdown": markdown, "truncated": false, "unknown_block_ids": []}))
            .into_response(),
            None => StatusCode::NOT_FOUND.into_response(),
        },
        (Method::GET, ["files", file]) => match workspace.files.get(*file) {
            Some(bytes) => ([("content-type", "image/png")], bytes.clone()).into_response(),
            None => StatusCode::FORBIDDEN.into_response(),
        },
        _ => StatusCode::BAD_REQUEST.into_response(),
    }
}

/// Ten pages edited after the first run: a later edit time (so they come
/// first in the search) and a new line.
fn edit(workspace: &mut Workspace) {
    let later = "2026-12-02T08:00:00.000Z";
    let mut edited = Vec::new();
    workspace.objects.retain(|object| {
        let pick = object["object"] == "page"
            && object["parent"]["type"] != "data_source_id"
            && edited.len() < EDITED;
        if pick {
            edited.push(object.clone());
        }
        !pick
    });
    for object in &mut edited {
        object["last_edited_time"] = json!(later);
        let id = object["id"].as_str().expect("an id").to_owned();
        if let Some(markdown) = workspace.markdown.get_mut(&id) {
            markdown.push_str("\nEdited.\n");
        }
    }
    edited.append(&mut workspace.objects);
    workspace.objects = edited;
}

/// User + system CPU seconds of this process so far, and its peak RSS in
/// KiB (`/proc/self`).
fn usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |index: usize| {
        fields
            .get(index)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    // Fields 14 and 15 (utime, stime) are at 11 and 12 after the name,
    // in USER_HZ, which Linux fixes at 100 for /proc.
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let peak = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    (cpu, peak)
}

#[tokio::main]
async fn main() {
    let docs: usize = env_or("BENCH_DOCS", 5_000);
    let postgres = env_or("BENCH_POSTGRES", 0u8) == 1;
    let fake = Arc::new(Fake::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let base = Url::parse(&format!(
        "http://{}/",
        listener.local_addr().expect("bound")
    ))
    .expect("a base URL");
    let (workspace, minimum) = generate(docs, &base);
    let listed = workspace.objects.len();
    *fake.workspace.write().expect("workspace lock") = workspace;
    let app = Router::new()
        .fallback(serve_request)
        .with_state(fake.clone());
    tokio::spawn(async move { axum::serve(listener, app).await });

    let dir = tempfile::tempdir().expect("a temp dir");
    let database = BenchDatabase::create(postgres, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url)
        .await
        .expect("the database");
    Migrator::up(&db, None).await.expect("migrations");
    let client = || {
        HttpClient::new(HttpSettings {
            destination: Destination::configured(&base).expect("a configured origin"),
            max_body_bytes: 16 * 1024 * 1024,
            ..HttpSettings::default()
        })
        .expect("an HTTP client")
    };
    let mut config = NotionConfig::new(base.clone(), "ntn_bench".to_owned().into());
    config.api_qps = 10_000.try_into().expect("non-zero");
    config.asset_qps = 10_000.try_into().expect("non-zero");
    let adapter = NotionAdapter::with_clients(config, client(), client());
    let engine_config = EngineConfig::new(dir.path().join("mirror"));
    let clock = SystemClock;
    let engine = Engine::new(&db, &engine_config, &clock);
    let backend = if postgres { "postgres" } else { "sqlite" };

    let (cpu_before, _) = usage();
    let started = Instant::now();
    let full = engine
        .sync_platform(&adapter, true)
        .await
        .expect("the full run");
    engine.finalize_mirror().await.expect("finalization");
    let full_elapsed = started.elapsed();
    let (cpu_after, peak) = usage();
    let full_requests = fake.requests.swap(0, Ordering::Relaxed);
    println!(
        "{backend}: full run of {listed} listed ({} written, {} assets): {full_requests} requests \
         (minimum {minimum}), {:.1} s, CPU {:.2} ms per document, peak RSS {:.1} MiB, {} errors",
        full.stats.documents_written,
        full.stats.assets_downloaded,
        full_elapsed.as_secs_f64(),
        (cpu_after - cpu_before) * 1000.0 / listed as f64,
        peak as f64 / 1024.0,
        full.stats.errors,
    );

    edit(&mut fake.workspace.write().expect("workspace lock"));
    let started = Instant::now();
    let incremental = engine
        .sync_platform(&adapter, false)
        .await
        .expect("the incremental run");
    let incremental_requests = fake.requests.swap(0, Ordering::Relaxed);
    println!(
        "{backend}: {} run after editing {EDITED} pages: {incremental_requests} requests, \
         {} fetched, {} written, {:.2} s",
        incremental.stats.mode,
        incremental.stats.documents_fetched,
        incremental.stats.documents_written,
        started.elapsed().as_secs_f64(),
    );
    drop(db);
    database.drop_now().await;
    println!(
        "docs_full_requests={full_requests} docs_min_requests={minimum} docs_incremental_requests={incremental_requests}"
    );
}
