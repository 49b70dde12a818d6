//! Worker pools (one per queue, each with its own concurrency), the
//! heartbeat that keeps a running task's lease, the reaper that reclaims
//! expired leases, and the periodic-job scheduler.

use std::{
    panic::AssertUnwindSafe,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use chrono::{DateTime, Utc};
use entity::task;
use futures_util::FutureExt;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, PaginatorTrait, QueryFilter,
    Statement,
};
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore, watch},
    task::JoinHandle,
};
use uuid::Uuid;

use super::{
    Jobs,
    finisher::Handoff,
    handler::{StageError, StageRun},
    model::{NewTask, Queue, TaskStatus},
    policy,
    store::{self, Finish, Heartbeat},
};
use crate::error::AppResult;

/// The error of a task whose handler panicked (the panic's text is in the log).
pub const PANICKED: &str = "the task's handler panicked (see the server log)";

/// Runner knobs (from `TRELLIS_QUEUE_*`, `TRELLIS_TASK_*`).
#[derive(Debug, Clone)]
pub struct RunnerSettings {
    pub worker_id: String,
    pub concurrency_short: usize,
    pub concurrency_medium: usize,
    pub concurrency_long: usize,
    pub lease: Duration,
    pub max_attempts: i32,
    pub retry_base: Duration,
    pub retry_max: Duration,
    pub idempotency_ttl: Duration,
    /// How often idle workers look for due tasks they were not woken for
    /// (retries whose backoff ended, work enqueued by other processes).
    pub poll_interval: Duration,
}

impl RunnerSettings {
    /// Retry or give up, per [`policy::after_failed_attempt`].
    pub fn after_failed_attempt(&self, task: &task::Model, error: String) -> Finish {
        policy::after_failed_attempt(
            task.attempt_count,
            task.max_attempts,
            error,
            Utc::now(),
            policy::RetryPolicy {
                base: self.retry_base,
                max: self.retry_max,
            },
            rand::random(),
        )
    }

    pub fn concurrency(&self, queue: Queue) -> usize {
        match queue {
            Queue::Short => self.concurrency_short,
            Queue::Medium => self.concurrency_medium,
            Queue::Long => self.concurrency_long,
        }
        .max(1)
    }
}

/// A job that fires once per `period` across all processes.
#[derive(Clone)]
pub struct Periodic {
    pub name: &'static str,
    pub period: Duration,
    pub task: fn() -> NewTask,
    /// Asked before a period is claimed, when set: whether the job has
    /// anything to do now (a schedule kept in the database, which can
    /// change while the process runs). No: nothing is claimed, and it is
    /// asked again at the next check.
    pub gate: Option<Gate>,
}

/// A [`Periodic`] job's "is it due?", reading what it needs itself. An
/// error is logged and counts as no.
pub type Gate =
    Arc<dyn Fn() -> futures_util::future::BoxFuture<'static, anyhow::Result<bool>> + Send + Sync>;

/// Starts the worker pools, the reaper and the periodic scheduler.
pub fn start(
    jobs: &Jobs,
    periodic: Vec<Periodic>,
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let mut handles: Vec<JoinHandle<()>> = Queue::ALL
        .into_iter()
        .map(|queue| tokio::spawn(queue_loop(jobs.clone(), queue, stop.clone())))
        .collect();
    handles.push(tokio::spawn(reaper_loop(jobs.clone(), stop.clone())));
    handles.push(tokio::spawn(periodic_loop(jobs.clone(), periodic, stop)));
    handles
}

