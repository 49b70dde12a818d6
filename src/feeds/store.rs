//! The pull worker's SQL: reading a feed with its fetch state, upserting
//! items, recording a success or a failure (each in the caller's
//! transaction, with its `feed.updated` event), and the scheduler's
//! due-feed queries.

use std::{collections::HashSet, time::Duration};

use chrono::{DateTime, Utc};
use entity::{feed, feed_fetch_state, item};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, Order,
    QueryFilter, QueryOrder, QuerySelect, Set,
    sea_query::{Alias, Expr, ExprTrait, NullOrdering, OnConflict, SimpleExpr},
};
use serde_json::json;
use uuid::Uuid;

use super::{FEED_UPDATED, mapping::MappedItem, parse::ParsedFeed, pullpolicy};
use crate::{
    error::AppResult,
    jobs::outbox::{self, NewEvent},
};

/// Rows per multi-row INSERT: well under SQLite's bound-parameter limit.
const INSERT_CHUNK: usize = 500;

pub async fn feed_with_state(
    db: &impl ConnectionTrait,
    feed_id: i64,
) -> AppResult<Option<(feed::Model, feed_fetch_state::Model)>> {
    let Some(feed) = feed::Entity::find_by_id(feed_id).one(db).await? else {
        return Ok(None);
    };
    let state = match feed_fetch_state::Entity::find_by_id(feed_id)
        .one(db)
        .await?
    {
        Some(state) => state,
        None => new_fetch_state(feed_id, Utc::now()).insert(db).await?,
    };
    Ok(Some((feed, state)))
}

/// A new feed's fetch state: due now.
pub fn new_fetch_state(feed_id: i64, now: DateTime<Utc>) -> feed_fetch_state::ActiveModel {
    feed_fetch_state::ActiveModel {
        feed_id: Set(feed_id),
        etag: Set(None),
        last_modified: Set(None),
        cache_control: Set(None),
        expires_at: Set(None),
        last_checked_at: Set(None),
        next_check_at: Set(None),
        last_http_status: Set(None),
        retry_after_until: Set(None),
        last_success_at: Set(None),
        last_error_at: Set(None),
        last_error: Set(None),
        consecutive_failures: Set(0),
        updated_at: Set(now),
    }
}

/// Inserts new items and rewrites changed ones (same guid, different
/// title/content/link); read and starred state are never touched. Returns
/// the number of new items.
pub async fn upsert_items(
    txn: &impl ConnectionTrait,
    feed: &feed::Model,
    items: &[MappedItem],
    now: DateTime<Utc>,
) -> AppResult<u64> {
    // One row per guid: a feed that repeats an entry keeps its first copy.
    let mut seen = HashSet::new();
    let items: Vec<&MappedItem> = items
        .iter()
        .filter(|item| seen.insert(item.guid.as_str()))
        .collect();
    let mut new_items = 0;
    for chunk in items.chunks(INSERT_CHUNK) {
        let existing: HashSet<String> = item::Entity::find()
            .select_only()
            .column(item::Column::Guid)
            .filter(item::Column::FeedId.eq(feed.id))
            .filter(item::Column::Guid.is_in(chunk.iter().map(|item| item.guid.clone())))
            .into_tuple::<String>()
            .all(txn)
            .await?
            .into_iter()
            .collect();
        new_items += chunk
            .iter()
            .filter(|item| !existing.contains(&item.guid))
            .count() as u64;
        let rows = chunk.iter().map(|mapped| item::ActiveModel {
            user_id: Set(feed.user_id),
            feed_id: Set(feed.id),
            guid: Set(mapped.guid.clone()),
            link: Set(mapped.link.clone()),
            title: Set(mapped.title.clone()),
            content: Set(mapped.content.clone()),
            content_html: Set(Some(mapped.content_html.clone())),
            search_title: Set(mapped.search_title.clone()),
            search_body: Set(mapped.search_body.clone()),
            content_hash: Set(content_hash(mapped)),
            pub_date: Set(mapped.pub_date),
            undated: Set(mapped.undated),
            authors: Set(item::Authors(mapped.authors.clone())),
            enclosures: Set(item::Enclosures(mapped.enclosures.clone())),
            unread: Set(true),
            starred: Set(false),
            // Never in the update list below: an item arrives once.
            arrived_at: Set(now),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        });
        item::Entity::insert_many(rows)
            .on_conflict(
                OnConflict::columns([item::Column::FeedId, item::Column::Guid])
                    .update_columns([
                        item::Column::Title,
                        item::Column::Content,
                        item::Column::ContentHtml,
                        item::Column::SearchTitle,
                        item::Column::SearchBody,
                        item::Column::Link,
                        item::Column::Authors,
                        item::Column::Enclosures,
                        item::Column::ContentHash,
                        item::Column::UpdatedAt,
                    ])
                    // Changed, or stored before its sanitized HTML was kept.
                    .action_and_where(
                        Expr::col((item::Entity, item::Column::ContentHash))
                            .ne(Expr::col((
                                Alias::new("excluded"),
                                item::Column::ContentHash,
                            )))
                            .or(Expr::col((item::Entity, item::Column::ContentHtml)).is_null()),
                    )
                    .to_owned(),
            )
            .exec_without_returning(txn)
            .await?;
    }
    Ok(new_items)
}

