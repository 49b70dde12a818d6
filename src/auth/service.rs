//! The authentication service: every state change of users and sessions.

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Instant,
};

use chrono::{DateTime, Utc};
use entity::{refresh_token, session, user};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    Set, SqlErr, sea_query::Expr,
};
use secrecy::{ExposeSecret, SecretString};
use uuid::Uuid;

use super::{
    Role, Viewer,
    keys::ServerSecret,
    normalize_username,
    password::{self, Hashing},
    ratelimit::{Attempt, LoginLimiter, LoginPolicy, Realm, Reservation},
    revocation::{Ended, Revocations},
    tokens::{AccessTokenError, AccessTokenKeys, random_token, token_hash},
};
use crate::{
    config::{Config, CookieSecure},
    error::{AppError, AppResult},
    graphql::pagination::{KeyValue, Keyset, KeysetConnection, PageRequest, paginate},
    http::client::RequestMeta,
};

/// How recent a session must be to stand in for the password of an
/// account that has none (see [`AuthService::prove_owner`]).
pub const FRESH_SIGN_IN: chrono::TimeDelta = chrono::TimeDelta::minutes(10);

/// What a successful login or refresh hands back.
#[derive(Debug)]
pub struct IssuedTokens {
    pub user: user::Model,
    pub access_token: String,
    pub access_expires_at: DateTime<Utc>,
    pub refresh_token: String,
    /// The session-cookie secret; only a login issues one.
    pub session_secret: Option<String>,
}

#[derive(Debug)]
pub struct AuthService {
    db: DatabaseConnection,
    keys: AccessTokenKeys,
    secret: Arc<ServerSecret>,
    limiter: LoginLimiter,
    hashing: Hashing,
    access_ttl: chrono::Duration,
    session_ttl: chrono::Duration,
    cookie_secure: CookieSecure,
    revocations: Revocations,
    /// Off with `TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN` (set once at start-up).
    password_login: AtomicBool,
}

impl AuthService {
    /// Builds the service, loading (or creating once) the server secret.
    pub async fn new(db: DatabaseConnection, config: &Config) -> anyhow::Result<Self> {
        let secret = Arc::new(ServerSecret::load(config)?);
        Ok(AuthService {
            db,
            keys: AccessTokenKeys::new(secret.bytes())?,
            secret,
            limiter: LoginLimiter::new(LoginPolicy {
                max_attempts: config.login_max_attempts,
                fresh_address_attempts: config.login_fresh_address_attempts,
                window: std::time::Duration::from_secs(config.login_window),
                block: std::time::Duration::from_secs(config.login_block),
            }),
            hashing: Hashing::new(config.hashing_settings()).await?,
            access_ttl: chrono::Duration::from_std(config.access_token_ttl())?,
            session_ttl: chrono::Duration::from_std(config.session_ttl())?,
            cookie_secure: config.cookie_secure,
            revocations: Revocations::default(),
            password_login: AtomicBool::new(true),
        })
    }

    pub fn session_ttl(&self) -> std::time::Duration {
        self.session_ttl.to_std().unwrap_or_default()
    }

    /// An account by id.
    pub async fn user(&self, id: Uuid) -> AppResult<Option<user::Model>> {
        Ok(user::Entity::find_by_id(id).one(&self.db).await?)
    }

    /// Every account, by username, as a connection.
    pub async fn user_connection<N: async_graphql::OutputType>(
        &self,
        page: PageRequest,
        node: impl Fn(user::Model) -> N,
    ) -> AppResult<KeysetConnection<N>> {
        paginate(
            &self.db,
            user::Entity::find(),
            Keyset::ascending(vec![user::Column::Username]),
            page,
            |u| vec![KeyValue::Text(u.username.clone())],
            node,
        )
        .await
    }

    /// When the session cookie is marked `Secure` (`TRELLIS_COOKIE_SECURE`).
    pub fn cookie_secure(&self) -> CookieSecure {
        self.cookie_secure
    }

    /// Refuses [`Self::login`] from now on: accounts sign in through the
    /// identity provider only (`TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN`).
    pub fn disable_password_login(&self) {
        self.password_login.store(false, Ordering::Relaxed);
    }

    /// Whether [`Self::login`] (username and password) is accepted.
    pub fn password_login_enabled(&self) -> bool {
        self.password_login.load(Ordering::Relaxed)
    }

