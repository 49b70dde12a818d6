//! The gateway's GraphQL: thin resolvers over [`GatewayService`]. Every
//! field is per user: links, checks and the manifest are the viewer's own.

use async_graphql::{Context, Enum, Json, Object, SimpleObject};
use chrono::{DateTime, Utc};
use serde_json::Value;

use super::{
    links::{Link, LinkStatus},
    provider::{GatewayFeature, LinkMethod, MetadataKind, ProviderKind},
    service::{Check, GatewayService, Manifest, ProviderManifest},
};
use crate::{error::AppError, graphql::context::ContextExt};

#[derive(Default)]
pub struct GatewayQuery;

#[Object]
impl GatewayQuery {
    /// What the gateway can do for the viewer, per provider: each
    /// feature's support, whether what it needs is configured (presence
    /// only — `checkProvider` probes), its limitation, and the providers'
    /// cooldowns.
    async fn gateway_capabilities(
        &self,
        ctx: &Context<'_>,
    ) -> async_graphql::Result<GatewayCapabilities> {
        let viewer = ctx.viewer()?;
        let manifest = ctx.service::<GatewayService>()?.manifest(viewer).await?;
        Ok(GatewayCapabilities::from(manifest))
    }

    /// The viewer's linked provider accounts (never their credentials).
    async fn provider_links(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<ProviderLink>> {
        let viewer = ctx.viewer()?;
        let links = ctx.service::<GatewayService>()?.links(viewer).await?;
        Ok(links.into_iter().map(ProviderLink::from).collect())
    }

    /// Probes a provider now: its public side, and the viewer's linked
    /// credential (a refused one becomes `NEEDS_RELINK`).
    async fn check_provider(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
    ) -> async_graphql::Result<ProviderCheck> {
        let viewer = ctx.viewer()?;
        let check = ctx
            .service::<GatewayService>()?
            .check(viewer, provider)
            .await?;
        Ok(ProviderCheck::from(check))
    }

    /// Public metadata from a provider, through the gateway's cache
    /// (never with anyone's credential): a `TITLE` by `id`, or a `SEARCH`
    /// by `query`. `payload` is the provider's answer.
    async fn provider_metadata(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
        kind: MetadataKind,
        id: Option<String>,
        query: Option<String>,
    ) -> async_graphql::Result<ProviderMetadata> {
        ctx.viewer()?;
        let lookup = ctx
            .service::<GatewayService>()?
            .metadata(provider, kind, id.as_deref(), query.as_deref())
            .await?;
        let payload: Value = serde_json::from_str(&lookup.payload).map_err(AppError::internal)?;
        Ok(ProviderMetadata {
            provider,
            kind,
            cached: lookup.cached,
            payload: Json(payload),
        })
    }
}

#[derive(Default)]
pub struct GatewayMutation;

#[Object]
impl GatewayMutation {
    /// Links the viewer's Kavita account by its API key (Kavita's user
    /// settings): checked with Kavita at once, stored encrypted, never
    /// returned.
    async fn link_kavita(
        &self,
        ctx: &Context<'_>,
        #[graphql(secret)] api_key: String,
    ) -> async_graphql::Result<ProviderLink> {
        let viewer = ctx.viewer()?;
        let link = ctx
            .service::<GatewayService>()?
            .link_api_key(viewer, ProviderKind::Kavita, &api_key)
            .await?;
        Ok(ProviderLink::from(link))
    }

    /// Starts linking an OAuth provider (AniList): send the user to
    /// `authorizeUrl`; the provider sends them back to
    /// `/gateway/oauth/{provider}/callback`, which finishes the link for
    /// the same signed-in user within ten minutes, once.
    async fn start_provider_link(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
    ) -> async_graphql::Result<ProviderLinkStart> {
        let viewer = ctx.viewer()?;
        let service = ctx.service::<GatewayService>()?;
        let started = service.start_link(viewer, provider).await?;
        Ok(ProviderLinkStart {
            provider,
            authorize_url: started.authorize_url.to_string(),
            callback_url: service.callback_url(provider)?.to_string(),
            expires_at: started.expires_at,
        })
    }

    /// Forgets the viewer's account at a provider (its stored credential
    /// with it). False when there was none.
    async fn unlink_provider(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
    ) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        Ok(ctx
            .service::<GatewayService>()?
            .unlink(viewer, provider)
            .await?)
    }
}

/// The capability manifest.
#[derive(SimpleObject)]
pub struct GatewayCapabilities {
    pub protocol_version: i32,
    /// True: Trellis is the gateway, no paid relay is involved.
    pub independent_mode: bool,
    pub providers: Vec<ProviderCapabilities>,
}

impl From<Manifest> for GatewayCapabilities {
    fn from(manifest: Manifest) -> Self {
        GatewayCapabilities {
            protocol_version: manifest.protocol_version,
            independent_mode: manifest.independent_mode,
            providers: manifest
                .providers
                .into_iter()
                .map(ProviderCapabilities::from)
                .collect(),
        }
    }
}

