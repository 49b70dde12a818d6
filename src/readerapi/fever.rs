//! The Fever API (`POST /fever/?api`), as Reeder, Unread, ReadKit and
//! others speak it: `api_key = md5(username:password)` in the form body
//! (the user's reader password, see [`crate::feeds::reader_auth`]), and query
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
use base64::{Engine, prelude::BASE64_STANDARD};
use serde_json::{Map, Value, json};
use uuid::Uuid;

use super::{
    ReaderState,
    form::{Params, unix_time},
};
use crate::{
    auth::ratelimit::Realm,
    error::{AppError, AppResult},
    feeds::{
        sanitize::item_html,
        service::{FeedsService, ItemPage, ItemState, ReadScope},
    },
    http::client::RequestMeta,
};

pub const API_VERSION: i64 = 3;
/// Items per `items` request, as the protocol fixes it.
pub const PAGE: u64 = 50;

pub async fn fever(
    State(state): State<ReaderState>,
    meta: RequestMeta,
    params: Params,
) -> Response {
    // Wrong keys are throttled per client address like failed logins, on
    // a budget of their own (a stale key in an app must not lock the
    // web login).
    let user = match params.from_body("api_key") {
        Some(key) => {
            state
                .accounts
                .auth()
                .throttled(Realm::Fever, None, &meta, state.accounts.fever_user(key))
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
    match respond(&state.feeds, user, &params, &mut answer).await {
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
        // The list the mark changed comes back with the answer, as the
        // spec says and FreshRSS does, so the app needs no second call.
        let changed = match action {
            "saved" | "unsaved" => "saved_item_ids",
            _ => "unread_item_ids",
        };
        if !has(changed) {
            answer.insert(changed.into(), json!(id_list(feeds, user, changed).await?));
        }
    }
    answer.insert(
        "last_refreshed_on_time".into(),
        json!(
            feeds
                .last_checked(user)
                .await?
                .map_or(0, |at| at.timestamp())
        ),
    );
    if has("groups") || has("feeds") {
        let groups = feeds.groups(user).await?;
        let all = feeds.feeds(user, None).await?;
        // Only groups with feeds, as the peers list them.
        let feeds_groups: Vec<Value> = groups
            .iter()
            .filter_map(|group| {
                let ids: Vec<String> = all
                    .iter()
                    .filter(|feed| feed.group_id == group.id)
                    .map(|feed| feed.id.to_string())
                    .collect();
                (!ids.is_empty())
                    .then(|| json!({ "group_id": group.id, "feed_ids": ids.join(",") }))
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
            let checked = feeds.last_successes(user).await?;
            // A feed's favicon id is its own id (0: none).
            let with_icons = feeds.feeds_with_icons(user).await?;
            let list: Vec<Value> = all
                .iter()
                .map(|feed| {
                    json!({
                        "id": feed.id,
                        "favicon_id": if with_icons.contains_key(&feed.id) { feed.id } else { 0 },
                        "title": feed.name,
                        "url": feed.link,
                        "site_url": feed.site_url.clone().unwrap_or_default(),
                        "is_spark": 0,
                        // The last successful check (0: never), not an edit.
                        "last_updated_on_time": checked.get(&feed.id).map_or(0, |at| at.timestamp()),
                    })
                })
                .collect();
            answer.insert("feeds".into(), json!(list));
        }
        answer.insert("feeds_groups".into(), json!(feeds_groups));
    }
    if has("favicons") {
        // Inline, as the spec has it: `data` is `<mime>;base64,<bytes>`,
        // a data URI without its `data:` (what Reeder and the peers expect).
        let list: Vec<Value> = feeds
            .feed_icons(user)
            .await?
            .into_iter()
            .map(|icon| {
                json!({
                    "id": icon.feed_id,
                    "data": format!("{};base64,{}", icon.mime_type, BASE64_STANDARD.encode(&icon.data)),
                })
            })
            .collect();
        answer.insert("favicons".into(), json!(list));
    }
    if has("links") {
        answer.insert("links".into(), json!([]));
    }
    if has("items") {
        let page = if let Some(ids) = params.one("with_ids") {
            ItemPage::WithIds(
                ids.split(',')
                    .filter_map(|id| id.trim().parse().ok())
                    .take(PAGE as usize)
                    .collect(),
            )
        } else if let Some(max) = number("max_id") {
            // `max_id=0` starts backward paging from the newest (the
            // spec: "the lowest id of locally cached items (or 0 initially)").
            ItemPage::Before((max > 0).then_some(max))
        } else {
            ItemPage::After(number("since_id").unwrap_or(0))
        };
        let links: HashMap<i64, String> = feeds
            .feeds(user, None)
            .await?
            .into_iter()
            .map(|feed| (feed.id, feed.link))
            .collect();
        let items: Vec<Value> = feeds
            .item_page(user, page, PAGE)
            .await?
            .into_iter()
            .map(|item| {
                json!({
                    "id": item.id,
                    "feed_id": item.feed_id,
                    "title": item.title,
                    "author": item.authors.joined(),
                    // Served like GraphQL's `content`.
                    "html": item_html(&item, links.get(&item.feed_id).map(String::as_str)),
                    "url": item.link.unwrap_or_default(),
                    "is_saved": i32::from(item.starred),
                    "is_read": i32::from(!item.unread),
                    "created_on_time": item.pub_date.timestamp(),
                })
            })
            .collect();
        let total = feeds.item_count(user).await?;
        answer.insert("items".into(), json!(items));
        answer.insert("total_items".into(), json!(total));
    }
    for list in ["unread_item_ids", "saved_item_ids"] {
        if has(list) {
            answer.insert(list.into(), json!(id_list(feeds, user, list).await?));
        }
    }
    Ok(())
}

/// `mark=item|feed|group`, `as=read|unread|saved|unsaved`, `id`, `before`.
/// Unknown combinations are ignored, as Fever does. Marking a feed or a
/// group read needs `before` (the time of the app's last `items` call):
/// without it nothing is marked (Miniflux's behaviour), never items the
/// app has not received.
async fn mark(
    feeds: &FeedsService,
    user: Uuid,
    what: &str,
    action: &str,
    id: i64,
    before: Option<i64>,
) -> AppResult<()> {
    let before = before.and_then(unix_time);
    let done = match (what, action, before) {
        // Negative ids are Fever's Sparks, which Trellis does not have.
        _ if id < 0 => Ok(0),
        ("item", "read", _) => feeds.set_unread(user, &[id], false).await,
        ("item", "unread", _) => feeds.set_unread(user, &[id], true).await,
        ("item", "saved", _) => feeds.set_starred(user, &[id], true).await,
        ("item", "unsaved", _) => feeds.set_starred(user, &[id], false).await,
        ("feed", "read", Some(before)) => {
            feeds
                .mark_all_read(user, ReadScope::Feed(id), Some(before))
                .await
        }
        // Group 0 is Fever's "Kindling": everything.
        ("group", "read", Some(before)) if id == 0 => {
            feeds
                .mark_all_read(user, ReadScope::All, Some(before))
                .await
        }
        ("group", "read", Some(before)) => {
            feeds
                .mark_all_read(user, ReadScope::Group(id), Some(before))
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

/// `unread_item_ids` or `saved_item_ids`: comma-separated ids.
async fn id_list(feeds: &FeedsService, user: Uuid, list: &str) -> AppResult<String> {
    let state = if list == "saved_item_ids" {
        ItemState::Starred
    } else {
        ItemState::Unread
    };
    let ids = feeds.item_ids_in_state(user, state).await?;
    Ok(ids.iter().map(i64::to_string).collect::<Vec<_>>().join(","))
}
