use sea_orm::entity::prelude::*;

/// Events committed together with the change they describe: one event
/// (`aggregate_id`, `owner_id`, `payload`), or, on PostgreSQL, the
/// `task.updated` events of one task write as typed snapshots in a
/// `tasks task_event[]` column that this entity leaves out (it has no
/// SQLite counterpart; `jobs::outbox` reads it with raw SQL).
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub topic: String,
    /// What the event is about; `None` for a row of task snapshots.
    pub aggregate_id: Option<String>,
    /// The user the event concerns; `None` for instance-wide events.
    pub owner_id: Option<Uuid>,
    /// The event's JSON; `None` for a row of task snapshots.
    pub payload: Option<Json>,
    pub created_at: DateTimeUtc,
    /// PostgreSQL: the writing transaction's id (filled by default), by
    /// which the publisher cuts batches. `None` on SQLite.
    pub xact_id: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
