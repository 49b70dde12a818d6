//! Kavita, the instance's own server (`TRELLIS_KAVITA_URL`).
//!
//! Kavita's API takes a JWT: `POST /api/Plugin/authenticate?apiKey=…&
//! pluginName=Trellis` trades an account's API key for one (HS512, valid
//! about ten days; 401 for an unknown key). We keep each key's JWT in
//! memory (keyed by a hash of the key), authenticate again an hour before
//! its `exp`, and once more when a request answers 401.
//!
//! Public catalog reads use the dedicated catalog account's key
//! (`TRELLIS_KAVITA_CATALOG_API_KEY`) and nothing else: a user's action
//! always runs with the user's own key, never falling back to the catalog
//! key.

use std::{collections::HashMap, sync::Mutex};

use async_trait::async_trait;
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, TimeDelta, Utc};
use reqwest::{
    Method, StatusCode,
    header::{ACCEPT, AUTHORIZATION, HeaderMap, HeaderValue},
};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;
use url::Url;

use super::{
    action::{Action, ActionKind, RemoteEntry},
    cache,
    provider::{
        Account, FeatureSupport, GatewayFeature, LinkMethod, Metadata, MetadataKind, Needs,
        Personal, Provider, ProviderError, ProviderKind,
    },
    upstream::{Upstream, host_key},
};
use crate::{auth::keys::Credential, httpc::Fetched};

const NAME: &str = "Kavita";
/// Authenticate again this long before the JWT's `exp`.
const RENEW_BEFORE: TimeDelta = TimeDelta::hours(1);
/// When a JWT carries no readable `exp`: Kavita's tokens last ten days;
/// assume one.
const UNKNOWN_LIFETIME: TimeDelta = TimeDelta::days(1);

pub struct Kavita {
    base: Option<Url>,
    upstream: Option<Upstream>,
    catalog_key: Option<Credential>,
    sessions: Mutex<HashMap<String, Session>>,
}

#[derive(Clone)]
struct Session {
    token: SecretString,
    expires_at: DateTime<Utc>,
}

/// What `authenticate` answers (Kavita's `UserDto`, camelCase).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UserDto {
    username: Option<String>,
    token: String,
}

impl Kavita {
    /// Kavita at `base` (none: not configured).
    pub fn new(
        base: Option<&Url>,
        catalog_key: Option<Credential>,
        cooldowns: super::cooldown::Cooldowns,
    ) -> anyhow::Result<Self> {
        let base = base.map(with_trailing_slash);
        let upstream = base
            .as_ref()
            .map(|base| {
                Upstream::new(
                    "Kavita",
                    base,
                    crate::httpc::limits::LimitSettings {
                        per_host: 4,
                        ..Default::default()
                    },
                    cooldowns,
                )
            })
            .transpose()?;
        Ok(Kavita {
            base,
            upstream,
            catalog_key,
            sessions: Mutex::default(),
        })
    }

    fn endpoint(&self) -> Result<(&Url, &Upstream), ProviderError> {
        match (&self.base, &self.upstream) {
            (Some(base), Some(upstream)) => Ok((base, upstream)),
            _ => Err(ProviderError::NotConfigured(NAME)),
        }
    }

    fn url(&self, path: &str) -> Result<Url, ProviderError> {
        let (base, _) = self.endpoint()?;
        base.join(path).map_err(|error| ProviderError::Unexpected {
            provider: NAME,
            what: format!("cannot build the URL for {path}: {error}"),
        })
    }

    /// Trades `api_key` for a fresh JWT.
    async fn authenticate(&self, api_key: &str) -> Result<(Session, UserDto), ProviderError> {
        let (_, upstream) = self.endpoint()?;
        let mut url = self.url("api/Plugin/authenticate")?;
        url.query_pairs_mut()
            .append_pair("apiKey", api_key)
            .append_pair("pluginName", "Trellis");
        let answer = upstream
            .send(Method::POST, &url, json_headers(), Some(Vec::new()))
            .await?;
        if answer.status == StatusCode::UNAUTHORIZED || answer.status == StatusCode::FORBIDDEN {
            return Err(ProviderError::CredentialRefused(NAME));
        }
        let user: UserDto = parse(&answer, "authenticate")?;
        let session = Session {
            expires_at: jwt_expiry(&user.token).unwrap_or_else(|| Utc::now() + UNKNOWN_LIFETIME),
            token: SecretString::from(user.token.clone()),
        };
        self.sessions
            .lock()
            .expect("sessions lock")
            .insert(key_id(api_key), session.clone());
        Ok((session, user))
    }

