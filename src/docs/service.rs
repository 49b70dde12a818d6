//! The docs mirror's service: what resolvers, the CLI and the sync task
//! call. Instance-wide: admins configure and sync, members read.

use std::sync::Arc;

use async_graphql::SimpleObject;
use entity::{docs_alias, docs_document, docs_link, docs_sync_run, task};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder};

use super::adapter::Platform;
use super::browse;
use super::doctor;
use super::search;
use super::settings::Settings;
use super::stored;
use super::sync::{SyncRequest, Syncer};
use super::task as sync_task;
use crate::{
    auth::keys::ServerSecret,
    error::{AppError, AppResult},
    fulltext::{SearchLimits, Searcher},
    graphql::pagination::{KeyValue, Keyset, KeysetConnection, PageRequest, paginate},
    jobs::Jobs,
};

#[derive(Clone)]
pub struct DocsService {
    settings: Arc<Settings>,
    syncer: Syncer,
    jobs: Option<Jobs>,
    searcher: Searcher,
    secret: Arc<ServerSecret>,
}

/// One document found by [`DocsService::search`].
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub platform: String,
    pub remote_id: String,
    pub title: String,
    pub local_path: String,
    pub kind: String,
    pub url: Option<String>,
    /// Higher is better.
    pub rank: f64,
    /// The text around the match, HTML-escaped, matches in `<mark>`.
    pub snippet: String,
}

/// One entry of a folder of the mirror ([`browse::entries`]).
#[derive(Debug, Clone)]
pub struct TreeEntry {
    /// The folder (a document with children, a database) or the file.
    pub path: String,
    pub folder: bool,
    /// Its document; `None` for `_orphans/`.
    pub row: Option<docs_document::Model>,
}

/// A mirrored document as the manifest has it, with its body read from
/// disk.
#[derive(Debug, Clone)]
pub struct DocFile {
    pub row: docs_document::Model,
    /// The file's text after the frontmatter; `None` for folders and
    /// databases' bare folders, or when the file is missing.
    pub body: Option<String>,
    /// The frontmatter's properties (database rows).
    pub properties: Vec<(String, String)>,
}

/// The docs mirror's configuration, as admins see it: credentials only as
/// "set" or not, never their values.
#[derive(SimpleObject, Debug, Clone, PartialEq, Eq)]
pub struct DocsSettings {
    /// `TRELLIS_NOTION_TOKEN` is set.
    pub notion_configured: bool,
    pub notion_api_url: String,
    /// Requests per second to Notion's API (and, apart, to its assets).
    pub notion_qps: i32,
    /// `TRELLIS_FEISHU_APP_ID` and `TRELLIS_FEISHU_APP_SECRET` are set.
    pub feishu_configured: bool,
    /// The app id (not a secret; the app secret is never shown).
    pub feishu_app_id: Option<String>,
    pub feishu_api_url: String,
    pub feishu_qps: i32,
    /// The wiki spaces mirrored; null for every space the app can see.
    pub feishu_wiki_spaces: Option<Vec<String>>,
    pub feishu_drive_folders: Vec<String>,
    /// Seconds between scheduled syncs; 0 when they are off.
    pub sync_interval_seconds: i64,
    /// Every how many Notion runs one is full.
    pub reconcile_every_runs: i32,
    pub trash_keep_days: i32,
    pub bitable_inline_max_rows: i32,
}

impl DocsService {
    /// The service; `jobs` is `None` in the CLI (no runner: syncs run in
    /// the foreground there).
    pub fn new(
        settings: Arc<Settings>,
        syncer: Syncer,
        jobs: Option<Jobs>,
        secret: Arc<ServerSecret>,
    ) -> Self {
        let searcher = Searcher::new(syncer.db().clone(), SearchLimits::default());
        DocsService {
            settings,
            syncer,
            jobs,
            searcher,
            secret,
        }
    }

