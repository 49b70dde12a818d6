//! The Google Reader API subset that Miniflux and FreshRSS serve, so
//! NetNewsWire, Reeder, Read You, FeedMe and others work unchanged:
//!
//! - `POST /accounts/ClientLogin` (`Email`, `Passwd`: the username and the
//!   reader password) → `Auth=<token>`; later requests send
//!   `Authorization: GoogleLogin auth=<token>`. The token is an HMAC of the
//!   user id and the stored password hash under the server-held secret
//!   (`auth::keys`): stateless, and changing or clearing the reader password
//!   (or the account password, which clears it) revokes it. `Passwd` is
//!   read from the body only. Logins are throttled like the account login.
//! - `GET /reader/api/0/{token,user-info,subscription/list,tag/list,unread-count}`
//! - `GET /reader/api/0/stream/items/ids`, `GET /reader/api/0/stream/contents/<stream>`,
//!   `POST /reader/api/0/stream/items/contents`
//! - `POST /reader/api/0/{edit-tag,mark-all-as-read,subscription/edit,subscription/quickadd,rename-tag,disable-tag}`
//!
//! Streams: `user/-/state/com.google/{reading-list,starred,read}`,
//! `feed/<id>`, `user/-/label/<group name>`. Item ids are accepted in the
//! long (`tag:google.com,2005:reader/item/<16 hex>`), the short (decimal)
//! and the bare 16-hex form, told apart as the peers do ([`parse_item_id`]). The stream/id grammar is pure ([`parse_stream`],
//! [`parse_item_id`]); everything else goes through [`FeedsService`].

use std::collections::HashMap;

use async_graphql::connection::CursorType;
use axum::{
    Json, Router,
    extract::{FromRequest, Path, Request, State},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
    routing::{get, post},
};
use chrono::{DateTime, Utc};
use entity::{feed, item};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{ReaderState, form::Params};
use crate::{
    auth::ratelimit::Realm,
    error::{AppError, AppResult},
    feeds::{
        item_list::{GroupRef, ItemOrder, ItemQuery},
        reader_auth::ReaderAccounts,
        service::{FeedPatch, FeedsService, NewFeed, ReadScope},
    },
    graphql::pagination::Cursor,
    http::client::RequestMeta,
};

const READING_LIST: &str = "user/-/state/com.google/reading-list";
const STARRED: &str = "user/-/state/com.google/starred";
const READ: &str = "user/-/state/com.google/read";
const LABEL_PREFIX: &str = "user/-/label/";
const ITEM_PREFIX: &str = "tag:google.com,2005:reader/item/";
/// Most ids one `stream/items/ids` answer carries.
const MAX_IDS: u64 = 10_000;
/// Most items one contents answer carries.
const MAX_CONTENTS: u64 = 1_000;

pub fn routes() -> Router<ReaderState> {
    Router::new()
        // POST only: a password in a query string ends up in logs.
        .route("/accounts/ClientLogin", post(client_login))
        .route("/reader/api/0/token", get(token))
        .route("/reader/api/0/user-info", get(user_info))
        .route("/reader/api/0/subscription/list", get(subscription_list))
        .route("/reader/api/0/tag/list", get(tag_list))
        .route("/reader/api/0/unread-count", get(unread_count))
        .route("/reader/api/0/stream/items/ids", get(item_ids))
        .route(
            "/reader/api/0/stream/items/contents",
            post(items_contents).get(items_contents),
        )
        .route(
            "/reader/api/0/stream/contents/{*stream}",
            get(stream_contents),
        )
        .route("/reader/api/0/stream/contents", get(stream_contents_query))
        .route("/reader/api/0/edit-tag", post(edit_tag))
        .route("/reader/api/0/mark-all-as-read", post(mark_all_as_read))
        .route("/reader/api/0/subscription/edit", post(subscription_edit))
        .route("/reader/api/0/subscription/quickadd", post(quickadd))
        .route("/reader/api/0/rename-tag", post(rename_tag))
        .route("/reader/api/0/disable-tag", post(disable_tag))
        .route(
            "/reader/api/0/subscription/export",
            get(subscription_export),
        )
        .route(
            "/reader/api/0/subscription/import",
            post(subscription_import),
        )
        // Probed by apps at start-up; Trellis keeps no such preferences.
        .route("/reader/api/0/preference/list", get(preference_list))
        .route(
            "/reader/api/0/preference/stream/list",
            get(stream_preference_list),
        )
        .route("/reader/api/0/friend/list", get(friend_list))
}

