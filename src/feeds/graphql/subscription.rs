//! The feeds' subscriptions.

use super::*;

#[derive(Default)]
pub struct FeedsSubscription;

#[Subscription]
impl FeedsSubscription {
    /// Each finished pull of your feeds (or of one feed): new items and the
    /// fetch state. A subscriber that fell behind gets an `EVENTS_LAGGED`
    /// error (with `missed`) and should re-read its feeds.
    async fn feed_updated(
        &self,
        ctx: &Context<'_>,
        feed_id: Option<ID>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<FeedUpdate>> + use<>> {
        let viewer = ctx.viewer()?.clone();
        let service = feeds(ctx)?.clone();
        let bus = ctx.service::<Jobs>()?.bus().clone();
        let only = feed_id
            .as_ref()
            .map(|id| parse_int_id("feedId", id))
            .transpose()?;
        Ok(crate::graphql::subscription::follow(&bus, move |event| {
            let service = service.clone();
            let user_id = viewer.user_id;
            async move {
                if event.topic != FEED_UPDATED || event.owner_id != Some(user_id) {
                    return None;
                }
                let id = event.aggregate_id.parse::<i64>().ok()?;
                if only.is_some_and(|only| only != id) {
                    return None;
                }
                let feed = service.feed(user_id, id).await.ok()?;
                let fetch_state = service
                    .fetch_state(id)
                    .await
                    .ok()
                    .flatten()
                    .map(FetchState::from);
                let new_items = event
                    .payload::<serde_json::Value>()
                    .and_then(|payload| payload.get("newItems")?.as_i64())
                    .unwrap_or(0);
                Some(FeedUpdate {
                    feed: Feed(feed),
                    new_items,
                    fetch_state,
                })
            }
        }))
    }
}
