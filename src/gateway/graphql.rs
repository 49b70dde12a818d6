//! The gateway's GraphQL: thin resolvers over [`GatewayService`]. Every
//! field is per user: links, checks and the manifest are the viewer's own.

use async_graphql::{Context, Enum, ID, Object, SimpleObject, Subscription};
use chrono::{DateTime, Utc};
use futures_util::Stream;
use serde_json::Value;

use super::{
    action::{Action, ActionKind},
    events::{EventStatus, EventView, TOPIC},
    links::{Link, LinkStatus},
    provider::{GatewayFeature, LinkMethod, MetadataKind, ProviderKind},
    scrobbler::TitleLinkState,
    service::{Check, GatewayService, Manifest, ProviderManifest, Review},
};
use crate::{
    error::AppError,
    graphql::{
        context::ContextExt,
        json::Json,
        pagination::{KeysetConnection, PageRequest},
        subscription::follow,
    },
    jobs::{Jobs, graphql::Task},
};

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

    /// The viewer's personal events, newest first; `status` filters.
    /// `allUsers` (administrators only) lists everyone's: with `status:
    /// REVIEW`, the operators' review queue.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn gateway_events(
        &self,
        ctx: &Context<'_>,
        status: Option<EventStatus>,
        first: Option<i32>,
        after: Option<String>,
        #[graphql(default = false)] all_users: bool,
    ) -> async_graphql::Result<KeysetConnection<GatewayEvent>> {
        let viewer = ctx.viewer()?;
        let page = PageRequest::new(first, after)?;
        Ok(ctx
            .service::<GatewayService>()?
            .events(viewer, status, all_users, page, GatewayEvent)
            .await?)
    }

    /// One of the viewer's events (an administrator: anyone's).
    async fn gateway_event(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<Option<GatewayEvent>> {
        let viewer = ctx.viewer()?;
        let Ok(id) = uuid::Uuid::parse_str(&id) else {
            return Ok(None);
        };
        Ok(ctx
            .service::<GatewayService>()?
            .event(viewer, id)
            .await?
            .map(GatewayEvent))
    }

    /// The viewer's Kavita series ↔ AniList media links (at most 1,000,
    /// by series name); `state` filters (`PROPOSED`: waiting for the viewer).
    async fn title_links(
        &self,
        ctx: &Context<'_>,
        state: Option<TitleLinkState>,
    ) -> async_graphql::Result<Vec<TitleLink>> {
        let viewer = ctx.viewer()?;
        let links = ctx
            .service::<GatewayService>()?
            .title_links(viewer.user_id, state)
            .await?;
        Ok(links.into_iter().map(TitleLink).collect())
    }

    /// The viewer's receipts: each a confirmed completion at a provider,
    /// newest first.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn receipts(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<Receipt>> {
        let viewer = ctx.viewer()?;
        let page = PageRequest::new(first, after)?;
        Ok(ctx
            .service::<GatewayService>()?
            .receipts(viewer, page, Receipt)
            .await?)
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

    /// Records chapters read of a title at a provider (AniList: the list
    /// entry's progress). An event: pending until a read-back confirms it.
    /// The same action with the same `occurredAt` is one event.
    async fn record_progress(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
        title_id: ID,
        progress: i32,
        occurred_at: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<GatewayEvent> {
        let chapters = u32::try_from(progress)
            .map_err(|_| AppError::bad_input("progress", "progress must not be negative"))?;
        submit(
            ctx,
            provider,
            &title_id,
            Action::Progress { chapters },
            occurred_at,
        )
        .await
    }

    /// Rates a title, 0 to 5 stars (AniList: in the user's own score
    /// format; Kavita: its 0–5 rating).
    async fn set_rating(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
        title_id: ID,
        rating: f64,
        occurred_at: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<GatewayEvent> {
        submit(
            ctx,
            provider,
            &title_id,
            Action::Rating { stars: rating },
            occurred_at,
        )
        .await
    }

    /// Puts a title on the want-to-read list (AniList: Planning; a title
    /// already on any list stays as it is).
    async fn add_to_want_to_read(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
        title_id: ID,
        occurred_at: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<GatewayEvent> {
        submit(ctx, provider, &title_id, Action::WantToRead, occurred_at).await
    }

    /// Takes a title off the user's list, keeping everything else: on
    /// AniList only a bare entry is removed (one with progress, a score,
    /// notes, custom lists, dates… waits for review instead); on Kavita it
    /// leaves Want to Read.
    async fn remove_from_list(
        &self,
        ctx: &Context<'_>,
        provider: ProviderKind,
        title_id: ID,
        occurred_at: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<GatewayEvent> {
        submit(ctx, provider, &title_id, Action::Removal, occurred_at).await
    }

    /// Scrobbles the viewer's Kavita reading to AniList now (it also runs
    /// every `TRELLIS_GATEWAY_SCROBBLE_INTERVAL`): the task that does it.
    async fn scrobble_kavita(&self, ctx: &Context<'_>) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let task = ctx
            .service::<GatewayService>()?
            .request_scrobble(viewer)
            .await?;
        Ok(Task::from(&task))
    }

    /// Confirms the AniList media proposed for a Kavita series: from now
    /// on its reading is scrobbled.
    async fn confirm_title_link(
        &self,
        ctx: &Context<'_>,
        series_id: ID,
    ) -> async_graphql::Result<TitleLink> {
        let viewer = ctx.viewer()?;
        let link = ctx
            .service::<GatewayService>()?
            .confirm_title_link(viewer.user_id, &series_id)
            .await?;
        Ok(TitleLink(link))
    }

    /// Links a Kavita series to the AniList media the viewer names
    /// (checked with AniList's public catalog), confirmed.
    async fn set_title_link(
        &self,
        ctx: &Context<'_>,
        series_id: ID,
        media_id: ID,
    ) -> async_graphql::Result<TitleLink> {
        let viewer = ctx.viewer()?;
        let link = ctx
            .service::<GatewayService>()?
            .set_title_link(viewer.user_id, &series_id, &media_id)
            .await?;
        Ok(TitleLink(link))
    }

    /// Sends an event waiting for review (or for its user) back to
    /// delivery, after its reason was dealt with. The event's owner or an
    /// administrator; `CONFLICT` unless it is `REVIEW` or `WAITING`.
    async fn retry_gateway_event(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<GatewayEvent> {
        review(ctx, &id, Review::Retry).await
    }

    /// Sets an event waiting for review (or for its user) aside:
    /// `DISMISSED`, nothing more is sent. The event's owner or an
    /// administrator; `CONFLICT` unless it is `REVIEW` or `WAITING`.
    async fn dismiss_gateway_event(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<GatewayEvent> {
        review(ctx, &id, Review::Dismiss).await
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
    pub payload: Json,
}

/// Retries or dismisses a parked event; an id that cannot exist names
/// nothing (`NOT_FOUND`).
async fn review(ctx: &Context<'_>, id: &ID, review: Review) -> async_graphql::Result<GatewayEvent> {
    let viewer = ctx.viewer()?;
    let id = uuid::Uuid::parse_str(id).map_err(|_| AppError::NotFound("gateway event"))?;
    let event = ctx
        .service::<GatewayService>()?
        .review(viewer, id, review)
        .await?;
    Ok(GatewayEvent(event))
}

async fn submit(
    ctx: &Context<'_>,
    provider: ProviderKind,
    title_id: &str,
    action: Action,
    occurred_at: Option<DateTime<Utc>>,
) -> async_graphql::Result<GatewayEvent> {
    let viewer = ctx.viewer()?;
    let event = ctx
        .service::<GatewayService>()?
        .submit(viewer, provider, title_id, action, occurred_at)
        .await?;
    Ok(GatewayEvent(event))
}

#[derive(Default)]
pub struct GatewaySubscription;

#[Subscription]
impl GatewaySubscription {
    /// The viewer's events as they change (admitted, waiting, confirmed);
    /// `id` follows one.
    async fn gateway_event_updated(
        &self,
        ctx: &Context<'_>,
        id: Option<ID>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<GatewayEvent>> + use<>>
    {
        let viewer = ctx.viewer()?.user_id;
        let only = id.map(|id| id.to_string());
        let bus = ctx.service::<Jobs>()?.bus();
        Ok(follow(bus, move |event| {
            let picked = (event.topic == TOPIC
                && event.owner_id == Some(viewer)
                && only.as_ref().is_none_or(|id| *id == event.aggregate_id))
            .then(|| event.payload::<EventView>())
            .flatten()
            .map(GatewayEvent);
            async move { picked }
        }))
    }
}

/// A personal action at a provider, pending until a read-back confirms it.
pub struct GatewayEvent(pub EventView);

#[Object]
impl GatewayEvent {
    /// The event's stable id (never reused).
    async fn id(&self) -> ID {
        ID(self.0.id.to_string())
    }
    async fn provider(&self) -> ProviderKind {
        self.0.provider
    }
    async fn action(&self) -> ActionKind {
        self.0.action
    }
    /// The provider's title id (Kavita series, AniList media).
    async fn title_id(&self) -> ID {
        ID(self.0.title_id.clone())
    }
    /// The action's value: `{"chapters": 12}`, `{"stars": 4.5}`, `{}`.
    async fn value(&self) -> Json {
        Json(self.0.value.clone())
    }
    async fn occurred_at(&self) -> DateTime<Utc> {
        self.0.occurred_at
    }
    async fn status(&self) -> EventStatus {
        self.0.status
    }
    /// Why it waits (or how it was confirmed), in words.
    async fn reason(&self) -> Option<&str> {
        self.0.reason.as_deref()
    }
    /// Delivery attempts that failed or did not confirm.
    async fn attempts(&self) -> i32 {
        self.0.attempts
    }
    /// The delivery task (see `task(id)`), while one drives it.
    async fn task_id(&self) -> Option<ID> {
        self.0.task_id.map(|id| ID(id.to_string()))
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
    async fn confirmed_at(&self) -> Option<DateTime<Utc>> {
        self.0.confirmed_at
    }
}

/// How a receipt is kept.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReceiptRetention {
    /// Kept until an operator removes it (removals: repeating one could
    /// delete an entry the user made again).
    Protected,
    /// Expires seven days after confirmation (a read-back can always
    /// answer again); at most the newest 1,024 are kept.
    Reconciled,
}

/// A confirmed completion at a provider.
pub struct Receipt(pub entity::gateway_receipt::Model);

#[Object]
impl Receipt {
    /// The event it confirms.
    async fn event_id(&self) -> ID {
        ID(self.0.event_id.to_string())
    }
    async fn provider(&self) -> Option<ProviderKind> {
        ProviderKind::parse(&self.0.provider)
    }
    async fn action(&self) -> Option<ActionKind> {
        ActionKind::parse(&self.0.action)
    }
    async fn title_id(&self) -> ID {
        ID(self.0.title_id.clone())
    }
    /// The read-back that confirmed it (the provider's entry fields).
    async fn response(&self) -> Json {
        Json(serde_json::from_str(&self.0.response).unwrap_or(Value::Null))
    }
    async fn retention(&self) -> ReceiptRetention {
        if self.0.retention == "PROTECTED" {
            ReceiptRetention::Protected
        } else {
            ReceiptRetention::Reconciled
        }
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn expires_at(&self) -> Option<DateTime<Utc>> {
        self.0.expires_at
    }
}

/// Which AniList media a Kavita series is, for scrobbling.
pub struct TitleLink(pub entity::gateway_title_link::Model);

#[Object]
impl TitleLink {
    /// Kavita's series id.
    async fn series_id(&self) -> ID {
        ID(self.0.series_id.clone())
    }
    async fn series_name(&self) -> &str {
        &self.0.series_name
    }
    /// AniList's media id; null when a search found nothing to propose.
    async fn media_id(&self) -> Option<ID> {
        self.0.media_id.clone().map(ID)
    }
    async fn media_title(&self) -> Option<&str> {
        self.0.media_title.as_deref()
    }
    async fn state(&self) -> TitleLinkState {
        if self.0.state == TitleLinkState::Confirmed.as_str() {
            TitleLinkState::Confirmed
        } else {
            TitleLinkState::Proposed
        }
    }
    /// `WEB_LINK` (the series' own metadata), `SEARCH` (a title search),
    /// `USER` (set by the viewer).
    async fn source(&self) -> &str {
        &self.0.source
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
}
