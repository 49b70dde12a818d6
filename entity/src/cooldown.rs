use sea_orm::entity::prelude::*;

/// An upstream host the gateway must not call before `until` (it answered
/// 429 or 503). Holds no token or account data.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "cooldowns")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub host: String,
    pub until: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
