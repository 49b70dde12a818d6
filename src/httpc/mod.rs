//! The one way out to the network. Every outbound request (feeds,
//! discovery, and the docs and gateway providers) goes through an
//! [`HttpClient`]; each caller builds its own from its [`HttpSettings`] —
//! its timeout, body cap and [`Destination`] — so one caller's allowance
//! never widens another's. Every client enforces:
//!
//! - its destination ([`guard`]): user-supplied URLs get the SSRF guard
//!   below; an endpoint an admin configured is reachable exactly at that
//!   origin and nowhere else (redirects off it are refused);
//! - only `http`/`https`;
//! - an IP-literal host is checked before the request and on every redirect;
//! - a host name is resolved by our resolver, which drops every address the
//!   guard refuses, so the connection goes only to checked addresses (no
//!   window for DNS rebinding between the check and the connect) — also on
//!   every redirect, since each new connection resolves again;
//! - at most `max_redirects` redirects; no proxies from the environment;
//! - the body is streamed and refused beyond `max_body_bytes` (after
//!   gzip/br decoding, so a small compressed bomb fails the same way);
//! - a total timeout and a connect timeout; a `User-Agent` naming Trellis;
//! - its [`limits`]: requests at once in all and per host, and a rate per
//!   host; a request waits for its turn, or with [`Patience::Never`] is
//!   refused at once with [`FetchError::Busy`] (for work in a worker slot,
//!   which goes back to its queue instead of holding the slot);
//! - on request, [`retry`]: capped backoff where the server's `Retry-After`
//!   wins ([`HttpClient::request_retrying`]).

pub mod guard;
pub mod limits;
pub mod retry;

use std::{error::Error as StdError, net::SocketAddr, sync::Arc, time::Duration};

use reqwest::{
    Method, StatusCode,
    dns::{Addrs, Name, Resolve, Resolving},
    header::{CONTENT_TYPE, HeaderMap, HeaderValue},
    redirect,
};
use url::Url;

pub use self::guard::Destination;
use self::{
    guard::Refusal,
    limits::{Busy, LimitSettings, Limits},
};

pub const USER_AGENT: &str = concat!(
    "Trellis/",
    env!("CARGO_PKG_VERSION"),
    " (self-hosted feed reader; +https://github.com/trellis-rs/trellis)"
);

/// How one caller's client behaves; built from `TRELLIS_*` settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Where its requests may go.
    pub destination: Destination,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_redirects: usize,
    pub max_body_bytes: usize,
    /// How hard it may press, in all and per host.
    pub limits: LimitSettings,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            destination: Destination::default(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_redirects: 5,
            max_body_bytes: 15 * 1024 * 1024,
            limits: LimitSettings::default(),
        }
    }
}

/// Why a fetch failed, worded for the person reading `fetchState.lastError`.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("invalid URL: {0}")]
    InvalidUrl(String),
    #[error("{0}")]
    Refused(#[from] Refusal),
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
    #[error("response body larger than {limit} bytes")]
    BodyTooLarge { limit: usize },
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("could not connect: {0}")]
    Connect(String),
    #[error("request failed: {0}")]
    Transport(String),
    /// Only with [`Patience::Never`]: nothing was sent.
    #[error("the host is busy; try again in {:?}", .0.retry_in)]
    Busy(Busy),
}

/// A response whose body was read in full (within the cap).
#[derive(Debug)]
pub struct Fetched {
    pub status: StatusCode,
    pub headers: HeaderMap,
    /// Where the last redirect led.
    pub url: Url,
    pub body: Vec<u8>,
}

#[derive(Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    settings: Arc<HttpSettings>,
    limits: Arc<Limits>,
}

/// Whether a request waits for its turn under the client's limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Patience {
    Wait,
    /// No room now: [`FetchError::Busy`] at once, nothing sent.
    Never,
}

