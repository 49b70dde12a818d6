use sea_orm::entity::prelude::*;

/// The pull worker's runtime state of one feed.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "feed_fetch_state")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub feed_id: i64,
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub cache_control: Option<String>,
    pub expires_at: Option<DateTimeUtc>,
    pub last_checked_at: Option<DateTimeUtc>,
    /// NULL: due now.
    pub next_check_at: Option<DateTimeUtc>,
    pub last_http_status: Option<i32>,
    pub retry_after_until: Option<DateTimeUtc>,
    pub last_success_at: Option<DateTimeUtc>,
    pub last_error_at: Option<DateTimeUtc>,
    pub last_error: Option<String>,
    pub consecutive_failures: i32,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
