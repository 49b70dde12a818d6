//! GraphQL surface of OIDC login: what the login page offers, and linking
//! the signed-in account to an identity at the provider.

use async_graphql::{Context, Object, SimpleObject};
use chrono::{DateTime, Utc};

use super::service::{OidcService, Purpose};
use crate::graphql::context::ContextExt;

/// How this instance lets people sign in.
#[derive(SimpleObject, Debug)]
pub struct AuthProviders {
    /// Whether the `login` mutation (username and password) is accepted.
    pub password: bool,
    /// The identity provider, when OIDC login is configured.
    pub oidc: Option<OidcProvider>,
}

/// An identity provider the login page offers.
#[derive(SimpleObject, Debug)]
pub struct OidcProvider {
    /// What to call it on a button ("Sign in with …").
    pub display_name: String,
    /// Where the browser goes to sign in (`GET`, answers 303 to the
    /// provider); add `?return_to=/path` to come back to a page.
    pub start_url: String,
}

/// A started link: send the browser to `authorizeUrl`.
#[derive(SimpleObject, Debug)]
pub struct OidcLinkStart {
    /// The provider's authorization page; it sends the browser back to
    /// `/auth/oidc/callback`, which attaches the identity to this account
    /// (the browser must still be signed in as it).
    pub authorize_url: String,
    /// When the link can no longer be finished.
    pub expires_at: DateTime<Utc>,
}

#[derive(Default)]
pub struct OidcQuery;

#[Object]
impl OidcQuery {
    /// What the login page shows: password login, and the identity
    /// provider when OIDC login is configured. Public.
    async fn auth_providers(&self, ctx: &Context<'_>) -> async_graphql::Result<AuthProviders> {
        let offered = ctx.service::<OidcService>()?.offered();
        Ok(AuthProviders {
            password: offered.password,
            oidc: offered.oidc.map(|(display_name, start_url)| OidcProvider {
                display_name,
                start_url,
            }),
        })
    }
}

#[derive(Default)]
pub struct OidcMutation;

#[Object]
impl OidcMutation {
    /// Starts linking the signed-in account to an identity at the
    /// provider. Finishing it signs that identity in as this account from
    /// then on; an identity already linked to another account is refused
    /// (`CONFLICT`). Never matched by username or email. At most thirty a
    /// minute per account (`RATE_LIMITED`).
    async fn link_oidc(&self, ctx: &Context<'_>) -> async_graphql::Result<OidcLinkStart> {
        let viewer = ctx.viewer()?;
        let started = ctx
            .service::<OidcService>()?
            .start(
                Purpose::Link(viewer.user_id),
                None,
                ctx.request_meta()?.client_ip,
            )
            .await?;
        Ok(OidcLinkStart {
            authorize_url: started.authorize_url.to_string(),
            expires_at: started.expires_at,
        })
    }

    /// Removes the signed-in account's identity at the provider. Refused
    /// (`FORBIDDEN`) when it is the account's only way to sign in: an
    /// account created by an OIDC login has no password, and with password
    /// login disabled no account can do without it. False when none was
    /// linked.
    async fn unlink_oidc(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        Ok(ctx.service::<OidcService>()?.unlink(viewer).await?)
    }
}
