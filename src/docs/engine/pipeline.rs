//! One platform's run and the mirror-wide finalization: the I/O around the
//! pure parts, in the order the module docs of `engine` give.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};

use chrono::{DateTime, Utc};
use entity::{docs_asset, docs_document};

use crate::digest::sha256_hex;
use crate::docs::adapter::{
    Adapter, AdapterError, AssetRef, NodeKind, Platform, RemoteNode, RowProperties,
};
use crate::docs::assets::{self, ExtensionHints};
use crate::docs::frontmatter::{self, Frontmatter};
use crate::docs::markers::DegradationCounts;
use crate::docs::mode::{self, ModeDecision, ModeInputs, PastRun, SyncMode};
use crate::docs::search;

use super::lifecycle::{self, TRASH_DIR};
use super::links::{self, ResolvedLink};
use super::manifest::{self, ACTIVE, ASSET_OK, ASSET_PENDING, PENDING_ASSETS, TRASHED};
use super::place;
use super::render::{self, IndexEntry, IndexRow};
use super::tree::{self, Placement, Shape};
use super::{
    DOWNLOAD_DIR, Engine, EngineError, Failure, FinalizeReport, INDEX_FILE, MAX_FAILURES_KEPT,
    Phase, ProgressStep, RunChanges, RunReport, RunStats,
};

/// How many past runs the mode decision reads (the daily full run keeps
/// the incremental streak shorter than this).
const RECENT_RUNS: u64 = 64;

pub(super) async fn sync_platform(
    engine: &Engine<'_>,
    adapter: &dyn Adapter,
    full_requested: bool,
) -> Result<RunReport, EngineError> {
    let platform = adapter.platform();
    let started_at = engine.clock.now();
    let past = manifest::recent_runs(engine.db, platform, RECENT_RUNS).await?;
    let recent: Vec<PastRun> = past
        .iter()
        .map(|run| PastRun {
            started_at: run.started_at,
            mode: if run.mode == SyncMode::Incremental.as_str() {
                SyncMode::Incremental
            } else {
                SyncMode::Full
            },
        })
        .collect();
    let checkpoint = past.first().and_then(|run| run.checkpoint);
    let decision = mode::decide(
        &ModeInputs {
            incremental_capable: adapter.incremental_enumerator().is_some(),
            full_requested,
            checkpoint,
            recent_runs: &recent,
            reconcile_every_runs: engine.config.reconcile_every_runs,
        },
        started_at,
        &engine.config.zone,
    );
    let run_id = manifest::start_run(
        engine.db,
        platform,
        decision.mode.as_str(),
        decision.reason.as_str(),
        started_at,
    )
    .await?;
    let mut run = Run {
        engine,
        adapter,
        platform,
        root: engine.config.mirror_root.clone(),
        now: started_at,
        documents: HashMap::new(),
        rows: HashMap::new(),
        moved: HashMap::new(),
        stats: RunStats {
            mode: decision.mode.as_str().to_owned(),
            reason: decision.reason.as_str().to_owned(),
            ..RunStats::default()
        },
        changes: RunChanges::default(),
        done: 0,
        total: 0,
    };
    run.report(Phase::Listing, false);
    let outcome = run.execute(decision, checkpoint).await;
    run.report(Phase::Finished, outcome.is_err());
    let finished_at = engine.clock.now();
    let stats = serde_json::to_value(&run.stats).unwrap_or_default();
    let changes = serde_json::to_value(&run.changes).unwrap_or_default();
    match outcome {
        Ok(next_checkpoint) => {
            manifest::finish_run(
                engine.db,
                run_id,
                manifest::RunOutcome {
                    status: "succeeded",
                    finished_at,
                    checkpoint: next_checkpoint,
                    stats,
                    changes,
                    error: None,
                },
            )
            .await?;
            Ok(RunReport {
                run_id,
                mode: decision,
                stats: run.stats,
                changes: run.changes,
            })
        }
        Err(error) => {
            tracing::error!(platform = platform.as_str(), %error, "docs sync failed");
            // Best effort: the manifest may be what failed.
            let _ = manifest::finish_run(
                engine.db,
                run_id,
                manifest::RunOutcome {
                    status: "failed",
                    finished_at,
                    checkpoint: None,
                    stats,
                    changes,
                    error: Some(error.to_string()),
                },
            )
            .await;
            Err(error)
        }
    }
}

