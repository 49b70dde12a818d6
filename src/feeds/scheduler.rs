//! The periodic pull scheduler (seed 000 §8): sleeps until the earliest due
//! feed, claims what is due and enqueues one `feeds.pull` task per feed on
//! `q:short`. It is woken early by feed changes and by pulls that rewrite
//! `next_check_at` (the `feed.changed` / `feed.updated` events, so a change
//! made through another process wakes it too), and its sleep is capped at
//! the global interval.
//!
//! Due times are absolute instants computed when a pull ends, and the
//! scheduler wakes at the earliest of them — not on a fixed tick — so a
//! fetch that took a while never makes a due feed wait a further interval.
//! Claiming moves a feed's `next_check_at` ahead by one global interval
//! in one conditional UPDATE, so several worker processes never enqueue the
//! same feed twice; the pull then sets the real next check.

use std::time::Duration;

use chrono::Utc;
use serde_json::json;
use tokio::sync::{broadcast::error::RecvError, watch};

use super::{FEED_CHANGED, FEED_UPDATED, PULL_KIND, pull::PullSettings, store};
use crate::jobs::{
    Jobs,
    model::{NewTask, Queue},
};

/// Feeds claimed per round.
const CLAIM_BATCH: u64 = 500;
/// Coalesces bursts of events (many pulls ending together) into one look.
const DEBOUNCE: Duration = Duration::from_millis(200);

pub async fn run(jobs: Jobs, settings: PullSettings, mut stop: watch::Receiver<bool>) {
    let db = jobs.db().clone();
    let mut events = jobs.bus().subscribe();
    let hold = chrono::Duration::from_std(settings.interval).unwrap_or(chrono::Duration::hours(1));
    loop {
        if *stop.borrow() {
            break;
        }
        let now = Utc::now();
        match store::claim_due_feeds(&db, now, now + hold, CLAIM_BATCH).await {
            Ok(claimed) if !claimed.is_empty() => {
                let tasks = claimed
                    .iter()
                    .map(|(feed_id, user_id)| {
                        let mut task = NewTask::new(
                            PULL_KIND,
                            Queue::Short,
                            json!({ "feedId": feed_id, "mode": "scheduled" }),
                        );
                        // The feed's owner: its events reach nobody else.
                        task.owner_id = Some(*user_id);
                        task
                    })
                    .collect();
                if let Err(error) = jobs.enqueue_batch(tasks).await {
                    // The claimed feeds come due again after the hold.
                    tracing::warn!(error = %crate::error::chain(&error), "enqueueing feed pulls failed");
                } else {
                    tracing::debug!(feeds = claimed.len(), "feed pulls enqueued");
                }
                continue;
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(error = %crate::error::chain(&error), "finding due feeds failed; retrying");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(5)) => continue,
                    _ = stop.wait_for(|stop| *stop) => break,
                }
            }
        }
        let sleep = match store::earliest_due(&db).await {
            Ok(Some(at)) => match (at - Utc::now()).to_std() {
                // Due in the future: wake right then.
                Ok(wait) => wait.min(settings.interval),
                // Due but not claimable (a Retry-After hold): look again soon.
                Err(_) => Duration::from_secs(1),
            },
            Ok(None) => settings.interval,
            Err(error) => {
                tracing::warn!(error = %crate::error::chain(&error), "reading the next due feed failed");
                Duration::from_secs(5)
            }
        };
        let woken_by_event = tokio::select! {
            _ = tokio::time::sleep(sleep) => false,
            _ = feed_event(&mut events) => true,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        if woken_by_event {
            tokio::time::sleep(DEBOUNCE).await;
        }
    }
}

/// Returns on the next event that can change what is due.
async fn feed_event(
    events: &mut tokio::sync::broadcast::Receiver<std::sync::Arc<crate::jobs::bus::Event>>,
) {
    loop {
        match events.recv().await {
            Ok(event) if event.topic == FEED_CHANGED || event.topic == FEED_UPDATED => return,
            Ok(_) => continue,
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => std::future::pending::<()>().await,
        }
    }
}
