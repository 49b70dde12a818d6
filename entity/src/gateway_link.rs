use sea_orm::entity::prelude::*;

/// A user's account at a provider (Kavita, AniList), its credential sealed
/// with the server key.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_links")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub provider: String,
    /// `LINKED` or `NEEDS_RELINK`.
    pub status: String,
    /// The API key or OAuth token, sealed (`ServerSecret::seal`). Never
    /// returned, never logged.
    pub credential: String,
    /// The account's id at the provider (AniList's `Viewer.id`).
    pub remote_user_id: Option<String>,
    /// The account's name at the provider, for display.
    pub remote_name: Option<String>,
    /// When the credential expires, where the provider says.
    pub expires_at: Option<DateTimeUtc>,
    pub linked_at: DateTimeUtc,
    pub checked_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