/// One platform's run in progress.
struct Run<'r, 'e> {
    engine: &'r Engine<'e>,
    adapter: &'r dyn Adapter,
    platform: Platform,
    root: PathBuf,
    now: DateTime<Utc>,
    /// The manifest's rows of this platform, kept current as the run goes.
    documents: HashMap<String, docs_document::Model>,
    /// Each queried row's properties, by row id.
    rows: HashMap<String, RowProperties>,
    /// Documents moved this run: id → the path they had.
    moved: HashMap<String, String>,
    stats: RunStats,
    changes: RunChanges,
    /// Nodes processed, of `total` placed (for progress).
    done: u64,
    total: u64,
}

impl Run<'_, '_> {
    fn abs(&self, path: &str) -> PathBuf {
        self.root.join(path)
    }

    fn report(&self, phase: Phase, failed: bool) {
        self.engine.progress.step(ProgressStep {
            platform: self.platform,
            phase,
            done: self.done,
            total: self.total,
            errors: self.stats.errors,
            failed,
        });
    }

    /// The run after its row is open; returns the checkpoint to store.
    async fn execute(
        &mut self,
        decision: ModeDecision,
        checkpoint: Option<DateTime<Utc>>,
    ) -> Result<Option<DateTime<Utc>>, EngineError> {
        self.documents = manifest::documents(self.engine.db, self.platform).await?;
        let platform_root = self.abs(self.platform.as_str());
        std::fs::create_dir_all(&platform_root).map_err(EngineError::io(&platform_root))?;
        let (nodes, placements, next_checkpoint) = match (decision.mode, checkpoint) {
            (SyncMode::Incremental, Some(checkpoint)) => {
                let Some(incremental) = self.adapter.incremental_enumerator() else {
                    unreachable!("mode::decide only picks incremental for a capable adapter")
                };
                self.stats.adapter_calls += 1;
                let listing = incremental.enumerate_since(checkpoint).await?;
                let placements = self.place_incremental(&listing.nodes).await?;
                (listing.nodes, placements, Some(listing.checkpoint))
            }
            _ => {
                self.stats.adapter_calls += 1;
                let nodes = self.adapter.enumerate().await?;
                let current: HashMap<String, String> = self
                    .documents
                    .values()
                    .filter(|row| row.status != TRASHED)
                    .map(|row| (row.remote_id.clone(), row.local_path.clone()))
                    .collect();
                let placements = tree::build(self.platform, &nodes, &current);
                let latest = nodes.iter().filter_map(|node| node.edited_at).max();
                let next = match (latest, checkpoint) {
                    (Some(latest), Some(previous)) => Some(latest.max(previous)),
                    (latest, previous) => latest.or(previous),
                };
                (nodes, placements, next)
            }
        };
        self.stats.enumerated = nodes.len() as u64;
        let by_id: HashMap<&str, &RemoteNode> =
            nodes.iter().map(|node| (node.id.as_str(), node)).collect();
        self.total = placements.len() as u64;
        self.report(Phase::Databases, false);
        self.query_databases(&nodes).await?;
        let children = children_of(&nodes, &placements);
        self.report(Phase::Documents, false);
        for placement in &placements {
            self.done += 1;
            let Some(node) = by_id.get(placement.id.as_str()) else {
                continue;
            };
            let rows = children.get(placement.id.as_str()).map(Vec::as_slice);
            let full = decision.mode == SyncMode::Full;
            if let Err(error) = self.process_node(node, placement, rows, full).await {
                if error.is_fatal() {
                    return Err(error);
                }
                self.fail(&node.id, &error);
            }
            self.report(Phase::Documents, false);
        }
        if decision.mode == SyncMode::Full {
            self.report(Phase::Deletes, false);
            let listed: HashSet<&str> = by_id.keys().copied().collect();
            self.reconcile_deletes(&listed).await?;
        }
        self.report(Phase::Links, false);
        self.finalize_links().await?;
        Ok(next_checkpoint)
    }

