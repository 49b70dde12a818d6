//! The transactional outbox: [`emit`] writes an event in the caller's
//! transaction; the [`Publisher`] delivers committed events, in id order,
//! at least once, and marks them published.

use std::{sync::Arc, time::Duration};

use chrono::Utc;
use entity::outbox_event;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder,
    QuerySelect, Set, sea_query::Expr,
};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use uuid::Uuid;

use super::bus::{Event, EventBus};
use crate::error::AppResult;

/// An event to record.
pub struct NewEvent {
    pub topic: &'static str,
    pub aggregate_id: String,
    pub owner_id: Option<Uuid>,
    pub payload: Value,
}

/// Records events in the same transaction as the change they describe
/// (one statement however many).
pub async fn emit(txn: &impl ConnectionTrait, events: Vec<NewEvent>) -> AppResult<()> {
    if events.is_empty() {
        return Ok(());
    }
    let now = Utc::now();
    outbox_event::Entity::insert_many(events.into_iter().map(|event| outbox_event::ActiveModel {
        topic: Set(event.topic.to_owned()),
        aggregate_id: Set(event.aggregate_id),
        owner_id: Set(event.owner_id),
        payload: Set(event.payload),
        created_at: Set(now),
        published_at: Set(None),
        ..Default::default()
    }))
    .exec_without_returning(txn)
    .await?;
    Ok(())
}

/// Where published events go: this process's bus, and Redis when configured.
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Whether this process may publish now (one publisher at a time keeps
    /// events in outbox order across processes).
    async fn lead(&self) -> bool {
        true
    }

    async fn publish(&self, events: &[Arc<Event>]) -> anyhow::Result<()>;
}

/// Delivers to the in-process bus only (embedded mode).
pub struct LocalSink(pub EventBus);

#[async_trait::async_trait]
impl Sink for LocalSink {
    async fn publish(&self, events: &[Arc<Event>]) -> anyhow::Result<()> {
        for event in events {
            self.0.deliver(event.clone());
        }
        Ok(())
    }
}

const BATCH: u64 = 256;

pub struct Publisher {
    pub db: DatabaseConnection,
    pub sink: Arc<dyn Sink>,
    /// Poked after commits that emitted events.
    pub wake: Arc<Notify>,
}

impl Publisher {
    /// Publishes one batch of pending events; returns how many.
    pub async fn publish_pending(&self) -> anyhow::Result<usize> {
        let rows = outbox_event::Entity::find()
            .filter(outbox_event::Column::PublishedAt.is_null())
            .order_by_asc(outbox_event::Column::Id)
            .limit(BATCH)
            .all(&self.db)
            .await?;
        if rows.is_empty() {
            return Ok(0);
        }
        let events: Vec<Arc<Event>> = rows
            .iter()
            .map(|row| {
                Arc::new(Event {
                    id: row.id,
                    topic: row.topic.clone(),
                    aggregate_id: row.aggregate_id.clone(),
                    owner_id: row.owner_id,
                    payload: row.payload.clone(),
                    created_at: row.created_at,
                })
            })
            .collect();
        self.sink.publish(&events).await?;
        // Marked only after delivery: a crash in between re-delivers (at least once).
        outbox_event::Entity::update_many()
            .col_expr(outbox_event::Column::PublishedAt, Expr::value(Utc::now()))
            .filter(outbox_event::Column::Id.is_in(rows.iter().map(|row| row.id)))
            .exec(&self.db)
            .await?;
        metrics::counter!("trellis_outbox_published_total").increment(rows.len() as u64);
        Ok(rows.len())
    }

    /// Runs until `stop`, then flushes what is pending.
    pub async fn run(self, mut stop: watch::Receiver<bool>) {
        loop {
            if !self.sink.lead().await {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(2)) => continue,
                    _ = stop.wait_for(|stop| *stop) => return,
                }
            }
            match self.publish_pending().await {
                Ok(n) if n as u64 == BATCH => continue,
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    error = format!("{error:#}"),
                    "outbox publish failed; retrying"
                ),
            }
            tokio::select! {
                _ = self.wake.notified() => {}
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = stop.wait_for(|stop| *stop) => break,
            }
        }
        if self.sink.lead().await {
            while let Ok(n) = self.publish_pending().await {
                if n == 0 {
                    break;
                }
            }
        }
    }
}
