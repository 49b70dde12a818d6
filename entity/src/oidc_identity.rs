use sea_orm::entity::prelude::*;

/// An identity at an OIDC provider (`iss` + `sub`) linked to an account:
/// signing in with it signs in as that account. Never matched by username
/// or email.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "oidc_identities")]
pub struct Model {
    /// The id_token's `iss`, as the provider wrote it.
    #[sea_orm(primary_key, auto_increment = false)]
    pub issuer: String,
    /// The id_token's `sub`: stable and unique within the issuer.
    #[sea_orm(primary_key, auto_increment = false)]
    pub subject: String,
    pub user_id: Uuid,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::user::Entity",
        from = "Column::UserId",
        to = "super::user::Column::Id",
        on_delete = "Cascade"
    )]
    User,
}

impl Related<super::user::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::User.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}
