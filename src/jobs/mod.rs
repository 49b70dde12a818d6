//! The job runner every domain uses (SPEC §3).
//!
//! - [`Jobs`] is the service: enqueue (idempotent), read, list, cancel, and
//!   start the workers.
//! - [`model`] is the vocabulary, [`policy`] the pure decisions,
//!   [`store`] the SQL, [`runner`] the worker pools, heartbeats, reaper and
//!   periodic jobs, [`outbox`] and [`bus`] the events subscriptions read.
//! - [`handler::TaskHandler`] is what a task kind implements;
//!   [`probe`] and [`sweep`] are the built-in kinds.
//!
//! Dispatch goes through a [`dispatch::Dispatcher`]: [`dispatch::Embedded`]
//! (workers claim from the database inside one process) or
//! [`redis::RedisDispatcher`] (any number of processes). Either way the
//! database is the truth and every claim is conditional.

pub mod analyze;
pub mod bus;
pub mod dispatch;
pub mod finisher;
pub mod graphql;
pub mod handler;
pub mod http;
pub mod model;
pub mod outbox;
pub mod policy;
pub mod probe;
pub mod redis;
pub mod runner;
pub mod store;
pub mod sweep;

use std::{sync::Arc, time::Duration};

use ::redis as redis_rs;
use entity::task;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tokio::{
    sync::{Notify, watch},
    task::JoinHandle,
};
use uuid::Uuid;

use self::{
    bus::EventBus,
    dispatch::{Dispatcher, Embedded},
    handler::Registry,
    model::{NewTask, Queue, TaskRecord},
    outbox::{LocalSink, Publisher, Sink},
    redis::{RedisDispatcher, RedisKeys, RedisSink},
    runner::{Periodic, RunnerSettings},
    store::Enqueued,
};
use crate::error::{AppError, AppResult};

/// Whose tasks and events a caller may see: an admin everything, anyone
/// else their own (and, of events, the instance-wide ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Audience {
    Everyone,
    Owner(Uuid),
}

impl Audience {
    /// Whether a task owned by `owner` is visible (an ownerless task, such
    /// as a periodic job, only to admins).
    pub fn sees_task(self, owner: Option<Uuid>) -> bool {
        match self {
            Audience::Everyone => true,
            Audience::Owner(user) => owner == Some(user),
        }
    }

    /// Whether an event about `owner` is visible (an ownerless one is
    /// instance-wide: everyone's).
    pub fn sees_event(self, owner: Option<Uuid>) -> bool {
        match self {
            Audience::Everyone => true,
            Audience::Owner(user) => owner.is_none_or(|owner| owner == user),
        }
    }
}

#[derive(Clone)]
pub struct Jobs {
    inner: Arc<Inner>,
}

struct Inner {
    db: DatabaseConnection,
    registry: Registry,
    settings: RunnerSettings,
    bus: EventBus,
    outbox_wake: Arc<Notify>,
    dispatcher: Arc<dyn Dispatcher>,
    sink: Arc<dyn Sink>,
    finisher: std::sync::OnceLock<finisher::Finisher>,
    redis: Option<(redis_rs::Client, RedisKeys)>,
}

/// Where dispatch and events go.
pub enum Backend {
    Embedded,
    Redis {
        client: redis_rs::Client,
        commands: redis_rs::aio::ConnectionManager,
        prefix: String,
    },
}

impl Jobs {
    pub fn new(
        db: DatabaseConnection,
        settings: RunnerSettings,
        registry: Registry,
        backend: Backend,
    ) -> Self {
        let bus = EventBus::default();
        let (dispatcher, sink, redis): (Arc<dyn Dispatcher>, Arc<dyn Sink>, _) = match backend {
            Backend::Embedded => (
                Arc::new(Embedded::default()),
                Arc::new(LocalSink(bus.clone())),
                None,
            ),
            Backend::Redis {
                client,
                commands,
                prefix,
            } => {
                let keys = RedisKeys::new(&prefix);
                (
                    Arc::new(RedisDispatcher::new(
                        client.clone(),
                        commands.clone(),
                        keys.clone(),
                        settings.worker_id.clone(),
                    )),
                    Arc::new(RedisSink {
                        commands,
                        keys: keys.clone(),
                        owner: settings.worker_id.clone(),
                        bus: bus.clone(),
                    }),
                    Some((client, keys)),
                )
            }
        };
        Jobs {
            inner: Arc::new(Inner {
                db,
                registry,
                settings,
                bus,
                outbox_wake: Arc::new(Notify::new()),
                dispatcher,
                sink,
                finisher: std::sync::OnceLock::new(),
                redis,
            }),
        }
    }

