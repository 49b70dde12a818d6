//! The Feishu (Lark) adapter, over the Open API with a tenant access token
//! made from the app's id and secret. Read-only: its only POSTs are the
//! token exchange and the metas batch query, which reads.
//!
//! - **Token**: `POST /open-apis/auth/v3/tenant_access_token/internal`
//!   (answered at the top level, not under `data`), cached and renewed five
//!   minutes before it expires (it lives about two hours), and renewed once
//!   mid-run when a call answers 99991663 (invalid or expired) or 99991661
//!   (missing): that call is then sent again. The secret is only in that
//!   request's body, never in a log.
//! - [`Adapter::enumerate`] (Feishu has no incremental listing: every run is
//!   full): the wiki spaces (all the app can see, or the configured ones),
//!   each a folder node, their node trees one level per call by
//!   `parent_node_token`, `page_token`/`has_more`; the configured drive
//!   folders recursively (`files`, `next_page_token`); then
//!   `metas/batch_query` in batches of 200 for each object's URL and last
//!   edit. A wiki node's `obj_token` is the primary id, its `node_token` the
//!   alias. A page token seen twice in one listing ends that listing (a
//!   server bug must not loop the run), counted in [`FeishuStats`].
//! - [`Adapter::fetch_markdown`]: a docx's blocks, paginated, rendered by
//!   [`blocks`]; its bitables' rows and whiteboards' images (or node texts)
//!   fetched first. A standalone bitable renders each of its tables the
//!   same way; sheets, mind notes, slides and other files degrade to their
//!   link.
//! - [`Adapter::download_asset`]: `GET /open-apis/drive/v1/medias/{token}/download`
//!   with the tenant token (media are not signed URLs); a whiteboard's image
//!   was already downloaded while its document was fetched (to know whether
//!   it works) and is handed over from memory.
//!
//! Each endpoint (API, media) has its own [`Pacer`]: 5 requests per second
//! by default (`TRELLIS_FEISHU_QPS`); code 99991400 (answered with HTTP 400
//! or 200 by some APIs), 429 and 5xx retried 3 times after
//! `x-ogw-ratelimit-reset` when given ([`ratelimit::feishu_verdict`]).
//! Error codes map to [`AdapterError`]s in [`api`]: refused credentials
//! stop the platform's run, a document not shared with the app fails that
//! document only.

pub mod api;
pub mod blocks;

use std::{
    collections::{HashMap, HashSet, VecDeque},
    num::NonZeroU32,
    path::Path,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU64, Ordering},
    },
    time::Duration,
};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use reqwest::{
    Method,
    header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue},
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::{Value, json};
use tokio::time::Instant;
use url::Url;

use self::{
    api::{Failure, Field},
    blocks::{Bitable, Board, Context, Extras, LiveBlock},
};
use super::{
    adapter::{
        Adapter, AdapterError, AssetRef, Degradation, DegradationKind, DownloadedAsset, FetchedDoc,
        NodeKind, Platform, Probe, RemoteNode, Traffic,
    },
    markers,
    ratelimit::{self, FEISHU_QPS, Pacer, Sleeper, TokioSleeper},
    settings::Settings,
};
use crate::{
    digest::sha256_hex_bytes,
    httpc::{Destination, Fetched, HttpClient, HttpSettings, retry::RetryPolicy},
};

/// The default API origin (`TRELLIS_FEISHU_API_URL`).
pub const DEFAULT_API_URL: &str = "https://open.feishu.cn";
/// Objects per metas batch query: Feishu's maximum.
pub const METAS_BATCH: usize = 200;
/// The token is renewed when less than this is left of its life.
pub const TOKEN_RENEW_AHEAD: Duration = Duration::from_secs(5 * 60);
/// Wiki spaces and nodes per page: Feishu's maximum.
const WIKI_PAGE_SIZE: &str = "50";
/// Drive files per page: Feishu's maximum.
const DRIVE_PAGE_SIZE: &str = "200";
/// Docx blocks per page: Feishu's maximum.
const BLOCK_PAGE_SIZE: &str = "500";
/// Bitable records per page: Feishu's maximum.
const RECORD_PAGE_SIZE: u32 = 500;
/// Media are read whole into memory: Feishu's own attachment cap is higher,
/// but a mirror has no use for bigger files.
const MAX_MEDIA_BYTES: usize = 64 * 1024 * 1024;
/// Characters a token keeps verbatim in a URL path.
const PATH_SEGMENT: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.');
/// The object types `metas/batch_query` answers for.
const META_TYPES: [&str; 8] = [
    "doc", "docx", "sheet", "bitable", "mindnote", "file", "slides", "folder",
];

/// How the adapter is built; the settings wiring fills it.
pub struct FeishuConfig {
    /// The Open API's base URL (`TRELLIS_FEISHU_API_URL`).
    pub api_url: Url,
    /// The app id (`TRELLIS_FEISHU_APP_ID`).
    pub app_id: String,
    /// The app secret; never logged.
    pub app_secret: SecretString,
    /// The wiki spaces to mirror; `None` for every space the app can see.
    pub wiki_spaces: Option<Vec<String>>,
    /// The drive folder tokens to mirror.
    pub drive_folders: Vec<String>,
    /// A bitable with at most this many rows is inlined as a table.
    pub bitable_inline_max_rows: u32,
    /// Requests per second to the API, and to the media downloads.
    pub api_qps: NonZeroU32,
    pub asset_qps: NonZeroU32,
    /// Retries of each request.
    pub retry: RetryPolicy,
    /// How retry waits are taken (real time outside tests).
    pub sleeper: Arc<dyn Sleeper>,
}

