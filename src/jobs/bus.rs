//! The event bus subscriptions read from. Events arrive here only through
//! the outbox publisher, i.e. after the change they describe committed.
//!
//! Every process has one in-process broadcast channel; subscriptions
//! (`taskUpdated`, `events`, …) listen on it. Embedded, the publisher feeds it
//! directly; with Redis, the publisher writes to Redis and every process
//! forwards what Redis delivers into its own channel, so an API process sees
//! what a worker process did.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::broadcast;
use uuid::Uuid;

/// One published outbox event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Event {
    /// The outbox id: increasing in publication order.
    pub id: i64,
    pub topic: String,
    pub aggregate_id: String,
    /// The user it concerns; `None` for instance-wide events.
    pub owner_id: Option<Uuid>,
    pub payload: Value,
    pub created_at: DateTime<Utc>,
}

/// How many events a slow subscriber may fall behind before it is told it lagged.
const CAPACITY: usize = 4096;

#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus {
            sender: broadcast::channel(CAPACITY).0,
        }
    }
}

impl EventBus {
    /// Hands an event to this process's subscribers.
    pub fn deliver(&self, event: Arc<Event>) {
        // No subscriber is not an error.
        let _ = self.sender.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }
}
