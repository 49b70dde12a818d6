//! The Notion adapter, over the public REST API (`Notion-Version:
//! 2025-09-03`), strictly read-only: the only requests it sends are
//! `POST /v1/search`, `GET /v1/pages/{id}/markdown`,
//! `POST /v1/data_sources/{id}/query` (the two POSTs only read) and `GET`
//! of the signed file URLs the bodies show.
//!
//! - [`Adapter::enumerate`]: search paginated to the end (`has_more`,
//!   `next_cursor`), pages and data sources, newest edit first; trashed
//!   objects skipped. A page under a data source is a database row; a data
//!   source is placed where its database sits.
//! - [`IncrementalEnumerator`]: the same search, stopping at the first
//!   object edited before `checkpoint − INCREMENTAL_SAFETY_WINDOW`.
//! - [`Adapter::fetch_markdown`]: the markdown endpoint; when it answers
//!   `truncated` or lists `unknown_block_ids`, each listed block's subtree
//!   is fetched from the same endpoint and spliced in place of its
//!   `<unknown>` tag; what still fails is degraded (`markdown.rs`).
//! - [`DatabaseExpander::query_rows`]: every row of a data source in one
//!   paginated query, properties rendered by `properties.rs`.
//! - [`Adapter::download_asset`]: the signed URL, at once.
//!
//! Each endpoint (API, files) has its own [`Pacer`]: 3 requests per second
//! by default (`TRELLIS_NOTION_QPS`), 429/529/5xx retried 3 times where
//! `Retry-After` wins.

pub mod api;
pub mod markdown;
pub mod properties;

use std::{
    collections::{HashMap, HashSet, VecDeque},
    num::NonZeroU32,
    path::Path,
    sync::Arc,
};

use chrono::{DateTime, Utc};
use reqwest::{
    Method,
    header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue},
};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;
use url::Url;

use self::api::{ListPage, NOTION_VERSION, PageMarkdown};
use super::{
    adapter::{
        Adapter, AdapterError, AssetRef, DatabaseExpander, DownloadedAsset, FetchedDoc,
        INCREMENTAL_SAFETY_WINDOW, IncrementalEnumerator, IncrementalListing, Platform, Probe,
        RemoteNode, RowProperties, Traffic,
    },
    ratelimit::{self, NOTION_QPS, Pacer, Sleeper, TokioSleeper},
};
use crate::httpc::{Destination, HttpClient, HttpSettings, retry::RetryPolicy};

/// The default API origin (`TRELLIS_NOTION_API_URL`).
pub const DEFAULT_API_URL: &str = "https://api.notion.com";
/// Objects per search or query page: Notion's maximum.
const PAGE_SIZE: u32 = 100;
/// Subtree fetches per page beyond the first call: a bound on what one
/// huge page may cost; what is left past it stays degraded.
const MAX_SUBTREE_FETCHES: usize = 100;
/// Asset downloads are read whole into memory: a cap above Notion's own
/// upload limit for free workspaces, below what would hurt.
const MAX_ASSET_BYTES: usize = 64 * 1024 * 1024;

/// How the adapter is built; the settings wiring fills it.
pub struct NotionConfig {
    /// The API's base URL (`TRELLIS_NOTION_API_URL`).
    pub api_url: Url,
    /// The integration token; never logged.
    pub token: SecretString,
    /// Requests per second to the API, and to the file host.
    pub api_qps: NonZeroU32,
    pub asset_qps: NonZeroU32,
    /// Retries of each request.
    pub retry: RetryPolicy,
    /// How retry waits are taken (real time outside tests).
    pub sleeper: Arc<dyn Sleeper>,
}

impl NotionConfig {
    /// The defaults: 3 QPS each, 3 retries, real time.
    pub fn new(api_url: Url, token: SecretString) -> Self {
        NotionConfig {
            api_url,
            token,
            api_qps: NOTION_QPS,
            asset_qps: NOTION_QPS,
            retry: ratelimit::docs_retry_policy(),
            sleeper: Arc::new(TokioSleeper),
        }
    }
}

/// The Notion platform (see the module doc).
pub struct NotionAdapter {
    api_url: Url,
    token: SecretString,
    api: HttpClient,
    files: HttpClient,
    api_pacer: Pacer,
    file_pacer: Pacer,
}

