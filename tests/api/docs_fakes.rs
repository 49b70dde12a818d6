//! What the loopback fakes of third-party services share (`docs_notion`,
//! `docs_feishu`, `gateway_fakes`): a canned answer, the journal of what a fake saw and
//! the answers scripted before its normal ones, a sleeper that records
//! the waits an adapter asks for instead of sleeping, and a fake served on
//! port 0 with clients that may reach it.

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    http::{HeaderMap, Method, StatusCode, Uri, header::AUTHORIZATION},
    response::{IntoResponse, Response},
};
use serde_json::Value;
use trellis::{
    docs::ratelimit::Sleeper,
    httpc::{Destination, HttpClient, HttpSettings},
};
use url::Url;

/// A canned answer: status, headers, body.
#[derive(Clone)]
pub struct Canned(pub u16, pub Vec<(&'static str, String)>, pub Vec<u8>);

impl IntoResponse for Canned {
    fn into_response(self) -> Response {
        let mut response = (StatusCode::from_u16(self.0).unwrap(), self.2).into_response();
        for (name, value) in self.1 {
            response.headers_mut().insert(name, value.parse().unwrap());
        }
        response
    }
}

/// One request as a fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub query: HashMap<String, String>,
    /// The `Authorization` header, if one was sent.
    pub authorization: Option<String>,
    /// The JSON body (`null` when there is none).
    pub body: Value,
}

/// What a fake saw, and the answers scripted to come, by path, before its
/// normal ones.
#[derive(Default)]
pub struct Journal {
    seen: Mutex<Vec<Seen>>,
    scripted: Mutex<HashMap<String, VecDeque<Canned>>>,
}

impl Journal {
    /// Records one request; what was recorded.
    pub fn record(&self, method: &Method, uri: &Uri, headers: &HeaderMap, body: &[u8]) -> Seen {
        let seen = Seen {
            method: method.clone(),
            path: uri.path().to_owned(),
            query: url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
            authorization: headers
                .get(AUTHORIZATION)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            body: serde_json::from_slice(body).unwrap_or(Value::Null),
        };
        self.seen.lock().unwrap().push(seen.clone());
        seen
    }

    /// The requests to `path`, in order.
    pub fn seen(&self, path: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|seen| seen.path == path)
            .cloned()
            .collect()
    }

    /// Every request, in order.
    pub fn all(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Every path requested, in order.
    pub fn paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .map(|seen| seen.path.clone())
            .collect()
    }

    /// `answers` come, in order, before `path`'s normal answer.
    pub fn script(&self, path: &str, answers: Vec<Canned>) {
        self.scripted
            .lock()
            .unwrap()
            .insert(path.to_owned(), answers.into());
    }

    /// The next scripted answer to `path`, if any is left.
    pub fn scripted(&self, path: &str) -> Option<Canned> {
        self.scripted
            .lock()
            .unwrap()
            .get_mut(path)
            .and_then(VecDeque::pop_front)
    }
}

/// Records each wait the adapter asks for, and returns at once.
#[derive(Default)]
pub struct RecordingSleeper(Mutex<Vec<Duration>>);

#[async_trait::async_trait]
impl Sleeper for RecordingSleeper {
    async fn sleep(&self, duration: Duration) {
        self.0.lock().unwrap().push(duration);
    }
}

/// A fake platform served on loopback.
pub struct Served<F> {
    /// Where it listens (`http://127.0.0.1:<port>/`).
    pub base: Url,
    /// Its state, to script answers and read what it saw.
    pub fake: Arc<F>,
    /// The sleeper to give the adapter.
    pub sleeper: Arc<RecordingSleeper>,
}

/// Serves `fake` through the router `app` builds over it.
pub async fn serve<F>(fake: F, app: impl FnOnce(Arc<F>) -> Router) -> Served<F> {
    let fake = Arc::new(fake);
    let app = app(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Served {
        base: Url::parse(&format!("http://{addr}/")).unwrap(),
        fake,
        sleeper: Arc::default(),
    }
}

impl<F> Served<F> {
    /// A client allowed to reach the fake (loopback is refused otherwise).
    pub fn client(&self) -> HttpClient {
        HttpClient::new(HttpSettings {
            destination: Destination::configured(&self.base).unwrap(),
            ..HttpSettings::default()
        })
        .unwrap()
    }

    /// The waits asked for so far.
    pub fn waits(&self) -> Vec<Duration> {
        self.sleeper.0.lock().unwrap().clone()
    }
}
