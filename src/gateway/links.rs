//! Linked accounts and OAuth transactions, as stored.
//!
//! A link's credential (Kavita API key, AniList token) is sealed with the
//! server key under a label naming the provider and the user, so a sealed
//! value copied onto another user's row does not open. OAuth states are
//! stored as their SHA-256 only, bound to the user who started them,
//! expire after [`STATE_TTL`], and are deleted by the first callback that
//! presents them — whoever presents them — so each is used at most once.

use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use entity::{gateway_link, gateway_oauth_state};
use sea_orm::{
    ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    sea_query::OnConflict,
};
use secrecy::SecretString;
use uuid::Uuid;

use super::provider::{Account, ProviderKind};
use crate::{
    auth::{
        keys::ServerSecret,
        tokens::{random_token, token_hash},
    },
    db,
    error::{AppError, AppResult},
};

/// How long a started OAuth link may be finished.
pub const STATE_TTL: TimeDelta = TimeDelta::minutes(10);

/// A link's state, as GraphQL shows it.
#[derive(async_graphql::Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum LinkStatus {
    /// The provider accepted the credential when it was last used.
    Linked,
    /// The provider refused the credential (expired, revoked): the user
    /// must link again; events for it wait.
    NeedsRelink,
}

impl LinkStatus {
    fn as_str(self) -> &'static str {
        match self {
            LinkStatus::Linked => "LINKED",
            LinkStatus::NeedsRelink => "NEEDS_RELINK",
        }
    }

    fn parse(text: &str) -> LinkStatus {
        if text == "NEEDS_RELINK" {
            LinkStatus::NeedsRelink
        } else {
            LinkStatus::Linked
        }
    }
}

/// A linked account without its credential.
#[derive(Clone, Debug)]
pub struct Link {
    pub provider: ProviderKind,
    pub status: LinkStatus,
    pub remote_user_id: Option<String>,
    pub remote_name: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub linked_at: DateTime<Utc>,
    pub checked_at: DateTime<Utc>,
}

impl Link {
    fn from_row(row: &gateway_link::Model) -> Option<Link> {
        Some(Link {
            provider: ProviderKind::parse(&row.provider)?,
            status: LinkStatus::parse(&row.status),
            remote_user_id: row.remote_user_id.clone(),
            remote_name: row.remote_name.clone(),
            expires_at: row.expires_at,
            linked_at: row.linked_at,
            checked_at: row.checked_at,
        })
    }
}

/// A started OAuth link: the state to send, and the PKCE verifier when
/// the provider takes one.
pub struct Started {
    pub state: String,
    pub pkce_verifier: Option<String>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Clone)]
pub struct Links {
    db: DatabaseConnection,
    secret: Arc<ServerSecret>,
}

fn seal_label(provider: ProviderKind, user: Uuid) -> String {
    format!("gateway-link/{}/{user}", provider.as_str())
}

impl Links {
    pub fn new(db: DatabaseConnection, secret: Arc<ServerSecret>) -> Self {
        Links { db, secret }
    }

