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
);

const READING_LIST: &str = "user/-/state/com.google/reading-list";
const STARRED: &str = "user/-/state/com.google/starred";
/// md5("ada:reader-pass-1"), computed independently (`printf 'ada:reader-pass-1' | md5sum`).
const ADA_FEVER_KEY: &str = "26f657fd2798a7497b805027601be813";

/// An RSS 2.0 feed of `count` items `<prefix>1…`, item `n` published `n`
/// hours before `newest`.
fn feed_of(title: &str, prefix: &str, count: usize, newest: DateTime<Utc>) -> String {
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
async fn ada(app: &TestApp) -> (Reader<'_>, GReader<'_>) {
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
async fn graphql_ids(reader: &Reader<'_>, filter: Value) -> HashSet<i64> {
    reader
        .items(filter)
        .await
        .iter()
        .map(|item| item["id"].as_str().unwrap().parse().unwrap())
        .collect()
}

/// A comma-separated Fever id list as a set.
fn id_set(list: &Value) -> HashSet<i64> {
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

    let now = Utc::now().timestamp().to_string();
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
    let millis = now.timestamp_millis().to_string();
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
async fn fever_mark(
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
