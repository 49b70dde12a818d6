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

use std::{
    path::PathBuf,
    sync::{Arc, OnceLock},
};

use async_graphql::Data;
use axum::Router;
use futures_util::future::BoxFuture;
use sea_orm::DatabaseConnection;
use tokio::{sync::watch, task::JoinHandle};

use crate::{
    auth::keys::ServerSecret,
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
    /// The server-held secret: seal secrets kept at rest with it
    /// (`ServerSecret::seal`/`open`, a label per use), sign state files
    /// (`mac_hex`). Never log or return what it opens.
    pub secret: Arc<ServerSecret>,
    /// The data directory (`TRELLIS_DATA_DIR`), created `0700`; a domain
    /// keeps its files in a folder of its own under it.
    pub data_dir: PathBuf,
    /// The URL browsers and providers reach this server at (OAuth
    /// callbacks, links in answers).
    pub public_url: PublicUrl,
}

/// `TRELLIS_PUBLIC_URL`, or, when it is not set, `http://` + the address
/// the listener bound (known only once it has: read it when a request
/// needs it, not at build time).
#[derive(Clone, Debug, Default)]
pub struct PublicUrl(Arc<OnceLock<url::Url>>);

impl PublicUrl {
    /// A public URL set now (configured), or left to the listener.
    pub fn new(configured: Option<url::Url>) -> Self {
        let cell = OnceLock::new();
        if let Some(url) = configured {
            let _ = cell.set(url);
        }
        PublicUrl(Arc::new(cell))
    }

    /// Called once the listener has bound: `http://<addr>/` unless a URL
    /// was configured.
    pub fn bound(&self, addr: std::net::SocketAddr) {
        let _ = self.0.set(
            url::Url::parse(&format!("http://{addr}/")).expect("a socket address makes a URL"),
        );
    }

    /// The public URL: the configured one, else the bound address's, else
    /// (before the listener bound, e.g. in the CLI) `None`.
    pub fn get(&self) -> Option<&url::Url> {
        self.0.get()
    }

    /// `path` (absolute, starting with `/`) under the public URL, keeping
    /// a configured path prefix (`https://example.org/trellis` +
    /// `/gateway/…`).
    pub fn join(&self, path: &str) -> Option<url::Url> {
        let base = self.get()?;
        let mut url = base.clone();
        let prefix = base.path().trim_end_matches('/');
        url.set_path(&format!("{prefix}{path}"));
        url.set_query(None);
        url.set_fragment(None);
        Some(url)
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_url_is_configured_or_the_bound_address() {
        let unset = PublicUrl::new(None);
        assert!(unset.get().is_none());
        assert!(unset.join("/x").is_none());
        unset.bound("127.0.0.1:4321".parse().unwrap());
        assert_eq!(
            unset
                .join("/gateway/oauth/anilist/callback")
                .unwrap()
                .as_str(),
            "http://127.0.0.1:4321/gateway/oauth/anilist/callback"
        );
        let configured = PublicUrl::new(Some(
            url::Url::parse("https://example.org/trellis/?x=1").unwrap(),
        ));
        configured.bound("127.0.0.1:4321".parse().unwrap());
        assert_eq!(
            configured.join("/auth/oidc/callback").unwrap().as_str(),
            "https://example.org/trellis/auth/oidc/callback"
        );
    }
}
