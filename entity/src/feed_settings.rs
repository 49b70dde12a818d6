use sea_orm::entity::prelude::*;

/// A user's reader preferences; NULL means never chosen (the default applies).
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "feed_settings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    /// Delete read, unstarred, unbookmarked items older than this many days.
    pub retention_days: Option<i32>,
    pub unread_only: Option<bool>,
    pub oldest_first: Option<bool>,
    pub mark_read_on_scroll: Option<bool>,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