    /// The group-commit finisher, started on first use.
    pub(crate) fn finisher(&self) -> &finisher::Finisher {
        self.inner.finisher.get_or_init(|| {
            finisher::Finisher::start(
                self.inner.db.clone(),
                finisher::Claimer {
                    dispatcher: self.inner.dispatcher.clone(),
                    worker: self.inner.settings.worker_id.clone(),
                    lease: self.inner.settings.lease,
                },
            )
        })
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.inner.db
    }

    pub fn settings(&self) -> &RunnerSettings {
        &self.inner.settings
    }

    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    pub fn bus(&self) -> &EventBus {
        &self.inner.bus
    }

    /// After a commit: wakes the outbox publisher, and announces a task
    /// that is (again) queued.
    pub(crate) async fn after_commit(&self, task: Option<&task::Model>) {
        self.after_commit_all(task.map(std::slice::from_ref).unwrap_or_default())
            .await;
    }

    /// [`Jobs::after_commit`] for many tasks at once.
    pub(crate) async fn after_commit_all(&self, tasks: &[task::Model]) {
        self.inner.outbox_wake.notify_one();
        let queued: Vec<task::Model> = tasks
            .iter()
            .filter(|task| task.status == task::Status::Queued)
            .cloned()
            .collect();
        if !queued.is_empty() {
            self.inner.dispatcher.announce(&queued).await;
        }
    }

    /// Enqueues many tasks in one transaction (no idempotency keys: each
    /// is new). For bulk work such as refreshing every feed.
    pub async fn enqueue_batch(&self, tasks: Vec<NewTask>) -> AppResult<Vec<task::Model>> {
        if tasks.iter().any(|task| task.idempotency_key.is_some()) {
            return Err(AppError::internal(anyhow::anyhow!(
                "enqueue_batch takes no idempotency keys; use enqueue"
            )));
        }
        let mut rows = Vec::with_capacity(tasks.len());
        for mut new in tasks {
            self.name_first_stage(&mut new)?;
            rows.push((Uuid::now_v7(), new));
        }
        let txn = sea_orm::TransactionTrait::begin(&self.inner.db).await?;
        let refs: Vec<(Uuid, &NewTask)> = rows.iter().map(|(id, new)| (*id, new)).collect();
        let models = store::insert_tasks(&txn, &refs, self.inner.settings.max_attempts).await?;
        txn.commit().await?;
        self.after_commit_all(&models).await;
        Ok(models)
    }

    fn name_first_stage(&self, new: &mut NewTask) -> AppResult<()> {
        let handler = self.inner.registry.get(new.kind).ok_or_else(|| {
            AppError::internal(anyhow::anyhow!("no handler registered for {}", new.kind))
        })?;
        if new.first_stage.is_none() {
            // Stages may depend on the payload; a model of the new task is enough to name the first.
            new.first_stage = handler.stages(&draft_model(new)).first().copied();
        }
        Ok(())
    }

