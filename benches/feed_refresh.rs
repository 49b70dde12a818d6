//! `cargo bench --bench feed_refresh`
//!
//! The feed pull worker under load, end to end: a loopback publisher (this
//! process) serves `BENCH_FEEDS` feeds (1,000) of `BENCH_ITEMS` items (50)
//! each — half RSS 2.0, half Atom, spread over 20 loopback addresses so the
//! per-host limit (2) is not what paces it — and the real `trellis serve`
//! binary (release, a child process) follows them all through GraphQL
//! (`createFeeds`). Its scheduler finds them due and pulls them through the
//! job runner at `TRELLIS_PULL_CONCURRENCY` 10. Timed from the first
//! `createFeeds` to the moment every feed has its items stored; then a
//! second full refresh (`refreshAllFeeds`, all answered 304). Reported per
//! backend (SQLite, PostgreSQL): wall time, items/s, the server's idle RSS
//! and peak RSS (VmHWM).
//!
//! Then the parse step alone on the same corpus: Trellis's parser
//! (feed-rs) in-process against Python's `feedparser` (a venv under
//! `target/bench-venv` is created when feedparser is missing), MB/s side by
//! side. Not a test: it prints figures; the last line reads
//! `feeds_sqlite_s=… feeds_postgres_s=… parse_trellis_mb_s=… parse_feedparser_mb_s=…`.
//!
//! Knobs: `BENCH_FEEDS`, `BENCH_ITEMS`, `TRELLIS_TEST_PG_URL`.

mod support;

use std::{
    collections::HashMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{StatusCode, header},
    response::Response,
};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};
use serde_json::{Value, json};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use support::{BenchDatabase, env_or};

const HOSTS: u8 = 20;
const ETAG: &str = "\"bench-v1\"";

/// One document per feed: `(path, body, content type)`.
type Corpus = Vec<(String, Vec<u8>, &'static str)>;

fn corpus(feeds: usize, items: usize) -> Corpus {
    let paragraph = "<p>Trellis pulls feeds politely: conditional requests, backoff, \
        and a <a href=\"/about\">per-host limit</a>. <img src=\"img/x.png\"> Lorem ipsum \
        dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut \
        labore et dolore magna aliqua.</p>";
    (0..feeds)
        .map(|f| {
            let path = format!("/feeds/{f}.xml");
            if f % 2 == 0 {
                let entries: String = (0..items)
                    .map(|i| {
                        format!(
                            "<item><title>Feed {f} item {i}</title><link>https://site{f}.example/p/{i}</link>\
                             <guid>urn:feed:{f}:{i}</guid><pubDate>{:02} Nov 2026 {:02}:00:00 GMT</pubDate>\
                             <description><![CDATA[{paragraph}{paragraph}]]></description></item>",
                            1 + i % 28,
                            i % 24
                        )
                    })
                    .collect();
                let body = format!(
                    "<?xml version=\"1.0\" encoding=\"utf-8\"?><rss version=\"2.0\"><channel>\
                     <title>Bench feed {f}</title><link>https://site{f}.example/</link>{entries}</channel></rss>"
                );
                (path, body.into_bytes(), "application/rss+xml")
            } else {
                let entries: String = (0..items)
                    .map(|i| {
                        format!(
                            "<entry><title>Feed {f} entry {i}</title><id>urn:feed:{f}:{i}</id>\
                             <link href=\"https://site{f}.example/e/{i}\"/><updated>2026-11-{:02}T{:02}:00:00Z</updated>\
                             <content type=\"html\">{}</content></entry>",
                            1 + i % 28,
                            i % 24,
                            paragraph.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
                        )
                    })
                    .collect();
                let body = format!(
                    "<?xml version=\"1.0\" encoding=\"utf-8\"?><feed xmlns=\"http://www.w3.org/2005/Atom\">\
                     <title>Bench feed {f}</title><id>urn:feed:{f}</id><updated>2026-11-29T00:00:00Z</updated>\
                     <link rel=\"alternate\" href=\"https://site{f}.example/\"/>{entries}</feed>"
                );
                (path, body.into_bytes(), "application/atom+xml")
            }
        })
        .collect()
}

type Documents = Arc<HashMap<String, (Vec<u8>, &'static str)>>;

async fn serve(State(documents): State<Documents>, request: Request) -> Response {
    let Some((body, content_type)) = documents.get(request.uri().path()) else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::empty())
            .unwrap();
    };
    let fresh = request
        .headers()
        .get(header::IF_NONE_MATCH)
        .is_some_and(|value| value == ETAG);
    let response = Response::builder().header(header::ETAG, ETAG);
    if fresh {
        return response
            .status(StatusCode::NOT_MODIFIED)
            .body(Body::empty())
            .unwrap();
    }
    response
        .header(header::CONTENT_TYPE, *content_type)
        .body(Body::from(body.clone()))
        .unwrap()
}

