//! The one interface every domain (`feeds`, `nodes`, and later `docs` and
//! `gateway`) implements, so the app wires a domain without knowing its
//! fields (`docs/architecture.md`, "Domains").
//!
//! A domain module exports a `Settings` (`clap::Args`, flattened into the
//! command line by the app) and `setup(&Settings, &Platform)`, which
//! returns its [`Setup`]. The app then registers every domain's task kinds,
//! starts the runner, and builds each [`Domain`] with it. A domain reaches
//! only into infrastructure (`db`, `jobs`, `httpc`, `auth`, `graphql`,
//! `http`, `error`), never into another domain or the app.

use std::sync::Arc;

use async_graphql::Data;
use axum::Router;
use futures_util::future::BoxFuture;
use sea_orm::DatabaseConnection;
use tokio::{sync::watch, task::JoinHandle};

use crate::{
    http::Web,
    jobs::{Jobs, handler::Registry},
};

/// What the platform hands a domain to build itself from. A domain makes
/// its own outbound clients (`httpc::HttpClient::new`), each with the
/// address policy, timeout and body cap of its callers.
#[derive(Clone)]
pub struct Platform {
    pub db: DatabaseConnection,
    /// Who is calling (the auth service, trusted proxies, allowed origins).
    pub web: Web,
}

/// A domain before the runner exists.
pub trait Setup {
    /// Its task kinds and periodic jobs.
    fn register_tasks(&self, registry: &mut Registry);
    /// The domain, with the runner its services enqueue on.
    fn build(self: Box<Self>, jobs: &Jobs) -> Arc<dyn Domain>;
}

/// A built domain: what the app asks of it.
pub trait Domain: Send + Sync {
    /// For logs.
    fn name(&self) -> &'static str;

    /// Puts its typed services and a fresh set of its DataLoaders into one
    /// GraphQL operation's data; resolvers read them with
    /// `ctx.service::<T>()`.
    fn request_data(&self, data: &mut Data);

    /// Its plain-HTTP routes, each router with its own state.
    fn routes(&self) -> Router {
        Router::new()
    }

    /// Runs once at start-up, before any worker (e.g. adopting a changed
    /// configuration).
    fn prepare(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async { Ok(()) })
    }

    /// Its background loops, in processes that run workers.
    fn background(&self, _stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        Vec::new()
    }
}