impl HttpClient {
    pub fn new(settings: HttpSettings) -> anyhow::Result<Self> {
        // reqwest is built without a bundled crypto provider; ring is the one
        // sqlx already uses. A second install attempt (tests, several
        // clients) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let destination = Arc::new(settings.destination.clone());
        let redirect_destination = destination.clone();
        let max_redirects = settings.max_redirects;
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(settings.timeout)
            .connect_timeout(settings.connect_timeout)
            .no_proxy()
            .dns_resolver(GuardedResolver { destination })
            .redirect(redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() > max_redirects {
                    return attempt.error(FetchErrorCause::TooManyRedirects(max_redirects));
                }
                match redirect_destination.check_url(attempt.url()) {
                    Ok(()) => attempt.follow(),
                    Err(refusal) => attempt.error(FetchErrorCause::Refused(refusal)),
                }
            }))
            .build()?;
        Ok(HttpClient {
            client,
            limits: Limits::new(settings.limits),
            settings: Arc::new(settings),
        })
    }

    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// GETs `url` with extra request `headers`, reading the whole body (up
    /// to the cap). Any HTTP status is a response, not an error.
    pub async fn get(&self, url: &str, headers: HeaderMap) -> Result<Fetched, FetchError> {
        self.request(Method::GET, url, headers, None).await
    }

    /// [`HttpClient::get`], waiting for its turn or not.
    pub async fn get_with(
        &self,
        patience: Patience,
        url: &str,
        headers: HeaderMap,
    ) -> Result<Fetched, FetchError> {
        self.send(
            patience,
            Method::GET,
            url,
            headers,
            None,
            self.settings.max_body_bytes,
        )
        .await
    }

    /// [`HttpClient::get_with`] with a smaller body cap for this request
    /// (the client's own cap still bounds it): for fetches whose answer
    /// is small by nature, such as a feed's icon.
    pub async fn get_capped(
        &self,
        patience: Patience,
        url: &str,
        headers: HeaderMap,
        max_body_bytes: usize,
    ) -> Result<Fetched, FetchError> {
        let limit = max_body_bytes.min(self.settings.max_body_bytes);
        self.send(patience, Method::GET, url, headers, None, limit)
            .await
    }

    /// Sends `body` as JSON (`Content-Type: application/json`) with `method`.
    pub async fn send_json(
        &self,
        method: Method,
        url: &str,
        mut headers: HeaderMap,
        body: &impl serde::Serialize,
    ) -> Result<Fetched, FetchError> {
        let body = serde_json::to_vec(body)
            .map_err(|error| FetchError::Transport(format!("encoding the body: {error}")))?;
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        self.request(method, url, headers, Some(body)).await
    }

    /// Sends any request (method, headers — credentials included — and an
    /// optional body) and reads the whole response body, up to the cap. Any
    /// HTTP status is a response, not an error; the destination is checked
    /// before sending and on every redirect.
    pub async fn request(
        &self,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<Fetched, FetchError> {
        self.send(
            Patience::Wait,
            method,
            url,
            headers,
            body,
            self.settings.max_body_bytes,
        )
        .await
    }

    /// Sends one request and reads its body up to `limit` bytes.
    async fn send(
        &self,
        patience: Patience,
        method: Method,
        url: &str,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
        limit: usize,
    ) -> Result<Fetched, FetchError> {
        let url = Url::parse(url).map_err(|error| FetchError::InvalidUrl(error.to_string()))?;
        self.settings.destination.check_url(&url)?;
        let host = url.host_str().unwrap_or_default().to_owned();
        // Held until the whole body is read: the request is in flight till then.
        let _turn = match patience {
            Patience::Wait => self.limits.turn(&host).await,
            Patience::Never => self.limits.try_turn(&host).map_err(FetchError::Busy)?,
        };
        let mut request = self.client.request(method, url).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        let mut response = request.send().await.map_err(|error| self.classify(error))?;
        if response
            .content_length()
            .is_some_and(|length| length > limit as u64)
        {
            return Err(FetchError::BodyTooLarge { limit });
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.classify(e))? {
            if body.len() + chunk.len() > limit {
                return Err(FetchError::BodyTooLarge { limit });
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Fetched {
            status: response.status(),
            url: response.url().clone(),
            headers: response.headers().clone(),
            body,
        })
    }

    /// Finds our own refusal inside reqwest's error chain, else says what
    /// kind of failure it was (never the request's headers: they may carry
    /// credentials).
    fn classify(&self, error: reqwest::Error) -> FetchError {
        let mut source: Option<&(dyn StdError + 'static)> = Some(&error);
        while let Some(cause) = source {
            if let Some(ours) = cause.downcast_ref::<FetchErrorCause>() {
                return match ours {
                    FetchErrorCause::Refused(refusal) => FetchError::Refused(refusal.clone()),
                    FetchErrorCause::TooManyRedirects(n) => FetchError::TooManyRedirects(*n),
                };
            }
            source = cause.source();
        }
        if error.is_timeout() {
            FetchError::Timeout(self.settings.timeout)
        } else if error.is_connect() {
            FetchError::Connect(root_cause(&error))
        } else {
            FetchError::Transport(root_cause(&error))
        }
    }
}

fn root_cause(error: &(dyn StdError + 'static)) -> String {
    let mut last = error;
    while let Some(next) = last.source() {
        last = next;
    }
    last.to_string()
}

/// Our errors as they travel through reqwest's error chain.
#[derive(Debug, thiserror::Error)]
enum FetchErrorCause {
    #[error("{0}")]
    Refused(Refusal),
    #[error("more than {0} redirects")]
    TooManyRedirects(usize),
}

/// System DNS, keeping only the addresses the destination allows.
struct GuardedResolver {
    destination: Arc<Destination>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let destination = self.destination.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let mut elsewhere = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match destination.check_address(&host, addr.ip()) {
                    Ok(()) => true,
                    Err(Refusal::Address { address, class }) => {
                        refused.get_or_insert((address, class));
                        false
                    }
                    Err(other) => {
                        elsewhere.get_or_insert(other);
                        false
                    }
                })
                .collect();
            if !allowed.is_empty() {
                return Ok(Box::new(allowed.into_iter()) as Addrs);
            }
            let refusal = match (refused, elsewhere) {
                (Some((address, class)), _) => Refusal::Resolved {
                    host,
                    address,
                    class,
                },
                (None, Some(other)) => other,
                (None, None) => return Ok(Box::new(allowed.into_iter()) as Addrs),
            };
            Err(Box::new(FetchErrorCause::Refused(refusal)) as Box<dyn StdError + Send + Sync>)
        })
    }
}

