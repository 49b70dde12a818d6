//! GraphQL surface of the feed reader: thin resolvers over
//! [`FeedsService`]; every one starts from `ctx.viewer()` and passes the
//! viewer's id down, so nothing crosses users.

use std::sync::Arc;

use async_graphql::{
    ComplexObject, Context, ID, InputObject, MaybeUndefined, Object, SimpleObject, Subscription,
};
use chrono::{DateTime, Utc};
use entity::{bookmark, feed, feed_fetch_state, feed_group, feed_settings, item};
use futures_util::Stream;
use serde_json::json;

use super::{
    FEED_UPDATED, IMPORT_KIND, PULL_KIND, REFRESH_ALL_KIND, REFRESH_INTERVALS,
    discover::Discoverer,
    item_list::{GroupRef, ItemQuery},
    loaders::{FeedLoaders, ItemCounts},
    opml,
    pull::PullMode,
    reader_auth::ReaderAccounts,
    sanitize,
    service::{FeedPatch, FeedsService, NewFeed, ReadScope, SettingsPatch, Snapshot},
};
use crate::{
    error::{AppError, AppResult},
    graphql::{
        context::ContextExt,
        pagination::{KeysetConnection, PageRequest},
    },
    jobs::{
        Jobs,
        graphql::Task,
        model::{NewTask, Queue},
    },
};

fn feeds<'a>(ctx: &'a Context<'_>) -> AppResult<&'a FeedsService> {
    ctx.service::<FeedsService>()
}

fn loaders<'a>(ctx: &'a Context<'_>) -> AppResult<&'a FeedLoaders> {
    Ok(ctx.service::<Arc<FeedLoaders>>()?)
}

/// Feed-domain ids are integers; clients treat them as opaque strings.
pub fn parse_int_id(field: &'static str, id: &ID) -> AppResult<i64> {
    id.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| AppError::bad_input(field, "not a valid id"))
}

fn parse_ids(field: &'static str, ids: &[ID]) -> AppResult<Vec<i64>> {
    ids.iter().map(|id| parse_int_id(field, id)).collect()
}

/// A folder of feeds.
pub struct FeedGroup(pub feed_group::Model);

