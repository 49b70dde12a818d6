//! A first and an incremental sync as each reader app performs them
//! (issue 19), request for request from the apps' sources: NetNewsWire's
//! `ReaderAPICaller.swift`, Read You's `GoogleReaderAPI.kt`, newsboat's
//! `freshrssapi.cpp`, Reeder's Google Reader account (its bare 16-hex ids)
//! and a Fever app as the Fever spec lays out a sync. Each app logs in,
//! fetches its lists, pages through every item (each once, none missed),
//! marks some, then — after new items arrive at the publisher and the web
//! client marks one read — syncs again from its last sync; what the app
//! then holds must be what GraphQL shows. On SQLite and PostgreSQL.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::{
    feeds::{GReader, Reader, app, fever},
    feedserver::{FeedServer, Route},
    helpers::{Backend, TestApp},
    on_both_backends,
    reader_apps::{
        ADA_FEVER_KEY, READING_LIST, STARRED, ada, feed_of, fever_mark, graphql_ids, id_set,
        sync_point,
    },
};

on_both_backends!(
    netnewswire_fetches_unread_since_its_last_fetch_and_reconciles_states,
    reeder_pages_ids_by_continuation_and_marks_with_bare_hex_ids,
    read_you_syncs_id_lists_with_its_form_and_action_token,
    newsboat_reads_each_feed_stream_and_marks_with_a_fresh_token,
    a_fever_app_pages_by_since_id_and_keeps_the_id_lists,
);

const READ: &str = "user/-/state/com.google/read";
const ITEM_PREFIX: &str = "tag:google.com,2005:reader/item/";
const TECH_ITEMS: usize = 30;
const NEWS_ITEMS: usize = 25;
const ARRIVING: usize = 3;

/// What an app holds after a sync: the items it has and which of them
/// are unread and starred.
#[derive(Debug, Default)]
struct AppState {
    items: HashSet<i64>,
    unread: HashSet<i64>,
    starred: HashSet<i64>,
}

impl AppState {
    /// The app shows what the web client (GraphQL) shows.
    async fn assert_agrees_with(&self, web: &Reader<'_>) {
        assert_eq!(self.items, graphql_ids(web, json!({})).await, "items");
        assert_eq!(
            self.unread,
            graphql_ids(web, json!({ "unread": true })).await,
            "unread"
        );
        assert_eq!(
            self.starred,
            graphql_ids(web, json!({ "starred": true })).await,
            "starred"
        );
    }

    /// The lowest ids, in order, that are unread in the app: what a test
    /// marks.
    fn unread_sorted(&self) -> Vec<i64> {
        let mut ids: Vec<i64> = self.unread.iter().copied().collect();
        ids.sort_unstable();
        ids
    }
}

/// What every app syncs: "Tech" (in the folder Tech) and "News" (in
/// Default), served by the loopback publisher and pulled once.
struct Library<'a> {
    web: Reader<'a>,
    server: FeedServer,
    tech: String,
    newest: DateTime<Utc>,
}

