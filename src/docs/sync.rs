//! One sync of the mirror, as the `docs.sync` task and `trellis docs sync`
//! run it: the requested platforms' runs in parallel (each with its own
//! run row; one platform's failure never touches another's), then the
//! mirror-wide finalization.
//!
//! One sync per platform at a time, across processes: a platform's run
//! holds an OS lock on `<mirror>/.internal/locks/<platform>.lock` (released
//! by the OS if the process dies), so a foreground `trellis docs sync` and
//! the server's task never write the same tree at once. A platform whose
//! lock is held is reported `busy` and left alone.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use async_graphql::{Enum, SimpleObject};
use chrono::Offset;
use futures_util::future::join_all;
use sea_orm::DatabaseConnection;
use serde::{Deserialize, Serialize};

use super::adapter::{Adapter, Platform, Traffic};
use super::engine::{
    Engine, EngineConfig, EngineError, Phase, Progress, ProgressStep, RunStats, SystemClock,
    manifest,
};
use super::platforms::{self, Configured};
use super::settings::Settings;

/// The mirror's folder under the data dir.
pub const MIRROR_DIR: &str = "mirror";
/// Where the platforms' lock files live, under the mirror root.
const LOCK_DIR: &str = ".internal/locks";

/// What to sync.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncRequest {
    /// One platform, or every configured one.
    pub platform: Option<Platform>,
    /// Force a full run (delete and move detection).
    #[serde(default)]
    pub full: bool,
}

impl SyncRequest {
    fn platforms(&self) -> Vec<Platform> {
        match self.platform {
            Some(platform) => vec![platform],
            None => Platform::ALL.to_vec(),
        }
    }
}

/// How one platform's part of a sync ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Enum)]
#[serde(rename_all = "snake_case")]
#[graphql(name = "DocsPlatformOutcome")]
pub enum Outcome {
    /// The run completed (some documents may have failed: see `errors`).
    Succeeded,
    /// The run stopped (listing failed, credentials refused, the manifest
    /// unreachable).
    Failed,
    /// Not configured: nothing ran.
    Skipped,
    /// Another sync of this platform holds its lock: nothing ran.
    Busy,
}

/// One platform's part of a sync.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlatformResult {
    pub platform: Platform,
    pub outcome: Outcome,
    /// Its run row, when it ran.
    pub run_id: Option<i64>,
    /// Its counters, when it ran.
    pub stats: Option<RunStats>,
    /// Why it failed or was skipped.
    pub error: Option<String>,
    /// The requests it sent.
    pub traffic: Traffic,
}

/// What a sync did: the task's `result`, the CLI's summary.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SyncSummary {
    pub platforms: Vec<PlatformResult>,
    /// Trash day folders purged past the retention.
    pub purged_days: Vec<String>,
}

impl SyncSummary {
    /// No platform could run: none has credentials.
    pub fn nothing_configured(&self) -> bool {
        self.platforms
            .iter()
            .all(|result| result.outcome == Outcome::Skipped)
    }

    /// A platform's run failed.
    pub fn any_failed(&self) -> bool {
        self.platforms
            .iter()
            .any(|result| result.outcome == Outcome::Failed)
    }

    /// Every platform that could run was busy with another sync.
    pub fn only_busy(&self) -> bool {
        self.platforms
            .iter()
            .any(|result| result.outcome == Outcome::Busy)
            && self
                .platforms
                .iter()
                .all(|result| matches!(result.outcome, Outcome::Busy | Outcome::Skipped))
    }

    /// One line for a terminal: each platform's outcome and counters.
    pub fn line(&self) -> String {
        let parts: Vec<String> = self
            .platforms
            .iter()
            .map(|result| {
                let name = result.platform.as_str();
                match (&result.outcome, &result.stats) {
                    (Outcome::Succeeded, Some(stats)) => format!(
                        "{name}: {} run, {} listed, {} fetched, {} written, {} moved, {} trashed, {} errors, {} requests",
                        stats.mode,
                        stats.enumerated,
                        stats.documents_fetched,
                        stats.documents_written,
                        stats.moved,
                        stats.trashed,
                        stats.errors,
                        result.traffic.requests,
                    ),
                    (outcome, _) => format!(
                        "{name}: {}{}",
                        outcome_name(*outcome),
                        result
                            .error
                            .as_deref()
                            .map(|error| format!(" ({error})"))
                            .unwrap_or_default()
                    ),
                }
            })
            .collect();
        parts.join("; ")
    }
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Succeeded => "succeeded",
        Outcome::Failed => "failed",
        Outcome::Skipped => "skipped",
        Outcome::Busy => "busy",
    }
}