#[Object]
impl FeedGroup {
    async fn id(&self) -> ID {
        ID(self.0.id.to_string())
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The group new feeds land in; it cannot be deleted.
    async fn is_default(&self) -> bool {
        self.0.is_default
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    /// The group's feeds, by name.
    #[graphql(complexity = "ASSUMED_GROUP_FEEDS * child_complexity")]
    async fn feeds(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Feed>> {
        let viewer = ctx.viewer()?;
        if self.0.user_id != viewer.user_id {
            return Ok(Vec::new());
        }
        Ok(loaders(ctx)?
            .group_feeds
            .load_one(self.0.id)
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(Feed)
            .collect())
    }
}

/// A subscription to one feed URL.
pub struct Feed(pub feed::Model);

#[Object]
impl Feed {
    async fn id(&self) -> ID {
        ID(self.0.id.to_string())
    }
    async fn name(&self) -> &str {
        &self.0.name
    }
    /// The feed's URL.
    async fn link(&self) -> &str {
        &self.0.link
    }
    async fn site_url(&self) -> Option<&str> {
        self.0.site_url.as_deref()
    }
    /// Suspended feeds are not pulled periodically (manual refresh still works).
    async fn suspended(&self) -> bool {
        self.0.suspended
    }
    /// The feed's own pull interval; null means the server's `TRELLIS_PULL_INTERVAL`.
    async fn refresh_interval_seconds(&self) -> Option<i32> {
        self.0.refresh_interval_seconds
    }
    async fn group(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<FeedGroup>> {
        Ok(loaders(ctx)?
            .feed_groups
            .load_one(self.0.group_id)
            .await?
            .map(FeedGroup))
    }
    /// The pull worker's view of this feed.
    async fn fetch_state(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<FetchState>> {
        Ok(loaders(ctx)?
            .fetch_states
            .load_one(self.0.id)
            .await?
            .map(FetchState::from))
    }
    async fn unread_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        Ok(counts(ctx, self.0.id).await?.unread)
    }
    async fn item_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        Ok(counts(ctx, self.0.id).await?.total)
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
    async fn updated_at(&self) -> DateTime<Utc> {
        self.0.updated_at
    }
}

async fn counts(ctx: &Context<'_>, feed_id: i64) -> AppResult<ItemCounts> {
    loaders(ctx)?
        .item_counts
        .load_one(feed_id)
        .await
        .map_err(|error| AppError::internal(anyhow::anyhow!(error)))
        .map(Option::unwrap_or_default)
}

/// Runtime pull state of a feed (seed 000 §8).
#[derive(SimpleObject)]
pub struct FetchState {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub cache_control: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub last_checked_at: Option<DateTime<Utc>>,
    /// Null: due now.
    pub next_check_at: Option<DateTime<Utc>>,
    pub last_http_status: Option<i32>,
    /// The publisher's `Retry-After` holds pulls until then.
    pub retry_after_until: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    pub last_error_at: Option<DateTime<Utc>>,
    /// Why the last failed check failed (kept after a later success, for history).
    pub last_error: Option<String>,
    /// Failures since the last success; the backoff grows with it.
    pub consecutive_failures: i32,
}

impl From<feed_fetch_state::Model> for FetchState {
    fn from(state: feed_fetch_state::Model) -> Self {
        FetchState {
            etag: state.etag,
            last_modified: state.last_modified,
            cache_control: state.cache_control,
            expires_at: state.expires_at,
            last_checked_at: state.last_checked_at,
            next_check_at: state.next_check_at,
            last_http_status: state.last_http_status,
            retry_after_until: state.retry_after_until,
            last_success_at: state.last_success_at,
            last_error_at: state.last_error_at,
            last_error: state.last_error,
            consecutive_failures: state.consecutive_failures,
        }
    }
}

/// An entry of a feed.
pub struct Item(pub item::Model);

#[Object]
impl Item {
    async fn id(&self) -> ID {
        ID(self.0.id.to_string())
    }
    async fn feed_id(&self) -> ID {
        ID(self.0.feed_id.to_string())
    }
    async fn feed(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Feed>> {
        Ok(loaders(ctx)?
            .feeds
            .load_one(self.0.feed_id)
            .await?
            .map(Feed))
    }
    async fn guid(&self) -> &str {
        &self.0.guid
    }
    async fn link(&self) -> Option<&str> {
        self.0.link.as_deref()
    }
    async fn title(&self) -> &str {
        &self.0.title
    }
    /// Sanitized HTML with absolute links (against the item's link, else
    /// the feed's URL), safe to render.
    async fn content(&self, ctx: &Context<'_>) -> async_graphql::Result<String> {
        let feed_link = if sanitize::needs_feed_link(&self.0) {
            loaders(ctx)?
                .feeds
                .load_one(self.0.feed_id)
                .await?
                .map(|feed| feed.link)
        } else {
            None
        };
        Ok(sanitize::item_html(&self.0, feed_link.as_deref()))
    }
    /// The content exactly as published (unsanitized: never render it as HTML).
    async fn raw_content(&self) -> &str {
        &self.0.content
    }
    /// As the feed dates the entry; when it arrived if the feed gave no
    /// date it could read (`undated`).
    async fn pub_date(&self) -> DateTime<Utc> {
        self.0.pub_date
    }
    /// The feed gave no readable date: `pubDate` is the arrival time.
    async fn undated(&self) -> bool {
        self.0.undated
    }
    async fn unread(&self) -> bool {
        self.0.unread
    }
    async fn starred(&self) -> bool {
        self.0.starred
    }
    async fn created_at(&self) -> DateTime<Utc> {
        self.0.created_at
    }
}

/// A saved snapshot of an item; it survives the item's and the feed's deletion.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct Bookmark {
    pub id: ID,
    /// Null once the item is gone.
    pub item_id: Option<ID>,
    /// Null once the feed is gone.
    pub feed_id: Option<ID>,
    pub link: String,
    pub title: String,
    #[graphql(skip)]
    pub html: String,
    #[graphql(skip)]
    pub raw: String,
    pub pub_date: Option<DateTime<Utc>>,
    pub feed_name: Option<String>,
    pub created_at: DateTime<Utc>,
}

#[ComplexObject]
impl Bookmark {
    /// Sanitized HTML with absolute links.
    async fn content(&self) -> &str {
        &self.html
    }
    /// The snapshot exactly as saved (unsanitized).
    async fn raw_content(&self) -> &str {
        &self.raw
    }
}

impl From<bookmark::Model> for Bookmark {
    fn from(model: bookmark::Model) -> Self {
        Bookmark {
            html: sanitize::bookmark_html(&model),
            id: ID(model.id.to_string()),
            item_id: model.item_id.map(|id| ID(id.to_string())),
            feed_id: model.feed_id.map(|id| ID(id.to_string())),
            link: model.link,
            title: model.title,
            raw: model.content,
            pub_date: model.pub_date,
            feed_name: model.feed_name,
            created_at: model.created_at,
        }
    }
}

/// Reader preferences; null means never chosen (the client's default applies).
#[derive(SimpleObject)]
pub struct Settings {
    /// Read items older than this many days are deleted (never starred or
    /// bookmarked ones); null keeps everything.
    pub retention_days: Option<i32>,
    pub unread_only: Option<bool>,
    pub oldest_first: Option<bool>,
    pub mark_read_on_scroll: Option<bool>,
    pub updated_at: DateTime<Utc>,
}

impl From<feed_settings::Model> for Settings {
    fn from(model: feed_settings::Model) -> Self {
        Settings {
            retention_days: model.retention_days,
            unread_only: model.unread_only,
            oldest_first: model.oldest_first,
            mark_read_on_scroll: model.mark_read_on_scroll,
            updated_at: model.updated_at,
        }
    }
}

#[derive(SimpleObject)]
pub struct SearchResult {
    /// Feeds whose name or URL contains the query.
    pub feeds: Vec<Feed>,
    /// Items matching every term (as prefixes), best first.
    pub items: Vec<Item>,
}

/// A pull finished.
#[derive(SimpleObject)]
pub struct FeedUpdate {
    pub feed: Feed,
    pub new_items: i64,
    pub fetch_state: Option<FetchState>,
}

/// A feed found by `discoverFeeds`.
#[derive(SimpleObject)]
pub struct DiscoveredFeed {
    pub url: String,
    pub title: Option<String>,
    /// `rss`, `atom`, `json`, `rdf` (a linked feed) or `feed` (the URL itself is one).
    pub kind: String,
}

#[derive(InputObject, Default)]
pub struct ItemFilter {
    pub feed_id: Option<ID>,
    pub group_id: Option<ID>,
    pub unread: Option<bool>,
    pub starred: Option<bool>,
    /// Full-text query over title and content.
    pub query: Option<String>,
}

#[derive(InputObject)]
pub struct CreateFeedInput {
    /// The feed's URL (http or https).
    pub link: String,
    /// Defaults to the URL until the first pull finds the feed's title.
    pub name: Option<String>,
    /// Defaults to the default group.
    pub group_id: Option<ID>,
    pub site_url: Option<String>,
    #[graphql(default)]
    pub suspended: bool,
    /// One of `refreshIntervalOptions`; null for the server's interval.
    pub refresh_interval_seconds: Option<i32>,
}

#[derive(InputObject)]
pub struct UpdateFeedInput {
    pub link: Option<String>,
    pub name: Option<String>,
    pub group_id: Option<ID>,
    pub site_url: MaybeUndefined<String>,
    pub suspended: Option<bool>,
    /// Null clears the override; omitted leaves it.
    pub refresh_interval_seconds: MaybeUndefined<i32>,
}

#[derive(InputObject)]
pub struct CreateBookmarkInput {
    /// Snapshot this item; or give the snapshot fields instead.
    pub item_id: Option<ID>,
    pub link: Option<String>,
    pub title: Option<String>,
    pub content: Option<String>,
    pub pub_date: Option<DateTime<Utc>>,
    pub feed_name: Option<String>,
}

#[derive(InputObject)]
pub struct UpdateSettingsInput {
    pub retention_days: MaybeUndefined<i32>,
    pub unread_only: MaybeUndefined<bool>,
    pub oldest_first: MaybeUndefined<bool>,
    pub mark_read_on_scroll: MaybeUndefined<bool>,
}

fn patch<T>(value: MaybeUndefined<T>) -> Option<Option<T>> {
    match value {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(value) => Some(Some(value)),
    }
}

/// What the complexity limit assumes of unpaged lists, whose real length is
/// not known before the query runs: a user's groups, a group's feeds, a
/// user's feeds. A field under such a list counts that many times, so lists
/// nested in lists (`groups { feeds { group { feeds … } } }`) are refused.
pub const ASSUMED_GROUPS: usize = 20;
pub const ASSUMED_GROUP_FEEDS: usize = 100;
pub const ASSUMED_FEEDS: usize = 100;

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

    /// Your items, newest first (`pubDate desc, id desc`).
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn items(
        &self,
        ctx: &Context<'_>,
        filter: Option<ItemFilter>,
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
        let items = service
            .searcher()
            .ranked_items(viewer.user_id, &query, limit)
            .await?;
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

#[derive(Default)]
pub struct FeedsMutation;

#[Object]
impl FeedsMutation {
    async fn create_group(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<FeedGroup> {
        let viewer = ctx.viewer()?;
        Ok(FeedGroup(
            feeds(ctx)?.create_group(viewer.user_id, &name).await?,
        ))
    }

    /// Renames a group.
    async fn update_group(
        &self,
        ctx: &Context<'_>,
        id: ID,
        name: String,
    ) -> async_graphql::Result<FeedGroup> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(FeedGroup(
            feeds(ctx)?.rename_group(viewer.user_id, id, &name).await?,
        ))
    }

    /// Deletes a group; its feeds move to the default group.
    async fn delete_group(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        feeds(ctx)?.delete_group(viewer.user_id, id).await?;
        Ok(true)
    }

    async fn create_feed(
        &self,
        ctx: &Context<'_>,
        input: CreateFeedInput,
    ) -> async_graphql::Result<Feed> {
        let viewer = ctx.viewer()?;
        let created = feeds(ctx)?
            .create_feeds(viewer.user_id, vec![new_feed(input)?])
            .await?;
        created
            .into_iter()
            .next()
            .map(Feed)
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("feed not created")).into())
    }

    /// Creates several feeds: all of them or, on any error, none.
    async fn create_feeds(
        &self,
        ctx: &Context<'_>,
        input: Vec<CreateFeedInput>,
    ) -> async_graphql::Result<Vec<Feed>> {
        let viewer = ctx.viewer()?;
        let new = input
            .into_iter()
            .map(new_feed)
            .collect::<AppResult<Vec<_>>>()?;
        Ok(feeds(ctx)?
            .create_feeds(viewer.user_id, new)
            .await?
            .into_iter()
            .map(Feed)
            .collect())
    }

    async fn update_feed(
        &self,
        ctx: &Context<'_>,
        id: ID,
        input: UpdateFeedInput,
    ) -> async_graphql::Result<Feed> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        let patch = FeedPatch {
            link: input.link,
            name: input.name,
            group_id: input
                .group_id
                .as_ref()
                .map(|g| parse_int_id("groupId", g))
                .transpose()?,
            site_url: patch(input.site_url),
            suspended: input.suspended,
            refresh_interval_seconds: patch(input.refresh_interval_seconds),
        };
        Ok(Feed(
            feeds(ctx)?.update_feed(viewer.user_id, id, patch).await?,
        ))
    }

    /// Deletes a feed and its items; bookmarks keep their snapshots.
    async fn delete_feed(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        feeds(ctx)?.delete_feed(viewer.user_id, id).await?;
        Ok(true)
    }

    /// Marks 1–1000 items read; returns how many changed.
    async fn mark_items_read(&self, ctx: &Context<'_>, ids: Vec<ID>) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_unread(viewer.user_id, &ids, false).await? as i64)
    }

    /// Marks 1–1000 items unread; returns how many changed.
    async fn mark_items_unread(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_unread(viewer.user_id, &ids, true).await? as i64)
    }

    /// Marks every unread item of one feed, one group, or (`all: true`)
    /// everything read, optionally only those that arrived (were stored by
    /// Trellis) by `before` — what the client had seen then.
    /// Exactly one of `feedId`, `groupId`, `all` must be given.
    async fn mark_all_read(
        &self,
        ctx: &Context<'_>,
        feed_id: Option<ID>,
        group_id: Option<ID>,
        all: Option<bool>,
        before: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let scope = match (feed_id, group_id, all.unwrap_or(false)) {
            (Some(feed), None, false) => ReadScope::Feed(parse_int_id("feedId", &feed)?),
            (None, Some(group), false) => ReadScope::Group(parse_int_id("groupId", &group)?),
            (None, None, true) => ReadScope::All,
            _ => {
                return Err(AppError::bad_input(
                    "feedId",
                    "give exactly one of feedId, groupId or all: true",
                )
                .into());
            }
        };
        Ok(feeds(ctx)?
            .mark_all_read(viewer.user_id, scope, before)
            .await? as i64)
    }

    async fn star_items(&self, ctx: &Context<'_>, ids: Vec<ID>) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_starred(viewer.user_id, &ids, true).await? as i64)
    }

    async fn unstar_items(&self, ctx: &Context<'_>, ids: Vec<ID>) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_starred(viewer.user_id, &ids, false).await? as i64)
    }

    /// Bookmarks an item (`itemId`) or saves a full snapshot (`link`, `title`, `content`…).
    async fn create_bookmark(
        &self,
        ctx: &Context<'_>,
        input: CreateBookmarkInput,
    ) -> async_graphql::Result<Bookmark> {
        let viewer = ctx.viewer()?;
        let service = feeds(ctx)?;
        let model = match (&input.item_id, &input.link) {
            (Some(item), None) => {
                service
                    .bookmark_item(viewer.user_id, parse_int_id("itemId", item)?)
                    .await?
            }
            (None, Some(link)) => {
                service
                    .insert_bookmark(
                        viewer.user_id,
                        Snapshot {
                            item_id: None,
                            feed_id: None,
                            link: link.clone(),
                            title: input.title.clone().unwrap_or_else(|| link.clone()),
                            content: input.content.clone().unwrap_or_default(),
                            pub_date: input.pub_date,
                            feed_name: input.feed_name.clone(),
                        },
                    )
                    .await?
            }
            _ => {
                return Err(AppError::bad_input(
                    "itemId",
                    "give either itemId or a snapshot with link",
                )
                .into());
            }
        };
        Ok(model.into())
    }

    /// Renames a bookmark.
    async fn update_bookmark(
        &self,
        ctx: &Context<'_>,
        id: ID,
        title: String,
    ) -> async_graphql::Result<Bookmark> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(feeds(ctx)?
            .rename_bookmark(viewer.user_id, id, &title)
            .await?
            .into())
    }

