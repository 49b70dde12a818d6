//! The identity provider as Trellis reaches it: its discovery document and
//! JWKS, fetched through the one outbound client (`httpc`) and cached in
//! memory, the JWKS fetched again once when an id_token names a key it
//! does not hold (the provider rotated its keys).
//!
//! Every request goes through an [`HttpClient`] whose destination is one
//! configured origin ([`Destination::Configured`]): the issuer's, as the
//! admin set it (reachable on loopback or a LAN too), and the origins of
//! the token endpoint and JWKS that the issuer's own discovery document
//! names. Nothing else is reachable from here; redirects off an origin are
//! refused.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, RwLock},
};

use openidconnect::{
    AsyncHttpClient, ClientId, ClientSecret, HttpRequest, HttpResponse, IssuerUrl, Nonce,
    core::{CoreIdToken, CoreIdTokenClaims, CoreJsonWebKeySet, CoreProviderMetadata},
};

use super::settings::OidcConfig;
use crate::httpc::{Destination, FetchError, HttpClient, HttpSettings};

/// Why a request to the provider failed.
#[derive(Debug, thiserror::Error)]
pub enum ProviderError {
    #[error("{0}")]
    Fetch(#[from] FetchError),
    #[error("{url} is neither the issuer nor an endpoint its discovery document names")]
    NotAllowed { url: String },
    #[error("the provider answered {status} for {what}")]
    Status { status: u16, what: &'static str },
    #[error("the provider's {what} is not what OpenID Connect describes: {detail}")]
    Malformed { what: &'static str, detail: String },
    #[error("the request could not be sent: {0}")]
    Request(String),
}

/// The one outbound client, per allowed origin, as openidconnect's HTTP
/// client.
#[derive(Clone)]
pub struct OidcHttp {
    clients: Arc<RwLock<Vec<(url::Origin, HttpClient)>>>,
}

impl OidcHttp {
    fn new() -> Self {
        OidcHttp {
            clients: Arc::default(),
        }
    }

    /// Lets requests reach `url`'s origin (the issuer, or an endpoint its
    /// discovery document names).
    fn allow(&self, url: &url::Url) -> Result<(), ProviderError> {
        let origin = url.origin();
        let mut clients = self
            .clients
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if clients.iter().any(|(known, _)| *known == origin) {
            return Ok(());
        }
        let destination = Destination::configured(url).map_err(FetchError::from)?;
        let client = HttpClient::new(HttpSettings {
            destination,
            // Discovery documents and key sets are small.
            max_body_bytes: 1024 * 1024,
            ..HttpSettings::default()
        })
        .map_err(|error| ProviderError::Request(error.to_string()))?;
        clients.push((origin, client));
        Ok(())
    }

    fn client_for(&self, url: &url::Url) -> Result<HttpClient, ProviderError> {
        let origin = url.origin();
        self.clients
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .find(|(known, _)| *known == origin)
            .map(|(_, client)| client.clone())
            .ok_or_else(|| ProviderError::NotAllowed {
                url: origin.ascii_serialization(),
            })
    }

    /// Sends one request through the client of its origin.
    async fn send(&self, request: HttpRequest) -> Result<HttpResponse, ProviderError> {
        let url = url::Url::parse(&request.uri().to_string())
            .map_err(|error| ProviderError::Request(error.to_string()))?;
        let client = self.client_for(&url)?;
        let (parts, body) = request.into_parts();
        let fetched = client
            .request(
                parts.method,
                url.as_str(),
                parts.headers,
                (!body.is_empty()).then_some(body),
            )
            .await?;
        let mut response = HttpResponse::new(fetched.body);
        *response.status_mut() = fetched.status;
        *response.headers_mut() = fetched.headers;
        Ok(response)
    }
}

impl<'c> AsyncHttpClient<'c> for OidcHttp {
    type Error = ProviderError;
    type Future =
        Pin<Box<dyn Future<Output = Result<HttpResponse, ProviderError>> + Send + Sync + 'c>>;

    fn call(&'c self, request: HttpRequest) -> Self::Future {
        let http = self.clone();
        // On a task of its own: openidconnect wants a `Sync` future, and
        // a join handle is one whatever the request holds.
        let sent = tokio::spawn(async move { http.send(request).await });
        Box::pin(async move {
            sent.await
                .map_err(|error| ProviderError::Request(error.to_string()))?
        })
    }
}

/// What the id_token said, once verified.
#[derive(Debug, Clone)]
pub struct VerifiedIdentity {
    pub issuer: String,
    pub subject: String,
    /// Every claim of the id_token's payload (for the username and
    /// `groups`), read only after its signature verified.
    pub claims: serde_json::Map<String, serde_json::Value>,
}

/// Why an id_token was refused. The callback answers `UNAUTHENTICATED`
/// with [`Refusal::message`]; no session is issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Signature,
    Audience,
    Issuer,
    Expired,
    Nonce,
    Other,
}

impl Refusal {
    pub fn message(self) -> &'static str {
        match self {
            Refusal::Signature => {
                "the id_token's signature does not verify against the provider's keys"
            }
            Refusal::Audience => "the id_token was issued for another client (aud)",
            Refusal::Issuer => "the id_token was issued by another issuer (iss)",
            Refusal::Expired => "the id_token has expired",
            Refusal::Nonce => "the id_token's nonce does not belong to this login",
            Refusal::Other => "the id_token does not verify",
        }
    }
}

/// The configured provider: its discovery document and keys, cached.
pub struct Provider {
    config: OidcConfig,
    http: OidcHttp,
    cached: tokio::sync::RwLock<Option<Arc<CoreProviderMetadata>>>,
}

impl Provider {
    pub fn new(config: OidcConfig) -> anyhow::Result<Self> {
        let http = OidcHttp::new();
        let issuer = url::Url::parse(&config.issuer)?;
        http.allow(&issuer)?;
        Ok(Provider {
            config,
            http,
            cached: tokio::sync::RwLock::new(None),
        })
    }

