//! The docs mirror's GraphQL: thin resolvers over [`DocsService`]. Members
//! read the mirror; admins also configure and sync it.

use async_graphql::{
    Context, InputObject, MaybeUndefined, Object, SimpleObject, Subscription,
    connection::{Connection, CursorType, Edge, OpaqueCursor},
};
use chrono::{DateTime, Utc};
use entity::{docs_document, docs_sync_run};
use futures_util::Stream;

use super::adapter::Platform;
use super::doctor::{self, CheckStatus};
use super::engine::RunChanges;
use super::markers;
use super::service::{DocFile, DocsService, DocsSettings, Hit, TreeEntry};
use super::sync::{SyncProgress, SyncRequest};
use super::task::PROGRESS_TOPIC;
use crate::{
    error::AppError,
    graphql::{
        context::ContextExt,
        json::Json,
        pagination::{KeysetConnection, PageRequest},
        subscription::follow,
    },
    jobs::{Jobs, graphql::Task},
};

#[derive(Default)]
pub struct DocsQuery;

#[Object]
impl DocsQuery {
    /// The docs mirror's configuration (admins only).
    async fn docs_settings(&self, ctx: &Context<'_>) -> async_graphql::Result<DocsSettings> {
        ctx.admin()?;
        Ok(ctx.service::<DocsService>()?.settings_view().await?)
    }

    /// The entries of one folder of a platform's mirror: `path` as an
    /// entry's `path` gives it (relative to the mirror's root, e.g.
    /// `notion/Team`); empty or omitted for the platform's root. Folders
    /// first, then by name.
    async fn doc_tree(
        &self,
        ctx: &Context<'_>,
        platform: Platform,
        path: Option<String>,
    ) -> async_graphql::Result<Vec<DocEntry>> {
        ctx.viewer()?;
        let entries = ctx
            .service::<DocsService>()?
            .tree(platform, path.as_deref().unwrap_or(""))
            .await?;
        Ok(entries.into_iter().map(DocEntry::from).collect())
    }

    /// One mirrored document, by `id` (primary id, alias, or its online
    /// URL) or by `path` (its file or folder relative to the mirror's root,
    /// as entries give it). Null when nothing matches.
    async fn doc(
        &self,
        ctx: &Context<'_>,
        id: Option<String>,
        path: Option<String>,
    ) -> async_graphql::Result<Option<Doc>> {
        ctx.viewer()?;
        let service = ctx.service::<DocsService>()?;
        let row = match (id, path) {
            (Some(id), None) => service.find(&id).await?,
            (None, Some(path)) => service.find_by_path(&path).await?,
            _ => {
                return Err(AppError::bad_input("id", "give exactly one of id and path").into());
            }
        };
        let Some(row) = row else { return Ok(None) };
        Ok(Some(Doc(service.read(row).await?)))
    }

    /// Full-text search over the mirrored documents (titles weigh more),
    /// best first, with a highlighted snippet each. Every word of `query`
    /// must match (as a prefix); CJK text is matched character by
    /// character. Pages up to 1,000 hits deep.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn search_docs(
        &self,
        ctx: &Context<'_>,
        query: String,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<Connection<OpaqueCursor<u64>, DocHit>> {
        ctx.viewer()?;
        let limit = match first {
            None => 20,
            Some(n) if n < 0 => {
                return Err(AppError::bad_input("first", "first must not be negative").into());
            }
            Some(n) => (n as u64).min(100),
        };
        let offset = match after {
            None => 0,
            Some(cursor) => {
                OpaqueCursor::<u64>::decode_cursor(&cursor)
                    .map_err(|_| AppError::bad_input("after", "invalid cursor"))?
                    .0
                    + 1
            }
        };
        // One more than asked: whether a next page exists.
        let mut hits = ctx
            .service::<DocsService>()?
            .search(&query, limit + 1, offset)
            .await?;
        let has_next = hits.len() as u64 > limit && offset + limit < super::search::MAX_OFFSET;
        hits.truncate(limit as usize);
        let mut connection = Connection::new(offset > 0, has_next);
        connection.edges = hits
            .into_iter()
            .enumerate()
            .map(|(index, hit)| Edge::new(OpaqueCursor(offset + index as u64), DocHit::from(hit)))
            .collect();
        Ok(connection)
    }

    /// The sync runs, newest first.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn doc_sync_runs(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<DocSyncRun>> {
        ctx.viewer()?;
        let page = PageRequest::new(first, after)?;
        Ok(ctx
            .service::<DocsService>()?
            .runs(page, DocSyncRun::from)
            .await?)
    }

    /// Checks of the mirror and each platform, with stable codes (admins
    /// only: it calls the platforms).
    async fn docs_doctor(&self, ctx: &Context<'_>) -> async_graphql::Result<DocsDoctorReport> {
        ctx.admin()?;
        let report = ctx.service::<DocsService>()?.doctor().await?;
        Ok(DocsDoctorReport::from(report))
    }
}