impl FeishuConfig {
    /// The defaults: every wiki space, no drive folder, bitables inlined up
    /// to 200 rows, 5 QPS each, 3 retries, real time.
    pub fn new(api_url: Url, app_id: String, app_secret: SecretString) -> Self {
        FeishuConfig {
            api_url,
            app_id,
            app_secret,
            wiki_spaces: None,
            drive_folders: Vec::new(),
            bitable_inline_max_rows: 200,
            api_qps: FEISHU_QPS,
            asset_qps: FEISHU_QPS,
            retry: ratelimit::docs_retry_policy(),
            sleeper: Arc::new(TokioSleeper),
        }
    }

    /// The configuration the settings describe (`TRELLIS_FEISHU_*`,
    /// `TRELLIS_DOCS_BITABLE_INLINE_MAX_ROWS`); `None` when Feishu has no
    /// credentials (the platform is skipped, not failed).
    pub fn from_settings(settings: &Settings) -> Option<Self> {
        if !settings.feishu_configured() {
            return None;
        }
        let app_id = settings.feishu_app_id.as_deref()?.trim().to_owned();
        let secret = settings.feishu_app_secret.as_ref()?;
        let mut config = Self::new(
            settings.feishu_api_url.clone(),
            app_id,
            SecretString::from(secret.expose().to_owned()),
        );
        config.wiki_spaces = settings.wiki_spaces();
        config.drive_folders = settings.drive_folders();
        config.bitable_inline_max_rows = settings.docs_bitable_inline_max_rows;
        let qps = NonZeroU32::new(settings.feishu_qps).unwrap_or(FEISHU_QPS);
        config.api_qps = qps;
        config.asset_qps = qps;
        Some(config)
    }
}

/// What the adapter counted beyond its pacers' requests.
#[derive(Debug, Default)]
pub struct FeishuStats {
    token_fetches: AtomicU64,
    repeated_page_tokens: AtomicU64,
}

impl FeishuStats {
    /// Tenant tokens obtained (the first, and each renewal).
    pub fn token_fetches(&self) -> u64 {
        self.token_fetches.load(Ordering::Relaxed)
    }

    /// Listings stopped because Feishu handed out a page token twice.
    pub fn repeated_page_tokens(&self) -> u64 {
        self.repeated_page_tokens.load(Ordering::Relaxed)
    }
}

struct CachedToken {
    value: SecretString,
    renew_at: Instant,
}

/// Which endpoint a request goes to.
#[derive(Clone, Copy)]
enum Endpoint {
    Api,
    Media,
}

/// Downloaded bytes and what the server said they are.
struct Media {
    content_type: Option<String>,
    bytes: Vec<u8>,
}

/// A successful answer: an envelope's `data`, or downloaded bytes.
enum Answer {
    Data(Value),
    Bytes(Fetched),
}

/// The Feishu platform (see the module doc).
pub struct FeishuAdapter {
    api_url: Url,
    app_id: String,
    app_secret: SecretString,
    wiki_spaces: Option<Vec<String>>,
    drive_folders: Vec<String>,
    bitable_inline_max_rows: u32,
    api: HttpClient,
    media: HttpClient,
    api_pacer: Pacer,
    media_pacer: Pacer,
    token: tokio::sync::Mutex<Option<CachedToken>>,
    /// Whiteboard images downloaded during a fetch, by asset key, until the
    /// engine asks for them.
    board_images: Mutex<HashMap<String, Media>>,
    stats: FeishuStats,
}

impl std::fmt::Debug for FeishuAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FeishuAdapter")
            .field("api_url", &self.api_url.as_str())
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

/// What a paginated listing returned.
struct Listing<T> {
    items: Vec<T>,
    /// The total the last page announced, if any.
    total: Option<u64>,
}

/// Tracks a listing's page tokens: a token seen twice ends it.
#[derive(Default)]
struct Pages {
    seen: HashSet<String>,
}

impl Pages {
    /// The next page's token, or `None` when the listing is over.
    fn next(
        &mut self,
        has_more: bool,
        token: Option<String>,
        what: &str,
        stats: &FeishuStats,
    ) -> Option<String> {
        if !has_more {
            return None;
        }
        let token = token.filter(|token| !token.is_empty());
        let Some(token) = token else {
            tracing::warn!(what, "feishu listing has more but gave no page token");
            return None;
        };
        if !self.seen.insert(token.clone()) {
            stats.repeated_page_tokens.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(what, "feishu listing repeated a page token; stopped there");
            return None;
        }
        Some(token)
    }
}

fn segment(token: &str) -> String {
    utf8_percent_encode(token, PATH_SEGMENT).to_string()
}

fn is_json(answer: &Fetched) -> bool {
    answer
        .headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.contains("json"))
}

/// A bitable field type's name, for an oversize table's schema.
fn field_type_name(kind: u64) -> String {
    match kind {
        1 => "text",
        2 => "number",
        3 => "single select",
        4 => "multi select",
        5 => "date",
        7 => "checkbox",
        11 => "person",
        13 => "phone",
        15 => "url",
        17 => "attachment",
        18 => "link",
        19 => "lookup",
        20 => "formula",
        21 => "two-way link",
        22 => "location",
        23 => "group",
        1001 => "created time",
        1002 => "modified time",
        1003 => "created by",
        1004 => "modified by",
        1005 => "auto number",
        _ => return format!("type {kind}"),
    }
    .to_owned()
}

