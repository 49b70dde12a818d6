//! The sync engine: drives one platform's [`Adapter`] into the mirror tree
//! and the manifest, knowing nothing about the platform (seed 002's
//! `internal/engine`). One call of [`Engine::sync_platform`] is one run of
//! one platform with its own `docs_sync_runs` row; the caller runs
//! platforms separately (in parallel), so one platform's failure never
//! touches another's, then calls [`Engine::finalize_mirror`] once (trash
//! purge, `INDEX.md`).
//!
//! A run, in order:
//!
//! 1. the mode ([`mode::decide`]) from the platform's past runs;
//! 2. the listing: the whole inventory (full), or what changed since the
//!    checkpoint (incremental, placed against the manifest: [`place`]);
//! 3. the tree ([`tree::build`], full runs): orphans, README/leaf duality,
//!    databases, names;
//! 4. each database's rows queried once (incremental: only the databases
//!    with a listed row);
//! 5. every node through the seed's `processNode` order (`pipeline`):
//!    alias registration before any skip → mkdir → container
//!    short-circuit → move/rename follow → pre-fetch skip (edit time
//!    unchanged) → fetch → content hash on the raw Markdown (rows: with
//!    their canonical properties) → links and assets registered, assets
//!    downloaded and replaced in the body → post-fetch skip (hash
//!    unchanged) → frontmatter + atomic write → manifest upsert. A
//!    document that fails counts as an error and the run goes on; refused
//!    credentials or a database failure stop the platform's run;
//! 6. full runs only: delete detection into the trash, behind the 80 %
//!    guard ([`lifecycle`]);
//! 7. link finalization over the whole links table ([`links`]).
//!
//! Pure parts ([`tree`], [`place`], [`lifecycle`], [`links`], [`render`])
//! are apart from the I/O (`pipeline`, [`fsio`], [`manifest`]).

pub mod fsio;
pub mod lifecycle;
pub mod links;
pub mod manifest;
mod pipeline;
pub mod place;
pub mod render;
pub mod tree;

use std::path::{Path, PathBuf};

use chrono::{DateTime, FixedOffset, Utc};
use sea_orm::{DatabaseConnection, DbErr};
use serde::{Deserialize, Serialize};

use super::adapter::{Adapter, AdapterError};
use super::markers::DegradationCounts;
use super::mode::{self, ModeDecision};

/// The platforms' roots, the asset pool and the trash live under it.
pub const INDEX_FILE: &str = "INDEX.md";
/// Where downloads land before they are hashed into the pool.
pub const DOWNLOAD_DIR: &str = ".internal/downloads";

/// What time it is: passed in, so tests control days and retention.
pub trait Clock: Send + Sync {
    /// Now.
    fn now(&self) -> DateTime<Utc>;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// The engine's settings.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// `<data_dir>/mirror`: platform roots (`notion/`, `feishu/`),
    /// `assets/`, `.internal/trash/`, `INDEX.md`.
    pub mirror_root: PathBuf,
    /// `TRELLIS_DOCS_RECONCILE_EVERY_RUNS`.
    pub reconcile_every_runs: u32,
    /// `TRELLIS_DOCS_TRASH_KEEP_DAYS`.
    pub trash_keep_days: u32,
    /// The zone whose calendar days the daily full run and the trash's day
    /// folders follow (the server's local offset).
    pub zone: FixedOffset,
}

impl EngineConfig {
    /// The defaults under `mirror_root`, days in UTC.
    pub fn new(mirror_root: PathBuf) -> Self {
        Self {
            mirror_root,
            reconcile_every_runs: mode::DEFAULT_RECONCILE_EVERY_RUNS,
            trash_keep_days: lifecycle::DEFAULT_TRASH_KEEP_DAYS,
            zone: FixedOffset::east_opt(0).unwrap_or_else(|| unreachable!("zero is in range")),
        }
    }
}

/// Why a platform's run stopped.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The manifest could not be read or written.
    #[error("docs manifest: {0}")]
    Db(#[from] DbErr),
    /// A file of the mirror could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// What failed.
        source: std::io::Error,
    },
    /// The platform failed (listing, or refused credentials).
    #[error("the platform: {0}")]
    Adapter(#[from] AdapterError),
}

impl EngineError {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Self + '_ {
        move |source| Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// Whether the whole platform's run must stop (rather than one document
    /// failing): the manifest is unreachable, or the credentials were
    /// refused, so every later call would fail too.
    fn is_fatal(&self) -> bool {
        matches!(
            self,
            Self::Db(_) | Self::Adapter(AdapterError::Unauthorized)
        )
    }
}

