//! The feed reader's operations on behalf of one user. Every query starts
//! from the caller's `user_id`, so nothing crosses users; a row of another
//! user is `NOT_FOUND`, exactly like a missing one.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::{bookmark, feed, feed_fetch_state, feed_group, feed_settings, item};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, DbErr, EntityTrait,
    IntoActiveModel, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect, Select, Set, SqlErr,
    sea_query::{Expr, OnConflict, Query},
};
use serde::Serialize;
use serde_json::json;
use url::Url;
use uuid::Uuid;

use super::{
    FEED_CHANGED, REFRESH_INTERVALS, names,
    opml::{self, ExportFeed, ExportGroup, OpmlFeed},
    sanitize::sanitize_html,
    search::{SearchLimits, Searcher},
    store,
};
use crate::{
    db::{Owned, owned},
    error::{AppError, AppResult},
    jobs::outbox::{self, NewEvent},
};

pub const DEFAULT_GROUP_NAME: &str = "Default";
/// `markItemsRead`/`markItemsUnread`/`starItems` take at most this many ids.
pub const MAX_IDS: usize = 1000;
/// `createFeeds` takes at most this many feeds.
pub const MAX_BATCH: usize = 500;
/// The longest feed URL accepted, in bytes (what browsers and servers
/// reliably handle; the column itself is unbounded `text`).
pub const MAX_LINK_BYTES: usize = 2048;
pub use super::names::MAX_NAME_CHARS;

/// A new feed as the user describes it.
#[derive(Debug, Clone, Default)]
pub struct NewFeed {
    pub link: String,
    pub name: Option<String>,
    pub group_id: Option<i64>,
    pub site_url: Option<String>,
    pub suspended: bool,
    pub refresh_interval_seconds: Option<i32>,
}

/// Changes to a feed; `None` leaves a field alone. For the nullable
/// interval, `Some(None)` clears the override.
#[derive(Debug, Clone, Default)]
pub struct FeedPatch {
    pub link: Option<String>,
    pub name: Option<String>,
    pub group_id: Option<i64>,
    pub site_url: Option<Option<String>>,
    pub suspended: Option<bool>,
    pub refresh_interval_seconds: Option<Option<i32>>,
}

/// Which items `markAllRead` covers.
#[derive(Debug, Clone, Copy)]
pub enum ReadScope {
    Feed(i64),
    Group(i64),
    All,
}

/// A feed's unread items: how many, and the newest one's date.
#[derive(Debug, Clone)]
pub struct UnreadCount {
    pub feed_id: i64,
    pub count: i64,
    pub newest: Option<DateTime<Utc>>,
}

/// A state an item's id list is asked for.
#[derive(Debug, Clone, Copy)]
pub enum ItemState {
    Unread,
    Starred,
}

/// A page of items by id.
#[derive(Debug, Clone)]
pub enum ItemPage {
    /// These items, ascending.
    WithIds(Vec<i64>),
    /// Items below this id (or the newest, with none), descending.
    Before(Option<i64>),
    /// Items above this id, ascending.
    After(i64),
}

#[derive(Clone)]
pub struct FeedsService {
    db: DatabaseConnection,
    searcher: Searcher,
}

impl FeedsService {
    /// With the default search limits.
    pub fn new(db: DatabaseConnection) -> Self {
        FeedsService::with_search_limits(db, SearchLimits::default())
    }

    pub fn with_search_limits(db: DatabaseConnection, limits: SearchLimits) -> Self {
        FeedsService {
            searcher: Searcher::new(db.clone(), limits),
            db,
        }
    }