/// A bitable cell as a plain string.
fn cell_text(value: Option<&Value>, kind: u64) -> String {
    let Some(value) = value else {
        return String::new();
    };
    match value {
        Value::Null => String::new(),
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => match (kind, number.as_i64()) {
            (5 | 1001 | 1002, Some(millis)) => chrono::DateTime::from_timestamp_millis(millis)
                .map(|at| at.format("%Y-%m-%d %H:%M").to_string())
                .unwrap_or_else(|| number.to_string()),
            _ => number.to_string(),
        },
        // A text field is a list of segments read as one string.
        Value::Array(items) if kind == 1 => items
            .iter()
            .map(|item| cell_text(Some(item), kind))
            .collect(),
        Value::Array(items) => items
            .iter()
            .map(|item| cell_text(Some(item), kind))
            .filter(|text| !text.is_empty())
            .collect::<Vec<_>>()
            .join(", "),
        Value::Object(object) => {
            let keys: &[&str] = if kind == 15 {
                &["link", "text"]
            } else {
                &["text", "name", "full_address", "link", "email", "id"]
            };
            keys.iter()
                .find_map(|key| object.get(*key).and_then(Value::as_str))
                .map(str::to_owned)
                .unwrap_or_else(|| {
                    // Formulas and lookups wrap their values.
                    object
                        .get("value")
                        .map(|inner| cell_text(Some(inner), 0))
                        .unwrap_or_default()
                })
        }
    }
}

impl FeishuAdapter {
    /// An adapter whose API and media clients reach the configured origin
    /// exactly (loopback and private networks included, redirects off it
    /// refused): Feishu serves media from the API origin.
    pub fn new(config: FeishuConfig) -> anyhow::Result<Self> {
        let api = HttpClient::new(HttpSettings {
            destination: Destination::configured(&config.api_url)?,
            ..HttpSettings::default()
        })?;
        let media = HttpClient::new(HttpSettings {
            destination: Destination::configured(&config.api_url)?,
            max_body_bytes: MAX_MEDIA_BYTES,
            ..HttpSettings::default()
        })?;
        Ok(Self::with_clients(config, api, media))
    }

    /// An adapter over given clients.
    pub fn with_clients(config: FeishuConfig, api: HttpClient, media: HttpClient) -> Self {
        FeishuAdapter {
            api_pacer: Pacer::new(config.api_qps, config.retry, config.sleeper.clone()),
            media_pacer: Pacer::new(config.asset_qps, config.retry, config.sleeper),
            api_url: config.api_url,
            app_id: config.app_id,
            app_secret: config.app_secret,
            wiki_spaces: config.wiki_spaces,
            drive_folders: config.drive_folders,
            bitable_inline_max_rows: config.bitable_inline_max_rows,
            api,
            media,
            token: tokio::sync::Mutex::new(None),
            board_images: Mutex::default(),
            stats: FeishuStats::default(),
        }
    }

    /// The API pacer's counters (requests, retries) for a run's progress.
    pub fn api_stats(&self) -> &ratelimit::PacerStats {
        self.api_pacer.stats()
    }

    /// The media pacer's counters.
    pub fn media_stats(&self) -> &ratelimit::PacerStats {
        self.media_pacer.stats()
    }

    /// Token fetches and repeated page tokens.
    pub fn stats(&self) -> &FeishuStats {
        &self.stats
    }

