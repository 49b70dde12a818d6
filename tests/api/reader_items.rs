//! Authors and enclosures (issue 19, item 5): a podcast in RSS, an Atom
//! feed and a JSON Feed are pulled from the loopback publisher, and each
//! item's authors and attached files are checked through GraphQL, Google
//! Reader's stream contents as newsboat (`GET stream/contents/…`) and
//! NetNewsWire (`POST stream/items/contents`) ask for them, and Fever's
//! `items` — on SQLite and PostgreSQL.

use std::collections::HashMap;

use serde_json::{Value, json};

use crate::{
    feeds::{Reader, app, fever},
    feedserver::{FeedServer, Route},
    helpers::Backend,
    on_both_backends,
    reader_apps::{ADA_FEVER_KEY, ada},
};

on_both_backends!(
    authors_and_enclosures_reach_graphql_google_reader_and_fever,
    enclosures_are_rewritten_when_the_feed_changes_them,
    a_bookmark_keeps_the_items_authors_and_enclosures,
);

/// A podcast: a relative enclosure and `dc:creator`; an `itunes:author`
/// with a `javascript:` enclosure beside a real one; an episode with more
/// enclosures than are kept; one with neither author nor enclosure.
fn podcast(first_enclosure: &str) -> String {
    let many: String = (1..=30)
        .map(|n| format!(r#"<enclosure url="https://cdn.example/part{n}.mp3" type="audio/mpeg" length="{n}"/>"#))
        .collect();
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<rss version="2.0" xmlns:dc="http://purl.org/dc/elements/1.1/" xmlns:itunes="http://www.itunes.com/dtds/podcast-1.0.dtd">
<channel><title>Cast</title><link>https://cast.example/</link>
  <item><guid>ep1</guid><title>Episode 1</title><link>https://cast.example/1</link><description>one</description>
    <dc:creator>Ada Lovelace</dc:creator>
    <enclosure url="{first_enclosure}" type="audio/mpeg" length="34567890"/></item>
  <item><guid>ep2</guid><title>Episode 2</title><link>https://cast.example/2</link><description>two</description>
    <itunes:author>Grace Hopper</itunes:author>
    <enclosure url="javascript:alert(1)" type="audio/mpeg" length="1"/>
    <media:content xmlns:media="http://search.yahoo.com/mrss/" url="https://cdn.example/ep2.ogg" type="audio/ogg"/></item>
  <item><guid>ep3</guid><title>Episode 3</title><link>https://cast.example/3</link><description>three</description>{many}</item>
  <item><guid>ep4</guid><title>Episode 4</title><link>https://cast.example/4</link><description>four</description></item>
</channel></rss>"#
    )
}

const ATOM: &str = r#"<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">
  <title>Talks</title><link rel="alternate" href="https://talks.example/"/><id>urn:talks</id><updated>2026-11-29T10:00:00Z</updated>
  <entry><title>Talk</title><id>urn:talks:1</id><link href="https://talks.example/1"/><updated>2026-11-29T10:00:00Z</updated>
    <author><name>Hedy Lamarr</name><email>hedy@talks.example</email></author>
    <link rel="enclosure" type="video/mp4" length="5000000000" href="https://cdn.example/talk.mp4"/>
    <content type="html">&lt;p&gt;talk&lt;/p&gt;</content></entry>
</feed>"#;

const JSON_FEED: &str = r#"{"version":"https://jsonfeed.org/version/1.1","title":"Notes","home_page_url":"https://notes.example/",
  "items":[{"id":"n1","url":"https://notes.example/1","title":"Note","content_html":"<p>note</p>","date_published":"2026-11-27T10:00:00Z",
    "authors":[{"name":"Jo"},{"name":"Al"}],
    "attachments":[{"url":"https://cdn.example/note.m4a","mime_type":"audio/x-m4a","size_in_bytes":42}]}]}"#;

/// GraphQL's items by title: `(id, authors, enclosures)`.
async fn graphql_items(reader: &Reader<'_>) -> HashMap<String, (String, Value, Value)> {
    reader
        .data(
            "{ items(first: 200) { edges { node { id title authors enclosures { url mimeType length } } } } }",
            json!({}),
        )
        .await["items"]["edges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|edge| {
            let node = &edge["node"];
            (
                node["title"].as_str().unwrap().to_owned(),
                (
                    node["id"].as_str().unwrap().to_owned(),
                    node["authors"].clone(),
                    node["enclosures"].clone(),
                ),
            )
        })
        .collect()
}

