//! The gateway's operations, per user: linking accounts, the capability
//! manifest, provider checks and the public metadata cache. Resolvers and
//! the OAuth callback are thin layers over [`GatewayService`].

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex},
};

use chrono::{DateTime, Utc};
use secrecy::ExposeSecret;

use super::{
    action::{self, Action},
    anilist::AniList,
    cache::{Fingerprint, MetadataCache},
    cooldown::Cooldowns,
    events::{Admission, EventStatus, EventView, Events},
    kavita::Kavita,
    links::{Link, LinkStatus, Links, pkce_challenge},
    provider::{
        GatewayFeature, LinkMethod, MetadataKind, Needs, Provider, ProviderError, ProviderKind,
    },
};
use crate::{
    auth::Viewer,
    domain::PublicUrl,
    error::{AppError, AppResult},
    graphql::pagination::{KeyValue, Keyset, KeysetConnection, PageRequest, try_paginate},
    jobs::Jobs,
};

/// The manifest's protocol version: bumped when its meaning changes.
pub const PROTOCOL_VERSION: i32 = 1;
/// The longest id or query a public lookup takes.
const MAX_LOOKUP_CHARS: usize = 256;
/// The longest title id an event takes (the column's width).
const MAX_TITLE_CHARS: usize = 64;

/// Every provider, by kind: one line per provider. Kavita is also kept
/// as itself: scrobbling reads its library, which no other provider has.
#[derive(Clone)]
pub struct Providers {
    all: BTreeMap<ProviderKind, Arc<dyn Provider>>,
    kavita: Arc<Kavita>,
}

impl Providers {
    pub fn new(kavita: Kavita, anilist: AniList) -> Self {
        let kavita = Arc::new(kavita);
        let providers: [Arc<dyn Provider>; 2] = [kavita.clone(), Arc::new(anilist)];
        Providers {
            all: providers.into_iter().map(|p| (p.kind(), p)).collect(),
            kavita,
        }
    }

    pub fn kavita(&self) -> &Kavita {
        &self.kavita
    }

    pub fn get(&self, kind: ProviderKind) -> &Arc<dyn Provider> {
        self.all
            .get(&kind)
            .expect("every provider kind is registered")
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<dyn Provider>> {
        self.all.values()
    }
}

/// One feature in the manifest.
#[derive(Clone, Debug)]
pub struct FeatureState {
    pub feature: GatewayFeature,
    pub supported: bool,
    /// Whether what it needs is present (the instance's configuration and
    /// the viewer's linked accounts). Presence only: not proof that the
    /// credential works or has the scope (`checkProvider` probes that).
    pub configured: bool,
    pub limitation: Option<&'static str>,
}

/// One provider in the manifest.
#[derive(Clone, Debug)]
pub struct ProviderManifest {
    pub provider: ProviderKind,
    pub configured: bool,
    pub link_method: LinkMethod,
    /// Whether users can link an account now.
    pub link_configured: bool,
    /// The viewer's link, if any.
    pub link: Option<Link>,
    pub features: Vec<FeatureState>,
    /// Hosts in cooldown and until when.
    pub cooldowns: Vec<(String, DateTime<Utc>)>,
}

#[derive(Clone, Debug)]
pub struct Manifest {
    pub protocol_version: i32,
    /// Trellis is the gateway itself: no paid relay is involved.
    pub independent_mode: bool,
    pub providers: Vec<ProviderManifest>,
}

/// What `checkProvider` found.
#[derive(Clone, Debug)]
pub struct Check {
    pub provider: ProviderKind,
    pub public_ok: Option<bool>,
    pub account_ok: Option<bool>,
    pub link_status: Option<LinkStatus>,
    pub messages: Vec<String>,
    pub checked_at: DateTime<Utc>,
}

/// A public lookup's answer.
pub struct Lookup {
    pub payload: Arc<str>,
    pub cached: bool,
}

/// A started OAuth link, for the client to send the user to.
pub struct StartedLink {
    pub authorize_url: url::Url,
    pub expires_at: DateTime<Utc>,
}

#[derive(Clone)]
pub struct GatewayService {
    admission: Arc<super::saved::SavedManifest>,
    providers: Providers,
    links: Links,
    cooldowns: Cooldowns,
    events: Events,
    jobs: Jobs,
    cache: Arc<Mutex<MetadataCache>>,
    public_url: PublicUrl,
}

/// What the service is built from.
pub struct Parts {
    /// The capability manifest new events are admitted against (the last
    /// valid one, `independent-actions.json`).
    pub admission: super::saved::SavedManifest,
    pub providers: Providers,
    pub links: Links,
    pub cooldowns: Cooldowns,
    pub events: Events,
    pub public_url: PublicUrl,
}

impl GatewayService {
    pub fn new(parts: Parts, jobs: Jobs) -> Self {
        GatewayService {
            admission: Arc::new(parts.admission),
            providers: parts.providers,
            links: parts.links,
            cooldowns: parts.cooldowns,
            events: parts.events,
            jobs,
            cache: Arc::default(),
            public_url: parts.public_url,
        }
    }