    /// The ranked search, bounded per [`SearchLimits`].
    pub fn searcher(&self) -> &Searcher {
        &self.searcher
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    // ----- groups -----

    /// The user's default group (created with the user: migration 000015).
    pub async fn default_group(&self, user: Uuid) -> AppResult<feed_group::Model> {
        default_group_in(&self.db, user).await
    }

    pub async fn groups(&self, user: Uuid) -> AppResult<Vec<feed_group::Model>> {
        Ok(feed_group::Entity::find()
            .filter(feed_group::Column::UserId.eq(user))
            .order_by_desc(feed_group::Column::IsDefault)
            .order_by_asc(feed_group::Column::Name)
            .order_by_asc(feed_group::Column::Id)
            .all(&self.db)
            .await?)
    }

    pub async fn group(&self, user: Uuid, id: i64) -> AppResult<feed_group::Model> {
        owned::<feed_group::Entity>(&self.db, user, id).await
    }

    pub async fn create_group(&self, user: Uuid, name: &str) -> AppResult<feed_group::Model> {
        let name = group_name(name)?;
        let now = Utc::now();
        new_group(user, name.clone(), false, now)
            .insert(&self.db)
            .await
            .map_err(|error| unique_conflict(error, format!("a group named {name:?} exists")))
    }

    pub async fn rename_group(
        &self,
        user: Uuid,
        id: i64,
        name: &str,
    ) -> AppResult<feed_group::Model> {
        let name = group_name(name)?;
        let mut group = self.group(user, id).await?.into_active_model();
        group.name = Set(name.clone());
        group.updated_at = Set(Utc::now());
        group
            .update(&self.db)
            .await
            .map_err(|error| unique_conflict(error, format!("a group named {name:?} exists")))
    }

    /// Deletes a group after moving its feeds to the default group (seed §6).
    pub async fn delete_group(&self, user: Uuid, id: i64) -> AppResult<()> {
        let group = self.group(user, id).await?;
        if group.is_default {
            return Err(AppError::bad_input(
                "id",
                "the default group cannot be deleted",
            ));
        }
        let txn = crate::db::begin_write(&self.db).await?;
        let default = default_group_in(&txn, user).await?;
        feed::Entity::update_many()
            .col_expr(feed::Column::GroupId, Expr::value(default.id))
            .col_expr(feed::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(feed::Column::GroupId.eq(group.id))
            .filter(feed::Column::UserId.eq(user))
            .exec(&txn)
            .await?;
        feed_group::Entity::delete_by_id(group.id)
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }

    // ----- feeds -----

    pub async fn feed(&self, user: Uuid, id: i64) -> AppResult<feed::Model> {
        owned::<feed::Entity>(&self.db, user, id).await
    }

    pub fn feeds_of(&self, user: Uuid) -> Select<feed::Entity> {
        feed::Entity::find().filter(feed::Column::UserId.eq(user))
    }

    /// The user's feeds by name, optionally of one group.
    pub async fn feeds(&self, user: Uuid, group: Option<i64>) -> AppResult<Vec<feed::Model>> {
        let mut select = self.feeds_of(user);
        if let Some(group) = group {
            select = select.filter(feed::Column::GroupId.eq(group));
        }
        Ok(select
            .order_by_asc(feed::Column::Name)
            .order_by_asc(feed::Column::Id)
            .all(&self.db)
            .await?)
    }

    pub async fn fetch_state(&self, feed_id: i64) -> AppResult<Option<feed_fetch_state::Model>> {
        Ok(feed_fetch_state::Entity::find_by_id(feed_id)
            .one(&self.db)
            .await?)
    }

    /// Creates feeds in one transaction: all or none. Each starts due now.
    pub async fn create_feeds(
        &self,
        user: Uuid,
        feeds: Vec<NewFeed>,
    ) -> AppResult<Vec<feed::Model>> {
        if feeds.is_empty() || feeds.len() > MAX_BATCH {
            return Err(AppError::bad_input(
                "input",
                format!("give 1–{MAX_BATCH} feeds"),
            ));
        }
        let txn = crate::db::begin_write(&self.db).await?;
        let default = default_group_in(&txn, user).await?;
        let now = Utc::now();
        let mut created = Vec::with_capacity(feeds.len());
        for new in feeds {
            let link = self.feed_link(&new.link)?;
            let group_id = match new.group_id {
                Some(id) => owned_group(&txn, user, id).await?.id,
                None => default.id,
            };
            check_interval(new.refresh_interval_seconds)?;
            let name = match new.name.as_deref().map(str::trim) {
                Some(name) if !name.is_empty() => checked_name(name)?,
                // Named after its URL until the first pull finds its title.
                _ => name_from_link(&link),
            };
            let model = insert_feed(
                &txn,
                feed::ActiveModel {
                    user_id: Set(user),
                    group_id: Set(group_id),
                    name: Set(name),
                    link: Set(link.clone()),
                    site_url: Set(new.site_url.as_deref().map(web_url).transpose()?),
                    suspended: Set(new.suspended),
                    refresh_interval_seconds: Set(new.refresh_interval_seconds),
                    ..Default::default()
                },
                now,
            )
            .await
            .map_err(|error| match error {
                AppError::Conflict(_) => AppError::Conflict(format!("you already follow {link}")),
                other => other,
            })?;
            created.push(model);
        }
        feeds_changed(&txn, user, created.iter().map(|feed| feed.id)).await?;
        txn.commit().await?;
        Ok(created)
    }

    pub async fn update_feed(
        &self,
        user: Uuid,
        id: i64,
        patch: FeedPatch,
    ) -> AppResult<feed::Model> {
        let txn = crate::db::begin_write(&self.db).await?;
        let current = feed::Entity::find_by_id(id)
            .filter(feed::Column::UserId.eq(user))
            .one(&txn)
            .await?
            .ok_or(AppError::NotFound("feed"))?;
        let mut model = current.clone().into_active_model();
        let mut reschedule = false;
        let mut new_source = false;
        if let Some(link) = &patch.link {
            let link = self.feed_link(link)?;
            new_source = link != current.link;
            model.link = Set(link);
        }
        if let Some(name) = &patch.name {
            model.name = Set(checked_name(name)?);
        }
        if let Some(group_id) = patch.group_id {
            model.group_id = Set(owned_group(&txn, user, group_id).await?.id);
        }
        if let Some(site_url) = &patch.site_url {
            model.site_url = Set(site_url.as_deref().map(web_url).transpose()?);
        }
        if let Some(suspended) = patch.suspended {
            reschedule |= current.suspended && !suspended;
            model.suspended = Set(suspended);
        }
        if let Some(interval) = patch.refresh_interval_seconds {
            check_interval(interval)?;
            // Seed §8: a changed or cleared override makes the feed due now
            // and drops any Retry-After hold.
            reschedule |= interval != current.refresh_interval_seconds;
            model.refresh_interval_seconds = Set(interval);
        }
        model.updated_at = Set(Utc::now());
        let updated = model
            .update(&txn)
            .await
            .map_err(|error| unique_conflict(error, "you already follow that link".into()))?;
        if new_source || reschedule {
            let mut update = feed_fetch_state::Entity::update_many()
                .col_expr(
                    feed_fetch_state::Column::NextCheckAt,
                    Expr::value(None::<DateTime<Utc>>),
                )
                .col_expr(
                    feed_fetch_state::Column::RetryAfterUntil,
                    Expr::value(None::<DateTime<Utc>>),
                );
            if new_source {
                // The old URL's validators mean nothing to the new one.
                for column in [
                    feed_fetch_state::Column::Etag,
                    feed_fetch_state::Column::LastModified,
                    feed_fetch_state::Column::CacheControl,
                ] {
                    update = update.col_expr(column, Expr::value(None::<String>));
                }
                update = update
                    .col_expr(
                        feed_fetch_state::Column::ExpiresAt,
                        Expr::value(None::<DateTime<Utc>>),
                    )
                    .col_expr(
                        feed_fetch_state::Column::ConsecutiveFailures,
                        Expr::value(0),
                    );
            }
            update
                .filter(feed_fetch_state::Column::FeedId.eq(id))
                .exec(&txn)
                .await?;
        }
        feeds_changed(&txn, user, [id]).await?;
        txn.commit().await?;
        Ok(updated)
    }

    /// Deletes a feed and its items; bookmarks keep their snapshots (seed §6).
    pub async fn delete_feed(&self, user: Uuid, id: i64) -> AppResult<()> {
        let txn = crate::db::begin_write(&self.db).await?;
        let feed = feed::Entity::find_by_id(id)
            .filter(feed::Column::UserId.eq(user))
            .one(&txn)
            .await?
            .ok_or(AppError::NotFound("feed"))?;
        bookmark::Entity::update_many()
            .col_expr(bookmark::Column::ItemId, Expr::value(None::<i64>))
            .col_expr(bookmark::Column::FeedId, Expr::value(None::<i64>))
            .filter(bookmark::Column::FeedId.eq(feed.id))
            .exec(&txn)
            .await?;
        item::Entity::delete_many()
            .filter(item::Column::FeedId.eq(feed.id))
            .exec(&txn)
            .await?;
        feed::Entity::delete_by_id(feed.id).exec(&txn).await?;
        feeds_changed(&txn, user, [feed.id]).await?;
        txn.commit().await?;
        Ok(())
    }

    /// A feed URL the user may add: absolute http(s). Where it may lead is
    /// the SSRF guard's call at every fetch (DNS can change), recorded in
    /// the feed's `fetchState.lastError`.
    fn feed_link(&self, link: &str) -> AppResult<String> {
        let url = Url::parse(link.trim())
            .map_err(|error| AppError::bad_input("link", format!("not a valid URL: {error}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(AppError::bad_input(
                "link",
                "feeds are fetched over http or https",
            ));
        }
        let link = url.to_string();
        if link.len() > MAX_LINK_BYTES {
            return Err(AppError::bad_input(
                "link",
                format!("a feed URL is at most {MAX_LINK_BYTES} bytes"),
            ));
        }
        Ok(link)
    }

    // ----- OPML -----

    /// Imports an OPML list in one transaction: groups are found or
    /// created by name; feeds already followed (or listed twice) and
    /// unusable links are skipped, not errors.
    pub async fn import_feeds(&self, user: Uuid, feeds: Vec<OpmlFeed>) -> AppResult<ImportReport> {
        let txn = crate::db::begin_write(&self.db).await?;
        let default = default_group_in(&txn, user).await?;
        let mut groups: HashMap<String, i64> = feed_group::Entity::find()
            .filter(feed_group::Column::UserId.eq(user))
            .all(&txn)
            .await?
            .into_iter()
            .map(|group| (group.name, group.id))
            .collect();
        let mut links: HashSet<String> = feed::Entity::find()
            .filter(feed::Column::UserId.eq(user))
            .all(&txn)
            .await?
            .into_iter()
            .map(|feed| feed.link)
            .collect();
        let now = Utc::now();
        let mut report = ImportReport::default();
        let mut created = Vec::new();
        for entry in feeds {
            let Ok(link) = self.feed_link(&entry.link) else {
                report.skipped += 1;
                continue;
            };
            if !links.insert(link.clone()) {
                report.skipped += 1;
                continue;
            }
            let group_id = match entry
                .group
                .as_deref()
                .map(str::trim)
                .filter(|g| !g.is_empty())
            {
                None => default.id,
                // A folder name of nothing but control characters: the default group.
                Some(name) => match names::clean(name) {
                    None => default.id,
                    Some(name) => match groups.get(&name) {
                        Some(id) => *id,
                        None => {
                            let group = new_group(user, name.clone(), false, now)
                                .insert(&txn)
                                .await?;
                            report.groups_created += 1;
                            groups.insert(name, group.id);
                            group.id
                        }
                    },
                },
            };
            let name = entry
                .name
                .as_deref()
                .and_then(names::clean)
                .unwrap_or_else(|| name_from_link(&link));
            let model = insert_feed(
                &txn,
                feed::ActiveModel {
                    user_id: Set(user),
                    group_id: Set(group_id),
                    name: Set(name),
                    link: Set(link),
                    site_url: Set(entry.site_url.as_deref().and_then(|url| web_url(url).ok())),
                    suspended: Set(false),
                    refresh_interval_seconds: Set(None),
                    ..Default::default()
                },
                now,
            )
            .await?;
            created.push(model.id);
        }
        report.feeds_created = created.len() as u64;
        if !created.is_empty() {
            feeds_changed(&txn, user, created).await?;
        }
        txn.commit().await?;
        Ok(report)
    }

    /// The user's subscriptions as OPML 2.0, one outline per group.
    pub async fn export_opml(&self, user: Uuid) -> AppResult<String> {
        let groups = self.groups(user).await?;
        let mut feeds = self
            .feeds_of(user)
            .order_by_asc(feed::Column::Name)
            .all(&self.db)
            .await?;
        let export = groups
            .into_iter()
            .map(|group| ExportGroup {
                feeds: feeds
                    .extract_if(.., |feed| feed.group_id == group.id)
                    .map(|feed| ExportFeed {
                        // Names stored before control characters were refused.
                        name: names::clean(&feed.name)
                            .unwrap_or_else(|| name_from_link(&feed.link)),
                        link: feed.link,
                        site_url: feed.site_url,
                    })
                    .collect(),
                name: names::clean(&group.name).unwrap_or_else(|| format!("Group {}", group.id)),
            })
            .collect();
        opml::render("Trellis subscriptions", export)
            .map_err(|error| AppError::internal(anyhow::anyhow!(error)))
    }

    // ----- items -----

    pub async fn item(&self, user: Uuid, id: i64) -> AppResult<item::Model> {
        owned::<item::Entity>(&self.db, user, id).await
    }

    pub fn items_of(&self, user: Uuid) -> Select<item::Entity> {
        item::Entity::find().filter(item::Column::UserId.eq(user))
    }

    /// Marks the user's items read or unread; returns how many changed.
    pub async fn set_unread(&self, user: Uuid, ids: &[i64], unread: bool) -> AppResult<u64> {
        self.set_flag(user, ids, item::Column::Unread, unread).await
    }

    /// Stars or unstars the user's items; returns how many changed.
    pub async fn set_starred(&self, user: Uuid, ids: &[i64], starred: bool) -> AppResult<u64> {
        self.set_flag(user, ids, item::Column::Starred, starred)
            .await
    }

    async fn set_flag(
        &self,
        user: Uuid,
        ids: &[i64],
        column: item::Column,
        value: bool,
    ) -> AppResult<u64> {
        check_ids(ids)?;
        Ok(item::Entity::update_many()
            .col_expr(column, Expr::value(value))
            .col_expr(item::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(item::Column::UserId.eq(user))
            .filter(item::Column::Id.is_in(ids.iter().copied()))
            .filter(column.eq(!value))
            .exec(&self.db)
            .await?
            .rows_affected)
    }

    /// Marks every unread item of a feed, a group or all feeds read that
    /// arrived (was stored by Trellis) by `before` — one statement,
    /// server-side. Arrival, not publication: an item published earlier
    /// but pulled later was never seen by whoever asks, and stays unread.
    pub async fn mark_all_read(
        &self,
        user: Uuid,
        scope: ReadScope,
        before: Option<DateTime<Utc>>,
    ) -> AppResult<u64> {
        let mut update = item::Entity::update_many()
            .col_expr(item::Column::Unread, Expr::value(false))
            .col_expr(item::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(item::Column::UserId.eq(user))
            .filter(item::Column::Unread.eq(true));
        match scope {
            ReadScope::Feed(id) => {
                self.feed(user, id).await?;
                update = update.filter(item::Column::FeedId.eq(id));
            }
            ReadScope::Group(id) => {
                self.group(user, id).await?;
                update =
                    update.filter(item::Column::FeedId.in_subquery(feed_ids_in_group(user, id)));
            }
            ReadScope::All => {}
        }
        if let Some(before) = before {
            update = update.filter(item::Column::ArrivedAt.lte(before));
        }
        Ok(update.exec(&self.db).await?.rows_affected)
    }

    // ----- what the reader apps (Fever, Google Reader) ask for -----

    /// How many items the user has.
    pub async fn item_count(&self, user: Uuid) -> AppResult<u64> {
        Ok(self.items_of(user).count(&self.db).await?)
    }

    /// The ids of the user's unread or starred items, ascending.
    pub async fn item_ids_in_state(&self, user: Uuid, state: ItemState) -> AppResult<Vec<i64>> {
        let flag = match state {
            ItemState::Unread => item::Column::Unread,
            ItemState::Starred => item::Column::Starred,
        };
        Ok(self
            .items_of(user)
            .select_only()
            .column(item::Column::Id)
            .filter(flag.eq(true))
            .order_by_asc(item::Column::Id)
            .into_tuple()
            .all(&self.db)
            .await?)
    }

    /// When each of the user's feeds was last checked successfully.
    pub async fn last_successes(&self, user: Uuid) -> AppResult<HashMap<i64, DateTime<Utc>>> {
        let rows: Vec<(i64, Option<DateTime<Utc>>)> = feed_fetch_state::Entity::find()
            .select_only()
            .column(feed_fetch_state::Column::FeedId)
            .column(feed_fetch_state::Column::LastSuccessAt)
            .filter(feed_fetch_state::Column::FeedId.in_subquery(user_feed_ids(user)))
            .into_tuple()
            .all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(feed, at)| Some((feed, at?)))
            .collect())
    }

    /// When any of the user's feeds was last checked, successfully or not.
    pub async fn last_checked(&self, user: Uuid) -> AppResult<Option<DateTime<Utc>>> {
        let latest: Option<Option<DateTime<Utc>>> = feed_fetch_state::Entity::find()
            .select_only()
            .expr(sea_orm::sea_query::Func::max(Expr::col(
                feed_fetch_state::Column::LastCheckedAt,
            )))
            .filter(feed_fetch_state::Column::FeedId.in_subquery(user_feed_ids(user)))
            .into_tuple()
            .one(&self.db)
            .await?;
        Ok(latest.flatten())
    }

    /// Per feed: how many unread items it has and the newest one's date.
    pub async fn unread_per_feed(&self, user: Uuid) -> AppResult<Vec<UnreadCount>> {
        let rows: Vec<(i64, i64, Option<DateTime<Utc>>)> = self
            .items_of(user)
            .select_only()
            .column(item::Column::FeedId)
            .column_as(item::Column::Id.count(), "count")
            .column_as(item::Column::PubDate.max(), "newest")
            .filter(item::Column::Unread.eq(true))
            .group_by(item::Column::FeedId)
            .into_tuple()
            .all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(feed_id, count, newest)| UnreadCount {
                feed_id,
                count,
                newest,
            })
            .collect())
    }