    fn fail(&mut self, id: &str, error: &EngineError) {
        tracing::warn!(platform = self.platform.as_str(), id, %error, "docs document failed");
        self.stats.errors += 1;
        if self.stats.failures.len() < MAX_FAILURES_KEPT {
            self.stats.failures.push(Failure {
                id: id.to_owned(),
                error: error.to_string(),
            });
        }
    }

    /// Incremental placement: the pure part reads the folders on disk and
    /// the manifest; unlisted parents that gain a child are converted here.
    async fn place_incremental(
        &mut self,
        nodes: &[RemoteNode],
    ) -> Result<Vec<Placement>, EngineError> {
        let live: HashMap<String, String> = self
            .documents
            .values()
            .filter(|row| row.status != TRASHED)
            .map(|row| (row.remote_id.clone(), row.local_path.clone()))
            .collect();
        let root = self.root.clone();
        let (placements, conversions) =
            place::place_incremental(self.platform, nodes, &live, |dir| {
                super::fsio::entry_names(&root.join(dir)).unwrap_or_default()
            });
        for conversion in conversions {
            let from = self.abs(&conversion.from);
            let to = self.abs(&conversion.to);
            super::fsio::move_path(&from, &to).map_err(EngineError::io(&to))?;
            self.relocated(&conversion.id, &conversion.from, &conversion.to)
                .await?;
        }
        Ok(placements)
    }

    /// Queries each database's rows once: every listed database, and the
    /// database of every listed row (on incremental runs it may not be
    /// listed itself).
    async fn query_databases(&mut self, nodes: &[RemoteNode]) -> Result<(), EngineError> {
        let Some(expander) = self.adapter.database_expander() else {
            return Ok(());
        };
        let listed: HashMap<&str, &RemoteNode> =
            nodes.iter().map(|node| (node.id.as_str(), node)).collect();
        let mut databases: Vec<RemoteNode> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let wanted = nodes
            .iter()
            .filter(|node| node.kind == NodeKind::Database)
            .map(|node| node.id.clone())
            .chain(
                nodes
                    .iter()
                    .filter(|node| node.kind == NodeKind::Row)
                    .filter_map(|node| node.parent_id.clone()),
            );
        for id in wanted {
            if !seen.insert(id.clone()) {
                continue;
            }
            if let Some(node) = listed.get(id.as_str()) {
                databases.push((*node).clone());
            } else if let Some(row) = self.documents.get(&id)
                && row.kind == NodeKind::Database.as_str()
                && row.status != TRASHED
            {
                databases.push(remote_of(row));
            }
        }
        let titles: HashMap<String, String> = self
            .documents
            .values()
            .map(|row| (row.remote_id.clone(), row.title.clone()))
            .chain(
                nodes
                    .iter()
                    .map(|node| (node.id.clone(), node.title.clone())),
            )
            .collect();
        for database in databases {
            self.stats.adapter_calls += 1;
            match expander.query_rows(&database, &titles).await {
                Ok(rows) => self.rows.extend(rows),
                Err(error) => {
                    let error = EngineError::from(error);
                    if error.is_fatal() {
                        return Err(error);
                    }
                    self.fail(&database.id, &error);
                }
            }
        }
        Ok(())
    }

