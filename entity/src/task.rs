use sea_orm::entity::prelude::*;

/// A unit of background work; the row is the truth about it. Serializes
/// with the column names (new rows reach PostgreSQL as one JSON array).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel, serde::Serialize)]
#[sea_orm(table_name = "tasks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: Uuid,
    pub kind: String,
    pub queue: Queue,
    pub payload: Json,
    pub payload_hash: String,
    pub owner_id: Option<Uuid>,
    pub idempotency_key: Option<String>,
    pub status: Status,
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

/// The `queue` column: which worker pool runs the task. Stored values are
/// this enum's; the runner's `jobs::Queue` is what clients see, so renaming
/// either never changes the other.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, serde::Serialize)]
#[sea_orm(rs_type = "String", db_type = "Text")]
#[serde(rename_all = "lowercase")]
pub enum Queue {
    #[sea_orm(string_value = "short")]
    Short,
    #[sea_orm(string_value = "medium")]
    Medium,
    #[sea_orm(string_value = "long")]
    Long,
}

/// The `status` column: where the task is in its life (see
/// `jobs::TaskStatus` for what each means to clients).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, EnumIter, DeriveActiveEnum, serde::Serialize)]
#[sea_orm(rs_type = "String", db_type = "Text")]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Status {
    #[sea_orm(string_value = "QUEUED")]
    Queued,
    #[sea_orm(string_value = "RUNNING")]
    Running,
    #[sea_orm(string_value = "SUCCEEDED")]
    Succeeded,
    #[sea_orm(string_value = "FAILED")]
    Failed,
    #[sea_orm(string_value = "SUPERSEDED")]
    Superseded,
    #[sea_orm(string_value = "CANCELLED")]
    Cancelled,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