    /// Checks a username and password and opens a session.
    ///
    /// Blocked callers are refused before any password work; unknown users
    /// cost the same argon2 verification as known ones. `FORBIDDEN` when
    /// password login is disabled.
    pub async fn login(
        &self,
        username: &str,
        password: &str,
        meta: &RequestMeta,
    ) -> AppResult<IssuedTokens> {
        if !self.password_login_enabled() {
            return Err(AppError::Forbidden(
                "password login is disabled on this instance; sign in with the identity provider",
            ));
        }
        let key_name = username.trim().to_lowercase();
        let reservation = self.reserve(&Attempt {
            realm: Realm::Account,
            ip: meta.client_ip,
            username: Some(&key_name),
        })?;
        let checked = async {
            let user = match normalize_username("username", username) {
                Ok(name) => {
                    user::Entity::find()
                        .filter(user::Column::Username.eq(name))
                        .one(&self.db)
                        .await?
                }
                Err(_) => None,
            };
            let stored = user.as_ref().map(|u| u.password_hash.as_str());
            let matches = self.hashing.verify(password, stored).await?;
            AppResult::Ok(user.filter(|_| matches))
        }
        .await;
        let user = match checked {
            Ok(Some(user)) => user,
            Ok(None) => {
                metrics::counter!("trellis_login_attempts_total", "outcome" => "failure")
                    .increment(1);
                tracing::info!(client_ip = %meta.client_ip, "login failed");
                return Err(AppError::Unauthenticated("invalid username or password"));
            }
            Err(error) => {
                self.limiter.refund(reservation);
                return Err(error);
            }
        };
        self.limiter.succeeded(reservation);
        metrics::counter!("trellis_login_attempts_total", "outcome" => "success").increment(1);
        self.open_session(user, meta).await
    }

    /// Opens a session for an account whose credentials were just checked
    /// (a password login, or an OIDC login): the session row, its first
    /// refresh token, an access token and the session-cookie secret.
    pub async fn open_session(
        &self,
        user: user::Model,
        meta: &RequestMeta,
    ) -> AppResult<IssuedTokens> {
        let now = Utc::now();
        let session_secret = random_token("trs");
        let refresh = random_token("trt");
        let session_id = Uuid::now_v7();
        let txn = crate::db::begin_write(&self.db).await?;
        session::ActiveModel {
            id: Set(session_id),
            user_id: Set(user.id),
            secret_hash: Set(token_hash(&session_secret)),
            created_at: Set(now),
            last_used_at: Set(now),
            expires_at: Set(now + self.session_ttl),
            revoked_at: Set(None),
            revoked_reason: Set(None),
            user_agent: Set(meta.user_agent.clone()),
            client_ip: Set(Some(meta.client_ip.to_string())),
        }
        .insert(&txn)
        .await?;
        self.insert_refresh_token(&txn, session_id, &refresh, now)
            .await?;
        txn.commit().await?;
        tracing::info!(user_id = %user.id, session_id = %session_id, "login succeeded");

        self.issue(user, session_id, refresh, Some(session_secret), now)
    }

    /// Runs another credential check (the reader APIs' logins, an OIDC
    /// callback) under the login throttle, with the budget of its own
    /// `realm`: the attempt is
    /// counted before `check` runs (a blocked caller is refused first);
    /// `None` (wrong credentials) leaves it counted as a failure.
    pub async fn throttled<T>(
        &self,
        realm: Realm,
        username: Option<&str>,
        meta: &RequestMeta,
        check: impl Future<Output = AppResult<Option<T>>>,
    ) -> AppResult<Option<T>> {
        let name = username.map(|u| u.trim().to_lowercase());
        let reservation = self.reserve(&Attempt {
            realm,
            ip: meta.client_ip,
            username: name.as_deref(),
        })?;
        match check.await {
            Ok(Some(found)) => {
                self.limiter.succeeded(reservation);
                Ok(Some(found))
            }
            Ok(None) => {
                tracing::info!(client_ip = %meta.client_ip, realm = ?realm, "login failed");
                Ok(None)
            }
            Err(error) => {
                self.limiter.refund(reservation);
                Err(error)
            }
        }
    }

    /// Counts an attempt before any password work, or refuses a blocked caller.
    fn reserve(&self, attempt: &Attempt<'_>) -> AppResult<Reservation> {
        self.limiter
            .reserve(attempt, Instant::now())
            .map_err(|wait| {
                metrics::counter!("trellis_login_attempts_total", "outcome" => "rate_limited")
                    .increment(1);
                AppError::RateLimited {
                    retry_after: wait.as_secs_f64().ceil() as u64,
                }
            })
    }

    /// A MAC of `parts` under the server-held secret, for `label`'s use
    /// only (reader-API tokens and keys): what a database dump cannot forge.
    pub fn mac(&self, label: &str, parts: &[&[u8]]) -> String {
        self.secret.mac_hex(label, parts)
    }

