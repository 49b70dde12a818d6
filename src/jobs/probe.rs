//! `system.probe`: a canary task an admin enqueues to check the runner end
//! to end (and the one the runner's conformance and crash tests drive). Each
//! stage can sleep and can fail its first attempts on purpose; each stage's
//! effect is a `probe_effects` row whose primary key makes a duplicate
//! effect impossible. Without effects, a probe is a no-op job: it ends
//! through the group commit of endings.

use std::time::Duration;

use chrono::Utc;
use entity::{probe_effect, task};
use sea_orm::{ActiveModelTrait, Set};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{
    handler::{StageError, StageRun, TaskHandler},
    model::Queue,
};

pub const KIND: &str = "system.probe";
pub const MAX_STAGES: usize = 8;
pub const MAX_SLEEP_MS: u64 = 60_000;
const STAGE_NAMES: [&str; MAX_STAGES] = [
    "stage-1", "stage-2", "stage-3", "stage-4", "stage-5", "stage-6", "stage-7", "stage-8",
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProbePayload {
    pub stages: usize,
    pub sleep_ms: u64,
    /// The first this-many attempts fail on purpose.
    pub fail_attempts: u32,
    /// Each stage writes its effect, progress and result (else nothing).
    #[serde(default = "effects_by_default")]
    pub effects: bool,
}

fn effects_by_default() -> bool {
    true
}

impl ProbePayload {
    fn from_task(task: &task::Model) -> Result<Self, StageError> {
        serde_json::from_value(task.payload.clone())
            .map_err(|error| StageError::Fail(format!("invalid probe payload: {error}")))
    }
}

pub struct ProbeHandler;

#[async_trait::async_trait]
impl TaskHandler for ProbeHandler {
    fn kind(&self) -> &'static str {
        KIND
    }

    fn queue(&self) -> Queue {
        Queue::Short
    }

    fn stages(&self, task: &task::Model) -> Vec<&'static str> {
        let count = ProbePayload::from_task(task)
            .map(|payload| payload.stages)
            .unwrap_or(1)
            .clamp(1, MAX_STAGES);
        STAGE_NAMES[..count].to_vec()
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let payload = ProbePayload::from_task(run.task)?;
        let attempt = run.task.attempt_count;
        if attempt as u32 <= payload.fail_attempts {
            return Err(StageError::Retry(anyhow::anyhow!(
                "probe fails attempt {attempt} on purpose"
            )));
        }
        if payload.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(payload.sleep_ms.min(MAX_SLEEP_MS))).await;
        }
        if !payload.effects {
            return Ok(());
        }
        let (task_id, index) = (run.task.id, run.index);
        let txn = run.txn().await?;
        probe_effect::ActiveModel {
            task_id: Set(task_id),
            stage: Set(index as i32),
            attempt: Set(attempt),
            created_at: Set(Utc::now()),
        }
        .insert(txn)
        .await?;
        let total = payload.stages.clamp(1, MAX_STAGES);
        run.progress = Some(json!({ "done": index + 1, "total": total }));
        if index + 1 == total {
            run.result = Some(json!({ "stages": total }));
        }
        Ok(())
    }
}