/// How a user links an account at a provider.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum ProviderLinkMethod {
    /// `linkKavita(apiKey)`.
    ApiKey,
    /// `startProviderLink`, then the provider's consent page.
    Oauth,
}

/// One provider in the manifest.
#[derive(SimpleObject)]
pub struct ProviderCapabilities {
    pub provider: ProviderKind,
    /// Whether the instance configured this provider.
    pub configured: bool,
    pub link_method: ProviderLinkMethod,
    /// Whether the OAuth link sends a PKCE verifier (AniList documents
    /// none; the code exchange then uses the client secret).
    pub pkce: bool,
    /// Whether users can link an account now.
    pub link_configured: bool,
    /// The viewer's link (presence, not proof it works).
    pub link: Option<ProviderLink>,
    pub features: Vec<ProviderFeature>,
    /// The provider's hosts that are cooling down, and until when.
    pub cooldowns: Vec<HostCooldown>,
}

impl From<ProviderManifest> for ProviderCapabilities {
    fn from(manifest: ProviderManifest) -> Self {
        let (link_method, pkce) = match manifest.link_method {
            LinkMethod::ApiKey => (ProviderLinkMethod::ApiKey, false),
            LinkMethod::OAuth { pkce } => (ProviderLinkMethod::Oauth, pkce),
        };
        ProviderCapabilities {
            provider: manifest.provider,
            configured: manifest.configured,
            link_method,
            pkce,
            link_configured: manifest.link_configured,
            link: manifest.link.map(ProviderLink::from),
            features: manifest
                .features
                .into_iter()
                .map(|state| ProviderFeature {
                    feature: state.feature,
                    supported: state.supported,
                    configured: state.configured,
                    limitation: state.limitation.map(str::to_owned),
                })
                .collect(),
            cooldowns: manifest
                .cooldowns
                .into_iter()
                .map(|(host, until)| HostCooldown { host, until })
                .collect(),
        }
    }
}

#[derive(SimpleObject)]
pub struct ProviderFeature {
    pub feature: GatewayFeature,
    pub supported: bool,
    /// Whether what it needs is present (configuration, linked accounts).
    pub configured: bool,
    /// What it cannot do, in words.
    pub limitation: Option<String>,
}

/// A host the gateway will not call before `until` (it answered 429/503).
#[derive(SimpleObject)]
pub struct HostCooldown {
    pub host: String,
    pub until: DateTime<Utc>,
}

/// A linked account (its credential is never shown).
#[derive(SimpleObject)]
pub struct ProviderLink {
    pub provider: ProviderKind,
    pub status: LinkStatus,
    /// The account's name at the provider.
    pub account_name: Option<String>,
    /// The account's id at the provider (AniList's user id).
    pub account_id: Option<String>,
    /// When the credential expires, where the provider says.
    pub expires_at: Option<DateTime<Utc>>,
    pub linked_at: DateTime<Utc>,
    /// When the provider last accepted or refused the credential.
    pub checked_at: DateTime<Utc>,
}

impl From<Link> for ProviderLink {
    fn from(link: Link) -> Self {
        ProviderLink {
            provider: link.provider,
            status: link.status,
            account_name: link.remote_name,
            account_id: link.remote_user_id,
            expires_at: link.expires_at,
            linked_at: link.linked_at,
            checked_at: link.checked_at,
        }
    }
}

/// A started OAuth link.
#[derive(SimpleObject)]
pub struct ProviderLinkStart {
    pub provider: ProviderKind,
    /// Where to send the user.
    pub authorize_url: String,
    /// Where the provider sends them back (register it with the provider).
    pub callback_url: String,
    pub expires_at: DateTime<Utc>,
}

/// What `checkProvider` found.
#[derive(SimpleObject)]
pub struct ProviderCheck {
    pub provider: ProviderKind,
    /// Everything probed answered as it should.
    pub ok: bool,
    /// Public reads work (null: not configured).
    pub public_ok: Option<bool>,
    /// The viewer's credential works (null: not linked).
    pub account_ok: Option<bool>,
    pub link_status: Option<LinkStatus>,
    /// What failed, in words (never a credential).
    pub messages: Vec<String>,
    pub checked_at: DateTime<Utc>,
}

impl From<Check> for ProviderCheck {
    fn from(check: Check) -> Self {
        ProviderCheck {
            provider: check.provider,
            ok: check.public_ok != Some(false) && check.account_ok != Some(false),
            public_ok: check.public_ok,
            account_ok: check.account_ok,
            link_status: check.link_status,
            messages: check.messages,
            checked_at: check.checked_at,
        }
    }
}

/// A public lookup's answer.
#[derive(SimpleObject)]
pub struct ProviderMetadata {
    pub provider: ProviderKind,
    pub kind: MetadataKind,
    /// Served from the gateway's cache.
    pub cached: bool,
    /// The provider's answer (AniList: the GraphQL `data`; Kavita: its
    /// JSON).
    pub payload: Json<Value>,
}
