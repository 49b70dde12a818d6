//! `GET /auth/oidc/start` and `GET /auth/oidc/callback`: the browser's
//! side of OIDC login.
//!
//! - `start` (optional `return_to`, a local path) answers 303 to the
//!   provider's authorize URL and sets a short-lived cookie binding the
//!   login to this browser; 429 when the address started too many (thirty a
//!   minute) or too many sign-ins are unfinished (see `service`).
//! - `callback` (`code`, `state`; or `error` when the provider declined)
//!   ends a login in the same session cookie a password login sets and 303
//!   to `return_to` (or `/`); a link ends in 303 to `/settings?linked=oidc`.
//!   A refusal is a page for a browser and our JSON error for anyone else
//!   (`http::refusal`), with its status: 400 unknown, used,
//!   expired or foreign `state` (or the provider declined), 401 an
//!   id_token that does not verify, 403 no account for the identity (with
//!   auto-creation off) or another account's link, 409 an identity linked
//!   to another account, 429 too many failures, 502 the provider failed.

use axum::{
    Router,
    extract::{FromRef, State},
    http::{HeaderMap, HeaderValue, StatusCode, Uri, header},
    response::{IntoResponse, Response},
    routing::get,
};

use super::service::{Finished, OidcService, Purpose, STATE_TTL};
use crate::{
    auth::cookie as session_cookie,
    error::AppResult,
    http::{
        Web,
        client::RequestMeta,
        identify,
        query::Query,
        refusal::{Back, refusal},
    },
};

/// The cookie that binds a started login to the browser that started it.
pub const STATE_COOKIE: &str = "trellis_oidc_state";

#[derive(Clone)]
struct OidcHttp {
    web: Web,
    oidc: OidcService,
}

impl FromRef<OidcHttp> for Web {
    fn from_ref(state: &OidcHttp) -> Web {
        state.web.clone()
    }
}

pub fn routes(web: Web, oidc: OidcService) -> Router {
    Router::new()
        .route(super::START_PATH, get(start))
        .route(super::CALLBACK_PATH, get(callback))
        .with_state(OidcHttp { web, oidc })
}

/// Path `/`, like the session cookie: behind a proxy that serves Trellis
/// under a prefix, the callback's path as the browser sees it is not ours.
fn state_cookie(value: &str, max_age_secs: i64, secure: bool) -> HeaderValue {
    session_cookie::build(STATE_COOKIE, "/", value, max_age_secs, secure)
}

async fn start(State(state): State<OidcHttp>, meta: RequestMeta, uri: Uri) -> Response {
    let secure = session_cookie::secure_for(state.web.auth.cookie_secure(), &meta);
    let started = async {
        let query = Query::parse(&uri)?;
        state
            .oidc
            .start(Purpose::Login, query.get("return_to"), meta.client_ip)
            .await
    }
    .await;
    match started {
        Ok(started) => {
            let mut response = (
                StatusCode::SEE_OTHER,
                [(header::LOCATION, started.authorize_url.to_string())],
            )
                .into_response();
            response.headers_mut().append(
                header::SET_COOKIE,
                state_cookie(&started.state, STATE_TTL.num_seconds(), secure),
            );
            response
        }
        Err(error) => error.into_response(),
    }
}

async fn callback(
    State(state): State<OidcHttp>,
    meta: RequestMeta,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    let secure = session_cookie::secure_for(state.web.auth.cookie_secure(), &meta);
    let mut response = match finish(&state, &meta, &headers, &uri).await {
        Ok(Finished::LoggedIn { issued, return_to }) => {
            let mut response =
                (StatusCode::SEE_OTHER, [(header::LOCATION, return_to)]).into_response();
            if let Some(secret) = &issued.session_secret {
                response.headers_mut().append(
                    header::SET_COOKIE,
                    session_cookie::set_session(secret, state.web.auth.session_ttl(), secure),
                );
            }
            response
        }
        Ok(Finished::Linked) => (
            StatusCode::SEE_OTHER,
            [(header::LOCATION, "/settings?linked=oidc")],
        )
            .into_response(),
        Err(error) => refusal(
            &headers,
            error,
            "The sign-in did not finish",
            Back {
                path: "/",
                label: "Back to Trellis",
            },
        ),
    };
    // The binding is spent either way.
    response
        .headers_mut()
        .append(header::SET_COOKIE, state_cookie("", 0, secure));
    response
}

async fn finish(
    state: &OidcHttp,
    meta: &RequestMeta,
    headers: &HeaderMap,
    uri: &Uri,
) -> AppResult<Finished> {
    let query = Query::parse(uri)?;
    let login_state = query.state()?;
    let code = match query.code() {
        Ok(code) => code,
        Err(declined) => {
            state.oidc.abandon(login_state).await?;
            return Err(declined
                .error(|denied| format!("the identity provider did not sign you in ({denied})")));
        }
    };
    // A link must come back to the account that started it: the session
    // cookie says who that is (a stale one is simply anonymous).
    let viewer = identify(&state.web.auth, headers).await.ok().flatten();
    state
        .oidc
        .finish(
            login_state,
            code,
            session_cookie::read(headers, STATE_COOKIE).as_deref(),
            viewer.as_ref(),
            meta,
        )
        .await
}