    /// Stores (or replaces) the user's link, its credential sealed.
    pub async fn save(
        &self,
        user: Uuid,
        provider: ProviderKind,
        credential: &str,
        account: &Account,
        expires_at: Option<DateTime<Utc>>,
    ) -> AppResult<Link> {
        let now = Utc::now();
        let sealed = self
            .secret
            .seal(&seal_label(provider, user), credential.as_bytes());
        let row = gateway_link::ActiveModel {
            user_id: Set(user),
            provider: Set(provider.as_str().to_owned()),
            status: Set(LinkStatus::Linked.as_str().to_owned()),
            credential: Set(sealed),
            remote_user_id: Set(account.remote_id.clone()),
            remote_name: Set(account.name.clone()),
            expires_at: Set(expires_at),
            linked_at: Set(now),
            checked_at: Set(now),
        };
        let txn = db::begin_write(&self.db).await?;
        gateway_link::Entity::insert(row)
            .on_conflict(
                OnConflict::columns([gateway_link::Column::UserId, gateway_link::Column::Provider])
                    .update_columns([
                        gateway_link::Column::Status,
                        gateway_link::Column::Credential,
                        gateway_link::Column::RemoteUserId,
                        gateway_link::Column::RemoteName,
                        gateway_link::Column::ExpiresAt,
                        gateway_link::Column::LinkedAt,
                        gateway_link::Column::CheckedAt,
                    ])
                    .to_owned(),
            )
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        self.get(user, provider)
            .await?
            .map(|(link, _)| link)
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("a saved link is missing")))
    }

    /// The user's link with its credential opened.
    pub async fn get(
        &self,
        user: Uuid,
        provider: ProviderKind,
    ) -> AppResult<Option<(Link, SecretString)>> {
        let Some(row) = gateway_link::Entity::find_by_id((user, provider.as_str().to_owned()))
            .one(&self.db)
            .await?
        else {
            return Ok(None);
        };
        let opened = self
            .secret
            .open(&seal_label(provider, user), &row.credential)
            .map_err(|error| {
                AppError::internal(anyhow::anyhow!(
                    "the {} credential of user {user} does not open: {error}",
                    provider.as_str()
                ))
            })?;
        let credential = String::from_utf8(opened)
            .map_err(|_| AppError::internal(anyhow::anyhow!("a sealed credential is not UTF-8")))?;
        let link = Link::from_row(&row)
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("a link names no provider")))?;
        Ok(Some((link, SecretString::from(credential))))
    }

    /// Every link of the user, without credentials.
    pub async fn list(&self, user: Uuid) -> AppResult<Vec<Link>> {
        let rows = gateway_link::Entity::find()
            .filter(gateway_link::Column::UserId.eq(user))
            .order_by_asc(gateway_link::Column::Provider)
            .all(&self.db)
            .await?;
        Ok(rows.iter().filter_map(Link::from_row).collect())
    }

    /// Removes the user's link; whether there was one.
    pub async fn delete(&self, user: Uuid, provider: ProviderKind) -> AppResult<bool> {
        let txn = db::begin_write(&self.db).await?;
        let deleted = gateway_link::Entity::delete_by_id((user, provider.as_str().to_owned()))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(deleted.rows_affected > 0)
    }

    /// Records what the provider said of the credential just now.
    pub async fn mark(
        &self,
        user: Uuid,
        provider: ProviderKind,
        status: LinkStatus,
    ) -> AppResult<()> {
        let txn = db::begin_write(&self.db).await?;
        gateway_link::Entity::update_many()
            .col_expr(
                gateway_link::Column::Status,
                sea_orm::sea_query::Expr::value(status.as_str()),
            )
            .col_expr(
                gateway_link::Column::CheckedAt,
                sea_orm::sea_query::Expr::value(Utc::now()),
            )
            .filter(gateway_link::Column::UserId.eq(user))
            .filter(gateway_link::Column::Provider.eq(provider.as_str()))
            .exec(&*txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    /// Starts an OAuth link for `user`: a fresh state (256 random bits),
    /// and a PKCE verifier when `pkce`.
    pub async fn start(
        &self,
        user: Uuid,
        provider: ProviderKind,
        pkce: bool,
    ) -> AppResult<Started> {
        let now = Utc::now();
        let state = random_token("st");
        let pkce_verifier = pkce.then(|| random_token("pv"));
        let expires_at = now + STATE_TTL;
        let txn = db::begin_write(&self.db).await?;
        // Expired transactions go as new ones come.
        gateway_oauth_state::Entity::delete_many()
            .filter(gateway_oauth_state::Column::ExpiresAt.lte(now))
            .exec(&*txn)
            .await?;
        gateway_oauth_state::Entity::insert(gateway_oauth_state::ActiveModel {
            state_hash: Set(token_hash(&state)),
            user_id: Set(user),
            provider: Set(provider.as_str().to_owned()),
            pkce_verifier: Set(pkce_verifier
                .as_deref()
                .map(|verifier| self.secret.seal(&pkce_label(&state), verifier.as_bytes()))),
            created_at: Set(now),
            expires_at: Set(expires_at),
        })
        .exec(&*txn)
        .await?;
        txn.commit().await?;
        Ok(Started {
            state,
            pkce_verifier,
            expires_at,
        })
    }

    /// Consumes `state` for `user` and `provider`: deleted whatever the
    /// outcome; refused when unknown (never issued, or used already),
    /// expired, started by another user, or for another provider. Returns
    /// the PKCE verifier, if any.
    pub async fn consume(
        &self,
        user: Uuid,
        provider: ProviderKind,
        state: &str,
    ) -> AppResult<Option<String>> {
        let hash = token_hash(state);
        let txn = db::begin_write(&self.db).await?;
        let row = gateway_oauth_state::Entity::find_by_id(hash.clone())
            .one(&*txn)
            .await?;
        if row.is_some() {
            gateway_oauth_state::Entity::delete_by_id(hash)
                .exec(&*txn)
                .await?;
        }
        txn.commit().await?;
        let refused =
            |why: &str| AppError::bad_input("state", format!("the link was refused: {why}"));
        let Some(row) = row else {
            return Err(refused("this state is unknown or was already used"));
        };
        if row.expires_at <= Utc::now() {
            return Err(refused("this state expired; start the link again"));
        }
        if row.user_id != user {
            return Err(AppError::Forbidden("this link was started by another user"));
        }
        if row.provider != provider.as_str() {
            return Err(refused("this state was issued for another provider"));
        }
        row.pkce_verifier
            .map(|sealed| {
                self.secret
                    .open(&pkce_label(state), &sealed)
                    .ok()
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .ok_or_else(|| {
                        AppError::internal(anyhow::anyhow!("a PKCE verifier does not open"))
                    })
            })
            .transpose()
    }
}

fn pkce_label(state: &str) -> String {
    format!("gateway-pkce/{}", token_hash(state))
}

/// The S256 PKCE challenge of a verifier (RFC 7636).
pub fn pkce_challenge(verifier: &str) -> String {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    use sha2::{Digest, Sha256};
    URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pkce_challenge_is_rfc_7636s_example() {
        // RFC 7636, appendix B.
        assert_eq!(
            pkce_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }
}