    /// The server-held secret, for the domains' secrets at rest
    /// (`ServerSecret::seal`) and signed state files.
    pub fn server_secret(&self) -> Arc<ServerSecret> {
        self.secret.clone()
    }

    /// Whether `candidate` matches `stored`, a decoy standing in for a
    /// missing hash; bounded like every argon2 run (`RATE_LIMITED` when
    /// too many are in flight).
    pub async fn check_password(&self, candidate: &str, stored: Option<&str>) -> AppResult<bool> {
        self.hashing.verify(candidate, stored).await
    }

    /// The PHC string of a new password (bounded like [`Self::check_password`]).
    pub async fn hash_password(&self, password: SecretString) -> AppResult<String> {
        self.hashing.hash(password).await
    }

    /// Whether `candidate` is the viewer's account password, asked by a
    /// signed-in caller to prove they know it (`setReaderPassword`,
    /// `changePassword`): throttled like a login of the viewer's username
    /// from the caller's address, so a stolen session cannot guess it.
    async fn verify_account_password(
        &self,
        viewer: &Viewer,
        candidate: &str,
        meta: &RequestMeta,
    ) -> AppResult<bool> {
        let reservation = self.reserve(&Attempt {
            realm: Realm::Account,
            ip: meta.client_ip,
            username: Some(&viewer.username),
        })?;
        match self.is_account_password(viewer.user_id, candidate).await {
            Ok(true) => {
                self.limiter.succeeded(reservation);
                Ok(true)
            }
            Ok(false) => {
                tracing::info!(user_id = %viewer.user_id, client_ip = %meta.client_ip, "account password check failed");
                Ok(false)
            }
            Err(error) => {
                self.limiter.refund(reservation);
                Err(error)
            }
        }
    }

    /// Proves the signed-in caller is the account's owner before a change
    /// that outlives the session (`changePassword`, `setReaderPassword`):
    /// by the account password (`current`, throttled like a login), or —
    /// for an account that has none (created by an OIDC login) — by a
    /// session opened within the last [`FRESH_SIGN_IN`], so a stolen
    /// session of such an account cannot plant a lasting credential.
    pub async fn prove_owner(
        &self,
        viewer: &Viewer,
        current: Option<&str>,
        meta: &RequestMeta,
    ) -> AppResult<()> {
        let account = self
            .user(viewer.user_id)
            .await?
            .ok_or(AppError::Unauthenticated("account no longer exists"))?;
        if account.password_hash == password::NO_PASSWORD {
            let opened = session::Entity::find_by_id(viewer.session_id)
                .one(&self.db)
                .await?
                .map(|session| session.created_at);
            return match opened {
                Some(at) if Utc::now() - at <= FRESH_SIGN_IN => Ok(()),
                _ => Err(AppError::Forbidden(
                    "this account signs in through its identity provider: \
                     sign in again there, then retry within ten minutes",
                )),
            };
        }
        let Some(current) = current else {
            return Err(AppError::bad_input(
                "currentPassword",
                "your current password is required",
            ));
        };
        if !self.verify_account_password(viewer, current, meta).await? {
            return Err(AppError::bad_input(
                "currentPassword",
                "current password is wrong",
            ));
        }
        Ok(())
    }

    /// Whether `candidate` is the user's account password, unthrottled:
    /// only for callers that already proved they know it.
    pub async fn is_account_password(&self, user_id: Uuid, candidate: &str) -> AppResult<bool> {
        let stored = user::Entity::find_by_id(user_id)
            .one(&self.db)
            .await?
            .map(|user| user.password_hash)
            .ok_or(AppError::Unauthenticated("account no longer exists"))?;
        self.hashing.verify(candidate, Some(&stored)).await
    }

