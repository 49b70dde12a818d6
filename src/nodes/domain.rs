//! The nodes domain as the app wires it ([`crate::domain`]): its service,
//! the reconciliation's task kinds, the resource routes and DataLoaders.

use std::sync::Arc;

use anyhow::Context;
use async_graphql::Data;
use axum::Router;
use futures_util::future::BoxFuture;

use super::{
    config::NodeConfig,
    engine::RuleEngine,
    http,
    loaders::NodeLoaders,
    pipeline::{self, Pipeline},
    service::NodesService,
    settings::Settings,
};
use crate::{
    domain::{Domain, Platform, Setup},
    jobs::{Jobs, handler::Registry},
};

/// Builds the nodes domain; an invalid node configuration stops start-up
/// here, with every problem listed.
pub fn setup(settings: &Settings, platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    Ok(Box::new(NodesSetup {
        platform: platform.clone(),
        config: Arc::new(settings.load()?),
    }))
}

struct NodesSetup {
    platform: Platform,
    config: Arc<NodeConfig>,
}

impl Setup for NodesSetup {
    fn register_tasks(&self, registry: &mut Registry) {
        pipeline::register(
            registry,
            Arc::new(Pipeline {
                config: self.config.clone(),
                engine: Arc::new(RuleEngine),
            }),
        );
    }

    fn build(self: Box<Self>, jobs: &Jobs) -> Arc<dyn Domain> {
        Arc::new(Nodes {
            service: NodesService::new(self.platform.db.clone(), jobs.clone(), self.config),
            platform: self.platform,
        })
    }
}

struct Nodes {
    service: NodesService,
    platform: Platform,
}

impl Domain for Nodes {
    fn name(&self) -> &'static str {
        "nodes"
    }

    fn request_data(&self, data: &mut Data) {
        data.insert(self.service.clone());
        data.insert(NodeLoaders::new(&self.platform.db));
    }

    fn routes(&self) -> Router {
        http::routes(self.platform.web.clone(), self.service.clone())
    }

    /// A tree computed under another node configuration is marked for a
    /// full reconciliation before any worker starts.
    fn prepare(&self) -> BoxFuture<'_, anyhow::Result<()>> {
        Box::pin(async {
            self.service
                .adopt_config()
                .await
                .context("adopting the node configuration")?;
            Ok(())
        })
    }
}
