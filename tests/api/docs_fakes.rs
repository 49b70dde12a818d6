//! What the docs adapters' loopback fakes share (`docs_notion`,
//! `docs_feishu`): a canned answer, a sleeper that records the waits an
//! adapter asks for instead of sleeping, and a fake served on port 0 with
//! clients that may reach it.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    Router,
    http::StatusCode,
    response::{IntoResponse, Response},
};
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