    /// The fixed OAuth callback of `provider` under the public URL.
    pub fn callback_url(&self, provider: ProviderKind) -> AppResult<url::Url> {
        self.public_url
            .join(&format!("/gateway/oauth/{}/callback", provider.as_str()))
            .ok_or_else(|| {
                AppError::internal(anyhow::anyhow!(
                    "the public URL is unknown (set TRELLIS_PUBLIC_URL)"
                ))
            })
    }

    /// The capability manifest as `viewer` sees it.
    pub async fn manifest(&self, viewer: &Viewer) -> AppResult<Manifest> {
        let links = self.links.list(viewer.user_id).await?;
        let linked = |kind| links.iter().find(|link| link.provider == kind).cloned();
        let both =
            linked(ProviderKind::Kavita).is_some() && linked(ProviderKind::Anilist).is_some();
        let cooldowns = self.cooldowns.all_active(Utc::now()).await?;
        let mut providers = Vec::new();
        for provider in self.providers.all() {
            let link = linked(provider.kind());
            let hosts = provider.hosts();
            let features = provider
                .features()
                .into_iter()
                .map(|support| FeatureState {
                    feature: support.feature,
                    supported: support.supported,
                    configured: support.supported
                        && provider.configured()
                        && match support.needs {
                            Needs::Public => provider.public_configured(),
                            Needs::Account => link.is_some(),
                            Needs::BothAccounts => both,
                        },
                    limitation: support.limitation,
                })
                .collect();
            providers.push(ProviderManifest {
                provider: provider.kind(),
                configured: provider.configured(),
                link_method: provider.link_method(),
                link_configured: provider.link_configured(),
                link,
                features,
                cooldowns: cooldowns
                    .iter()
                    .filter(|(host, _)| hosts.contains(host))
                    .cloned()
                    .collect(),
            });
        }
        Ok(Manifest {
            protocol_version: PROTOCOL_VERSION,
            independent_mode: true,
            providers,
        })
    }

    /// The viewer's linked accounts.
    pub async fn links(&self, viewer: &Viewer) -> AppResult<Vec<Link>> {
        self.links.list(viewer.user_id).await
    }

    /// Links the viewer's Kavita account: the key is checked with Kavita
    /// at once and stored sealed.
    pub async fn link_api_key(
        &self,
        viewer: &Viewer,
        provider: ProviderKind,
        api_key: &str,
    ) -> AppResult<Link> {
        let handler = self.providers.get(provider);
        if handler.link_method() != LinkMethod::ApiKey {
            return Err(AppError::bad_input(
                "provider",
                format!("{} links through startProviderLink", provider.display()),
            ));
        }
        let api_key = api_key.trim();
        if api_key.is_empty() || api_key.len() > 512 {
            return Err(AppError::bad_input("apiKey", "give the account's API key"));
        }
        let account = match handler.verify(api_key).await {
            Ok(account) => account,
            Err(ProviderError::CredentialRefused(name)) => {
                return Err(AppError::bad_input(
                    "apiKey",
                    format!("{name} refused this API key"),
                ));
            }
            Err(error) => return Err(error.into()),
        };
        let link = self
            .links
            .save(viewer.user_id, provider, api_key, &account, None)
            .await?;
        self.resume_waiting(viewer, provider).await?;
        Ok(link)
    }

    /// Events that waited for this link go on.
    async fn resume_waiting(&self, viewer: &Viewer, provider: ProviderKind) -> AppResult<()> {
        let tasks = self.events.resume_waiting(viewer.user_id, provider).await?;
        self.jobs.after_commit_all(&tasks).await;
        Ok(())
    }

    /// Removes the viewer's link; whether there was one.
    pub async fn unlink(&self, viewer: &Viewer, provider: ProviderKind) -> AppResult<bool> {
        self.links.delete(viewer.user_id, provider).await
    }