    /// The live documents best matching `query`, `limit` of them after the
    /// first `offset`, best first.
    pub async fn search(&self, query: &str, limit: u64, offset: u64) -> AppResult<Vec<Hit>> {
        if query.trim().is_empty() || query.len() > 500 {
            return Err(AppError::bad_input(
                "query",
                "query must be 1–500 characters",
            ));
        }
        let Some(statement) = search::statement(self.searcher.backend(), query, limit, offset)
        else {
            return Ok(Vec::new());
        };
        self.searcher
            .run(statement)
            .await?
            .iter()
            .map(|row| {
                let text = |column: &str| row.try_get::<String>("", column);
                Ok(Hit {
                    platform: text("platform")?,
                    remote_id: text("remote_id")?,
                    title: text("title")?,
                    local_path: text("local_path")?,
                    kind: text("kind")?,
                    url: row.try_get::<Option<String>>("", "url")?,
                    rank: row.try_get::<f64>("", "rank")?,
                    snippet: search::highlight(&text("snippet")?),
                })
            })
            .collect::<Result<_, sea_orm::DbErr>>()
            .map_err(AppError::from)
    }

    /// The settings in force: the environment's with what admins stored
    /// over it ([`stored`]).
    pub async fn effective(&self) -> AppResult<Settings> {
        stored::effective(self.db(), &self.secret, &self.settings)
            .await
            .map_err(AppError::internal)
    }

    /// Stores admins' changes (key → value, or `None` to fall back to the
    /// environment); the settings now in force.
    pub async fn update_settings(
        &self,
        changes: &[(&'static str, Option<String>)],
    ) -> AppResult<DocsSettings> {
        match stored::update(self.db(), &self.secret, &self.settings, changes).await {
            Ok(settings) => Ok(view(&settings)),
            Err(stored::UpdateError::Invalid(error)) => {
                Err(AppError::bad_input(error.key, error.message))
            }
            Err(stored::UpdateError::Other(error)) => Err(AppError::internal(error)),
        }
    }

    pub fn syncer(&self) -> &Syncer {
        &self.syncer
    }

    fn db(&self) -> &DatabaseConnection {
        self.syncer.db()
    }

    /// Queues a sync (callers check the admin), or returns the sync already
    /// queued or running for an overlapping set of platforms: one sync per
    /// platform at a time.
    pub async fn request_sync(
        &self,
        owner: uuid::Uuid,
        request: SyncRequest,
    ) -> AppResult<task::Model> {
        let jobs = self
            .jobs
            .as_ref()
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("no job runner here")))?;
        let active = task::Entity::find()
            .filter(task::Column::Kind.eq(sync_task::KIND))
            .filter(task::Column::Status.is_in([task::Status::Queued, task::Status::Running]))
            .order_by_asc(task::Column::CreatedAt)
            .all(self.db())
            .await?;
        let overlapping = active.into_iter().find(|queued| {
            let theirs: SyncRequest =
                serde_json::from_value(queued.payload.clone()).unwrap_or_default();
            match (theirs.platform, request.platform) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
        });
        if let Some(running) = overlapping {
            return Ok(running);
        }
        let mut new = sync_task::new_task(request);
        new.owner_id = Some(owner);
        Ok(jobs.enqueue(new).await?.task)
    }

    /// The sync runs, newest first.
    pub async fn runs<N: async_graphql::OutputType>(
        &self,
        page: PageRequest,
        node: impl Fn(docs_sync_run::Model) -> N,
    ) -> AppResult<KeysetConnection<N>> {
        paginate(
            self.db(),
            docs_sync_run::Entity::find(),
            Keyset::descending(vec![docs_sync_run::Column::Id]),
            page,
            |run| vec![KeyValue::Int(run.id)],
            node,
        )
        .await
    }

    /// Each platform's latest run (for `trellis docs status`).
    pub async fn latest_runs(&self) -> AppResult<Vec<docs_sync_run::Model>> {
        let mut latest = Vec::new();
        for platform in Platform::ALL {
            if let Some(run) = docs_sync_run::Entity::find()
                .filter(docs_sync_run::Column::Platform.eq(platform.as_str()))
                .order_by_desc(docs_sync_run::Column::Id)
                .one(self.db())
                .await?
            {
                latest.push(run);
            }
        }
        Ok(latest)
    }

    /// How many live documents each platform has.
    pub async fn document_counts(&self) -> AppResult<Vec<(Platform, usize)>> {
        let rows = super::engine::manifest::live_documents(self.db()).await?;
        Ok(Platform::ALL
            .into_iter()
            .map(|platform| {
                let count = rows
                    .iter()
                    .filter(|row| row.platform == platform.as_str())
                    .count();
                (platform, count)
            })
            .collect())
    }

