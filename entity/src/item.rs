use sea_orm::{FromJsonQueryResult, entity::prelude::*};
use serde::{Deserialize, Serialize};

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
    /// Who wrote the entry, as the feed names them (JSON array of names).
    #[sea_orm(column_type = "Json")]
    pub authors: Authors,
    /// Media attached to the entry (JSON array of [`Enclosure`]s).
    #[sea_orm(column_type = "Json")]
    pub enclosures: Enclosures,
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

/// An item's author names, in the feed's order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, FromJsonQueryResult)]
pub struct Authors(pub Vec<String>);

impl Authors {
    /// The names as one line, `Ada, Grace` — the reader apps' `author`
    /// (Miniflux joins them so too); empty when there are none.
    pub fn joined(&self) -> String {
        self.0.join(", ")
    }
}

/// An item's enclosures, in the feed's order.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, FromJsonQueryResult)]
pub struct Enclosures(pub Vec<Enclosure>);

/// A file attached to an entry (a podcast episode, a video, an image).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Enclosure {
    /// Absolute http(s) URL.
    pub url: String,
    /// The MIME type the feed gave, if any.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Size in bytes, if the feed gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
}