#[derive(Default)]
pub struct DocsMutation;

#[Object]
impl DocsMutation {
    /// Syncs one platform, or every configured one (admins only), on
    /// `q:long`; `full` forces delete and move detection. One sync per
    /// platform at a time: while one is queued or running for the same
    /// platform, that task is returned.
    async fn sync_docs(
        &self,
        ctx: &Context<'_>,
        platform: Option<Platform>,
        full: Option<bool>,
    ) -> async_graphql::Result<Task> {
        let viewer = ctx.admin()?;
        let request = SyncRequest {
            platform,
            full: full.unwrap_or(false),
        };
        let task = ctx
            .service::<DocsService>()?
            .request_sync(viewer.user_id, request)
            .await?;
        Ok(Task::from(&task))
    }

    /// Changes the docs mirror's settings (admins only); the settings now
    /// in force, secrets only as "set". An invalid value is
    /// `BAD_USER_INPUT` naming it, and nothing is stored.
    async fn update_docs_settings(
        &self,
        ctx: &Context<'_>,
        input: DocsSettingsInput,
    ) -> async_graphql::Result<DocsSettings> {
        ctx.admin()?;
        Ok(ctx
            .service::<DocsService>()?
            .update_settings(&input.changes())
            .await?)
    }
}

/// Changes to the docs mirror's settings. A field left out is unchanged;
/// `null` clears the stored value, so its `TRELLIS_*` variable applies
/// again; a value is stored (secrets sealed with the server key, never
/// returned) and applies from the next sync. The schedule
/// (`syncIntervalSeconds`) is read when the server starts.
#[derive(InputObject, Default)]
pub struct DocsSettingsInput {
    #[graphql(secret)]
    pub notion_token: MaybeUndefined<String>,
    pub notion_api_url: MaybeUndefined<String>,
    pub notion_qps: MaybeUndefined<i32>,
    pub feishu_app_id: MaybeUndefined<String>,
    #[graphql(secret)]
    pub feishu_app_secret: MaybeUndefined<String>,
    pub feishu_api_url: MaybeUndefined<String>,
    pub feishu_qps: MaybeUndefined<i32>,
    /// Comma-separated space ids, or `all`.
    pub feishu_wiki_spaces: MaybeUndefined<String>,
    /// Comma-separated folder tokens.
    pub feishu_drive_folders: MaybeUndefined<String>,
    pub sync_interval_seconds: MaybeUndefined<i64>,
    pub reconcile_every_runs: MaybeUndefined<i32>,
    pub trash_keep_days: MaybeUndefined<i32>,
    pub bitable_inline_max_rows: MaybeUndefined<i32>,
}

impl DocsSettingsInput {
    /// The changes, by stored key.
    fn changes(self) -> Vec<(&'static str, Option<String>)> {
        fn text(value: MaybeUndefined<String>) -> Option<Option<String>> {
            match value {
                MaybeUndefined::Undefined => None,
                MaybeUndefined::Null => Some(None),
                MaybeUndefined::Value(value) => Some(Some(value)),
            }
        }
        fn number<T: ToString>(value: MaybeUndefined<T>) -> Option<Option<String>> {
            text(value.map_value(|n| n.to_string()))
        }
        [
            ("notion_token", text(self.notion_token)),
            ("notion_api_url", text(self.notion_api_url)),
            ("notion_qps", number(self.notion_qps)),
            ("feishu_app_id", text(self.feishu_app_id)),
            ("feishu_app_secret", text(self.feishu_app_secret)),
            ("feishu_api_url", text(self.feishu_api_url)),
            ("feishu_qps", number(self.feishu_qps)),
            ("feishu_wiki_spaces", text(self.feishu_wiki_spaces)),
            ("feishu_drive_folders", text(self.feishu_drive_folders)),
            ("docs_sync_interval", number(self.sync_interval_seconds)),
            (
                "docs_reconcile_every_runs",
                number(self.reconcile_every_runs),
            ),
            ("docs_trash_keep_days", number(self.trash_keep_days)),
            (
                "docs_bitable_inline_max_rows",
                number(self.bitable_inline_max_rows),
            ),
        ]
        .into_iter()
        .filter_map(|(key, change)| change.map(|change| (key, change)))
        .collect()
    }
}

#[derive(Default)]
pub struct DocsSubscription;

