//! The Fever API (`POST /fever/?api`), as Reeder, Unread, ReadKit and
//! others speak it: `api_key = md5(username:password)` in the form body
//! (the user's reader password, see [`super::reader_auth`]), and query
//! flags naming what to return — `groups`, `feeds`, `favicons`, `items`
//! (`since_id`, `max_id`, `with_ids`; 50 at a time), `links`,
//! `unread_item_ids`, `saved_item_ids` — plus `mark` / `as` / `id` /
//! `before` to change read and saved state. Every answer carries
//! `api_version` 3 and `auth` (0 with a wrong key, and nothing else).
//! A thin adapter: the data comes from [`FeedsService`], scoped to the
//! key's user like everything else.

use std::collections::HashMap;

use axum::{
    Json,
    extract::State,
    response::{IntoResponse, Response},
};
use chrono::{DateTime, Utc};
use entity::{feed_fetch_state, item};
use sea_orm::{
    ColumnTrait, EntityTrait, PaginatorTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, Func},
};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    reader_auth,
    reader_form::{Params, unix_time},
    sanitize::sanitize_html,
    service::{FeedsService, ReadScope},
};
use crate::{
    app::AppState,
    auth::ratelimit::Realm,
    error::{AppError, AppResult},
    http::client::RequestMeta,
};

pub const API_VERSION: i64 = 3;
/// Items per `items` request, as the protocol fixes it.
pub const PAGE: u64 = 50;

pub async fn fever(State(state): State<AppState>, meta: RequestMeta, params: Params) -> Response {
    let db = &state.services.db;
    // Wrong keys are throttled per client address like failed logins, on
    // a budget of their own (a stale key in an app must not lock the
    // web login).
    let user = match params.from_body("api_key") {
        Some(key) => {
            state
                .services
                .auth
                .throttled(
                    Realm::Fever,
                    None,
                    &meta,
                    reader_auth::fever_user(db, &state.services.auth, key),
                )
                .await
        }
        None => Ok(None),
    };
    let mut answer = Map::new();
    answer.insert("api_version".into(), json!(API_VERSION));
    let user = match user {
        Ok(Some(user)) => user,
        Ok(None) => {
            answer.insert("auth".into(), json!(0));
            return Json(Value::Object(answer)).into_response();
        }
        // Refused by the limiter: in the protocol's own words (apps know
        // `auth: 0`, not GraphQL errors), with when to try again.
        Err(AppError::RateLimited { retry_after }) => {
            answer.insert("auth".into(), json!(0));
            return (
                [(axum::http::header::RETRY_AFTER, retry_after.to_string())],
                Json(Value::Object(answer)),
            )
                .into_response();
        }
        Err(error) => return error.into_response(),
    };
    answer.insert("auth".into(), json!(1));
    match respond(&state.services.feeds, user, &params, &mut answer).await {
        Ok(()) => Json(Value::Object(answer)).into_response(),
        Err(error) => error.into_response(),
    }
}

