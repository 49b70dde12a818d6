//! `system.sweep`: the runner's own retention, run hourly as a periodic
//! job — expired idempotency keys (kept at least `TRELLIS_IDEMPOTENCY_TTL`),
//! published outbox events older than `TRELLIS_OUTBOX_RETENTION`, and
//! tasks finished longer ago than `TRELLIS_TASK_RETENTION` (periodic feed
//! pulls alone add one task per feed per interval).

use std::time::Duration;

use chrono::Utc;
use entity::task;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::{
    handler::{SingleStage, StageError, StageRun},
    model::{NewTask, Queue},
    outbox, store,
};

pub const KIND: &str = "system.sweep";

pub fn new_task() -> NewTask {
    NewTask::new(KIND, Queue::Long, json!({}))
}

/// How long finished things are kept.
#[derive(Debug, Clone, Copy)]
pub struct Retention {
    pub outbox: Duration,
    pub tasks: Duration,
}

pub struct SweepHandler {
    pub db: DatabaseConnection,
    pub retention: Retention,
}

fn cutoff(keep: Duration) -> chrono::DateTime<Utc> {
    Utc::now() - chrono::Duration::from_std(keep).unwrap_or(chrono::Duration::days(7))
}

#[async_trait::async_trait]
impl SingleStage for SweepHandler {
    const KIND: &'static str = KIND;
    const QUEUE: Queue = Queue::Long;
    const STAGE: &'static str = "sweep";
    type Payload = IgnoredAny;

    async fn run(&self, _payload: IgnoredAny, run: &mut StageRun<'_>) -> Result<Value, StageError> {
        let keys = store::sweep_idempotency_keys(&self.db).await?;
        let events =
            outbox::delete_published_before(&self.db, cutoff(self.retention.outbox)).await?;
        let tasks = task::Entity::delete_many()
            .filter(task::Column::FinishedAt.lt(cutoff(self.retention.tasks)))
            .filter(task::Column::Id.ne(run.task.id))
            .exec(&self.db)
            .await?
            .rows_affected;
        Ok(json!({ "idempotencyKeys": keys, "outboxEvents": events, "tasks": tasks }))
    }
}
