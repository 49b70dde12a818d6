use sea_orm::entity::prelude::*;

/// An entry of a feed, with its reader's state. (On PostgreSQL the table
/// also has a generated `search` tsvector, read only by search queries.)
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "items")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub user_id: Uuid,
    pub feed_id: i64,
    pub guid: String,
    pub link: Option<String>,
    pub title: String,
    /// As published (unsanitized); sanitized when served.
    pub content: String,
    /// `content` sanitized for serving, when it was stored (NULL: stored
    /// before this was kept; sanitize when served).
    pub content_html: Option<String>,
    /// What full-text search reads: the title and the content's plain
    /// text, each CJK character a word of its own (`feeds::search::indexable`).
    pub search_title: String,
    pub search_body: String,
    /// SHA-256 of title and content, to skip rewriting unchanged items.
    pub content_hash: String,
    /// As the entry dates it (published, else updated); when it arrived if
    /// it has no readable date (`undated`).
    pub pub_date: DateTimeUtc,
    /// The entry had no date (or none that could be read): `pub_date` is
    /// when it arrived.
    pub undated: bool,
    pub unread: bool,
    pub starred: bool,
    /// When Trellis first stored the item (set once): what the reader
    /// apps' time bounds (`before`, `ts`, `ot`/`nt`) compare with.
    pub arrived_at: DateTimeUtc,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
