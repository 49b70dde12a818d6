use sea_orm::entity::prelude::*;

/// An `Idempotency-Key` seen from an owner, and the task it created.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    /// The user id, or `system` for server-initiated work.
    #[sea_orm(primary_key, auto_increment = false)]
    pub owner_key: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    pub payload_hash: String,
    pub task_id: Uuid,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
