//! What a task kind implements. The runner owns leases, retries, stages and
//! generations; a handler does the work of one stage. Slow work (network,
//! computation) happens first, outside any transaction; then the handler
//! asks [`StageRun::txn`] for the stage's transaction and writes its
//! effects there, so they commit together with the record that the stage
//! is done — or not at all.

use std::{collections::HashMap, sync::Arc};

use entity::task;
use sea_orm::{DatabaseConnection, DatabaseTransaction};
use serde::{Deserialize, de::DeserializeOwned};
use serde_json::Value;

use super::{model::Queue, runner::Periodic, store};
use crate::error::AppError;

/// Why a stage did not complete.
#[derive(Debug)]
pub enum StageError {
    /// Worth another attempt (network trouble, a busy upstream): the task is
    /// retried with backoff until `max_attempts`.
    Retry(anyhow::Error),
    /// Retrying cannot help (invalid payload, a permanent refusal).
    Fail(String),
    /// A newer generation of the task's scope exists; nothing was written.
    Superseded,
    /// This worker's lease was taken over; nothing was written.
    LeaseLost,
    /// Cancellation was requested; this stage's work is discarded.
    Cancelled,
    /// Not now (a busy upstream the handler would otherwise wait for):
    /// back to the queue for this long, nothing written, the attempt not
    /// counted — so waiting never holds a worker slot.
    Defer(std::time::Duration),
}

impl From<sea_orm::DbErr> for StageError {
    fn from(error: sea_orm::DbErr) -> Self {
        StageError::Retry(error.into())
    }
}

/// A service's answer inside a stage: the client's kind of mistake (bad
/// input, a target that is gone, a refusal) cannot get better by retrying,
/// so it fails the task at once; anything else is retried, keeping its
/// whole cause chain for the task's `error` and the log.
impl From<AppError> for StageError {
    fn from(error: AppError) -> Self {
        match error {
            AppError::Internal(_)
            | AppError::Conflict(_)
            | AppError::RateLimited { .. }
            | AppError::Unavailable { .. }
            | AppError::Upstream(_)
            | AppError::StorageFull(_) => StageError::Retry(error.into_anyhow()),
            AppError::Unauthenticated(_)
            | AppError::Forbidden(_)
            | AppError::NotFound(_)
            | AppError::BadUserInput { .. }
            | AppError::IdempotencyKeyReused => StageError::Fail(error.to_string()),
        }
    }
}

/// One stage's run: the task, the stage, and (on demand) the transaction
/// its effects go in.
pub struct StageRun<'a> {
    pub task: &'a task::Model,
    /// Zero-based index into [`TaskHandler::stages`].
    pub index: usize,
    pub name: &'static str,
    /// For reads and slow work before the transaction.
    pub db: &'a DatabaseConnection,
    /// Set by the last stage: the task's `result`.
    pub result: Option<Value>,
    /// Set by any stage: the task's `progress`.
    pub progress: Option<Value>,
    /// The `progress` committed so far (by earlier stages of this run, or
    /// read with the task when it was claimed).
    pub committed_progress: Option<Value>,
    pub(super) worker: &'a str,
    pub(super) next_stage: Option<&'static str>,
    /// Whether a newer generation of the scope supersedes this task at its
    /// next stage ([`TaskHandler::superseded_by_newer`]).
    pub(super) superseded_by_newer: bool,
    pub(super) txn: Option<crate::db::WriteTxn>,
}

impl StageRun<'_> {
    /// The stage's transaction: opened on first call by recording the stage
    /// as done (only while this worker holds the lease) and, unless the
    /// handler decides that itself, checking the scope's generation.
    pub async fn txn(&mut self) -> Result<&DatabaseTransaction, StageError> {
        if self.txn.is_none() {
            let txn = match store::begin_stage(
                self.db,
                self.task.id,
                self.worker,
                self.index as i32 + 1,
                self.next_stage,
            )
            .await?
            {
                store::StageTxn::Open(txn) => txn,
                store::StageTxn::CancelRequested => return Err(StageError::Cancelled),
                store::StageTxn::LeaseLost => return Err(StageError::LeaseLost),
            };
            if let Some(scope) = self
                .task
                .scope
                .as_ref()
                .filter(|_| self.superseded_by_newer)
            {
                let latest = store::current_generation(&txn, scope).await?;
                if latest > self.task.generation.unwrap_or(0) {
                    txn.rollback().await?;
                    return Err(StageError::Superseded);
                }
            }
            self.txn = Some(txn);
        }
        self.txn
            .as_deref()
            .ok_or_else(|| StageError::Retry(anyhow::anyhow!("stage transaction missing")))
    }
}