/// A stream a client can ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stream {
    ReadingList,
    Starred,
    Read,
    /// A tag only (`edit-tag`): the user kept the item unread.
    KeptUnread,
    Feed(i64),
    Label(String),
}

/// `user/-/state/com.google/reading-list`, `feed/12`, `user/-/label/Tech`…
/// (`user/<id>/…` is accepted for `user/-/…`).
pub fn parse_stream(value: &str) -> Option<Stream> {
    let value = value.trim();
    if let Some(id) = value.strip_prefix("feed/") {
        return id.parse().ok().map(Stream::Feed);
    }
    let rest = value.strip_prefix("user/")?;
    let (_, path) = rest.split_once('/')?;
    match path {
        "state/com.google/reading-list" => Some(Stream::ReadingList),
        "state/com.google/starred" => Some(Stream::Starred),
        "state/com.google/read" => Some(Stream::Read),
        "state/com.google/kept-unread" => Some(Stream::KeptUnread),
        _ => path
            .strip_prefix("label/")
            .filter(|name| !name.is_empty())
            .map(|name| Stream::Label(name.to_owned())),
    }
}

/// An item id as the apps send it, told apart the way Miniflux and
/// FreshRSS do:
///
/// - the long form, `tag:google.com,2005:reader/item/<hex>` (16 digits
///   zero-padded, or unpadded as NetNewsWire writes it);
/// - a bare 16-digit hex id, `000000000000048c` (Reeder);
/// - a bare id with a leading `0` or a hex letter is hex too (FreshRSS:
///   a decimal id never starts with `0`);
/// - anything else is the decimal short form, `1164` (Liferea, and our own
///   `stream/items/ids`).
pub fn parse_item_id(value: &str) -> Option<i64> {
    let value = value.trim();
    let hex = |digits: &str| {
        (!digits.is_empty() && digits.len() <= 16 && digits.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| u64::from_str_radix(digits, 16).ok())
            .flatten()
            .and_then(|id| i64::try_from(id).ok())
    };
    match value.strip_prefix(ITEM_PREFIX) {
        Some(digits) => hex(digits),
        None if value.len() == 16 || value.starts_with('0') => hex(value),
        None if value.bytes().all(|b| b.is_ascii_digit()) => value.parse().ok(),
        None => hex(value),
    }
    .filter(|id| *id > 0)
}

pub fn long_item_id(id: i64) -> String {
    format!("{ITEM_PREFIX}{:016x}", id as u64)
}

/// How many items a stream page holds: `n` (default 20), at most `max`
/// whatever a client asks (`MAX_IDS` ids, `MAX_CONTENTS` full items).
fn page_size(params: &Params, max: u64) -> u64 {
    params
        .number("n")
        .map_or(20, |n| n.clamp(1, max as i64) as u64)
}

/// The item ids a request names (`i=`, repeated), at most `max` of them.
fn item_ids_of(params: &Params, max: usize) -> Vec<i64> {
    params
        .all("i")
        .into_iter()
        .filter_map(parse_item_id)
        .take(max)
        .collect()
}

/// The user a token (from `ClientLogin`) belongs to.
async fn authenticate(state: &ReaderState, token: Option<&str>) -> AppResult<Uuid> {
    let token = token.ok_or(AppError::Unauthenticated("GoogleLogin auth token required"))?;
    state.accounts.google_user(token).await
}

/// An authenticated Reader API request: the user, the token it came with,
/// the feed service and the query and form parameters. A request without a
/// valid token is answered 401 before any handler runs (clients then show
/// their login screen).
///
/// The token comes from the `Authorization: GoogleLogin auth=` header or,
/// on a POST without that header, from the form body's `T` (Miniflux's
/// only POST authentication, which some apps rely on): `T` is what
/// `/token` hands out, the same secret as the header's. It is never read
/// from a query string, which ends up in access logs.
struct ReaderRequest {
    user: Uuid,
    token: String,
    feeds: FeedsService,
    accounts: ReaderAccounts,
    params: Params,
}

impl FromRequest<ReaderState> for ReaderRequest {
    type Rejection = Response;

