//! The password mobile reader apps use (Fever, Google Reader API): set by
//! the user, separate from the account password. Fever clients send
//! `md5(username:password)` as their API key on every request, so it is
//! looked up by its HMAC under the server-held secret (`auth::keys`) and
//! never stored; the password itself is kept
//! as an argon2id hash for the Google Reader API's login.

use std::sync::Arc;

use chrono::Utc;
use entity::{reader_credential, user};
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

/// The reader password and the sign-ins it allows: the only place that
/// reads or writes `reader_credentials`.
#[derive(Clone)]
pub struct ReaderAccounts {
    db: DatabaseConnection,
    auth: Arc<AuthService>,
}

impl ReaderAccounts {
    pub fn new(db: DatabaseConnection, auth: Arc<AuthService>) -> Self {
        ReaderAccounts { db, auth }
    }

    pub fn auth(&self) -> &AuthService {
        &self.auth
    }

    /// Sets (or replaces) the viewer's reader password (see [`set_password`]).
    pub async fn set_password(
        &self,
        viewer: &Viewer,
        current: Option<SecretString>,
        new: SecretString,
        meta: &RequestMeta,
    ) -> AppResult<()> {
        set_password(&self.db, &self.auth, viewer, current, new, meta).await
    }

    /// Turns the reader APIs off for the viewer; returns whether they were on.
    pub async fn clear(&self, viewer: &Viewer) -> AppResult<bool> {
        Ok(reader_credential::Entity::delete_by_id(viewer.user_id)
            .exec(&self.db)
            .await?
            .rows_affected
            > 0)
    }

    pub async fn enabled(&self, user: Uuid) -> AppResult<bool> {
        Ok(reader_credential::Entity::find_by_id(user)
            .one(&self.db)
            .await?
            .is_some())
    }

    /// The user a Fever API key belongs to (see [`fever_user`]).
    pub async fn fever_user(&self, api_key: &str) -> AppResult<Option<Uuid>> {
        fever_user(&self.db, &self.auth, api_key).await
    }

    /// The Google Reader token for a username and reader password, or
    /// `None` when they do not match. An unknown user or one without a
    /// reader password costs the same argon2 work as a wrong password, so
    /// timing does not tell which usernames exist. Unthrottled: the caller
    /// runs it under the login limiter.
    pub async fn google_login(&self, username: &str, password: &str) -> AppResult<Option<String>> {
        let user = user::Entity::find()
            .filter(user::Column::Username.eq(username.trim().to_lowercase()))
            .one(&self.db)
            .await?;
        let credential = match &user {
            Some(user) => {
                reader_credential::Entity::find_by_id(user.id)
                    .one(&self.db)
                    .await?
            }
            None => None,
        };
        let stored = credential.as_ref().map(|c| c.password_hash.as_str());
        let verified = self.auth.check_password(password, stored).await?;
        Ok(match (user, credential, verified) {
            (Some(user), Some(credential), true) => {
                Some(self.google_token(user.id, &credential.password_hash))
            }
            _ => None,
        })
    }

    /// A Google Reader token: the user id and a MAC under the server-held
    /// secret of the id and the credential's stored hash (its argon2 salt
    /// makes it per credential), so setting or clearing the password
    /// revokes it and a database dump alone cannot forge it.
    fn google_token(&self, user: Uuid, password_hash: &str) -> String {
        let tag = self
            .auth
            .mac("greader", &[user.as_bytes(), password_hash.as_bytes()]);
        format!("{}/{tag}", user.simple())
    }

    /// The user a Google Reader token belongs to.
    pub async fn google_user(&self, token: &str) -> AppResult<Uuid> {
        let (user, tag) = token
            .split_once('/')
            .ok_or(AppError::Unauthenticated("invalid token"))?;
        let user = Uuid::parse_str(user).map_err(|_| AppError::Unauthenticated("invalid token"))?;
        let credential = reader_credential::Entity::find_by_id(user)
            .one(&self.db)
            .await?
            .ok_or(AppError::Unauthenticated("invalid token"))?;
        let expected = self.google_token(user, &credential.password_hash);
        let presented = format!("{}/{tag}", user.simple());
        // Compare in constant time: the tag is a secret.
        if crate::digest::constant_time_eq(expected.as_bytes(), presented.as_bytes()) {
            Ok(user)
        } else {
            Err(AppError::Unauthenticated("invalid token"))
        }
    }

    /// The user's name, for the apps' account screens.
    pub async fn username(&self, user: Uuid) -> AppResult<String> {
        Ok(self
            .auth
            .user(user)
            .await?
            .map(|user| user.username)
            .unwrap_or_default())
    }
}

/// Sets (or replaces) the viewer's reader password. The account password
/// must be given (a stolen session alone cannot plant a lasting key, and
/// wrong guesses count as failed logins), and
/// the reader password must differ from it (Fever exposes it as an MD5).
async fn set_password(
    db: &DatabaseConnection,
    auth: &AuthService,
    viewer: &Viewer,
    current: Option<SecretString>,
    new: SecretString,
    meta: &RequestMeta,
) -> AppResult<()> {
    password::validate_new("password", new.expose_secret())?;
    auth.prove_owner(
        viewer,
        current.as_ref().map(ExposeSecret::expose_secret),
        meta,
    )
    .await?;
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

/// What is stored of a Fever key: an HMAC under the server-held secret,
/// so a database dump alone allows no offline guessing of the password.
fn stored_fever_key(auth: &AuthService, key: &str) -> String {
    auth.mac("fever", &[key.as_bytes()])
}

/// The user a Fever API key belongs to. A key stored by an older version
/// (an unkeyed SHA-256) is found too, and rewritten as the HMAC.
async fn fever_user(
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
