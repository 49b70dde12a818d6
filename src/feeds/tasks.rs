//! The feed task kinds: `feeds.pull` (one feed, `q:short`; enqueued by the
//! scheduler and by `refreshFeed`) and `feeds.refresh_all` (every
//! non-suspended feed of a user, `q:medium`; `refreshAllFeeds`). Both pull
//! through the one [`Puller`], so its global and per-host limits hold
//! across them. A fetch failure is recorded in the feed's fetch state and
//! backed off by the pull policy, not retried by the runner: the task ends
//! `FAILED` with the same error the feed shows.

use std::{sync::Arc, time::Duration};

use entity::feed;
use futures_util::{StreamExt, stream};
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect};
use serde::Deserialize;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    IMPORT_KIND, PULL_KIND, REFRESH_ALL_KIND,
    opml::OpmlFeed,
    pull::{PullMode, PullOutcome, Pulled, Puller},
    retention,
    service::FeedsService,
};
use crate::{
    httpc::Patience,
    jobs::{
        handler::{Registry, SingleStage, StageError, StageRun},
        model::Queue,
        runner::Periodic,
    },
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
        gate: None,
    });
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PullPayload {
    feed_id: i64,
    mode: PullMode,
}

pub struct PullHandler(pub Arc<Puller>);

#[async_trait::async_trait]
impl SingleStage for PullHandler {
    const KIND: &'static str = PULL_KIND;
    const QUEUE: Queue = Queue::Short;
    const STAGE: &'static str = "pull";
    type Payload = PullPayload;

    async fn run(
        &self,
        payload: PullPayload,
        _run: &mut StageRun<'_>,
    ) -> Result<Value, StageError> {
        // A busy host or a full pull limit sends the task back to its queue
        // (not an attempt) rather than keep a q:short worker waiting.
        let report = match self
            .0
            .pull(payload.feed_id, payload.mode, Patience::Never)
            .await?
        {
            Pulled::Done(report) => report,
            Pulled::Busy(busy) => return Err(StageError::Defer(busy.retry_in)),
        };
        if report.outcome == PullOutcome::Failed {
            return Err(StageError::Fail(report.error.unwrap_or_default()));
        }
        Ok(serde_json::to_value(&report).unwrap_or_default())
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RefreshAllPayload {
    user_id: Uuid,
}

pub struct RefreshAllHandler(pub Arc<Puller>);

#[async_trait::async_trait]
impl SingleStage for RefreshAllHandler {
    const KIND: &'static str = REFRESH_ALL_KIND;
    const QUEUE: Queue = Queue::Medium;
    const STAGE: &'static str = "pull-all";
    type Payload = RefreshAllPayload;

    async fn run(
        &self,
        payload: RefreshAllPayload,
        run: &mut StageRun<'_>,
    ) -> Result<Value, StageError> {
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
                async move { puller.pull(id, PullMode::Manual, Patience::Wait).await }
            })
            .buffer_unordered(puller.settings().concurrency.max(1) * 2)
            .collect()
            .await;
        let (mut ok, mut failed, mut new_items) = (0u64, 0u64, 0u64);
        for pulled in reports {
            // Waiting for its turn, a pull is never turned away.
            let Pulled::Done(report) = pulled? else {
                continue;
            };
            match report.outcome {
                PullOutcome::Failed => failed += 1,
                PullOutcome::Gone | PullOutcome::Skipped => {}
                _ => ok += 1,
            }
            new_items += report.new_items;
        }
        Ok(
            json!({ "feeds": ok + failed, "succeeded": ok, "failed": failed, "newItems": new_items }),
        )
    }
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportPayload {
    user_id: Uuid,
    feeds: Vec<OpmlFeed>,
}

/// `feeds.import_opml`: creates the groups and feeds of a parsed OPML list
/// (parsed and validated by `importOpml` before the task exists).
pub struct ImportHandler(pub FeedsService);

#[async_trait::async_trait]
impl SingleStage for ImportHandler {
    const KIND: &'static str = IMPORT_KIND;
    const QUEUE: Queue = Queue::Medium;
    const STAGE: &'static str = "import";
    type Payload = ImportPayload;

    async fn run(
        &self,
        payload: ImportPayload,
        _run: &mut StageRun<'_>,
    ) -> Result<Value, StageError> {
        // Re-running after a crash finds the feeds already there: they are skipped.
        let report = self.0.import_feeds(payload.user_id, payload.feeds).await?;
        Ok(serde_json::to_value(&report).unwrap_or_default())
    }
}
