use sea_orm::entity::prelude::*;

/// One mirrored node of a docs platform (the manifest's main ledger).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "docs_documents")]
pub struct Model {
    /// `notion` or `feishu`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub platform: String,
    /// The platform's primary id.
    #[sea_orm(primary_key, auto_increment = false)]
    pub remote_id: String,
    /// The second id resolving to the same node (also in `docs_aliases`).
    pub alt_id: Option<String>,
    /// `page`, `database`, `row`, … (`docs::adapter::NodeKind`).
    pub kind: String,
    pub parent_remote_id: Option<String>,
    pub title: String,
    pub url: Option<String>,
    /// The remote last edit the file was written from.
    pub edited_at: Option<DateTimeUtc>,
    /// SHA-256 of the raw Markdown (rows: with their canonical properties).
    pub content_hash: Option<String>,
    /// From the mirror root, `/`-separated; under `.internal/trash/` once trashed.
    pub local_path: String,
    /// `active`, `pending_assets` or `trashed`.
    pub status: String,
    pub trashed_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
