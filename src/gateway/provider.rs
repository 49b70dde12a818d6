//! The provider contract: what the gateway needs from Kavita, AniList and
//! any later provider (MyAnimeList): a new provider is a module
//! implementing [`Provider`] plus one registration line
//! (`service::Providers::new`); nothing else changes.
//!
//! A provider speaks its own protocol through an [`Upstream`]
//! (`super::upstream`), which enforces the host's cooldown and records new
//! ones, so no provider can forget either.

use std::time::Duration;

use async_graphql::Enum;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use url::Url;

use super::action::{Action, ActionKind, RemoteEntry};
use crate::{error::AppError, httpc::FetchError};

/// The providers the gateway speaks to.
#[derive(
    Enum,
    Copy,
    Clone,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
)]
#[graphql(name = "Provider")]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ProviderKind {
    Kavita,
    Anilist,
}

impl ProviderKind {
    /// The stored and logged name.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Kavita => "kavita",
            ProviderKind::Anilist => "anilist",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "kavita" => Some(ProviderKind::Kavita),
            "anilist" => Some(ProviderKind::Anilist),
            _ => None,
        }
    }

    /// For messages.
    pub fn display(self) -> &'static str {
        match self {
            ProviderKind::Kavita => "Kavita",
            ProviderKind::Anilist => "AniList",
        }
    }
}

/// What a gateway can do with a provider, as the manifest names it.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum GatewayFeature {
    /// Public catalog reads (`providerMetadata`), cached.
    PublicMetadata,
    /// Reading progress (chapters read).
    Progress,
    /// A score or rating.
    Rating,
    /// A want-to-read / planning list.
    WantToRead,
    /// Taking a title off the user's list.
    Removal,
    /// Kavita reading turned into this provider's events.
    ScrobbleFromKavita,
}

/// One feature as a provider supports it: whether at all, and what it
/// cannot do, in words for the person reading the manifest.
#[derive(Clone, Debug)]
pub struct FeatureSupport {
    pub feature: GatewayFeature,
    pub supported: bool,
    /// Which of the instance's or the user's pieces it needs.
    pub needs: Needs,
    pub limitation: Option<&'static str>,
}

impl FeatureSupport {
    /// A supported feature.
    pub fn supported(
        feature: GatewayFeature,
        needs: Needs,
        limitation: Option<&'static str>,
    ) -> Self {
        FeatureSupport {
            feature,
            supported: true,
            needs,
            limitation,
        }
    }
}

/// What a feature needs before it is configured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    /// The instance's public access (Kavita's catalog key; nothing for
    /// AniList).
    Public,
    /// The user's own linked account.
    Account,
    /// Linked Kavita and linked AniList accounts.
    BothAccounts,
}

/// How a user links an account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkMethod {
    /// The user pastes an API key (`linkKavita`).
    ApiKey,
    /// An OAuth authorization (`startProviderLink`); `pkce` when the
    /// provider supports a PKCE verifier.
    OAuth { pkce: bool },
}

/// The account a credential belongs to, as the provider says.
#[derive(Clone, Debug, Default)]
pub struct Account {
    pub remote_id: Option<String>,
    pub name: Option<String>,
}

/// A credential a provider issued (an OAuth access token).
pub struct Issued {
    pub token: SecretString,
    pub expires_at: Option<DateTime<Utc>>,
}

/// A public lookup.
#[derive(Enum, Copy, Clone, Debug, PartialEq, Eq)]
pub enum MetadataKind {
    /// One title by the provider's id (AniList media, Kavita series).
    Title,
    /// Titles matching a text query.
    Search,
}

impl MetadataKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MetadataKind::Title => "title",
            MetadataKind::Search => "search",
        }
    }
}

/// A public answer: its JSON text and how long it may be cached (`None`:
/// not at all).
pub struct Metadata {
    pub payload: String,
    pub ttl: Option<Duration>,
}

