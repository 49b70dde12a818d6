use sea_orm::entity::prelude::*;

/// A link from one mirrored document to another of its platform.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "docs_links")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub platform: String,
    /// The linking document's primary id.
    #[sea_orm(primary_key, auto_increment = false)]
    pub from_id: String,
    /// The URL exactly as the fetched body wrote it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub raw_url: String,
    /// The target's id as the link names it (primary or alias).
    pub target_id: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
