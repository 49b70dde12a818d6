//! The gateway as the app wires it ([`crate::domain`]): its settings, its
//! service and its OAuth callback route. Nothing outside this folder knows
//! them.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use async_graphql::Data;
use axum::Router;

use super::{
    anilist::AniList,
    cooldown::Cooldowns,
    delivery::DeliverHandler,
    events::{Budgets, Events},
    http,
    kavita::Kavita,
    links::Links,
    saved::{self, SavedManifest},
    scrobbler::{self, ScrobbleHandler},
    service::{GatewayService, Parts, Providers},
    settings::Settings,
    sweep::{self, SweepHandler},
};
use crate::{
    domain::{Domain, Platform, Setup},
    http::Web,
    jobs::{Jobs, handler::Registry, runner::Periodic},
};

/// How often expired receipts go and orphaned events are resumed.
const SWEEP_EVERY: Duration = Duration::from_secs(600);

/// Builds the gateway. A provider that is not configured is reported as
/// such in the manifest, not an error.
pub fn setup(settings: &Settings, platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    let cooldowns = Cooldowns::new(platform.db.clone());
    let providers = Providers::new(
        Kavita::new(
            settings.kavita(),
            settings.kavita_catalog_api_key.clone(),
            cooldowns.clone(),
        )?,
        AniList::new(settings, cooldowns.clone())?,
    );
    // The gateway's origin for the saved state: the configured public URL
    // (a file written for another address is foreign).
    let origin = platform
        .public_url
        .get()
        .map(|url| url.origin().ascii_serialization())
        .unwrap_or_else(|| "local".to_owned());
    let admission = saved::reconcile(
        &platform.data_dir,
        &platform.secret,
        &origin,
        SavedManifest::current(&providers),
    );
    let parts = Parts {
        admission,
        providers,
        links: Links::new(platform.db.clone(), platform.secret.clone()),
        cooldowns,
        events: Events::new(platform.db.clone(), Budgets::default()),
        public_url: platform.public_url.clone(),
    };
    Ok(Box::new(GatewaySetup {
        parts,
        web: platform.web.clone(),
        scrobble_every: Duration::from_secs(settings.gateway_scrobble_interval),
        service: Arc::default(),
    }))
}

struct GatewaySetup {
    parts: Parts,
    web: Web,
    scrobble_every: Duration,
    /// Filled by `build`, for the scrobble task registered before it.
    service: Arc<OnceLock<GatewayService>>,
}

impl Setup for GatewaySetup {
    fn register_tasks(&self, registry: &mut Registry) {
        registry.register(Arc::new(DeliverHandler {
            events: self.parts.events.clone(),
            providers: self.parts.providers.clone(),
            links: self.parts.links.clone(),
        }));
        registry.register(Arc::new(SweepHandler {
            events: self.parts.events.clone(),
        }));
        registry.register_periodic(Periodic {
            name: sweep::KIND,
            period: SWEEP_EVERY,
            task: sweep::new_task,
            gate: None,
        });
        registry.register(Arc::new(ScrobbleHandler {
            service: self.service.clone(),
        }));
        if !self.scrobble_every.is_zero() {
            registry.register_periodic(Periodic {
                name: scrobbler::KIND,
                period: self.scrobble_every,
                task: scrobbler::periodic_task,
                gate: None,
            });
        }
    }

    fn build(self: Box<Self>, jobs: &Jobs) -> Arc<dyn Domain> {
        let service = GatewayService::new(self.parts, jobs.clone());
        // Set once: `build` runs once per process.
        let _ = self.service.set(service.clone());
        Arc::new(Gateway {
            service,
            web: self.web,
        })
    }
}

struct Gateway {
    service: GatewayService,
    web: Web,
}

impl Domain for Gateway {
    fn name(&self) -> &'static str {
        "gateway"
    }

    fn request_data(&self, data: &mut Data) {
        data.insert(self.service.clone());
    }

    fn routes(&self) -> Router {
        http::routes(self.web.clone(), self.service.clone())
    }
}