/// What decides whether a stored item is rewritten. Authors and
/// enclosures count only when there are some, so an item without either
/// keeps the hash it had before they were stored (no rewrite of every item
/// at the first pull after the upgrade; an item with either is rewritten
/// once, which stores them).
fn content_hash(item: &MappedItem) -> String {
    let link = item.link.as_deref().unwrap_or_default();
    let mut parts = vec![item.title.as_str(), item.content.as_str(), link];
    let media;
    if !item.authors.is_empty() || !item.enclosures.is_empty() {
        media = serde_json::to_string(&(&item.authors, &item.enclosures)).unwrap_or_default();
        parts.push(&media);
    }
    crate::digest::sha256_hex(&parts)
}

/// The fetch state a successful check (200/304) leaves.
#[derive(Debug, Clone)]
pub struct SuccessState {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    pub cache_control: Option<String>,
    pub expires_at: Option<DateTime<Utc>>,
    pub status: i32,
    pub retry_after_until: Option<DateTime<Utc>>,
    pub next_check_at: DateTime<Utc>,
    pub now: DateTime<Utc>,
}

pub async fn record_success(
    txn: &impl ConnectionTrait,
    feed: &feed::Model,
    state: SuccessState,
    parsed: Option<&ParsedFeed>,
    new_items: u64,
) -> AppResult<()> {
    let now = state.now;
    feed_fetch_state::Entity::update_many()
        .col_expr(feed_fetch_state::Column::Etag, Expr::value(state.etag))
        .col_expr(
            feed_fetch_state::Column::LastModified,
            Expr::value(state.last_modified),
        )
        .col_expr(
            feed_fetch_state::Column::CacheControl,
            Expr::value(state.cache_control),
        )
        .col_expr(
            feed_fetch_state::Column::ExpiresAt,
            Expr::value(state.expires_at),
        )
        .col_expr(feed_fetch_state::Column::LastCheckedAt, Expr::value(now))
        .col_expr(
            feed_fetch_state::Column::NextCheckAt,
            Expr::value(state.next_check_at),
        )
        .col_expr(
            feed_fetch_state::Column::LastHttpStatus,
            Expr::value(state.status),
        )
        .col_expr(
            feed_fetch_state::Column::RetryAfterUntil,
            Expr::value(state.retry_after_until),
        )
        .col_expr(feed_fetch_state::Column::LastSuccessAt, Expr::value(now))
        .col_expr(
            feed_fetch_state::Column::ConsecutiveFailures,
            Expr::value(0),
        )
        .col_expr(feed_fetch_state::Column::UpdatedAt, Expr::value(now))
        .filter(feed_fetch_state::Column::FeedId.eq(feed.id))
        .exec(txn)
        .await?;
    // Fill in what the user did not give: the site URL, and a real name
    // where the feed was named after its URL. Each is conditional in SQL:
    // the user may have renamed the feed while it was being pulled.
    if let Some(parsed) = parsed {
        if let Some(site) = &parsed.site_url {
            feed::Entity::update_many()
                .col_expr(feed::Column::SiteUrl, Expr::value(site.clone()))
                .col_expr(feed::Column::UpdatedAt, Expr::value(now))
                .filter(feed::Column::Id.eq(feed.id))
                .filter(feed::Column::SiteUrl.is_null())
                .exec(txn)
                .await?;
        }
        if let Some(title) = &parsed.title {
            // Already cleaned to a name by the parser.
            feed::Entity::update_many()
                .col_expr(feed::Column::Name, Expr::value(title.clone()))
                .col_expr(feed::Column::UpdatedAt, Expr::value(now))
                .filter(feed::Column::Id.eq(feed.id))
                .filter(Expr::col(feed::Column::Name).eq(Expr::col(feed::Column::Link)))
                .exec(txn)
                .await?;
        }
    }
    feed_updated_event(txn, feed, new_items).await
}