    /// `open-apis/<path>` on the configured origin, with `query`.
    fn url(&self, path: &str, query: &[(&str, &str)]) -> Result<String, AdapterError> {
        let mut url = self
            .api_url
            .join(&format!("open-apis/{path}"))
            .map_err(|error| AdapterError::Protocol(format!("{path}: {error}")))?;
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url.into())
    }

    /// A valid tenant token: the cached one, or a new one.
    async fn token(&self) -> Result<SecretString, AdapterError> {
        let mut slot = self.token.lock().await;
        if let Some(cached) = slot.as_ref()
            && Instant::now() < cached.renew_at
        {
            return Ok(cached.value.clone());
        }
        let fresh = self.fetch_token().await?;
        let value = fresh.value.clone();
        *slot = Some(fresh);
        Ok(value)
    }

    /// Forgets `stale` (unless another call already replaced it).
    async fn forget_token(&self, stale: &SecretString) {
        let mut slot = self.token.lock().await;
        if slot
            .as_ref()
            .is_some_and(|cached| cached.value.expose_secret() == stale.expose_secret())
        {
            *slot = None;
        }
    }

    async fn fetch_token(&self) -> Result<CachedToken, AdapterError> {
        let url = self.url("auth/v3/tenant_access_token/internal", &[])?;
        let body = json!({
            "app_id": self.app_id,
            "app_secret": self.app_secret.expose_secret(),
        });
        let mut headers = HeaderMap::new();
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_static("application/json; charset=utf-8"),
        );
        let answer = self
            .api_pacer
            .send(
                &self.api,
                Method::POST,
                &url,
                headers,
                Some(body.to_string().into_bytes()),
                ratelimit::feishu_verdict,
            )
            .await
            .map_err(api::transport)?;
        self.stats.token_fetches.fetch_add(1, Ordering::Relaxed);
        let parsed: api::TokenAnswer = match serde_json::from_slice(&answer.body) {
            Ok(parsed) => parsed,
            Err(_) => {
                return Err(
                    match api::classify_code(
                        answer.status.as_u16(),
                        None,
                        "",
                        &answer,
                        "tenant_access_token",
                    ) {
                        Failure::Token => AdapterError::Unauthorized,
                        Failure::Other(error) => error,
                    },
                );
            }
        };
        if parsed.code != 0 {
            if let Failure::Other(error @ AdapterError::RateLimited { .. }) = api::classify_code(
                answer.status.as_u16(),
                Some(parsed.code),
                &parsed.msg,
                &answer,
                "tenant_access_token",
            ) {
                return Err(error);
            }
            // A wrong app id or secret: nothing later can succeed.
            tracing::warn!(
                code = parsed.code,
                msg = %parsed.msg,
                "feishu refused the app credentials"
            );
            return Err(AdapterError::Unauthorized);
        }
        let token = parsed.tenant_access_token.filter(|token| !token.is_empty());
        let Some(token) = token else {
            return Err(AdapterError::Protocol(
                "the token answer has no tenant_access_token".into(),
            ));
        };
        let life = Duration::from_secs(parsed.expire.unwrap_or(0));
        Ok(CachedToken {
            value: SecretString::from(token),
            renew_at: Instant::now() + life.saturating_sub(TOKEN_RENEW_AHEAD),
        })
    }

    /// One authorized call, paced and retried; the token renewed once if
    /// Feishu says it is invalid or missing. `binary` accepts a non-JSON
    /// success (a download).
    async fn exchange(
        &self,
        endpoint: Endpoint,
        method: Method,
        url: &str,
        body: Option<&Value>,
        id: &str,
        binary: bool,
    ) -> Result<Answer, AdapterError> {
        let (client, pacer) = match endpoint {
            Endpoint::Api => (&self.api, &self.api_pacer),
            Endpoint::Media => (&self.media, &self.media_pacer),
        };
        let body = body.map(|body| body.to_string().into_bytes());
        let mut renewed = false;
        loop {
            let token = self.token().await?;
            let mut headers = HeaderMap::new();
            let mut bearer = HeaderValue::from_str(&format!("Bearer {}", token.expose_secret()))
                .map_err(|_| AdapterError::Protocol("the tenant token is not a header".into()))?;
            bearer.set_sensitive(true);
            headers.insert(AUTHORIZATION, bearer);
            if body.is_some() {
                headers.insert(
                    CONTENT_TYPE,
                    HeaderValue::from_static("application/json; charset=utf-8"),
                );
            }
            let answer = pacer
                .send(
                    client,
                    method.clone(),
                    url,
                    headers,
                    body.clone(),
                    ratelimit::feishu_verdict,
                )
                .await
                .map_err(api::transport)?;
            if binary && answer.status.is_success() && !is_json(&answer) {
                return Ok(Answer::Bytes(answer));
            }
            let outcome = api::envelope(&answer, id);
            match outcome {
                Ok(_) if binary => return Ok(Answer::Bytes(answer)),
                Ok(data) => return Ok(Answer::Data(data)),
                Err(Failure::Token) if !renewed => {
                    tracing::info!("feishu tenant token refused mid-run; renewing it");
                    self.forget_token(&token).await;
                    renewed = true;
                }
                Err(Failure::Token) => return Err(AdapterError::Unauthorized),
                Err(Failure::Other(error)) => return Err(error),
            }
        }
    }

    /// A GET (or POST with `body`) to the API: the envelope's `data` as `T`.
    async fn call<T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
        id: &str,
    ) -> Result<T, AdapterError> {
        let url = self.url(path, query)?;
        match self
            .exchange(Endpoint::Api, method, &url, body, id, false)
            .await?
        {
            Answer::Data(data) => api::parse(data, path),
            Answer::Bytes(_) => Err(AdapterError::Protocol(format!("{path}: not JSON"))),
        }
    }

    /// A download from the API origin: its bytes and content type.
    async fn download(&self, url: &str, id: &str) -> Result<Media, AdapterError> {
        match self
            .exchange(Endpoint::Media, Method::GET, url, None, id, true)
            .await?
        {
            Answer::Bytes(answer) => Ok(Media {
                content_type: answer
                    .headers
                    .get(CONTENT_TYPE)
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned),
                bytes: answer.body,
            }),
            Answer::Data(_) => Err(AdapterError::Protocol(format!("{id}: no bytes"))),
        }
    }

    /// Every item of a paginated listing, page after page; with `max`, it
    /// stops once more than `max` items came (or the total says there are).
    async fn list<P: api::Paged>(
        &self,
        path: &str,
        query: &[(&str, &str)],
        id: &str,
        max: Option<usize>,
    ) -> Result<Listing<P::Item>, AdapterError> {
        let mut items = Vec::new();
        let mut pages = Pages::default();
        let mut page_token: Option<String> = None;
        loop {
            let mut full = query.to_vec();
            if let Some(token) = &page_token {
                full.push(("page_token", token.as_str()));
            }
            let page: P = self.call(Method::GET, path, &full, None, id).await?;
            let (page_items, has_more, next, total) = page.split();
            items.extend(page_items);
            let past = max.is_some_and(|max| {
                items.len() > max || total.is_some_and(|total| total > max as u64)
            });
            page_token = if past {
                None
            } else {
                pages.next(has_more, next, path, &self.stats)
            };
            if page_token.is_none() {
                return Ok(Listing { items, total });
            }
        }
    }

    /// Every wiki space the app can see.
    async fn list_spaces(&self) -> Result<Vec<api::Space>, AdapterError> {
        let query = [("page_size", WIKI_PAGE_SIZE)];
        let listing = self
            .list::<api::SpacePage>("wiki/v2/spaces", &query, "wiki spaces", None)
            .await?;
        Ok(listing.items)
    }

    /// One configured wiki space, for its name.
    async fn space(&self, space_id: &str) -> Result<api::Space, AdapterError> {
        let answer: api::SpaceAnswer = self
            .call(
                Method::GET,
                &format!("wiki/v2/spaces/{}", segment(space_id)),
                &[],
                None,
                space_id,
            )
            .await?;
        Ok(answer.space)
    }

    /// A space's node tree, one level per call, breadth first.
    async fn list_wiki(
        &self,
        space_id: &str,
        nodes: &mut Vec<RemoteNode>,
        doc_types: &mut HashMap<String, String>,
    ) -> Result<(), AdapterError> {
        let path = format!("wiki/v2/spaces/{}/nodes", segment(space_id));
        // (parent node token, parent's primary id); the root level has none.
        let mut levels: VecDeque<(Option<String>, String)> =
            VecDeque::from([(None, space_id.to_owned())]);
        while let Some((parent_token, parent_id)) = levels.pop_front() {
            let mut query = vec![("page_size", WIKI_PAGE_SIZE)];
            if let Some(parent) = &parent_token {
                query.push(("parent_node_token", parent.as_str()));
            }
            let level = self
                .list::<api::NodePage>(&path, &query, space_id, None)
                .await?;
            for item in level.items {
                // A shortcut lists its target again: mirrored once.
                if doc_types.contains_key(&item.obj_token) || item.obj_token.is_empty() {
                    continue;
                }
                doc_types.insert(item.obj_token.clone(), item.obj_type.clone());
                if item.has_child {
                    levels.push_back((Some(item.node_token.clone()), item.obj_token.clone()));
                }
                nodes.push(RemoteNode {
                    alt_id: Some(item.node_token).filter(|alt| *alt != item.obj_token),
                    kind: api::kind_of(&item.obj_type),
                    parent_id: Some(parent_id.clone()),
                    title: item.title,
                    edited_at: api::seconds(item.obj_edit_time.as_deref()),
                    url: None,
                    id: item.obj_token,
                });
            }
        }
        Ok(())
    }

    /// A drive folder's files, recursively.
    async fn list_folder(
        &self,
        folder: &str,
        nodes: &mut Vec<RemoteNode>,
        doc_types: &mut HashMap<String, String>,
    ) -> Result<(), AdapterError> {
        let mut folders = vec![folder.to_owned()];
        while let Some(current) = folders.pop() {
            let query = [
                ("folder_token", current.as_str()),
                ("page_size", DRIVE_PAGE_SIZE),
            ];
            let listing = self
                .list::<api::FilePage>("drive/v1/files", &query, &current, None)
                .await?;
            for file in listing.items {
                if doc_types.contains_key(&file.token) || file.token.is_empty() {
                    continue;
                }
                doc_types.insert(file.token.clone(), file.kind.clone());
                if file.kind == "folder" {
                    folders.push(file.token.clone());
                }
                nodes.push(RemoteNode {
                    alt_id: None,
                    kind: api::kind_of(&file.kind),
                    parent_id: Some(current.clone()),
                    title: file.name,
                    edited_at: api::seconds(file.modified_time.as_deref()),
                    url: file.url,
                    id: file.token,
                });
            }
        }
        Ok(())
    }

    /// URLs, edit times (and missing titles) from `metas/batch_query`, 200
    /// objects per call.
    async fn backfill_metas(
        &self,
        nodes: &mut [RemoteNode],
        doc_types: &HashMap<String, String>,
    ) -> Result<(), AdapterError> {
        let wanted: Vec<(&str, &str)> = nodes
            .iter()
            .filter_map(|node| {
                let doc_type = doc_types.get(&node.id)?;
                META_TYPES
                    .contains(&doc_type.as_str())
                    .then_some((node.id.as_str(), doc_type.as_str()))
            })
            .collect();
        let mut metas: HashMap<String, api::Meta> = HashMap::new();
        for batch in wanted.chunks(METAS_BATCH) {
            let request = json!({
                "request_docs": batch
                    .iter()
                    .map(|(token, doc_type)| json!({"doc_token": token, "doc_type": doc_type}))
                    .collect::<Vec<_>>(),
                "with_url": true,
            });
            let answer: api::MetasAnswer = self
                .call(
                    Method::POST,
                    "drive/v1/metas/batch_query",
                    &[],
                    Some(&request),
                    "metas",
                )
                .await?;
            metas.extend(
                answer
                    .metas
                    .into_iter()
                    .map(|meta| (meta.doc_token.clone(), meta)),
            );
        }
        for node in nodes.iter_mut() {
            let Some(meta) = metas.remove(&node.id) else {
                continue;
            };
            if let Some(url) = meta.url.filter(|url| !url.is_empty()) {
                node.url = Some(url);
            }
            if let Some(edited) = api::seconds(meta.latest_modify_time.as_deref()) {
                node.edited_at = Some(edited);
            }
            if node.title.trim().is_empty() || node.title == node.id {
                node.title = meta.title;
            }
        }
        Ok(())
    }

    /// Every block of a docx, page after page.
    async fn document_blocks(&self, document_id: &str) -> Result<Vec<Value>, AdapterError> {
        let path = format!("docx/v1/documents/{}/blocks", segment(document_id));
        let query = [
            ("page_size", BLOCK_PAGE_SIZE),
            ("document_revision_id", "-1"),
        ];
        let listing = self
            .list::<api::BlockPage>(&path, &query, document_id, None)
            .await?;
        Ok(listing.items)
    }

    /// A bitable table, inlined, summarized or failed; only refused
    /// credentials stop the document.
    async fn bitable(&self, app_token: &str, table_id: &str) -> Result<Bitable, AdapterError> {
        match self.bitable_table(app_token, table_id).await {
            Ok(bitable) => Ok(bitable),
            Err(AdapterError::Unauthorized) => Err(AdapterError::Unauthorized),
            Err(error) => {
                tracing::info!(app_token, table_id, %error, "feishu bitable unavailable; degraded to its link");
                Ok(Bitable::Failed {
                    reason: error.to_string(),
                })
            }
        }
    }

    async fn bitable_table(
        &self,
        app_token: &str,
        table_id: &str,
    ) -> Result<Bitable, AdapterError> {
        let base = format!(
            "bitable/v1/apps/{}/tables/{}",
            segment(app_token),
            segment(table_id)
        );
        let fields: Vec<Field> = self
            .list::<api::FieldPage>(
                &format!("{base}/fields"),
                &[("page_size", "100")],
                app_token,
                None,
            )
            .await?
            .items;
        let limit = self.bitable_inline_max_rows;
        // One row past the limit tells an oversize table without the total.
        let page_size = limit
            .saturating_add(1)
            .clamp(1, RECORD_PAGE_SIZE)
            .to_string();
        let listing = self
            .list::<api::RecordPage>(
                &format!("{base}/records"),
                &[("page_size", page_size.as_str())],
                app_token,
                Some(limit as usize),
            )
            .await?;
        let rows = listing.total.unwrap_or(0).max(listing.items.len() as u64);
        if rows > u64::from(limit) {
            return Ok(Bitable::Oversize {
                fields: fields
                    .iter()
                    .map(|field| (field.field_name.clone(), field_type_name(field.kind)))
                    .collect(),
                rows,
                limit,
            });
        }
        let records = listing.items;
        Ok(Bitable::Inline {
            fields: fields
                .iter()
                .map(|field| field.field_name.clone())
                .collect(),
            rows: records
                .iter()
                .map(|record| {
                    fields
                        .iter()
                        .map(|field| cell_text(record.fields.get(&field.field_name), field.kind))
                        .collect()
                })
                .collect(),
        })
    }

    /// A whiteboard: its image when the download works (kept for the
    /// engine's `download_asset`), else its nodes' texts, else nothing.
    async fn board(&self, token: &str) -> Result<Board, AdapterError> {
        let url = self.url(
            &format!("board/v1/whiteboards/{}/download_as_image", segment(token)),
            &[],
        )?;
        match self.download(&url, token).await {
            Ok(image) => {
                // Keyed by its bytes too: an edited board is a new asset
                // (the engine never downloads a key it already has).
                let digest = sha256_hex_bytes(&image.bytes);
                let remote_key = format!("board:{token}:{}", &digest[..16]);
                if let Ok(mut images) = self.board_images.lock() {
                    images.insert(remote_key.clone(), image);
                }
                return Ok(Board::Image {
                    remote_key,
                    download_url: url,
                });
            }
            Err(AdapterError::Unauthorized) => return Err(AdapterError::Unauthorized),
            Err(error) => {
                tracing::info!(token, %error, "feishu whiteboard image unavailable; reading its texts");
            }
        }
        let nodes: Result<api::BoardNodes, AdapterError> = self
            .call(
                Method::GET,
                &format!("board/v1/whiteboards/{}/nodes", segment(token)),
                &[],
                None,
                token,
            )
            .await;
        match nodes {
            Ok(nodes) => {
                let texts: Vec<String> = nodes
                    .nodes
                    .iter()
                    .filter_map(|node| node.pointer("/text/text").and_then(Value::as_str))
                    .map(str::trim)
                    .filter(|text| !text.is_empty())
                    .map(str::to_owned)
                    .collect();
                Ok(if texts.is_empty() {
                    Board::Failed
                } else {
                    Board::Texts { texts }
                })
            }
            Err(AdapterError::Unauthorized) => Err(AdapterError::Unauthorized),
            Err(_) => Ok(Board::Failed),
        }
    }

    /// Renders `blocks` for `node`, fetching its live blocks first.
    async fn render(
        &self,
        node: &RemoteNode,
        blocks: &[Value],
    ) -> Result<FetchedDoc, AdapterError> {
        // Only this document's whiteboard images wait for the engine: it
        // downloads a document's assets right after its fetch, and an image
        // dropped here is downloaded again if it still asks.
        if let Ok(mut images) = self.board_images.lock() {
            images.clear();
        }
        let mut extras = Extras::default();
        for live in blocks::live_blocks(blocks) {
            match live {
                LiveBlock::Bitable {
                    token,
                    app_token,
                    table_id,
                } => {
                    let bitable = self.bitable(&app_token, &table_id).await?;
                    extras.bitables.insert(token, bitable);
                }
                LiveBlock::Board { token } => {
                    let board = self.board(&token).await?;
                    extras.boards.insert(token, board);
                }
            }
        }
        let api_base = self.url("", &[])?;
        let context = Context {
            doc_url: node.url.as_deref(),
            api_base: &api_base,
        };
        let rendered = blocks::render(blocks, &context, &extras);
        Ok(FetchedDoc {
            markdown: rendered.markdown,
            body: rendered.body,
            assets: rendered.assets,
            links: rendered.links,
            degradations: rendered.degradations,
        })
    }

    /// A standalone bitable: each of its tables under its name, rendered
    /// like a bitable block.
    async fn bitable_document(&self, node: &RemoteNode) -> Result<FetchedDoc, AdapterError> {
        let path = format!("bitable/v1/apps/{}/tables", segment(&node.id));
        let tables = self
            .list::<api::TablePage>(&path, &[("page_size", "100")], &node.id, None)
            .await?
            .items;
        // The same tree a document embedding these tables would have.
        let mut blocks = vec![json!({
            "block_id": node.id,
            "block_type": blocks::block_type::PAGE,
            "children": tables.iter().enumerate().flat_map(|(index, _)| {
                [format!("table-{index}-name"), format!("table-{index}")]
            }).collect::<Vec<_>>(),
            "page": {"elements": [{"text_run": {"content": node.title}}]},
        })];
        for (index, table) in tables.iter().enumerate() {
            blocks.push(json!({
                "block_id": format!("table-{index}-name"),
                "block_type": blocks::block_type::HEADING1 + 1,
                "heading2": {"elements": [{"text_run": {"content": table.name}}]},
            }));
            blocks.push(json!({
                "block_id": format!("table-{index}"),
                "block_type": blocks::block_type::BITABLE,
                "bitable": {"token": format!("{}_{}", node.id, table.table_id)},
            }));
        }
        self.render(node, &blocks).await
    }
}

