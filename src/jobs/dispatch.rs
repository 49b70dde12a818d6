//! How workers learn about due tasks: the [`Dispatcher`] trait and its
//! embedded implementation. The database stays the truth either way; a
//! dispatcher only decides who tries to claim what, and when.

use std::sync::Arc;

use entity::task;
use tokio::{sync::Notify, task::JoinHandle};
use uuid::Uuid;

use super::{Jobs, model::Queue, store};
use crate::error::AppResult;

#[async_trait::async_trait]
pub trait Dispatcher: Send + Sync + 'static {
    /// A task was committed `QUEUED` (new, retried, reclaimed): make it
    /// reachable for workers once it is due.
    async fn announce(&self, task: &task::Model);

    /// Waits a short while for a task of `queue` and claims it for this
    /// worker. `None` when nothing could be claimed in that time.
    async fn next(&self, jobs: &Jobs, queue: Queue) -> AppResult<Option<task::Model>>;

    /// The worker no longer holds a task it got from `next`.
    async fn release(&self, queue: Queue, task_id: Uuid);

    /// Background upkeep the dispatcher needs in worker processes.
    fn maintenance(
        &self,
        jobs: Jobs,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<JoinHandle<()>>;
}

/// Dispatch from the database within one process: workers claim the oldest
/// due task (`FOR UPDATE SKIP LOCKED` on PostgreSQL), woken in-process on
/// enqueue and by a short poll otherwise (retries whose backoff ended).
pub struct Embedded {
    wake: [Arc<Notify>; 3],
}

impl Default for Embedded {
    fn default() -> Self {
        Embedded {
            wake: std::array::from_fn(|_| Arc::new(Notify::new())),
        }
    }
}

#[async_trait::async_trait]
impl Dispatcher for Embedded {
    async fn announce(&self, task: &task::Model) {
        if let Some(queue) = Queue::parse(&task.queue) {
            self.wake[queue as usize].notify_one();
        }
    }

    async fn next(&self, jobs: &Jobs, queue: Queue) -> AppResult<Option<task::Model>> {
        let settings = jobs.settings();
        let claimed = store::claim_next(
            jobs.db(),
            queue.as_str(),
            &settings.worker_id,
            settings.lease,
        )
        .await?;
        if claimed.is_none() {
            tokio::select! {
                _ = self.wake[queue as usize].notified() => {}
                _ = tokio::time::sleep(settings.poll_interval) => {}
            }
        }
        Ok(claimed)
    }

    async fn release(&self, _queue: Queue, _task_id: Uuid) {}

    fn maintenance(
        &self,
        _jobs: Jobs,
        _stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<JoinHandle<()>> {
        None
    }
}
