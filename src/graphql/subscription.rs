//! The one way a GraphQL subscription follows the event bus: every event
//! goes through the subscription's `pick` (which keeps, reads or drops
//! it), and a subscriber that fell behind the bus's buffer is told so —
//! an error item with code `EVENTS_LAGGED` and `missed`, then the stream
//! goes on — instead of silently skipping what it missed. A client that
//! gets one re-reads the current state (`nodeTree`, `feeds`, `tasks`).

use std::{future::Future, sync::Arc};

use async_graphql::ErrorExtensions;
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;

use crate::jobs::bus::{Event, EventBus};

/// What a subscriber that fell behind receives in place of the events.
pub fn lagged(missed: u64) -> async_graphql::Error {
    async_graphql::Error::new(format!(
        "this subscription fell behind and missed {missed} events; re-read the current state"
    ))
    .extend_with(|_, extensions| {
        extensions.set("code", "EVENTS_LAGGED");
        extensions.set("missed", missed);
    })
}

/// The bus's events, from now on, as `pick` turns them into items (`None`
/// drops one). Subscribed when called, so no event between the call and
/// the first poll is lost.
pub fn follow<T, F, Fut>(
    bus: &EventBus,
    mut pick: F,
) -> impl Stream<Item = async_graphql::Result<T>> + Send + 'static + use<T, F, Fut>
where
    T: Send + 'static,
    F: FnMut(Arc<Event>) -> Fut + Send + 'static,
    Fut: Future<Output = Option<T>> + Send,
{
    let mut events = bus.subscribe();
    async_stream::stream! {
        loop {
            match events.recv().await {
                Ok(event) => {
                    if let Some(item) = pick(event).await {
                        yield Ok(item);
                    }
                }
                Err(RecvError::Lagged(missed)) => {
                    tracing::warn!(missed, "a subscriber fell behind the event bus");
                    yield Err(lagged(missed));
                }
                Err(RecvError::Closed) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;
    use serde_json::value::RawValue;

    use super::*;

    fn event(id: i64) -> Arc<Event> {
        Arc::new(Event {
            id,
            topic: "test".into(),
            aggregate_id: id.to_string(),
            owner_id: None,
            payload: RawValue::from_string("{}".into()).unwrap(),
            created_at: chrono::Utc::now(),
        })
    }

    #[tokio::test]
    async fn a_subscriber_that_fell_behind_is_told_how_much_it_missed() {
        let bus = EventBus::with_capacity(2);
        let stream = follow(&bus, |event| async move {
            (event.id % 2 == 0).then_some(event.id)
        });
        futures_util::pin_mut!(stream);
        // Five events before the subscriber reads: the buffer keeps two.
        for id in 1..=5 {
            bus.deliver(event(id));
        }
        let first = stream.next().await.unwrap().unwrap_err();
        assert_eq!(
            first.extensions.as_ref().and_then(|e| e.get("code")),
            Some(&async_graphql::Value::from("EVENTS_LAGGED"))
        );
        assert_eq!(
            first.extensions.as_ref().and_then(|e| e.get("missed")),
            Some(&async_graphql::Value::from(3u64))
        );
        // Then what the buffer kept, as picked (4 kept, 5 dropped), and on.
        assert_eq!(stream.next().await.unwrap().unwrap(), 4);
        bus.deliver(event(6));
        assert_eq!(stream.next().await.unwrap().unwrap(), 6);
    }
}
