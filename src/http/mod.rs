//! Plain-HTTP concerns: who the caller is, and the operational endpoints.

pub mod client;
pub mod ops;

use axum::http::{HeaderMap, header::AUTHORIZATION};

use crate::{
    auth::{Viewer, cookie, service::AuthService},
    error::AppResult,
};

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