    /// Enqueues a task. With an idempotency key, a repeat of the same
    /// request returns the first task; a different payload under the same
    /// key is `IDEMPOTENCY_KEY_REUSED`.
    pub async fn enqueue(&self, mut new: NewTask) -> AppResult<Enqueued> {
        if let Some(key) = &new.idempotency_key
            && (key.is_empty() || key.len() > 255)
        {
            return Err(AppError::bad_input(
                "idempotencyKey",
                "idempotency key must be 1–255 characters",
            ));
        }
        // Scopes are stored as `varchar(255)`, like the keys.
        if let Some(scope) = &new.scope
            && scope.chars().count() > 255
        {
            return Err(AppError::bad_input(
                "scope",
                "a task's scope must be at most 255 characters",
            ));
        }
        self.name_first_stage(&mut new)?;
        let enqueued = store::enqueue(
            &self.inner.db,
            &new,
            self.inner.settings.max_attempts,
            self.inner.settings.idempotency_ttl,
        )
        .await?;
        if enqueued.created {
            self.after_commit(Some(&enqueued.task)).await;
        }
        Ok(enqueued)
    }

    /// The task an earlier request with `new`'s idempotency key created, if
    /// the key is live (see [`store::replay`]); a different payload under
    /// the key is `IDEMPOTENCY_KEY_REUSED`.
    pub async fn replay(&self, new: &NewTask) -> AppResult<Option<Enqueued>> {
        store::replay(&self.inner.db, new).await
    }

    /// Dispatch: the next due task of `queue` for this worker, if any.
    pub(crate) async fn dispatch_next(
        &self,
        queue: Queue,
        max: usize,
    ) -> AppResult<Vec<task::Model>> {
        let max = max.min(store::MAX_TASKS_PER_WRITE);
        let claimed = self.inner.dispatcher.next(self, queue, max).await?;
        if !claimed.is_empty() {
            self.after_commit(None).await;
        }
        Ok(claimed)
    }

    /// A task the audience may see.
    pub async fn get(&self, audience: Audience, id: Uuid) -> AppResult<Option<task::Model>> {
        let task = task::Entity::find_by_id(id).one(&self.inner.db).await?;
        Ok(task.filter(|task| audience.sees_task(task.owner_id)))
    }

    /// The task as the API shows it, with its scope's reconciled generation.
    pub async fn view(&self, model: &task::Model) -> AppResult<TaskRecord> {
        self.with_reconciled_generation(TaskRecord::from(model))
            .await
    }

    /// `task` with its scope's reconciled generation read now (events do
    /// not carry it): the one place every API reads it.
    pub async fn with_reconciled_generation(&self, mut task: TaskRecord) -> AppResult<TaskRecord> {
        if let Some(scope) = &task.scope {
            task.reconciled_generation =
                Some(store::generations(&self.inner.db, scope).await?.reconciled);
        }
        Ok(task)
    }

    /// Cancels a task the audience may see.
    pub async fn cancel(&self, audience: Audience, id: Uuid) -> AppResult<task::Model> {
        self.get(audience, id)
            .await?
            .ok_or(AppError::NotFound("task"))?;
        let task = store::cancel(&self.inner.db, id).await?;
        self.after_commit(None).await;
        Ok(task)
    }

    /// Per queue, how many of the audience's tasks wait (and of those,
    /// how many are held back until a later `run_at`: retry backoff or a
    /// deferred pull) and how many run now: two grouped counts.
    pub async fn queue_stats(&self, audience: Audience) -> AppResult<Vec<QueueStats>> {
        use sea_orm::{ExprTrait, QuerySelect, sea_query::Expr};

        let counts: Vec<(task::Queue, task::Status, i64)> = self
            .visible_tasks(audience)
            .select_only()
            .column(task::Column::Queue)
            .column(task::Column::Status)
            .column_as(Expr::col(task::Column::Id).count(), "n")
            .filter(task::Column::Status.is_in([task::Status::Queued, task::Status::Running]))
            .group_by(task::Column::Queue)
            .group_by(task::Column::Status)
            .into_tuple()
            .all(&self.inner.db)
            .await?;
        let delayed: Vec<(task::Queue, i64)> = self
            .visible_tasks(audience)
            .select_only()
            .column(task::Column::Queue)
            .column_as(Expr::col(task::Column::Id).count(), "n")
            .filter(task::Column::Status.eq(task::Status::Queued))
            .filter(task::Column::RunAt.gt(chrono::Utc::now()))
            .group_by(task::Column::Queue)
            .into_tuple()
            .all(&self.inner.db)
            .await?;
        Ok(Queue::ALL
            .into_iter()
            .map(|queue| {
                let stored = task::Queue::from(queue);
                let count = |status: task::Status| {
                    counts
                        .iter()
                        .find(|(q, s, _)| *q == stored && *s == status)
                        .map_or(0, |(_, _, n)| *n)
                };
                QueueStats {
                    queue,
                    queued: count(task::Status::Queued),
                    running: count(task::Status::Running),
                    delayed: delayed
                        .iter()
                        .find(|(q, _)| *q == stored)
                        .map_or(0, |(_, n)| *n),
                }
            })
            .collect())
    }

