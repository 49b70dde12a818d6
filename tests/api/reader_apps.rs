//! The reader apps' protocols (Google Reader API, Fever) as the apps speak
//! them, issue 19: each request shaped as NetNewsWire, Reeder, Read You or
//! newsboat send it (form bodies, `Authorization: GoogleLogin auth=…`, their
//! id and time spellings), each answer checked field by field, and the
//! state it leaves checked through GraphQL — on SQLite and PostgreSQL.

use std::collections::HashSet;

use chrono::{DateTime, Duration, Utc};
use serde_json::{Value, json};

use crate::{
    feeds::{GReader, Reader, app, fever},
    feedserver::{FeedServer, Route},
    helpers::{Backend, TestApp},
    on_both_backends,
};

on_both_backends!(
    google_reader_item_ids_are_read_in_every_form_the_apps_send,
    fever_max_id_zero_starts_from_the_newest,
    fever_mark_answers_carry_the_changed_list,
    timestamps_are_read_by_magnitude_and_fever_needs_before,
    time_bounds_use_arrival_not_publication,
    a_bad_token_says_so_and_t_alone_authenticates_a_post,
    several_streams_in_one_edit_apply_to_every_feed,
    quickadd_discovers_the_feed_of_a_site_page,
    what_apps_sync_by_is_reported_as_the_peers_report_it,
);

pub(crate) const READING_LIST: &str = "user/-/state/com.google/reading-list";
pub(crate) const STARRED: &str = "user/-/state/com.google/starred";
/// md5("ada:reader-pass-1"), computed independently (`printf 'ada:reader-pass-1' | md5sum`).
pub(crate) const ADA_FEVER_KEY: &str = "26f657fd2798a7497b805027601be813";

/// An RSS 2.0 feed of `count` items `<prefix>1…`, item `n` published `n`
/// hours before `newest`.
pub(crate) fn feed_of(title: &str, prefix: &str, count: usize, newest: DateTime<Utc>) -> String {
    let items: String = (1..=count)
        .map(|n| {
            let published = (newest - Duration::hours(n as i64)).to_rfc2822();
            format!(
                "<item><guid>{prefix}{n}</guid><title>{prefix} {n}</title>\
                 <link>https://publisher.example/{prefix}/{n}</link>\
                 <description>body {n}</description><pubDate>{published}</pubDate></item>"
            )
        })
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>{title}</title><link>https://publisher.example/</link>{items}</channel></rss>"#
    )
}

/// Ada with a reader password, signed in over the Google Reader API.
pub(crate) async fn ada(app: &TestApp) -> (Reader<'_>, GReader<'_>) {
    let ada = Reader::new(app, "ada").await;
    ada.data(
        "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"reader-pass-1\") }",
        json!({}),
    )
    .await;
    let gr = GReader::login(app, "ada", "reader-pass-1").await.unwrap();
    (ada, gr)
}

