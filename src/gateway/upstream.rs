//! One provider endpoint as the gateway calls it: the one outbound client
//! (`httpc`, the destination exactly as the admin configured it, redirects
//! off it refused) plus the host's cooldown — no request reaches a host
//! before its deadline, and every answer that imposes one records it.

use chrono::Utc;
use reqwest::{Method, StatusCode, header::HeaderMap};
use url::Url;

use super::{cooldown::Cooldowns, provider::ProviderError};
use crate::httpc::{Destination, Fetched, HttpClient, HttpSettings, limits::LimitSettings};

#[derive(Clone)]
pub struct Upstream {
    provider: &'static str,
    client: HttpClient,
    cooldowns: Cooldowns,
}

/// The cooldown key of a URL: its host and port, so two services on one
/// machine do not share a wait.
pub fn host_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port_or_known_default() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

impl Upstream {
    /// A client for `base` (and only there), pacing requests with `limits`.
    pub fn new(
        provider: &'static str,
        base: &Url,
        limits: LimitSettings,
        cooldowns: Cooldowns,
    ) -> anyhow::Result<Self> {
        let client = HttpClient::new(HttpSettings {
            destination: Destination::configured(base)?,
            max_body_bytes: 8 * 1024 * 1024,
            limits,
            ..HttpSettings::default()
        })?;
        Ok(Upstream {
            provider,
            client,
            cooldowns,
        })
    }

    /// Sends one request unless the host is cooling down; records the
    /// wait an answer imposes. A 429 or 503 is [`ProviderError::Cooldown`];
    /// any other HTTP status is an answer.
    pub async fn send(
        &self,
        method: Method,
        url: &Url,
        headers: HeaderMap,
        body: Option<Vec<u8>>,
    ) -> Result<Fetched, ProviderError> {
        let host = host_key(url);
        let unexpected = |error: sea_orm::DbErr| ProviderError::Unexpected {
            provider: self.provider,
            what: format!("the cooldown table failed: {error}"),
        };
        if let Some(until) = self
            .cooldowns
            .active(&host, Utc::now())
            .await
            .map_err(unexpected)?
        {
            return Err(ProviderError::Cooldown { host, until });
        }
        let answer = self
            .client
            .request(method, url.as_str(), headers, body)
            .await
            .map_err(|cause| ProviderError::Unreachable {
                provider: self.provider,
                cause,
            })?;
        let now = Utc::now();
        if let Some(deadline) = super::cooldown::deadline_from(answer.status, &answer.headers, now)
        {
            let kept = self
                .cooldowns
                .extend(&host, deadline, now)
                .await
                .map_err(unexpected)?;
            tracing::warn!(provider = self.provider, %host, until = %kept, status = %answer.status, "provider cooldown");
            let refused = answer.status == StatusCode::TOO_MANY_REQUESTS
                || answer.status == StatusCode::SERVICE_UNAVAILABLE;
            if refused {
                return Err(ProviderError::Cooldown { host, until: kept });
            }
        }
        Ok(answer)
    }
}
