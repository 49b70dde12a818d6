//! Group commit for task endings, and the hand-off of freed slots.
//!
//! Tasks whose last stage wrote nothing of its own (a no-op, a stage whose
//! work lives outside the database) end through one process-wide finisher
//! that records many `SUCCEEDED` endings — rows and events — in one
//! commit: while one batch commits, the next gathers (and, on
//! PostgreSQL, up to [`IN_FLIGHT`] commit at once). Every ending stays
//! conditional on this worker's lease.
//!
//! The same commit claims the next tasks for the slots it frees: for each
//! queue, as many as endings in the batch asked for one (the dispatcher
//! says which: ids from Redis, or the oldest due in the database). Each
//! ending's reply carries its slot's next task, so a busy worker pays one
//! statement per batch for both ends of its slots, not one to end and one
//! to claim, and a slot never waits for the claim loop.

use std::{
    collections::{HashMap, HashSet, VecDeque},
    sync::Arc,
};

use chrono::{DateTime, Utc};
use entity::task;
use sea_orm::{DatabaseConnection, DbBackend, QueryFilter, sea_query::Expr};
use serde_json::Value;
use tokio::sync::{Semaphore, mpsc, oneshot};
use uuid::Uuid;

use super::{
    dispatch::Dispatcher,
    model::Queue,
    policy::Finish,
    store::{self, Claim, held_by},
};
use crate::error::{AppError, AppResult};

const MAX_BATCH: usize = 512;

/// Batches committing at once on PostgreSQL. While one is in the database
/// the next gathers and goes too, so a commit's round trips (a Redis take,
/// the statement, the wake-ups between) overlap another's instead of
/// adding to every slot's wait. Measured on the job benchmark: two in
/// flight did 10–25% more than one; three made batches smaller and did
/// less. SQLite has one writer: a second commit could only wait for the
/// write lock in SQLite's busy handler, which sleeps in steps of up to
/// 100 ms, so there batches commit one at a time.
const IN_FLIGHT: usize = 2;

fn in_flight(backend: DbBackend) -> usize {
    if backend == DbBackend::Sqlite {
        1
    } else {
        IN_FLIGHT
    }
}

/// What the group commit did for an ending.
#[derive(Debug)]
pub struct Handoff {
    /// When the task ended, or `None` when its lease was no longer ours.
    pub finished_at: Option<DateTime<Utc>>,
    /// The slot's next task, claimed in the same commit, when one was due.
    pub next: Option<task::Model>,
}

struct Ending {
    id: Uuid,
    queue: Queue,
    result: Option<Value>,
    stages_done: i32,
    /// Whether the slot takes another task (not while shutting down).
    want_next: bool,
    reply: oneshot::Sender<AppResult<Handoff>>,
}

/// What the finisher needs to claim for freed slots.
pub struct Claimer {
    pub dispatcher: Arc<dyn Dispatcher>,
    pub worker: String,
    pub lease: std::time::Duration,
}

#[derive(Clone)]
pub struct Finisher {
    sender: mpsc::Sender<Ending>,
}

impl Finisher {
    /// Starts the finisher loop for `claimer.worker`'s tasks.
    pub fn start(db: DatabaseConnection, claimer: Claimer) -> Self {
        let (sender, mut receiver) = mpsc::channel::<Ending>(4 * MAX_BATCH);
        let claimer = Arc::new(claimer);
        let in_flight = Arc::new(Semaphore::new(in_flight(db.get_database_backend())));
        tokio::spawn(async move {
            while let Some(first) = receiver.recv().await {
                // Never closed, so never an error: the loop owns it.
                let Ok(permit) = in_flight.clone().acquire_owned().await else {
                    break;
                };
                let mut batch = vec![first];
                while batch.len() < MAX_BATCH {
                    match receiver.try_recv() {
                        Ok(ending) => batch.push(ending),
                        Err(_) => break,
                    }
                }
                let (db, claimer) = (db.clone(), claimer.clone());
                tokio::spawn(async move {
                    commit_batch(&db, &claimer, batch).await;
                    drop(permit);
                });
            }
        });
        Finisher { sender }
    }