    /// One page of at most `limit` of the user's items by id (Fever's paging).
    pub async fn item_page(
        &self,
        user: Uuid,
        page: ItemPage,
        limit: u64,
    ) -> AppResult<Vec<item::Model>> {
        let select = self.items_of(user);
        let select = match page {
            ItemPage::WithIds(ids) => select
                .filter(item::Column::Id.is_in(ids))
                .order_by_asc(item::Column::Id),
            ItemPage::Before(Some(max)) => select
                .filter(item::Column::Id.lt(max))
                .order_by_desc(item::Column::Id),
            ItemPage::Before(None) => select.order_by_desc(item::Column::Id),
            ItemPage::After(since) => select
                .filter(item::Column::Id.gt(since))
                .order_by_asc(item::Column::Id),
        };
        Ok(select.limit(limit).all(&self.db).await?)
    }

    // ----- bookmarks -----

    pub fn bookmarks_of(&self, user: Uuid) -> Select<bookmark::Entity> {
        bookmark::Entity::find().filter(bookmark::Column::UserId.eq(user))
    }

    pub async fn bookmark(&self, user: Uuid, id: i64) -> AppResult<bookmark::Model> {
        owned::<bookmark::Entity>(&self.db, user, id).await
    }

    /// Bookmarks an item: a snapshot of its content as it is now.
    pub async fn bookmark_item(&self, user: Uuid, item_id: i64) -> AppResult<bookmark::Model> {
        let item = self.item(user, item_id).await?;
        let feed = self.feed(user, item.feed_id).await?;
        let link = item
            .link
            .clone()
            .unwrap_or_else(|| format!("{}#{}", feed.link, item.guid));
        self.insert_bookmark(
            user,
            Snapshot {
                item_id: Some(item.id),
                feed_id: Some(feed.id),
                link,
                title: item.title,
                content: item.content,
                pub_date: Some(item.pub_date),
                feed_name: Some(feed.name),
            },
        )
        .await
    }