#[async_trait::async_trait]
pub trait TaskHandler: Send + Sync + 'static {
    /// The `kind` column value.
    fn kind(&self) -> &'static str;
    /// The queue a task of this kind goes to unless the caller chooses.
    fn queue(&self) -> Queue;
    /// Named stages, run in order; a crashed task resumes at the first stage
    /// not committed. Single-step kinds have one.
    fn stages(&self, task: &task::Model) -> Vec<&'static str>;
    /// True (the default): a scoped task whose scope has a newer
    /// generation ends `SUPERSEDED` at its next stage, writing nothing.
    /// False: the handler decides when its task is covered by other work
    /// (resource requests end only once their change is reconciled).
    fn superseded_by_newer(&self) -> bool {
        true
    }
    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError>;
}

/// A task kind of one stage: its kind, queue and stage name are constants
/// and its payload is typed. Every such kind gets [`TaskHandler`] from the
/// impl below: an unreadable payload fails the task at once (retrying
/// cannot fix it), and what [`SingleStage::run`] returns is the task's
/// `result`.
#[async_trait::async_trait]
pub trait SingleStage: Send + Sync + 'static {
    const KIND: &'static str;
    const QUEUE: Queue;
    /// The name of its one stage (shown as the task's `stage`).
    const STAGE: &'static str;
    /// The task's payload; `serde::de::IgnoredAny` when it has none.
    type Payload: DeserializeOwned + Send;
    /// The stage's work; what it returns becomes the task's `result`.
    async fn run(
        &self,
        payload: Self::Payload,
        run: &mut StageRun<'_>,
    ) -> Result<Value, StageError>;
}

#[async_trait::async_trait]
impl<T: SingleStage> TaskHandler for T {
    fn kind(&self) -> &'static str {
        T::KIND
    }

    fn queue(&self) -> Queue {
        T::QUEUE
    }

    fn stages(&self, _task: &task::Model) -> Vec<&'static str> {
        vec![T::STAGE]
    }

    async fn run_stage(&self, run: &mut StageRun<'_>) -> Result<(), StageError> {
        let payload = T::Payload::deserialize(&run.task.payload)
            .map_err(|error| StageError::Fail(format!("invalid {} payload: {error}", T::KIND)))?;
        run.result = Some(self.run(payload, run).await?);
        Ok(())
    }
}

/// The handlers this process can run, by kind, and the periodic jobs.
#[derive(Default, Clone)]
pub struct Registry {
    handlers: HashMap<&'static str, Arc<dyn TaskHandler>>,
    periodic: Vec<Periodic>,
}

impl Registry {
    pub fn register(&mut self, handler: Arc<dyn TaskHandler>) {
        self.handlers.insert(handler.kind(), handler);
    }

    /// A job that fires once per period across all processes.
    pub fn register_periodic(&mut self, periodic: Periodic) {
        self.periodic.push(periodic);
    }

    pub fn periodic(&self) -> &[Periodic] {
        &self.periodic
    }

    pub fn get(&self, kind: &str) -> Option<&Arc<dyn TaskHandler>> {
        self.handlers.get(kind)
    }
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn an_internal_error_keeps_its_whole_cause_chain() {
        let cause = Err::<(), _>(std::io::Error::other("disk full"))
            .context("writing the item")
            .unwrap_err();
        let StageError::Retry(error) = StageError::from(AppError::internal(cause)) else {
            panic!("an internal error is worth another attempt");
        };
        assert_eq!(format!("{error:#}"), "writing the item: disk full");
    }

    #[test]
    fn client_mistakes_fail_at_once_and_say_why() {
        for (error, text) in [
            (
                AppError::bad_input("patch", "health must be 0..=3"),
                "health must be 0..=3",
            ),
            (AppError::NotFound("resource"), "resource not found"),
            (AppError::Forbidden("not yours"), "not yours"),
        ] {
            match StageError::from(error) {
                StageError::Fail(message) => assert_eq!(message, text),
                other => panic!("expected Fail, got {other:?}"),
            }
        }
        assert!(matches!(
            StageError::from(AppError::Conflict("busy".into())),
            StageError::Retry(_)
        ));
    }
}
