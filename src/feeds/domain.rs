//! The feeds domain as the app wires it ([`crate::domain`]): its service,
//! task kinds, pull scheduler, DataLoaders and its icon route. (The reader APIs over it are
//! `crate::readerapi`.)

use std::sync::Arc;

use async_graphql::Data;
use tokio::{sync::watch, task::JoinHandle};

use super::{
    discover::Discoverer,
    icons::{self, IconLinks, IconRoutes},
    loaders::FeedLoaders,
    pull::Puller,
    reader_auth::ReaderAccounts,
    scheduler,
    service::FeedsService,
    settings::Settings,
    tasks,
};
use crate::{
    domain::{Domain, Platform, Setup},
    httpc::HttpClient,
    jobs::{Jobs, handler::Registry},
};

/// Builds the feeds domain: one outbound client for every user-supplied
/// URL it fetches (pulls, discovery), behind the SSRF guard.
pub fn setup(settings: &Settings, platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    let http = HttpClient::new(settings.http_settings())?;
    let puller = Arc::new(Puller::new(
        platform.db.clone(),
        http.clone(),
        settings.pull_settings(),
    ));
    Ok(Box::new(FeedsSetup {
        platform: platform.clone(),
        settings: settings.clone(),
        http,
        puller,
    }))
}

struct FeedsSetup {
    platform: Platform,
    settings: Settings,
    http: HttpClient,
    puller: Arc<Puller>,
}

impl Setup for FeedsSetup {
    fn register_tasks(&self, registry: &mut Registry) {
        tasks::register(registry, &self.platform.db, self.puller.clone());
    }

    fn build(self: Box<Self>, jobs: &Jobs) -> Arc<dyn Domain> {
        let service = FeedsService::with_search_limits(
            self.platform.db.clone(),
            self.settings.search_limits(),
        );
        Arc::new(Feeds {
            service,
            accounts: ReaderAccounts::new(self.platform.db.clone(), self.platform.web.auth.clone()),
            discoverer: Discoverer(self.http),
            platform: self.platform,
            settings: self.settings,
            jobs: jobs.clone(),
        })
    }
}

struct Feeds {
    service: FeedsService,
    accounts: ReaderAccounts,
    discoverer: Discoverer,
    platform: Platform,
    settings: Settings,
    jobs: Jobs,
}

impl Feeds {
    fn icon_links(&self) -> IconLinks {
        IconLinks {
            public_url: self.platform.public_url.clone(),
            secret: self.platform.secret.clone(),
        }
    }
}

impl Domain for Feeds {
    fn name(&self) -> &'static str {
        "feeds"
    }

    fn request_data(&self, data: &mut Data) {
        data.insert(self.service.clone());
        data.insert(self.accounts.clone());
        data.insert(self.discoverer.clone());
        data.insert(FeedLoaders::new(&self.platform.db));
        data.insert(self.icon_links());
    }

    /// `GET /icons/{feed_id}/{sig}`: the icons the pull worker stored.
    fn routes(&self) -> axum::Router {
        icons::routes(IconRoutes {
            db: self.platform.db.clone(),
            links: self.icon_links(),
        })
    }

    fn background(&self, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        vec![tokio::spawn(scheduler::run(
            self.jobs.clone(),
            self.settings.pull_settings(),
            stop,
        ))]
    }
}
