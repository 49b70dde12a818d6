//! GraphQL surface of accounts and sessions.

use std::sync::Arc;

use async_graphql::{Context, Enum, ID, InputObject, Object, SimpleObject};
use axum::http::header::SET_COOKIE;
use chrono::{DateTime, Utc};
use entity::user;
use secrecy::SecretString;

use super::{Role as DbRole, cookie, service::AuthService};
use crate::graphql::{
    context::ContextExt,
    pagination::{KeysetConnection, PageRequest},
};

/// What an account may do.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// Manages users and instance-wide configuration.
    Admin,
    /// Uses the instance.
    Member,
}

impl From<DbRole> for Role {
    fn from(role: DbRole) -> Self {
        match role {
            DbRole::Admin => Role::Admin,
            DbRole::Member => Role::Member,
        }
    }
}

impl From<Role> for DbRole {
    fn from(role: Role) -> Self {
        match role {
            Role::Admin => DbRole::Admin,
            Role::Member => DbRole::Member,
        }
    }
}

/// An account.
#[derive(SimpleObject, Clone, Debug)]
pub struct User {
    pub id: ID,
    /// Lower-case login name.
    pub username: String,
    pub role: Role,
    pub created_at: DateTime<Utc>,
}

impl From<user::Model> for User {
    fn from(model: user::Model) -> Self {
        User {
            id: ID(model.id.to_string()),
            username: model.username,
            role: model.role.into(),
            created_at: model.created_at,
        }
    }
}

/// Tokens for API clients. Browsers also get an HttpOnly session cookie.
#[derive(SimpleObject, Debug)]
pub struct AuthPayload {
    /// Short-lived JWT for `Authorization: Bearer …` or a WebSocket `connection_init`.
    pub access_token: String,
    /// Single-use token for `refreshToken`; presenting it twice revokes the session.
    pub refresh_token: String,
    /// When `accessToken` expires.
    pub expires_at: DateTime<Utc>,
    pub user: User,
}

/// A new account.
#[derive(InputObject, Debug)]
pub struct CreateUserInput {
    pub username: String,
    #[graphql(secret)]
    pub password: String,
    #[graphql(default_with = "Role::Member")]
    pub role: Role,
}

#[derive(Default)]
pub struct AuthQuery;

#[Object]
impl AuthQuery {
    /// The signed-in user, or null when anonymous.
    async fn me(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<User>> {
        let Some(viewer) = ctx.viewer_opt() else {
            return Ok(None);
        };
        Ok(ctx
            .service::<Arc<AuthService>>()?
            .user(viewer.user_id)
            .await?
            .map(User::from))
    }

    /// All accounts, by username. Admins only.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn users(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<User>> {
        ctx.admin()?;
        Ok(ctx
            .service::<Arc<AuthService>>()?
            .user_connection(PageRequest::new(first, after)?, User::from)
            .await?)
    }
}

#[derive(Default)]
pub struct AuthMutation;

#[Object]
impl AuthMutation {
    /// Signs in. Returns tokens and sets the HttpOnly session cookie.
    /// Failed attempts are limited per client address and per username
    /// (`RATE_LIMITED` with `retryAfter`).
    async fn login(
        &self,
        ctx: &Context<'_>,
        username: String,
        #[graphql(secret)] password: String,
    ) -> async_graphql::Result<AuthPayload> {
        let auth = ctx.service::<Arc<AuthService>>()?;
        let meta = ctx.request_meta()?;
        let issued = auth.login(&username, &password, meta).await?;
        if let Some(secret) = &issued.session_secret {
            let secure = cookie::secure_for(auth.cookie_secure(), meta);
            ctx.append_http_header(
                SET_COOKIE,
                cookie::set_session(secret, auth.session_ttl(), secure),
            );
        }
        Ok(AuthPayload {
            access_token: issued.access_token,
            refresh_token: issued.refresh_token,
            expires_at: issued.access_expires_at,
            user: issued.user.into(),
        })
    }

    /// Exchanges a refresh token for a new access token and a new refresh
    /// token. Each refresh token works once; reusing one revokes its session.
    async fn refresh_token(
        &self,
        ctx: &Context<'_>,
        #[graphql(secret)] token: String,
    ) -> async_graphql::Result<AuthPayload> {
        let auth = ctx.service::<Arc<AuthService>>()?;
        let issued = auth.refresh(&token).await?;
        Ok(AuthPayload {
            access_token: issued.access_token,
            refresh_token: issued.refresh_token,
            expires_at: issued.access_expires_at,
            user: issued.user.into(),
        })
    }

    /// Ends the current session (cookie, refresh tokens and access tokens)
    /// and clears the cookie. False when there was no session.
    async fn logout(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let auth = ctx.service::<Arc<AuthService>>()?;
        let meta = ctx.request_meta()?;
        let secure = cookie::secure_for(auth.cookie_secure(), meta);
        ctx.append_http_header(SET_COOKIE, cookie::clear_session(secure));
        let Some(viewer) = ctx.viewer_opt() else {
            return Ok(false);
        };
        auth.logout(viewer).await?;
        Ok(true)
    }

    /// Creates an account. Admins only.
    async fn create_user(
        &self,
        ctx: &Context<'_>,
        input: CreateUserInput,
    ) -> async_graphql::Result<User> {
        ctx.admin()?;
        let auth = ctx.service::<Arc<AuthService>>()?;
        let user = auth
            .create_user(
                &input.username,
                SecretString::from(input.password),
                input.role.into(),
            )
            .await?;
        Ok(user.into())
    }

    /// Changes the caller's password and signs out their other sessions.
    /// Wrong current passwords count as failed logins (`RATE_LIMITED`
    /// after too many). An account created by an OIDC login has no
    /// current password: it sets its first one without, from a session
    /// opened in the last ten minutes (else `FORBIDDEN`: sign in again).
    async fn change_password(
        &self,
        ctx: &Context<'_>,
        #[graphql(secret)] current_password: Option<String>,
        #[graphql(secret)] new_password: String,
    ) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let auth = ctx.service::<Arc<AuthService>>()?;
        auth.change_password(
            viewer,
            current_password.map(SecretString::from),
            SecretString::from(new_password),
            ctx.request_meta()?,
        )
        .await?;
        Ok(true)
    }
}
