use sea_orm::entity::prelude::*;

/// Which AniList media a user's Kavita series is, for scrobbling.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_title_links")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    /// Kavita's series id.
    #[sea_orm(primary_key, auto_increment = false)]
    pub series_id: String,
    pub series_name: String,
    /// AniList's media id; null when nothing was found to propose.
    pub media_id: Option<String>,
    pub media_title: Option<String>,
    /// `CONFIRMED` or `PROPOSED`.
    pub state: String,
    /// `WEB_LINK` (the series' metadata), `SEARCH` (a title search) or
    /// `USER`.
    pub source: String,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