/// Why a provider call failed. Messages name the provider and never a
/// credential.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{0} is not configured")]
    NotConfigured(&'static str),
    #[error("{host} asked us to wait until {until}")]
    Cooldown { host: String, until: DateTime<Utc> },
    #[error("{0} refused the credential")]
    CredentialRefused(&'static str),
    #[error("{0} has no such title")]
    NotFound(&'static str),
    #[error("{provider} could not be reached: {cause}")]
    Unreachable {
        provider: &'static str,
        cause: FetchError,
    },
    #[error("{provider} answered unexpectedly: {what}")]
    Unexpected {
        provider: &'static str,
        what: String,
    },
    #[error("{0}")]
    Unsupported(&'static str),
    /// The action cannot apply to this title as the provider has it (a
    /// chapter the series does not have): a person must look at it.
    #[error("{0}")]
    Inapplicable(String),
}

impl From<ProviderError> for AppError {
    fn from(error: ProviderError) -> Self {
        match error {
            ProviderError::NotConfigured(_)
            | ProviderError::Unsupported(_)
            | ProviderError::Inapplicable(_) => AppError::bad_input("provider", error.to_string()),
            ProviderError::Cooldown { until, .. } => AppError::RateLimited {
                retry_after: (until - Utc::now()).num_seconds().max(1) as u64,
            },
            ProviderError::CredentialRefused(_) => AppError::Upstream(error.to_string()),
            ProviderError::NotFound(_) => AppError::NotFound("title"),
            ProviderError::Unreachable { .. } | ProviderError::Unexpected { .. } => {
                AppError::Upstream(error.to_string())
            }
        }
    }
}

/// One provider. Every network call goes through the provider's
/// `Upstream`.
#[async_trait]
pub trait Provider: Send + Sync {
    fn kind(&self) -> ProviderKind;

    /// Whether the instance has what the provider needs at all (its URL).
    fn configured(&self) -> bool;

    /// Whether public reads have their credential (Kavita's catalog key).
    fn public_configured(&self) -> bool;

    /// The upstream hosts it calls (for cooldowns in the manifest).
    fn hosts(&self) -> Vec<String>;

    /// Every feature, supported or not, with its limitation.
    fn features(&self) -> Vec<FeatureSupport>;

    fn link_method(&self) -> LinkMethod;

    /// Whether users can link an account now (the instance has what the
    /// link needs: the provider's URL, an OAuth client).
    fn link_configured(&self) -> bool {
        self.configured()
    }

    /// Checks a user's credential with the provider and says whose it is.
    /// [`ProviderError::CredentialRefused`] when the provider refuses it.
    async fn verify(&self, credential: &str) -> Result<Account, ProviderError>;

    /// Where to send the user to authorize an OAuth link.
    fn authorize_url(
        &self,
        _state: &str,
        _redirect: &Url,
        _pkce_challenge: Option<&str>,
    ) -> Result<Url, ProviderError> {
        Err(ProviderError::Unsupported(
            "this provider links with an API key, not OAuth",
        ))
    }

    /// Trades an OAuth authorization code for a token.
    async fn exchange_code(
        &self,
        _code: &str,
        _redirect: &Url,
        _pkce_verifier: Option<&str>,
    ) -> Result<Issued, ProviderError> {
        Err(ProviderError::Unsupported(
            "this provider links with an API key, not OAuth",
        ))
    }

    /// A public lookup, never with a user's credential.
    async fn metadata(
        &self,
        kind: MetadataKind,
        id: Option<&str>,
        query: Option<&str>,
    ) -> Result<Metadata, ProviderError>;

    /// Whether public reads work now (for `checkProvider`).
    async fn probe_public(&self) -> Result<(), ProviderError>;

    /// Whether the provider carries `kind` as a personal write. The
    /// manifest's features say the same in words.
    fn writes(&self, _kind: ActionKind) -> bool {
        false
    }

    /// Reads the user's entry for `title` (a read-back), as far as an
    /// action of `kind` needs, always with the user's own credential. An
    /// entry the user does not have is [`RemoteEntry::default`], not an
    /// error.
    async fn read_entry(
        &self,
        _who: &Personal<'_>,
        _title: &str,
        _kind: ActionKind,
    ) -> Result<RemoteEntry, ProviderError> {
        Err(ProviderError::Unsupported(
            "this provider takes no personal actions",
        ))
    }

    /// Sends `action` for `title` with the user's own credential. Success
    /// here confirms nothing: only a read-back showing the value does.
    /// `entry` is what the read-back before it found (for a removal, the
    /// entry to delete).
    async fn write(
        &self,
        _who: &Personal<'_>,
        _title: &str,
        _action: &Action,
        _entry: &RemoteEntry,
    ) -> Result<(), ProviderError> {
        Err(ProviderError::Unsupported(
            "this provider takes no personal actions",
        ))
    }

    /// Whether removing `entry` keeps everything but the list entry itself
    /// (seed: "preserve remote progress, rating, history and auxiliary
    /// fields"); `Err` says which fields hold what would be lost.
    fn removal_precondition(&self, _entry: &RemoteEntry) -> Result<(), String> {
        Ok(())
    }
}

/// A user's own account at a provider, for a personal action. Never the
/// instance's catalog credential.
pub struct Personal<'a> {
    pub credential: &'a str,
    /// The account's id at the provider, where it has one (AniList).
    pub remote_user_id: Option<&'a str>,
}
