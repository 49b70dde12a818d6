//! GraphQL surface of the runner: `task`, `tasks`, `cancelTask`,
//! `probeTask`, and the `taskUpdated` / `events` subscriptions.

use std::sync::Arc;

use async_graphql::{
    ComplexObject, Context, ID, InputObject, Object, SimpleObject, Subscription,
    dataloader::DataLoader,
};
use chrono::{DateTime, Utc};
use entity::task;
use futures_util::Stream;
use sea_orm::{ColumnTrait, QueryFilter};
use serde_json::json;
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::{
    Jobs, QueueStats,
    bus::Event,
    model::{NewTask, Queue, TASK_UPDATED, TaskRecord, TaskStatus},
    probe,
};
use crate::{
    error::{AppError, AppResult},
    graphql::{
        context::ContextExt,
        json::Json,
        loaders::ById,
        pagination::{KeyValue, Keyset, KeysetConnection, PageRequest, paginate},
        subscription::follow,
    },
};

pub fn parse_id(field: &'static str, id: &ID) -> AppResult<Uuid> {
    Uuid::parse_str(id.as_str()).map_err(|_| AppError::bad_input(field, "not a valid id"))
}

/// A background task, as the API (GraphQL, `GET /tasks/{id}`, events) shows it.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(complex)]
pub struct Task {
    pub id: ID,
    /// What the task does, e.g. `feeds.pull` or `nodes.reconcile`.
    pub kind: String,
    pub queue: Queue,
    pub status: TaskStatus,
    /// The stage running or next to run (null for single-step tasks once done).
    pub stage: Option<String>,
    /// Stages committed so far.
    pub stages_done: i32,
    /// Kind-specific progress figures.
    pub progress: Option<Json>,
    /// Kind-specific outcome, once succeeded.
    pub result: Option<Json>,
    /// The last error, when a retry is pending or the task failed.
    pub error: Option<String>,
    pub attempt_count: i32,
    pub max_attempts: i32,
    pub scope: Option<String>,
    /// The task's place in its scope: a newer request has a larger one.
    pub generation: Option<i64>,
    /// The scope's work is done up to this generation (for `resources`:
    /// applied and reconciled into the tree), so `generation <=
    /// reconciledGeneration` says the task's change is visible. Read when
    /// the task is; not part of its events.
    pub reconciled_generation: Option<i64>,
    /// Not started before this instant (retry backoff).
    pub run_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<TaskRecord> for Task {
    fn from(record: TaskRecord) -> Self {
        Task {
            id: ID(record.id.to_string()),
            kind: record.kind,
            queue: record.queue,
            status: record.status,
            stage: record.stage,
            stages_done: record.stages_done,
            progress: record.progress.map(Json),
            result: record.result.map(Json),
            error: record.error,
            attempt_count: record.attempt_count,
            max_attempts: record.max_attempts,
            scope: record.scope,
            generation: record.generation,
            reconciled_generation: record.reconciled_generation,
            run_at: record.run_at,
            created_at: record.created_at,
            updated_at: record.updated_at,
            started_at: record.started_at,
            finished_at: record.finished_at,
        }
    }
}

crate::keyed!(task::Entity, Uuid, Id, id);

/// Task rows by id, for the fields of `Task` that read more of the row
/// than its events carry: one fresh loader per request.
pub struct TaskRows(pub DataLoader<ById<task::Entity>>);

impl TaskRows {
    pub fn new(db: &sea_orm::DatabaseConnection) -> Arc<Self> {
        Arc::new(TaskRows(DataLoader::new(ById::new(db), tokio::spawn)))
    }
}

#[ComplexObject]
impl Task {
    /// How many stages the task runs in all, so `stagesDone` reads as
    /// progress (its kind's stages; a probe's from its input). Null when
    /// this server does not know the kind, or the task is gone.
    async fn stages_total(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<i32>> {
        let id = parse_id("id", &self.id)?;
        let rows = ctx.service::<Arc<TaskRows>>()?;
        let Some(row) = rows.0.load_one(id).await? else {
            return Ok(None);
        };
        Ok(jobs(ctx)?
            .registry()
            .get(&row.kind)
            .map(|handler| handler.stages(&row).len() as i32))
    }
}

impl From<&task::Model> for Task {
    fn from(model: &task::Model) -> Self {
        Task::from(TaskRecord::from(model))
    }
}

/// Narrows `tasks`.
#[derive(InputObject, Default)]
pub struct TaskFilter {
    pub status: Option<TaskStatus>,
    pub kind: Option<String>,
    pub queue: Option<Queue>,
}

/// A canary task that exercises the runner end to end.
#[derive(InputObject)]
pub struct ProbeTaskInput {
    /// Number of stages, 1–8.
    #[graphql(default = 1)]
    pub stages: i32,
    /// Time each stage spends before writing its effect, 0–60000 ms.
    #[graphql(default = 0)]
    pub sleep_ms: i32,
    /// The first this-many attempts fail on purpose (to watch retries).
    #[graphql(default = 0)]
    pub fail_attempts: i32,
    /// Whether each stage writes its effect row, progress and result.
    /// Without, the stages write nothing of their own and the task ends
    /// through the runner's group commit of endings (as a no-op job does).
    #[graphql(default = true)]
    pub effects: bool,
    #[graphql(default_with = "Queue::Short")]
    pub queue: Queue,
    pub max_attempts: Option<i32>,
    /// Probes on the same scope supersede older ones.
    pub scope: Option<String>,
    pub idempotency_key: Option<String>,
}

/// An event from the transactional outbox.
#[derive(SimpleObject, Clone, Debug)]
#[graphql(name = "Event")]
pub struct EventMessage {
    /// Increases in publication order.
    pub id: ID,
    pub topic: String,
    pub aggregate_id: String,
    pub payload: Json,
    pub created_at: DateTime<Utc>,
}

impl From<&Event> for EventMessage {
    fn from(event: &Event) -> Self {
        EventMessage {
            id: ID(event.id.to_string()),
            topic: event.topic.clone(),
            aggregate_id: event.aggregate_id.clone(),
            payload: Json(event.payload().unwrap_or_default()),
            created_at: event.created_at,
        }
    }
}

fn jobs<'a>(ctx: &'a Context<'_>) -> AppResult<&'a Jobs> {
    ctx.service::<Jobs>()
}

#[derive(Default)]
pub struct JobsQuery;

#[Object]
impl JobsQuery {
    /// A task: your own, or any for admins. Null when absent or not yours.
    async fn task(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Task>> {
        let viewer = ctx.viewer()?;
        let id = parse_id("id", &id)?;
        let jobs = jobs(ctx)?;
        match jobs.get(viewer.audience(), id).await? {
            Some(model) => Ok(Some(Task::from(jobs.view(&model).await?))),
            None => Ok(None),
        }
    }

    /// Each queue's load: tasks waiting (and held back) and running —
    /// your own, or everyone's for admins.
    async fn queue_stats(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<QueueStats>> {
        let viewer = ctx.viewer()?;
        Ok(jobs(ctx)?.queue_stats(viewer.audience()).await?)
    }

    /// Tasks, newest first: your own, or all for admins.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn tasks(
        &self,
        ctx: &Context<'_>,
        filter: Option<TaskFilter>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<Task>> {
        let viewer = ctx.viewer()?;
        let jobs = jobs(ctx)?;
        let filter = filter.unwrap_or_default();
        let mut select = jobs.visible_tasks(viewer.audience());
        if let Some(status) = filter.status {
            select = select.filter(task::Column::Status.eq(task::Status::from(status)));
        }
        if let Some(kind) = filter.kind {
            select = select.filter(task::Column::Kind.eq(kind));
        }
        if let Some(queue) = filter.queue {
            select = select.filter(task::Column::Queue.eq(task::Queue::from(queue)));
        }
        Ok(paginate(
            jobs.db(),
            select,
            // Task ids are UUIDv7, minted at creation: id order is creation order.
            Keyset::descending(vec![task::Column::Id]),
            PageRequest::new(first, after)?,
            |t| vec![KeyValue::Uuid(t.id)],
            |t| Task::from(&t),
        )
        .await?)
    }
}

#[derive(Default)]
pub struct JobsMutation;

#[Object]
impl JobsMutation {
    /// Cancels a task: at once if queued, at its next stage boundary if
    /// running. `CONFLICT` once it has finished.
    async fn cancel_task(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let id = parse_id("id", &id)?;
        Ok(Task::from(&jobs(ctx)?.cancel(viewer.audience(), id).await?))
    }

    /// Runs a periodic job now, outside its schedule (admins): e.g.
    /// `system.sweep` or `feeds.retention`.
    async fn run_periodic_job(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<Task> {
        let viewer = ctx.admin()?;
        let jobs = jobs(ctx)?;
        let periodic = jobs
            .registry()
            .periodic()
            .iter()
            .find(|periodic| periodic.name == name)
            .ok_or_else(|| {
                AppError::bad_input("name", format!("no periodic job named {name:?}"))
            })?;
        let mut new = (periodic.task)();
        new.owner_id = Some(viewer.user_id);
        Ok(Task::from(&jobs.enqueue(new).await?.task))
    }

    /// Enqueues a canary task (admins). Returns at once with the task.
    async fn probe_task(
        &self,
        ctx: &Context<'_>,
        input: ProbeTaskInput,
    ) -> async_graphql::Result<Task> {
        let viewer = ctx.admin()?;
        if !(1..=probe::MAX_STAGES as i32).contains(&input.stages) {
            return Err(AppError::bad_input("stages", "stages must be 1–8").into());
        }
        if !(0..=probe::MAX_SLEEP_MS as i32).contains(&input.sleep_ms) {
            return Err(AppError::bad_input("sleepMs", "sleepMs must be 0–60000").into());
        }
        if input.fail_attempts < 0 || input.max_attempts.is_some_and(|n| !(1..=100).contains(&n)) {
            return Err(AppError::bad_input(
                "maxAttempts",
                "failAttempts ≥ 0 and maxAttempts 1–100",
            )
            .into());
        }
        let mut new = NewTask::new(
            probe::KIND,
            input.queue,
            json!({
                "stages": input.stages,
                "sleepMs": input.sleep_ms,
                "failAttempts": input.fail_attempts,
                "effects": input.effects,
            }),
        );
        new.owner_id = Some(viewer.user_id);
        new.idempotency_key = input.idempotency_key;
        new.scope = input.scope.map(|scope| format!("probe:{scope}"));
        new.max_attempts = input.max_attempts;
        let enqueued = jobs(ctx)?.enqueue(new).await?;
        Ok(Task::from(&enqueued.task))
    }
}

#[derive(Default)]
pub struct JobsSubscription;

#[Subscription]
impl JobsSubscription {
    /// The task now, then again on every status or stage change; completes
    /// after a terminal state (`SUCCEEDED`, `FAILED`, `SUPERSEDED`, `CANCELLED`).
    /// A change whose scope could not be read comes as an error; the
    /// stream goes on.
    async fn task_updated(
        &self,
        ctx: &Context<'_>,
        id: ID,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<Task>> + use<>> {
        let audience = ctx.viewer()?.audience();
        let jobs = jobs(ctx)?.clone();
        let id = parse_id("id", &id)?;
        // Subscribe before reading, so no change falls between the two.
        let mut events = jobs.bus().subscribe();
        let current = jobs
            .get(audience, id)
            .await?
            .ok_or(AppError::NotFound("task"))?;
        let aggregate = id.to_string();
        let first = Task::from(jobs.view(&current).await?);
        Ok(async_stream::stream! {
            let mut last = first;
            let mut done = last.status.is_terminal();
            yield Ok(last.clone());
            while !done {
                let next = match events.recv().await {
                    Ok(event) if event.topic == TASK_UPDATED && event.aggregate_id == aggregate => {
                        event.payload::<TaskRecord>()
                    }
                    Ok(_) => continue,
                    // Fell behind: the database has the truth.
                    Err(RecvError::Lagged(_)) => match jobs.get(audience, id).await {
                        Ok(Some(model)) => Some(TaskRecord::from(&model)),
                        _ => None,
                    },
                    Err(RecvError::Closed) => break,
                };
                let Some(record) = next else { continue };
                if record.updated_at < last.updated_at {
                    continue;
                }
                let task = match jobs.with_reconciled_generation(record).await {
                    Ok(record) => Task::from(record),
                    Err(error) => {
                        yield Err(error.into());
                        continue;
                    }
                };
                done = task.status.is_terminal();
                last = task.clone();
                yield Ok(task);
            }
        })
    }

    /// Outbox events as they are published, optionally only some topics
    /// (e.g. `task.updated`). Members receive events about themselves and
    /// instance-wide ones; admins receive all. A subscriber that fell
    /// behind gets an `EVENTS_LAGGED` error (with `missed`), then the
    /// events go on.
    async fn events(
        &self,
        ctx: &Context<'_>,
        topics: Option<Vec<String>>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<EventMessage>> + use<>>
    {
        let audience = ctx.viewer()?.audience();
        let bus = jobs(ctx)?.bus();
        Ok(follow(bus, move |event| {
            let wanted = topics
                .as_ref()
                .is_none_or(|topics| topics.iter().any(|t| *t == event.topic));
            let allowed = audience.sees_event(event.owner_id);
            let message = (wanted && allowed).then(|| EventMessage::from(event.as_ref()));
            async move { message }
        }))
    }
}