    /// The seed's `processNode`, in its order.
    async fn process_node(
        &mut self,
        node: &RemoteNode,
        placement: &Placement,
        children: Option<&[(String, String, String)]>,
        full: bool,
    ) -> Result<(), EngineError> {
        let db = self.engine.db;
        // Alias first: links naming the alias must resolve even when this
        // node is skipped below.
        if let Some(alias) = node.alt_id.as_deref().filter(|alias| *alias != node.id) {
            manifest::upsert_alias(db, self.platform, alias, &node.id).await?;
        }
        // mkdir.
        let target = self.abs(&placement.path);
        let dir = match placement.shape {
            Shape::Folder => target.clone(),
            _ => target.parent().map(Path::to_path_buf).unwrap_or_default(),
        };
        // Move/rename follow, before the folder is made (a moved folder is
        // renamed, not recreated).
        let prior = self
            .documents
            .get(&node.id)
            .filter(|row| row.status != TRASHED)
            .cloned();
        if let Some(prior) = &prior
            && prior.local_path != placement.path
        {
            self.follow_move(prior, placement).await?;
        }
        std::fs::create_dir_all(&dir).map_err(EngineError::io(&dir))?;
        let prior = self
            .documents
            .get(&node.id)
            .filter(|row| row.status != TRASHED)
            .cloned();
        // Container short-circuit: no body to fetch.
        match node.kind {
            NodeKind::Folder => {
                return self
                    .upsert(node, placement, None, ACTIVE, prior.as_ref(), false)
                    .await;
            }
            NodeKind::Database => {
                return self
                    .write_database_index(node, placement, children, full, prior.as_ref())
                    .await;
            }
            _ => {}
        }
        let metadata_same = prior.as_ref().is_some_and(|prior| {
            prior.title == node.title
                && prior.parent_remote_id == node.parent_id
                && prior.url == node.url
                && prior.kind == node.kind.as_str()
        });
        let on_disk = target.is_file();
        // Pre-fetch skip: the remote edit time is unchanged.
        if let Some(prior) = &prior
            && prior.status == ACTIVE
            && metadata_same
            && on_disk
            && prior.edited_at.is_some()
            && prior.edited_at == node.edited_at
        {
            self.stats.documents_skipped_unedited += 1;
            return Ok(());
        }
        self.stats.adapter_calls += 1;
        let fetched = self.adapter.fetch_markdown(node).await?;
        self.stats.documents_fetched += 1;
        let properties = self.rows.get(&node.id).cloned();
        let content_hash = match &properties {
            Some(properties) => sha256_hex(&[&fetched.markdown, &properties.canonical()]),
            None => sha256_hex(&[&fetched.markdown]),
        };
        let mut degradations = DegradationCounts::of(&fetched.degradations);
        if let Some(properties) = &properties {
            degradations.merge(&DegradationCounts::of(&properties.degradations));
        }
        self.stats.degradations.merge(&degradations);
        // Links and assets registered; assets downloaded and replaced.
        manifest::replace_links(db, self.platform, &node.id, &fetched.links).await?;
        let mut body = fetched.body().to_owned();
        let mut pending = false;
        for asset in &fetched.assets {
            match self.download(asset).await? {
                Some(pool_path) => {
                    if let Some(url) = &asset.body_url {
                        let relative = assets::relative_path(&placement.path, &pool_path);
                        body = assets::replace_url(&body, url, &relative);
                    }
                }
                None => {
                    pending = true;
                    if let Some(url) = &asset.body_url {
                        body = assets::mark_pending(&body, url);
                    }
                }
            }
        }
        let status = if pending { PENDING_ASSETS } else { ACTIVE };
        // Post-fetch skip: the content is what the file already holds.
        if let Some(prior) = &prior
            && prior.status == ACTIVE
            && !pending
            && metadata_same
            && on_disk
            && prior.content_hash.as_deref() == Some(content_hash.as_str())
        {
            self.stats.documents_skipped_unchanged += 1;
            return self
                .upsert(
                    node,
                    placement,
                    Some(content_hash),
                    status,
                    Some(prior),
                    false,
                )
                .await;
        }
        let values = properties.map(|p| p.values).unwrap_or_default();
        let searched: Vec<(String, String)> = values
            .iter()
            .map(|(name, value)| (name.clone(), value.clone()))
            .collect();
        let header = header_of(self.platform, node, values);
        let text = frontmatter::document(&header, &body);
        if super::fsio::write_if_changed(&target, text.as_bytes())
            .map_err(EngineError::io(&target))?
        {
            self.stats.documents_written += 1;
        }
        manifest::index_text(
            db,
            self.platform,
            &node.id,
            &node.title,
            &search::indexed_body(&body, &searched),
        )
        .await?;
        self.upsert(
            node,
            placement,
            Some(content_hash),
            status,
            prior.as_ref(),
            true,
        )
        .await
    }

