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
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::value::RawValue;
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
    /// The payload's JSON text as the outbox stored it: carried to Redis
    /// and across processes without being parsed, and parsed only by the
    /// subscriber that wants it ([`Event::payload`]).
    pub payload: Box<RawValue>,
    #[serde(with = "super::model::utc_micros")]
    pub created_at: DateTime<Utc>,
}

impl Event {
    /// The payload read as `T`; `None` when it does not fit.
    pub fn payload<T: DeserializeOwned>(&self) -> Option<T> {
        serde_json::from_str(self.payload.get()).ok()
    }
}

/// How many events a slow subscriber may fall behind before it is told it lagged.
const CAPACITY: usize = 4096;

#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::with_capacity(CAPACITY)
    }
}

impl EventBus {
    /// A bus whose subscribers may fall `capacity` events behind.
    pub fn with_capacity(capacity: usize) -> Self {
        EventBus {
            sender: broadcast::channel(capacity).0,
        }
    }

    /// Hands an event to this process's subscribers.
    pub fn deliver(&self, event: Arc<Event>) {
        // No subscriber is not an error.
        let _ = self.sender.send(event);
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.sender.subscribe()
    }
}