    /// Records the task `SUCCEEDED` after `stages_done` stages, and, when
    /// `want_next`, claims its slot's next task of `queue` in the same
    /// commit.
    pub async fn succeed(
        &self,
        id: Uuid,
        queue: Queue,
        result: Option<Value>,
        stages_done: i32,
        want_next: bool,
    ) -> AppResult<Handoff> {
        let (reply, answer) = oneshot::channel();
        self.sender
            .send(Ending {
                id,
                queue,
                result,
                stages_done,
                want_next,
                reply,
            })
            .await
            .map_err(|_| AppError::internal(anyhow::anyhow!("finisher stopped")))?;
        answer
            .await
            .map_err(|_| AppError::internal(anyhow::anyhow!("finisher dropped a task")))?
    }
}

/// Commits one batch and answers each of its endings.
async fn commit_batch(db: &DatabaseConnection, claimer: &Claimer, batch: Vec<Ending>) {
    let mut claims = Vec::new();
    for queue in Queue::ALL {
        let count = batch
            .iter()
            .filter(|ending| ending.want_next && ending.queue == queue)
            .count();
        if count == 0 {
            continue;
        }
        match claimer.dispatcher.take(queue, count).await {
            Ok(claim) if !claim.is_empty() => claims.push((queue, claim)),
            Ok(_) => {}
            // The slots go back to the pool, whose claim loop tries again.
            Err(error) => {
                tracing::warn!(queue = queue.key(), error = %crate::error::chain(&error), "taking tasks for freed slots failed")
            }
        }
    }
    // At the database's precision: the instant the rows say.
    let now = chrono::SubsecRound::trunc_subsecs(Utc::now(), 6);
    let outcome = commit(db, claimer, &batch, &claims, now).await;
    for (queue, claim) in claims {
        claimer.dispatcher.settle(queue, claim, outcome.is_ok());
    }
    match outcome {
        Ok((ended, claimed)) => {
            let mut next: HashMap<Queue, VecDeque<task::Model>> = HashMap::new();
            for task in claimed {
                let queue = Queue::from(task.queue);
                next.entry(queue).or_default().push_back(task);
            }
            for ending in batch {
                let handed = ending
                    .want_next
                    .then(|| next.get_mut(&ending.queue).and_then(VecDeque::pop_front))
                    .flatten();
                let handoff = Handoff {
                    finished_at: ended.contains(&ending.id).then_some(now),
                    next: handed,
                };
                if let Err(Ok(Handoff {
                    next: Some(task), ..
                })) = ending.reply.send(Ok(handoff))
                {
                    release(db, claimer, task);
                }
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

/// Returns a claimed task whose slot went away (its worker stopped
/// waiting) to the queue at once, its attempt not counted.
fn release(db: &DatabaseConnection, claimer: &Claimer, task: task::Model) {
    let db = db.clone();
    let worker = claimer.worker.clone();
    let dispatcher = claimer.dispatcher.clone();
    tokio::spawn(async move {
        match store::finish(
            &db,
            task.id,
            &worker,
            Finish::Release {
                run_at: chrono::Utc::now(),
            },
        )
        .await
        {
            Ok(Some(released)) => dispatcher.announce(&[released]).await,
            Ok(None) => {}
            // Its lease runs out unrenewed and the reaper requeues it.
            Err(error) => {
                tracing::warn!(task_id = %task.id, error = %crate::error::chain(&error), "releasing a task that found no slot failed")
            }
        }
    });
}

/// One statement per ending that carries a result, one per stage count
/// for the rest, and the claims; all commit together. Returns the tasks
/// that ended (the rest were no longer this worker's) and those claimed.
async fn commit(
    db: &DatabaseConnection,
    claimer: &Claimer,
    batch: &[Ending],
    claims: &[(Queue, Claim)],
    now: DateTime<Utc>,
) -> AppResult<(HashSet<Uuid>, Vec<task::Model>)> {
    let backend = db.get_database_backend();
    let worker = claimer.worker.as_str();
    let mut ends = Vec::new();
    let mut plain: HashMap<i32, Vec<Uuid>> = HashMap::new();
    for ending in batch {
        match &ending.result {
            None => plain.entry(ending.stages_done).or_default().push(ending.id),
            Some(result) => ends.push(store::outcome_statement(
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
        ends.push(store::returning_all(backend, &update));
    }
    let claims = claims
        .iter()
        .map(|(_, claim)| store::claim_statement(backend, claim, worker, claimer.lease))
        .collect::<AppResult<Vec<_>>>()?;
    let (ended, claimed) = store::end_and_claim(db, ends, claims).await?;
    Ok((ended.into_iter().collect(), claimed))
}