async fn respond(
    feeds: &FeedsService,
    user: Uuid,
    params: &Params,
    answer: &mut Map<String, Value>,
) -> AppResult<()> {
    let has = |flag: &str| params.has(flag);
    let number = |name: &str| params.number(name);
    if let (Some(what), Some(action), Some(id)) =
        (params.one("mark"), params.one("as"), number("id"))
    {
        mark(feeds, user, what, action, id, number("before")).await?;
    }
    answer.insert(
        "last_refreshed_on_time".into(),
        json!(last_refreshed(feeds, user).await?),
    );
    if has("groups") || has("feeds") {
        let groups = feeds.groups(user).await?;
        let all = feeds.feeds(user, None).await?;
        let feeds_groups: Vec<Value> = groups
            .iter()
            .map(|group| {
                let ids: Vec<String> = all
                    .iter()
                    .filter(|feed| feed.group_id == group.id)
                    .map(|feed| feed.id.to_string())
                    .collect();
                json!({ "group_id": group.id, "feed_ids": ids.join(",") })
            })
            .collect();
        if has("groups") {
            let list: Vec<Value> = groups
                .iter()
                .map(|group| json!({ "id": group.id, "title": group.name }))
                .collect();
            answer.insert("groups".into(), json!(list));
        }
        if has("feeds") {
            let list: Vec<Value> = all
                .iter()
                .map(|feed| {
                    json!({
                        "id": feed.id,
                        "favicon_id": 0,
                        "title": feed.name,
                        "url": feed.link,
                        "site_url": feed.site_url.clone().unwrap_or_default(),
                        "is_spark": 0,
                        "last_updated_on_time": feed.updated_at.timestamp(),
                    })
                })
                .collect();
            answer.insert("feeds".into(), json!(list));
        }
        answer.insert("feeds_groups".into(), json!(feeds_groups));
    }
    if has("favicons") {
        // No favicons are fetched; clients fall back to their own.
        answer.insert("favicons".into(), json!([]));
    }
    if has("links") {
        answer.insert("links".into(), json!([]));
    }
    if has("items") {
        let mut select = feeds.items_of(user);
        select = if let Some(ids) = params.one("with_ids") {
            let ids: Vec<i64> = ids
                .split(',')
                .filter_map(|id| id.trim().parse().ok())
                .take(PAGE as usize)
                .collect();
            select
                .filter(item::Column::Id.is_in(ids))
                .order_by_asc(item::Column::Id)
        } else if let Some(max) = number("max_id") {
            select
                .filter(item::Column::Id.lt(max))
                .order_by_desc(item::Column::Id)
        } else {
            select
                .filter(item::Column::Id.gt(number("since_id").unwrap_or(0)))
                .order_by_asc(item::Column::Id)
        };
        let links: HashMap<i64, String> = feeds
            .feeds(user, None)
            .await?
            .into_iter()
            .map(|feed| (feed.id, feed.link))
            .collect();
        let items: Vec<Value> = select
            .limit(PAGE)
            .all(feeds.db())
            .await?
            .into_iter()
            .map(|item| {
                // Served like GraphQL's `content`: sanitized, links made absolute.
                let base = item
                    .link
                    .as_deref()
                    .or(links.get(&item.feed_id).map(String::as_str))
                    .and_then(|link| url::Url::parse(link).ok());
                json!({
                    "id": item.id,
                    "feed_id": item.feed_id,
                    "title": item.title,
                    "author": "",
                    "html": sanitize_html(&item.content, base.as_ref()),
                    "url": item.link.unwrap_or_default(),
                    "is_saved": i32::from(item.starred),
                    "is_read": i32::from(!item.unread),
                    "created_on_time": item.pub_date.timestamp(),
                })
            })
            .collect();
        let total = feeds.items_of(user).count(feeds.db()).await?;
        answer.insert("items".into(), json!(items));
        answer.insert("total_items".into(), json!(total));
    }
    if has("unread_item_ids") {
        let ids = item_ids(feeds, user, item::Column::Unread).await?;
        answer.insert("unread_item_ids".into(), json!(ids));
    }
    if has("saved_item_ids") {
        let ids = item_ids(feeds, user, item::Column::Starred).await?;
        answer.insert("saved_item_ids".into(), json!(ids));
    }
    Ok(())
}

/// `mark=item|feed|group`, `as=read|unread|saved|unsaved`, `id`, `before`.
/// Unknown combinations are ignored, as Fever does.
async fn mark(
    feeds: &FeedsService,
    user: Uuid,
    what: &str,
    action: &str,
    id: i64,
    before: Option<i64>,
) -> AppResult<()> {
    let before = before.and_then(unix_time);
    let done = match (what, action) {
        // Negative ids are Fever's Sparks, which Trellis does not have.
        _ if id < 0 => Ok(0),
        ("item", "read") => feeds.set_unread(user, &[id], false).await,
        ("item", "unread") => feeds.set_unread(user, &[id], true).await,
        ("item", "saved") => feeds.set_starred(user, &[id], true).await,
        ("item", "unsaved") => feeds.set_starred(user, &[id], false).await,
        ("feed", "read") => feeds.mark_all_read(user, ReadScope::Feed(id), before).await,
        // Group 0 is Fever's "Kindling": everything.
        ("group", "read") if id == 0 => feeds.mark_all_read(user, ReadScope::All, before).await,
        ("group", "read") => {
            feeds
                .mark_all_read(user, ReadScope::Group(id), before)
                .await
        }
        _ => Ok(0),
    };
    match done {
        // A feed or group deleted meanwhile: nothing to mark, and the
        // client's sync must go on.
        Ok(_) | Err(AppError::NotFound(_)) => Ok(()),
        Err(error) => Err(error),
    }
}

/// Comma-separated ids of the user's items where `flag` is true.
async fn item_ids(feeds: &FeedsService, user: Uuid, flag: item::Column) -> AppResult<String> {
    let ids: Vec<i64> = feeds
        .items_of(user)
        .select_only()
        .column(item::Column::Id)
        .filter(flag.eq(true))
        .order_by_asc(item::Column::Id)
        .into_tuple()
        .all(feeds.db())
        .await?;
    Ok(ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
}

/// When the user's feeds were last checked, as a Unix time (0: never).
async fn last_refreshed(feeds: &FeedsService, user: Uuid) -> AppResult<i64> {
    let latest: Option<Option<DateTime<Utc>>> = feed_fetch_state::Entity::find()
        .select_only()
        .expr(Func::max(Expr::col(
            feed_fetch_state::Column::LastCheckedAt,
        )))
        .filter(
            feed_fetch_state::Column::FeedId.in_subquery(
                sea_orm::sea_query::Query::select()
                    .column(entity::feed::Column::Id)
                    .from(entity::feed::Entity)
                    .and_where(entity::feed::Column::UserId.eq(user))
                    .to_owned(),
            ),
        )
        .into_tuple()
        .one(feeds.db())
        .await?;
    Ok(latest.flatten().map(|at| at.timestamp()).unwrap_or(0))
}
