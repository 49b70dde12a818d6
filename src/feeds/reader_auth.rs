//! The password mobile reader apps use (Fever, Google Reader API): set by
//! the user, separate from the account password. Fever clients send
//! `md5(username:password)` as their API key on every request, so it is
//! looked up by its HMAC under the server-held secret (`auth::keys`) and
//! never stored; the password itself is kept
//! as an argon2id hash for the Google Reader API's login.

use chrono::Utc;
use entity::reader_credential;
use md5::{Digest, Md5};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set, sea_query::OnConflict,
};
use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use crate::{
    auth::{Viewer, password, service::AuthService},
    digest::sha256_hex,
    error::{AppError, AppResult},
    http::client::RequestMeta,
};

/// The Fever API key for `username` and `password`: `md5("username:password")`, hex.
pub fn fever_key(username: &str, password: &str) -> String {
    let digest = Md5::digest(format!("{username}:{password}").as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// Sets (or replaces) the viewer's reader password. The account password
/// must be given (a stolen session alone cannot plant a lasting key, and
/// wrong guesses count as failed logins), and
/// the reader password must differ from it (Fever exposes it as an MD5).
pub async fn set_password(
    db: &DatabaseConnection,
    auth: &AuthService,
    viewer: &Viewer,
    current: SecretString,
    new: SecretString,
    meta: &RequestMeta,
) -> AppResult<()> {
    password::validate_new("password", new.expose_secret())?;
    if !auth
        .verify_account_password(viewer, current.expose_secret(), meta)
        .await?
    {
        return Err(AppError::bad_input(
            "currentPassword",
            "current password is wrong",
        ));
    }
    if auth
        .is_account_password(viewer.user_id, new.expose_secret())
        .await?
    {
        return Err(AppError::bad_input(
            "password",
            "use a password other than your account password: reader apps send it as an MD5 hash",
        ));
    }
    let key_hash = stored_fever_key(auth, &fever_key(&viewer.username, new.expose_secret()));
    let password_hash = auth.hash_password(new).await?;
    let now = Utc::now();
    reader_credential::Entity::insert(reader_credential::ActiveModel {
        user_id: Set(viewer.user_id),
        fever_key_hash: Set(key_hash),
        password_hash: Set(password_hash),
        created_at: Set(now),
        updated_at: Set(now),
    })
    .on_conflict(
        OnConflict::column(reader_credential::Column::UserId)
            .update_columns([
                reader_credential::Column::FeverKeyHash,
                reader_credential::Column::PasswordHash,
                reader_credential::Column::UpdatedAt,
            ])
            .to_owned(),
    )
    .exec_without_returning(db)
    .await?;
    Ok(())
}

/// Turns the reader APIs off for the viewer; returns whether they were on.
pub async fn clear(db: &DatabaseConnection, viewer: &Viewer) -> AppResult<bool> {
    Ok(reader_credential::Entity::delete_by_id(viewer.user_id)
        .exec(db)
        .await?
        .rows_affected
        > 0)
}

pub async fn enabled(db: &DatabaseConnection, user: Uuid) -> AppResult<bool> {
    Ok(reader_credential::Entity::find_by_id(user)
        .one(db)
        .await?
        .is_some())
}

/// What is stored of a Fever key: an HMAC under the server-held secret,
/// so a database dump alone allows no offline guessing of the password.
fn stored_fever_key(auth: &AuthService, key: &str) -> String {
    auth.mac("fever", &[key.as_bytes()])
}

/// The user a Fever API key belongs to. A key stored by an older version
/// (an unkeyed SHA-256) is found too, and rewritten as the HMAC.
pub async fn fever_user(
    db: &DatabaseConnection,
    auth: &AuthService,
    api_key: &str,
) -> AppResult<Option<Uuid>> {
    let key = api_key.trim().to_ascii_lowercase();
    if key.len() != 32 || !key.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(None);
    }
    let stored = stored_fever_key(auth, &key);
    let by = |hash: String| {
        reader_credential::Entity::find()
            .filter(reader_credential::Column::FeverKeyHash.eq(hash))
            .one(db)
    };
    if let Some(credential) = by(stored.clone()).await? {
        return Ok(Some(credential.user_id));
    }
    let Some(legacy) = by(sha256_hex(&[&key])).await? else {
        return Ok(None);
    };
    reader_credential::Entity::update_many()
        .col_expr(
            reader_credential::Column::FeverKeyHash,
            sea_orm::sea_query::Expr::value(stored),
        )
        .filter(reader_credential::Column::UserId.eq(legacy.user_id))
        .exec(db)
        .await?;
    Ok(Some(legacy.user_id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fever_key_is_md5_of_username_colon_password() {
        assert_eq!(
            fever_key("ada", "correct horse"),
            "833114a2be47f2d2054c431d1ebb2a0e"
        );
        assert_eq!(fever_key("", ""), "853ae90f0351324bd73ea615e6487517");
    }
}

/// What the reader APIs' routes (Fever, Google Reader) read.
#[derive(Clone)]
pub struct ReaderState {
    pub web: crate::http::Web,
    pub db: sea_orm::DatabaseConnection,
    pub feeds: super::service::FeedsService,
    pub discoverer: super::discover::Discoverer,
}

impl ReaderState {
    pub fn auth(&self) -> &crate::auth::service::AuthService {
        &self.web.auth
    }
}

impl axum::extract::FromRef<ReaderState> for crate::http::Web {
    fn from_ref(state: &ReaderState) -> Self {
        state.web.clone()
    }
}