    /// The JWT for `api_key`: the one kept, unless it is about to expire.
    async fn session(&self, api_key: &str) -> Result<Session, ProviderError> {
        let kept = self
            .sessions
            .lock()
            .expect("sessions lock")
            .get(&key_id(api_key))
            .cloned();
        match kept {
            Some(session) if session.expires_at - RENEW_BEFORE > Utc::now() => Ok(session),
            _ => Ok(self.authenticate(api_key).await?.0),
        }
    }

    /// Sends a request as the account of `api_key`, authenticating again
    /// once when Kavita answers 401 (`invalid_token`: the JWT expired or
    /// the server's signing key changed).
    pub async fn call(
        &self,
        api_key: &str,
        method: Method,
        url: &Url,
        body: Option<Vec<u8>>,
    ) -> Result<Fetched, ProviderError> {
        let (_, upstream) = self.endpoint()?;
        let mut session = self.session(api_key).await?;
        for attempt in 0..2 {
            let mut headers = json_headers();
            headers.insert(AUTHORIZATION, bearer(&session.token)?);
            let answer = upstream
                .send(method.clone(), url, headers, body.clone())
                .await?;
            if answer.status != StatusCode::UNAUTHORIZED || attempt == 1 {
                return Ok(answer);
            }
            session = self.authenticate(api_key).await?.0;
        }
        unreachable!("the loop returns on its second attempt")
    }

    fn catalog_key(&self) -> Result<&str, ProviderError> {
        self.catalog_key
            .as_ref()
            .map(Credential::expose)
            .ok_or(ProviderError::NotConfigured(
                "Kavita's catalog account (TRELLIS_KAVITA_CATALOG_API_KEY)",
            ))
    }
}

/// A series in a user's Kavita library (`SeriesDto`, the fields
/// scrobbling reads).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeriesSummary {
    pub id: u32,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub pages_read: u32,
    #[serde(default)]
    pub user_rating: f64,
}

/// How many series one scrobbling pass reads from a library, at most.
const MAX_LIBRARY_SERIES: usize = 10_000;
/// Series per page of Kavita's list endpoints.
const PAGE_SIZE: usize = 100;

impl Kavita {
    /// The user's series (`POST /api/Series/all-v2`, page by page), or
    /// those on their Want to Read (`POST /api/want-to-read/v2`).
    pub async fn series(
        &self,
        api_key: &str,
        want_to_read: bool,
    ) -> Result<Vec<SeriesSummary>, ProviderError> {
        let path = if want_to_read {
            "api/want-to-read/v2"
        } else {
            "api/Series/all-v2"
        };
        // An empty FilterV2Dto: every series the account may see.
        let filter = serde_json::json!({
            "statements": [], "combination": 1, "limitTo": 0,
            "sortOptions": { "sortField": 1, "isAscending": true },
        });
        let body = serde_json::to_vec(&filter).expect("a JSON value serializes");
        let mut all = Vec::new();
        for page in 1.. {
            let mut url = self.url(path)?;
            url.query_pairs_mut()
                .append_pair("PageNumber", &page.to_string())
                .append_pair("PageSize", &PAGE_SIZE.to_string());
            let answer = self
                .call(api_key, Method::POST, &url, Some(body.clone()))
                .await?;
            refused(&answer)?;
            let batch: Vec<SeriesSummary> = parse(&answer, path)?;
            let last = batch.len() < PAGE_SIZE;
            all.extend(batch);
            if last || all.len() >= MAX_LIBRARY_SERIES {
                break;
            }
        }
        all.truncate(MAX_LIBRARY_SERIES);
        Ok(all)
    }

    /// A series' volumes with the user's pages read
    /// (`GET /api/Series/volumes?seriesId=`).
    pub async fn volumes(
        &self,
        api_key: &str,
        series: u32,
    ) -> Result<Vec<super::scrobble::Volume>, ProviderError> {
        let mut url = self.url("api/Series/volumes")?;
        url.query_pairs_mut()
            .append_pair("seriesId", &series.to_string());
        let answer = self.call(api_key, Method::GET, &url, None).await?;
        refused(&answer)?;
        parse(&answer, "the series' volumes")
    }