    /// Moves a document's file (or its whole folder, its descendants
    /// along) to its new place.
    async fn follow_move(
        &mut self,
        prior: &docs_document::Model,
        placement: &Placement,
    ) -> Result<(), EngineError> {
        let (old_shape, _, _) = tree::parse_path(&prior.local_path);
        let dirs = match (
            tree::own_dir(&prior.local_path, old_shape),
            tree::own_dir(&placement.path, placement.shape),
        ) {
            (Some(from), Some(to)) => Some((from, to)),
            _ => None,
        };
        let (from, to) = dirs
            .clone()
            .unwrap_or_else(|| (prior.local_path.clone(), placement.path.clone()));
        let (from_abs, to_abs) = (self.abs(&from), self.abs(&to));
        super::fsio::move_path(&from_abs, &to_abs).map_err(EngineError::io(&to_abs))?;
        if old_shape == Shape::Readme && placement.shape == Shape::Leaf {
            // A folder that lost its children: dropped once empty.
            if let Some(old_dir) = from_abs.parent() {
                super::fsio::remove_empty_dirs(old_dir, &self.abs(self.platform.as_str()));
            }
        }
        if let Some((from, to)) = dirs {
            // The descendants moved with the folder: the manifest follows
            // now, so their own processing finds them where they are.
            let prefix = format!("{from}/");
            let carried: Vec<(String, String)> = self
                .documents
                .values()
                .filter(|row| row.status != TRASHED && row.remote_id != prior.remote_id)
                .filter_map(|row| {
                    let rest = row.local_path.strip_prefix(&prefix)?;
                    Some((row.remote_id.clone(), format!("{to}/{rest}")))
                })
                .collect();
            for (id, path) in carried {
                let old = self.documents[&id].local_path.clone();
                self.relocated(&id, &old, &path).await?;
            }
        }
        self.relocated(&prior.remote_id, &prior.local_path, &placement.path)
            .await
    }

    /// After a document's file moved from `from` to `to`: its body's asset
    /// paths re-aimed (they are relative to its folder), the manifest
    /// updated at once (a later failure leaves it where the file is), the
    /// move recorded for link fix-up.
    async fn relocated(&mut self, id: &str, from: &str, to: &str) -> Result<(), EngineError> {
        let (shape, _, _) = tree::parse_path(to);
        let file = self.abs(to);
        if shape != Shape::Folder
            && let Some(bytes) =
                super::fsio::read_optional(&file).map_err(EngineError::io(&file))?
        {
            let text = String::from_utf8_lossy(&bytes);
            let refit = links::refit_asset_paths(&text, from, to);
            super::fsio::write_if_changed(&file, refit.as_bytes())
                .map_err(EngineError::io(&file))?;
        }
        let Some(row) = self.documents.get_mut(id) else {
            return Ok(());
        };
        row.local_path = to.to_owned();
        row.updated_at = self.now;
        let row = row.clone();
        manifest::upsert_document(self.engine.db, row).await?;
        if !self.moved.contains_key(id) {
            self.moved.insert(id.to_owned(), from.to_owned());
            self.stats.moved += 1;
            self.changes.moved.push(id.to_owned());
        }
        Ok(())
    }

    /// A database's `_index.md`: its frontmatter and the table of its rows.
    /// Regenerated on full runs; an incremental run writes it only when it
    /// is missing (its listing does not hold every row).
    async fn write_database_index(
        &mut self,
        node: &RemoteNode,
        placement: &Placement,
        children: Option<&[(String, String, String)]>,
        full: bool,
        prior: Option<&docs_document::Model>,
    ) -> Result<(), EngineError> {
        let target = self.abs(&placement.path);
        if !full && target.is_file() {
            return self
                .upsert(
                    node,
                    placement,
                    prior.and_then(|p| p.content_hash.clone()),
                    ACTIVE,
                    prior,
                    false,
                )
                .await;
        }
        let empty = BTreeMap::new();
        let rows: Vec<IndexRow<'_>> = children
            .unwrap_or_default()
            .iter()
            .map(|(id, path, title)| IndexRow {
                title,
                path,
                properties: self.rows.get(id).map_or(&empty, |row| &row.values),
            })
            .collect();
        let body = render::database_index(&node.title, &placement.path, &rows);
        let header = header_of(self.platform, node, BTreeMap::new());
        let text = frontmatter::document(&header, &body);
        let content_hash = sha256_hex(&[&text]);
        let wrote = super::fsio::write_if_changed(&target, text.as_bytes())
            .map_err(EngineError::io(&target))?;
        if wrote {
            self.stats.documents_written += 1;
        }
        manifest::index_text(
            self.engine.db,
            self.platform,
            &node.id,
            &node.title,
            &search::indexed_body(&body, &[]),
        )
        .await?;
        self.upsert(node, placement, Some(content_hash), ACTIVE, prior, wrote)
            .await
    }

