//! The feeds' queries.

use super::*;

#[derive(Default)]
pub struct FeedsQuery;

#[Object]
impl FeedsQuery {
    /// Your feed groups, the default first.
    #[graphql(complexity = "ASSUMED_GROUPS * child_complexity")]
    async fn groups(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<FeedGroup>> {
        let viewer = ctx.viewer()?;
        Ok(feeds(ctx)?
            .groups(viewer.user_id)
            .await?
            .into_iter()
            .map(FeedGroup)
            .collect())
    }

    async fn group(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<FeedGroup>> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(optional(feeds(ctx)?.group(viewer.user_id, id).await)?.map(FeedGroup))
    }

    /// Your feeds by name, optionally of one group.
    #[graphql(complexity = "ASSUMED_FEEDS * child_complexity")]
    async fn feeds(
        &self,
        ctx: &Context<'_>,
        group_id: Option<ID>,
    ) -> async_graphql::Result<Vec<Feed>> {
        let viewer = ctx.viewer()?;
        let group = group_id
            .as_ref()
            .map(|id| parse_int_id("groupId", id))
            .transpose()?;
        Ok(feeds(ctx)?
            .feeds(viewer.user_id, group)
            .await?
            .into_iter()
            .map(Feed)
            .collect())
    }

    async fn feed(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Feed>> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(optional(feeds(ctx)?.feed(viewer.user_id, id).await)?.map(Feed))
    }

    /// Your items, newest first (`pubDate desc, id desc`) or, with
    /// `order: OLDEST_FIRST`, oldest first.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn items(
        &self,
        ctx: &Context<'_>,
        filter: Option<ItemFilter>,
        #[graphql(default)] order: ItemSort,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<Item>> {
        let viewer = ctx.viewer()?;
        let filter = filter.unwrap_or_default();
        let mut query = ItemQuery::default();
        query.feed = filter
            .feed_id
            .as_ref()
            .map(|id| parse_int_id("feedId", id))
            .transpose()?;
        query.group = filter
            .group_id
            .as_ref()
            .map(|id| parse_int_id("groupId", id).map(GroupRef::Id))
            .transpose()?;
        query.text = filter.query;
        if let Some(unread) = filter.unread {
            query.unread(unread);
        }
        if let Some(starred) = filter.starred {
            query.starred(starred);
        }
        Ok(feeds(ctx)?
            .item_connection(
                viewer.user_id,
                &query,
                order.into(),
                PageRequest::new(first, after)?,
                Item,
            )
            .await?)
    }

    async fn item(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Item>> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(optional(feeds(ctx)?.item(viewer.user_id, id).await)?.map(Item))
    }

    /// Full-text search over your items (ranked) and feeds.
    #[graphql(complexity = "crate::graphql::pagination::list_cost(200, first, child_complexity)")]
    async fn search(
        &self,
        ctx: &Context<'_>,
        query: String,
        #[graphql(default = 50)] first: i32,
    ) -> async_graphql::Result<SearchResult> {
        let viewer = ctx.viewer()?;
        let service = feeds(ctx)?;
        if query.trim().is_empty() || query.len() > 500 {
            return Err(AppError::bad_input("query", "query must be 1–500 characters").into());
        }
        let limit = first.clamp(1, 200) as u64;
        let items = service.ranked_items(viewer.user_id, &query, limit).await?;
        let matched_feeds = service
            .matching_feeds(viewer.user_id, &query, limit)
            .await?;
        Ok(SearchResult {
            feeds: matched_feeds.into_iter().map(Feed).collect(),
            items: items.into_iter().map(Item).collect(),
        })
    }

    /// Your bookmarks, newest first.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn bookmarks(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<Bookmark>> {
        let viewer = ctx.viewer()?;
        Ok(feeds(ctx)?
            .bookmark_connection(
                viewer.user_id,
                PageRequest::new(first, after)?,
                Bookmark::from,
            )
            .await?)
    }

    async fn bookmark(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Bookmark>> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(optional(feeds(ctx)?.bookmark(viewer.user_id, id).await)?.map(Bookmark::from))
    }

    /// Your reader preferences.
    async fn settings(&self, ctx: &Context<'_>) -> async_graphql::Result<Settings> {
        let viewer = ctx.viewer()?;
        Ok(feeds(ctx)?.settings(viewer.user_id).await?.into())
    }

    /// The feeds a page links to (`<link rel="alternate">`), or the URL
    /// itself when it is a feed. The page is fetched through the SSRF guard.
    async fn discover_feeds(
        &self,
        ctx: &Context<'_>,
        url: String,
    ) -> async_graphql::Result<Vec<DiscoveredFeed>> {
        ctx.viewer()?;
        Ok(ctx
            .service::<Discoverer>()?
            .discover(url.trim())
            .await?
            .into_iter()
            .map(|found| DiscoveredFeed {
                url: found.url,
                title: found.title,
                kind: found.kind.to_owned(),
            })
            .collect())
    }

    /// Your subscriptions as an OPML 2.0 document.
    async fn export_opml(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
        let viewer = ctx.viewer()?;
        Ok(feeds(ctx)?.export_opml(viewer.user_id).await?)
    }

    /// Whether you have set a password for mobile reader apps (Fever API at `/fever/`).
    async fn reader_api_enabled(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        Ok(ctx
            .service::<ReaderAccounts>()?
            .enabled(viewer.user_id)
            .await?)
    }

    /// The values `refreshIntervalSeconds` may take.
    async fn refresh_interval_options(&self) -> Vec<i32> {
        REFRESH_INTERVALS.to_vec()
    }
}

/// `NOT_FOUND` as `null` for single-object queries.
fn optional<T>(result: AppResult<T>) -> AppResult<Option<T>> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(AppError::NotFound(_)) => Ok(None),
        Err(error) => Err(error),
    }
}