/// The ids of the items GraphQL lists for `filter`.
pub(crate) async fn graphql_ids(reader: &Reader<'_>, filter: Value) -> HashSet<i64> {
    reader
        .items(filter)
        .await
        .iter()
        .map(|item| item["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// A comma-separated Fever id list as a set.
pub(crate) fn id_set(list: &Value) -> HashSet<i64> {
    list.as_str()
        .unwrap_or_else(|| panic!("an id list, got {list}"))
        .split(',')
        .filter(|id| !id.is_empty())
        .map(|id| id.parse().unwrap())
        .collect()
}

async fn google_reader_item_ids_are_read_in_every_form_the_apps_send(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    ada.pull_new(
        &server,
        "/many.xml",
        Route::rss(feed_of("Many", "m", 45, Utc::now())),
    )
    .await;
    let (ids, _) = gr.ids(&format!("s={READING_LIST}&n=100")).await;
    let ids: HashSet<i64> = ids.iter().map(|id| id.parse().unwrap()).collect();
    assert_eq!(ids.len(), 45);
    // An item whose 16-hex id, misread as decimal, names another item
    // (0x28 = 40 read as 28): the wrong one must not change.
    let (target, decoy) = ids
        .iter()
        .find_map(|&id| {
            let misread: i64 = format!("{id:x}").parse().ok()?;
            (misread != id && ids.contains(&misread)).then_some((id, misread))
        })
        .expect("an id whose hex digits are all decimal");
    let bare_hex = format!("{target:016x}");
    assert_eq!(
        gr.post("edit-tag", &[("i", &bare_hex), ("a", STARRED)])
            .await,
        (200, "OK".to_owned())
    );
    let (starred, _) = gr.ids(&format!("s={STARRED}")).await;
    assert_eq!(starred, [target.to_string()], "not item {decoy}");
    assert_eq!(
        graphql_ids(&ada, json!({ "starred": true })).await,
        HashSet::from([target])
    );

    let (status, body) = gr.post("stream/items/contents", &[("i", &bare_hex)]).await;
    assert_eq!(status, 200, "{body}");
    let contents: Value = serde_json::from_str(&body).unwrap();
    let long = format!("tag:google.com,2005:reader/item/{target:016x}");
    assert_eq!(contents["items"].as_array().unwrap().len(), 1);
    assert_eq!(contents["items"][0]["id"], long.as_str());

    // A hex id with a letter (Reeder), the unpadded long form
    // (NetNewsWire) and the decimal short form (Liferea) in one request.
    let lettered = *ids.iter().filter(|id| **id >= 10).min().unwrap();
    let unpadded = *ids.iter().max().unwrap();
    let decimal = *ids.iter().min().unwrap();
    let (status, body) = gr
        .post(
            "stream/items/contents",
            &[
                ("i", format!("{lettered:016x}").as_str()),
                (
                    "i",
                    format!("tag:google.com,2005:reader/item/{unpadded:x}").as_str(),
                ),
                ("i", decimal.to_string().as_str()),
            ],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let contents: Value = serde_json::from_str(&body).unwrap();
    let served: HashSet<String> = contents["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_str().unwrap().to_owned())
        .collect();
    let expected: HashSet<String> = [lettered, unpadded, decimal]
        .iter()
        .map(|id| format!("tag:google.com,2005:reader/item/{id:016x}"))
        .collect();
    assert_eq!(served, expected);
    assert_eq!(
        gr.post(
            "edit-tag",
            &[
                ("i", format!("{lettered:016x}").as_str()),
                ("a", "user/-/state/com.google/read")
            ]
        )
        .await,
        (200, "OK".to_owned())
    );
    assert_eq!(
        graphql_ids(&ada, json!({ "unread": false })).await,
        HashSet::from([lettered])
    );
}

async fn fever_max_id_zero_starts_from_the_newest(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, _) = ada(&app).await;
    ada.pull_new(
        &server,
        "/sixty.xml",
        Route::rss(feed_of("Sixty", "s", 60, Utc::now())),
    )
    .await;
    let key = [("api_key", ADA_FEVER_KEY)];
    let all = graphql_ids(&ada, json!({})).await;
    let mut newest: Vec<i64> = all.iter().copied().collect();
    newest.sort_unstable_by(|a, b| b.cmp(a));
    newest.truncate(50);

    let first = fever(&app, "items&max_id=0", &key).await;
    assert_eq!(first["auth"], 1);
    assert_eq!(first["total_items"], 60);
    let page: Vec<i64> = first["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["id"].as_i64().unwrap())
        .collect();
    assert_eq!(page, newest, "the newest 50, newest first");
    // Paging on backwards from the lowest id received gets the rest.
    let lowest = page.last().unwrap();
    let rest = fever(&app, &format!("items&max_id={lowest}"), &key).await;
    assert_eq!(rest["items"].as_array().unwrap().len(), 10);
    assert!(
        rest["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|item| item["id"].as_i64().unwrap() < *lowest)
    );
}

async fn fever_mark_answers_carry_the_changed_list(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, _) = ada(&app).await;
    let feed = ada
        .pull_new(
            &server,
            "/marks.xml",
            Route::rss(feed_of("Marks", "k", 3, Utc::now())),
        )
        .await;
    let all = graphql_ids(&ada, json!({})).await;
    let one = all.iter().min().unwrap().to_string();

    // As Reeder sends it: the mark alone, no list flag.
    let read = fever_mark(&app, "item", "read", &one, None).await;
    assert_eq!(read["auth"], 1);
    assert_eq!(
        id_set(&read["unread_item_ids"]),
        graphql_ids(&ada, json!({ "unread": true })).await
    );
    assert_eq!(id_set(&read["unread_item_ids"]).len(), 2);
    assert!(read.get("saved_item_ids").is_none(), "{read}");

    let saved = fever_mark(&app, "item", "saved", &one, None).await;
    assert_eq!(
        id_set(&saved["saved_item_ids"]),
        HashSet::from([one.parse().unwrap()])
    );
    assert!(saved.get("unread_item_ids").is_none(), "{saved}");

    let unsaved = fever_mark(&app, "item", "unsaved", &one, None).await;
    assert_eq!(unsaved["saved_item_ids"], "");

    // The protocol's whole seconds, rounded up: every item had arrived.
    let now = (Utc::now().timestamp() + 1).to_string();
    let caught_up = fever_mark(&app, "feed", "read", &feed, Some(&now)).await;
    assert_eq!(caught_up["unread_item_ids"], "");
    assert!(
        graphql_ids(&ada, json!({ "unread": true }))
            .await
            .is_empty()
    );
}

async fn timestamps_are_read_by_magnitude_and_fever_needs_before(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    let first = ada
        .pull_new(
            &server,
            "/ms.xml",
            Route::rss(feed_of("Millis", "ms", 2, Utc::now())),
        )
        .await;
    let second = ada
        .pull_new(
            &server,
            "/s.xml",
            Route::rss(feed_of("Seconds", "sec", 2, Utc::now())),
        )
        .await;
    // Fever `mark=feed` without `before` marks nothing.
    let without_before = fever_mark(&app, "feed", "read", &first, None).await;
    assert_eq!(without_before["auth"], 1);
    assert_eq!(unread_in(&ada, &first).await, 2);

    // `ts` in milliseconds and in seconds mean the same instant as in µs.
    let now = Utc::now();
    let millis = (now.timestamp_millis() + 1).to_string();
    assert_eq!(
        gr.post(
            "mark-all-as-read",
            &[("s", &format!("feed/{first}")), ("ts", &millis)]
        )
        .await,
        (200, "OK".to_owned())
    );
    assert_eq!(unread_in(&ada, &first).await, 0, "ts in milliseconds");
    assert_eq!(unread_in(&ada, &second).await, 2);
    let seconds = (now.timestamp() + 1).to_string();
    gr.post(
        "mark-all-as-read",
        &[("s", &format!("feed/{second}")), ("ts", &seconds)],
    )
    .await;
    assert_eq!(unread_in(&ada, &second).await, 0, "ts in seconds");
}

async fn unread_in(reader: &Reader<'_>, feed: &str) -> usize {
    reader
        .items(json!({ "feedId": feed, "unread": true }))
        .await
        .len()
}

/// A Fever mark as Reeder sends it: the form alone, no list flag.
pub(crate) async fn fever_mark(
    app: &TestApp,
    what: &str,
    action: &str,
    id: &str,
    before: Option<&str>,
) -> Value {
    let mut form = vec![
        ("api_key", ADA_FEVER_KEY),
        ("mark", what),
        ("as", action),
        ("id", id),
    ];
    form.extend(before.map(|before| ("before", before)));
    fever(app, "", &form).await
}

/// A last-sync time in the protocols' whole seconds: every item that
/// arrived so far arrived before it, every one from now on after it. The
/// clock passing the next second is what makes "after the sync" mean
/// something at that resolution; nothing else is waited for here.
pub(crate) async fn sync_point() -> i64 {
    let synced = Utc::now().timestamp() + 1;
    while Utc::now().timestamp() <= synced {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    synced
}

/// Item 2: an item published 20 minutes before an app's last sync but
/// pulled after it was never received by the app: `before`, `ts`, `ot`
/// and `markAllRead(before:)` leave it alone.
async fn time_bounds_use_arrival_not_publication(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    let published = Utc::now() - Duration::days(1);
    let feed = ada
        .pull_new(
            &server,
            "/late.xml",
            Route::rss(feed_of("Late", "old", 2, published)),
        )
        .await;
    let old = graphql_ids(&ada, json!({})).await;
    // The app's last sync, in the protocols' whole seconds: the next
    // second after the first pull. Waiting for the clock to pass it is
    // what makes "after the sync" mean something at that resolution.
    let synced = sync_point().await;
    let claimed = DateTime::from_timestamp(synced - 20 * 60, 0).unwrap();
    let late_entry = format!(
        "<item><guid>late</guid><title>Late</title><link>https://publisher.example/late</link>\
         <description>late</description><pubDate>{}</pubDate></item></channel>",
        claimed.to_rfc2822()
    );
    server.set(
        "/late.xml",
        Route::rss(feed_of("Late", "old", 2, published).replace("</channel>", &late_entry)),
    );
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    let all = graphql_ids(&ada, json!({})).await;
    let late: HashSet<i64> = all.difference(&old).copied().collect();
    assert_eq!(late.len(), 1);
    let late_id = *late.iter().next().unwrap();
    let late_item = ada
        .items(json!({ "feedId": feed }))
        .await
        .into_iter()
        .find(|item| item["id"].as_str().and_then(|id| id.parse().ok()) == Some(late_id))
        .unwrap();
    assert_eq!(
        time(&late_item["pubDate"]).timestamp(),
        synced - 20 * 60,
        "published before the sync"
    );

    // NetNewsWire's incremental sync: ids that arrived since the last one.
    let (since, _) = gr.ids(&format!("s={READING_LIST}&ot={synced}&n=100")).await;
    assert_eq!(since, [late_id.to_string()]);
    // Older NetNewsWire sends the same bound as a float.
    let (since, _) = gr
        .ids(&format!("s={READING_LIST}&ot={synced}.5&n=100"))
        .await;
    assert_eq!(since, [late_id.to_string()]);
    let (until, _) = gr.ids(&format!("s={READING_LIST}&nt={synced}&n=100")).await;
    let until: HashSet<i64> = until.iter().map(|id| id.parse().unwrap()).collect();
    assert_eq!(until, old);

    // Fever: mark the feed read up to the last `items` call.
    let before = synced.to_string();
    let marked = fever_mark(&app, "feed", "read", &feed, Some(&before)).await;
    assert_eq!(id_set(&marked["unread_item_ids"]), late);
    assert_eq!(graphql_ids(&ada, json!({ "unread": true })).await, late);

    // Google Reader: mark-all-as-read up to `ts` (µs), after making the
    // old items unread again.
    let unread_again = ada
        .data(
            "mutation($ids: [ID!]!) { markItemsUnread(ids: $ids) }",
            json!({ "ids": old.iter().map(i64::to_string).collect::<Vec<_>>() }),
        )
        .await;
    assert_eq!(unread_again["markItemsUnread"], 2);
    let ts = (synced * 1_000_000).to_string();
    assert_eq!(
        gr.post(
            "mark-all-as-read",
            &[("s", &format!("feed/{feed}")), ("ts", &ts)]
        )
        .await,
        (200, "OK".to_owned())
    );
    assert_eq!(graphql_ids(&ada, json!({ "unread": true })).await, late);

    // GraphQL's markAllRead(before:) likewise.
    ada.data(
        "mutation($ids: [ID!]!) { markItemsUnread(ids: $ids) }",
        json!({ "ids": old.iter().map(i64::to_string).collect::<Vec<_>>() }),
    )
    .await;
    let marked = ada
        .data(
            "mutation($f: ID!, $b: DateTime!) { markAllRead(feedId: $f, before: $b) }",
            json!({ "f": feed, "b": DateTime::from_timestamp(synced, 0).unwrap().to_rfc3339() }),
        )
        .await;
    assert_eq!(marked["markAllRead"], 2);
    assert_eq!(graphql_ids(&ada, json!({ "unread": true })).await, late);
}

fn time(value: &Value) -> DateTime<Utc> {
    value.as_str().unwrap().parse().unwrap()
}

/// Item 8: a 401 tells the app its token is bad (so it logs in again), and
/// a POST carrying only `T=` (Miniflux's POST authentication) works.
async fn a_bad_token_says_so_and_t_alone_authenticates_a_post(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    ada.pull_new(
        &server,
        "/t.xml",
        Route::rss(feed_of("Token", "t", 2, Utc::now())),
    )
    .await;
    let url = |path: &str| app.url(&format!("/reader/api/0/{path}"));
    let bad_token = |response: &reqwest::Response| {
        response
            .headers()
            .get("x-reader-google-bad-token")
            .map(|value| value.to_str().unwrap().to_owned())
    };
    let anonymous = app
        .client
        .get(url("subscription/list?output=json"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    assert_eq!(bad_token(&anonymous).as_deref(), Some("true"));
    let stale = app
        .client
        .get(url("unread-count?output=json"))
        .header("authorization", "GoogleLogin auth=ada/0123456789abcdef")
        .send()
        .await
        .unwrap();
    assert_eq!(stale.status(), 401);
    assert_eq!(bad_token(&stale).as_deref(), Some("true"));

    let (status, edit_token) = gr.get("token").await;
    assert_eq!(status, 200);
    let edit_token = edit_token.trim().to_owned();
    let (ids, _) = gr.ids(&format!("s={READING_LIST}")).await;
    let post_with = |token: String, item: String| {
        let form = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs([("T", token.as_str()), ("i", item.as_str()), ("a", STARRED)])
            .finish();
        app.client
            .post(url("edit-tag"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form)
            .send()
    };
    let by_t = post_with(edit_token.clone(), ids[0].clone()).await.unwrap();
    assert_eq!(by_t.status(), 200);
    assert_eq!(by_t.text().await.unwrap(), "OK");
    assert_eq!(
        graphql_ids(&ada, json!({ "starred": true })).await,
        HashSet::from([ids[0].parse().unwrap()])
    );
    // A guessable T (the user id alone) and a forged one are refused.
    let user_part = gr.auth.split('/').next().unwrap().to_owned();
    for forged in [user_part.clone(), format!("{user_part}/{}", "0".repeat(64))] {
        let refused = post_with(forged, ids[1].clone()).await.unwrap();
        assert_eq!(refused.status(), 401);
        assert_eq!(bad_token(&refused).as_deref(), Some("true"));
    }
    // T is read from a POST body only, never from a URL.
    let in_query = app
        .client
        .get(url(&format!("subscription/list?T={edit_token}")))
        .send()
        .await
        .unwrap();
    assert_eq!(in_query.status(), 401);
    assert_eq!(
        graphql_ids(&ada, json!({ "starred": true })).await.len(),
        1,
        "nothing changed by a refused request"
    );
}

/// The user's groups as `name → feed ids`.
async fn groups_of(reader: &Reader<'_>) -> std::collections::HashMap<String, HashSet<String>> {
    reader
        .data("{ groups { name feeds { id } } }", json!({}))
        .await["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|group| {
            let feeds = group["feeds"]
                .as_array()
                .unwrap()
                .iter()
                .map(|feed| feed["id"].as_str().unwrap().to_owned())
                .collect();
            (group["name"].as_str().unwrap().to_owned(), feeds)
        })
        .collect()
}

/// Item 7: NetNewsWire and Read You send several `s=` in one
/// `subscription/edit` (and `disable-tag`); each applies to every one.
async fn several_streams_in_one_edit_apply_to_every_feed(backend: Backend) {
    let app = app(backend).await;
    let (ada, gr) = ada(&app).await;
    let mut feeds = Vec::new();
    for name in ["one", "two", "three"] {
        feeds.push(
            ada.follow(&format!("https://{name}.example/feed.xml"))
                .await,
        );
    }
    let streams: Vec<String> = feeds.iter().map(|id| format!("feed/{id}")).collect();
    assert_eq!(
        gr.post(
            "subscription/edit",
            &[
                ("ac", "edit"),
                ("s", &streams[0]),
                ("s", &streams[1]),
                ("a", "user/-/label/Moved"),
            ],
        )
        .await,
        (200, "OK".to_owned())
    );
    let groups = groups_of(&ada).await;
    assert_eq!(
        groups["Moved"],
        HashSet::from([feeds[0].clone(), feeds[1].clone()])
    );
    assert_eq!(groups["Default"], HashSet::from([feeds[2].clone()]));

    // Subscribing to what is already followed is no error.
    assert_eq!(
        gr.post(
            "subscription/edit",
            &[
                ("ac", "subscribe"),
                ("s", "feed/https://three.example/feed.xml")
            ],
        )
        .await,
        (200, "OK".to_owned())
    );

    assert_eq!(
        gr.post(
            "subscription/edit",
            &[
                ("ac", "unsubscribe"),
                ("s", &streams[0]),
                ("s", &streams[2])
            ],
        )
        .await,
        (200, "OK".to_owned())
    );
    let left: Vec<String> = ada.data("{ feeds { id } }", json!({})).await["feeds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|feed| feed["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(left, [feeds[1].clone()]);

    ada.data(
        "mutation { createGroup(name: \"Other\") { id } }",
        json!({}),
    )
    .await;
    assert_eq!(
        gr.post(
            "disable-tag",
            &[("s", "user/-/label/Moved"), ("s", "user/-/label/Other")],
        )
        .await,
        (200, "OK".to_owned())
    );
    let groups = groups_of(&ada).await;
    assert_eq!(groups.keys().collect::<Vec<_>>(), ["Default"]);
    assert_eq!(groups["Default"], HashSet::from([feeds[1].clone()]));
}

/// Item 6: `quickadd` with a site's page follows the feed the page links
/// to; adding a feed already followed answers `numResults: 0`.
async fn quickadd_discovers_the_feed_of_a_site_page(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    server.set(
        "/blog/",
        Route::ok(
            "text/html; charset=utf-8",
            r#"<!doctype html><html><head><title>Blog</title>
            <link rel="alternate" type="application/rss+xml" title="Posts" href="/blog/feed.xml">
            </head><body><p>Hello</p></body></html>"#,
        ),
    );
    server.set(
        "/blog/feed.xml",
        Route::rss(feed_of("Blog posts", "b", 1, Utc::now())),
    );
    let quickadd = |query: String| {
        let gr = &gr;
        async move {
            let (status, body) = gr
                .post("subscription/quickadd", &[("quickadd", &query)])
                .await;
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<Value>(&body).unwrap()
        }
    };
    let added = quickadd(server.url("/blog/")).await;
    assert_eq!(added["numResults"], 1, "{added}");
    assert_eq!(added["query"], server.url("/blog/"));
    let feeds = ada.data("{ feeds { id link } }", json!({})).await["feeds"].clone();
    assert_eq!(feeds.as_array().unwrap().len(), 1);
    assert_eq!(feeds[0]["link"], server.url("/blog/feed.xml"));
    assert_eq!(
        added["streamId"],
        format!("feed/{}", feeds[0]["id"].as_str().unwrap())
    );

    for again in [server.url("/blog/"), server.url("/blog/feed.xml")] {
        let answer = quickadd(again).await;
        assert_eq!(answer["numResults"], 0, "{answer}");
        assert!(answer.get("streamId").is_none(), "{answer}");
    }
    let nothing_there = quickadd(server.url("/missing")).await;
    assert_eq!(nothing_there["numResults"], 0, "{nothing_there}");
    assert_eq!(
        ada.data("{ feeds { id } }", json!({})).await["feeds"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

/// Item 10: the fields and endpoints apps sync by.
async fn what_apps_sync_by_is_reported_as_the_peers_report_it(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    let group = |name: &str| {
        ada.data(
            "mutation($n: String!) { createGroup(name: $n) { id } }",
            json!({ "n": name }),
        )
    };
    let tech = group("Tech").await["createGroup"]["id"].clone();
    let empty = group("Empty").await["createGroup"]["id"].clone();
    server.set(
        "/tech.xml",
        Route::rss(feed_of("Tech feed", "tf", 3, Utc::now())),
    );
    let follow_in = |link: String| {
        ada.data(
            "mutation($i: CreateFeedInput!) { createFeed(input: $i) { id } }",
            json!({ "i": { "link": link, "groupId": tech } }),
        )
    };
    let good = follow_in(server.url("/tech.xml")).await["createFeed"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(ada.refresh(&good).await["status"], "SUCCEEDED");
    server.set("/gone.xml", Route::status(404));
    let gone = follow_in(server.url("/gone.xml")).await["createFeed"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ada.refresh(&gone).await;

    // Fever: last_updated_on_time is the last successful check; groups
    // without feeds are not in feeds_groups.
    let lists = fever(&app, "groups&feeds", &[("api_key", ADA_FEVER_KEY)]).await;
    let success = time(&ada.feed(&good).await["fetchState"]["lastSuccessAt"]);
    let feed_entry = |id: &str| {
        lists["feeds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|feed| feed["id"].as_i64() == id.parse().ok())
            .cloned()
            .unwrap()
    };
    assert_eq!(
        feed_entry(&good)["last_updated_on_time"],
        success.timestamp()
    );
    assert_eq!(
        feed_entry(&gone)["last_updated_on_time"],
        0,
        "never succeeded"
    );
    let grouped: Vec<String> = lists["feeds_groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["group_id"].to_string())
        .collect();
    assert_eq!(grouped, [tech.as_str().unwrap().to_owned()], "not {empty}");

    // unread-count: the newest unread item's date per stream, in µs.
    let newest = ada
        .items(json!({ "feedId": good, "unread": true }))
        .await
        .iter()
        .map(|item| time(&item["pubDate"]))
        .max()
        .unwrap()
        .timestamp_micros()
        .to_string();
    let counts = gr.json("unread-count?output=json").await;
    for stream in [
        format!("feed/{good}"),
        "user/-/label/Tech".into(),
        READING_LIST.into(),
    ] {
        let entry = counts["unreadcounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|entry| entry["id"] == stream.as_str())
            .unwrap_or_else(|| panic!("{stream} in {counts}"));
        assert_eq!(entry["count"], 3, "{stream}");
        assert_eq!(
            entry["newestItemTimestampUsec"],
            newest.as_str(),
            "{stream}"
        );
    }

    // Items name their folder among their categories.
    let contents = gr.json(&format!("stream/contents/feed/{good}?n=5")).await;
    for item in contents["items"].as_array().unwrap() {
        let categories = item["categories"].as_array().unwrap();
        assert!(
            categories.contains(&json!("user/-/label/Tech")),
            "{categories:?}"
        );
    }

    // What apps probe answers empty, not 404.
    assert_eq!(
        gr.json("preference/list?output=json").await,
        json!({ "prefs": [] })
    );
    assert_eq!(
        gr.json("preference/stream/list?output=json").await,
        json!({ "streamprefs": {} })
    );
    assert_eq!(
        gr.json("friend/list?output=json").await,
        json!({ "friends": [] })
    );

    // OPML out and in.
    let (status, exported) = gr.get("subscription/export").await;
    assert_eq!(status, 200);
    assert!(exported.contains("<opml"), "{exported}");
    assert!(
        exported.contains(&format!("xmlUrl=\"{}\"", server.url("/tech.xml"))),
        "{exported}"
    );
    let opml = r#"<?xml version="1.0"?><opml version="2.0"><head><title>Mine</title></head><body>
        <outline text="Imported"><outline type="rss" text="New one" xmlUrl="https://new.example/feed.xml"/></outline>
        </body></opml>"#;
    let imported = app
        .client
        .post(app.url("/reader/api/0/subscription/import"))
        .header("authorization", format!("GoogleLogin auth={}", gr.auth))
        .header("content-type", "text/x-opml")
        .body(opml)
        .send()
        .await
        .unwrap();
    assert_eq!(imported.status(), 200);
    let groups = ada
        .data("{ groups { name feeds { link } } }", json!({}))
        .await;
    let imported_group = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|group| group["name"] == "Imported")
        .cloned()
        .unwrap_or_else(|| panic!("{groups}"));
    assert_eq!(
        imported_group["feeds"],
        json!([{ "link": "https://new.example/feed.xml" }])
    );
}
