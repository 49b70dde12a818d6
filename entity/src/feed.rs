use sea_orm::entity::prelude::*;

/// A subscription of one user to one feed URL.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "feeds")]
pub struct Model {
    #[sea_orm(primary_key)]
    pub id: i64,
    pub user_id: Uuid,
    pub group_id: i64,
    pub name: String,
    /// The feed's URL (what is fetched).
    pub link: String,
    pub site_url: Option<String>,
    pub suspended: bool,
    /// NULL: the global `TRELLIS_PULL_INTERVAL`.
    pub refresh_interval_seconds: Option<i32>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