    pub fn config(&self) -> &OidcConfig {
        &self.config
    }

    pub fn http(&self) -> &OidcHttp {
        &self.http
    }

    pub fn client_id(&self) -> ClientId {
        ClientId::new(self.config.client_id.clone())
    }

    pub fn client_secret(&self) -> Option<ClientSecret> {
        self.config
            .client_secret
            .as_ref()
            .map(|secret| ClientSecret::new(secret.expose().to_owned()))
    }

    /// The discovery document with its keys: cached after the first fetch.
    pub async fn metadata(&self) -> Result<Arc<CoreProviderMetadata>, ProviderError> {
        if let Some(cached) = self.cached.read().await.as_ref() {
            return Ok(cached.clone());
        }
        let mut slot = self.cached.write().await;
        if let Some(cached) = slot.as_ref() {
            return Ok(cached.clone());
        }
        let discovered = Arc::new(self.discover().await?);
        *slot = Some(discovered.clone());
        Ok(discovered)
    }

    /// Fetches the discovery document (it must name our issuer exactly),
    /// allows the endpoints it names, then fetches its JWKS.
    async fn discover(&self) -> Result<CoreProviderMetadata, ProviderError> {
        let issuer = IssuerUrl::new(self.config.issuer.clone()).map_err(|error| {
            ProviderError::Malformed {
                what: "issuer URL",
                detail: error.to_string(),
            }
        })?;
        let discovery_url = issuer
            .join(".well-known/openid-configuration")
            .map_err(|error| ProviderError::Malformed {
                what: "issuer URL",
                detail: error.to_string(),
            })?;
        let fetched = self
            .http
            .client_for(&discovery_url)?
            .get(discovery_url.as_str(), Default::default())
            .await?;
        if !fetched.status.is_success() {
            return Err(ProviderError::Status {
                status: fetched.status.as_u16(),
                what: "its discovery document",
            });
        }
        let metadata: CoreProviderMetadata =
            serde_json::from_slice(&fetched.body).map_err(|error| ProviderError::Malformed {
                what: "discovery document",
                detail: error.to_string(),
            })?;
        if metadata.issuer() != &issuer {
            return Err(ProviderError::Malformed {
                what: "discovery document",
                detail: format!(
                    "it names the issuer {}, not {} (TRELLIS_OIDC_ISSUER)",
                    metadata.issuer().as_str(),
                    issuer.as_str()
                ),
            });
        }
        self.http.allow(metadata.jwks_uri().url())?;
        if let Some(token) = metadata.token_endpoint() {
            self.http.allow(token.url())?;
        }
        let jwks = self.fetch_jwks(&metadata).await?;
        Ok(metadata.set_jwks(jwks))
    }

