//! `GET /gateway/oauth/{provider}/callback`: where a provider sends the
//! user back after its consent page. The signed-in user (session cookie)
//! must be the one who started the link; the `state` is consumed whatever
//! happens. A finished link redirects (303) to the web client's settings
//! page; a refusal has its status (400 unknown, used or expired state, 401
//! signed out, 403 another user's state, 502 when the provider refused the
//! code) and is a page for a browser, our JSON error for anyone else
//! (`http::refusal`).

use axum::{
    Router,
    extract::{FromRef, State},
    http::{HeaderMap, Uri, header::LOCATION},
    response::{IntoResponse, Response},
    routing::get,
};
use reqwest::StatusCode;

use super::{provider::ProviderKind, service::GatewayService};
use crate::{
    error::{AppError, AppResult},
    http::{
        Web,
        client::RequestMeta,
        path::PathParam,
        query::Query,
        refusal::{Back, refusal},
    },
};

#[derive(Clone)]
struct GatewayHttp {
    web: Web,
    gateway: GatewayService,
}

impl FromRef<GatewayHttp> for Web {
    fn from_ref(state: &GatewayHttp) -> Web {
        state.web.clone()
    }
}

pub fn routes(web: Web, gateway: GatewayService) -> Router {
    Router::new()
        .route("/gateway/oauth/{provider}/callback", get(callback))
        .with_state(GatewayHttp { web, gateway })
}

async fn callback(
    State(state): State<GatewayHttp>,
    PathParam(provider): PathParam<String>,
    meta: RequestMeta,
    headers: HeaderMap,
    uri: Uri,
) -> Response {
    match finish(&state, &provider, &meta, &headers, &uri).await {
        Ok(provider) => {
            let location = format!("/settings?linked={}", provider.as_str());
            (StatusCode::SEE_OTHER, [(LOCATION, location)]).into_response()
        }
        Err(error) => refusal(
            &headers,
            error,
            "The account was not linked",
            Back {
                path: "/gateway",
                label: "Back to the gateway",
            },
        ),
    }
}

async fn finish(
    state: &GatewayHttp,
    provider: &str,
    meta: &RequestMeta,
    headers: &HeaderMap,
    uri: &Uri,
) -> AppResult<ProviderKind> {
    let provider = ProviderKind::parse(provider).ok_or(AppError::NotFound("provider"))?;
    let query = Query::parse(uri)?;
    let viewer = state
        .web
        .viewer(meta, headers, "sign in, then link the account again")
        .await?;
    let link_state = query.state()?;
    let code = match query.code() {
        Ok(code) => code,
        Err(declined) => {
            state
                .gateway
                .abandon_link(&viewer, provider, link_state)
                .await?;
            return Err(declined.error(|denied| {
                format!(
                    "{} did not authorize the link ({denied})",
                    provider.display()
                )
            }));
        }
    };
    state
        .gateway
        .finish_link(&viewer, provider, link_state, code)
        .await?;
    Ok(provider)
}
