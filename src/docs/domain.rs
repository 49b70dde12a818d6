//! The docs mirror as the app wires it ([`crate::domain`]): its settings
//! and its service. The sync task, its schedule and the mirror's routes
//! join here as they are built (issue 20); nothing outside this folder
//! changes for them.

use std::sync::Arc;

use async_graphql::Data;

use super::{service::DocsService, settings::Settings};
use crate::{
    domain::{Domain, Platform, Setup},
    jobs::{Jobs, handler::Registry},
};

/// Builds the docs domain. A platform without credentials is skipped, not
/// an error, so this never fails today; it returns a `Result` as every
/// domain's setup does.
pub fn setup(settings: &Settings, _platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    Ok(Box::new(DocsSetup {
        settings: Arc::new(settings.clone()),
    }))
}

struct DocsSetup {
    settings: Arc<Settings>,
}

impl Setup for DocsSetup {
    fn register_tasks(&self, _registry: &mut Registry) {}

    fn build(self: Box<Self>, _jobs: &Jobs) -> Arc<dyn Domain> {
        Arc::new(Docs {
            service: DocsService::new(self.settings),
        })
    }
}

struct Docs {
    service: DocsService,
}

impl Domain for Docs {
    fn name(&self) -> &'static str {
        "docs"
    }

    fn request_data(&self, data: &mut Data) {
        data.insert(self.service.clone());
    }
}