#[cfg(test)]
mod tests {
    use axum::{
        Router,
        body::Bytes,
        http::{Method as AxumMethod, header::LOCATION},
        response::IntoResponse,
        routing::{any, get},
    };

    use super::*;

    /// A loopback server: `/echo` answers the method and body it got,
    /// `/away` redirects to another port of the same host.
    async fn server() -> Url {
        async fn echo(method: AxumMethod, body: Bytes) -> String {
            format!("{method} {}", String::from_utf8_lossy(&body))
        }
        async fn away() -> impl IntoResponse {
            (
                StatusCode::FOUND,
                [(LOCATION, "http://127.0.0.1:9/elsewhere")],
            )
        }
        let app = Router::new()
            .route("/echo", any(echo))
            .route("/away", get(away));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Url::parse(&format!("http://{addr}/")).unwrap()
    }

    #[tokio::test]
    async fn a_configured_endpoint_gets_any_request_and_nothing_else() {
        let base = server().await;
        let client = HttpClient::new(HttpSettings {
            destination: Destination::configured(&base).unwrap(),
            ..Default::default()
        })
        .unwrap();
        let echo = base.join("echo").unwrap();
        let answer = client
            .send_json(
                Method::POST,
                echo.as_str(),
                HeaderMap::new(),
                &serde_json::json!({ "seriesIds": [1, 2] }),
            )
            .await
            .unwrap();
        assert_eq!(answer.status, StatusCode::OK);
        assert_eq!(
            String::from_utf8(answer.body).unwrap(),
            r#"POST {"seriesIds":[1,2]}"#
        );
        let put = client
            .request(
                Method::PUT,
                echo.as_str(),
                HeaderMap::new(),
                Some(b"x".to_vec()),
            )
            .await
            .unwrap();
        assert_eq!(String::from_utf8(put.body).unwrap(), "PUT x");
        // A redirect off the configured origin is refused, and so is any other URL.
        let away = client
            .get(base.join("away").unwrap().as_str(), HeaderMap::new())
            .await
            .unwrap_err();
        assert!(
            matches!(&away, FetchError::Refused(Refusal::NotConfigured { .. })),
            "{away}"
        );
        let other = client
            .get("http://127.0.0.1:9/", HeaderMap::new())
            .await
            .unwrap_err();
        assert!(
            matches!(&other, FetchError::Refused(Refusal::NotConfigured { .. })),
            "{other}"
        );
    }

    #[tokio::test]
    async fn user_supplied_urls_keep_the_guard() {
        let base = server().await;
        let feeds = HttpClient::new(HttpSettings::default()).unwrap();
        let refused = feeds
            .get(base.join("echo").unwrap().as_str(), HeaderMap::new())
            .await
            .unwrap_err();
        assert!(
            matches!(
                &refused,
                FetchError::Refused(Refusal::Address {
                    class: "a loopback",
                    ..
                })
            ),
            "{refused}"
        );
    }
}