    /// Starts an OAuth link for the viewer: where to send them.
    pub async fn start_link(
        &self,
        viewer: &Viewer,
        provider: ProviderKind,
    ) -> AppResult<StartedLink> {
        let handler = self.providers.get(provider);
        let LinkMethod::OAuth { pkce } = handler.link_method() else {
            return Err(AppError::bad_input(
                "provider",
                format!("{} links with an API key (linkKavita)", provider.display()),
            ));
        };
        if !handler.link_configured() {
            return Err(ProviderError::NotConfigured(provider.display()).into());
        }
        let callback = self.callback_url(provider)?;
        let started = self.links.start(viewer.user_id, provider, pkce).await?;
        let challenge = started.pkce_verifier.as_deref().map(pkce_challenge);
        let authorize_url =
            handler.authorize_url(&started.state, &callback, challenge.as_deref())?;
        Ok(StartedLink {
            authorize_url,
            expires_at: started.expires_at,
        })
    }

    /// Finishes an OAuth link the viewer started: the state is consumed
    /// (single use, bound to the viewer), the code traded for a token, the
    /// token checked and stored sealed.
    pub async fn finish_link(
        &self,
        viewer: &Viewer,
        provider: ProviderKind,
        state: &str,
        code: &str,
    ) -> AppResult<Link> {
        let verifier = self.links.consume(viewer.user_id, provider, state).await?;
        let handler = self.providers.get(provider);
        let callback = self.callback_url(provider)?;
        let issued = handler
            .exchange_code(code, &callback, verifier.as_deref())
            .await?;
        let account = handler.verify(issued.token.expose_secret()).await?;
        let link = self
            .links
            .save(
                viewer.user_id,
                provider,
                issued.token.expose_secret(),
                &account,
                issued.expires_at,
            )
            .await?;
        self.resume_waiting(viewer, provider).await?;
        Ok(link)
    }

    /// Consumes a state the provider sent back with an error (the user
    /// declined): nothing is linked, and the state cannot be used again.
    pub async fn abandon_link(
        &self,
        viewer: &Viewer,
        provider: ProviderKind,
        state: &str,
    ) -> AppResult<()> {
        self.links
            .consume(viewer.user_id, provider, state)
            .await
            .map(|_| ())
    }

    /// Probes the provider's public side and the viewer's credential.
    pub async fn check(&self, viewer: &Viewer, provider: ProviderKind) -> AppResult<Check> {
        let handler = self.providers.get(provider);
        let mut messages = Vec::new();
        let public_ok = if handler.public_configured() {
            let probed = handler.probe_public().await;
            if let Err(error) = &probed {
                messages.push(format!("public reads: {error}"));
            }
            Some(probed.is_ok())
        } else {
            messages.push(format!(
                "public reads: {}",
                ProviderError::NotConfigured(provider.display())
            ));
            None
        };
        let (account_ok, link_status) = match self.links.get(viewer.user_id, provider).await? {
            None => {
                messages.push("account: not linked".into());
                (None, None)
            }
            Some((_, credential)) => match handler.verify(credential.expose_secret()).await {
                Ok(_) => {
                    self.links
                        .mark(viewer.user_id, provider, LinkStatus::Linked)
                        .await?;
                    (Some(true), Some(LinkStatus::Linked))
                }
                Err(ProviderError::CredentialRefused(_)) => {
                    self.links
                        .mark(viewer.user_id, provider, LinkStatus::NeedsRelink)
                        .await?;
                    messages
                        .push("account: the provider refused the credential; link again".into());
                    (Some(false), Some(LinkStatus::NeedsRelink))
                }
                Err(error) => {
                    messages.push(format!("account: {error}"));
                    (Some(false), None)
                }
            },
        };
        Ok(Check {
            provider,
            public_ok,
            account_ok,
            link_status,
            messages,
            checked_at: Utc::now(),
        })
    }