    /// The tasks the audience may list.
    pub fn visible_tasks(&self, audience: Audience) -> sea_orm::Select<task::Entity> {
        let select = task::Entity::find();
        match audience {
            Audience::Everyone => select,
            Audience::Owner(user) => select.filter(task::Column::OwnerId.eq(user)),
        }
    }

    /// Starts workers, reaper, periodic jobs and the outbox publisher.
    pub fn start(&self, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let mut handles =
            runner::start(self, self.inner.registry.periodic().to_vec(), stop.clone());
        handles.extend(
            self.inner
                .dispatcher
                .maintenance(self.clone(), stop.clone()),
        );
        handles.extend(self.start_events(stop));
        handles
    }

    /// Starts what every process runs, workers or not: the outbox publisher
    /// (API processes publish the events of their own mutations) and, with
    /// Redis, the feed of other processes' events into this one's bus.
    pub fn start_events(&self, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let publisher = Publisher::new(
            self.inner.db.clone(),
            self.inner.sink.clone(),
            self.inner.outbox_wake.clone(),
        );
        let mut handles = vec![tokio::spawn(publisher.run(stop.clone()))];
        if let Some((client, keys)) = &self.inner.redis {
            handles.push(redis::forward_events(
                client.clone(),
                keys.clone(),
                self.inner.bus.clone(),
                self.inner.settings.worker_id.clone(),
                stop,
            ));
        }
        handles
    }
}

/// One queue's load, as `queueStats` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, async_graphql::SimpleObject)]
pub struct QueueStats {
    pub queue: Queue,
    /// Tasks waiting for a worker (including those held back).
    pub queued: i64,
    /// Of the waiting tasks, those not due before a later instant (retry
    /// backoff, a deferred pull).
    pub delayed: i64,
    /// Tasks a worker holds now.
    pub running: i64,
}

/// The registry of every built-in task kind.
pub fn registry(db: &DatabaseConnection, retention: sweep::Retention) -> Registry {
    let mut registry = Registry::default();
    registry.register(Arc::new(probe::ProbeHandler));
    registry.register(Arc::new(sweep::SweepHandler {
        db: db.clone(),
        retention,
    }));
    registry.register_periodic(Periodic {
        name: sweep::KIND,
        period: Duration::from_secs(3600),
        task: sweep::new_task,
        gate: None,
    });
    registry.register(Arc::new(analyze::AnalyzeHandler));
    registry.register_periodic(Periodic {
        name: analyze::KIND,
        period: analyze::PERIOD,
        task: analyze::new_task,
        gate: None,
    });
    registry
}

/// A not-yet-inserted task, enough for a handler to name its stages.
fn draft_model(new: &NewTask) -> task::Model {
    let now = chrono::Utc::now();
    task::Model {
        id: Uuid::nil(),
        kind: new.kind.to_owned(),
        queue: new.queue.into(),
        payload: new.payload.clone(),
        payload_hash: String::new(),
        owner_id: new.owner_id,
        idempotency_key: None,
        status: task::Status::Queued,
        stage: None,
        stages_done: 0,
        progress: None,
        result: None,
        error: None,
        scope: new.scope.clone(),
        generation: None,
        lease_owner: None,
        lease_expires_at: None,
        heartbeat_at: None,
        attempt_count: 0,
        max_attempts: 1,
        cancel_requested: false,
        run_at: now,
        created_at: now,
        updated_at: now,
        started_at: None,
        finished_at: None,
    }
}