async fn queue_loop(jobs: Jobs, queue: Queue, mut stop: watch::Receiver<bool>) {
    let settings = jobs.settings().clone();
    let concurrency = settings.concurrency(queue);
    let slots = Arc::new(Semaphore::new(concurrency));
    loop {
        if *stop.borrow() {
            break;
        }
        // Wait for one free slot, then take every other free one: claims
        // are batched up to the number of idle workers.
        let first = tokio::select! {
            permit = slots.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break,
            },
            _ = stop.wait_for(|stop| *stop) => break,
        };
        let mut permits = vec![first];
        while let Ok(permit) = slots.clone().try_acquire_owned() {
            permits.push(permit);
        }
        if permits.len() < concurrency / 4 {
            // Busy pool: let a few more finish so one claim serves several.
            tokio::time::sleep(Duration::from_millis(1)).await;
            while let Ok(permit) = slots.clone().try_acquire_owned() {
                permits.push(permit);
            }
        }
        match jobs.dispatch_next(queue, permits.len()).await {
            // Unused permits drop here; an empty batch means the dispatcher
            // already waited a little.
            Ok(tasks) => {
                for (task, permit) in tasks.into_iter().zip(permits) {
                    tokio::spawn(execute(jobs.clone(), task, permit, stop.clone()));
                }
            }
            Err(error) => {
                drop(permits);
                tracing::warn!(queue = queue.key(), error = %crate::error::chain(&error), "claiming tasks failed; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    // Let running tasks reach a stage boundary and release or finish.
    let _ = tokio::time::timeout(
        Duration::from_secs(30),
        slots.acquire_many(concurrency as u32),
    )
    .await;
}

/// Works a slot of a queue's pool: runs the claimed task, then each next
/// task the group commit hands the slot, until one comes without.
async fn execute(
    jobs: Jobs,
    task: task::Model,
    _permit: OwnedSemaphorePermit,
    stop: watch::Receiver<bool>,
) {
    let mut task = task;
    while let Some(next) = run_task(&jobs, task, &stop).await {
        task = next;
    }
}

/// Runs one claimed task to a stage boundary it cannot pass: the end, an
/// error, a cancellation, supersession, a lost lease, or shutdown. Returns
/// the slot's next task when its end handed it one.
async fn run_task(
    jobs: &Jobs,
    task: task::Model,
    stop: &watch::Receiver<bool>,
) -> Option<task::Model> {
    let settings = jobs.settings().clone();
    let queue = Queue::from(task.queue).as_str();
    metrics::gauge!("trellis_tasks_running", "queue" => queue).increment(1.0);
    if task.attempt_count == 1
        && let Some(started) = task.started_at
    {
        let pickup = (started - task.created_at).to_std().unwrap_or_default();
        metrics::histogram!("trellis_task_pickup_seconds", "queue" => queue)
            .record(pickup.as_secs_f64());
    }

    let lost = Arc::new(AtomicBool::new(false));
    let cancel = Arc::new(AtomicBool::new(task.cancel_requested));
    let heartbeat = tokio::spawn(heartbeat_loop(
        jobs.db().clone(),
        task.id,
        settings.worker_id.clone(),
        settings.lease,
        lost.clone(),
        cancel.clone(),
    ));

    // A panicking handler must not leave the heartbeat renewing the lease
    // of a task nobody runs, nor its task unrecorded. A panic is a bug, not
    // a passing condition: the task fails at once (another attempt would
    // repeat the panic and every side effect before it, such as a fetch).
    // The stage's transaction was dropped with the stage, so it rolled back.
    let outcome = match AssertUnwindSafe(run_stages(jobs, &task, &lost, &cancel, stop))
        .catch_unwind()
        .await
    {
        Ok(outcome) => outcome,
        Err(panic) => {
            let message = crate::error::panic_text(panic.as_ref());
            tracing::error!(task_id = %task.id, kind = %task.kind, panic = %message, "a task handler panicked");
            End::Outcome(Finish::Failed(PANICKED.into()))
        }
    };
    heartbeat.abort();

    let mut handed = None;
    // Released (shutdown, a deferred stage): back in the queue, not a retry.
    let released = matches!(outcome, End::Outcome(Finish::Release { .. }));
    let ended = match outcome {
        End::Outcome(outcome) => record_outcome(jobs, task.id, &settings.worker_id, outcome)
            .await
            .map(|model| model.map(Ended::from)),
        End::Finished(model) => Ok(Some(Ended::from(*model))),
        // Its lease lost or not, the slot is free for the task handed to it.
        End::GroupCommitted(handoff) => {
            handed = handoff.next;
            Ok(handoff.finished_at.map(|finished_at| Ended {
                status: TaskStatus::Succeeded,
                started_at: task.started_at,
                finished_at: Some(finished_at),
                requeued: None,
            }))
        }
        End::LeaseLost => Ok(None),
    };
    match ended {
        Ok(Some(ended)) => {
            if ended.status.is_terminal()
                && let (Some(started), Some(finished)) = (ended.started_at, ended.finished_at)
            {
                metrics::histogram!("trellis_task_run_seconds", "queue" => queue, "status" => ended.status.as_str())
                    .record((finished - started).to_std().unwrap_or_default().as_secs_f64());
            }
            if ended.status == TaskStatus::Queued && !released {
                metrics::counter!("trellis_task_retries_total", "queue" => queue).increment(1);
            }
            jobs.after_commit(ended.requeued.as_ref()).await;
        }
        Ok(None) => {
            tracing::warn!(task_id = %task.id, "lease lost before the task could be finished");
        }
        Err(error) => {
            tracing::error!(task_id = %task.id, error = %crate::error::chain(&error), "recording a task's outcome failed")
        }
    }
    metrics::gauge!("trellis_tasks_running", "queue" => queue).decrement(1.0);
    handed
}

/// Records a task's outcome, again at once (with a short capped backoff)
/// when the database was busy or the write failed for a moment, instead of
/// leaving the task to be redone after its lease runs out. The write is
/// conditional on our lease, so a repeat is harmless.
async fn record_outcome(
    jobs: &Jobs,
    id: Uuid,
    worker: &str,
    outcome: Finish,
) -> AppResult<Option<task::Model>> {
    use backon::{ExponentialBuilder, Retryable};
    (|| store::finish(jobs.db(), id, worker, outcome.clone()))
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(20))
                .with_max_delay(Duration::from_secs(1))
                .with_max_times(6)
                .with_jitter(),
        )
        .notify(|error, after| {
            tracing::warn!(task_id = %id, error = %crate::error::chain(error), retry_in = ?after, "recording a task's outcome failed; retrying");
        })
        .await
}

/// How running the stages ended.
enum End {
    /// The outcome still has to be recorded.
    Outcome(Finish),
    /// The last stage committed and recorded the end in one transaction.
    Finished(Box<task::Model>),
    /// Went to the group commit, which recorded `SUCCEEDED` (unless the
    /// lease was lost) and may have claimed the slot's next task.
    GroupCommitted(Box<Handoff>),
    /// Another worker owns the task now.
    LeaseLost,
}

/// A recorded end, as much as the runner needs of it: metrics, and the
/// task when it went back to the queue (to be announced).
struct Ended {
    status: TaskStatus,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
    requeued: Option<task::Model>,
}

impl From<task::Model> for Ended {
    fn from(model: task::Model) -> Self {
        let status = TaskStatus::from(model.status);
        Ended {
            status,
            started_at: model.started_at,
            finished_at: model.finished_at,
            requeued: (status == TaskStatus::Queued).then_some(model),
        }
    }
}

/// Runs the remaining stages.
async fn run_stages(
    jobs: &Jobs,
    task: &task::Model,
    lost: &AtomicBool,
    cancel: &AtomicBool,
    stop: &watch::Receiver<bool>,
) -> End {
    let settings = jobs.settings();
    let Some(handler) = jobs.registry().get(&task.kind).cloned() else {
        return End::Outcome(Finish::Failed(format!(
            "no handler for task kind `{}`",
            task.kind
        )));
    };
    let stages = handler.stages(task);
    let mut result = None;
    let mut committed_progress = task.progress.clone();
    for index in (task.stages_done.max(0) as usize)..stages.len() {
        if lost.load(Ordering::SeqCst) {
            return End::LeaseLost;
        }
        if cancel.load(Ordering::SeqCst) {
            return End::Outcome(Finish::Cancelled);
        }
        if *stop.borrow() {
            return End::Outcome(Finish::Release { run_at: Utc::now() });
        }
        let mut run = StageRun {
            task,
            index,
            name: stages[index],
            db: jobs.db(),
            result: None,
            progress: None,
            committed_progress: committed_progress.clone(),
            worker: &settings.worker_id,
            next_stage: stages.get(index + 1).copied(),
            superseded_by_newer: handler.superseded_by_newer(),
            txn: None,
        };
        let outcome = match handler.run_stage(&mut run).await {
            Ok(()) => {
                result = run.result.take().or(result);
                if run.progress.is_some() {
                    committed_progress = run.progress.clone();
                }
                let last = (index + 1 == stages.len()).then(|| (stages.len(), result.clone()));
                match last {
                    // Nothing of the stage's own to commit: end through the group commit.
                    Some((total, result))
                        if run.txn.is_none() && run.progress.is_none() && task.scope.is_none() =>
                    {
                        let queue = Queue::from(task.queue);
                        let want_next = !*stop.borrow();
                        let ended = jobs
                            .finisher()
                            .succeed(task.id, queue, result, total as i32, want_next)
                            .await;
                        match ended {
                            Ok(handoff) => return End::GroupCommitted(Box::new(handoff)),
                            Err(error) => Err(StageError::from(error)),
                        }
                    }
                    last => commit_stage(&mut run, last).await,
                }
            }
            Err(error) => Err(error),
        };
        if let Some(txn) = run.txn.take() {
            // Commit consumed it on success; anything left here failed.
            let _ = txn.rollback().await;
        }
        match outcome {
            Ok(Some(finished)) => return End::Finished(Box::new(finished)),
            Ok(None) => jobs.after_commit(None).await,
            Err(StageError::LeaseLost) => return End::LeaseLost,
            Err(StageError::Cancelled) => return End::Outcome(Finish::Cancelled),
            Err(StageError::Superseded) => return End::Outcome(Finish::Superseded),
            Err(StageError::Fail(message)) => return End::Outcome(Finish::Failed(message)),
            Err(StageError::Defer(wait)) => {
                let run_at = Utc::now()
                    + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::seconds(1));
                return End::Outcome(Finish::Release { run_at });
            }
            Err(StageError::Retry(error)) => {
                let message = format!("{error:#}");
                tracing::info!(task_id = %task.id, stage = stages[index], attempt = task.attempt_count, error = %message, "stage failed");
                return End::Outcome(settings.after_failed_attempt(task, message));
            }
        }
    }
    // Resumed with every stage already committed.
    End::Outcome(Finish::Succeeded(result))
}