    /// The AniList media a series' metadata web links name
    /// (`GET /api/Series/metadata?seriesId=`).
    pub async fn anilist_link(
        &self,
        api_key: &str,
        series: u32,
    ) -> Result<Option<i64>, ProviderError> {
        let mut url = self.url("api/Series/metadata")?;
        url.query_pairs_mut()
            .append_pair("seriesId", &series.to_string());
        let answer = self.call(api_key, Method::GET, &url, None).await?;
        refused(&answer)?;
        if answer.status == StatusCode::NO_CONTENT || answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let metadata: serde_json::Value = parse(&answer, "the series' metadata")?;
        Ok(metadata
            .get("webLinks")
            .and_then(serde_json::Value::as_str)
            .and_then(super::scrobble::anilist_id_in))
    }
}

#[async_trait]
impl Provider for Kavita {
    fn kind(&self) -> ProviderKind {
        ProviderKind::Kavita
    }

    fn configured(&self) -> bool {
        self.base.is_some()
    }

    fn public_configured(&self) -> bool {
        self.base.is_some() && self.catalog_key.is_some()
    }

    fn hosts(&self) -> Vec<String> {
        self.base.iter().map(host_key).collect()
    }

    fn features(&self) -> Vec<FeatureSupport> {
        use GatewayFeature::*;
        let feature = FeatureSupport::supported;
        vec![
            feature(
                PublicMetadata,
                Needs::Public,
                Some("read with the instance's catalog account, never a user's"),
            ),
            feature(
                Progress,
                Needs::Account,
                Some(
                    "the title is a series and progress its highest chapter read, written page by page: \
                     chapters up to it become read, read chapters after it unread; \
                     a series without that chapter waits for review",
                ),
            ),
            feature(Rating, Needs::Account, Some("0 to 5 stars")),
            feature(WantToRead, Needs::Account, None),
            feature(
                Removal,
                Needs::Account,
                Some(
                    "removes a series from Want to Read only; Kavita cannot delete a rating or reading progress",
                ),
            ),
            FeatureSupport {
                feature: ScrobbleFromKavita,
                supported: false,
                needs: Needs::BothAccounts,
                limitation: Some("Kavita is where scrobbling reads from, not a target"),
            },
        ]
    }

    fn link_method(&self) -> LinkMethod {
        LinkMethod::ApiKey
    }

    async fn verify(&self, api_key: &str) -> Result<Account, ProviderError> {
        let (_, user) = self.authenticate(api_key).await?;
        Ok(Account {
            remote_id: None,
            name: user.username,
        })
    }

