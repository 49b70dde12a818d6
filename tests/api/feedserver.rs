//! A loopback feed publisher for the tests: serves whatever each path is
//! set to (status, body, headers, a delay, gzip), answers conditional GETs
//! with 304 the way real servers do, and counts the requests it saw.

use std::{
    collections::HashMap,
    io::Write,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    body::Body,
    extract::{Request, State},
    http::{HeaderMap, StatusCode, header},
    response::Response,
};
use tokio::sync::{Semaphore, watch};

#[derive(Clone, Debug)]
pub struct Route {
    pub status: u16,
    pub body: Vec<u8>,
    pub content_type: &'static str,
    pub headers: Vec<(String, String)>,
    /// Answer `If-None-Match` with 304 when it matches.
    pub etag: Option<String>,
    /// Send `ETag` again on a 304 (real servers may omit it).
    pub etag_on_304: bool,
    pub delay: Option<Duration>,
    /// Holds each request until the test adds a permit (a publisher that
    /// hangs for as long as the test wants).
    pub gate: Option<Arc<Semaphore>>,
    pub gzip: bool,
}

impl Route {
    pub fn ok(content_type: &'static str, body: impl Into<Vec<u8>>) -> Self {
        Route {
            status: 200,
            body: body.into(),
            content_type,
            headers: Vec::new(),
            etag: None,
            etag_on_304: true,
            delay: None,
            gate: None,
            gzip: false,
        }
    }

    pub fn rss(body: impl Into<Vec<u8>>) -> Self {
        Route::ok("application/rss+xml", body)
    }

    pub fn status(status: u16) -> Self {
        Route {
            status,
            ..Route::ok("text/plain", format!("status {status}"))
        }
    }

    pub fn redirect(to: &str) -> Self {
        Route::status(302).header("location", to)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }
}

struct Shared {
    routes: Mutex<HashMap<String, Route>>,
    hits: Mutex<HashMap<String, usize>>,
    last_headers: Mutex<HashMap<String, HeaderMap>>,
    /// Requests being answered now, and the most ever at once: in all, and per host.
    in_flight: Mutex<InFlight>,
    /// Requests being answered now, for waiting on.
    answering: watch::Sender<usize>,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            routes: Mutex::default(),
            hits: Mutex::default(),
            last_headers: Mutex::default(),
            in_flight: Mutex::default(),
            answering: watch::Sender::new(0),
        }
    }
}

#[derive(Default)]
struct InFlight {
    now: usize,
    max: usize,
    per_host: HashMap<String, (usize, usize)>,
}

pub struct FeedServer {
    pub addr: SocketAddr,
    /// Every address this publisher answers on (`addr` first).
    pub addrs: Vec<SocketAddr>,
    shared: Arc<Shared>,
}

impl FeedServer {
    pub async fn start() -> Self {
        FeedServer::start_on_hosts(1).await
    }