    async fn from_request(request: Request, state: &ReaderState) -> Result<Self, Response> {
        let from_header = crate::http::google_login_token(request.headers()).map(str::to_owned);
        let is_post = request.method() == axum::http::Method::POST;
        let params = Params::from_request(request, state).await?;
        let token = match from_header {
            Some(token) => Some(token),
            None if is_post => params.from_body("T").map(str::to_owned),
            None => None,
        };
        let user = authenticate(state, token.as_deref())
            .await
            .map_err(failure)?;
        Ok(ReaderRequest {
            user,
            token: token.unwrap_or_default(),
            feeds: state.feeds.clone(),
            accounts: state.accounts.clone(),
            params,
        })
    }
}

/// Errors as the status codes these clients understand.
fn failure(error: AppError) -> Response {
    match error {
        // The header tells apps (NetNewsWire, Reeder…) to log in again
        // rather than retry the same token.
        AppError::Unauthenticated(_) => (
            StatusCode::UNAUTHORIZED,
            [("x-reader-google-bad-token", "true")],
            "Unauthorized",
        )
            .into_response(),
        other => other.into_response(),
    }
}

/// What a Reader API handler returns: errors answered by [`failure`].
type Reply = Result<Response, ReaderError>;

struct ReaderError(AppError);

impl<E: Into<AppError>> From<E> for ReaderError {
    fn from(error: E) -> Self {
        ReaderError(error.into())
    }
}

impl IntoResponse for ReaderError {
    fn into_response(self) -> Response {
        failure(self.0)
    }
}

fn ok() -> Reply {
    Ok("OK".into_response())
}

/// `POST /accounts/ClientLogin` (`Email`, `Passwd`, optional
/// `output=json`), throttled like the account login.
async fn client_login(
    State(state): State<ReaderState>,
    meta: RequestMeta,
    params: Params,
) -> Response {
    // The password only from the body: a URL ends up in access logs.
    let (Some(username), Some(candidate)) = (params.one("Email"), params.from_body("Passwd"))
    else {
        return (StatusCode::UNAUTHORIZED, "Error=BadAuthentication\n").into_response();
    };
    let check = state.accounts.google_login(username, candidate);
    match state
        .accounts
        .auth()
        .throttled(Realm::GoogleReader, Some(username), &meta, check)
        .await
    {
        Ok(Some(token)) if params.one("output") == Some("json") => {
            Json(json!({ "SID": token, "LSID": token, "Auth": token })).into_response()
        }
        Ok(Some(token)) => format!("SID={token}\nLSID={token}\nAuth={token}\n").into_response(),
        Ok(None) => (StatusCode::UNAUTHORIZED, "Error=BadAuthentication\n").into_response(),
        Err(error) => error.into_response(),
    }
}

/// The edit token apps send back as `T`: the auth token itself (as
/// Miniflux does), so a POST authenticated by `T` alone is as strong as one
/// with the header.
async fn token(ReaderRequest { token, .. }: ReaderRequest) -> String {
    token
}

async fn user_info(ReaderRequest { user, accounts, .. }: ReaderRequest) -> Reply {
    let name = accounts.username(user).await?;
    Ok(Json(json!({
        "userId": user.to_string(),
        "userName": name,
        "userProfileId": user.to_string(),
        "userEmail": "",
    }))
    .into_response())
}

async fn subscription_list(
    State(state): State<ReaderState>,
    ReaderRequest { user, feeds, .. }: ReaderRequest,
) -> Reply {
    let groups = group_names(&feeds, user).await?;
    let with_icons = feeds.feeds_with_icons(user).await?;
    let subscriptions: Vec<Value> = feeds
        .feeds(user, None)
        .await?
        .into_iter()
        .map(|feed| {
            let label = groups.get(&feed.group_id).cloned().unwrap_or_default();
            json!({
                "id": format!("feed/{}", feed.id),
                "title": feed.name,
                "categories": [{ "id": format!("{LABEL_PREFIX}{label}"), "label": label }],
                "url": feed.link,
                "htmlUrl": feed.site_url.unwrap_or_default(),
                // Our own route (never the publisher's), or none.
                "iconUrl": with_icons
                    .get(&feed.id)
                    .map_or_else(String::new, |hash| state.icons.url(feed.id, hash)),
            })
        })
        .collect();
    Ok(Json(json!({ "subscriptions": subscriptions })).into_response())
}

async fn tag_list(ReaderRequest { user, feeds, .. }: ReaderRequest) -> Reply {
    let mut tags = vec![json!({ "id": STARRED })];
    tags.extend(
        feeds.groups(user).await?.into_iter().map(
            |group| json!({ "id": format!("{LABEL_PREFIX}{}", group.name), "type": "folder" }),
        ),
    );
    Ok(Json(json!({ "tags": tags })).into_response())
}