    /// The manifest upsert closing a node's processing.
    async fn upsert(
        &mut self,
        node: &RemoteNode,
        placement: &Placement,
        content_hash: Option<String>,
        status: &str,
        prior: Option<&docs_document::Model>,
        written: bool,
    ) -> Result<(), EngineError> {
        let live_before = prior.is_some_and(|prior| prior.status != TRASHED);
        let row = docs_document::Model {
            platform: self.platform.as_str().to_owned(),
            remote_id: node.id.clone(),
            alt_id: node.alt_id.clone(),
            kind: node.kind.as_str().to_owned(),
            parent_remote_id: node.parent_id.clone(),
            title: node.title.clone(),
            url: node.url.clone(),
            edited_at: node.edited_at,
            content_hash,
            local_path: placement.path.clone(),
            status: status.to_owned(),
            trashed_at: None,
            created_at: prior.map_or(self.now, |prior| prior.created_at),
            updated_at: self.now,
        };
        if prior != Some(&row) {
            manifest::upsert_document(self.engine.db, row.clone()).await?;
        }
        if !live_before {
            self.changes.added.push(node.id.clone());
        } else if written {
            self.changes.updated.push(node.id.clone());
        }
        self.documents.insert(node.id.clone(), row);
        Ok(())
    }

    /// One asset into the pool: the pool path, or `None` when the download
    /// failed (the asset is left pending). Reuses a downloaded remote key
    /// whose file is still there; stores identical bytes once.
    async fn download(&mut self, asset: &AssetRef) -> Result<Option<String>, EngineError> {
        let db = self.engine.db;
        let known = manifest::asset(db, self.platform, &asset.remote_key).await?;
        if let Some(known) = &known
            && known.status == ASSET_OK
            && let Some(path) = &known.local_path
            && self.abs(path).is_file()
        {
            self.stats.assets_reused += 1;
            return Ok(Some(path.to_owned()));
        }
        let downloads = self.abs(DOWNLOAD_DIR);
        std::fs::create_dir_all(&downloads).map_err(EngineError::io(&downloads))?;
        let temp = downloads.join(uuid::Uuid::new_v4().simple().to_string());
        self.stats.adapter_calls += 1;
        let original_url = asset
            .body_url
            .clone()
            .unwrap_or_else(|| asset.download_url.clone());
        let created_at = known.as_ref().map_or(self.now, |known| known.created_at);
        let (platform, now) = (self.platform, self.now);
        let asset_row = |status: &str, stored: Option<(String, String)>| {
            let (sha256, local_path) = stored.unzip();
            docs_asset::Model {
                platform: platform.as_str().to_owned(),
                remote_key: asset.remote_key.clone(),
                sha256,
                local_path,
                status: status.to_owned(),
                original_url: original_url.clone(),
                created_at,
                updated_at: now,
            }
        };
        let downloaded = match self.adapter.download_asset(asset, &temp).await {
            Ok(downloaded) => downloaded,
            Err(error) => {
                let _ = std::fs::remove_file(&temp);
                if error == AdapterError::Unauthorized {
                    return Err(error.into());
                }
                tracing::info!(
                    platform = self.platform.as_str(),
                    key = asset.remote_key.as_str(),
                    %error,
                    "docs asset pending"
                );
                self.stats.assets_pending += 1;
                let row = asset_row(ASSET_PENDING, None);
                manifest::upsert_asset(db, row).await?;
                return Ok(None);
            }
        };
        let bytes = std::fs::read(&temp).map_err(EngineError::io(&temp))?;
        let address = assets::content_address(
            &bytes,
            &ExtensionHints {
                file_name: asset.file_name.as_deref(),
                url: Some(&asset.download_url),
                content_type: downloaded.content_type.as_deref(),
            },
        );
        let pooled = self.abs(&address.path);
        if pooled.is_file() {
            self.stats.assets_deduplicated += 1;
            let _ = std::fs::remove_file(&temp);
        } else {
            super::fsio::move_path(&temp, &pooled).map_err(EngineError::io(&pooled))?;
            self.stats.assets_downloaded += 1;
        }
        let row = asset_row(ASSET_OK, Some((address.sha256, address.path.clone())));
        manifest::upsert_asset(db, row).await?;
        Ok(Some(address.path))
    }