    async fn metadata(
        &self,
        kind: MetadataKind,
        id: Option<&str>,
        query: Option<&str>,
    ) -> Result<Metadata, ProviderError> {
        let key = self.catalog_key()?.to_owned();
        let url = match (kind, id, query) {
            (MetadataKind::Title, Some(id), _) => {
                let id: u32 = id
                    .trim()
                    .parse()
                    .map_err(|_| ProviderError::NotFound(NAME))?;
                self.url(&format!("api/Series/{id}"))?
            }
            (MetadataKind::Search, _, Some(query)) => {
                let mut url = self.url("api/Search/search")?;
                url.query_pairs_mut()
                    .append_pair("queryString", query.trim());
                url
            }
            _ => {
                return Err(ProviderError::Unsupported(
                    "a title lookup needs an id, a search needs a query",
                ));
            }
        };
        let answer = self.call(&key, Method::GET, &url, None).await?;
        // Kavita answers 204 (no body) for a series it does not have.
        if answer.status == StatusCode::NO_CONTENT || answer.status == StatusCode::NOT_FOUND {
            return Err(ProviderError::NotFound(NAME));
        }
        let payload: serde_json::Value = parse(&answer, "the catalog")?;
        Ok(Metadata {
            payload: payload.to_string(),
            ttl: cache::ttl_from(&answer.headers, Utc::now()),
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
        let series = series_id(title)?;
        match kind {
            ActionKind::Rating => {
                let url = self.url(&format!("api/Series/{series}"))?;
                let answer = self.call(who.credential, Method::GET, &url, None).await?;
                refused(&answer)?;
                // 204: a series this account cannot see or Kavita does not have.
                if answer.status == StatusCode::NO_CONTENT {
                    return Err(ProviderError::NotFound(NAME));
                }
                let fields: serde_json::Map<String, serde_json::Value> =
                    parse(&answer, "the series")?;
                let stars = fields.get("userRating").and_then(serde_json::Value::as_f64);
                Ok(RemoteEntry {
                    listed: true,
                    stars,
                    fields: fields
                        .into_iter()
                        .filter(|(name, _)| name == "userRating" || name == "id")
                        .collect(),
                    ..RemoteEntry::default()
                })
            }
            ActionKind::WantToRead | ActionKind::Removal => {
                let mut url = self.url("api/want-to-read")?;
                url.query_pairs_mut()
                    .append_pair("seriesId", &series.to_string());
                let answer = self.call(who.credential, Method::GET, &url, None).await?;
                refused(&answer)?;
                let listed: bool = parse(&answer, "want-to-read")?;
                Ok(RemoteEntry {
                    listed,
                    fields: [("wantToRead".to_owned(), listed.into())]
                        .into_iter()
                        .collect(),
                    ..RemoteEntry::default()
                })
            }
            ActionKind::Progress => {
                let chapters =
                    super::scrobble::chapters_read(&self.volumes(who.credential, series).await?);
                Ok(RemoteEntry {
                    listed: chapters > 0,
                    progress: Some(chapters),
                    fields: [("chaptersRead".to_owned(), chapters.into())]
                        .into_iter()
                        .collect(),
                    ..RemoteEntry::default()
                })
            }
        }
    }

    async fn write(
        &self,
        who: &Personal<'_>,
        title: &str,
        action: &Action,
        _entry: &RemoteEntry,
    ) -> Result<(), ProviderError> {
        let series = series_id(title)?;
        let (path, body) = match action {
            Action::Rating { stars } => (
                "api/Series/update-rating",
                serde_json::json!({ "seriesId": series, "userRating": stars }),
            ),
            Action::WantToRead => (
                "api/want-to-read/add-series",
                serde_json::json!({ "seriesIds": [series] }),
            ),
            Action::Removal => (
                "api/want-to-read/remove-series",
                serde_json::json!({ "seriesIds": [series] }),
            ),
            Action::Progress { chapters } => {
                return self.write_progress(who, series, *chapters).await;
            }
        };
        let url = self.url(path)?;
        let body = serde_json::to_vec(&body).expect("a JSON value serializes");
        let answer = self
            .call(who.credential, Method::POST, &url, Some(body))
            .await?;
        refused(&answer)?;
        if answer.status.is_success() {
            Ok(())
        } else {
            Err(ProviderError::Unexpected {
                provider: NAME,
                what: format!("{path} answered HTTP {}", answer.status.as_u16()),
            })
        }
    }

    async fn probe_public(&self) -> Result<(), ProviderError> {
        let key = self.catalog_key()?.to_owned();
        self.authenticate(&key).await.map(|_| ())
    }
}

impl Kavita {
    /// Makes the series' highest chapter read `target`, one
    /// `POST /api/Reader/progress` per chapter that changes (Kavita keeps
    /// progress per chapter, as pages read). Each write names the
    /// chapter's volume, series and library, as Kavita's `ProgressDto`
    /// requires.
    async fn write_progress(
        &self,
        who: &Personal<'_>,
        series: u32,
        target: u32,
    ) -> Result<(), ProviderError> {
        let url = self.url(&format!("api/Series/{series}"))?;
        let answer = self.call(who.credential, Method::GET, &url, None).await?;
        refused(&answer)?;
        if answer.status == StatusCode::NO_CONTENT {
            return Err(ProviderError::NotFound(NAME));
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct SeriesLibrary {
            library_id: u32,
        }
        let SeriesLibrary { library_id } = parse(&answer, "the series")?;
        let volumes = self.volumes(who.credential, series).await?;
        let writes = super::scrobble::progress_writes(&volumes, target)
            .map_err(ProviderError::Inapplicable)?;
        let url = self.url("api/Reader/progress")?;
        for write in writes {
            let body = serde_json::json!({
                "volumeId": write.volume_id,
                "chapterId": write.chapter_id,
                "pageNum": write.pages_read,
                "seriesId": series,
                "libraryId": library_id,
            });
            let body = serde_json::to_vec(&body).expect("a JSON value serializes");
            let answer = self
                .call(who.credential, Method::POST, &url, Some(body))
                .await?;
            refused(&answer)?;
            if !answer.status.is_success() {
                return Err(ProviderError::Unexpected {
                    provider: NAME,
                    what: format!(
                        "api/Reader/progress answered HTTP {} for chapter {}",
                        answer.status.as_u16(),
                        write.chapter_id
                    ),
                });
            }
        }
        Ok(())
    }
}

fn series_id(title: &str) -> Result<u32, ProviderError> {
    title
        .trim()
        .parse()
        .map_err(|_| ProviderError::NotFound(NAME))
}

/// A 401 that survived re-authentication: the user's key no longer works.
/// A 403 is Kavita's answer for a series the account may not see.
fn refused(answer: &Fetched) -> Result<(), ProviderError> {
    match answer.status {
        StatusCode::UNAUTHORIZED => Err(ProviderError::CredentialRefused(NAME)),
        StatusCode::FORBIDDEN => Err(ProviderError::NotFound(NAME)),
        _ => Ok(()),
    }
}

/// An answer's JSON body, or why it is not one.
fn parse<T: serde::de::DeserializeOwned>(answer: &Fetched, what: &str) -> Result<T, ProviderError> {
    if !answer.status.is_success() {
        return Err(ProviderError::Unexpected {
            provider: NAME,
            what: format!("{what} answered HTTP {}", answer.status.as_u16()),
        });
    }
    serde_json::from_slice(&answer.body).map_err(|error| ProviderError::Unexpected {
        provider: NAME,
        what: format!("{what} answered JSON we cannot read: {error}"),
    })
}

fn json_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT, HeaderValue::from_static("application/json"));
    headers
}

fn bearer(token: &SecretString) -> Result<HeaderValue, ProviderError> {
    let mut value =
        HeaderValue::from_str(&format!("Bearer {}", token.expose_secret())).map_err(|_| {
            ProviderError::Unexpected {
                provider: NAME,
                what: "authenticate answered a token that is not a header value".into(),
            }
        })?;
    value.set_sensitive(true);
    Ok(value)
}

/// The key under which a key's JWT is kept: its SHA-256, so the map holds
/// no key.
fn key_id(api_key: &str) -> String {
    crate::digest::sha256_hex(&[api_key])
}

/// A JWT's `exp` claim, read without checking the signature (Kavita
/// checks it; we only need to know when to renew).
pub fn jwt_expiry(token: &str) -> Option<DateTime<Utc>> {
    let payload = token.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    DateTime::from_timestamp(claims.get("exp")?.as_i64()?, 0)
}

/// `base` with a trailing slash, so `join` keeps a path prefix
/// (`http://host/kavita` + `api/…`).
fn with_trailing_slash(base: &Url) -> Url {
    let mut base = base.clone();
    if !base.path().ends_with('/') {
        let path = format!("{}/", base.path());
        base.set_path(&path);
    }
    base.set_query(None);
    base.set_fragment(None);
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_jwt_expiry_is_read_from_its_payload() {
        let payload = URL_SAFE_NO_PAD.encode(br#"{"nameid":"joe","exp":1800000000}"#);
        let token = format!("eyJhbGciOiJIUzUxMiJ9.{payload}.c2ln");
        assert_eq!(
            jwt_expiry(&token),
            DateTime::from_timestamp(1_800_000_000, 0)
        );
        assert_eq!(jwt_expiry("not-a-jwt"), None);
        let no_exp = format!("a.{}.b", URL_SAFE_NO_PAD.encode(br#"{"sub":"x"}"#));
        assert_eq!(jwt_expiry(&no_exp), None);
    }

    #[test]
    fn a_base_path_is_kept() {
        let base = with_trailing_slash(&Url::parse("http://kavita.lan:5000/kavita").unwrap());
        assert_eq!(
            base.join("api/Series/3").unwrap().as_str(),
            "http://kavita.lan:5000/kavita/api/Series/3"
        );
        let root = with_trailing_slash(&Url::parse("http://kavita.lan:5000").unwrap());
        assert_eq!(
            root.join("api/Series/3").unwrap().as_str(),
            "http://kavita.lan:5000/api/Series/3"
        );
    }
}
