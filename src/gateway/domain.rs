//! The gateway as the app wires it ([`crate::domain`]): its settings, its
//! service and its OAuth callback route. Nothing outside this folder knows
//! them.

use std::sync::Arc;

use async_graphql::Data;
use axum::Router;

use super::{
    anilist::AniList,
    cooldown::Cooldowns,
    http,
    kavita::Kavita,
    links::Links,
    service::{GatewayService, Providers},
    settings::Settings,
};
use crate::{
    domain::{Domain, Platform, Setup},
    http::Web,
    jobs::{Jobs, handler::Registry},
};

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
    let service = GatewayService::new(
        providers,
        Links::new(platform.db.clone(), platform.secret.clone()),
        cooldowns,
        platform.public_url.clone(),
    );
    Ok(Box::new(GatewaySetup {
        service,
        web: platform.web.clone(),
    }))
}

struct GatewaySetup {
    service: GatewayService,
    web: Web,
}

impl Setup for GatewaySetup {
    fn register_tasks(&self, _registry: &mut Registry) {}

    fn build(self: Box<Self>, _jobs: &Jobs) -> Arc<dyn Domain> {
        Arc::new(Gateway {
            service: self.service,
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
