use sea_orm::entity::prelude::*;

/// A node of the derived tree.
#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "nodes")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub class: String,
    #[sea_orm(unique)]
    pub business_key: String,
    pub parent_id: Option<i64>,
    pub path: String,
    pub depth: i32,
    pub position_token: String,
    pub properties: Json,
    /// Attribute statistics over the node's resources (see nodes::engine::Partials).
    pub partials: Json,
    pub status: i32,
    pub aggregated_status: i32,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