/// Unread counts per feed, per label and in all, each with the newest
/// unread item's `newestItemTimestampUsec` (what apps sort and badge by).
async fn unread_count(ReaderRequest { user, feeds, .. }: ReaderRequest) -> Reply {
    let counts = feeds.unread_per_feed(user).await?;
    let groups = group_names(&feeds, user).await?;
    // Each feed's label, looked up once per count.
    let labels: HashMap<i64, &String> = feeds
        .feeds(user, None)
        .await?
        .iter()
        .filter_map(|feed| Some((feed.id, groups.get(&feed.group_id)?)))
        .collect();
    let usec = |at: Option<DateTime<Utc>>| at.map_or(0, |at| at.timestamp_micros()).to_string();
    let mut per_label: HashMap<String, (i64, Option<DateTime<Utc>>)> = HashMap::new();
    let (mut total, mut newest) = (0, None);
    let mut entries = Vec::new();
    for count in counts {
        total += count.count;
        newest = newest.max(count.newest);
        if let Some(label) = labels.get(&count.feed_id) {
            let entry = per_label.entry((*label).clone()).or_default();
            entry.0 += count.count;
            entry.1 = entry.1.max(count.newest);
        }
        entries.push(json!({
            "id": format!("feed/{}", count.feed_id),
            "count": count.count,
            "newestItemTimestampUsec": usec(count.newest),
        }));
    }
    entries.extend(per_label.into_iter().map(|(label, (count, newest))| {
        json!({
            "id": format!("{LABEL_PREFIX}{label}"),
            "count": count,
            "newestItemTimestampUsec": usec(newest),
        })
    }));
    entries.push(json!({
        "id": READING_LIST,
        "count": total,
        "newestItemTimestampUsec": usec(newest),
    }));
    Ok(Json(json!({ "max": total, "unreadcounts": entries })).into_response())
}

/// The items of a stream, with the request's exclusions (`xt`) and
/// inclusions (`it`) and time bounds.
fn stream_query(params: &Params, stream: &str) -> AppResult<ItemQuery> {
    let stream = parse_stream(stream).ok_or_else(|| AppError::bad_input("s", "unknown stream"))?;
    let mut query = ItemQuery::default();
    match stream {
        Stream::ReadingList => {}
        Stream::Starred => {
            query.starred(true);
        }
        Stream::Read => {
            query.unread(false);
        }
        Stream::KeptUnread => {
            query.unread(true);
        }
        Stream::Feed(id) => query.feed = Some(id),
        Stream::Label(name) => query.group = Some(GroupRef::Name(name)),
    }
    for (key, keep) in [("xt", false), ("it", true)] {
        for tag in params.all(key).into_iter().filter_map(parse_stream) {
            match tag {
                Stream::Read => {
                    query.unread(!keep);
                }
                Stream::Starred => {
                    query.starred(keep);
                }
                _ => {}
            }
        }
    }
    // `ot`/`nt` bound when items arrived ("crawled", in Google's words),
    // so an incremental sync from the last one gets every item pulled
    // since, whatever its publication date.
    query.arrived_since = params.time("ot");
    query.arrived_before = params.time("nt");
    Ok(query)
}

/// One page of a stream: `n` items after the continuation `c`, newest
/// first or oldest first with `r=o`. A continuation is the last item's
/// place in the order (keyset paging, as every list in the API pages), so
/// items arriving between two pages never shift one into the next page
/// twice or out of both.
async fn page(
    feeds: &FeedsService,
    user: Uuid,
    params: &Params,
    stream: &str,
    max: u64,
) -> AppResult<(Vec<item::Model>, Option<String>)> {
    let query = stream_query(params, stream)?;
    let order = if params.one("r") == Some("o") {
        ItemOrder::OldestFirst
    } else {
        ItemOrder::NewestFirst
    };
    let after = params
        .one("c")
        .map(|text| {
            Cursor::decode_cursor(text)
                .map_err(|_| AppError::bad_input("c", "not a continuation of this stream"))
        })
        .transpose()?;
    let (rows, next) = feeds
        .items_after(
            user,
            &query,
            order,
            after.as_ref(),
            "c",
            page_size(params, max),
        )
        .await?;
    Ok((rows, next.map(|cursor| cursor.encode_cursor())))
}

