//! The one way out to the network. Every outbound fetch (feeds, discovery,
//! and later the docs and gateway providers) goes through [`HttpClient`],
//! which enforces the SSRF guard ([`guard`]):
//!
//! - only `http`/`https`;
//! - an IP-literal host is checked before the request and on every redirect;
//! - a host name is resolved by our resolver, which drops every address the
//!   guard refuses, so the connection goes only to checked addresses (no
//!   window for DNS rebinding between the check and the connect) — also on
//!   every redirect, since each new connection resolves again;
//! - at most `max_redirects` redirects; no proxies from the environment;
//! - the body is streamed and refused beyond `max_body_bytes` (after
//!   gzip/br decoding, so a small compressed bomb fails the same way);
//! - a total timeout and a connect timeout; a `User-Agent` naming Trellis.

pub mod guard;

use std::{error::Error as StdError, net::SocketAddr, sync::Arc, time::Duration};

use reqwest::{
    StatusCode,
    dns::{Addrs, Name, Resolve, Resolving},
    header::HeaderMap,
    redirect,
};
use url::Url;

use self::guard::{AddressPolicy, Refusal};

pub const USER_AGENT: &str = concat!(
    "Trellis/",
    env!("CARGO_PKG_VERSION"),
    " (self-hosted feed reader; +https://github.com/trellis-rs/trellis)"
);

/// How the client behaves; built from `TRELLIS_*` settings.
#[derive(Debug, Clone)]
pub struct HttpSettings {
    /// Which loopback and private addresses may be reached.
    pub policy: AddressPolicy,
    pub timeout: Duration,
    pub connect_timeout: Duration,
    pub max_redirects: usize,
    pub max_body_bytes: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        HttpSettings {
            policy: AddressPolicy::default(),
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            max_redirects: 5,
            max_body_bytes: 15 * 1024 * 1024,
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
}

impl HttpClient {
    pub fn new(settings: HttpSettings) -> anyhow::Result<Self> {
        // reqwest is built without a bundled crypto provider; ring is the one
        // sqlx already uses. A second install attempt (tests, several
        // clients) is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let policy = Arc::new(settings.policy.clone());
        let redirect_policy = policy.clone();
        let max_redirects = settings.max_redirects;
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .timeout(settings.timeout)
            .connect_timeout(settings.connect_timeout)
            .no_proxy()
            .dns_resolver(GuardedResolver { policy })
            .redirect(redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() > max_redirects {
                    return attempt.error(FetchErrorCause::TooManyRedirects(max_redirects));
                }
                match guard::check_url(attempt.url(), &redirect_policy) {
                    Ok(()) => attempt.follow(),
                    Err(refusal) => attempt.error(FetchErrorCause::Refused(refusal)),
                }
            }))
            .build()?;
        Ok(HttpClient {
            client,
            settings: Arc::new(settings),
        })
    }

    pub fn settings(&self) -> &HttpSettings {
        &self.settings
    }

    /// GETs `url` with extra request `headers`, reading the whole body (up
    /// to the cap). Any HTTP status is a response, not an error.
    pub async fn get(&self, url: &str, headers: HeaderMap) -> Result<Fetched, FetchError> {
        let url = Url::parse(url).map_err(|error| FetchError::InvalidUrl(error.to_string()))?;
        guard::check_url(&url, &self.settings.policy)?;
        let mut response = self
            .client
            .get(url)
            .headers(headers)
            .send()
            .await
            .map_err(|error| self.classify(error))?;
        let limit = self.settings.max_body_bytes;
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

/// System DNS, keeping only the addresses the guard allows.
struct GuardedResolver {
    policy: Arc<AddressPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let resolved: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut refused = None;
            let allowed: Vec<SocketAddr> = resolved
                .into_iter()
                .filter(|addr| match guard::check_address(addr.ip(), &policy) {
                    Ok(()) => true,
                    Err(Refusal::Address { address, class }) => {
                        refused.get_or_insert((address, class));
                        false
                    }
                    Err(_) => false,
                })
                .collect();
            match (allowed.is_empty(), refused) {
                (true, Some((address, class))) => {
                    Err(Box::new(FetchErrorCause::Refused(Refusal::Resolved {
                        host,
                        address,
                        class,
                    })) as Box<dyn StdError + Send + Sync>)
                }
                _ => Ok(Box::new(allowed.into_iter()) as Addrs),
            }
        })
    }
}