    /// Full runs: live documents not listed go to the trash, unless the
    /// listing is short enough to look like lost permissions.
    async fn reconcile_deletes(&mut self, listed: &HashSet<&str>) -> Result<(), EngineError> {
        let mut live: Vec<&docs_document::Model> = self
            .documents
            .values()
            .filter(|row| row.status != TRASHED)
            .collect();
        // Deepest first: a folder is emptied before it is removed.
        live.sort_by(|a, b| {
            (b.local_path.matches('/').count(), &b.local_path)
                .cmp(&(a.local_path.matches('/').count(), &a.local_path))
        });
        let active: Vec<String> = live.iter().map(|row| row.remote_id.clone()).collect();
        let plan = lifecycle::plan_deletes(&active, listed);
        if plan.guard_tripped {
            tracing::warn!(
                platform = self.platform.as_str(),
                listed = listed.len(),
                active = active.len(),
                "docs sync: the listing holds under {}% of the mirrored documents; \
                 no document is deleted this run (lost permissions?)",
                lifecycle::DELETE_GUARD_PERCENT
            );
            self.stats.delete_guard_tripped = true;
        }
        let day = self
            .now
            .with_timezone(&self.engine.config.zone)
            .date_naive();
        let platform_root = self.abs(self.platform.as_str());
        for id in plan.trash {
            let Some(mut row) = self.documents.get(&id).cloned() else {
                continue;
            };
            let (shape, _, _) = tree::parse_path(&row.local_path);
            let path = self.abs(&row.local_path);
            if shape == Shape::Folder {
                super::fsio::remove_empty_dirs(&path, &platform_root);
            } else if self.file_is(&path, &id)? {
                let trashed = self.abs(&lifecycle::trash_path(day, &row.local_path));
                if trashed.exists() {
                    std::fs::remove_file(&trashed).map_err(EngineError::io(&trashed))?;
                }
                super::fsio::move_path(&path, &trashed).map_err(EngineError::io(&trashed))?;
                if let Some(dir) = path.parent() {
                    super::fsio::remove_empty_dirs(dir, &platform_root);
                }
            }
            row.status = TRASHED.to_owned();
            row.trashed_at = Some(self.now);
            row.updated_at = self.now;
            manifest::upsert_document(self.engine.db, row.clone()).await?;
            self.documents.insert(id.clone(), row);
            self.stats.trashed += 1;
            self.changes.trashed.push(id);
        }
        Ok(())
    }

    /// Whether the file at `path` is the document `id`'s (a newcomer may
    /// have taken the name of a document deleted in the same run).
    fn file_is(&self, path: &Path, id: &str) -> Result<bool, EngineError> {
        let Some(bytes) = super::fsio::read_optional(path).map_err(EngineError::io(path))? else {
            return Ok(false);
        };
        let text = String::from_utf8_lossy(&bytes);
        Ok(frontmatter::parse(&text).is_ok_and(|(header, _)| header.id == id))
    }