/// Adds the next page's `continuation` to a stream answer, when there is one.
fn continued(mut body: Value, continuation: Option<String>) -> Value {
    if let Some(continuation) = continuation {
        body["continuation"] = json!(continuation);
    }
    body
}

async fn item_ids(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let stream = params.one("s").unwrap_or(READING_LIST).to_owned();
    let (items, continuation) = page(&feeds, user, &params, &stream, MAX_IDS).await?;
    let refs: Vec<Value> = items
        .iter()
        .map(|item| {
            json!({
                "id": item.id.to_string(),
                "directStreamIds": [],
                "timestampUsec": (item.pub_date.timestamp_micros()).to_string(),
            })
        })
        .collect();
    let body = json!({ "itemRefs": refs });
    Ok(Json(continued(body, continuation)).into_response())
}

async fn items_contents(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let ids = item_ids_of(&params, MAX_CONTENTS as usize);
    let items = feeds.items_by_ids(user, &ids).await?;
    Ok(
        Json(contents(&feeds, user, items, "user/-/state/com.google/reading-list").await?)
            .into_response(),
    )
}

/// `stream/contents/<stream>`.
async fn stream_contents(Path(stream): Path<String>, request: ReaderRequest) -> Reply {
    serve_stream_contents(stream, request).await
}

/// `stream/contents?s=<stream>`.
async fn stream_contents_query(request: ReaderRequest) -> Reply {
    let stream = request.params.one("s").unwrap_or(READING_LIST).to_owned();
    serve_stream_contents(stream, request).await
}

async fn serve_stream_contents(
    stream: String,
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let (items, continuation) = page(&feeds, user, &params, &stream, MAX_CONTENTS).await?;
    let body = contents(&feeds, user, items, &stream).await?;
    Ok(Json(continued(body, continuation)).into_response())
}

/// Items as the Reader API shows them.
async fn contents(
    feeds: &FeedsService,
    user: Uuid,
    items: Vec<item::Model>,
    stream: &str,
) -> AppResult<Value> {
    let sources: HashMap<i64, feed::Model> = feeds
        .feeds(user, None)
        .await?
        .into_iter()
        .map(|feed| (feed.id, feed))
        .collect();
    let groups = group_names(feeds, user).await?;
    let items: Vec<Value> = items
        .into_iter()
        .map(|item| {
            let source = sources.get(&item.feed_id);
            let mut categories = vec![READING_LIST.to_owned()];
            // The folder, as the peers list it (apps file items by it).
            if let Some(label) = source.and_then(|feed| groups.get(&feed.group_id)) {
                categories.push(format!("{LABEL_PREFIX}{label}"));
            }
            if !item.unread {
                categories.push(READ.to_owned());
            }
            if item.starred {
                categories.push(STARRED.to_owned());
            }
            let link = item.link.clone().unwrap_or_default();
            let html = crate::feeds::sanitize::item_html(&item, source.map(|f| f.link.as_str()));
            let mut entry = json!({
                "id": long_item_id(item.id),
                "crawlTimeMsec": item.arrived_at.timestamp_millis().to_string(),
                "timestampUsec": item.pub_date.timestamp_micros().to_string(),
                "published": item.pub_date.timestamp(),
                "updated": item.updated_at.timestamp(),
                "title": item.title,
                "canonical": [{ "href": link }],
                "alternate": [{ "href": link, "type": "text/html" }],
                // Apps read one or the other (newsboat `summary`, Read You
                // `content`); both carry the item's HTML, as on the peers.
                "summary": { "direction": "ltr", "content": html },
                "content": { "direction": "ltr", "content": html },
                "enclosure": enclosures(&item.enclosures),
                "categories": categories,
                "origin": {
                    "streamId": format!("feed/{}", item.feed_id),
                    "title": source.map(|f| f.name.clone()).unwrap_or_default(),
                    "htmlUrl": source.and_then(|f| f.site_url.clone()).unwrap_or_default(),
                },
            });
            // Absent when unknown, as FreshRSS does (newsboat reads it when present).
            let author = item.authors.joined();
            if !author.is_empty() {
                entry["author"] = json!(author);
            }
            entry
        })
        .collect();
    Ok(json!({ "id": stream, "updated": Utc::now().timestamp(), "items": items }))
}