/// The publisher on 127.0.0.1 … 127.0.0.20, every address serving every path.
async fn publisher(corpus: &Corpus) -> Vec<SocketAddr> {
    let documents: Documents = Arc::new(
        corpus
            .iter()
            .map(|(path, body, kind)| (path.clone(), (body.clone(), *kind)))
            .collect(),
    );
    let mut addrs = Vec::new();
    for host in 1..=HOSTS {
        let listener = tokio::net::TcpListener::bind((format!("127.0.0.{host}"), 0))
            .await
            .expect("bind a loopback address");
        addrs.push(listener.local_addr().unwrap());
        let app = Router::new().fallback(serve).with_state(documents.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    }
    addrs
}

/// VmRSS and VmHWM of a process, in MiB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|line| line.starts_with(name))
            .and_then(|line| line.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
            .unwrap_or(f64::NAN)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

struct Server {
    child: Child,
    addr: SocketAddr,
    client: reqwest::Client,
    token: String,
}

impl Server {
    async fn start(database_url: &str, dir: &Path) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_trellis"))
            .arg("serve")
            .current_dir(dir)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("DATABASE_URL", database_url)
            .env("TRELLIS_LISTEN", "127.0.0.1:0")
            .env("TRELLIS_LOG_FORMAT", "json")
            .env("TRELLIS_LOG_LEVEL", "info")
            .env("TRELLIS_ADMIN_USER", "bench")
            .env("TRELLIS_ADMIN_PASSWORD", "bench-password-123")
            .env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true")
            .env("TRELLIS_PULL_CONCURRENCY", "10")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("start trellis");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let addr = loop {
            let line = lines
                .next_line()
                .await
                .unwrap()
                .expect("server printed its address");
            if let Ok(event) = serde_json::from_str::<Value>(&line)
                && event["message"] == "listening"
            {
                break event["addr"].as_str().unwrap().parse().unwrap();
            }
        };
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut server = Server {
            child,
            addr,
            client: reqwest::Client::new(),
            token: String::new(),
        };
        let login = server
            .gql(
                "mutation { login(username: \"bench\", password: \"bench-password-123\") { accessToken } }",
                json!({}),
            )
            .await;
        server.token = login["login"]["accessToken"].as_str().unwrap().to_owned();
        server
    }

    async fn gql(&self, query: &str, variables: Value) -> Value {
        let response: Value = self
            .client
            .post(format!("http://{}/graphql", self.addr))
            .bearer_auth(&self.token)
            .json(&json!({ "query": query, "variables": variables }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(response.get("errors").is_none(), "{response}");
        response["data"].clone()
    }

    fn pid(&self) -> u32 {
        self.child.id().expect("running")
    }
}

async fn count(db: &DatabaseConnection, sql: &str) -> i64 {
    db.query_one_raw(Statement::from_string(db.get_database_backend(), sql))
        .await
        .unwrap()
        .unwrap()
        .try_get_by_index::<i64>(0)
        .unwrap()
}

struct Figures {
    idle_mib: f64,
    initial_s: f64,
    items_per_s: f64,
    refresh_s: f64,
    peak_mib: f64,
    after_mib: f64,
}

async fn run(backend: &str, addrs: &[SocketAddr], feeds: usize, items: usize) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let database = BenchDatabase::create(backend != "sqlite", dir.path()).await;
    let url = database.url.clone();
    let mut server = Server::start(&url, dir.path()).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (idle_mib, _) = memory(server.pid());
    let db = Database::connect(&url).await.unwrap();

    let links: Vec<Value> = (0..feeds)
        .map(|f| {
            let addr = addrs[f % addrs.len()];
            json!({ "link": format!("http://{addr}/feeds/{f}.xml") })
        })
        .collect();
    let started = Instant::now();
    for chunk in links.chunks(500) {
        server
            .gql(
                "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
                json!({ "i": chunk }),
            )
            .await;
    }
    let expected = (feeds * items) as i64;
    loop {
        let stored = count(&db, "SELECT COUNT(*) FROM items").await;
        let pulled = count(
            &db,
            "SELECT COUNT(*) FROM feed_fetch_state WHERE last_success_at IS NOT NULL",
        )
        .await;
        if stored >= expected && pulled >= feeds as i64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let initial_s = started.elapsed().as_secs_f64();

    let refresh = Instant::now();
    let task = server
        .gql("mutation { refreshAllFeeds { id } }", json!({}))
        .await["refreshAllFeeds"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    loop {
        let status = server
            .gql(
                "query($id: ID!) { task(id: $id) { status } }",
                json!({ "id": task }),
            )
            .await["task"]["status"]
            .as_str()
            .unwrap()
            .to_owned();
        if status == "SUCCEEDED" {
            break;
        }
        assert!(["QUEUED", "RUNNING"].contains(&status.as_str()), "{status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let refresh_s = refresh.elapsed().as_secs_f64();
    let (_, peak_mib) = memory(server.pid());
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (after_mib, _) = memory(server.pid());
    let _ = server.child.kill().await;
    drop(db);
    database.drop_now().await;
    Figures {
        idle_mib,
        initial_s,
        items_per_s: expected as f64 / initial_s,
        refresh_s,
        peak_mib,
        after_mib,
    }
}

/// MB/s of Trellis's parser over the corpus (best of three passes).
fn parse_trellis(corpus: &Corpus) -> f64 {
    let base = url::Url::parse("http://127.0.0.1/").unwrap();
    let bytes: usize = corpus.iter().map(|(_, body, _)| body.len()).sum();
    let mut best = f64::MAX;
    for _ in 0..3 {
        let started = Instant::now();
        for (_, body, _) in corpus {
            let parsed =
                trellis::feeds::parse::parse(body, None, &base).expect("bench feeds parse");
            std::hint::black_box(parsed);
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    bytes as f64 / 1e6 / best
}

/// MB/s of Python's feedparser over the same documents, or `None` when
/// Python is unavailable.
fn parse_feedparser(corpus: &Corpus) -> Option<f64> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("target/bench-venv");
    let python = venv.join("bin/python");
    if !python.exists() {
        let created = std::process::Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .status()
            .ok()?;
        if !created.success() {
            return None;
        }
    }
    let has_feedparser = std::process::Command::new(&python)
        .args(["-c", "import feedparser"])
        .stderr(Stdio::null())
        .status()
        .ok()?
        .success();
    if !has_feedparser {
        std::process::Command::new(&python)
            .args(["-m", "pip", "install", "--quiet", "feedparser==6.0.11"])
            .status()
            .ok()?;
    }
    let dir = tempfile::tempdir().ok()?;
    for (n, (_, body, _)) in corpus.iter().enumerate() {
        std::fs::write(dir.path().join(format!("{n}.xml")), body).ok()?;
    }
    let output = std::process::Command::new(&python)
        .arg(root.join("benches/feedparser/bench.py"))
        .arg(dir.path())
        .output()
        .ok()?;
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .find_map(|line| line.strip_prefix("mb_per_s="))
        .and_then(|value| value.trim().parse().ok())
}

#[tokio::main]
async fn main() {
    let feeds: usize = env_or("BENCH_FEEDS", 1000);
    let items: usize = env_or("BENCH_ITEMS", 50);
    let corpus = corpus(feeds, items);
    let megabytes = corpus.iter().map(|(_, b, _)| b.len()).sum::<usize>() as f64 / 1e6;
    println!("corpus: {feeds} feeds × {items} items, {megabytes:.1} MB");
    let addrs = publisher(&corpus).await;

    let mut results = Vec::new();
    for backend in ["sqlite", "postgres"] {
        let figures = run(backend, &addrs, feeds, items).await;
        println!(
            "{backend:<9} idle {:.1} MiB | first pull of all feeds {:.2} s ({:.0} items/s) | \
             refreshAllFeeds (304s) {:.2} s | peak RSS {:.1} MiB | after {:.1} MiB",
            figures.idle_mib,
            figures.initial_s,
            figures.items_per_s,
            figures.refresh_s,
            figures.peak_mib,
            figures.after_mib
        );
        results.push(figures);
    }

    let ours = parse_trellis(&corpus);
    let theirs = parse_feedparser(&corpus);
    println!(
        "parse: trellis (feed-rs) {ours:.1} MB/s | feedparser {}",
        theirs
            .map(|v| format!("{v:.1} MB/s"))
            .unwrap_or_else(|| "unavailable".into())
    );
    println!(
        "feeds_sqlite_s={:.2} feeds_postgres_s={:.2} parse_trellis_mb_s={ours:.1} parse_feedparser_mb_s={}",
        results[0].initial_s,
        results[1].initial_s,
        theirs
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|| "NA".into())
    );
}
