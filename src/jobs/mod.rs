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
//! Dispatch is *embedded*: workers claim due tasks from the database (`FOR
//! UPDATE SKIP LOCKED` on PostgreSQL), woken in-process on enqueue and by a
//! short poll otherwise.

pub mod bus;
pub mod graphql;
pub mod handler;
pub mod http;
pub mod model;
pub mod outbox;
pub mod policy;
pub mod probe;
pub mod runner;
pub mod store;
pub mod sweep;

use std::{sync::Arc, time::Duration};

use entity::task;
use sea_orm::{ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tokio::{
    sync::{Notify, watch},
    task::JoinHandle,
};
use uuid::Uuid;

use self::{
    bus::EventBus,
    handler::Registry,
    model::{NewTask, Queue, TaskStatus},
    outbox::{LocalSink, Publisher},
    runner::{Periodic, RunnerSettings},
    store::Enqueued,
};
use crate::{
    auth::Viewer,
    error::{AppError, AppResult},
};

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
    queue_wake: [Arc<Notify>; 3],
}

impl Jobs {
    pub fn new(db: DatabaseConnection, settings: RunnerSettings, registry: Registry) -> Self {
        Jobs {
            inner: Arc::new(Inner {
                db,
                registry,
                settings,
                bus: EventBus::default(),
                outbox_wake: Arc::new(Notify::new()),
                queue_wake: [
                    Arc::new(Notify::new()),
                    Arc::new(Notify::new()),
                    Arc::new(Notify::new()),
                ],
            }),
        }
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

    pub(crate) fn queue_wake(&self, queue: Queue) -> Arc<Notify> {
        self.inner.queue_wake[queue as usize].clone()
    }

    /// Wakes the outbox publisher, and the queue of a task that became due.
    pub(crate) fn after_commit(&self, task: Option<&task::Model>) {
        self.inner.outbox_wake.notify_one();
        if let Some(task) = task
            && task.status == TaskStatus::Queued.as_str()
            && let Some(queue) = Queue::parse(&task.queue)
        {
            self.inner.queue_wake[queue as usize].notify_one();
        }
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
        let handler = self.inner.registry.get(new.kind).ok_or_else(|| {
            AppError::internal(anyhow::anyhow!("no handler registered for {}", new.kind))
        })?;
        if new.first_stage.is_none() {
            // Stages may depend on the payload; a probe model is enough to name the first.
            new.first_stage = handler.stages(&probe_model(&new)).first().copied();
        }
        let enqueued = store::enqueue(
            &self.inner.db,
            &new,
            self.inner.settings.max_attempts,
            self.inner.settings.idempotency_ttl,
        )
        .await?;
        if enqueued.created {
            self.after_commit(Some(&enqueued.task));
        }
        Ok(enqueued)
    }

    /// Dispatch: the next due task of `queue` for this worker, if any.
    pub(crate) async fn dispatch_next(&self, queue: Queue) -> AppResult<Option<task::Model>> {
        let claimed = store::claim_next(
            &self.inner.db,
            queue.as_str(),
            &self.inner.settings.worker_id,
            self.inner.settings.lease,
        )
        .await?;
        if claimed.is_some() {
            self.after_commit(None);
        }
        Ok(claimed)
    }

    /// A task the viewer may see (their own; admins see all).
    pub async fn get(&self, viewer: &Viewer, id: Uuid) -> AppResult<Option<task::Model>> {
        let task = task::Entity::find_by_id(id).one(&self.inner.db).await?;
        Ok(task.filter(|task| visible(viewer, task)))
    }

    /// Cancels a task the viewer may see.
    pub async fn cancel(&self, viewer: &Viewer, id: Uuid) -> AppResult<task::Model> {
        self.get(viewer, id)
            .await?
            .ok_or(AppError::NotFound("task"))?;
        let task = store::cancel(&self.inner.db, id).await?;
        self.after_commit(None);
        Ok(task)
    }

    /// The tasks the viewer may list.
    pub fn visible_tasks(&self, viewer: &Viewer) -> sea_orm::Select<task::Entity> {
        let select = task::Entity::find();
        if viewer.is_admin() {
            select
        } else {
            select.filter(task::Column::OwnerId.eq(viewer.user_id))
        }
    }

    /// Starts workers, reaper, periodic jobs and the outbox publisher.
    pub fn start(&self, stop: watch::Receiver<bool>) -> Vec<JoinHandle<()>> {
        let mut handles = runner::start(self, builtin_periodic(), stop.clone());
        handles.push(tokio::spawn(self.publisher().run(stop)));
        handles
    }

    /// Starts only the outbox publisher (API-only processes still publish
    /// the events their own mutations emit).
    pub fn start_publisher(&self, stop: watch::Receiver<bool>) -> JoinHandle<()> {
        tokio::spawn(self.publisher().run(stop))
    }

    fn publisher(&self) -> Publisher {
        Publisher {
            db: self.inner.db.clone(),
            sink: Arc::new(LocalSink(self.inner.bus.clone())),
            wake: self.inner.outbox_wake.clone(),
        }
    }
}

pub fn visible(viewer: &Viewer, task: &task::Model) -> bool {
    viewer.is_admin() || task.owner_id == Some(viewer.user_id)
}

/// The registry of every built-in task kind.
pub fn registry(db: &DatabaseConnection, outbox_retention: Duration) -> Registry {
    let mut registry = Registry::default();
    registry.register(Arc::new(probe::ProbeHandler));
    registry.register(Arc::new(sweep::SweepHandler {
        db: db.clone(),
        outbox_retention,
    }));
    registry
}

fn builtin_periodic() -> Vec<Periodic> {
    vec![Periodic {
        name: sweep::KIND,
        period: Duration::from_secs(3600),
        task: sweep::new_task,
    }]
}

/// A not-yet-inserted task, enough for a handler to name its stages.
fn probe_model(new: &NewTask) -> task::Model {
    let now = chrono::Utc::now();
    task::Model {
        id: Uuid::nil(),
        kind: new.kind.to_owned(),
        queue: new.queue.as_str().to_owned(),
        payload: new.payload.clone(),
        payload_hash: String::new(),
        owner_id: new.owner_id,
        idempotency_key: None,
        status: TaskStatus::Queued.as_str().to_owned(),
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