/// An item's enclosures as the peers list them: FreshRSS's `href`, `type`
/// and numeric `length` (present when known), with Miniflux's `url` beside
/// `href`. `type` is always a string (newsboat skips an enclosure without
/// one, and downloads only `audio/*`/`video/*` ones).
fn enclosures(enclosures: &item::Enclosures) -> Vec<Value> {
    enclosures
        .0
        .iter()
        .map(|enclosure| {
            let mut entry = json!({
                "href": enclosure.url,
                "url": enclosure.url,
                "type": enclosure.mime_type.as_deref().unwrap_or_default(),
            });
            if let Some(length) = enclosure.length {
                entry["length"] = json!(length);
            }
            entry
        })
        .collect()
}

/// Most item ids one `edit-tag` takes.
const MAX_EDIT: usize = 10_000;

async fn edit_tag(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let ids = item_ids_of(&params, MAX_EDIT);
    if ids.is_empty() {
        return Err(AppError::bad_input("i", "no item ids").into());
    }
    // Reduce the tags to at most one read and one starred change.
    let (mut unread, mut starred) = (None, None);
    for (key, add) in [("a", true), ("r", false)] {
        for tag in params.all(key).into_iter().filter_map(parse_stream) {
            match tag {
                Stream::Read => unread = Some(!add),
                Stream::KeptUnread => unread = Some(add),
                Stream::Starred => starred = Some(add),
                _ => {}
            }
        }
    }
    for chunk in ids.chunks(crate::feeds::service::MAX_IDS) {
        if let Some(unread) = unread {
            feeds.set_unread(user, chunk, unread).await?;
        }
        if let Some(starred) = starred {
            feeds.set_starred(user, chunk, starred).await?;
        }
    }
    ok()
}

async fn mark_all_as_read(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let stream = params
        .one("s")
        .and_then(parse_stream)
        .ok_or_else(|| AppError::bad_input("s", "unknown stream"))?;
    // `ts` is in microseconds (some clients send seconds).
    let before = params.time("ts");
    match stream {
        Stream::ReadingList => feeds.mark_all_read(user, ReadScope::All, before).await?,
        Stream::Feed(id) => {
            feeds
                .mark_all_read(user, ReadScope::Feed(id), before)
                .await?
        }
        Stream::Label(name) => match group_named(&feeds, user, &name).await? {
            Some(group) => {
                feeds
                    .mark_all_read(user, ReadScope::Group(group), before)
                    .await?
            }
            None => 0,
        },
        Stream::Starred | Stream::Read | Stream::KeptUnread => 0,
    };
    ok()
}

/// The user's group names by id.
async fn group_names(feeds: &FeedsService, user: Uuid) -> AppResult<HashMap<i64, String>> {
    Ok(feeds
        .groups(user)
        .await?
        .into_iter()
        .map(|group| (group.id, group.name))
        .collect())
}

async fn group_named(feeds: &FeedsService, user: Uuid, name: &str) -> AppResult<Option<i64>> {
    Ok(feeds
        .groups(user)
        .await?
        .into_iter()
        .find(|group| group.name == name)
        .map(|group| group.id))
}

/// The group called `label` (`user/-/label/<name>` or a bare name), created when missing.
async fn group_for_label(feeds: &FeedsService, user: Uuid, label: &str) -> AppResult<i64> {
    let name = match parse_stream(label) {
        Some(Stream::Label(name)) => name,
        _ => label.to_owned(),
    };
    match group_named(feeds, user, &name).await? {
        Some(id) => Ok(id),
        None => Ok(feeds.create_group(user, &name).await?.id),
    }
}

/// Every `s=feed/…` of a request: `feed/<url>` when subscribing,
/// `feed/<id>` otherwise. Apps send several to unsubscribe or move many
/// feeds at once.
fn feed_refs(params: &Params) -> AppResult<Vec<&str>> {
    let refs: Vec<&str> = params
        .all("s")
        .into_iter()
        .filter_map(|s| s.strip_prefix("feed/"))
        .collect();
    if refs.is_empty() {
        return Err(AppError::bad_input("s", "give s=feed/…"));
    }
    Ok(refs)
}

fn feed_id(target: &str) -> AppResult<i64> {
    target
        .parse()
        .map_err(|_| AppError::bad_input("s", "not a feed id"))
}