    /// The entries of one folder of a platform's tree (`path` relative to
    /// the mirror's root, as entries give it; empty for the platform's
    /// root).
    pub async fn tree(&self, platform: Platform, path: &str) -> AppResult<Vec<TreeEntry>> {
        let path = browse::normalize(path)
            .ok_or_else(|| AppError::bad_input("path", "not a path inside the mirror"))?;
        let root = platform.as_str();
        let folder = if path.is_empty() {
            root.to_owned()
        } else if path == root || path.starts_with(&format!("{root}/")) {
            path
        } else {
            return Err(AppError::bad_input(
                "path",
                format!("a folder of the {root} mirror starts with `{root}/`"),
            ));
        };
        let rows = docs_document::Entity::find()
            .filter(docs_document::Column::Platform.eq(platform.as_str()))
            .all(self.db())
            .await?;
        Ok(browse::entries(&rows, &folder)
            .into_iter()
            .map(|entry| TreeEntry {
                path: entry.path,
                folder: entry.folder,
                row: entry.row.cloned(),
            })
            .collect())
    }

    /// A document by its primary id, an alias (Notion's undashed form,
    /// Feishu's node token) or an online URL ending in one.
    pub async fn find(&self, text: &str) -> AppResult<Option<docs_document::Model>> {
        let text = text.trim();
        for candidate in id_candidates(text) {
            let primary = docs_alias::Entity::find()
                .filter(docs_alias::Column::AliasId.eq(candidate.as_str()))
                .one(self.db())
                .await?
                .map(|alias| alias.primary_id)
                .unwrap_or(candidate);
            if let Some(row) = docs_document::Entity::find()
                .filter(docs_document::Column::RemoteId.eq(primary.as_str()))
                .one(self.db())
                .await?
            {
                return Ok(Some(row));
            }
        }
        Ok(None)
    }

    /// A document by its path in the mirror (the file, or a folder whose
    /// `README.md` or `_index.md` it is).
    pub async fn find_by_path(&self, path: &str) -> AppResult<Option<docs_document::Model>> {
        let path = browse::normalize(path)
            .ok_or_else(|| AppError::bad_input("path", "not a path inside the mirror"))?;
        for candidate in browse::candidates(&path) {
            if let Some(row) = docs_document::Entity::find()
                .filter(docs_document::Column::LocalPath.eq(candidate.as_str()))
                .one(self.db())
                .await?
            {
                return Ok(Some(row));
            }
        }
        Ok(None)
    }

    /// A document by id, URL or path: what `trellis docs resolve` takes.
    pub async fn resolve(&self, text: &str) -> AppResult<Option<docs_document::Model>> {
        if let Some(row) = self.find(text).await? {
            return Ok(Some(row));
        }
        match browse::normalize(text) {
            Some(path) if !path.is_empty() => self.find_by_path(&path).await,
            _ => Ok(None),
        }
    }

    /// The document's file: body and properties.
    pub async fn read(&self, row: docs_document::Model) -> AppResult<DocFile> {
        let file = self.syncer.mirror_root().join(&row.local_path);
        let text = if row.local_path.ends_with(".md") {
            match tokio::fs::read_to_string(&file).await {
                Ok(text) => Some(text),
                Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
                Err(error) => return Err(AppError::internal(error)),
            }
        } else {
            None
        };
        let (body, properties) = match text.as_deref().map(super::frontmatter::parse) {
            Some(Ok((frontmatter, body))) => (
                Some(body.to_owned()),
                frontmatter.properties.into_iter().collect(),
            ),
            // Not ours (edited by hand): shown whole.
            Some(Err(_)) => (text.clone(), Vec::new()),
            None => (None, Vec::new()),
        };
        Ok(DocFile {
            row,
            body,
            properties,
        })
    }