    pub async fn insert_bookmark(
        &self,
        user: Uuid,
        snapshot: Snapshot,
    ) -> AppResult<bookmark::Model> {
        let link = web_url(&snapshot.link)?;
        let now = Utc::now();
        bookmark::ActiveModel {
            user_id: Set(user),
            item_id: Set(snapshot.item_id),
            feed_id: Set(snapshot.feed_id),
            link: Set(link.clone()),
            title: Set(bounded("title", snapshot.title.trim(), 1000)?),
            content_html: Set(Some(sanitize_html(
                &snapshot.content,
                Url::parse(&link).ok().as_ref(),
            ))),
            content: Set(snapshot.content),
            pub_date: Set(snapshot.pub_date),
            feed_name: Set(snapshot.feed_name),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(&self.db)
        .await
        .map_err(|error| unique_conflict(error, format!("{link} is already bookmarked")))
    }

    pub async fn rename_bookmark(
        &self,
        user: Uuid,
        id: i64,
        title: &str,
    ) -> AppResult<bookmark::Model> {
        let mut model = self.bookmark(user, id).await?.into_active_model();
        model.title = Set(bounded("title", title.trim(), 1000)?);
        model.updated_at = Set(Utc::now());
        Ok(model.update(&self.db).await?)
    }

    pub async fn delete_bookmark(&self, user: Uuid, id: i64) -> AppResult<()> {
        let bookmark = self.bookmark(user, id).await?;
        bookmark::Entity::delete_by_id(bookmark.id)
            .exec(&self.db)
            .await?;
        Ok(())
    }

    // ----- settings -----

    pub async fn settings(&self, user: Uuid) -> AppResult<feed_settings::Model> {
        Ok(feed_settings::Entity::find_by_id(user)
            .one(&self.db)
            .await?
            .unwrap_or(feed_settings::Model {
                user_id: user,
                retention_days: None,
                unread_only: None,
                oldest_first: None,
                mark_read_on_scroll: None,
                updated_at: Utc::now(),
            }))
    }

    pub async fn update_settings(
        &self,
        user: Uuid,
        patch: SettingsPatch,
    ) -> AppResult<feed_settings::Model> {
        let mut settings = self.settings(user).await?;
        if let Some(days) = patch.retention_days {
            if days.is_some_and(|days| !(1..=36_500).contains(&days)) {
                return Err(AppError::bad_input(
                    "retentionDays",
                    "retentionDays must be 1–36500, or null to keep items forever",
                ));
            }
            settings.retention_days = days;
        }
        if let Some(value) = patch.unread_only {
            settings.unread_only = value;
        }
        if let Some(value) = patch.oldest_first {
            settings.oldest_first = value;
        }
        if let Some(value) = patch.mark_read_on_scroll {
            settings.mark_read_on_scroll = value;
        }
        settings.updated_at = Utc::now();
        let model = feed_settings::ActiveModel {
            user_id: Set(user),
            retention_days: Set(settings.retention_days),
            unread_only: Set(settings.unread_only),
            oldest_first: Set(settings.oldest_first),
            mark_read_on_scroll: Set(settings.mark_read_on_scroll),
            updated_at: Set(settings.updated_at),
        };
        feed_settings::Entity::insert(model)
            .on_conflict(
                OnConflict::column(feed_settings::Column::UserId)
                    .update_columns([
                        feed_settings::Column::RetentionDays,
                        feed_settings::Column::UnreadOnly,
                        feed_settings::Column::OldestFirst,
                        feed_settings::Column::MarkReadOnScroll,
                        feed_settings::Column::UpdatedAt,
                    ])
                    .to_owned(),
            )
            .exec_without_returning(&self.db)
            .await?;
        Ok(settings)
    }
}

/// What an OPML import did.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportReport {
    pub feeds_created: u64,
    pub groups_created: u64,
    pub skipped: u64,
}

