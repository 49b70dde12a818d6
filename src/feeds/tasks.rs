//! The feed task kinds: `feeds.pull` (one feed, `q:short`; enqueued by the
//! scheduler and by `refreshFeed`) and `feeds.refresh_all` (every
//! non-suspended feed of a user, `q:medium`; `refreshAllFeeds`). Both pull
//! through the one [`Puller`], so its global and per-host limits hold
//! across them. A fetch failure is recorded in the feed's fetch state and
//! backed off by the pull policy, not retried by the runner: the task ends
//! `FAILED` with the same error the feed shows.

use std::{sync::Arc, time::Duration};

use entity::{feed, task};
use futures_util::{StreamExt, stream};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::{
    IMPORT_KIND, PULL_KIND, REFRESH_ALL_KIND,
    opml::OpmlFeed,
    pull::{PullMode, PullOutcome, Puller},
    retention,
    service::FeedsService,
};
use crate::jobs::{
    handler::{Registry, StageError, StageRun, TaskHandler},
    model::Queue,
    runner::Periodic,
};

/// Registers the feed task kinds (sharing one puller) and the hourly retention.
pub fn register(registry: &mut Registry, db: &DatabaseConnection, puller: Arc<Puller>) {
    registry.register(Arc::new(PullHandler(puller.clone())));
    registry.register(Arc::new(RefreshAllHandler(puller)));
    registry.register(Arc::new(ImportHandler(FeedsService::new(db.clone()))));
    registry.register(Arc::new(retention::RetentionHandler { db: db.clone() }));
    registry.register_periodic(Periodic {
        name: retention::KIND,
        period: Duration::from_secs(3600),
        task: retention::new_task,
    });
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PullPayload {
    feed_id: i64,
    mode: PullMode,
}

pub struct PullHandler(pub Arc<Puller>);

#[async_trait::async_trait]
impl TaskHandler for PullHandler {
    fn kind(&self) -> &'static str {
        PULL_KIND
    }

    fn queue(&self) -> Queue {
        Queue::Short
    }

    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        vec!["pull"]
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let payload: PullPayload = serde_json::from_value(run.task.payload.clone())
            .map_err(|error| StageError::Fail(format!("invalid pull payload: {error}")))?;
        let report = self.0.pull(payload.feed_id, payload.mode).await?;
        if report.outcome == PullOutcome::Failed {
            return Err(StageError::Fail(report.error.unwrap_or_default()));
        }
        run.result = Some(serde_json::to_value(&report).unwrap_or_default());
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RefreshAllPayload {
    user_id: Uuid,
}

pub struct RefreshAllHandler(pub Arc<Puller>);

#[async_trait::async_trait]
impl TaskHandler for RefreshAllHandler {
    fn kind(&self) -> &'static str {
        REFRESH_ALL_KIND
    }

    fn queue(&self) -> Queue {
        Queue::Medium
    }

    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        vec!["pull-all"]
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let payload: RefreshAllPayload = serde_json::from_value(run.task.payload.clone())
            .map_err(|error| StageError::Fail(format!("invalid refresh payload: {error}")))?;
        let ids: Vec<i64> = feed::Entity::find()
            .select_only()
            .column(feed::Column::Id)
            .filter(feed::Column::UserId.eq(payload.user_id))
            .filter(feed::Column::Suspended.eq(false))
            .into_tuple()
            .all(run.db)
            .await?;
        let puller = self.0.clone();
        // The puller's own limits pace this; the bound here only caps the
        // futures held at once.
        let reports: Vec<_> = stream::iter(ids)
            .map(|id| {
                let puller = puller.clone();
                async move { puller.pull(id, PullMode::Manual).await }
            })
            .buffer_unordered(puller.settings().concurrency.max(1) * 2)
            .collect()
            .await;
        let (mut ok, mut failed, mut new_items) = (0u64, 0u64, 0u64);
        for report in reports {
            let report = report?;
            match report.outcome {
                PullOutcome::Failed => failed += 1,
                PullOutcome::Gone | PullOutcome::Skipped => {}
                _ => ok += 1,
            }
            new_items += report.new_items;
        }
        run.result = Some(
            json!({ "feeds": ok + failed, "succeeded": ok, "failed": failed, "newItems": new_items }),
        );
        Ok(())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImportPayload {
    user_id: Uuid,
    feeds: Vec<OpmlFeed>,
}

/// `feeds.import_opml`: creates the groups and feeds of a parsed OPML list
/// (parsed and validated by `importOpml` before the task exists).
pub struct ImportHandler(pub FeedsService);

#[async_trait::async_trait]
impl TaskHandler for ImportHandler {
    fn kind(&self) -> &'static str {
        IMPORT_KIND
    }

    fn queue(&self) -> Queue {
        Queue::Medium
    }

    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        vec!["import"]
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let payload: ImportPayload = serde_json::from_value(run.task.payload.clone())
            .map_err(|error| StageError::Fail(format!("invalid import payload: {error}")))?;
        // Re-running after a crash finds the feeds already there: they are skipped.
        let report = self.0.import_feeds(payload.user_id, payload.feeds).await?;
        run.result = Some(serde_json::to_value(&report).unwrap_or_default());
        Ok(())
    }
}
