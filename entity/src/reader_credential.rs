use sea_orm::entity::prelude::*;

/// A user's password for the Fever and Google Reader APIs.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "reader_credentials")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub user_id: Uuid,
    /// SHA-256 (hex) of the Fever API key `md5(username:password)`.
    pub fever_key_hash: String,
    /// argon2id hash of the reader password.
    pub password_hash: String,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
