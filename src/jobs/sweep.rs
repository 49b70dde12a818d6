//! `system.sweep`: the runner's own retention, run hourly as a periodic
//! job — expired idempotency keys (kept at least `TRELLIS_IDEMPOTENCY_TTL`),
//! published outbox events older than `TRELLIS_OUTBOX_RETENTION`, and
//! tasks finished longer ago than `TRELLIS_TASK_RETENTION` (periodic feed
//! pulls alone add one task per feed per interval).

use std::time::Duration;

use chrono::Utc;
use entity::task;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use serde_json::json;

use super::{
    handler::{StageError, StageRun, TaskHandler},
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
impl TaskHandler for SweepHandler {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn queue(&self) -> Queue {
        Queue::Long
    }

    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        vec!["sweep"]
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let keys = store::sweep_idempotency_keys(&self.db).await?;
        let events =
            outbox::delete_published_before(&self.db, cutoff(self.retention.outbox)).await?;
        let tasks = task::Entity::delete_many()
            .filter(task::Column::FinishedAt.lt(cutoff(self.retention.tasks)))
            .filter(task::Column::Id.ne(run.task.id))
            .exec(&self.db)
            .await?
            .rows_affected;
        run.result =
            Some(json!({ "idempotencyKeys": keys, "outboxEvents": events, "tasks": tasks }));
        Ok(())
    }
}