/// A run's counters, stored as the run row's `stats` JSON.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunStats {
    /// `full` or `incremental`.
    pub mode: String,
    /// Why that mode.
    pub reason: String,
    /// Nodes the listing returned.
    pub enumerated: u64,
    /// Documents fetched.
    pub documents_fetched: u64,
    /// Documents not fetched: remote edit time unchanged.
    pub documents_skipped_unedited: u64,
    /// Documents fetched but not written: content hash unchanged.
    pub documents_skipped_unchanged: u64,
    /// Files written (documents and `_index.md`).
    pub documents_written: u64,
    /// Assets downloaded.
    pub assets_downloaded: u64,
    /// Assets found in the manifest, not downloaded again.
    pub assets_reused: u64,
    /// Downloads whose bytes were already in the pool.
    pub assets_deduplicated: u64,
    /// Downloads that failed (retried next run).
    pub assets_pending: u64,
    /// Degradations, by kind.
    pub degradations: DegradationCounts,
    /// Calls made to the adapter (listing, fetches, row queries,
    /// downloads).
    pub adapter_calls: u64,
    /// Documents moved or renamed.
    pub moved: u64,
    /// Documents moved into the trash.
    pub trashed: u64,
    /// Whether the permission-flap guard stopped the deletes.
    pub delete_guard_tripped: bool,
    /// Files whose document links were rewritten at finalization.
    pub links_rewritten: u64,
    /// Documents that failed (the run went on).
    pub errors: u64,
    /// The first failures, for the operator.
    pub failures: Vec<Failure>,
}

/// How many failures a run keeps in its stats.
const MAX_FAILURES_KEPT: usize = 20;

/// One document that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    /// Its primary id.
    pub id: String,
    /// What failed.
    pub error: String,
}

/// What a run changed, by primary id, stored as the run row's `changes`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunChanges {
    /// Documents mirrored for the first time (or back from the trash).
    pub added: Vec<String>,
    /// Documents rewritten.
    pub updated: Vec<String>,
    /// Documents moved or renamed.
    pub moved: Vec<String>,
    /// Documents trashed.
    pub trashed: Vec<String>,
}

/// What one platform's run did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunReport {
    /// Its `docs_sync_runs` row.
    pub run_id: i64,
    /// Its mode and why.
    pub mode: ModeDecision,
    /// Its counters.
    pub stats: RunStats,
    /// Its changes.
    pub changes: RunChanges,
}

/// What the mirror-wide finalization did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FinalizeReport {
    /// The trash's day folders purged.
    pub purged_days: Vec<String>,
    /// Whether `INDEX.md` was rewritten.
    pub index_written: bool,
}

/// Where a platform's run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, async_graphql::Enum)]
#[serde(rename_all = "snake_case")]
#[graphql(name = "DocsSyncPhase")]
pub enum Phase {
    /// Listing the inventory (or what changed since the checkpoint).
    Listing,
    /// Querying databases' rows.
    Databases,
    /// Fetching and writing documents (`done` of `total`).
    Documents,
    /// Delete detection (full runs).
    Deletes,
    /// Rewriting document links.
    Links,
    /// The platform's run ended (`failed` says how).
    Finished,
}

/// One platform's progress, as the engine reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProgressStep {
    /// The platform.
    pub platform: super::adapter::Platform,
    /// Its phase.
    pub phase: Phase,
    /// Nodes processed so far (documents phase on).
    pub done: u64,
    /// Nodes to process (known once listed).
    pub total: u64,
    /// Documents failed so far.
    pub errors: u64,
    /// Whether the run stopped on an error (only with [`Phase::Finished`]).
    pub failed: bool,
}

/// Told of each step of a run: the sync task turns steps into events, the
/// CLI into lines on stderr. Called on the run's task, so it must be cheap
/// (throttle there, not here).
pub trait Progress: Send + Sync {
    /// A step happened.
    fn step(&self, step: ProgressStep);
}

/// Hears nothing.
struct Silent;

impl Progress for Silent {
    fn step(&self, _step: ProgressStep) {}
}

/// The engine over one database and one mirror root.
pub struct Engine<'a> {
    db: &'a DatabaseConnection,
    config: &'a EngineConfig,
    clock: &'a dyn Clock,
    progress: &'a dyn Progress,
}

impl<'a> Engine<'a> {
    /// An engine writing into `config.mirror_root` and the manifest in `db`.
    pub fn new(db: &'a DatabaseConnection, config: &'a EngineConfig, clock: &'a dyn Clock) -> Self {
        Self {
            db,
            config,
            clock,
            progress: &Silent,
        }
    }

    /// The same engine, telling `progress` of each step.
    pub fn with_progress(mut self, progress: &'a dyn Progress) -> Self {
        self.progress = progress;
        self
    }

    /// One run of `adapter`'s platform; `full_requested` forces a full run.
    /// The run's row records its outcome either way.
    pub async fn sync_platform(
        &self,
        adapter: &dyn Adapter,
        full_requested: bool,
    ) -> Result<RunReport, EngineError> {
        pipeline::sync_platform(self, adapter, full_requested).await
    }

    /// The mirror-wide finalization, after every platform's run: trash days
    /// past the retention purged, `INDEX.md` regenerated.
    pub async fn finalize_mirror(&self) -> Result<FinalizeReport, EngineError> {
        pipeline::finalize_mirror(self).await
    }
}