/// A bookmark's content.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub item_id: Option<i64>,
    pub feed_id: Option<i64>,
    pub link: String,
    pub title: String,
    pub content: String,
    pub pub_date: Option<DateTime<Utc>>,
    pub feed_name: Option<String>,
}

/// Settings changes; the outer `None` leaves a preference alone, the inner
/// one resets it to "never chosen".
#[derive(Debug, Clone, Default)]
pub struct SettingsPatch {
    pub retention_days: Option<Option<i32>>,
    pub unread_only: Option<Option<bool>>,
    pub oldest_first: Option<Option<bool>>,
    pub mark_read_on_scroll: Option<Option<bool>>,
}

/// Every user has one, made by the database together with the user (an
/// `AFTER INSERT` trigger, migration 000015), so reads never create it.
async fn default_group_in(db: &impl ConnectionTrait, user: Uuid) -> AppResult<feed_group::Model> {
    feed_group::Entity::find()
        .filter(feed_group::Column::UserId.eq(user))
        .filter(feed_group::Column::IsDefault.eq(true))
        .one(db)
        .await?
        .ok_or_else(|| AppError::internal(anyhow::anyhow!("user {user} has no default feed group")))
}

/// The user's feed ids (for `feed_id IN (…)`).
fn user_feed_ids(user: Uuid) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .column(feed::Column::Id)
        .from(feed::Entity)
        .and_where(feed::Column::UserId.eq(user))
        .to_owned()
}