impl std::fmt::Debug for NotionAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotionAdapter")
            .field("api_url", &self.api_url.as_str())
            .finish_non_exhaustive()
    }
}

impl NotionAdapter {
    /// An adapter whose API client reaches the configured origin exactly
    /// (loopback and private networks included, redirects off it refused)
    /// and whose file client keeps the SSRF guard: signed file URLs are on
    /// public storage hosts.
    pub fn new(config: NotionConfig) -> anyhow::Result<Self> {
        let api = HttpClient::new(HttpSettings {
            destination: Destination::configured(&config.api_url)?,
            ..HttpSettings::default()
        })?;
        let files = HttpClient::new(HttpSettings {
            max_body_bytes: MAX_ASSET_BYTES,
            ..HttpSettings::default()
        })?;
        Ok(Self::with_clients(config, api, files))
    }

    /// An adapter over given clients (the file client's destination is the
    /// caller's choice: tests serve files on loopback).
    pub fn with_clients(config: NotionConfig, api: HttpClient, files: HttpClient) -> Self {
        NotionAdapter {
            api_pacer: Pacer::new(config.api_qps, config.retry, config.sleeper.clone()),
            file_pacer: Pacer::new(config.asset_qps, config.retry, config.sleeper),
            api_url: config.api_url,
            token: config.token,
            api,
            files,
        }
    }

    /// The API pacer's counters (requests, retries) for a run's progress.
    pub fn api_stats(&self) -> &ratelimit::PacerStats {
        self.api_pacer.stats()
    }

    fn headers(&self) -> Result<HeaderMap, AdapterError> {
        let mut headers = HeaderMap::new();
        let mut bearer = HeaderValue::from_str(&format!("Bearer {}", self.token.expose_secret()))
            .map_err(|_| AdapterError::Unauthorized)?;
        bearer.set_sensitive(true);
        headers.insert(AUTHORIZATION, bearer);
        headers.insert("notion-version", HeaderValue::from_static(NOTION_VERSION));
        Ok(headers)
    }

    fn endpoint(&self, path: &str) -> Result<String, AdapterError> {
        self.api_url
            .join(path)
            .map(String::from)
            .map_err(|error| AdapterError::Protocol(format!("{path}: {error}")))
    }

    /// One API call, paced and retried; the body when it succeeded.
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<serde_json::Value>,
        id: &str,
    ) -> Result<Vec<u8>, AdapterError> {
        let mut headers = self.headers()?;
        let body = body.map(|body| body.to_string().into_bytes());
        if body.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let url = self.endpoint(path)?;
        let answer = self
            .api_pacer
            .send(
                &self.api,
                method,
                &url,
                headers,
                body,
                ratelimit::notion_verdict,
            )
            .await;
        api::classify(answer, id)
    }

    /// Search, newest edit first, page after page while `keep` accepts
    /// every object of the page (an object it refuses stops the listing).
    async fn search(
        &self,
        mut keep: impl FnMut(&api::Object) -> bool,
    ) -> Result<Vec<RemoteNode>, AdapterError> {
        let mut nodes = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut request = json!({
                "page_size": PAGE_SIZE,
                "sort": {"direction": "descending", "timestamp": "last_edited_time"},
            });
            if let Some(cursor) = &cursor {
                request["start_cursor"] = json!(cursor);
            }
            let body = self
                .call(Method::POST, "v1/search", Some(request), "search")
                .await?;
            let page: ListPage = api::parse(&body, "search")?;
            for object in &page.results {
                if !keep(object) {
                    return Ok(nodes);
                }
                nodes.extend(object.to_node());
            }
            match (page.has_more, page.next_cursor) {
                (true, Some(next)) if cursor.as_deref() != Some(next.as_str()) => {
                    cursor = Some(next);
                }
                (true, _) => {
                    return Err(AdapterError::Protocol(
                        "search has more results but gave no new cursor".into(),
                    ));
                }
                (false, _) => return Ok(nodes),
            }
        }
    }

    async fn page_markdown(&self, id: &str) -> Result<PageMarkdown, AdapterError> {
        let body = self
            .call(Method::GET, &format!("v1/pages/{id}/markdown"), None, id)
            .await?;
        api::parse(&body, "page markdown")
    }
}