    /// One publisher answering on 127.0.0.1 … 127.0.0.`hosts` (all loopback).
    pub async fn start_on_hosts(hosts: u8) -> Self {
        let shared = Arc::new(Shared::default());
        let mut addrs = Vec::new();
        for host in 1..=hosts {
            let listener = tokio::net::TcpListener::bind((format!("127.0.0.{host}"), 0))
                .await
                .unwrap();
            addrs.push(listener.local_addr().unwrap());
            let app = Router::new().fallback(serve).with_state(shared.clone());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        }
        FeedServer {
            addr: addrs[0],
            addrs,
            shared,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `path` on the `host`-th address.
    pub fn url_on(&self, host: usize, path: &str) -> String {
        format!("http://{}{path}", self.addrs[host])
    }

    /// The most requests answered at once: in all, and to the busiest host.
    pub fn max_in_flight(&self) -> (usize, usize) {
        let in_flight = self.shared.in_flight.lock().unwrap();
        let per_host = in_flight.per_host.values().map(|(_, max)| *max).max();
        (in_flight.max, per_host.unwrap_or(0))
    }

    /// Waits until `n` requests are being answered at once.
    pub async fn wait_answering(&self, n: usize) {
        let mut answering = self.shared.answering.subscribe();
        answering.wait_for(|now| *now >= n).await.unwrap();
    }

    pub fn answering(&self) -> usize {
        *self.shared.answering.borrow()
    }

    pub fn set(&self, path: &str, route: Route) {
        self.shared
            .routes
            .lock()
            .unwrap()
            .insert(path.to_owned(), route);
    }

    pub fn hits(&self, path: &str) -> usize {
        self.shared
            .hits
            .lock()
            .unwrap()
            .get(path)
            .copied()
            .unwrap_or(0)
    }

    pub fn total_hits(&self) -> usize {
        self.shared.hits.lock().unwrap().values().sum()
    }

    /// A request header of the last request to `path`.
    pub fn last_header(&self, path: &str, name: &str) -> Option<String> {
        self.shared
            .last_headers
            .lock()
            .unwrap()
            .get(path)
            .and_then(|headers| headers.get(name))
            .map(|value| value.to_str().unwrap().to_owned())
    }
}

async fn serve(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    *shared.hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    shared
        .last_headers
        .lock()
        .unwrap()
        .insert(path.clone(), request.headers().clone());
    let Some(route) = shared.routes.lock().unwrap().get(&path).cloned() else {
        return Response::builder()
            .status(StatusCode::NOT_FOUND)
            .body(Body::from("no such feed"))
            .unwrap();
    };
    if route.delay.is_some() || route.gate.is_some() {
        let host = request
            .headers()
            .get(header::HOST)
            .and_then(|h| h.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        track(&shared, &host, true);
        if let Some(delay) = route.delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(gate) = &route.gate {
            gate.acquire().await.unwrap().forget();
        }
        track(&shared, &host, false);
    }
    let mut response = Response::builder();
    if let Some(etag) = &route.etag {
        let matched = request
            .headers()
            .get(header::IF_NONE_MATCH)
            .is_some_and(|value| value.to_str().unwrap_or_default() == etag);
        if matched {
            if route.etag_on_304 {
                response = response.header(header::ETAG, etag);
            }
            return response
                .status(StatusCode::NOT_MODIFIED)
                .body(Body::empty())
                .unwrap();
        }
        response = response.header(header::ETAG, etag);
    }
    for (name, value) in &route.headers {
        response = response.header(name, value);
    }
    let body = if route.gzip {
        response = response.header(header::CONTENT_ENCODING, "gzip");
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(&route.body).unwrap();
        encoder.finish().unwrap()
    } else {
        route.body.clone()
    };
    response
        .status(route.status)
        .header(header::CONTENT_TYPE, route.content_type)
        .body(Body::from(body))
        .unwrap()
}

fn track(shared: &Shared, host: &str, start: bool) {
    let mut in_flight = shared.in_flight.lock().unwrap();
    let entry = in_flight.per_host.entry(host.to_owned()).or_default();
    if start {
        entry.0 += 1;
        entry.1 = entry.1.max(entry.0);
    } else {
        entry.0 -= 1;
    }
    if start {
        in_flight.now += 1;
        in_flight.max = in_flight.max.max(in_flight.now);
    } else {
        in_flight.now -= 1;
    }
    shared.answering.send_replace(in_flight.now);
}

/// An RSS 2.0 document with `items` entries `(guid, title, description)`.
pub fn rss2(title: &str, items: &[(&str, &str, &str)]) -> String {
    let entries: String = items
        .iter()
        .enumerate()
        .map(|(n, (guid, title, body))| {
            format!(
                "<item><guid>{guid}</guid><title>{title}</title><link>/posts/{guid}</link>\
                 <description><![CDATA[{body}]]></description>\
                 <pubDate>{:02} Nov 2026 10:00:00 GMT</pubDate></item>",
                n + 1
            )
        })
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{title}</title><link>https://publisher.example/</link>{entries}</channel></rss>"#
    )
}

/// An RSS 2.0 document in UTF-16BE with a BOM and `encoding="utf-16"`.
pub fn utf16be_rss() -> Vec<u8> {
    let text = r#"<?xml version="1.0" encoding="utf-16"?><rss version="2.0"><channel><title>Wide</title><link>https://publisher.example/</link><item><guid>w1</guid><title>Wide one</title><description>wide</description></item></channel></rss>"#;
    let mut bytes = vec![0xFE, 0xFF];
    bytes.extend(text.encode_utf16().flat_map(u16::to_be_bytes));
    bytes
}
