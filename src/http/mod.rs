//! Plain-HTTP concerns: who the caller is, and the operational endpoints.

pub mod body;
pub mod client;
pub mod frontend;
pub mod headers;
pub mod ops;
pub mod path;
pub mod query;
pub mod refusal;
pub mod serve;

use std::{net::SocketAddr, sync::Arc};

use axum::{
    extract::{ConnectInfo, FromRef, FromRequestParts},
    http::{HeaderMap, header::AUTHORIZATION, request::Parts},
    response::{IntoResponse, Response},
};

use ipnet::IpNet;

use self::client::RequestMeta;
use crate::{
    auth::{Viewer, cookie, service::AuthService},
    error::{AppError, AppResult},
};

/// What every HTTP route needs to know who is calling: the auth service and
/// the instance's trust settings. Each route's own state holds one and
/// hands it out with [`FromRef`], so the extractors here work on any route.
#[derive(Clone)]
pub struct Web {
    pub auth: Arc<AuthService>,
    /// `TRELLIS_TRUSTED_PROXIES`: whose `X-Forwarded-*` headers are believed.
    pub trusted_proxies: Arc<[IpNet]>,
    /// `TRELLIS_CORS_ALLOWED_ORIGINS`: pages that may act with the user's cookie.
    pub allowed_origins: Arc<[String]>,
}

impl Web {
    /// Whether a browser page from `meta.origin` may act with the user's cookie.
    pub fn origin_allowed(&self, meta: &RequestMeta) -> bool {
        let Some(origin) = &meta.origin else {
            // Not a browser: there is no page that could be forging the request.
            return true;
        };
        let same_origin = meta.host.as_ref().is_some_and(|host| {
            origin == &format!("http://{host}") || origin == &format!("https://{host}")
        });
        same_origin || self.allowed_origins.iter().any(|allowed| allowed == origin)
    }

    /// The caller of a plain-HTTP route: a bearer token, or the session
    /// cookie when the page's origin may use it. `UNAUTHENTICATED` when
    /// neither names a live session (`anonymous` says what to sign in for).
    pub async fn viewer(
        &self,
        meta: &RequestMeta,
        headers: &HeaderMap,
        anonymous: &'static str,
    ) -> AppResult<Viewer> {
        if bearer_token(headers).is_none() && !self.origin_allowed(meta) {
            return Err(AppError::Forbidden(
                "this origin may not act with the session cookie",
            ));
        }
        identify(&self.auth, headers)
            .await?
            .ok_or(AppError::Unauthenticated(anonymous))
    }
}

/// The caller's facts as an extractor: the connection's peer address, with
/// forwarding headers believed only from `TRELLIS_TRUSTED_PROXIES`.
impl<S> FromRequestParts<S> for RequestMeta
where
    Web: FromRef<S>,
    S: Send + Sync,
{
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Response> {
        let ConnectInfo(peer) = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .copied()
            .ok_or_else(|| {
                AppError::internal(anyhow::anyhow!("the server runs without connection info"))
                    .into_response()
            })?;
        Ok(RequestMeta::from_parts(
            peer.ip(),
            &parts.headers,
            &Web::from_ref(state).trusted_proxies,
        ))
    }
}

/// The bearer token of a request, if it sent one.
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
        .filter(|token| !token.is_empty())
}

/// The `GoogleLogin auth=` token of a request's `Authorization` header
/// (what Google Reader apps send after `ClientLogin`).
pub fn google_login_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().strip_prefix("GoogleLogin auth="))
}

/// Whether the request's `If-None-Match` names `tag` (weak or strong) or
/// is `*`: the client's copy is current, answer `304`.
pub fn matches_etag(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(axum::http::header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|candidate| {
            let candidate = candidate.trim();
            candidate == "*" || candidate.trim_start_matches("W/") == tag
        })
}

/// Authenticates a request: a bearer token wins over the session cookie.
/// A bad bearer token is an error (the client must refresh or sign in
/// again); a stale cookie just means anonymous.
pub async fn identify(auth: &AuthService, headers: &HeaderMap) -> AppResult<Option<Viewer>> {
    // Unreadable credentials are refused, never quietly replaced by the cookie.
    if headers
        .get(AUTHORIZATION)
        .is_some_and(|value| value.to_str().is_err())
    {
        return Err(AppError::Unauthenticated(
            "the Authorization header is not printable ASCII",
        ));
    }
    if let Some(token) = bearer_token(headers) {
        return auth.authenticate_bearer(token).await.map(Some);
    }
    match cookie::session_secret(headers) {
        Some(secret) => auth.authenticate_cookie(&secret).await,
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_scheme_is_case_insensitive_and_needs_a_token() {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), Some("abc"));
        headers.insert(AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
        headers.insert(AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer_token(&headers), None);
    }
}