    /// Rotates a refresh token: the presented token is spent and a new one
    /// issued. Presenting an already-spent token revokes the whole session.
    pub async fn refresh(&self, presented: &str) -> AppResult<IssuedTokens> {
        const INVALID: AppError = AppError::Unauthenticated("invalid or expired refresh token");
        let now = Utc::now();
        let Some((token, Some(session))) = refresh_token::Entity::find()
            .filter(refresh_token::Column::TokenHash.eq(token_hash(presented)))
            .find_also_related(session::Entity)
            .one(&self.db)
            .await?
        else {
            return Err(INVALID);
        };
        if session.revoked_at.is_some() || session.expires_at <= now {
            return Err(INVALID);
        }
        if token.used_at.is_some() {
            self.revoke_for_reuse(session.id).await?;
            return Err(AppError::Unauthenticated(
                "refresh token was already used; the session has been revoked",
            ));
        }
        if token.expires_at <= now {
            return Err(INVALID);
        }

        let txn = crate::db::begin_write(&self.db).await?;
        // Spend the token only if nobody else has: a concurrent refresh with
        // the same token is reuse too.
        let spent = refresh_token::Entity::update_many()
            .col_expr(refresh_token::Column::UsedAt, Expr::value(now))
            .filter(refresh_token::Column::Id.eq(token.id))
            .filter(refresh_token::Column::UsedAt.is_null())
            .exec(&txn)
            .await?;
        if spent.rows_affected != 1 {
            txn.rollback().await?;
            self.revoke_for_reuse(session.id).await?;
            return Err(AppError::Unauthenticated(
                "refresh token was already used; the session has been revoked",
            ));
        }
        let refresh = random_token("trt");
        self.insert_refresh_token(&txn, session.id, &refresh, now)
            .await?;
        // Refreshing keeps an active session alive (sliding expiry).
        session::Entity::update_many()
            .col_expr(
                session::Column::ExpiresAt,
                Expr::value(now + self.session_ttl),
            )
            .col_expr(session::Column::LastUsedAt, Expr::value(now))
            .filter(session::Column::Id.eq(session.id))
            .exec(&txn)
            .await?;
        txn.commit().await?;

        let user = user::Entity::find_by_id(session.user_id)
            .one(&self.db)
            .await?
            .ok_or(INVALID)?;
        self.issue(user, session.id, refresh, None, now)
    }

    /// Ends a session: its cookie, refresh tokens and access tokens stop working.
    pub async fn logout(&self, viewer: &Viewer) -> AppResult<()> {
        self.revoke_session(viewer.session_id, "logout").await?;
        tracing::info!(user_id = %viewer.user_id, session_id = %viewer.session_id, "logged out");
        Ok(())
    }

    /// Resolves a bearer access token. Invalid, expired and revoked tokens are
    /// `UNAUTHENTICATED` with a message saying which.
    pub async fn authenticate_bearer(&self, token: &str) -> AppResult<Viewer> {
        let claims = self.keys.verify(token).map_err(|error| match error {
            AccessTokenError::Expired => AppError::Unauthenticated("access token expired"),
            AccessTokenError::Invalid => AppError::Unauthenticated("invalid access token"),
        })?;
        let found = session::Entity::find_by_id(claims.sid)
            .find_also_related(user::Entity)
            .one(&self.db)
            .await?;
        match found {
            Some((session, Some(user)))
                if session.user_id == claims.sub && is_live(&session, Utc::now()) =>
            {
                Ok(viewer(user, session.id))
            }
            _ => Err(AppError::Unauthenticated("session has ended")),
        }
    }

    /// Resolves a session cookie; a stale cookie is simply anonymous.
    pub async fn authenticate_cookie(&self, secret: &str) -> AppResult<Option<Viewer>> {
        let found = session::Entity::find()
            .filter(session::Column::SecretHash.eq(token_hash(secret)))
            .find_also_related(user::Entity)
            .one(&self.db)
            .await?;
        Ok(match found {
            Some((session, Some(user))) if is_live(&session, Utc::now()) => {
                Some(viewer(user, session.id))
            }
            _ => None,
        })
    }

    pub async fn create_user(
        &self,
        username: &str,
        password: SecretString,
        role: Role,
    ) -> AppResult<user::Model> {
        let username = normalize_username("username", username)?;
        password::validate_new("password", password.expose_secret())?;
        let hash = self.hashing.hash(password).await?;
        let now = Utc::now();
        let inserted = user::ActiveModel {
            id: Set(Uuid::now_v7()),
            username: Set(username.clone()),
            password_hash: Set(hash),
            role: Set(role),
            created_at: Set(now),
            updated_at: Set(now),
        }
        .insert(&self.db)
        .await;
        match inserted {
            Ok(user) => {
                tracing::info!(user_id = %user.id, role = ?role, "user created");
                Ok(user)
            }
            Err(error) if matches!(error.sql_err(), Some(SqlErr::UniqueConstraintViolation(_))) => {
                Err(AppError::Conflict(format!(
                    "username `{username}` is already taken"
                )))
            }
            Err(error) => Err(error.into()),
        }
    }

    /// Creates the configured first admin unless that username exists.
    pub async fn ensure_admin(&self, username: &str, password: SecretString) -> anyhow::Result<()> {
        match self.create_user(username, password, Role::Admin).await {
            Ok(_) | Err(AppError::Conflict(_)) => Ok(()),
            Err(error) => Err(error.into_anyhow().context("creating the first admin")),
        }
    }

