use sea_orm::entity::prelude::*;

/// An event committed together with the change it describes.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "outbox_events")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub topic: String,
    pub aggregate_id: String,
    /// The user the event concerns; `None` for instance-wide events.
    pub owner_id: Option<Uuid>,
    pub payload: Json,
    pub created_at: DateTimeUtc,
    /// PostgreSQL: the writing transaction's id (filled by default), by
    /// which the publisher cuts batches. `None` on SQLite.
    pub xact_id: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