/// Commits a successful stage: opens the transaction if the handler did not
/// need one, stores progress and emits the task's new state. The last stage
/// (`last` = stage count and result) also records `SUCCEEDED` in the same
/// transaction and returns the finished task.
async fn commit_stage(
    run: &mut StageRun<'_>,
    last: Option<(usize, Option<serde_json::Value>)>,
) -> Result<Option<task::Model>, StageError> {
    use sea_orm::sea_query::Expr;
    let progress = run.progress.take();
    let task_id = run.task.id;
    if last.is_some() && run.txn.is_none() && run.task.scope.is_none() {
        // Nothing to check before the end: the outcome update is itself
        // conditional on our lease and records the stage.
        run.txn = Some(crate::db::begin_write(run.db).await?);
    }
    let worker = run.worker;
    let txn = run.txn().await?;
    // The stage's new state, read back by the progress write when there is one.
    let mut updated = None;
    if let Some(progress) = progress {
        updated = task::Entity::update_many()
            .col_expr(task::Column::Progress, Expr::value(progress))
            .filter(task::Column::Id.eq(task_id))
            .exec_with_returning(txn)
            .await?
            .pop();
    }
    let finished = match last {
        Some((total, result)) => Some(
            store::apply_outcome_in(
                txn,
                task_id,
                store::held_by(task_id, worker),
                &Finish::Succeeded(result),
                Some(total as i32),
            )
            .await?
            .ok_or(StageError::LeaseLost)?,
        ),
        None => {
            let model = match updated {
                Some(model) => Some(model),
                None => task::Entity::find_by_id(task_id).one(txn).await?,
            };
            if let Some(model) = model {
                store::emit_task_updated(txn, &model).await?;
            }
            None
        }
    };
    let txn = run
        .txn
        .take()
        .ok_or_else(|| StageError::Retry(anyhow::anyhow!("stage transaction missing")))?;
    txn.commit().await?;
    Ok(finished)
}

