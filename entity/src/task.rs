use sea_orm::entity::prelude::*;

/// A unit of background work; the row is the truth about it. Serializes
/// with the column names (new rows reach PostgreSQL as one JSON array).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, serde::Serialize)]
#[sea_orm(table_name = "tasks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub kind: String,
    /// `short`, `medium` or `long`.
    pub queue: String,
    pub payload: Json,
    pub payload_hash: String,
    pub owner_id: Option<Uuid>,
    pub idempotency_key: Option<String>,
    /// `QUEUED`, `RUNNING`, `SUCCEEDED`, `FAILED`, `SUPERSEDED`, `CANCELLED`.
    pub status: String,
    /// The stage running or next to run.
    pub stage: Option<String>,
    /// Stages committed so far; a resumed task starts at this index.
    pub stages_done: i32,
    pub progress: Option<Json>,
    pub result: Option<Json>,
    pub error: Option<String>,
    pub scope: Option<String>,
    pub generation: Option<i64>,
    pub lease_owner: Option<String>,
    pub lease_expires_at: Option<DateTimeUtc>,
    pub heartbeat_at: Option<DateTimeUtc>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub cancel_requested: bool,
    /// Not dispatched before this instant (retry backoff).
    pub run_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub started_at: Option<DateTimeUtc>,
    pub finished_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
