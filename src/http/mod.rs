//! Plain-HTTP concerns: who the caller is, and the operational endpoints.

pub mod body;
pub mod client;
pub mod headers;
pub mod ops;
pub mod path;
pub mod serve;

use std::net::SocketAddr;

use axum::{
    extract::{ConnectInfo, FromRequestParts},
    http::{HeaderMap, header::AUTHORIZATION, request::Parts},
    response::{IntoResponse, Response},
};

use self::client::RequestMeta;
use crate::{
    app::AppState,
    auth::{Viewer, cookie, service::AuthService},
    error::{AppError, AppResult},
};

/// The caller's facts as an extractor: the connection's peer address, with
/// forwarding headers believed only from `TRELLIS_TRUSTED_PROXIES`.
impl FromRequestParts<AppState> for RequestMeta {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
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
            &state.services.config.trusted_proxies,
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