impl<'a> Library<'a> {
    async fn new(app: &'a TestApp) -> Self {
        let (web, _) = ada(app).await;
        let server = FeedServer::start().await;
        let newest = Utc::now();
        let group = web
            .data("mutation { createGroup(name: \"Tech\") { id } }", json!({}))
            .await["createGroup"]["id"]
            .clone();
        server.set(
            "/tech.xml",
            Route::rss(feed_of("Tech", "tech", TECH_ITEMS, newest)),
        );
        let tech = web
            .data(
                "mutation($i: CreateFeedInput!) { createFeed(input: $i) { id } }",
                json!({ "i": { "link": server.url("/tech.xml"), "groupId": group } }),
            )
            .await["createFeed"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        assert_eq!(web.refresh(&tech).await["status"], "SUCCEEDED");
        web.pull_new(
            &server,
            "/news.xml",
            Route::rss(feed_of("News", "news", NEWS_ITEMS, newest)),
        )
        .await;
        Library {
            web,
            server,
            tech,
            newest,
        }
    }

    /// New items arrive at Tech and are pulled; returns their ids.
    async fn new_items_arrive(&self) -> HashSet<i64> {
        let before = graphql_ids(&self.web, json!({})).await;
        self.server.set(
            "/tech.xml",
            Route::rss(feed_of("Tech", "tech", TECH_ITEMS + ARRIVING, self.newest)),
        );
        assert_eq!(self.web.refresh(&self.tech).await["status"], "SUCCEEDED");
        let after = graphql_ids(&self.web, json!({})).await;
        assert!(after.is_superset(&before));
        let arrived: HashSet<i64> = after.difference(&before).copied().collect();
        assert_eq!(arrived.len(), ARRIVING);
        arrived
    }

    /// The web client marks `read` read and, when given, stars `star`.
    async fn web_changes(&self, read: i64, star: Option<i64>) {
        let ids = |id: i64| json!({ "ids": [id.to_string()] });
        let marked = self
            .web
            .data(
                "mutation($ids: [ID!]!) { markItemsRead(ids: $ids) }",
                ids(read),
            )
            .await;
        assert_eq!(marked["markItemsRead"], 1);
        if let Some(star) = star {
            let starred = self
                .web
                .data("mutation($ids: [ID!]!) { starItems(ids: $ids) }", ids(star))
                .await;
            assert_eq!(starred["starItems"], 1);
        }
    }
}

/// The numeric id of a long-form item id (`tag:google.com,2005:reader/item/<hex>`).
fn item_number(long: &Value) -> i64 {
    let long = long
        .as_str()
        .unwrap_or_else(|| panic!("an item id, got {long}"));
    let hex = long
        .strip_prefix(ITEM_PREFIX)
        .unwrap_or_else(|| panic!("a long-form id, got {long}"));
    i64::from_str_radix(hex, 16).unwrap()
}

/// The ids of a contents answer's items, in order.
fn contents_ids(body: &Value) -> Vec<i64> {
    body["items"]
        .as_array()
        .unwrap_or_else(|| panic!("items in {body}"))
        .iter()
        .map(|item| item_number(&item["id"]))
        .collect()
}

/// The ids of a `stream/items/ids` answer (decimal strings), checked to
/// come once each.
fn ref_ids(body: &Value) -> Vec<i64> {
    body["itemRefs"]
        .as_array()
        .unwrap_or_else(|| panic!("itemRefs in {body}"))
        .iter()
        .map(|entry| entry["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// Each id once: no duplicates across pages.
fn once_each(ids: &[i64]) -> HashSet<i64> {
    let set: HashSet<i64> = ids.iter().copied().collect();
    assert_eq!(set.len(), ids.len(), "an id came twice: {ids:?}");
    set
}

/// A POST whose body is sent exactly as an app builds it (some apps
/// concatenate the form by hand), with the `GoogleLogin` header.
async fn post_as_built(gr: &GReader<'_>, path: &str, body: String) -> reqwest::Response {
    let response = gr
        .app
        .client
        .post(gr.app.url(&format!("/reader/api/0/{path}")))
        .header("authorization", format!("GoogleLogin auth={}", gr.auth))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{path}");
    response
}

/// The edit token (`/token`), as every Google Reader app fetches it.
async fn edit_token(gr: &GReader<'_>) -> String {
    let (status, token) = gr.get("token").await;
    assert_eq!(status, 200);
    token.trim().to_owned()
}

/// The subscriptions and folders every app lists first.
async fn lists(gr: &GReader<'_>) {
    let subscriptions = gr.json("subscription/list?output=json").await;
    assert_eq!(
        subscriptions["subscriptions"].as_array().unwrap().len(),
        2,
        "{subscriptions}"
    );
    let tags = gr.json("tag/list?output=json").await;
    assert!(
        tags["tags"]
            .as_array()
            .unwrap()
            .iter()
            .any(|tag| tag["id"] == "user/-/label/Tech"),
        "{tags}"
    );
}

/// Every id of a NetNewsWire `stream/items/ids` query (`n=1000`, then
/// `c=` the continuation until there is none), each once, and the `Date`
/// of the first answer (NetNewsWire's next `lastArticleFetchStartTime`).
async fn netnewswire_ids(gr: &GReader<'_>, query: &str) -> (HashSet<i64>, i64) {
    let first = format!("stream/items/ids?n=1000&output=json&{query}");
    let mut url = first.clone();
    let mut ids = Vec::new();
    let mut date = None;
    for _ in 0..100 {
        let response = gr
            .app
            .client
            .get(gr.app.url(&format!("/reader/api/0/{url}")))
            .header("authorization", format!("GoogleLogin auth={}", gr.auth))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{url}");
        date = date.or_else(|| {
            let header = response.headers().get("date")?.to_str().ok()?;
            Some(DateTime::parse_from_rfc2822(header).ok()?.timestamp())
        });
        let body: Value = response.json().await.unwrap();
        ids.extend(ref_ids(&body));
        match body["continuation"].as_str() {
            Some(c) => url = format!("{first}&c={}", urlencoding(c)),
            None => return (once_each(&ids), date.expect("a Date header")),
        }
    }
    panic!("no end to the continuation");
}

/// NetNewsWire (`ReaderAPICaller.swift`, `ReaderAPIAccountDelegate`): the
/// ids of every item since its last article fetch (`ot` in whole seconds;
/// three months back the first time; the `Date` of that answer is the next
/// `ot`), the contents of those it lacks by a hand-built POST
/// `T=…&output=json&i=tag:google.com,2005:reader/item/<unpadded hex>…`
/// (100 a request), then the whole unread and starred id lists set the
/// states. Returns the ids it fetched and its next `ot`.
async fn netnewswire_sync(
    gr: &GReader<'_>,
    app: &mut AppState,
    last_fetch: Option<i64>,
) -> (HashSet<i64>, i64) {
    lists(gr).await;
    let since = last_fetch.unwrap_or_else(|| (Utc::now() - Duration::days(90)).timestamp());
    let (since_last, fetch_time) =
        netnewswire_ids(gr, &format!("ot={since}&s={READING_LIST}")).await;
    let missing: Vec<i64> = since_last
        .iter()
        .filter(|id| !app.items.contains(id))
        .copied()
        .collect();
    let token = edit_token(gr).await;
    let mut served = Vec::new();
    for chunk in missing.chunks(100) {
        let ids: Vec<String> = chunk
            .iter()
            .map(|id| format!("i={ITEM_PREFIX}{id:x}"))
            .collect();
        let contents: Value = post_as_built(
            gr,
            "stream/items/contents",
            format!("T={token}&output=json&{}", ids.join("&")),
        )
        .await
        .json()
        .await
        .unwrap();
        served.extend(contents_ids(&contents));
    }
    let fetched = once_each(&served);
    assert_eq!(fetched.len(), missing.len(), "contents of every id asked");
    app.items.extend(&fetched);
    app.unread = netnewswire_ids(gr, &format!("s={READING_LIST}&xt={READ}"))
        .await
        .0;
    app.starred = netnewswire_ids(gr, &format!("s={STARRED}")).await.0;
    (fetched, fetch_time)
}

/// NetNewsWire's `edit-tag`: `T=…&i=tag:google.com,2005:reader/item/<%.16llx>…&a|r=<state>`.
async fn netnewswire_mark(gr: &GReader<'_>, ids: &[i64], add: bool, state: &str) {
    let token = edit_token(gr).await;
    let ids: Vec<String> = ids
        .iter()
        .map(|id| format!("i={ITEM_PREFIX}{id:016x}"))
        .collect();
    let action = if add { "a" } else { "r" };
    let response = post_as_built(
        gr,
        "edit-tag",
        format!("T={token}&{}&{action}={state}", ids.join("&")),
    )
    .await;
    assert_eq!(response.text().await.unwrap(), "OK");
}

async fn netnewswire_fetches_unread_since_its_last_fetch_and_reconciles_states(backend: Backend) {
    let app = app(backend).await;
    let library = Library::new(&app).await;
    let gr = GReader::login(&app, "ada", "reader-pass-1").await.unwrap();
    // The first fetch starts after everything so far arrived (the clock
    // has passed a whole second), so its `Date` is a clean boundary.
    sync_point().await;
    let mut state = AppState::default();
    let (first, last_fetch) = netnewswire_sync(&gr, &mut state, None).await;
    assert_eq!(first.len(), TECH_ITEMS + NEWS_ITEMS);
    state.assert_agrees_with(&library.web).await;

    let unread = state.unread_sorted();
    netnewswire_mark(&gr, &unread[..2], true, READ).await;
    netnewswire_mark(&gr, &unread[2..4], true, STARRED).await;
    netnewswire_mark(&gr, &unread[3..4], false, STARRED).await;

    let arrived = library.new_items_arrive().await;
    library.web_changes(unread[10], Some(unread[11])).await;

    let (incremental, _) = netnewswire_sync(&gr, &mut state, Some(last_fetch)).await;
    assert_eq!(incremental, arrived, "exactly what arrived since");
    assert!(!state.unread.contains(&unread[10]), "read on the web");
    assert_eq!(state.starred, HashSet::from([unread[2], unread[11]]));
    state.assert_agrees_with(&library.web).await;
}

/// Every id of a stream, page by page as Reeder asks for them (`n=20`,
/// then `c=` the continuation until there is none).
async fn paged_ids(gr: &GReader<'_>, query: &str) -> HashSet<i64> {
    let mut ids = Vec::new();
    let mut continuation: Option<String> = None;
    for _ in 0..100 {
        let c = continuation
            .as_deref()
            .map(|c| format!("&c={}", urlencoding(c)))
            .unwrap_or_default();
        let body = gr
            .json(&format!("stream/items/ids?output=json&n=20&{query}{c}"))
            .await;
        ids.extend(ref_ids(&body));
        continuation = body["continuation"].as_str().map(str::to_owned);
        if continuation.is_none() {
            return once_each(&ids);
        }
    }
    panic!("no end to the continuation");
}

fn urlencoding(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Contents of `ids` by bare 16-hex ids (`i=000000000000048c`), 20 a
/// request; returns the ids served, each once.
async fn reeder_contents(gr: &GReader<'_>, ids: &HashSet<i64>) -> HashSet<i64> {
    let ids: Vec<i64> = ids.iter().copied().collect();
    let mut served = Vec::new();
    for chunk in ids.chunks(20) {
        let hex: Vec<String> = chunk.iter().map(|id| format!("{id:016x}")).collect();
        let form: Vec<(&str, &str)> = hex.iter().map(|id| ("i", id.as_str())).collect();
        let (status, body) = gr.post("stream/items/contents", &form).await;
        assert_eq!(status, 200, "{body}");
        let body: Value = serde_json::from_str(&body).unwrap();
        served.extend(contents_ids(&body));
    }
    once_each(&served)
}

/// Reeder's Google Reader sync: the lists, the unread count, the unread
/// and starred ids paged by continuation (since its last sync when it has
/// one), contents by bare 16-hex ids.
async fn reeder_sync(gr: &GReader<'_>, app: &mut AppState, since: Option<i64>) -> HashSet<i64> {
    lists(gr).await;
    let counts = gr.json("unread-count?output=json").await;
    let ot = since.map(|at| format!("&ot={at}")).unwrap_or_default();
    let fresh = paged_ids(gr, &format!("s={READING_LIST}&xt={READ}{ot}")).await;
    let contents = reeder_contents(gr, &fresh).await;
    assert_eq!(contents, fresh);
    app.items.extend(&fresh);
    app.unread = paged_ids(gr, &format!("s={READING_LIST}&xt={READ}")).await;
    app.starred = paged_ids(gr, &format!("s={STARRED}")).await;
    let total = counts["unreadcounts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["id"] == READING_LIST)
        .map_or(0, |entry| entry["count"].as_u64().unwrap());
    assert_eq!(total as usize, app.unread.len(), "{counts}");
    fresh
}

/// Reeder's `edit-tag`: bare 16-hex ids, the edit token in the form.
async fn reeder_mark(gr: &GReader<'_>, ids: &[i64], action: &str, state: &str) {
    let token = edit_token(gr).await;
    let hex: Vec<String> = ids.iter().map(|id| format!("{id:016x}")).collect();
    let mut form: Vec<(&str, &str)> = hex.iter().map(|id| ("i", id.as_str())).collect();
    form.extend([(action, state), ("T", token.as_str())]);
    assert_eq!(gr.post("edit-tag", &form).await, (200, "OK".to_owned()));
}

async fn reeder_pages_ids_by_continuation_and_marks_with_bare_hex_ids(backend: Backend) {
    let app = app(backend).await;
    let library = Library::new(&app).await;
    let gr = GReader::login(&app, "ada", "reader-pass-1").await.unwrap();
    let mut state = AppState::default();
    let synced = sync_point().await;
    let first = reeder_sync(&gr, &mut state, None).await;
    assert_eq!(first.len(), TECH_ITEMS + NEWS_ITEMS);
    state.assert_agrees_with(&library.web).await;

    let unread = state.unread_sorted();
    reeder_mark(&gr, &unread[..3], "a", READ).await;
    reeder_mark(&gr, &unread[3..5], "a", STARRED).await;
    reeder_mark(&gr, &unread[4..5], "r", STARRED).await;
    reeder_mark(&gr, &unread[..1], "r", READ).await;

    let arrived = library.new_items_arrive().await;
    library.web_changes(unread[12], Some(unread[13])).await;

    let incremental = reeder_sync(&gr, &mut state, Some(synced)).await;
    assert_eq!(incremental, arrived, "exactly what arrived since");
    assert!(state.unread.contains(&unread[0]), "made unread again");
    assert!(!state.unread.contains(&unread[12]), "read on the web");
    assert_eq!(state.starred, HashSet::from([unread[3], unread[13]]));
    state.assert_agrees_with(&library.web).await;
}

/// Read You's Google Reader client (`GoogleReaderAPI.kt`): `ClientLogin`
/// with `output=json` (it reads `Auth` from JSON first), the action token
/// from `/token` sent as `T` in every POST form, `?output=json` on every
/// URL, `n=10000`.
struct ReadYou<'a> {
    gr: GReader<'a>,
    action_token: String,
}

impl<'a> ReadYou<'a> {
    async fn login(app: &'a TestApp) -> Self {
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([
                ("output", "json"),
                ("Email", "ada"),
                ("Passwd", "reader-pass-1"),
                ("client", "ReadYou/0.13"),
                ("accountType", "HOSTED_OR_GOOGLE"),
                ("service", "reader"),
            ])
            .finish();
        let response = app
            .client
            .post(app.url("/accounts/ClientLogin"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body: Value = response.json().await.unwrap();
        let gr = GReader {
            app,
            auth: body["Auth"].as_str().unwrap().to_owned(),
        };
        let action_token = edit_token(&gr).await;
        ReadYou { gr, action_token }
    }

    async fn ids(&self, params: &str) -> HashSet<i64> {
        let body = self
            .gr
            .json(&format!("stream/items/ids?output=json{params}&n=10000"))
            .await;
        assert!(body.get("continuation").is_none(), "{body}");
        once_each(&ref_ids(&body))
    }

    async fn post(&self, path: &str, form: &[(&str, String)]) -> reqwest::Response {
        let mut body = url::form_urlencoded::Serializer::new(String::new());
        for (key, value) in form {
            body.append_pair(key, value);
        }
        body.append_pair("T", &self.action_token);
        post_as_built(&self.gr, &format!("{path}?output=json"), body.finish()).await
    }

    /// A sync: the user and subscriptions, the unread and starred id
    /// lists, the read ids since `since`, then the contents of the ids it
    /// does not hold yet by `%016x` ids; returns those ids.
    async fn sync(&self, app: &mut AppState, since: i64) -> HashSet<i64> {
        self.gr.json("user-info?output=json").await;
        lists(&self.gr).await;
        let unread = self.ids(&format!("&s={READING_LIST}&xt={READ}")).await;
        let starred = self.ids(&format!("&s={STARRED}")).await;
        let read = self.ids(&format!("&s={READ}&ot={since}")).await;
        let wanted: HashSet<i64> = unread
            .iter()
            .chain(&starred)
            .chain(&read)
            .filter(|id| !app.items.contains(id))
            .copied()
            .collect();
        let form: Vec<(&str, String)> = wanted
            .iter()
            .map(|id| ("i", format!("{id:016x}")))
            .collect();
        let contents: Value = self
            .post("stream/items/contents", &form)
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(once_each(&contents_ids(&contents)), wanted);
        app.items.extend(&wanted);
        app.unread = unread;
        app.starred = starred;
        wanted
    }

    /// `edit-tag` with long-form ids (`ofItemIdToStreamId`).
    async fn edit_tag(&self, ids: &[i64], mark: Option<&str>, unmark: Option<&str>) {
        let mut form: Vec<(&str, String)> = ids
            .iter()
            .map(|id| ("i", format!("{ITEM_PREFIX}{id:016x}")))
            .collect();
        form.extend(mark.map(|tag| ("a", tag.to_owned())));
        form.extend(unmark.map(|tag| ("r", tag.to_owned())));
        let response = self.post("edit-tag", &form).await;
        assert_eq!(response.text().await.unwrap(), "OK");
    }
}

async fn read_you_syncs_id_lists_with_its_form_and_action_token(backend: Backend) {
    let app = app(backend).await;
    let library = Library::new(&app).await;
    let client = ReadYou::login(&app).await;
    let mut state = AppState::default();
    let synced = sync_point().await;
    let month_ago = (Utc::now() - Duration::days(30)).timestamp();
    let first = client.sync(&mut state, month_ago).await;
    assert_eq!(first.len(), TECH_ITEMS + NEWS_ITEMS);
    state.assert_agrees_with(&library.web).await;

    let unread = state.unread_sorted();
    client.edit_tag(&unread[..2], Some(READ), None).await;
    client.edit_tag(&unread[2..3], Some(STARRED), None).await;
    client.edit_tag(&unread[1..2], None, Some(READ)).await;

    let arrived = library.new_items_arrive().await;
    library.web_changes(unread[7], Some(unread[8])).await;

    let incremental = client.sync(&mut state, synced).await;
    assert_eq!(incremental, arrived, "exactly what arrived since");
    assert!(state.unread.contains(&unread[1]), "made unread again");
    assert!(!state.unread.contains(&unread[0]));
    assert!(!state.unread.contains(&unread[7]), "read on the web");
    assert_eq!(state.starred, HashSet::from([unread[2], unread[8]]));
    state.assert_agrees_with(&library.web).await;
}

/// newsboat in FreshRSS mode (`freshrssapi.cpp`).
struct Newsboat<'a> {
    gr: GReader<'a>,
}

impl<'a> Newsboat<'a> {
    /// `ClientLogin` with newsboat's hand-built form; the `Auth=` line.
    async fn login(app: &'a TestApp) -> Self {
        let response = app
            .client
            .post(app.url("/accounts/ClientLogin"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                "service=reader&Email=ada&Passwd=reader-pass-1&source=newsboat%2F2.36\
                 &accountType=HOSTED_OR_GOOGLE&continue=http://www.google.com/",
            )
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = response.text().await.unwrap();
        let auth = body
            .lines()
            .find_map(|line| line.strip_prefix("Auth="))
            .expect("an Auth= line")
            .to_owned();
        Newsboat {
            gr: GReader { app, auth },
        }
    }

    /// A reload: `subscription/list`, then each feed's
    /// `stream/contents/<escaped id>?n=<freshrss-min-items>`; an item is
    /// read when `categories` has the read state. Returns the ids first
    /// seen.
    async fn reload(&self, app: &mut AppState) -> HashSet<i64> {
        let subscriptions = self.gr.json("subscription/list?output=json").await;
        let mut seen = Vec::new();
        for subscription in subscriptions["subscriptions"].as_array().unwrap() {
            let id = subscription["id"].as_str().unwrap();
            let escaped = urlencoding(id);
            let stream = self
                .gr
                .json(&format!("stream/contents/{escaped}?n=100"))
                .await;
            for entry in stream["items"].as_array().unwrap() {
                let item = item_number(&entry["id"]);
                seen.push(item);
                let read = entry["categories"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|category| category == READ);
                if read {
                    app.unread.remove(&item);
                } else {
                    app.unread.insert(item);
                }
            }
        }
        let seen = once_each(&seen);
        let new: HashSet<i64> = seen.difference(&app.items).copied().collect();
        app.items.extend(&seen);
        new
    }

    /// `mark_article_read_with_token` / `star_article`: a fresh token per
    /// request, the form concatenated by hand, the long-form id as guid.
    async fn edit(&self, item: i64, change: &str) {
        let token = edit_token(&self.gr).await;
        let body = format!("i={ITEM_PREFIX}{item:016x}&{change}&ac=edit&T={token}");
        let response = post_as_built(&self.gr, "edit-tag", body).await;
        assert_eq!(response.text().await.unwrap(), "OK");
    }
}

async fn newsboat_reads_each_feed_stream_and_marks_with_a_fresh_token(backend: Backend) {
    let app = app(backend).await;
    let library = Library::new(&app).await;
    let client = Newsboat::login(&app).await;
    let mut state = AppState::default();
    let first = client.reload(&mut state).await;
    assert_eq!(first.len(), TECH_ITEMS + NEWS_ITEMS);
    state.assert_agrees_with(&library.web).await;

    let unread = state.unread_sorted();
    let read = format!("a={READ}&r=user/-/state/com.google/kept-unread");
    let unread_again = format!(
        "r={READ}&a=user/-/state/com.google/kept-unread\
         &a=user/-/state/com.google/tracking-kept-unread"
    );
    client.edit(unread[0], &read).await;
    client.edit(unread[1], &read).await;
    client.edit(unread[1], &unread_again).await;
    // newsboat keeps stars itself (it reads no starred state back), so its
    // stars are what GraphQL must show.
    client.edit(unread[2], &format!("a={STARRED}")).await;
    client.edit(unread[3], &format!("a={STARRED}")).await;
    client.edit(unread[3], &format!("r={STARRED}")).await;
    state.unread.remove(&unread[0]);
    state.starred.insert(unread[2]);

    let arrived = library.new_items_arrive().await;
    library.web_changes(unread[5], None).await;

    let reloaded = client.reload(&mut state).await;
    assert_eq!(reloaded, arrived, "exactly what arrived since");
    assert!(state.unread.contains(&unread[1]), "made unread again");
    assert!(!state.unread.contains(&unread[5]), "read on the web");
    state.assert_agrees_with(&library.web).await;
}

/// A Fever app's sync, as the Fever spec lays it out (and Reeder and
/// Unread perform it): `groups`, `feeds`, the unread and saved id lists,
/// then `items&since_id=` from the highest id it holds until a page comes
/// back empty. Returns the ids it got.
async fn fever_sync(app: &TestApp, state: &mut AppState) -> HashSet<i64> {
    let key = [("api_key", ADA_FEVER_KEY)];
    let hello = fever(app, "", &key).await;
    assert_eq!(hello["auth"], 1);
    assert_eq!(hello["api_version"], 3);
    let groups = fever(app, "groups", &key).await;
    assert!(
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .any(|group| group["title"] == "Tech"),
        "{groups}"
    );
    let feeds = fever(app, "feeds", &key).await;
    assert_eq!(feeds["feeds"].as_array().unwrap().len(), 2, "{feeds}");
    let mut got = Vec::new();
    let mut since = state.items.iter().max().copied().unwrap_or(0);
    for _ in 0..100 {
        let page = fever(app, &format!("items&since_id={since}"), &key).await;
        let ids: Vec<i64> = page["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| item["id"].as_i64().unwrap())
            .collect();
        let Some(highest) = ids.iter().max() else {
            let got = once_each(&got);
            state.items.extend(&got);
            state.unread = id_set(&fever(app, "unread_item_ids", &key).await["unread_item_ids"]);
            state.starred = id_set(&fever(app, "saved_item_ids", &key).await["saved_item_ids"]);
            assert!(state.unread.is_subset(&state.items));
            return got;
        };
        assert!(ids.iter().all(|id| *id > since), "after since_id={since}");
        since = *highest;
        got.extend(ids);
    }
    panic!("items&since_id never came back empty");
}

async fn a_fever_app_pages_by_since_id_and_keeps_the_id_lists(backend: Backend) {
    let app = app(backend).await;
    let library = Library::new(&app).await;
    let mut state = AppState::default();
    let first = fever_sync(&app, &mut state).await;
    assert_eq!(first.len(), TECH_ITEMS + NEWS_ITEMS);
    state.assert_agrees_with(&library.web).await;

    let unread = state.unread_sorted();
    for id in &unread[..2] {
        let answer = fever_mark(&app, "item", "read", &id.to_string(), None).await;
        state.unread = id_set(&answer["unread_item_ids"]);
    }
    let answer = fever_mark(&app, "item", "unread", &unread[1].to_string(), None).await;
    state.unread = id_set(&answer["unread_item_ids"]);
    for (id, action) in [
        (unread[2], "saved"),
        (unread[3], "saved"),
        (unread[3], "unsaved"),
    ] {
        let answer = fever_mark(&app, "item", action, &id.to_string(), None).await;
        state.starred = id_set(&answer["saved_item_ids"]);
    }
    assert_eq!(state.starred, HashSet::from([unread[2]]));
    state.assert_agrees_with(&library.web).await;

    let arrived = library.new_items_arrive().await;
    library.web_changes(unread[6], Some(unread[7])).await;

    let incremental = fever_sync(&app, &mut state).await;
    assert_eq!(incremental, arrived, "exactly what arrived since");
    assert!(!state.unread.contains(&unread[6]), "read on the web");
    assert_eq!(state.starred, HashSet::from([unread[2], unread[7]]));
    state.assert_agrees_with(&library.web).await;
}