/// A failed check.
#[derive(Debug, Clone)]
pub struct Failure {
    pub status: Option<i32>,
    pub retry_after: Option<Duration>,
    pub error: String,
    pub interval: Duration,
    pub max_backoff: Duration,
    pub now: DateTime<Utc>,
}

/// Counts the failure and schedules the next check in one transaction: the
/// increment happens in SQL and takes the row's write lock, so two failures
/// racing on one feed count twice and the later `next_check_at` uses the
/// later count. Validators and cache fields are left alone.
pub async fn record_failure(
    txn: &impl ConnectionTrait,
    feed: &feed::Model,
    failure: Failure,
) -> AppResult<()> {
    let now = failure.now;
    let error: String = failure.error.chars().take(1000).collect();
    let retry_after_until = failure
        .retry_after
        .map(|delay| pullpolicy::after(now, delay));
    let updated = feed_fetch_state::Entity::update_many()
        .col_expr(
            feed_fetch_state::Column::ConsecutiveFailures,
            Expr::col(feed_fetch_state::Column::ConsecutiveFailures).add(1),
        )
        .col_expr(feed_fetch_state::Column::LastError, Expr::value(error))
        .col_expr(feed_fetch_state::Column::LastErrorAt, Expr::value(now))
        .col_expr(feed_fetch_state::Column::LastCheckedAt, Expr::value(now))
        .col_expr(
            feed_fetch_state::Column::LastHttpStatus,
            Expr::value(failure.status),
        )
        .col_expr(
            feed_fetch_state::Column::RetryAfterUntil,
            Expr::value(retry_after_until),
        )
        .col_expr(feed_fetch_state::Column::UpdatedAt, Expr::value(now))
        .filter(feed_fetch_state::Column::FeedId.eq(feed.id))
        .exec_with_returning(txn)
        .await?;
    let failures = updated
        .first()
        .map(|state| Ord::max(state.consecutive_failures, 0) as u32)
        .unwrap_or(1);
    let next = pullpolicy::next_check_after_failure(
        now,
        failure.interval,
        failure.retry_after,
        failures,
        failure.max_backoff,
    );
    feed_fetch_state::Entity::update_many()
        .col_expr(feed_fetch_state::Column::NextCheckAt, Expr::value(next))
        .filter(feed_fetch_state::Column::FeedId.eq(feed.id))
        .exec(txn)
        .await?;
    feed_updated_event(txn, feed, 0).await
}

async fn feed_updated_event(
    txn: &impl ConnectionTrait,
    feed: &feed::Model,
    new_items: u64,
) -> AppResult<()> {
    outbox::emit(
        txn,
        vec![NewEvent {
            topic: FEED_UPDATED,
            aggregate_id: feed.id.to_string(),
            owner_id: Some(feed.user_id),
            payload: json!({ "feedId": feed.id.to_string(), "newItems": new_items }),
        }],
    )
    .await
}