/// A platform's progress with its traffic: what `docsSyncProgress` sends
/// and the CLI prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, SimpleObject)]
#[serde(rename_all = "camelCase")]
#[graphql(name = "DocsSyncProgress")]
pub struct SyncProgress {
    pub platform: Platform,
    pub phase: Phase,
    /// Documents processed so far.
    pub done: u64,
    /// Documents to process (0 until listed).
    pub total: u64,
    /// Requests sent to the platform.
    pub requests: u64,
    /// Waits a busy platform imposed (rate-limit answers, retries).
    pub waits: u64,
    /// Documents that failed so far.
    pub errors: u64,
    /// The platform's run stopped on an error (only when `phase` is
    /// `FINISHED`).
    pub failed: bool,
}

/// Told of each platform's progress.
pub trait Observer: Send + Sync {
    fn progress(&self, progress: SyncProgress);
}

/// Runs syncs over one database and one mirror.
#[derive(Clone)]
pub struct Syncer {
    db: DatabaseConnection,
    mirror_root: PathBuf,
}

impl Syncer {
    /// The mirror under `<data_dir>/mirror`.
    pub fn new(db: DatabaseConnection, data_dir: &Path) -> Self {
        Syncer {
            db,
            mirror_root: data_dir.join(MIRROR_DIR),
        }
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    pub fn mirror_root(&self) -> &Path {
        &self.mirror_root
    }

    /// One sync to the end. `Err` only when the mirror itself cannot be
    /// prepared; each platform's failure is in the summary.
    pub async fn run(
        &self,
        settings: &Settings,
        request: SyncRequest,
        observer: &dyn Observer,
    ) -> anyhow::Result<SyncSummary> {
        let config = EngineConfig {
            reconcile_every_runs: settings.docs_reconcile_every_runs,
            trash_keep_days: settings.docs_trash_keep_days,
            zone: chrono::Local::now().offset().fix(),
            ..EngineConfig::new(self.mirror_root.clone())
        };
        let locks = self.mirror_root.join(LOCK_DIR);
        std::fs::create_dir_all(&locks)
            .map_err(|error| anyhow::anyhow!("creating {}: {error}", locks.display()))?;
        let mut results = Vec::new();
        let mut ready: Vec<(Platform, Box<dyn Adapter>, File)> = Vec::new();
        for platform in request.platforms() {
            match platforms::adapter(settings, platform)? {
                Configured::Skipped(why) => results.push(not_run(platform, Outcome::Skipped, why)),
                Configured::Ready(adapter) => match lock(&locks, platform)? {
                    Some(file) => {
                        let closed =
                            manifest::close_interrupted(&self.db, platform, chrono::Utc::now())
                                .await?;
                        if closed > 0 {
                            tracing::warn!(
                                platform = platform.as_str(),
                                closed,
                                "docs sync runs interrupted by a stopped process"
                            );
                        }
                        ready.push((platform, adapter, file))
                    }
                    None => results.push(not_run(
                        platform,
                        Outcome::Busy,
                        "another sync of this platform is running",
                    )),
                },
            }
        }
        let clock = SystemClock;
        let relay = Relay {
            adapters: ready
                .iter()
                .map(|(platform, adapter, _)| (*platform, adapter.as_ref()))
                .collect(),
            observer,
        };
        let engine = Engine::new(&self.db, &config, &clock).with_progress(&relay);
        let runs = join_all(ready.iter().map(|(platform, adapter, _)| {
            let engine = &engine;
            async move {
                let outcome = engine.sync_platform(adapter.as_ref(), request.full).await;
                ran(*platform, outcome, adapter.traffic())
            }
        }))
        .await;
        results.extend(runs);
        results.sort_by_key(|result| result.platform);
        let purged_days = if ready.is_empty() {
            Vec::new()
        } else {
            match engine.finalize_mirror().await {
                Ok(report) => report.purged_days,
                Err(error) => {
                    tracing::error!(%error, "docs mirror finalization failed");
                    Vec::new()
                }
            }
        };
        // The locks go with `ready`, after the finalization.
        drop(ready);
        Ok(SyncSummary {
            platforms: results,
            purged_days,
        })
    }
}

/// The platform's lock, or `None` when another sync holds it.
fn lock(dir: &Path, platform: Platform) -> anyhow::Result<Option<File>> {
    let path = dir.join(format!("{}.lock", platform.as_str()));
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|error| anyhow::anyhow!("opening {}: {error}", path.display()))?;
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => Ok(None),
        Err(TryLockError::Error(error)) => {
            Err(anyhow::anyhow!("locking {}: {error}", path.display()))
        }
    }
}