/// A group's feed ids (for `feed_id IN (…)`), the user's only.
pub fn feed_ids_in_group(user: Uuid, group: i64) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .column(feed::Column::Id)
        .from(feed::Entity)
        .and_where(feed::Column::GroupId.eq(group))
        .and_where(feed::Column::UserId.eq(user))
        .to_owned()
}

fn new_group(
    user: Uuid,
    name: String,
    is_default: bool,
    now: DateTime<Utc>,
) -> feed_group::ActiveModel {
    feed_group::ActiveModel {
        user_id: Set(user),
        name: Set(name),
        is_default: Set(is_default),
        created_at: Set(now),
        updated_at: Set(now),
        ..Default::default()
    }
}

/// Inserts a feed with its fetch state (due now). A link the user already
/// follows is `CONFLICT`.
async fn insert_feed(
    txn: &impl ConnectionTrait,
    mut model: feed::ActiveModel,
    now: DateTime<Utc>,
) -> AppResult<feed::Model> {
    model.created_at = Set(now);
    model.updated_at = Set(now);
    let feed = model
        .insert(txn)
        .await
        .map_err(|error| unique_conflict(error, "you already follow that link".into()))?;
    store::new_fetch_state(feed.id, now).insert(txn).await?;
    Ok(feed)
}

