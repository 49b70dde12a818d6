//! The seven-stage pipeline every resource task runs on the job runner:
//! Accept → Mutation → Mapping → Topology Sync → Properties → Aggregated
//! Status → Finalizer. Each stage's writes commit in the runner's stage
//! transaction together with the record that the stage is done, so a
//! crashed task resumes at the first uncommitted stage; each stage first
//! checks the `resources` scope's generation and ends the task
//! `SUPERSEDED`, writing nothing, when a newer request exists.
//!
//! Locking: every resource task shares the one scope. On PostgreSQL the
//! generation check share-locks the scope's row until the stage commits,
//! so no newer request can be accepted while a stage writes, and a stage of
//! an older task finds the newer generation and stops: reconciliation
//! writes are serialized, newest request first. On SQLite the stage
//! transaction holds the database's write lock from its first statement.
//! Every stage reads the state it works on inside its transaction, so the
//! result of any interleaving is the reconciliation of the final resources.

use std::sync::Arc;

use entity::task;
use serde_json::{Value, json};

use super::{
    config::NodeConfig,
    engine::Engine,
    ops::{self, Operation},
    reconcile::{self, Phase},
};
use crate::jobs::{
    handler::{Registry, StageError, StageRun, TaskHandler},
    model::{NewTask, Queue},
    runner::Periodic,
};

pub const STAGES: [&str; 7] = [
    "accept",
    "mutation",
    "mapping",
    "topology_sync",
    "properties",
    "aggregated_status",
    "finalizer",
];

/// What the stages need: the configuration and the Engine.
pub struct Pipeline {
    pub config: Arc<NodeConfig>,
    pub engine: Arc<dyn Engine>,
}

/// Registers the five resource task kinds and the periodic reconciliation
/// of owed work.
pub fn register(registry: &mut Registry, pipeline: Arc<Pipeline>) {
    for (kind, queue) in ops::KINDS
        .into_iter()
        .chain([(ops::RECONCILE_KIND, Queue::Medium)])
    {
        registry.register(Arc::new(ResourceTask {
            kind,
            queue,
            pipeline: pipeline.clone(),
        }));
    }
    registry.register_periodic(Periodic {
        name: ops::RECONCILE_KIND,
        period: ops::RECONCILE_PERIOD,
        task: reconcile_task,
    });
}

/// The periodic reconciliation: in the resources scope like every request,
/// so it applies requests left unapplied and does the work they owe.
pub(crate) fn reconcile_task() -> NewTask {
    let mut task = NewTask::new(ops::RECONCILE_KIND, Queue::Medium, json!({}));
    task.scope = Some(ops::SCOPE.to_owned());
    task
}

struct ResourceTask {
    kind: &'static str,
    queue: Queue,
    pipeline: Arc<Pipeline>,
}

#[async_trait::async_trait]
impl TaskHandler for ResourceTask {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn queue(&self) -> Queue {
        self.queue
    }

    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        STAGES.to_vec()
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let config = &self.pipeline.config;
        let engine = self.pipeline.engine.as_ref();
        let report = match run.name {
            "accept" if self.kind == ops::RECONCILE_KIND => json!({ "operation": "reconcile" }),
            "accept" => {
                let operation: Operation = serde_json::from_value(run.task.payload.clone())
                    .map_err(|error| {
                        StageError::Fail(format!("invalid resource request: {error}"))
                    })?;
                operation
                    .validate(config)
                    .map_err(|error| StageError::Fail(error.to_string()))?;
                json!({ "operation": operation.kind() })
            }
            "mutation" => {
                let generation = run.task.generation.ok_or_else(|| {
                    StageError::Fail("a resource task needs a scope generation".into())
                })?;
                let txn = run.txn().await?;
                serde_json::to_value(reconcile::apply_mutations(txn, generation).await?)
                    .unwrap_or(Value::Null)
            }
            "finalizer" => {
                let progress = stored_progress(run);
                run.result = Some(json!({
                    "resourceIds": resource_ids(run.task),
                    "stages": progress,
                }));
                return Ok(());
            }
            other => match Phase::of_stage(other) {
                Some(phase) => phase.run(run.txn().await?, config, engine).await?,
                None => return Err(StageError::Fail(format!("unknown stage `{other}`"))),
            },
        };
        let mut progress = stored_progress(run);
        if let Value::Object(stages) = &mut progress {
            stages.insert(run.name.to_owned(), report);
        }
        run.progress = Some(progress);
        Ok(())
    }
}

/// The per-stage reports committed so far.
fn stored_progress(run: &StageRun<'_>) -> Value {
    run.committed_progress
        .clone()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({}))
}

/// The resources a task is about (a create's resource has the task's id).
pub fn resource_ids(task: &task::Model) -> Vec<String> {
    match serde_json::from_value::<Operation>(task.payload.clone()) {
        Ok(Operation::Create { .. }) => vec![task.id.to_string()],
        Ok(operation) => operation
            .targets()
            .iter()
            .map(ToString::to_string)
            .collect(),
        Err(_) => vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reconciliation_phase_has_its_stage() {
        for phase in Phase::ALL {
            assert!(STAGES.contains(&phase.stage()), "{phase:?}");
            assert_eq!(Phase::of_stage(phase.stage()), Some(phase));
        }
        assert_eq!(Phase::of_stage("finalizer"), None);
    }
}