fn not_run(platform: Platform, outcome: Outcome, why: &str) -> PlatformResult {
    PlatformResult {
        platform,
        outcome,
        run_id: None,
        stats: None,
        error: Some(why.to_owned()),
        traffic: Traffic::default(),
    }
}

fn ran(
    platform: Platform,
    outcome: Result<super::engine::RunReport, EngineError>,
    traffic: Traffic,
) -> PlatformResult {
    match outcome {
        Ok(report) => PlatformResult {
            platform,
            outcome: Outcome::Succeeded,
            run_id: Some(report.run_id),
            stats: Some(report.stats),
            error: None,
            traffic,
        },
        Err(error) => PlatformResult {
            platform,
            outcome: Outcome::Failed,
            run_id: None,
            stats: None,
            error: Some(error.to_string()),
            traffic,
        },
    }
}

/// The engine's steps, with each platform's traffic, to the observer.
struct Relay<'a> {
    adapters: Vec<(Platform, &'a dyn Adapter)>,
    observer: &'a dyn Observer,
}

impl Progress for Relay<'_> {
    fn step(&self, step: ProgressStep) {
        let traffic = self
            .adapters
            .iter()
            .find(|(platform, _)| *platform == step.platform)
            .map(|(_, adapter)| adapter.traffic())
            .unwrap_or_default();
        self.observer.progress(SyncProgress {
            platform: step.platform,
            phase: step.phase,
            done: step.done,
            total: step.total,
            requests: traffic.requests,
            waits: traffic.waits,
            errors: step.errors,
            failed: step.failed,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(platform: Platform, outcome: Outcome) -> PlatformResult {
        not_run(platform, outcome, "why")
    }

    #[test]
    fn the_summary_tells_what_the_cli_exits_with() {
        let skipped = SyncSummary {
            platforms: vec![
                result(Platform::Notion, Outcome::Skipped),
                result(Platform::Feishu, Outcome::Skipped),
            ],
            purged_days: vec![],
        };
        assert!(skipped.nothing_configured());
        assert!(!skipped.any_failed());
        assert!(!skipped.only_busy());
        let mixed = SyncSummary {
            platforms: vec![
                result(Platform::Notion, Outcome::Failed),
                result(Platform::Feishu, Outcome::Skipped),
            ],
            purged_days: vec![],
        };
        assert!(mixed.any_failed() && !mixed.nothing_configured());
        assert_eq!(mixed.line(), "notion: failed (why); feishu: skipped (why)");
        let busy = SyncSummary {
            platforms: vec![
                result(Platform::Notion, Outcome::Busy),
                result(Platform::Feishu, Outcome::Skipped),
            ],
            purged_days: vec![],
        };
        assert!(busy.only_busy());
    }

    #[test]
    fn a_platform_lock_is_exclusive_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let first = lock(dir.path(), Platform::Notion).unwrap();
        assert!(first.is_some());
        assert!(lock(dir.path(), Platform::Notion).unwrap().is_none());
        assert!(lock(dir.path(), Platform::Feishu).unwrap().is_some());
        drop(first);
        assert!(lock(dir.path(), Platform::Notion).unwrap().is_some());
    }
}
