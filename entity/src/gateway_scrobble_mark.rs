use sea_orm::entity::prelude::*;

/// The last value the scrobbler admitted for a user's media and action.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_scrobble_marks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    #[sea_orm(primary_key, auto_increment = false)]
    pub media_id: String,
    /// `PROGRESS`, `RATING`, `WANT_TO_READ`.
    #[sea_orm(primary_key, auto_increment = false)]
    pub action: String,
    /// The action's value as JSON text.
    pub value: String,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