async fn heartbeat_loop(
    db: DatabaseConnection,
    id: uuid::Uuid,
    worker: String,
    lease: Duration,
    lost: Arc<AtomicBool>,
    cancel: Arc<AtomicBool>,
) {
    let every = (lease / 3).max(Duration::from_millis(100));
    loop {
        tokio::time::sleep(every).await;
        match store::renew_lease(&db, id, &worker, lease).await {
            Ok(Heartbeat::Held { cancel_requested }) => {
                if cancel_requested {
                    cancel.store(true, Ordering::SeqCst);
                }
            }
            Ok(Heartbeat::Lost) => {
                lost.store(true, Ordering::SeqCst);
                return;
            }
            Err(error) => {
                tracing::warn!(task_id = %id, error = %crate::error::chain(&error), "heartbeat failed; will retry")
            }
        }
    }
}

async fn reaper_loop(jobs: Jobs, mut stop: watch::Receiver<bool>) {
    let settings = jobs.settings().clone();
    let every = (settings.lease / 4).clamp(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        match store::reap_expired_leases(jobs.db(), |task, error| {
            settings.after_failed_attempt(task, error)
        })
        .await
        {
            Ok(reaped) => {
                for task in &reaped {
                    jobs.after_commit(Some(task)).await;
                }
            }
            Err(error) => {
                tracing::warn!(error = %crate::error::chain(&error), "reaping expired leases failed")
            }
        }
        record_queue_depths(jobs.db()).await;
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = stop.wait_for(|stop| *stop) => break,
        }
    }
}

