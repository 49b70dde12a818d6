use sea_orm::entity::prelude::*;

/// The latest generation requested for a scope, and the latest whose work
/// is done (for `resources`: applied and reconciled into the tree).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "task_scopes")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope: String,
    pub generation: i64,
    pub reconciled_generation: i64,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