/// Whether a subtree's failure is the block's own (degrade it) rather than
/// the run's (stop: bad token, or retries spent on a busy platform).
fn is_block_failure(error: &AdapterError) -> bool {
    matches!(
        error,
        AdapterError::Forbidden { .. } | AdapterError::NotFound { .. } | AdapterError::Protocol(_)
    )
}

#[async_trait::async_trait]
impl Adapter for NotionAdapter {
    fn traffic(&self) -> Traffic {
        let (api, files) = (self.api_pacer.stats(), self.file_pacer.stats());
        Traffic {
            requests: api.requests() + files.requests(),
            waits: api.retries() + files.retries(),
        }
    }

    /// `N2` the token is accepted (`GET /v1/users/me`); `N3` the
    /// integration may read content (a one-result search).
    async fn probes(&self) -> Vec<Probe> {
        let mut probes = Vec::new();
        match self
            .call(Method::GET, "v1/users/me", None, "users/me")
            .await
        {
            Ok(_) => probes.push(Probe::pass("N2", "Notion accepted the token")),
            Err(AdapterError::Unauthorized) => {
                probes.push(Probe::fail(
                    "N2",
                    "Notion refused the token (TRELLIS_NOTION_TOKEN): create a new integration secret",
                ));
                return probes;
            }
            Err(error) => {
                probes.push(Probe::fail("N2", format!("Notion did not answer: {error}")));
                return probes;
            }
        }
        let search = json!({
            "page_size": 1,
            "sort": {"direction": "descending", "timestamp": "last_edited_time"},
        });
        probes.push(
            match self
                .call(Method::POST, "v1/search", Some(search), "search")
                .await
            {
                Ok(body) => match api::parse::<ListPage>(&body, "search") {
                    Ok(page) if page.results.is_empty() => Probe::pass(
                        "N3",
                        "the integration can read content, but no page is shared with it yet",
                    ),
                    Ok(_) => Probe::pass("N3", "the integration can read content"),
                    Err(error) => Probe::fail("N3", error.to_string()),
                },
                Err(AdapterError::Forbidden { .. }) => Probe::fail(
                    "N3",
                    "the integration lacks the \"Read content\" capability",
                ),
                Err(error) => Probe::fail("N3", error.to_string()),
            },
        );
        probes
    }

    fn platform(&self) -> Platform {
        Platform::Notion
    }

    async fn enumerate(&self) -> Result<Vec<RemoteNode>, AdapterError> {
        self.search(|_| true).await
    }

    async fn fetch_markdown(&self, node: &RemoteNode) -> Result<FetchedDoc, AdapterError> {
        let first = self.page_markdown(&node.id).await?;
        let mut markdown = first.markdown;
        let mut truncated = first.truncated;
        let mut pending: VecDeque<String> = first.unknown_block_ids.into();
        let mut tried = HashSet::new();
        let mut failed = HashSet::new();
        while let Some(block) = pending.pop_front() {
            let key = api::undashed(&block);
            if !tried.insert(key.clone()) {
                continue;
            }
            if tried.len() > MAX_SUBTREE_FETCHES {
                failed.insert(key);
                continue;
            }
            match self.page_markdown(&block).await {
                Ok(subtree) => {
                    let spliced = markdown::splice(&markdown, &key, &subtree.markdown);
                    markdown = spliced.unwrap_or_else(|| {
                        // No tag names it: the subtree still belongs to the page.
                        format!("{}\n{}", markdown.trim_end_matches('\n'), subtree.markdown)
                    });
                    pending.extend(subtree.unknown_block_ids);
                    truncated |= subtree.truncated;
                }
                Err(error) if is_block_failure(&error) => {
                    failed.insert(key);
                }
                Err(error) => return Err(error),
            }
        }
        // Truncation is healed when every listed subtree came back.
        let truncated = truncated && (!failed.is_empty() || tried.is_empty());
        let unrendered = markdown::Unrendered {
            failed,
            truncated,
            page_id: &node.id,
            page_url: node.url.as_deref(),
        };
        let (body, degradations) = match markdown::degrade(&markdown, &unrendered) {
            Some((body, degradations)) => (Some(body), degradations),
            None => (None, Vec::new()),
        };
        Ok(FetchedDoc {
            assets: markdown::assets(&markdown),
            links: markdown::links(&markdown),
            markdown,
            body,
            degradations,
        })
    }