    /// Changes the viewer's password and ends every other session of theirs.
    /// Wrong current passwords are throttled like failed logins.
    pub async fn change_password(
        &self,
        viewer: &Viewer,
        current: Option<SecretString>,
        new: SecretString,
        meta: &RequestMeta,
    ) -> AppResult<()> {
        let user_id = viewer.user_id;
        password::validate_new("newPassword", new.expose_secret())?;
        self.prove_owner(
            viewer,
            current.as_ref().map(ExposeSecret::expose_secret),
            meta,
        )
        .await?;
        let hash = self.hashing.hash(new).await?;
        let now = Utc::now();
        let txn = crate::db::begin_write(&self.db).await?;
        user::Entity::update_many()
            .col_expr(user::Column::PasswordHash, Expr::value(hash))
            .col_expr(user::Column::UpdatedAt, Expr::value(now))
            .filter(user::Column::Id.eq(user_id))
            .exec(&txn)
            .await?;
        // A reader-API password set from a stolen session must not outlive
        // the password change that evicts the thief.
        entity::reader_credential::Entity::delete_many()
            .filter(entity::reader_credential::Column::UserId.eq(user_id))
            .exec(&txn)
            .await?;
        session::Entity::update_many()
            .col_expr(session::Column::RevokedAt, Expr::value(now))
            .col_expr(
                session::Column::RevokedReason,
                Expr::value("password_changed"),
            )
            .filter(session::Column::UserId.eq(user_id))
            .filter(session::Column::Id.ne(viewer.session_id))
            .filter(session::Column::RevokedAt.is_null())
            .exec(&txn)
            .await?;
        txn.commit().await?;
        self.revocations.announce(Ended::UserExcept {
            user_id,
            kept: viewer.session_id,
        });
        tracing::info!(user_id = %user_id, "password changed; other sessions revoked");
        Ok(())
    }

    async fn insert_refresh_token(
        &self,
        db: &impl ConnectionTrait,
        session_id: Uuid,
        token: &str,
        now: DateTime<Utc>,
    ) -> AppResult<()> {
        refresh_token::ActiveModel {
            id: Set(Uuid::now_v7()),
            session_id: Set(session_id),
            token_hash: Set(token_hash(token)),
            created_at: Set(now),
            expires_at: Set(now + self.session_ttl),
            used_at: Set(None),
        }
        .insert(db)
        .await?;
        Ok(())
    }

    async fn revoke_for_reuse(&self, session_id: Uuid) -> AppResult<()> {
        tracing::warn!(session_id = %session_id, "refresh token reuse detected; revoking session");
        metrics::counter!("trellis_refresh_token_reuse_total").increment(1);
        self.revoke_session(session_id, "refresh_token_reuse").await
    }

    async fn revoke_session(&self, session_id: Uuid, reason: &str) -> AppResult<()> {
        session::Entity::update_many()
            .col_expr(session::Column::RevokedAt, Expr::value(Utc::now()))
            .col_expr(session::Column::RevokedReason, Expr::value(reason))
            .filter(session::Column::Id.eq(session_id))
            .filter(session::Column::RevokedAt.is_null())
            .exec(&self.db)
            .await?;
        self.revocations.announce(Ended::Session(session_id));
        Ok(())
    }

    /// Announces ended sessions to open connections.
    pub fn revocations(&self) -> &Revocations {
        &self.revocations
    }

    /// Whether the viewer's session is still live (a connection's re-check).
    pub async fn session_is_live(&self, viewer: &Viewer) -> AppResult<bool> {
        let found = session::Entity::find_by_id(viewer.session_id)
            .one(&self.db)
            .await?;
        Ok(found.is_some_and(|session| {
            session.user_id == viewer.user_id && is_live(&session, Utc::now())
        }))
    }

    fn issue(
        &self,
        user: user::Model,
        session_id: Uuid,
        refresh_token: String,
        session_secret: Option<String>,
        now: DateTime<Utc>,
    ) -> AppResult<IssuedTokens> {
        let access_expires_at = now + self.access_ttl;
        let access_token = self
            .keys
            .mint(user.id, session_id, now, access_expires_at)
            .map_err(AppError::internal)?;
        Ok(IssuedTokens {
            user,
            access_token,
            access_expires_at,
            refresh_token,
            session_secret,
        })
    }
}

fn is_live(session: &session::Model, now: DateTime<Utc>) -> bool {
    session.revoked_at.is_none() && session.expires_at > now
}

fn viewer(user: user::Model, session_id: Uuid) -> Viewer {
    Viewer {
        user_id: user.id,
        username: user.username,
        role: user.role,
        session_id,
    }
}
