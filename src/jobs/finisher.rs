//! Group commit for task endings. Tasks whose last stage wrote nothing of
//! its own (a no-op, a stage whose work lives outside the database) end
//! through one process-wide finisher that records many `SUCCEEDED` endings
//! — rows and events — in one transaction: while one batch commits, the
//! next gathers. Every ending stays conditional on this worker's lease.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};

use entity::task;
use sea_orm::{DatabaseConnection, QueryFilter, sea_query::Expr};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use uuid::Uuid;

use super::{
    policy::Finish,
    store::{self, held_by},
};
use crate::error::{AppError, AppResult};

const MAX_BATCH: usize = 512;

struct Ending {
    id: Uuid,
    result: Option<Value>,
    stages_done: i32,
    /// When the task ended, or `None` when its lease was no longer ours.
    reply: oneshot::Sender<AppResult<Option<DateTime<Utc>>>>,
}

#[derive(Clone)]
pub struct Finisher {
    sender: mpsc::Sender<Ending>,
}

impl Finisher {
    /// Starts the finisher loop for `worker`'s tasks.
    pub fn start(db: DatabaseConnection, worker: String) -> Self {
        let (sender, mut receiver) = mpsc::channel::<Ending>(4 * MAX_BATCH);
        tokio::spawn(async move {
            while let Some(first) = receiver.recv().await {
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match receiver.try_recv() {
                        Ok(ending) => batch.push(ending),
                        Err(_) => break,
                    }
                }
                // At the database's precision: the instant the rows say.
                let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 6);
                match commit(&db, &worker, &batch, now).await {
                    Ok(ended) => {
                        for ending in batch {
                            let _ = ending
                                .reply
                                .send(Ok(ended.contains(&ending.id).then_some(now)));
                        }
                    }
                    Err(error) => {
                        let message = error.to_string();
                        for ending in batch {
                            let _ = ending.reply.send(Err(AppError::internal(anyhow::anyhow!(
                                "group commit failed: {message}"
                            ))));
                        }
                    }
                }
            }
        });
        Finisher { sender }
    }

    /// Records the task `SUCCEEDED` after `stages_done` stages, and says
    /// when (its `finished_at`). `None` when the lease was no longer this
    /// worker's.
    pub async fn succeed(
        &self,
        id: Uuid,
        result: Option<Value>,
        stages_done: i32,
    ) -> AppResult<Option<DateTime<Utc>>> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Ending {
                id,
                result,
                stages_done,
                reply,
            })
            .await
            .map_err(|_| AppError::internal(anyhow::anyhow!("finisher stopped")))?;
        answer
            .await
            .map_err(|_| AppError::internal(anyhow::anyhow!("finisher dropped a task")))?
    }
}

/// One statement per ending that carries a result, one per stage count
/// for the rest; all commit together. Returns the tasks that ended (the
/// rest were no longer this worker's); no row needs to travel back.
async fn commit(
    db: &DatabaseConnection,
    worker: &str,
    batch: &[Ending],
    now: DateTime<Utc>,
) -> AppResult<HashSet<Uuid>> {
    let backend = db.get_database_backend();
    let mut statements = Vec::new();
    let mut plain: HashMap<i32, Vec<Uuid>> = HashMap::new();
    for ending in batch {
        match &ending.result {
            None => plain.entry(ending.stages_done).or_default().push(ending.id),
            Some(result) => statements.push(store::outcome_statement(
                backend,
                ending.id,
                held_by(ending.id, worker),
                &Finish::Succeeded(Some(result.clone())),
                Some(ending.stages_done),
                now,
            )),
        }
    }
    for (stages_done, ids) in plain {
        let update = store::outcome_update(&Finish::Succeeded(None), now)
            .col_expr(task::Column::StagesDone, Expr::value(stages_done))
            .filter(crate::db::uuid_in_expr(backend, task::Column::Id, &ids))
            .filter(store::by_id_only(store::held(worker)));
        statements.push(store::returning_all(backend, &update));
    }
    Ok(store::write_tasks_ids(db, statements)
        .await?
        .into_iter()
        .collect())
}
