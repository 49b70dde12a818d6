use sea_orm::entity::prelude::*;

/// A snapshot of an item's content that outlives the item and its feed.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "bookmarks")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub user_id: Uuid,
    /// Soft link: NULL once the item is gone.
    pub item_id: Option<i64>,
    /// Soft link: NULL once the feed is gone.
    pub feed_id: Option<i64>,
    pub link: String,
    pub title: String,
    pub content: String,
    /// `content` sanitized for serving, when it was stored (NULL: stored
    /// before this was kept; sanitize when served).
    pub content_html: Option<String>,
    pub pub_date: Option<DateTimeUtc>,
    pub feed_name: Option<String>,
    /// The item's authors when it was bookmarked (empty for a link).
    #[sea_orm(column_type = "Json")]
    pub authors: super::item::Authors,
    /// The item's enclosures when it was bookmarked (empty for a link).
    #[sea_orm(column_type = "Json")]
    pub enclosures: super::item::Enclosures,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