    async fn delete_bookmark(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        feeds(ctx)?.delete_bookmark(viewer.user_id, id).await?;
        Ok(true)
    }

    /// Changes preferences; an omitted field is left alone, null resets it.
    async fn update_settings(
        &self,
        ctx: &Context<'_>,
        input: UpdateSettingsInput,
    ) -> async_graphql::Result<Settings> {
        let viewer = ctx.viewer()?;
        let patch = SettingsPatch {
            retention_days: patch(input.retention_days),
            unread_only: patch(input.unread_only),
            oldest_first: patch(input.oldest_first),
            mark_read_on_scroll: patch(input.mark_read_on_scroll),
        };
        Ok(feeds(ctx)?
            .update_settings(viewer.user_id, patch)
            .await?
            .into())
    }

    /// Imports an OPML subscription list. The document is checked now
    /// (`BAD_USER_INPUT` if it is not OPML or lists no feeds); the feeds are
    /// created by the returned task, which skips those you already follow.
    async fn import_opml(
        &self,
        ctx: &Context<'_>,
        opml: String,
        idempotency_key: Option<String>,
    ) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let feeds =
            opml::parse(&opml).map_err(|error| AppError::bad_input("opml", error.to_string()))?;
        let mut task = NewTask::new(
            IMPORT_KIND,
            Queue::Medium,
            json!({ "userId": viewer.user_id, "feeds": feeds }),
        );
        task.owner_id = Some(viewer.user_id);
        task.idempotency_key = idempotency_key;
        Ok(Task::from(
            &ctx.service::<Jobs>()?.enqueue(task).await?.task,
        ))
    }

    /// Sets the password mobile reader apps sign in with (your username —
    /// lower case — and this password). It must differ from your account
    /// password (`currentPassword`), because the Fever protocol sends
    /// `md5(username:password)` with every request. Changing the account
    /// password turns the reader APIs off again.
    async fn set_reader_password(
        &self,
        ctx: &Context<'_>,
        #[graphql(secret)] current_password: String,
        #[graphql(secret)] password: String,
    ) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        ctx.service::<ReaderAccounts>()?
            .set_password(
                viewer,
                current_password.into(),
                password.into(),
                ctx.request_meta()?,
            )
            .await?;
        Ok(true)
    }

    /// Turns the reader APIs off for you; returns whether they were on.
    async fn clear_reader_password(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        Ok(ctx.service::<ReaderAccounts>()?.clear(viewer).await?)
    }

    /// Pulls one feed now (bypassing its schedule). Returns the task at once.
    async fn refresh_feed(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let feed = feeds(ctx)?
            .feed(viewer.user_id, parse_int_id("id", &id)?)
            .await?;
        let mut task = NewTask::new(
            PULL_KIND,
            Queue::Short,
            json!({ "feedId": feed.id, "mode": PullMode::Manual }),
        );
        task.owner_id = Some(viewer.user_id);
        task.max_attempts = Some(1);
        Ok(Task::from(
            &ctx.service::<Jobs>()?.enqueue(task).await?.task,
        ))
    }

    /// Pulls all your non-suspended feeds now. Returns the task at once; it
    /// succeeds when every feed has been tried (its result counts them).
    async fn refresh_all_feeds(&self, ctx: &Context<'_>) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let mut task = NewTask::new(
            REFRESH_ALL_KIND,
            Queue::Medium,
            json!({ "userId": viewer.user_id }),
        );
        task.owner_id = Some(viewer.user_id);
        Ok(Task::from(
            &ctx.service::<Jobs>()?.enqueue(task).await?.task,
        ))
    }
}

fn new_feed(input: CreateFeedInput) -> AppResult<NewFeed> {
    Ok(NewFeed {
        link: input.link,
        name: input.name,
        group_id: input
            .group_id
            .as_ref()
            .map(|id| parse_int_id("groupId", id))
            .transpose()?,
        site_url: input.site_url,
        suspended: input.suspended,
        refresh_interval_seconds: input.refresh_interval_seconds,
    })
}

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
