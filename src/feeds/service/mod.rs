//! The feed reader's operations on behalf of one user. Every query starts
//! from the caller's `user_id`, so nothing crosses users; a row of another
//! user is `NOT_FOUND`, exactly like a missing one.

use std::collections::{HashMap, HashSet};

use chrono::{DateTime, Utc};
use entity::{bookmark, feed, feed_fetch_state, feed_group, feed_icon, feed_settings, item};
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
    search, store,
};
use crate::{
    db::{Owned, owned},
    error::{AppError, AppResult},
    fulltext::{SearchLimits, Searcher},
    jobs::outbox::{self, NewEvent},
};

mod bookmarks;
mod feeds;
mod groups;
mod import_export;
mod items;
mod reader;
mod settings;

/// The default group's name, as migration 000015 gives it.
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

    /// The user's best `limit` items for `query`, bounded per
    /// [`SearchLimits`].
    pub async fn ranked_items(
        &self,
        user: Uuid,
        query: &str,
        limit: u64,
    ) -> AppResult<Vec<entity::item::Model>> {
        search::ranked_items(&self.searcher, user, query, limit).await
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
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
    pub authors: item::Authors,
    pub enclosures: item::Enclosures,
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

/// A group the user makes (the default group comes with the user).
fn new_group(user: Uuid, name: String, now: DateTime<Utc>) -> feed_group::ActiveModel {
    feed_group::ActiveModel {
        user_id: Set(user),
        name: Set(name),
        is_default: Set(false),
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
