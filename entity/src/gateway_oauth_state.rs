use sea_orm::entity::prelude::*;

/// An OAuth link a user started and has not finished: single use, bound to
/// the user, expiring.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "gateway_oauth_states")]
pub struct Model {
    /// SHA-256 (hex) of the `state` sent to the provider.
    #[sea_orm(primary_key, auto_increment = false)]
    pub state_hash: String,
    pub user_id: Uuid,
    pub provider: String,
    /// The PKCE verifier, sealed; null where the provider has no PKCE.
    pub pkce_verifier: Option<String>,
    pub created_at: DateTimeUtc,
    pub expires_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
