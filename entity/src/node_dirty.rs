use sea_orm::entity::prelude::*;

/// Reconciliation work owed on a node: its properties, its aggregated status.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "node_dirty")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub node_id: i64,
    pub props: bool,
    pub status: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
