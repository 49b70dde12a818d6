//! The `docs.sync` task on `q:long`: one [`Syncer::run`] whose progress
//! becomes `docs.sync.progress` events (instance-wide, throttled) and whose
//! summary is the task's `result`.

use std::{sync::Arc, time::Duration};

use sea_orm::DatabaseConnection;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::settings::Settings;
use super::stored;
use super::sync::{Observer, SyncProgress, SyncRequest, Syncer};
use crate::{
    auth::keys::ServerSecret,
    db,
    jobs::{
        handler::{SingleStage, StageError, StageRun},
        model::{NewTask, Queue},
        outbox::{self, NewEvent},
    },
};

/// The task's kind.
pub const KIND: &str = "docs.sync";
/// The progress events' topic (aggregate: the platform).
pub const PROGRESS_TOPIC: &str = "docs.sync.progress";
/// At most one progress event per platform this often (and always the
/// last one).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);
/// How long a sync whose platforms are all busy waits before it looks
/// again.
const BUSY_RETRY: Duration = Duration::from_secs(30);

/// A sync request as a task.
pub fn new_task(request: SyncRequest) -> NewTask {
    NewTask::new(
        KIND,
        Queue::Long,
        serde_json::to_value(request).unwrap_or_else(|_| json!({})),
    )
}

/// The scheduled sync: every configured platform, mode by the rules.
pub fn scheduled() -> NewTask {
    new_task(SyncRequest::default())
}

pub struct SyncTask {
    /// The environment's; what admins stored is laid over them per run.
    pub settings: Arc<Settings>,
    pub syncer: Syncer,
    pub secret: Arc<ServerSecret>,
}

#[async_trait::async_trait]
impl SingleStage for SyncTask {
    const KIND: &'static str = KIND;
    const QUEUE: Queue = Queue::Long;
    const STAGE: &'static str = "sync";
    type Payload = SyncRequest;

    async fn run(&self, request: SyncRequest, run: &mut StageRun<'_>) -> Result<Value, StageError> {
        let settings = stored::effective(run.db, &self.secret, &self.settings)
            .await
            .map_err(|error| StageError::Fail(error.to_string()))?;
        let (sender, receiver) = mpsc::unbounded_channel();
        let emitter = tokio::spawn(emit_progress(run.db.clone(), receiver));
        let observer = Events(sender);
        let outcome = self.syncer.run(&settings, request, &observer).await;
        drop(observer);
        // The last progress events are out before the task ends.
        let _ = emitter.await;
        let summary = outcome.map_err(StageError::Retry)?;
        if summary.only_busy() {
            return Err(StageError::Defer(BUSY_RETRY));
        }
        if summary.any_failed() && !summary.platforms.iter().any(ran_fine) {
            return Err(StageError::Fail(summary.line()));
        }
        serde_json::to_value(&summary).map_err(|error| StageError::Retry(error.into()))
    }
}

fn ran_fine(result: &super::sync::PlatformResult) -> bool {
    result.outcome == super::sync::Outcome::Succeeded
}

/// Hands each step to the emitter.
struct Events(mpsc::UnboundedSender<SyncProgress>);

impl Observer for Events {
    fn progress(&self, progress: SyncProgress) {
        // The emitter ends only after the sender is dropped.
        let _ = self.0.send(progress);
    }
}

/// Writes progress into the outbox: whatever arrived since the last write,
/// the latest step per platform, at most every [`PROGRESS_EVERY`].
async fn emit_progress(db: DatabaseConnection, mut steps: mpsc::UnboundedReceiver<SyncProgress>) {
    while let Some(first) = steps.recv().await {
        let mut latest = vec![first];
        while let Ok(next) = steps.try_recv() {
            match latest
                .iter_mut()
                .find(|step| step.platform == next.platform)
            {
                Some(slot) => *slot = next,
                None => latest.push(next),
            }
        }
        if let Err(error) = write_events(&db, &latest).await {
            tracing::warn!(%error, "docs sync progress not recorded");
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

async fn write_events(db: &DatabaseConnection, steps: &[SyncProgress]) -> anyhow::Result<()> {
    let events = steps
        .iter()
        .map(|step| {
            Ok(NewEvent {
                topic: PROGRESS_TOPIC,
                aggregate_id: step.platform.as_str().to_owned(),
                owner_id: None,
                payload: serde_json::to_value(step)?,
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let txn = db::begin_write(db).await?;
    outbox::emit(&*txn, events)
        .await
        .map_err(|e| e.into_anyhow())?;
    txn.commit().await?;
    Ok(())
}
