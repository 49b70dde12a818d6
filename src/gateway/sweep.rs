//! `gateway.sweep`, a periodic job: reconciled receipts past their seven
//! days are deleted (protected receipts and unknown reservations never
//! expire by themselves), and a pending event whose delivery task ended
//! gets a new one.

use chrono::Utc;
use serde::de::IgnoredAny;
use serde_json::{Value, json};

use super::events::Events;
use crate::jobs::{
    handler::{SingleStage, StageError, StageRun},
    model::{NewTask, Queue},
};

pub const KIND: &str = "gateway.sweep";

pub fn new_task() -> NewTask {
    NewTask::new(KIND, Queue::Medium, json!({}))
}

pub struct SweepHandler {
    pub events: Events,
}

#[async_trait::async_trait]
impl SingleStage for SweepHandler {
    const KIND: &'static str = KIND;
    const QUEUE: Queue = Queue::Medium;
    const STAGE: &'static str = "sweep";
    type Payload = IgnoredAny;

    async fn run(
        &self,
        _payload: IgnoredAny,
        _run: &mut StageRun<'_>,
    ) -> Result<Value, StageError> {
        let expired = self.events.expire_receipts(Utc::now()).await?;
        let resumed = self.events.resume_orphans().await?;
        Ok(json!({ "receiptsExpired": expired, "eventsResumed": resumed.len() }))
    }
}
