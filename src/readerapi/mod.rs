//! The reader protocols mobile apps speak, over the feeds service: the
//! Fever API ([`fever`], at `/fever/`) and the Google Reader API
//! ([`greader`], at `/accounts/ClientLogin` and `/reader/api/0/…`), with
//! [`form`] (their parameters). They build no SQL: items, streams and
//! subscriptions go through [`FeedsService`], the reader password and its
//! sign-ins through [`ReaderAccounts`].
//!
//! An adapter over one domain (`feeds`), wired as a domain of its own: it
//! has routes and nothing else ([`crate::domain`]).

pub mod fever;
pub mod form;
pub mod greader;

use std::sync::Arc;

use async_graphql::Data;
use axum::{Router, extract::FromRef, routing::post};

use crate::{
    domain::{Domain, Platform, Setup},
    feeds::{
        self, discover::Discoverer, icons::IconLinks, reader_auth::ReaderAccounts,
        service::FeedsService,
    },
    http::Web,
    httpc::HttpClient,
    jobs::{Jobs, handler::Registry},
};

/// What the reader APIs' routes read.
#[derive(Clone)]
pub struct ReaderState {
    pub web: Web,
    pub feeds: FeedsService,
    pub accounts: ReaderAccounts,
    /// `subscription/quickadd` finds feeds as `discoverFeeds` does.
    pub discoverer: Discoverer,
    /// Google Reader's `iconUrl`: our own icon route.
    pub icons: IconLinks,
}

impl FromRef<ReaderState> for Web {
    fn from_ref(state: &ReaderState) -> Web {
        state.web.clone()
    }
}

/// Builds the reader APIs over the feeds' settings: the same outbound
/// guard for the feeds they add.
pub fn setup(settings: &feeds::Settings, platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    Ok(Box::new(ReaderApi(ReaderState {
        web: platform.web.clone(),
        feeds: FeedsService::with_search_limits(platform.db.clone(), settings.search_limits()),
        accounts: ReaderAccounts::new(platform.db.clone(), platform.web.auth.clone()),
        discoverer: Discoverer(HttpClient::new(settings.http_settings())?),
        icons: IconLinks {
            public_url: platform.public_url.clone(),
            secret: platform.secret.clone(),
        },
    })))
}

struct ReaderApi(ReaderState);

impl Setup for ReaderApi {
    fn register_tasks(&self, _registry: &mut Registry) {}

    fn build(self: Box<Self>, _jobs: &Jobs) -> Arc<dyn Domain> {
        Arc::new(*self)
    }
}

impl Domain for ReaderApi {
    fn name(&self) -> &'static str {
        "readerapi"
    }

    fn request_data(&self, _data: &mut Data) {}

    fn routes(&self) -> Router {
        Router::new()
            .route("/fever", post(fever::fever))
            .route("/fever/", post(fever::fever))
            .merge(greader::routes())
            .with_state(self.0.clone())
    }
}