/// Stream-contents items by title.
fn by_title(contents: &Value) -> HashMap<String, Value> {
    contents["items"]
        .as_array()
        .unwrap_or_else(|| panic!("items, got {contents}"))
        .iter()
        .map(|item| (item["title"].as_str().unwrap().to_owned(), item.clone()))
        .collect()
}

async fn authors_and_enclosures_reach_graphql_google_reader_and_fever(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let (ada, gr) = ada(&app).await;
    let cast = ada
        .pull_new(
            &server,
            "/cast/feed.xml",
            Route::rss(podcast("../media/ep1.mp3")),
        )
        .await;
    ada.pull_new(
        &server,
        "/talks.xml",
        Route::ok("application/atom+xml", ATOM),
    )
    .await;
    ada.pull_new(
        &server,
        "/notes.json",
        Route::ok("application/feed+json", JSON_FEED),
    )
    .await;
    let ep1_url = server.url("/media/ep1.mp3");

    // GraphQL.
    let items = graphql_items(&ada).await;
    assert_eq!(items.len(), 6);
    assert_eq!(items["Episode 1"].1, json!(["Ada Lovelace"]));
    assert_eq!(
        items["Episode 1"].2,
        json!([{ "url": ep1_url, "mimeType": "audio/mpeg", "length": "34567890" }]),
        "a relative enclosure is resolved against the feed's URL"
    );
    assert_eq!(items["Episode 2"].1, json!(["Grace Hopper"]));
    assert_eq!(
        items["Episode 2"].2,
        json!([{ "url": "https://cdn.example/ep2.ogg", "mimeType": "audio/ogg", "length": null }]),
        "the javascript: enclosure is dropped"
    );
    let many = items["Episode 3"].2.as_array().unwrap();
    assert_eq!(many.len(), 20, "at most 20 enclosures are kept");
    assert_eq!(
        many[0],
        json!({ "url": "https://cdn.example/part1.mp3", "mimeType": "audio/mpeg", "length": "1" })
    );
    assert_eq!(many[19]["url"], "https://cdn.example/part20.mp3");
    assert_eq!(items["Episode 4"].1, json!([]));
    assert_eq!(items["Episode 4"].2, json!([]));
    assert_eq!(items["Talk"].1, json!(["Hedy Lamarr"]));
    assert_eq!(
        items["Talk"].2,
        json!([{ "url": "https://cdn.example/talk.mp4", "mimeType": "video/mp4", "length": "5000000000" }]),
        "a length beyond 32 bits"
    );
    assert_eq!(items["Note"].1, json!(["Jo", "Al"]));
    assert_eq!(
        items["Note"].2,
        json!([{ "url": "https://cdn.example/note.m4a", "mimeType": "audio/x-m4a", "length": "42" }])
    );

    // Google Reader, as newsboat reads a feed: GET stream/contents/<stream>?n=.
    let contents = gr.json(&format!("stream/contents/feed/{cast}?n=50")).await;
    let cast_items = by_title(&contents);
    assert_eq!(cast_items.len(), 4);
    let ep1 = &cast_items["Episode 1"];
    assert_eq!(ep1["author"], "Ada Lovelace");
    assert_eq!(
        ep1["enclosure"],
        json!([{ "href": ep1_url, "url": ep1_url, "type": "audio/mpeg", "length": 34567890 }])
    );
    assert_eq!(
        ep1["canonical"],
        json!([{ "href": "https://cast.example/1" }])
    );
    assert_eq!(
        ep1["alternate"],
        json!([{ "href": "https://cast.example/1", "type": "text/html" }])
    );
    assert_eq!(ep1["summary"]["direction"], "ltr");
    assert!(
        ep1["summary"]["content"].as_str().unwrap().contains("one"),
        "{ep1}"
    );
    assert_eq!(ep1["content"], ep1["summary"], "content beside summary");
    let ep2 = &cast_items["Episode 2"];
    assert_eq!(ep2["author"], "Grace Hopper");
    assert_eq!(
        ep2["enclosure"],
        json!([{ "href": "https://cdn.example/ep2.ogg", "url": "https://cdn.example/ep2.ogg", "type": "audio/ogg" }]),
        "no length when the feed gave none"
    );
    assert_eq!(
        cast_items["Episode 3"]["enclosure"]
            .as_array()
            .unwrap()
            .len(),
        20
    );
    let ep4 = &cast_items["Episode 4"];
    assert!(
        ep4.get("author").is_none(),
        "no author key when unknown, as FreshRSS: {ep4}"
    );
    assert_eq!(ep4["enclosure"], json!([]));

    // As NetNewsWire fetches items: POST stream/items/contents with i=.
    let (status, body) = gr
        .post(
            "stream/items/contents",
            &[
                ("i", items["Note"].0.as_str()),
                ("i", items["Talk"].0.as_str()),
            ],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let fetched = by_title(&serde_json::from_str(&body).unwrap());
    assert_eq!(fetched["Note"]["author"], "Jo, Al");
    assert_eq!(
        fetched["Note"]["enclosure"],
        json!([{ "href": "https://cdn.example/note.m4a", "url": "https://cdn.example/note.m4a", "type": "audio/x-m4a", "length": 42 }])
    );
    assert_eq!(fetched["Talk"]["author"], "Hedy Lamarr");
    assert_eq!(fetched["Talk"]["enclosure"][0]["length"], 5_000_000_000_i64);

    // Fever.
    let answer = fever(&app, "items", &[("api_key", ADA_FEVER_KEY)]).await;
    assert_eq!(answer["auth"], 1);
    let authors: HashMap<String, Value> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| {
            (
                item["title"].as_str().unwrap().to_owned(),
                item["author"].clone(),
            )
        })
        .collect();
    assert_eq!(authors["Episode 1"], "Ada Lovelace");
    assert_eq!(authors["Episode 2"], "Grace Hopper");
    assert_eq!(authors["Episode 4"], "", "a string even when unknown");
    assert_eq!(authors["Talk"], "Hedy Lamarr");
    assert_eq!(authors["Note"], "Jo, Al");
}

