use sea_orm::entity::prelude::*;

/// The tree's one state row: the last request generation whose mutation
/// was applied, and the digest of the node configuration it follows.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "node_tree")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: i32,
    pub applied_generation: i64,
    pub config_digest: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