/// Claims up to `limit` due feeds for the scheduler: their `next_check_at`
/// moves to `hold` in one conditional UPDATE, so of several schedulers only
/// one claims a feed. Due means not suspended, `next_check_at` unset or
/// past, and no `Retry-After` hold in force ([`due`]: the scheduler's rule
/// runs here, in the claim, where the index serves it).
pub async fn claim_due_feeds(
    db: &DatabaseConnection,
    now: DateTime<Utc>,
    hold: DateTime<Utc>,
    limit: u64,
) -> AppResult<Vec<(i64, Uuid)>> {
    let due_ids: Vec<i64> = by_due_time()
        .select_only()
        .column(feed_fetch_state::Column::FeedId)
        .filter(due(now))
        .limit(limit)
        .into_tuple()
        .all(db)
        .await?;
    if due_ids.is_empty() {
        return Ok(Vec::new());
    }
    let claimed: Vec<i64> = feed_fetch_state::Entity::update_many()
        .col_expr(feed_fetch_state::Column::NextCheckAt, Expr::value(hold))
        .filter(feed_fetch_state::Column::FeedId.is_in(due_ids))
        .filter(due(now))
        .exec_with_returning(db)
        .await?
        .into_iter()
        .map(|state| state.feed_id)
        .collect();
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    Ok(feed::Entity::find()
        .select_only()
        .column(feed::Column::Id)
        .column(feed::Column::UserId)
        .filter(feed::Column::Id.is_in(claimed))
        .into_tuple()
        .all(db)
        .await?)
}

/// Fetch states of non-suspended feeds, earliest due first (an unset
/// `next_check_at`, meaning due now, before any date on both backends).
fn by_due_time() -> sea_orm::Select<feed_fetch_state::Entity> {
    feed_fetch_state::Entity::find()
        .filter(
            feed_fetch_state::Column::FeedId.in_subquery(
                sea_orm::sea_query::Query::select()
                    .column(feed::Column::Id)
                    .from(feed::Entity)
                    .and_where(feed::Column::Suspended.eq(false))
                    .to_owned(),
            ),
        )
        .order_by_with_nulls(due_time(), Order::Asc, NullOrdering::First)
}

/// When each feed is next due: the later of `next_check_at` and
/// `retry_after_until`, an unset one not counting (both unset: due now,
/// NULL) — in SQL what [`pullpolicy::due_at`] says per feed. A hold with no
/// `next_check_at` (a 429 on the first pull) is due when the hold ends.
fn due_time() -> SimpleExpr {
    let next = Expr::col(feed_fetch_state::Column::NextCheckAt);
    let hold = Expr::col(feed_fetch_state::Column::RetryAfterUntil);
    let hold_wins = hold
        .clone()
        .is_not_null()
        .and(next.clone().is_null().or(hold.clone().gt(next.clone())));
    Expr::case(hold_wins, hold).finally(next).into()
}

fn due(now: DateTime<Utc>) -> sea_orm::Condition {
    sea_orm::Condition::all()
        .add(
            sea_orm::Condition::any()
                .add(feed_fetch_state::Column::NextCheckAt.is_null())
                .add(feed_fetch_state::Column::NextCheckAt.lte(now)),
        )
        .add(
            sea_orm::Condition::any()
                .add(feed_fetch_state::Column::RetryAfterUntil.is_null())
                .add(feed_fetch_state::Column::RetryAfterUntil.lte(now)),
        )
}

/// When the scheduler should look again: the earliest `next_check_at` (or
/// `retry_after_until`, whichever is later per feed) of a non-suspended feed.
/// `None`: no feeds.
pub async fn earliest_due(db: &DatabaseConnection) -> AppResult<Option<DateTime<Utc>>> {
    // (next_check_at, retry_after_until)
    type Due = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);
    let rows: Vec<Due> = by_due_time()
        .select_only()
        .column(feed_fetch_state::Column::NextCheckAt)
        .column(feed_fetch_state::Column::RetryAfterUntil)
        .limit(1)
        .into_tuple()
        .all(db)
        .await?;
    Ok(rows.into_iter().next().map(|(next, retry)| {
        pullpolicy::due_at(&pullpolicy::Schedule {
            suspended: false,
            next_check_at: next,
            retry_after_until: retry,
        })
        .unwrap_or_else(Utc::now)
    }))
}