/// Follows and pulls the podcast, its first episode's file at `first`.
async fn pull_podcast(ada: &Reader<'_>, server: &FeedServer, first: &str) -> String {
    ada.pull_new(server, "/cast/feed.xml", Route::rss(podcast(first)))
        .await
}

async fn enclosures_are_rewritten_when_the_feed_changes_them(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let cast = pull_podcast(&ada, &server, "https://cdn.example/ep1-v1.mp3").await;
    let before = graphql_items(&ada).await;
    ada.data(
        "mutation($ids: [ID!]!) { starItems(ids: $ids) }",
        json!({ "ids": [before["Episode 1"].0] }),
    )
    .await;

    server.set(
        "/cast/feed.xml",
        Route::rss(podcast("https://cdn.example/ep1-v2.mp3")),
    );
    let task = ada.refresh(&cast).await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
    let after = graphql_items(&ada).await;
    assert_eq!(after["Episode 1"].0, before["Episode 1"].0, "the same item");
    assert_eq!(
        after["Episode 1"].2,
        json!([{ "url": "https://cdn.example/ep1-v2.mp3", "mimeType": "audio/mpeg", "length": "34567890" }])
    );
    let starred = ada
        .data(
            "{ items(filter: { starred: true }, first: 10) { edges { node { title } } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        starred["items"]["edges"],
        json!([{ "node": { "title": "Episode 1" } }]),
        "the reader's state is kept"
    );
}

async fn a_bookmark_keeps_the_items_authors_and_enclosures(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let cast = pull_podcast(&ada, &server, "https://cdn.example/ep1.mp3").await;
    let items = graphql_items(&ada).await;
    const FIELDS: &str = "id title authors enclosures { url mimeType length }";
    let saved = ada
        .data(
            &format!(
                "mutation($i: CreateBookmarkInput!) {{ createBookmark(input: $i) {{ {FIELDS} }} }}"
            ),
            json!({ "i": { "itemId": items["Episode 1"].0 } }),
        )
        .await["createBookmark"]
        .clone();
    let episode = json!([{ "url": "https://cdn.example/ep1.mp3", "mimeType": "audio/mpeg", "length": "34567890" }]);
    assert_eq!(saved["authors"], json!(["Ada Lovelace"]));
    assert_eq!(saved["enclosures"], episode);
    // A link bookmarked by hand has neither.
    let link = ada
        .data(
            &format!(
                "mutation($i: CreateBookmarkInput!) {{ createBookmark(input: $i) {{ {FIELDS} }} }}"
            ),
            json!({ "i": { "link": "https://elsewhere.example/page" } }),
        )
        .await["createBookmark"]
        .clone();
    assert_eq!(
        (link["authors"].clone(), link["enclosures"].clone()),
        (json!([]), json!([]))
    );

    // The feed goes, the episode's file stays downloadable from the bookmark.
    ada.data(
        "mutation($f: ID!) { deleteFeed(id: $f) }",
        json!({ "f": cast }),
    )
    .await;
    let kept = ada
        .data(
            &format!("query($id: ID!) {{ bookmark(id: $id) {{ {FIELDS} }} }}"),
            json!({ "id": saved["id"] }),
        )
        .await["bookmark"]
        .clone();
    assert_eq!(kept["authors"], json!(["Ada Lovelace"]));
    assert_eq!(kept["enclosures"], episode);
}
