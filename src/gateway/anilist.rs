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
use serde_json::{Map, Value, json};
use url::Url;

use super::{
    action::{Action, ActionKind, RemoteEntry},
    cache,
    cooldown::Cooldowns,
    provider::{
        Account, FeatureSupport, GatewayFeature, Issued, LinkMethod, Metadata, MetadataKind, Needs,
        Personal, Provider, ProviderError, ProviderKind,
    },
    settings::Settings,
    upstream::{Upstream, host_key},
};
use crate::{auth::keys::Credential, httpc::limits::LimitSettings};

const NAME: &str = "AniList";

/// The fields of a list entry a read-back asks for: everything a removal
/// would destroy, so the precondition can see it.
const ENTRY_FIELDS: &str = "id status progress progressVolumes score repeat priority private \
     notes hiddenFromStatusLists customLists advancedScores \
     startedAt { year month day } completedAt { year month day }";

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

    /// The viewer's id and score format (`POINT_10`…), with their token.
    async fn viewer(&self, token: &str) -> Result<(i64, String), ProviderError> {
        let (data, _) = self
            .graphql(
                "query { Viewer { id mediaListOptions { scoreFormat } } }",
                json!({}),
                Some(token),
            )
            .await?;
        let viewer = &data["Viewer"];
        let id = viewer["id"].as_i64().ok_or(ProviderError::Unexpected {
            provider: NAME,
            what: "Viewer has no id".into(),
        })?;
        let format = viewer["mediaListOptions"]["scoreFormat"]
            .as_str()
            .unwrap_or("POINT_100")
            .to_owned();
        Ok((id, format))
    }

    /// The account's id: the link's, else the Viewer's.
    async fn user_id(&self, who: &Personal<'_>) -> Result<i64, ProviderError> {
        match who.remote_user_id.and_then(|id| id.parse().ok()) {
            Some(id) => Ok(id),
            None => Ok(self.viewer(who.credential).await?.0),
        }
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

    fn writes(&self, _kind: ActionKind) -> bool {
        true
    }

    async fn read_entry(
        &self,
        who: &Personal<'_>,
        title: &str,
        kind: ActionKind,
    ) -> Result<RemoteEntry, ProviderError> {
        let media_id = media_id(title)?;
        let user_id = self.user_id(who).await?;
        let format = match kind {
            ActionKind::Rating => Some(self.viewer(who.credential).await?.1),
            _ => None,
        };
        let answer = self
            .graphql(
                &format!(
                    "query ($userId: Int, $mediaId: Int) {{ MediaList(userId: $userId, mediaId: $mediaId) {{ {ENTRY_FIELDS} }} }}"
                ),
                json!({ "userId": user_id, "mediaId": media_id }),
                Some(who.credential),
            )
            .await;
        // AniList answers 404 `Not Found.` for an entry the user does not have.
        let data = match answer {
            Ok((data, _)) => data,
            Err(ProviderError::NotFound(_)) => return Ok(RemoteEntry::default()),
            Err(error) => return Err(error),
        };
        let Some(fields) = data.get("MediaList").and_then(Value::as_object) else {
            return Ok(RemoteEntry::default());
        };
        let number = |name: &str| fields.get(name).and_then(Value::as_f64);
        Ok(RemoteEntry {
            listed: true,
            progress: number("progress").map(|p| p.max(0.0) as u32),
            stars: match (number("score"), format) {
                (Some(score), Some(format)) => Some(stars_from_score(score, &format)),
                _ => None,
            },
            entry_id: fields.get("id").map(|id| match id {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            }),
            fields: fields.clone(),
        })
    }

    async fn write(
        &self,
        who: &Personal<'_>,
        title: &str,
        action: &Action,
        entry: &RemoteEntry,
    ) -> Result<(), ProviderError> {
        let media_id = media_id(title)?;
        let (document, variables) = match action {
            Action::Progress { chapters } => (
                "mutation ($mediaId: Int, $progress: Int) { SaveMediaListEntry(mediaId: $mediaId, progress: $progress) { id progress } }",
                json!({ "mediaId": media_id, "progress": chapters }),
            ),
            Action::Rating { stars } => {
                let (_, format) = self.viewer(who.credential).await?;
                (
                    "mutation ($mediaId: Int, $score: Float) { SaveMediaListEntry(mediaId: $mediaId, score: $score) { id score } }",
                    json!({ "mediaId": media_id, "score": score_in_format(*stars, &format) }),
                )
            }
            Action::WantToRead => (
                "mutation ($mediaId: Int) { SaveMediaListEntry(mediaId: $mediaId, status: PLANNING) { id status } }",
                json!({ "mediaId": media_id }),
            ),
            Action::Removal => {
                let id: i64 = entry
                    .entry_id
                    .as_deref()
                    .and_then(|id| id.parse().ok())
                    .ok_or(ProviderError::Unexpected {
                        provider: NAME,
                        what: "the entry to remove has no id".into(),
                    })?;
                (
                    "mutation ($id: Int) { DeleteMediaListEntry(id: $id) { deleted } }",
                    json!({ "id": id }),
                )
            }
        };
        self.graphql(document, variables, Some(who.credential))
            .await
            .map(|_| ())
    }

    fn removal_precondition(&self, entry: &RemoteEntry) -> Result<(), String> {
        bare_entry(&entry.fields)
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

fn media_id(title: &str) -> Result<i64, ProviderError> {
    title
        .trim()
        .parse()
        .map_err(|_| ProviderError::NotFound(NAME))
}

/// A score in the user's AniList format (`scoreFormat`) from 0–5 stars.
pub fn score_in_format(stars: f64, format: &str) -> f64 {
    let stars = stars.clamp(0.0, 5.0);
    match format {
        "POINT_10_DECIMAL" => (stars * 20.0).round() / 10.0,
        "POINT_10" => (stars * 2.0).round(),
        "POINT_5" => stars.round(),
        // Smileys: 1 sad, 2 neutral, 3 happy; 0 is no score.
        "POINT_3" if stars == 0.0 => 0.0,
        "POINT_3" if stars <= 2.0 => 1.0,
        "POINT_3" if stars <= 3.5 => 2.0,
        "POINT_3" => 3.0,
        _ => (stars * 20.0).round(),
    }
}

/// Stars (0–5) from a score in the user's format, as [`score_in_format`]
/// would have sent them (so a read-back compares like with like).
pub fn stars_from_score(score: f64, format: &str) -> f64 {
    let score = score.max(0.0);
    let stars = match format {
        "POINT_10_DECIMAL" | "POINT_10" => score / 2.0,
        "POINT_5" => score,
        "POINT_3" => match score.round() as i64 {
            0 => 0.0,
            1 => 2.0,
            2 => 3.5,
            _ => 5.0,
        },
        _ => score / 20.0,
    };
    stars.min(5.0)
}

/// Whether deleting this AniList list entry loses nothing but the entry
/// itself: AniList's only removal deletes the whole entry, so an entry
/// holding progress, a score, notes, custom lists, advanced scores, dates,
/// repeats or any field we do not know fails. `Err` names the fields.
pub fn bare_entry(fields: &Map<String, Value>) -> Result<(), String> {
    fn empty(value: &Value) -> bool {
        match value {
            Value::Null => true,
            Value::Bool(flag) => !flag,
            Value::Number(number) => number.as_f64() == Some(0.0),
            Value::String(text) => text.trim().is_empty(),
            Value::Array(items) => items.iter().all(empty),
            Value::Object(map) => map.values().all(empty),
        }
    }
    let mut kept = Vec::new();
    for (name, value) in fields {
        let holds_data = match name.as_str() {
            // The entry itself.
            "id" | "mediaId" | "userId" => false,
            // Planning is the bare list; any other status is history.
            "status" => !(value.is_null() || value == "PLANNING"),
            "progress"
            | "progressVolumes"
            | "score"
            | "repeat"
            | "priority"
            | "private"
            | "notes"
            | "hiddenFromStatusLists"
            | "customLists"
            | "advancedScores"
            | "startedAt"
            | "completedAt" => !empty(value),
            _ => {
                kept.push(format!("{name} (a field this gateway does not know)"));
                continue;
            }
        };
        if holds_data {
            kept.push(name.clone());
        }
    }
    if kept.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "AniList can only delete the whole entry, and it holds {}",
            kept.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_round_trip_in_every_format() {
        for format in [
            "POINT_100",
            "POINT_10_DECIMAL",
            "POINT_10",
            "POINT_5",
            "POINT_3",
        ] {
            for stars in [0.0, 1.0, 2.5, 3.5, 4.0, 5.0] {
                let score = score_in_format(stars, format);
                let back = stars_from_score(score, format);
                assert_eq!(
                    score_in_format(back, format),
                    score,
                    "{format}: {stars} stars"
                );
            }
        }
        assert_eq!(score_in_format(4.5, "POINT_100"), 90.0);
        assert_eq!(score_in_format(4.5, "POINT_10"), 9.0);
        assert_eq!(score_in_format(3.3, "POINT_10_DECIMAL"), 6.6);
        assert_eq!(score_in_format(4.4, "POINT_5"), 4.0);
        assert_eq!(score_in_format(1.0, "POINT_3"), 1.0);
    }

    fn entry(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn a_bare_planning_entry_may_be_removed() {
        let bare = entry(json!({ "id": 9, "status": "PLANNING", "progress": 0,
            "progressVolumes": null, "score": 0, "repeat": 0, "priority": 0,
            "private": false, "notes": null, "hiddenFromStatusLists": false,
            "customLists": { "Favs": false }, "advancedScores": { "Story": 0 },
            "startedAt": { "year": null, "month": null, "day": null },
            "completedAt": { "year": null, "month": null, "day": null } }));
        assert_eq!(bare_entry(&bare), Ok(()));
    }

    #[test]
    fn an_entry_with_anything_worth_keeping_is_not_removed() {
        for (field, value) in [
            ("notes", json!("loved the ending")),
            ("progress", json!(3)),
            ("score", json!(7)),
            ("customLists", json!({ "Favs": true })),
            ("advancedScores", json!({ "Story": 8 })),
            (
                "startedAt",
                json!({ "year": 2024, "month": null, "day": null }),
            ),
            ("status", json!("COMPLETED")),
            ("private", json!(true)),
            ("somethingNew", json!(null)),
        ] {
            let mut fields = entry(json!({ "id": 9, "status": "PLANNING" }));
            fields.insert(field.into(), value);
            let refused = bare_entry(&fields).expect_err(field);
            assert!(refused.contains(field), "{refused}");
        }
    }
}
