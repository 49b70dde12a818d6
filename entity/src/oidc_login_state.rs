use sea_orm::entity::prelude::*;

/// An OIDC authorization the browser was sent to and has not come back
/// from: single use (the callback deletes it), ten minutes from
/// `created_at`.
#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "oidc_login_states")]
pub struct Model {
    /// SHA-256 (hex) of the `state` sent to the provider.
    #[sea_orm(primary_key, auto_increment = false)]
    pub state_hash: String,
    /// The `nonce` the id_token must carry.
    pub nonce: String,
    /// The PKCE verifier, sealed with the server key.
    pub pkce_verifier: String,
    /// `login` or `link`.
    pub purpose: String,
    /// For `link`: the account the identity is attached to.
    pub user_id: Option<Uuid>,
    /// Where a finished login sends the browser (a local path).
    pub return_to: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}
