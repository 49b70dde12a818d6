//! How workers learn about due tasks: the [`Dispatcher`] trait and its
//! embedded implementation. The database stays the truth either way; a
//! dispatcher only decides who tries to claim what, and when.

use std::sync::Arc;

use entity::task;
use tokio::{sync::Notify, task::JoinHandle};

use super::{
    Jobs,
    model::Queue,
    store::{self, Claim},
};
use crate::error::AppResult;

#[async_trait::async_trait]
pub trait Dispatcher: Send + Sync + 'static {
    /// Tasks were committed `QUEUED` (new, retried, reclaimed): make them
    /// reachable for workers once they are due.
    async fn announce(&self, tasks: &[task::Model]);

    /// Waits a short while for tasks of `queue` and claims up to `max` of
    /// them for this worker. Empty when nothing could be claimed in that time.
    async fn next(&self, jobs: &Jobs, queue: Queue, max: usize) -> AppResult<Vec<task::Model>>;

    /// Without waiting: what this worker may try to claim of `queue`, up
    /// to `max` tasks, for a claim that commits elsewhere (the group
    /// commit hands freed slots their next tasks). Settle it afterwards.
    async fn take(&self, queue: Queue, max: usize) -> AppResult<Claim>;

    /// After a claim from [`Dispatcher::take`] committed (`claimed`) or
    /// failed: the dispatcher's own bookkeeping, off the caller's path.
    fn settle(&self, queue: Queue, claim: Claim, claimed: bool);

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
    async fn announce(&self, tasks: &[task::Model]) {
        for task in tasks {
            self.wake[Queue::from(task.queue) as usize].notify_one();
        }
    }

    async fn next(&self, jobs: &Jobs, queue: Queue, max: usize) -> AppResult<Vec<task::Model>> {
        let settings = jobs.settings();
        let claim = self.take(queue, max).await?;
        let claimed = store::claim(jobs.db(), &claim, &settings.worker_id, settings.lease).await?;
        if claimed.is_empty() {
            tokio::select! {
                _ = self.wake[queue as usize].notified() => {}
                _ = tokio::time::sleep(settings.poll_interval) => {}
            }
        }
        Ok(claimed)
    }

    /// The database picks: the oldest due tasks when the claim runs.
    async fn take(&self, queue: Queue, max: usize) -> AppResult<Claim> {
        Ok(Claim::Next { queue, limit: max })
    }

    fn settle(&self, _queue: Queue, _claim: Claim, _claimed: bool) {}

    fn maintenance(
        &self,
        _jobs: Jobs,
        _stop: tokio::sync::watch::Receiver<bool>,
    ) -> Option<JoinHandle<()>> {
        None
    }
}