    async fn fetch_jwks(
        &self,
        metadata: &CoreProviderMetadata,
    ) -> Result<CoreJsonWebKeySet, ProviderError> {
        let url = metadata.jwks_uri().url();
        let fetched = self
            .http
            .client_for(url)?
            .get(url.as_str(), Default::default())
            .await?;
        if !fetched.status.is_success() {
            return Err(ProviderError::Status {
                status: fetched.status.as_u16(),
                what: "its JWKS",
            });
        }
        serde_json::from_slice(&fetched.body).map_err(|error| ProviderError::Malformed {
            what: "JWKS",
            detail: error.to_string(),
        })
    }

    /// Fetches the JWKS again (an id_token named a key we do not hold) and
    /// caches the discovery document with the new keys.
    async fn refresh_jwks(
        &self,
        stale: &CoreProviderMetadata,
    ) -> Result<Arc<CoreProviderMetadata>, ProviderError> {
        let jwks = self.fetch_jwks(stale).await?;
        let fresh = Arc::new(stale.clone().set_jwks(jwks));
        *self.cached.write().await = Some(fresh.clone());
        tracing::info!(issuer = %self.config.issuer, "OIDC provider keys refreshed");
        Ok(fresh)
    }

    /// Verifies an id_token (signature against the provider's keys, `iss`,
    /// `aud`, `exp`, `nonce`) with openidconnect's verifier; an unknown key
    /// id fetches the JWKS once more and tries again.
    pub async fn verify(
        &self,
        metadata: Arc<CoreProviderMetadata>,
        id_token: &CoreIdToken,
        nonce: &Nonce,
    ) -> Result<Result<VerifiedIdentity, Refusal>, ProviderError> {
        use openidconnect::{ClaimsVerificationError, SignatureVerificationError};
        let first = self.check(&metadata, id_token, nonce);
        let outcome = match first {
            Err(ClaimsVerificationError::SignatureVerification(
                SignatureVerificationError::NoMatchingKey,
            )) => {
                let fresh = self.refresh_jwks(&metadata).await?;
                self.check(&fresh, id_token, nonce)
            }
            other => other,
        };
        Ok(match outcome {
            Ok((issuer, subject)) => match payload(id_token) {
                Some(claims) => Ok(VerifiedIdentity {
                    issuer,
                    subject,
                    claims,
                }),
                None => Err(Refusal::Other),
            },
            Err(error) => {
                tracing::info!(error = %error, "OIDC id_token refused");
                Err(refusal(&error))
            }
        })
    }

    fn check(
        &self,
        metadata: &CoreProviderMetadata,
        id_token: &CoreIdToken,
        nonce: &Nonce,
    ) -> Result<(String, String), openidconnect::ClaimsVerificationError> {
        let client = openidconnect::core::CoreClient::from_provider_metadata(
            metadata.clone(),
            self.client_id(),
            self.client_secret(),
        );
        let verifier = client.id_token_verifier();
        let claims: &CoreIdTokenClaims = id_token.claims(&verifier, nonce)?;
        Ok((
            claims.issuer().as_str().to_owned(),
            claims.subject().as_str().to_owned(),
        ))
    }
}

fn refusal(error: &openidconnect::ClaimsVerificationError) -> Refusal {
    use openidconnect::ClaimsVerificationError as E;
    match error {
        E::SignatureVerification(_) => Refusal::Signature,
        E::InvalidAudience(_) => Refusal::Audience,
        E::InvalidIssuer(_) => Refusal::Issuer,
        E::Expired(_) => Refusal::Expired,
        E::InvalidNonce(_) => Refusal::Nonce,
        _ => Refusal::Other,
    }
}

/// The claims of an id_token whose signature already verified.
fn payload(id_token: &CoreIdToken) -> Option<serde_json::Map<String, serde_json::Value>> {
    use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
    let compact = id_token.to_string();
    let part = compact.split('.').nth(1)?;
    let bytes = URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok()?;
    serde_json::from_slice(&bytes).ok()
}
