use sea_orm::entity::prelude::*;

/// One asset a mirrored body references, by its stable remote key.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "docs_assets")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub platform: String,
    /// The platform's stable key (never the expiring URL).
    #[sea_orm(primary_key, auto_increment = false)]
    pub remote_key: String,
    /// SHA-256 of the bytes, once downloaded.
    pub sha256: Option<String>,
    /// `assets/<sha[:2]>/<sha><ext>`, once downloaded.
    pub local_path: Option<String>,
    /// `ok` or `pending` (the download failed; retried next run).
    pub status: String,
    /// The URL as the body showed it, kept while pending.
    pub original_url: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