async fn owned_group(
    db: &impl ConnectionTrait,
    user: Uuid,
    id: i64,
) -> AppResult<feed_group::Model> {
    feed_group::Entity::find_by_id(id)
        .filter(feed_group::Column::UserId.eq(user))
        .one(db)
        .await?
        .ok_or_else(|| AppError::bad_input("groupId", "no such group"))
}

/// Tells schedulers (in every process) that feeds changed.
async fn feeds_changed(
    txn: &impl ConnectionTrait,
    user: Uuid,
    ids: impl IntoIterator<Item = i64>,
) -> AppResult<()> {
    let ids: Vec<String> = ids.into_iter().map(|id| id.to_string()).collect();
    outbox::emit(
        txn,
        vec![NewEvent {
            topic: FEED_CHANGED,
            aggregate_id: format!("user:{user}"),
            owner_id: Some(user),
            payload: json!({ "feedIds": ids }),
        }],
    )
    .await
}

fn group_name(name: &str) -> AppResult<String> {
    checked_name(name)
}

/// A name the user typed, per [`names::check`].
fn checked_name(name: &str) -> AppResult<String> {
    names::check(name).map_err(|error| AppError::bad_input("name", error.to_string()))
}

/// A feed's name before its first pull: its URL, cut to a name's length.
fn name_from_link(link: &str) -> String {
    link.chars().take(MAX_NAME_CHARS).collect()
}