async fn record_queue_depths(db: &DatabaseConnection) {
    for queue in Queue::ALL {
        let depth = task::Entity::find()
            .filter(task::Column::Queue.eq(task::Queue::from(queue)))
            .filter(task::Column::Status.eq(task::Status::Queued))
            .count(db)
            .await;
        if let Ok(depth) = depth {
            metrics::gauge!("trellis_queue_depth", "queue" => queue.key()).set(depth as f64);
        }
    }
}

/// Fires each periodic job once per period across every process sharing the
/// database: the period is claimed with a compare-and-set, and the task is
/// enqueued in the same transaction.
async fn periodic_loop(jobs: Jobs, periodic: Vec<Periodic>, mut stop: watch::Receiver<bool>) {
    if periodic.is_empty() {
        return;
    }
    loop {
        for job in &periodic {
            if let Err(error) = fire_if_due(&jobs, job).await {
                tracing::warn!(
                    job = job.name,
                    error = format!("{error:#}"),
                    "periodic job check failed"
                );
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(15)) => {}
            _ = stop.wait_for(|stop| *stop) => break,
        }
    }
}

async fn fire_if_due(jobs: &Jobs, job: &Periodic) -> anyhow::Result<()> {
    if let Some(gate) = &job.gate
        && !gate().await?
    {
        return Ok(());
    }
    let now = Utc::now();
    let period = policy::period_index(now.timestamp(), job.period);
    let db = jobs.db();
    let txn = crate::db::begin_write(db).await?;
    let claimed = txn
        .execute_raw(Statement::from_sql_and_values(
            txn.get_database_backend(),
            "INSERT INTO periodic_runs (name, last_period, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO UPDATE SET last_period = excluded.last_period, \
             updated_at = excluded.updated_at WHERE periodic_runs.last_period < excluded.last_period",
            vec![job.name.into(), period.into(), now.into()],
        ))
        .await?;
    if claimed.rows_affected() != 1 {
        txn.rollback().await?;
        return Ok(());
    }
    // The period and its task commit together: a crash fires it again, never loses it.
    let new = (job.task)();
    let task = store::insert_task(
        &txn,
        &new,
        uuid::Uuid::now_v7(),
        jobs.settings().max_attempts,
    )
    .await?;
    txn.commit().await?;
    jobs.after_commit(Some(&task)).await;
    tracing::info!(job = job.name, period, task_id = %task.id, "periodic job fired");
    Ok(())
}