/// The body of an object whose content stays online: its link and marker.
fn placeholder(node: &RemoteNode, label: &str, kind: DegradationKind) -> FetchedDoc {
    let title = if node.title.trim().is_empty() {
        node.id.as_str()
    } else {
        node.title.as_str()
    };
    let shown = match &node.url {
        Some(url) => format!("{label}: [{}]({url})", title.replace(['[', ']'], "")),
        None => format!("{label}: {title} (`{}`)", node.id),
    };
    let degradation = Degradation {
        kind,
        id: node.id.clone(),
    };
    FetchedDoc {
        markdown: format!("{shown}\n"),
        body: Some(format!("{shown} {}\n", markers::render(&degradation))),
        degradations: vec![degradation],
        ..FetchedDoc::default()
    }
}

#[async_trait::async_trait]
impl Adapter for FeishuAdapter {
    fn platform(&self) -> Platform {
        Platform::Feishu
    }

    fn traffic(&self) -> Traffic {
        let (api, media) = (self.api_pacer.stats(), self.media_pacer.stats());
        Traffic {
            requests: api.requests() + media.requests(),
            waits: api.retries() + media.retries(),
        }
    }

    /// `F2` a tenant token is obtained; `F3` the wiki can be read (one page
    /// of spaces, or the first configured space); `F4` the first configured
    /// drive folder can be listed; `F5` every answer had Feishu's `{code,
    /// msg, data}` envelope.
    async fn probes(&self) -> Vec<Probe> {
        let mut probes = Vec::new();
        match self.token().await {
            Ok(_) => probes.push(Probe::pass("F2", "Feishu issued a tenant access token")),
            Err(AdapterError::Unauthorized) => {
                probes.push(Probe::fail(
                    "F2",
                    "Feishu refused the app id and secret (TRELLIS_FEISHU_APP_ID, TRELLIS_FEISHU_APP_SECRET)",
                ));
                return probes;
            }
            Err(error) => {
                probes.push(Probe::fail(
                    "F2",
                    format!("no tenant access token: {error}"),
                ));
                return probes;
            }
        }
        let wiki = match self.wiki_spaces.as_deref() {
            None => self
                .call::<api::SpacePage>(
                    Method::GET,
                    "wiki/v2/spaces",
                    &[("page_size", "1")],
                    None,
                    "wiki spaces",
                )
                .await
                .map(drop),
            Some([first, ..]) => self.space(first).await.map(drop),
            Some([]) => Ok(()),
        };
        let drive = match self.drive_folders.first() {
            Some(folder) => self
                .call::<api::FilePage>(
                    Method::GET,
                    "drive/v1/files",
                    &[("folder_token", folder.as_str()), ("page_size", "1")],
                    None,
                    folder,
                )
                .await
                .map(drop),
            None => Ok(()),
        };
        let scope = |code: &str, what: &str, answer: &Result<(), AdapterError>| match answer {
            Ok(()) => Probe::pass(code, format!("the {what} can be read")),
            Err(AdapterError::Forbidden { id }) => Probe::fail(
                code,
                format!(
                    "the app may not read {id}: grant the {what} scope, and share it with the app"
                ),
            ),
            Err(error) => Probe::fail(code, format!("the {what}: {error}")),
        };
        probes.push(scope("F3", "wiki", &wiki));
        probes.push(match (self.drive_folders.is_empty(), &drive) {
            (true, _) => Probe::pass("F4", "no drive folder is configured"),
            (false, answer) => scope("F4", "drive folder", answer),
        });
        let shapeless = [&wiki, &drive].into_iter().find_map(|answer| match answer {
            Err(AdapterError::Protocol(error)) => Some(error.clone()),
            _ => None,
        });
        probes.push(match shapeless {
            None => Probe::pass("F5", "answers have the {code, msg, data} envelope"),
            Some(error) => Probe::fail("F5", format!("an answer had another shape: {error}")),
        });
        probes
    }