fn bounded(field: &'static str, value: &str, max: usize) -> AppResult<String> {
    if value.is_empty() || value.chars().count() > max {
        return Err(AppError::bad_input(
            field,
            format!("{field} must be 1–{max} characters"),
        ));
    }
    Ok(value.to_owned())
}

fn web_url(value: &str) -> AppResult<String> {
    match Url::parse(value.trim()) {
        Ok(url) if matches!(url.scheme(), "http" | "https") => Ok(url.to_string()),
        _ => Err(AppError::bad_input(
            "link",
            "must be an absolute http(s) URL",
        )),
    }
}

fn check_interval(seconds: Option<i32>) -> AppResult<()> {
    match seconds {
        Some(seconds) if !REFRESH_INTERVALS.contains(&seconds) => Err(AppError::bad_input(
            "refreshIntervalSeconds",
            format!(
                "refreshIntervalSeconds must be one of {REFRESH_INTERVALS:?}, or null for the global interval"
            ),
        )),
        _ => Ok(()),
    }
}

fn check_ids(ids: &[i64]) -> AppResult<()> {
    if ids.is_empty() || ids.len() > MAX_IDS {
        return Err(AppError::bad_input("ids", format!("give 1–{MAX_IDS} ids")));
    }
    Ok(())
}

fn unique_conflict(error: DbErr, message: String) -> AppError {
    match error.sql_err() {
        Some(SqlErr::UniqueConstraintViolation(_)) => AppError::Conflict(message),
        _ => error.into(),
    }
}

macro_rules! owned_by_user {
    ($($entity:ident: $name:literal),* $(,)?) => {$(
        impl Owned for $entity::Entity {
            const NAME: &'static str = $name;
            fn id_column() -> Self::Column {
                $entity::Column::Id
            }
            fn owner_column() -> Self::Column {
                $entity::Column::UserId
            }
        }
    )*};
}

owned_by_user!(feed_group: "group", feed: "feed", item: "item", bookmark: "bookmark");
