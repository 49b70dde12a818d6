use sea_orm::entity::prelude::*;

/// A feed's icon, as the pull worker fetched it (at most 64 KiB of a
/// sniffed raster image type).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "feed_icons")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub feed_id: i64,
    /// The type sniffed from the bytes (`image/png`, …), never the server's claim.
    pub mime_type: String,
    pub data: Vec<u8>,
    /// SHA-256 of `data`, hex: the ETag it is served with.
    pub hash: String,
    pub fetched_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
