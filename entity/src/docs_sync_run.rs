use sea_orm::entity::prelude::*;

/// One platform's sync run: its mode, outcome, stats and changes.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "docs_sync_runs")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub platform: String,
    /// `full` or `incremental`.
    pub mode: String,
    /// Why that mode (`docs::mode::ModeReason`).
    pub reason: String,
    /// `running`, `succeeded` or `failed`.
    pub status: String,
    pub started_at: DateTimeUtc,
    pub finished_at: Option<DateTimeUtc>,
    /// The high-water mark of remote edit times, for the next incremental run.
    pub checkpoint: Option<DateTimeUtc>,
    /// Counters by kind (`docs::engine::RunStats`).
    pub stats: Json,
    /// Ids added, updated, moved and trashed (`docs::engine::RunChanges`).
    pub changes: Json,
    /// Why a failed run failed.
    pub error: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