    /// The live documents linking to `row`.
    pub async fn backlinks(
        &self,
        row: &docs_document::Model,
    ) -> AppResult<Vec<docs_document::Model>> {
        // A link names its target as the body had it: the primary id or an
        // alias (Notion's undashed form, Feishu's node token).
        let mut names: Vec<String> = docs_alias::Entity::find()
            .filter(docs_alias::Column::Platform.eq(row.platform.as_str()))
            .filter(docs_alias::Column::PrimaryId.eq(row.remote_id.as_str()))
            .all(self.db())
            .await?
            .into_iter()
            .map(|alias| alias.alias_id)
            .collect();
        names.push(row.remote_id.clone());
        names.extend(row.alt_id.clone());
        let from: Vec<String> = docs_link::Entity::find()
            .filter(docs_link::Column::Platform.eq(row.platform.as_str()))
            .filter(docs_link::Column::TargetId.is_in(names))
            .all(self.db())
            .await?
            .into_iter()
            .map(|link| link.from_id)
            .collect();
        if from.is_empty() {
            return Ok(Vec::new());
        }
        Ok(docs_document::Entity::find()
            .filter(docs_document::Column::Platform.eq(row.platform.as_str()))
            .filter(docs_document::Column::RemoteId.is_in(from))
            .filter(docs_document::Column::Status.ne(super::engine::manifest::TRASHED))
            .order_by_asc(docs_document::Column::LocalPath)
            .all(self.db())
            .await?)
    }

    /// Every doctor check.
    pub async fn doctor(&self) -> AppResult<doctor::Report> {
        let settings = self.effective().await?;
        Ok(doctor::run(self.db(), &settings, self.syncer.mirror_root()).await)
    }

    /// The settings in force without their secrets (callers check the
    /// admin).
    pub async fn settings_view(&self) -> AppResult<DocsSettings> {
        Ok(view(&self.effective().await?))
    }
}

/// Settings as admins see them: credentials only as "set".
fn view(s: &Settings) -> DocsSettings {
    {
        // The knobs are small (clap parsed them as u32/u64 from the
        // environment); saturate rather than wrap if one is absurd.
        let int = |value: u32| i32::try_from(value).unwrap_or(i32::MAX);
        DocsSettings {
            notion_configured: s.notion_configured(),
            notion_api_url: s.notion_api_url.to_string(),
            notion_qps: int(s.notion_qps),
            feishu_configured: s.feishu_configured(),
            feishu_app_id: s.feishu_app_id.clone(),
            feishu_api_url: s.feishu_api_url.to_string(),
            feishu_qps: int(s.feishu_qps),
            feishu_wiki_spaces: s.wiki_spaces(),
            feishu_drive_folders: s.drive_folders(),
            sync_interval_seconds: i64::try_from(s.docs_sync_interval).unwrap_or(i64::MAX),
            reconcile_every_runs: int(s.docs_reconcile_every_runs),
            trash_keep_days: int(s.docs_trash_keep_days),
            bitable_inline_max_rows: int(s.docs_bitable_inline_max_rows),
        }
    }
}

/// The ids a reader's text may carry: itself, Notion's dashed and undashed
/// forms of a 32-hex id at its end (a URL's last segment), and the last
/// path segment of a URL (Feishu's tokens).
fn id_candidates(text: &str) -> Vec<String> {
    let mut candidates = vec![text.to_owned()];
    let segment = url::Url::parse(text)
        .ok()
        .and_then(|url| {
            url.path_segments()
                .and_then(|mut segments| segments.next_back().map(str::to_owned))
        })
        .unwrap_or_else(|| text.to_owned());
    if segment != text && !segment.is_empty() {
        candidates.push(segment.clone());
    }
    let hex: String = segment.chars().filter(|c| *c != '-').collect();
    if hex.len() >= 32 {
        let tail = &hex[hex.len() - 32..];
        if tail.chars().all(|c| c.is_ascii_hexdigit()) {
            let tail = tail.to_ascii_lowercase();
            let dashed = format!(
                "{}-{}-{}-{}-{}",
                &tail[..8],
                &tail[8..12],
                &tail[12..16],
                &tail[16..20],
                &tail[20..]
            );
            for id in [tail, dashed] {
                if !candidates.contains(&id) {
                    candidates.push(id);
                }
            }
        }
    }
    candidates
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_notion_url_names_its_page_in_both_forms() {
        let found = id_candidates("https://www.notion.so/Plan-Q3-1f2e3d4c00004abc8def123456789abc");
        assert!(found.contains(&"1f2e3d4c00004abc8def123456789abc".to_owned()));
        assert!(found.contains(&"1f2e3d4c-0000-4abc-8def-123456789abc".to_owned()));
        let feishu = id_candidates("https://example.feishu.cn/wiki/wikcnAbCdEf");
        assert!(feishu.contains(&"wikcnAbCdEf".to_owned()));
        assert_eq!(id_candidates("doxcn1"), vec!["doxcn1".to_owned()]);
    }
}
