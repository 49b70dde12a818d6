//! AniList: its public GraphQL catalog and, with a user's OAuth token, the
//! user's list.
//!
//! - Public queries go **without** an `Authorization` header: AniList
//!   refuses a whole request with a bad token, public fields included.
//! - An expired or revoked token answers HTTP 400 `Invalid token` (401 on
//!   some paths): the link then needs the user to link again.
//! - Rate limits: `X-RateLimit-Limit`/`-Remaining` on every answer (90 a
//!   minute documented, 30 while degraded), 429 with `Retry-After` and
//!   `X-RateLimit-Reset`; the upstream turns both into the host's cooldown,
//!   and requests are paced at `TRELLIS_ANILIST_REQUESTS_PER_MINUTE`.
//! - OAuth (`/api/v2/oauth/authorize`, `/api/v2/oauth/token`): the
//!   authorization code grant with the client secret. AniList documents no
//!   PKCE, so none is sent.

use std::num::NonZeroU32;

use async_trait::async_trait;
use chrono::{TimeDelta, Utc};
use governor::Quota;
use reqwest::{
    Method, StatusCode,
    header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue},
};
use secrecy::SecretString;
use serde::Deserialize;
use serde_json::{Value, json};
use url::Url;

use super::{
    cache,
    cooldown::Cooldowns,
    provider::{
        Account, FeatureSupport, GatewayFeature, Issued, LinkMethod, Metadata, MetadataKind, Needs,
        Provider, ProviderError, ProviderKind,
    },
    settings::Settings,
    upstream::{Upstream, host_key},
};
use crate::{auth::keys::Credential, httpc::limits::LimitSettings};

const NAME: &str = "AniList";

/// The fields of a title the public lookups return.
const MEDIA_FIELDS: &str = "id idMal type format status title { romaji english native } \
     synonyms chapters volumes siteUrl coverImage { large }";

pub struct AniList {
    api_url: Url,
    oauth_url: Url,
    api: Upstream,
    oauth: Upstream,
    client_id: Option<String>,
    client_secret: Option<Credential>,
}

impl AniList {
    pub fn new(settings: &Settings, cooldowns: Cooldowns) -> anyhow::Result<Self> {
        let per_minute =
            NonZeroU32::new(settings.anilist_requests_per_minute).unwrap_or(NonZeroU32::MIN);
        let paced = LimitSettings {
            per_host: 4,
            per_host_rate: Some(Quota::per_minute(per_minute)),
            ..LimitSettings::default()
        };
        Ok(AniList {
            api: Upstream::new(NAME, &settings.anilist_api_url, paced, cooldowns.clone())?,
            oauth: Upstream::new(
                NAME,
                &settings.anilist_oauth_url,
                LimitSettings::default(),
                cooldowns,
            )?,
            api_url: settings.anilist_api_url.clone(),
            oauth_url: settings.anilist_oauth_url.clone(),
            client_id: settings
                .anilist_client_id
                .clone()
                .filter(|id| !id.trim().is_empty()),
            client_secret: settings.anilist_client_secret.clone(),
        })
    }

    /// Runs one GraphQL operation, with the user's token or (public) none.
    /// Returns `data` and the answer's headers.
    pub async fn graphql(
        &self,
        query: &str,
        variables: Value,
        token: Option<&str>,
    ) -> Result<(Value, HeaderMap), ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        if let Some(token) = token {
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .map_err(|_| ProviderError::CredentialRefused(NAME))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let body = serde_json::to_vec(&json!({ "query": query, "variables": variables }))
            .expect("a JSON value serializes");
        let answer = self
            .api
            .send(Method::POST, &self.api_url, headers, Some(body))
            .await?;
        let parsed: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
        let message = first_error(&parsed);
        if answer.status == StatusCode::UNAUTHORIZED
            || message
                .as_deref()
                .is_some_and(|text| text.to_ascii_lowercase().contains("invalid token"))
        {
            return Err(ProviderError::CredentialRefused(NAME));
        }
        if answer.status == StatusCode::NOT_FOUND {
            return Err(ProviderError::NotFound(NAME));
        }
        if !answer.status.is_success() || message.is_some() {
            return Err(ProviderError::Unexpected {
                provider: NAME,
                what: format!(
                    "HTTP {}{}",
                    answer.status.as_u16(),
                    message.map(|m| format!(": {m}")).unwrap_or_default()
                ),
            });
        }
        match parsed.get("data") {
            Some(data) if !data.is_null() => Ok((data.clone(), answer.headers)),
            _ => Err(ProviderError::Unexpected {
                provider: NAME,
                what: "an answer without data".into(),
            }),
        }
    }

    fn oauth_endpoint(&self, path: &str) -> Result<Url, ProviderError> {
        let mut base = self.oauth_url.clone();
        let prefix = base.path().trim_end_matches('/').to_owned();
        base.set_path(&format!("{prefix}{path}"));
        base.set_query(None);
        Ok(base)
    }

    fn client(&self) -> Result<(&str, &Credential), ProviderError> {
        match (&self.client_id, &self.client_secret) {
            (Some(id), Some(secret)) => Ok((id, secret)),
            _ => Err(ProviderError::NotConfigured(
                "AniList's OAuth client (TRELLIS_ANILIST_CLIENT_ID and _SECRET)",
            )),
        }
    }
}

/// The first GraphQL error's message, if the answer has one.
fn first_error(answer: &Value) -> Option<String> {
    let errors = answer.get("errors")?.as_array()?;
    let first = errors.first()?;
    Some(
        first
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("an error without a message")
            .chars()
            .take(200)
            .collect(),
    )
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    expires_in: Option<i64>,
}

