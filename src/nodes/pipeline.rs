//! The seven-stage pipeline every resource task runs on the job runner:
//! Accept → Mutation → Mapping → Topology Sync → Properties → Aggregated
//! Status → Finalizer. Each stage's writes commit in the runner's stage
//! transaction together with the record that the stage is done, so a
//! crashed task resumes at the first uncommitted stage.
//!
//! The task contract (what a client can rely on):
//! - **A pass covers everything waiting.** The mutation stage applies every
//!   accepted request not applied yet, up to the newest, in generation
//!   order; the phases then reconcile all marked work. The aggregated
//!   status stage records the scope's `reconciled_generation`: every
//!   request up to it is in the tree.
//! - **A task ends only once its change is visible.** Before its own pass
//!   starts (accept, mutation), a task whose generation is reconciled
//!   ends `SUPERSEDED` — "included in a newer reconciliation". Once its
//!   mutation stage has committed, its pass runs to the end: no newer
//!   request abandons it, so reconciliation always makes progress.
//! - **Nothing accepted is dropped silently.** A request naming a resource
//!   that is gone when it applies is not applied at all and its task ends
//!   `FAILED` (`NOT_FOUND: …`), whichever pass met it.
//!
//! Locking: passes of several tasks may overlap, their stages do not:
//! every stage takes the tree's row lock on PostgreSQL
//! ([`reconcile::lock_tree`]); on SQLite the stage transaction holds the
//! database's write lock from its first statement. Every stage reads the
//! state it works on inside its transaction, so the result of any
//! interleaving is the reconciliation of the final resources.

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
    store,
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
        gate: None,
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

    /// Resource tasks decide for themselves when they are covered: not
    /// when a newer request exists, but once a pass has reconciled theirs.
    fn superseded_by_newer(&self) -> bool {
        false
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let config = &self.pipeline.config;
        let engine = self.pipeline.engine.as_ref();
        if run.name == "accept" || run.name == "mutation" {
            // Before this task's pass starts: end here if another pass has
            // already made its request visible (or found it unappliable).
            // Once the mutation stage has committed, the pass runs to its
            // end, whatever newer requests arrive.
            covered(run).await?;
        }
        let report = match run.name {
            "accept" if self.kind == ops::RECONCILE_KIND => json!({ "operation": "reconcile" }),
            "accept" => {
                let operation =
                    Operation::from_payload(run.task.payload.clone()).map_err(|error| {
                        StageError::Fail(format!("invalid resource request: {error}"))
                    })?;
                operation
                    .validate(config)
                    .map_err(|error| StageError::Fail(error.to_string()))?;
                json!({ "operation": operation.kind() })
            }
            "mutation" => {
                let periodic = self.kind == ops::RECONCILE_KIND;
                let own = (!periodic).then_some(run.task.generation).flatten();
                let txn = run.txn().await?;
                reconcile::lock_tree(txn).await?;
                if periodic {
                    reconcile::forget_rejections(txn).await?;
                }
                serde_json::to_value(reconcile::apply_mutations(txn, own).await?)
                    .unwrap_or(Value::Null)
            }
            "finalizer" => {
                if let Some(reason) = reconcile::rejection(run.db, run.task.id).await? {
                    return Err(StageError::Fail(reason));
                }
                let progress = stored_progress(run);
                run.result = Some(json!({
                    "resourceIds": resource_ids(run.task),
                    "stages": progress,
                }));
                return Ok(());
            }
            other => match Phase::of_stage(other) {
                Some(phase) => {
                    let covers = pass_generation(run);
                    let txn = run.txn().await?;
                    reconcile::lock_tree(txn).await?;
                    let report = phase.run(txn, config, engine).await?;
                    if phase == Phase::AggregatedStatus {
                        // Every phase of this pass ran after its mutation
                        // stage and took all the work marked before it, so
                        // what the pass covers is now in the tree.
                        let before = store::record_reconciled(txn, ops::SCOPE, covers).await?;
                        // Their work is done: the tasks waiting in the queue
                        // end now, not when a worker gets to them.
                        let failed = reconcile::queued_rejections(txn).await?;
                        store::end_covered(txn, ops::SCOPE, before + 1..=covers, &failed).await?;
                    }
                    report
                }
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

/// Ends a task whose request a finished pass already covers: `SUPERSEDED`
/// (its change is in the tree, reconciled by another task) or `FAILED`
/// (that pass found its resource gone).
async fn covered(run: &StageRun<'_>) -> Result<(), StageError> {
    let generation = run
        .task
        .generation
        .ok_or_else(|| StageError::Fail("a resource task needs a scope generation".into()))?;
    let reconciled = store::generations(run.db, ops::SCOPE).await?.reconciled;
    if reconciled < generation {
        return Ok(());
    }
    match reconcile::rejection(run.db, run.task.id).await? {
        Some(reason) => Err(StageError::Fail(reason)),
        None => Err(StageError::Superseded),
    }
}

/// The generation this task's pass covers: what its mutation stage applied
/// up to (its own generation if the report is missing).
fn pass_generation(run: &StageRun<'_>) -> i64 {
    run.committed_progress
        .as_ref()
        .and_then(|progress| progress.get("mutation"))
        .and_then(|mutation| mutation.get("generation"))
        .and_then(Value::as_i64)
        .or(run.task.generation)
        .unwrap_or(0)
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
    match Operation::from_payload(task.payload.clone()) {
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
