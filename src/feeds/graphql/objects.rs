//! The feeds' GraphQL objects: groups, feeds, items, bookmarks, settings
//! and search results, each a thin view over its row.

use super::*;

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
    /// The feed's icon, served by this server at a signed URL
    /// (`GET /icons/{id}/{sig}`, no credential needed, so an `<img>` or a
    /// reader app loads it): absolute under the server's public URL when
    /// it is known. Null until the pull worker has found one.
    async fn icon_url(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<String>> {
        let links = ctx.service::<IconLinks>()?;
        let found = loaders(ctx)?
            .icons
            .load_one(self.0.id)
            .await
            .map_err(|error| AppError::internal(anyhow::anyhow!(error)))?;
        Ok(found.map(|hash| links.url(self.0.id, &hash)))
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
    /// Who wrote the entry, as the feed names them (RSS `author`,
    /// `dc:creator` or `itunes:author`; Atom and JSON Feed authors, else the
    /// feed's); empty when the feed does not say.
    async fn authors(&self) -> &[String] {
        &self.0.authors.0
    }
    /// Files attached to the entry — a podcast's episode, a video — in the
    /// feed's order; at most 20.
    #[graphql(complexity = "crate::feeds::mapping::MAX_ENCLOSURES * child_complexity")]
    async fn enclosures(&self) -> Vec<Enclosure> {
        self.0.enclosures.0.iter().cloned().map(Enclosure).collect()
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

/// A file attached to an item (RSS `<enclosure>`, `media:content`, Atom
/// `rel="enclosure"`, JSON Feed `attachments`).
pub struct Enclosure(pub item::Enclosure);

#[Object]
impl Enclosure {
    /// Absolute http(s) URL of the file.
    async fn url(&self) -> &str {
        &self.0.url
    }
    /// Its MIME type (`audio/mpeg`), when the feed gave a well-formed one.
    async fn mime_type(&self) -> Option<&str> {
        self.0.mime_type.as_deref()
    }
    /// Its size in bytes as decimal digits (it may exceed a GraphQL `Int`),
    /// when the feed gave one.
    async fn length(&self) -> Option<String> {
        self.0.length.map(|length| length.to_string())
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
    /// Sanitized when stored (None: stored before that was kept).
    #[graphql(skip)]
    pub html: Option<String>,
    #[graphql(skip)]
    pub raw: String,
    pub pub_date: Option<DateTime<Utc>>,
    pub feed_name: Option<String>,
    /// The item's authors when it was bookmarked (empty for a link).
    pub authors: Vec<String>,
    #[graphql(skip)]
    pub attached: item::Enclosures,
    pub created_at: DateTime<Utc>,
}

#[ComplexObject]
impl Bookmark {
    /// The item's enclosures when it was bookmarked — a podcast episode's
    /// file stays downloadable after the feed dropped the item.
    #[graphql(complexity = "crate::feeds::mapping::MAX_ENCLOSURES * child_complexity")]
    async fn enclosures(&self) -> Vec<Enclosure> {
        self.attached.0.iter().cloned().map(Enclosure).collect()
    }
    /// Sanitized HTML with absolute links.
    async fn content(&self) -> String {
        sanitize::bookmark_html(self.html.as_deref(), &self.raw, &self.link)
    }
    /// The snapshot exactly as saved (unsanitized).
    async fn raw_content(&self) -> &str {
        &self.raw
    }
}

impl From<bookmark::Model> for Bookmark {
    fn from(model: bookmark::Model) -> Self {
        Bookmark {
            id: ID(model.id.to_string()),
            item_id: model.item_id.map(|id| ID(id.to_string())),
            feed_id: model.feed_id.map(|id| ID(id.to_string())),
            link: model.link,
            title: model.title,
            html: model.content_html,
            raw: model.content,
            pub_date: model.pub_date,
            feed_name: model.feed_name,
            authors: model.authors.0,
            attached: model.enclosures,
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