#[async_trait]
impl Provider for AniList {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Anilist
    }

    fn configured(&self) -> bool {
        true
    }

    fn public_configured(&self) -> bool {
        true
    }

    fn hosts(&self) -> Vec<String> {
        let mut hosts = vec![host_key(&self.api_url), host_key(&self.oauth_url)];
        hosts.dedup();
        hosts
    }

    fn features(&self) -> Vec<FeatureSupport> {
        use GatewayFeature::*;
        let feature = FeatureSupport::supported;
        vec![
            feature(
                PublicMetadata,
                Needs::Public,
                Some("sent without any credential"),
            ),
            feature(Progress, Needs::Account, None),
            feature(
                Rating,
                Needs::Account,
                Some("stored in the user's own AniList score format"),
            ),
            feature(WantToRead, Needs::Account, Some("the Planning list")),
            feature(
                Removal,
                Needs::Account,
                Some(
                    "AniList can only delete a whole list entry, destroying its progress, score, notes, custom lists and dates, so only bare entries are removed",
                ),
            ),
            feature(ScrobbleFromKavita, Needs::BothAccounts, None),
        ]
    }

    fn link_method(&self) -> LinkMethod {
        LinkMethod::OAuth { pkce: false }
    }

    fn link_configured(&self) -> bool {
        self.client().is_ok()
    }

    async fn verify(&self, token: &str) -> Result<Account, ProviderError> {
        let (data, _) = self
            .graphql(
                "query { Viewer { id name mediaListOptions { scoreFormat } } }",
                json!({}),
                Some(token),
            )
            .await?;
        let viewer = data.get("Viewer").ok_or(ProviderError::Unexpected {
            provider: NAME,
            what: "Viewer is missing".into(),
        })?;
        Ok(Account {
            remote_id: viewer
                .get("id")
                .and_then(Value::as_i64)
                .map(|id| id.to_string()),
            name: viewer
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned),
        })
    }

    fn authorize_url(
        &self,
        state: &str,
        redirect: &Url,
        _pkce_challenge: Option<&str>,
    ) -> Result<Url, ProviderError> {
        let (client_id, _) = self.client()?;
        let mut url = self.oauth_endpoint("/api/v2/oauth/authorize")?;
        url.query_pairs_mut()
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect.as_str())
            .append_pair("response_type", "code")
            .append_pair("state", state);
        Ok(url)
    }

    async fn exchange_code(
        &self,
        code: &str,
        redirect: &Url,
        _pkce_verifier: Option<&str>,
    ) -> Result<Issued, ProviderError> {
        let (client_id, secret) = self.client()?;
        let url = self.oauth_endpoint("/api/v2/oauth/token")?;
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
        let body = serde_json::to_vec(&json!({
            "grant_type": "authorization_code",
            "client_id": client_id,
            "client_secret": secret.expose(),
            "redirect_uri": redirect.as_str(),
            "code": code,
        }))
        .expect("a JSON value serializes");
        let answer = self
            .oauth
            .send(Method::POST, &url, headers, Some(body))
            .await?;
        if answer.status == StatusCode::BAD_REQUEST || answer.status == StatusCode::UNAUTHORIZED {
            let parsed: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
            let reason = parsed
                .get("error")
                .and_then(Value::as_str)
                .unwrap_or("refused")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
                .take(64)
                .collect::<String>();
            return Err(ProviderError::Unexpected {
                provider: NAME,
                what: format!("the authorization code was refused ({reason})"),
            });
        }
        if !answer.status.is_success() {
            return Err(ProviderError::Unexpected {
                provider: NAME,
                what: format!(
                    "the token endpoint answered HTTP {}",
                    answer.status.as_u16()
                ),
            });
        }
        let token: TokenAnswer =
            serde_json::from_slice(&answer.body).map_err(|error| ProviderError::Unexpected {
                provider: NAME,
                what: format!("the token endpoint answered JSON we cannot read: {error}"),
            })?;
        Ok(Issued {
            token: SecretString::from(token.access_token),
            expires_at: token
                .expires_in
                .filter(|seconds| *seconds > 0)
                .map(|seconds| Utc::now() + TimeDelta::seconds(seconds)),
        })
    }

    async fn metadata(
        &self,
        kind: MetadataKind,
        id: Option<&str>,
        query: Option<&str>,
    ) -> Result<Metadata, ProviderError> {
        let (document, variables) = match (kind, id, query) {
            (MetadataKind::Title, Some(id), _) => {
                let id: i64 = id
                    .trim()
                    .parse()
                    .map_err(|_| ProviderError::NotFound(NAME))?;
                (
                    format!("query ($id: Int) {{ Media(id: $id) {{ {MEDIA_FIELDS} }} }}"),
                    json!({ "id": id }),
                )
            }
            (MetadataKind::Search, _, Some(query)) => (
                format!(
                    "query ($search: String) {{ Page(perPage: 10) {{ media(search: $search, type: MANGA) {{ {MEDIA_FIELDS} }} }} }}"
                ),
                json!({ "search": query.trim() }),
            ),
            _ => {
                return Err(ProviderError::Unsupported(
                    "a title lookup needs an id, a search needs a query",
                ));
            }
        };
        let (data, headers) = self.graphql(&document, variables, None).await?;
        Ok(Metadata {
            payload: data.to_string(),
            ttl: cache::ttl_from(&headers, Utc::now()),
        })
    }

    async fn probe_public(&self) -> Result<(), ProviderError> {
        self.graphql(
            "query { Page(perPage: 1) { media(type: MANGA) { id } } }",
            json!({}),
            None,
        )
        .await
        .map(|_| ())
    }
}
