//! OIDC login (SPEC §2, issue 22): the authorization code flow with PKCE
//! (S256), `state` and `nonce`, against one configured identity provider.
//!
//! - [`settings`] reads `TRELLIS_OIDC_*`.
//! - [`provider`] fetches discovery and JWKS through `httpc`, cached, the
//!   keys again on an unknown `kid`, and verifies id_tokens.
//! - [`service`] starts authorizations (single use, ten minutes), finishes
//!   one into the same session a password login opens, links and unlinks
//!   identities.
//! - [`rules`] holds the pure decisions (safe `return_to`, usernames, roles).
//! - [`http`] (`/auth/oidc/start`, `/auth/oidc/callback`) and [`graphql`]
//!   (`authProviders`, `linkOidc`, `unlinkOidc`) are thin layers.

pub mod graphql;
pub mod http;
pub mod provider;
pub mod rules;
pub mod service;
pub mod settings;

use std::sync::Arc;

use async_graphql::Data;
use axum::Router;

pub use self::{service::OidcService, settings::Settings};
use crate::{
    domain::{Domain, Platform, Setup},
    http::Web,
    jobs::{Jobs, handler::Registry},
};

pub const START_PATH: &str = "/auth/oidc/start";
pub const CALLBACK_PATH: &str = "/auth/oidc/callback";

/// Wires OIDC login like a domain: its service into every GraphQL
/// operation, its two routes. With `TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN`,
/// the auth service refuses the `login` mutation from here on.
pub fn setup(settings: &Settings, platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    let config = settings.config()?;
    if config.is_some() && settings.oidc_disable_password_login {
        platform.web.auth.disable_password_login();
    }
    let service = OidcService::new(
        config,
        platform.web.auth.clone(),
        platform.db.clone(),
        platform.secret.clone(),
        platform.public_url.clone(),
    )?;
    Ok(Box::new(OidcSetup {
        service,
        web: platform.web.clone(),
    }))
}

struct OidcSetup {
    service: OidcService,
    web: Web,
}

impl Setup for OidcSetup {
    fn register_tasks(&self, _registry: &mut Registry) {}

    fn build(self: Box<Self>, _jobs: &Jobs) -> Arc<dyn Domain> {
        Arc::new(Oidc {
            service: self.service,
            web: self.web,
        })
    }
}

struct Oidc {
    service: OidcService,
    web: Web,
}

impl Domain for Oidc {
    fn name(&self) -> &'static str {
        "oidc"
    }

    fn request_data(&self, data: &mut Data) {
        data.insert(self.service.clone());
    }

    fn routes(&self) -> Router {
        http::routes(self.web.clone(), self.service.clone())
    }
}