    async fn download_asset(
        &self,
        asset: &AssetRef,
        dest: &Path,
    ) -> Result<DownloadedAsset, AdapterError> {
        // A signed URL carries its own authorization: no token goes there.
        let answer = self
            .file_pacer
            .send(
                &self.files,
                Method::GET,
                &asset.download_url,
                HeaderMap::new(),
                None,
                ratelimit::notion_verdict,
            )
            .await;
        let answer = answer.map_err(|error| AdapterError::Transport(error.to_string()))?;
        let status = answer.status.as_u16();
        if !answer.status.is_success() {
            // An expired signature is S3's 403: the engine keeps the asset
            // pending and the next run's fetch signs it again.
            return Err(match status {
                401 | 403 => AdapterError::Forbidden {
                    id: asset.remote_key.clone(),
                },
                404 | 410 => AdapterError::NotFound {
                    id: asset.remote_key.clone(),
                },
                429 => AdapterError::RateLimited { retry_after: None },
                500..=599 => AdapterError::Server { status },
                _ => AdapterError::Protocol(format!("file download answered HTTP {status}")),
            });
        }
        tokio::fs::write(dest, &answer.body)
            .await
            .map_err(|error| AdapterError::Io(error.to_string()))?;
        Ok(DownloadedAsset {
            content_type: answer
                .headers
                .get(CONTENT_TYPE)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned),
            bytes: answer.body.len() as u64,
        })
    }

    fn database_expander(&self) -> Option<&dyn DatabaseExpander> {
        Some(self)
    }

    fn incremental_enumerator(&self) -> Option<&dyn IncrementalEnumerator> {
        Some(self)
    }
}

#[async_trait::async_trait]
impl IncrementalEnumerator for NotionAdapter {
    async fn enumerate_since(
        &self,
        checkpoint: DateTime<Utc>,
    ) -> Result<IncrementalListing, AdapterError> {
        let window = chrono::Duration::from_std(INCREMENTAL_SAFETY_WINDOW)
            .map_err(|error| AdapterError::Protocol(error.to_string()))?;
        let cutoff = checkpoint - window;
        let mut latest = checkpoint;
        let nodes = self
            .search(|object| match object.last_edited_time {
                Some(edited) if edited < cutoff => false,
                Some(edited) => {
                    latest = latest.max(edited);
                    true
                }
                None => true,
            })
            .await?;
        Ok(IncrementalListing {
            nodes,
            checkpoint: latest,
        })
    }
}

#[async_trait::async_trait]
impl DatabaseExpander for NotionAdapter {
    async fn query_rows(
        &self,
        database: &RemoteNode,
        titles: &HashMap<String, String>,
    ) -> Result<HashMap<String, RowProperties>, AdapterError> {
        let mut rows = HashMap::new();
        let mut cursor: Option<String> = None;
        let path = format!("v1/data_sources/{}/query", database.id);
        loop {
            let mut request = json!({ "page_size": PAGE_SIZE });
            if let Some(cursor) = &cursor {
                request["start_cursor"] = json!(cursor);
            }
            let body = self
                .call(Method::POST, &path, Some(request), &database.id)
                .await?;
            let page: ListPage = api::parse(&body, "data source query")?;
            for row in page.results.iter().filter(|row| !row.is_trashed()) {
                let id = api::dashed(&row.id).unwrap_or_else(|| row.id.clone());
                let rendered = properties::render_row(&id, &row.properties, titles);
                rows.insert(id, rendered);
            }
            match (page.has_more, page.next_cursor) {
                (true, Some(next)) if cursor.as_deref() != Some(next.as_str()) => {
                    cursor = Some(next);
                }
                (true, _) => {
                    return Err(AdapterError::Protocol(
                        "query has more rows but gave no new cursor".into(),
                    ));
                }
                (false, _) => return Ok(rows),
            }
        }
    }
}