    /// A public lookup through the cache. Never sends a user's credential.
    pub async fn metadata(
        &self,
        provider: ProviderKind,
        kind: MetadataKind,
        id: Option<&str>,
        query: Option<&str>,
    ) -> AppResult<Lookup> {
        for (name, value) in [("id", id), ("query", query)] {
            if value.is_some_and(|v| v.trim().is_empty() || v.chars().count() > MAX_LOOKUP_CHARS) {
                return Err(AppError::bad_input(
                    name,
                    format!("{name} must be 1 to {MAX_LOOKUP_CHARS} characters"),
                ));
            }
        }
        match (kind, id, query) {
            (MetadataKind::Title, None, _) => {
                return Err(AppError::bad_input("id", "a title lookup needs an id"));
            }
            (MetadataKind::Search, _, None) => {
                return Err(AppError::bad_input("query", "a search needs a query"));
            }
            _ => {}
        }
        // What the key treats as the same request is the same request
        // upstream: runs of whitespace as one space.
        let query = query.map(|q| q.split_whitespace().collect::<Vec<_>>().join(" "));
        let query = query.as_deref();
        let params: Vec<(&str, &str)> = match kind {
            MetadataKind::Title => vec![("id", id.unwrap_or_default())],
            MetadataKind::Search => vec![("query", query.unwrap_or_default())],
        };
        let key = Fingerprint::new(provider, kind.as_str(), params);
        if let Some(payload) = self.cache.lock().expect("cache lock").get(&key, Utc::now()) {
            return Ok(Lookup {
                payload,
                cached: true,
            });
        }
        let answer = self
            .providers
            .get(provider)
            .metadata(kind, id, query)
            .await?;
        let payload: Arc<str> = answer.payload.into();
        if let Some(ttl) = answer.ttl {
            self.cache
                .lock()
                .expect("cache lock")
                .insert(key, payload.clone(), ttl, Utc::now());
        }
        Ok(Lookup {
            payload,
            cached: false,
        })
    }
}

impl GatewayService {
    /// Admits a personal action of the viewer as an event (delivered by
    /// the runner, pending until a read-back confirms it). The same action
    /// at the same `occurred_at` is the same event: submitting it again
    /// returns it and sends nothing.
    pub async fn submit(
        &self,
        viewer: &Viewer,
        provider: ProviderKind,
        title_id: &str,
        action: Action,
        occurred_at: Option<DateTime<Utc>>,
    ) -> AppResult<EventView> {
        let title = title_id.trim();
        if title.is_empty()
            || title.chars().count() > MAX_TITLE_CHARS
            || title.chars().any(char::is_control)
        {
            return Err(AppError::bad_input(
                "titleId",
                format!("titleId must be 1 to {MAX_TITLE_CHARS} characters"),
            ));
        }
        if let Some((field, message)) = action.invalid() {
            return Err(AppError::bad_input(field, message));
        }
        // Admission reads the saved manifest; delivery asks the provider
        // again (seed 003: "delivery still requires fresh availability").
        let handler = self.providers.get(provider);
        if !self.admission.supports(provider, feature_of(action.kind()))
            || !handler.writes(action.kind())
        {
            let limitation = handler
                .features()
                .into_iter()
                .find(|support| support.feature == feature_of(action.kind()))
                .and_then(|support| support.limitation)
                .unwrap_or("not supported");
            return Err(AppError::bad_input(
                "provider",
                format!("{}: {limitation}", provider.display()),
            ));
        }
        let now = Utc::now();
        let occurred_at = occurred_at.unwrap_or(now);
        if occurred_at > now + chrono::TimeDelta::minutes(5) {
            return Err(AppError::bad_input(
                "occurredAt",
                "occurredAt is in the future",
            ));
        }
        self.admit(viewer.user_id, provider, title, action, occurred_at, false)
            .await
    }

    /// An event the scrobbler found in the user's Kavita reading, for
    /// AniList; what it admits is remembered so the change is sent once.
    pub(super) async fn admit_scrobbled(
        &self,
        user: uuid::Uuid,
        media: &str,
        action: Action,
    ) -> AppResult<EventView> {
        self.admit(user, ProviderKind::Anilist, media, action, Utc::now(), true)
            .await
    }

    async fn admit(
        &self,
        user: uuid::Uuid,
        provider: ProviderKind,
        title: &str,
        action: Action,
        occurred_at: DateTime<Utc>,
        scrobbled: bool,
    ) -> AppResult<EventView> {
        let occurred_at = chrono::SubsecRound::trunc_subsecs(occurred_at, 6);
        // The account: ours, and the provider's where the link names one,
        // so the same action on another account is another event.
        let remote = self
            .links
            .list(user)
            .await?
            .into_iter()
            .find(|link| link.provider == provider)
            .and_then(|link| link.remote_user_id);
        let account = format!("{user}/{}", remote.as_deref().unwrap_or("-"));
        let fingerprint = action::fingerprint(provider, &account, title, &action, occurred_at);
        let (view, task) = self
            .events
            .admit(Admission {
                user,
                provider,
                title: title.to_owned(),
                action,
                occurred_at,
                fingerprint,
                scrobbled,
            })
            .await?;
        if let Some(task) = task {
            self.jobs.after_commit(Some(&task)).await;
        }
        Ok(view)
    }