#[Subscription]
impl DocsSubscription {
    /// Each platform's progress while a sync runs (about four a second at
    /// most, and always the last step): phase, documents done of total,
    /// requests, waits, errors.
    async fn docs_sync_progress(
        &self,
        ctx: &Context<'_>,
        platform: Option<Platform>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<SyncProgress>> + use<>>
    {
        ctx.viewer()?;
        let bus = ctx.service::<Jobs>()?.bus();
        Ok(follow(bus, move |event| {
            let progress = (event.topic == PROGRESS_TOPIC)
                .then(|| event.payload::<SyncProgress>())
                .flatten()
                .filter(|progress| platform.is_none_or(|only| only == progress.platform));
            async move { progress }
        }))
    }
}

/// One entry of a folder of the mirror.
#[derive(SimpleObject)]
pub struct DocEntry {
    /// The folder or file, relative to the mirror's root
    /// (`notion/Team`, `notion/Team/Notes.md`).
    pub path: String,
    /// Whether it has entries (pass its `path` to `docTree` for them).
    pub folder: bool,
    /// Its document's primary id; null for `_orphans`.
    pub id: Option<String>,
    pub title: String,
    /// `page`, `docx`, `database`, `row`, `folder`…; null for `_orphans`.
    pub kind: Option<String>,
    pub url: Option<String>,
    pub edited_at: Option<DateTime<Utc>>,
    /// `active` or `pending_assets`.
    pub status: Option<String>,
}

impl From<TreeEntry> for DocEntry {
    fn from(entry: TreeEntry) -> Self {
        let name = entry.path.rsplit('/').next().unwrap_or_default().to_owned();
        match entry.row {
            Some(row) => DocEntry {
                path: entry.path,
                folder: entry.folder,
                ..DocEntry::from(row)
            },
            None => DocEntry {
                path: entry.path,
                folder: entry.folder,
                id: None,
                title: name,
                kind: None,
                url: None,
                edited_at: None,
                status: None,
            },
        }
    }
}

impl From<docs_document::Model> for DocEntry {
    fn from(row: docs_document::Model) -> Self {
        DocEntry {
            path: row.local_path,
            folder: false,
            id: Some(row.remote_id),
            title: row.title,
            kind: Some(row.kind),
            url: row.url,
            edited_at: row.edited_at,
            status: Some(row.status),
        }
    }
}

/// A mirrored document: its frontmatter's fields, its Markdown body, and
/// what links to it.
pub struct Doc(DocFile);

#[Object]
impl Doc {
    /// The platform's primary id.
    async fn id(&self) -> &str {
        &self.0.row.remote_id
    }
    async fn platform(&self) -> Option<Platform> {
        Platform::parse(&self.0.row.platform)
    }
    /// `page`, `docx`, `database`, `row`, `folder`…
    async fn kind(&self) -> &str {
        &self.0.row.kind
    }
    async fn title(&self) -> &str {
        &self.0.row.title
    }
    /// The online URL.
    async fn url(&self) -> Option<&str> {
        self.0.row.url.as_deref()
    }
    async fn edited_at(&self) -> Option<DateTime<Utc>> {
        self.0.row.edited_at
    }
    /// The parent's primary id; null at the platform's root.
    async fn parent(&self) -> Option<&str> {
        self.0.row.parent_remote_id.as_deref()
    }
    /// Its file (or folder) relative to the mirror's root.
    async fn path(&self) -> &str {
        &self.0.row.local_path
    }
    /// `active`, `pending_assets` (a download is retried next run) or
    /// `trashed`.
    async fn status(&self) -> &str {
        &self.0.row.status
    }
    /// A database row's properties, by name.
    async fn properties(&self) -> Vec<DocProperty> {
        self.0
            .properties
            .iter()
            .map(|(name, value)| DocProperty {
                name: name.clone(),
                value: value.clone(),
            })
            .collect()
    }
    /// The Markdown after the frontmatter; null for a bare folder or a
    /// file missing on disk.
    async fn markdown(&self) -> Option<&str> {
        self.0.body.as_deref()
    }
    /// The blocks that could not be mirrored faithfully (their markers in
    /// the body).
    async fn degradations(&self) -> Vec<DocDegradation> {
        self.0
            .body
            .as_deref()
            .map(markers::parse_all)
            .unwrap_or_default()
            .into_iter()
            .map(|degradation| DocDegradation {
                kind: degradation.kind.as_str().to_owned(),
                id: degradation.id,
            })
            .collect()
    }
    /// The assets the body uses, relative to the mirror's root
    /// (`assets/ab/ab12….png`).
    async fn assets(&self) -> Vec<String> {
        self.0.body.as_deref().map(asset_paths).unwrap_or_default()
    }
    /// The documents linking here.
    async fn backlinks(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<DocEntry>> {
        let rows = ctx.service::<DocsService>()?.backlinks(&self.0.row).await?;
        Ok(rows.into_iter().map(DocEntry::from).collect())
    }
}

/// The asset pool's paths a body links to, in order, once each.
fn asset_paths(body: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for (start, _) in body.match_indices("assets/") {
        let rest = &body[start..];
        let end = rest
            .find(|c: char| c == ')' || c == '"' || c == '\'' || c.is_whitespace())
            .unwrap_or(rest.len());
        let path = &rest[..end];
        // `assets/<2 hex>/<sha256><ext>`.
        let mut parts = path.splitn(3, '/');
        let (_, shard, file) = (parts.next(), parts.next(), parts.next());
        let shaped = matches!((shard, file), (Some(shard), Some(file))
            if shard.len() == 2 && file.len() >= 64 && file.starts_with(shard));
        if shaped && !found.iter().any(|seen| seen == path) {
            found.push(path.to_owned());
        }
    }
    found
}

/// One document found by `searchDocs`.
#[derive(SimpleObject)]
pub struct DocHit {
    /// Its primary id.
    pub id: String,
    pub platform: Option<Platform>,
    pub title: String,
    /// Its file (or folder) relative to the mirror's root.
    pub path: String,
    pub kind: String,
    pub url: Option<String>,
    /// How well it matches; higher is better.
    pub rank: f64,
    /// The text around the match, HTML-escaped, each match in `<mark>`.
    pub snippet: String,
}

impl From<Hit> for DocHit {
    fn from(hit: Hit) -> Self {
        DocHit {
            id: hit.remote_id,
            platform: Platform::parse(&hit.platform),
            title: hit.title,
            path: hit.local_path,
            kind: hit.kind,
            url: hit.url,
            rank: hit.rank,
            snippet: hit.snippet,
        }
    }
}

#[derive(SimpleObject)]
pub struct DocProperty {
    pub name: String,
    pub value: String,
}

/// One degraded block: its kind and the id to drill into.
#[derive(SimpleObject)]
pub struct DocDegradation {
    pub kind: String,
    pub id: String,
}

/// One platform's sync run.
#[derive(SimpleObject)]
pub struct DocSyncRun {
    pub id: i64,
    pub platform: Option<Platform>,
    /// `full` or `incremental`.
    pub mode: String,
    /// Why that mode.
    pub reason: String,
    /// `running`, `succeeded`, `failed` or `interrupted`.
    pub status: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The run's counters (documents fetched, skipped, written; assets;
    /// degradations by kind; errors…).
    pub stats: Json,
    /// What it changed, by primary id.
    pub changes: DocRunChanges,
    pub error: Option<String>,
}

#[derive(SimpleObject, Default)]
pub struct DocRunChanges {
    pub added: Vec<String>,
    pub updated: Vec<String>,
    pub moved: Vec<String>,
    pub trashed: Vec<String>,
}

impl From<docs_sync_run::Model> for DocSyncRun {
    fn from(run: docs_sync_run::Model) -> Self {
        let changes: RunChanges = serde_json::from_value(run.changes).unwrap_or_default();
        DocSyncRun {
            id: run.id,
            platform: Platform::parse(&run.platform),
            mode: run.mode,
            reason: run.reason,
            status: run.status,
            started_at: run.started_at,
            finished_at: run.finished_at,
            stats: Json(run.stats),
            changes: DocRunChanges {
                added: changes.added,
                updated: changes.updated,
                moved: changes.moved,
                trashed: changes.trashed,
            },
            error: run.error,
        }
    }
}

/// The doctor's report.
#[derive(SimpleObject)]
pub struct DocsDoctorReport {
    /// No check failed.
    pub ok: bool,
    /// Some platform has credentials.
    pub configured: bool,
    pub checks: Vec<DocsCheck>,
}

#[derive(SimpleObject)]
pub struct DocsCheck {
    /// Stable: `G0`–`G2`, `N1`–`N3`, `F1`–`F5`.
    pub code: String,
    pub status: CheckStatus,
    pub message: String,
}

impl From<doctor::Report> for DocsDoctorReport {
    fn from(report: doctor::Report) -> Self {
        DocsDoctorReport {
            ok: report.ok(),
            configured: report.configured,
            checks: report
                .checks
                .into_iter()
                .map(|check| DocsCheck {
                    code: check.code,
                    status: check.status,
                    message: check.message,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asset_paths_are_the_pools_once_each() {
        let sha = "ab".to_owned() + &"0".repeat(62);
        let body = format!(
            "![x](../assets/ab/{sha}.png) and ![y](../../assets/ab/{sha}.png)\n[not](assets/readme.md)"
        );
        assert_eq!(asset_paths(&body), vec![format!("assets/ab/{sha}.png")]);
    }
}
