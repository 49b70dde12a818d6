use sea_orm::entity::prelude::*;

/// A secondary id of a mirrored node (Feishu `node_token`, Notion's undashed id).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "docs_aliases")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub platform: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub alias_id: String,
    pub primary_id: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
