//! The docs mirror as the app wires it ([`crate::domain`]): its settings,
//! its service, the `docs.sync` task and its schedule, the route to the
//! mirror's files. Nothing outside this folder knows them.

use std::sync::Arc;

use async_graphql::Data;
use axum::Router;

use super::{
    http, schedule,
    service::DocsService,
    settings::Settings,
    sync::Syncer,
    task::{self, SyncTask},
};
use crate::{
    auth::keys::ServerSecret,
    domain::{Domain, Platform, Setup},
    http::Web,
    jobs::{Jobs, handler::Registry, runner::Periodic},
};

/// Builds the docs domain. A platform without credentials is skipped, not
/// an error.
pub fn setup(settings: &Settings, platform: &Platform) -> anyhow::Result<Box<dyn Setup>> {
    Ok(Box::new(DocsSetup {
        settings: Arc::new(settings.clone()),
        syncer: Syncer::new(platform.db.clone(), &platform.data_dir),
        secret: platform.secret.clone(),
        db: platform.db.clone(),
        web: platform.web.clone(),
    }))
}

struct DocsSetup {
    settings: Arc<Settings>,
    syncer: Syncer,
    secret: Arc<ServerSecret>,
    db: sea_orm::DatabaseConnection,
    web: Web,
}

impl Setup for DocsSetup {
    fn register_tasks(&self, registry: &mut Registry) {
        registry.register(Arc::new(SyncTask {
            settings: self.settings.clone(),
            syncer: self.syncer.clone(),
            secret: self.secret.clone(),
        }));
        // The schedule follows the settings in force, read at each check:
        // an interval or credentials stored over GraphQL apply without a
        // restart.
        registry.register_periodic(Periodic {
            name: "docs.sync",
            period: schedule::TICK,
            task: task::scheduled,
            gate: Some(schedule::gate(
                self.db.clone(),
                self.secret.clone(),
                self.settings.clone(),
            )),
        });
    }

    fn build(self: Box<Self>, jobs: &Jobs) -> Arc<dyn Domain> {
        let mirror_root = self.syncer.mirror_root().to_owned();
        Arc::new(Docs {
            service: DocsService::new(self.settings, self.syncer, Some(jobs.clone()), self.secret),
            web: self.web,
            mirror_root,
        })
    }
}

struct Docs {
    service: DocsService,
    web: Web,
    mirror_root: std::path::PathBuf,
}

impl Domain for Docs {
    fn name(&self) -> &'static str {
        "docs"
    }

    fn request_data(&self, data: &mut Data) {
        data.insert(self.service.clone());
    }

    fn routes(&self) -> Router {
        http::routes(self.web.clone(), self.mirror_root.clone())
    }
}