    async fn enumerate(&self) -> Result<Vec<RemoteNode>, AdapterError> {
        let mut nodes = Vec::new();
        let mut doc_types: HashMap<String, String> = HashMap::new();
        let spaces = match &self.wiki_spaces {
            None => self.list_spaces().await?,
            Some(ids) => {
                let mut spaces = Vec::with_capacity(ids.len());
                for id in ids {
                    spaces.push(self.space(id).await?);
                }
                spaces
            }
        };
        for space in spaces {
            nodes.push(RemoteNode {
                id: space.space_id.clone(),
                alt_id: None,
                kind: NodeKind::Folder,
                parent_id: None,
                title: space.name,
                edited_at: None,
                url: None,
            });
            self.list_wiki(&space.space_id, &mut nodes, &mut doc_types)
                .await?;
        }
        for folder in &self.drive_folders {
            if doc_types.contains_key(folder) {
                continue;
            }
            doc_types.insert(folder.clone(), "folder".into());
            nodes.push(RemoteNode {
                id: folder.clone(),
                alt_id: None,
                kind: NodeKind::Folder,
                parent_id: None,
                title: folder.clone(),
                edited_at: None,
                url: None,
            });
            self.list_folder(folder, &mut nodes, &mut doc_types).await?;
        }
        self.backfill_metas(&mut nodes, &doc_types).await?;
        Ok(nodes)
    }

