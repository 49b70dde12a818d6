//! The browser session cookie: an opaque secret, HttpOnly, SameSite=Lax,
//! Secure whenever the client reached us over HTTPS.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, header};
use cookie::{Cookie, SameSite};

use crate::{config::CookieSecure, http::client::RequestMeta};

pub const SESSION_COOKIE: &str = "trellis_session";

pub fn secure_for(policy: CookieSecure, meta: &RequestMeta) -> bool {
    match policy {
        CookieSecure::Always => true,
        CookieSecure::Never => false,
        CookieSecure::Auto => meta.https,
    }
}

pub fn set_session(secret: &str, max_age: Duration, secure: bool) -> HeaderValue {
    build(
        SESSION_COOKIE,
        "/",
        secret,
        max_age.as_secs() as i64,
        secure,
    )
}

pub fn clear_session(secure: bool) -> HeaderValue {
    build(SESSION_COOKIE, "/", "", 0, secure)
}

/// A cookie of ours (`name=value` under `path`), with the session cookie's
/// protections: HttpOnly, SameSite=Lax, Secure when `secure`. A
/// `max_age_secs` of 0 clears it.
pub fn build(
    name: &'static str,
    path: &'static str,
    value: &str,
    max_age_secs: i64,
    secure: bool,
) -> HeaderValue {
    let cookie = Cookie::build((name, value.to_owned()))
        .path(path)
        .http_only(true)
        .same_site(SameSite::Lax)
        .secure(secure)
        .max_age(cookie::time::Duration::seconds(max_age_secs))
        .build();
    // Our own cookie string is ASCII by construction (base64url secret).
    HeaderValue::from_str(&cookie.to_string()).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The session secret from the request's `Cookie` headers, if present.
pub fn session_secret(headers: &HeaderMap) -> Option<String> {
    read(headers, SESSION_COOKIE)
}

/// The value of the (non-empty) cookie `name` the request sent, if any.
pub fn read(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(Cookie::split_parse)
        .filter_map(Result::ok)
        .find(|cookie| cookie.name() == name && !cookie.value().is_empty())
        .map(|cookie| cookie.value().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_cookie_has_the_protective_flags() {
        let value = set_session("trs_abc", Duration::from_secs(60), true);
        let text = value.to_str().unwrap();
        for flag in [
            "trellis_session=trs_abc",
            "HttpOnly",
            "SameSite=Lax",
            "Secure",
            "Path=/",
            "Max-Age=60",
        ] {
            assert!(text.contains(flag), "{flag} missing from {text}");
        }
        let plain = set_session("trs_abc", Duration::from_secs(60), false);
        assert!(!plain.to_str().unwrap().contains("Secure"));
    }

    #[test]
    fn reads_the_secret_among_other_cookies() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "theme=dark; trellis_session=trs_xyz; a=b".parse().unwrap(),
        );
        assert_eq!(session_secret(&headers).as_deref(), Some("trs_xyz"));
        headers.insert(header::COOKIE, "trellis_session=".parse().unwrap());
        assert_eq!(session_secret(&headers), None);
    }
}