/// `subscription/edit`: `ac=subscribe|unsubscribe|edit` for every `s`, the
/// n-th `t` naming the n-th feed; `a=<label>` moves into a folder (created
/// when missing), `r=<label>` alone back to the default one. Subscribing to
/// a feed already followed is no error (the peers answer OK too).
async fn subscription_edit(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let targets = feed_refs(&params)?;
    let titles = params.all("t");
    let title = |n: usize| titles.get(n).map(|t| (*t).to_owned());
    let group_id = match params.one("a") {
        Some(label) => Some(group_for_label(&feeds, user, label).await?),
        None if params.one("r").is_some() => Some(feeds.default_group(user).await?.id),
        None => None,
    };
    match params.one("ac").unwrap_or("edit") {
        "subscribe" => {
            for (n, target) in targets.into_iter().enumerate() {
                let new = NewFeed {
                    link: target.to_owned(),
                    name: title(n),
                    group_id,
                    ..Default::default()
                };
                match feeds.create_feeds(user, vec![new]).await {
                    Ok(_) | Err(AppError::Conflict(_)) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        "unsubscribe" => {
            for target in targets {
                feeds.delete_feed(user, feed_id(target)?).await?;
            }
        }
        _ => {
            for (n, target) in targets.into_iter().enumerate() {
                let patch = FeedPatch {
                    name: title(n),
                    group_id,
                    ..Default::default()
                };
                feeds.update_feed(user, feed_id(target)?, patch).await?;
            }
        }
    }
    ok()
}

/// `subscription/quickadd`: a feed URL, or a site page whose linked feed
/// is found (as `discoverFeeds` finds it) and followed. A feed already
/// followed answers `numResults: 0`, as the peers do.
async fn quickadd(
    State(state): State<ReaderState>,
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let query = params
        .one("quickadd")
        .map(|link| link.strip_prefix("feed/").unwrap_or(link).trim().to_owned())
        .ok_or_else(|| AppError::bad_input("quickadd", "give quickadd=<feed URL>"))?;
    let found = match state.discoverer.discover(&query).await {
        Ok(found) => found,
        // Unreachable or not a page: in the protocol's words, not a 400.
        Err(AppError::BadUserInput { message, .. }) => {
            return Ok(
                Json(json!({ "numResults": 0, "query": query, "error": message })).into_response(),
            );
        }
        Err(error) => return Err(error.into()),
    };
    let link = match found.first() {
        // The URL itself is a feed: follow it as given, not where it redirected.
        Some(feed) if feed.kind == "feed" => query.clone(),
        Some(feed) => feed.url.clone(),
        None => {
            return Ok(Json(json!({
                "numResults": 0,
                "query": query,
                "error": "no feed found there",
            }))
            .into_response());
        }
    };
    let new = NewFeed {
        link,
        ..Default::default()
    };
    let created = match feeds.create_feeds(user, vec![new]).await {
        Ok(created) => created,
        Err(AppError::Conflict(message)) => {
            return Ok(
                Json(json!({ "numResults": 0, "query": query, "error": message })).into_response(),
            );
        }
        Err(error) => return Err(error.into()),
    };
    let (id, name) = created
        .first()
        .map(|feed| (feed.id, feed.name.clone()))
        .unwrap_or_default();
    Ok(Json(json!({
        "numResults": 1,
        "query": query,
        "streamId": format!("feed/{id}"),
        "streamName": name,
    }))
    .into_response())
}

/// `rename-tag`: `s=user/-/label/<old>`, `dest=user/-/label/<new>` renames a group.
async fn rename_tag(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let (Some(Stream::Label(old)), Some(Stream::Label(new))) = (
        params.one("s").and_then(parse_stream),
        params.one("dest").and_then(parse_stream),
    ) else {
        return Err(AppError::bad_input("s", "give s and dest as user/-/label/<name>").into());
    };
    if let Some(group) = group_named(&feeds, user, &old).await? {
        feeds.rename_group(user, group, &new).await?;
    }
    ok()
}

/// `disable-tag`: each `s=user/-/label/<name>` deletes a group; its feeds
/// move to the default group.
async fn disable_tag(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let labels: Vec<String> = params
        .all("s")
        .into_iter()
        .filter_map(|s| match parse_stream(s) {
            Some(Stream::Label(name)) => Some(name),
            _ => None,
        })
        .collect();
    if labels.is_empty() {
        return Err(AppError::bad_input("s", "give s=user/-/label/<name>").into());
    }
    for name in labels {
        if let Some(group) = group_named(&feeds, user, &name).await? {
            feeds.delete_group(user, group).await?;
        }
    }
    ok()
}

/// `subscription/export`: the subscriptions as OPML.
async fn subscription_export(ReaderRequest { user, feeds, .. }: ReaderRequest) -> Reply {
    let opml = feeds.export_opml(user).await?;
    Ok(([(header::CONTENT_TYPE, "text/x-opml; charset=utf-8")], opml).into_response())
}

/// `subscription/import`: an OPML document as the request body (FreshRSS
/// reads it so); feeds already followed are skipped, as in `importOpml`.
async fn subscription_import(
    ReaderRequest {
        user,
        feeds,
        params,
        ..
    }: ReaderRequest,
) -> Reply {
    let text = std::str::from_utf8(params.raw_body())
        .map_err(|_| AppError::bad_input("opml", "an OPML document in UTF-8"))?;
    let listed = crate::feeds::opml::parse(text)
        .map_err(|error| AppError::bad_input("opml", error.to_string()))?;
    feeds.import_feeds(user, listed).await?;
    ok()
}

async fn preference_list(_: ReaderRequest) -> Json<Value> {
    Json(json!({ "prefs": [] }))
}

async fn stream_preference_list(_: ReaderRequest) -> Json<Value> {
    Json(json!({ "streamprefs": {} }))
}

async fn friend_list(_: ReaderRequest) -> Json<Value> {
    Json(json!({ "friends": [] }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_client_asks_for_is_capped() {
        let params = Params::new(Some("n=1000000000"), b"");
        assert_eq!(page_size(&params, MAX_IDS), MAX_IDS);
        assert_eq!(page_size(&params, MAX_CONTENTS), MAX_CONTENTS);
        assert_eq!(page_size(&Params::new(Some("n=-5"), b""), MAX_IDS), 1);
        assert_eq!(page_size(&Params::new(None, b""), MAX_IDS), 20);
        let many: Vec<String> = (1..=1_500).map(|id| format!("i={id}")).collect();
        let params = Params::new(None, many.join("&").as_bytes());
        assert_eq!(item_ids_of(&params, MAX_CONTENTS as usize).len(), 1_000);
    }

    #[test]
    fn streams_parse_in_every_spelling() {
        assert_eq!(parse_stream(READING_LIST), Some(Stream::ReadingList));
        assert_eq!(
            parse_stream("user/1005921515/state/com.google/starred"),
            Some(Stream::Starred)
        );
        assert_eq!(parse_stream(READ), Some(Stream::Read));
        assert_eq!(parse_stream("feed/42"), Some(Stream::Feed(42)));
        assert_eq!(
            parse_stream("user/-/label/Tech News"),
            Some(Stream::Label("Tech News".into()))
        );
        assert_eq!(parse_stream("feed/https://example.com/rss"), None);
        assert_eq!(parse_stream("user/-/label/"), None);
        assert_eq!(parse_stream("pop/-/x"), None);
    }

    #[test]
    fn item_ids_parse_in_every_form_the_apps_send() {
        assert_eq!(
            long_item_id(42),
            "tag:google.com,2005:reader/item/000000000000002a"
        );
        assert_eq!(parse_item_id(&long_item_id(42)), Some(42));
        // NetNewsWire: the long form without padding.
        assert_eq!(
            parse_item_id("tag:google.com,2005:reader/item/2f2"),
            Some(754)
        );
        // Reeder: bare 16-digit hex (0x48c = 1164), never decimal.
        assert_eq!(parse_item_id("000000000000048c"), Some(1164));
        assert_eq!(parse_item_id("0000000000000028"), Some(40));
        assert_eq!(parse_item_id("000000000000000a"), Some(10));
        // FreshRSS: a leading zero or a hex letter means hex.
        assert_eq!(parse_item_id("028"), Some(40));
        assert_eq!(parse_item_id("2f2"), Some(754));
        // The decimal short form.
        assert_eq!(parse_item_id("42"), Some(42));
        assert_eq!(parse_item_id("1164"), Some(1164));
        for bad in [
            "tag:google.com,2005:reader/item/zz",
            "tag:google.com,2005:reader/item/",
            "tag:google.com,2005:reader/item/00000000000000001",
            "ffffffffffffffff",
            "-3",
            "0",
            "0000000000000000",
            "",
            "x",
        ] {
            assert_eq!(parse_item_id(bad), None, "{bad:?}");
        }
    }
}