    /// Document links rewritten over the whole links table: platform URLs
    /// become relative paths, links already rewritten follow moves. Only
    /// bodies are touched, never the frontmatter.
    async fn finalize_links(&mut self) -> Result<(), EngineError> {
        let all = manifest::links(self.engine.db, self.platform).await?;
        let aliases = manifest::aliases(self.engine.db, self.platform).await?;
        let mut by_from: BTreeMap<&str, Vec<ResolvedLink<'_>>> = BTreeMap::new();
        let live = |id: &str| self.documents.get(id).filter(|row| row.status != TRASHED);
        for link in &all {
            let target = aliases
                .get(&link.target_id)
                .map_or(link.target_id.as_str(), String::as_str);
            let Some(target) = live(target) else {
                continue;
            };
            by_from
                .entry(&link.from_id)
                .or_default()
                .push(ResolvedLink {
                    raw_url: &link.raw_url,
                    target_path: &target.local_path,
                    target_moved_from: self.moved.get(&target.remote_id).map(String::as_str),
                });
        }
        let mut rewritten = 0;
        for (from, resolved) in by_from {
            let Some(row) = live(from) else {
                continue;
            };
            let path = self.abs(&row.local_path);
            let Some(bytes) = super::fsio::read_optional(&path).map_err(EngineError::io(&path))?
            else {
                continue;
            };
            let text = String::from_utf8_lossy(&bytes);
            let Some((header, body)) = frontmatter::split(&text) else {
                continue;
            };
            let moved_from = self.moved.get(from).map(String::as_str);
            let body = links::rewrite(body, &row.local_path, moved_from, &resolved);
            let updated = format!("{header}{body}");
            if super::fsio::write_if_changed(&path, updated.as_bytes())
                .map_err(EngineError::io(&path))?
            {
                rewritten += 1;
            }
        }
        self.stats.links_rewritten += rewritten;
        Ok(())
    }
}

/// The frontmatter of a node's file.
fn header_of(
    platform: Platform,
    node: &RemoteNode,
    properties: BTreeMap<String, String>,
) -> Frontmatter {
    Frontmatter {
        id: node.id.clone(),
        platform,
        kind: node.kind,
        title: node.title.clone(),
        url: node.url.clone(),
        edited_at: node.edited_at,
        parent: node.parent_id.clone(),
        properties,
    }
}

/// Each node's listed children as (id, path, title), for a database's
/// `_index.md`.
type Children = HashMap<String, Vec<(String, String, String)>>;

fn children_of(nodes: &[RemoteNode], placements: &[Placement]) -> Children {
    let paths: HashMap<&str, &str> = placements
        .iter()
        .map(|p| (p.id.as_str(), p.path.as_str()))
        .collect();
    let mut children = Children::new();
    for node in nodes {
        if let (Some(parent), Some(path)) = (&node.parent_id, paths.get(node.id.as_str())) {
            children.entry(parent.clone()).or_default().push((
                node.id.clone(),
                (*path).to_owned(),
                node.title.clone(),
            ));
        }
    }
    children
}

/// The node a manifest row describes (an unlisted database queried on an
/// incremental run).
fn remote_of(row: &docs_document::Model) -> RemoteNode {
    RemoteNode {
        id: row.remote_id.clone(),
        alt_id: row.alt_id.clone(),
        kind: NodeKind::parse(&row.kind).unwrap_or(NodeKind::Database),
        parent_id: row.parent_remote_id.clone(),
        title: row.title.clone(),
        edited_at: row.edited_at,
        url: row.url.clone(),
    }
}

pub(super) async fn finalize_mirror(engine: &Engine<'_>) -> Result<FinalizeReport, EngineError> {
    let root = &engine.config.mirror_root;
    let today = engine
        .clock
        .now()
        .with_timezone(&engine.config.zone)
        .date_naive();
    let trash = root.join(TRASH_DIR);
    let names = super::fsio::entry_names(&trash).map_err(EngineError::io(&trash))?;
    let purge = lifecycle::days_to_purge(
        names.iter().map(String::as_str),
        today,
        engine.config.trash_keep_days,
    );
    let mut report = FinalizeReport::default();
    for day in purge {
        let dir = trash.join(day);
        std::fs::remove_dir_all(&dir).map_err(EngineError::io(&dir))?;
        report.purged_days.push(day.to_owned());
    }
    let documents = manifest::live_documents(engine.db).await?;
    let entries: Vec<IndexEntry<'_>> = documents
        .iter()
        .filter(|row| row.kind != NodeKind::Folder.as_str())
        .map(|row| IndexEntry {
            platform: &row.platform,
            title: &row.title,
            path: &row.local_path,
        })
        .collect();
    let index = root.join(INDEX_FILE);
    report.index_written =
        super::fsio::write_if_changed(&index, render::mirror_index(&entries).as_bytes())
            .map_err(EngineError::io(&index))?;
    Ok(report)
}