    async fn fetch_markdown(&self, node: &RemoteNode) -> Result<FetchedDoc, AdapterError> {
        match node.kind {
            NodeKind::Docx => {
                let blocks = self.document_blocks(&node.id).await?;
                self.render(node, &blocks).await
            }
            NodeKind::Bitable => self.bitable_document(node).await,
            NodeKind::Sheet => Ok(placeholder(
                node,
                "Feishu spreadsheet",
                DegradationKind::Sheet,
            )),
            NodeKind::Mindnote => Ok(placeholder(
                node,
                "Feishu mind note",
                DegradationKind::Mindnote,
            )),
            NodeKind::Slides => Ok(placeholder(
                node,
                "Feishu slides",
                DegradationKind::UnknownBlock,
            )),
            NodeKind::Page | NodeKind::Row | NodeKind::File => Ok(placeholder(
                node,
                "Feishu file",
                DegradationKind::UnknownBlock,
            )),
            NodeKind::Database | NodeKind::Folder => Ok(FetchedDoc::default()),
        }
    }

    async fn download_asset(
        &self,
        asset: &AssetRef,
        dest: &Path,
    ) -> Result<DownloadedAsset, AdapterError> {
        let kept = self
            .board_images
            .lock()
            .ok()
            .and_then(|mut images| images.remove(&asset.remote_key));
        let Media {
            content_type,
            bytes,
        } = match kept {
            Some(image) => image,
            None => {
                self.download(&asset.download_url, &asset.remote_key)
                    .await?
            }
        };
        tokio::fs::write(dest, &bytes)
            .await
            .map_err(|error| AdapterError::Io(error.to_string()))?;
        Ok(DownloadedAsset {
            content_type,
            bytes: bytes.len() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn bitable_cells_read_as_plain_strings() {
        let cases = [
            (json!("plain"), 1, "plain"),
            (
                json!([{"type": "text", "text": "Hello "}, {"type": "mention", "text": "@Ada"}]),
                1,
                "Hello @Ada",
            ),
            (json!(3.5), 2, "3.5"),
            (json!("High"), 3, "High"),
            (json!(["web", "api"]), 4, "web, api"),
            (json!(1_733_212_800_000_i64), 5, "2024-12-03 08:00"),
            (json!(true), 7, "true"),
            (
                json!([{"id": "ou_1", "name": "Ada"}, {"id": "ou_2", "name": "Lin"}]),
                11,
                "Ada, Lin",
            ),
            (
                json!({"link": "https://example.com", "text": "site"}),
                15,
                "https://example.com",
            ),
            (json!([{"name": "a.png", "file_token": "box"}]), 17, "a.png"),
            (json!({"type": 2, "value": [42]}), 20, "42"),
            (Value::Null, 1, ""),
        ];
        for (value, kind, expected) in cases {
            assert_eq!(cell_text(Some(&value), kind), expected, "{value} ({kind})");
        }
        assert_eq!(cell_text(None, 1), "");
    }

    #[test]
    fn a_repeated_page_token_ends_the_listing_and_is_counted() {
        let stats = FeishuStats::default();
        let mut pages = Pages::default();
        assert_eq!(
            pages.next(true, Some("a".into()), "t", &stats),
            Some("a".into())
        );
        assert_eq!(
            pages.next(true, Some("b".into()), "t", &stats),
            Some("b".into())
        );
        assert_eq!(pages.next(true, Some("a".into()), "t", &stats), None);
        assert_eq!(stats.repeated_page_tokens(), 1);
        assert_eq!(pages.next(true, Some(String::new()), "t", &stats), None);
        assert_eq!(pages.next(false, Some("c".into()), "t", &stats), None);
        assert_eq!(stats.repeated_page_tokens(), 1);
    }

    #[test]
    fn the_settings_make_the_configuration() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            docs: Settings,
        }
        let parse = |args: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                std::iter::once("trellis").chain(args.iter().copied()),
            )
            .unwrap()
            .docs
        };
        assert!(FeishuConfig::from_settings(&parse(&["--feishu-app-id", "cli_a"])).is_none());
        let config = FeishuConfig::from_settings(&parse(&[
            "--feishu-app-id",
            " cli_a ",
            "--feishu-app-secret",
            "s3cret",
            "--feishu-api-url",
            "http://127.0.0.1:9/",
            "--feishu-wiki-spaces",
            "7001,7002",
            "--feishu-drive-folders",
            "fldA",
            "--feishu-qps",
            "2",
            "--docs-bitable-inline-max-rows",
            "50",
        ]))
        .unwrap();
        assert_eq!(config.app_id, "cli_a");
        assert_eq!(config.app_secret.expose_secret(), "s3cret");
        assert_eq!(config.api_url.as_str(), "http://127.0.0.1:9/");
        assert_eq!(config.wiki_spaces, Some(vec!["7001".into(), "7002".into()]));
        assert_eq!(config.drive_folders, ["fldA"]);
        assert_eq!(config.bitable_inline_max_rows, 50);
        assert_eq!((config.api_qps.get(), config.asset_qps.get()), (2, 2));
        let all = FeishuConfig::from_settings(&parse(&[
            "--feishu-app-id",
            "cli_a",
            "--feishu-app-secret",
            "s",
        ]))
        .unwrap();
        assert_eq!(all.wiki_spaces, None, "every space by default");
        assert!(FeishuAdapter::new(all).is_ok());
    }

    #[test]
    fn placeholders_keep_the_link_and_the_id() {
        let node = RemoteNode {
            id: "shtcnA".into(),
            alt_id: Some("wikcnA".into()),
            kind: NodeKind::Sheet,
            parent_id: None,
            title: "Budget [2026]".into(),
            edited_at: None,
            url: Some("https://acme.feishu.cn/sheets/shtcnA".into()),
        };
        let doc = placeholder(&node, "Feishu spreadsheet", DegradationKind::Sheet);
        assert_eq!(
            doc.markdown,
            "Feishu spreadsheet: [Budget 2026](https://acme.feishu.cn/sheets/shtcnA)\n"
        );
        assert_eq!(
            doc.body.as_deref(),
            Some(
                "Feishu spreadsheet: [Budget 2026](https://acme.feishu.cn/sheets/shtcnA) <!-- opendoc:degraded kind=sheet id=shtcnA -->\n"
            )
        );
        assert_eq!(markers::parse_all(doc.body()), doc.degradations);
    }
}