    pub(super) fn db(&self) -> &sea_orm::DatabaseConnection {
        self.events.db()
    }

    pub(super) fn link_store(&self) -> &Links {
        &self.links
    }

    pub(super) fn kavita(&self) -> &Kavita {
        self.providers.kavita()
    }

    /// Asks for the viewer's Kavita reading to be scrobbled now.
    pub async fn request_scrobble(&self, viewer: &Viewer) -> AppResult<entity::task::Model> {
        Ok(self
            .jobs
            .enqueue(super::scrobbler::user_task(viewer.user_id))
            .await?
            .task)
    }

    /// The viewer's events, newest first; with `all_users` (operators
    /// only: `FORBIDDEN` otherwise) everyone's, for the review queue.
    pub async fn events<N: async_graphql::OutputType>(
        &self,
        viewer: &Viewer,
        status: Option<EventStatus>,
        all_users: bool,
        page: PageRequest,
        node: impl Fn(EventView) -> N,
    ) -> AppResult<KeysetConnection<N>> {
        use entity::gateway_event::Column;
        if all_users && !viewer.is_admin() {
            return Err(AppError::Forbidden(
                "only an administrator sees every user's events",
            ));
        }
        let owner = (!all_users).then_some(viewer.user_id);
        try_paginate(
            self.events.db(),
            self.events.list(owner, status),
            Keyset::descending(vec![Column::Id]),
            page,
            |row| vec![KeyValue::Uuid(row.id)],
            |row| EventView::from_row(&row).map(&node),
        )
        .await
    }

    /// One of the viewer's events (an administrator: anyone's).
    pub async fn event(&self, viewer: &Viewer, id: uuid::Uuid) -> AppResult<Option<EventView>> {
        Ok(self
            .events
            .get(id)
            .await?
            .filter(|event| event.user_id == viewer.user_id || viewer.is_admin()))
    }

    /// Acts on an event parked for review (or for its user), as its owner
    /// or an operator: [`Review::Retry`] sends it back to delivery after
    /// its reason was dealt with (a title link, a relinked account, room in
    /// the budget); [`Review::Dismiss`] sets it aside for good.
    pub async fn review(
        &self,
        viewer: &Viewer,
        id: uuid::Uuid,
        review: Review,
    ) -> AppResult<EventView> {
        let event = self
            .event(viewer, id)
            .await?
            .ok_or(AppError::NotFound("gateway event"))?;
        let view = match review {
            Review::Retry => {
                let (view, task) = self.events.retry(&event).await?;
                self.jobs.after_commit(Some(&task)).await;
                view
            }
            Review::Dismiss => self.events.dismiss(&event).await?,
        };
        tracing::info!(event = %id, by = %viewer.user_id, ?review, "gateway event reviewed");
        Ok(view)
    }

    /// The viewer's receipts, newest first.
    pub async fn receipts<N: async_graphql::OutputType>(
        &self,
        viewer: &Viewer,
        page: PageRequest,
        node: impl Fn(entity::gateway_receipt::Model) -> N,
    ) -> AppResult<KeysetConnection<N>> {
        use entity::gateway_receipt::Column;
        try_paginate(
            self.events.db(),
            self.events.receipts(viewer.user_id),
            Keyset::descending(vec![Column::CreatedAt, Column::Fingerprint]),
            page,
            |row| {
                vec![
                    KeyValue::Time(row.created_at),
                    KeyValue::Text(row.fingerprint.clone()),
                ]
            },
            |row| Ok(node(row)),
        )
        .await
    }
}

/// What a reviewer does with a parked event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Review {
    Retry,
    Dismiss,
}

/// The manifest's feature for an action.
fn feature_of(kind: action::ActionKind) -> GatewayFeature {
    match kind {
        action::ActionKind::Progress => GatewayFeature::Progress,
        action::ActionKind::Rating => GatewayFeature::Rating,
        action::ActionKind::WantToRead => GatewayFeature::WantToRead,
        action::ActionKind::Removal => GatewayFeature::Removal,
    }
}
