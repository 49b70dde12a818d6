//! Feed icons (issue 19 item 9): the pull worker finds a feed's icon on
//! its site page through the SSRF-guarded client and keeps it; GraphQL,
//! Google Reader and Fever point only at our own copy, which only the
//! feed's owner can fetch — on SQLite and PostgreSQL.

use base64::{Engine, prelude::BASE64_STANDARD};
use serde_json::{Value, json};

use crate::{
    feeds::{Reader, app, fever},
    feedserver::{FeedServer, Route},
    helpers::{Backend, TestApp},
    on_both_backends,
};

on_both_backends!(
    a_pulled_feeds_icon_is_served_to_its_owner_only,
    reader_apps_get_the_icon_from_this_server,
    a_non_image_icon_is_refused_and_nothing_stored,
    the_feed_still_pulls_when_its_icon_cannot_be_fetched,
);

/// A 1×1 PNG, as an image editor writes it.
const PNG_BASE64: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";

fn png() -> Vec<u8> {
    BASE64_STANDARD.decode(PNG_BASE64).unwrap()
}

/// An RSS feed whose channel `<link>` is `site`.
fn feed_with_site(site: &str) -> String {
    format!(
        r#"<?xml version="1.0"?><rss version="2.0"><channel><title>Iconic</title><link>{site}</link>
        <item><guid>i1</guid><title>One</title><link>{site}one</link></item></channel></rss>"#
    )
}

/// Publishes a site page at `/site/` declaring `icon_href` as its icon, and
/// the feed at `/feed.xml`; follows and pulls it. Returns the feed id.
async fn pull_with_icon(reader: &Reader<'_>, server: &FeedServer, icon_href: &str) -> String {
    server.set(
        "/site/",
        Route::ok(
            "text/html",
            format!(
                r#"<!doctype html><html><head><title>Site</title>
                <link rel="stylesheet" href="/style.css">
                <link rel="icon" type="image/png" href="{icon_href}"></head><body>hi</body></html>"#
            ),
        ),
    );
    reader
        .pull_new(
            server,
            "/feed.xml",
            Route::rss(feed_with_site(&server.url("/site/"))),
        )
        .await
}

async fn icon_url(reader: &Reader<'_>, feed: &str) -> Value {
    reader
        .data(
            "query($id: ID!) { feed(id: $id) { iconUrl } }",
            json!({ "id": feed }),
        )
        .await["feed"]["iconUrl"]
        .clone()
}

async fn get_icon(app: &TestApp, feed: &str, auth: Option<&str>) -> reqwest::Response {
    let mut request = app.client.get(app.url(&format!("/icons/{feed}")));
    if let Some(auth) = auth {
        request = request.header("authorization", auth);
    }
    request.send().await.unwrap()
}

async fn a_pulled_feeds_icon_is_served_to_its_owner_only(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/img/icon.png", Route::ok("image/png", png()));
    let ada = Reader::new(&app, "ada").await;
    let feed = pull_with_icon(&ada, &server, "/img/icon.png").await;
    assert_eq!(server.hits("/img/icon.png"), 1);

    assert_eq!(
        icon_url(&ada, &feed).await,
        json!(app.url(&format!("/icons/{feed}")))
    );
    let bearer = format!("Bearer {}", ada.token);
    let response = get_icon(&app, &feed, Some(&bearer)).await;
    assert_eq!(response.status(), 200);
    let header = |name: &str| {
        response
            .headers()
            .get(name)
            .map(|value| value.to_str().unwrap().to_owned())
    };
    assert_eq!(header("content-type").as_deref(), Some("image/png"));
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    assert_eq!(
        header("cache-control").as_deref(),
        Some("public, max-age=86400")
    );
    let etag = header("etag").expect("an ETag");
    assert_eq!(response.bytes().await.unwrap().to_vec(), png());

    let revalidated = app
        .client
        .get(app.url(&format!("/icons/{feed}")))
        .header("authorization", &bearer)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(revalidated.status(), 304);
    assert!(revalidated.bytes().await.unwrap().is_empty());

    // Anyone else cannot tell the icon (or the feed) exists.
    let bob = Reader::new(&app, "bob").await;
    let not_found = [
        get_icon(&app, &feed, Some(&format!("Bearer {}", bob.token))).await,
        get_icon(&app, &feed, None).await,
        get_icon(&app, "999999", Some(&bearer)).await,
        get_icon(&app, "not-a-number", Some(&bearer)).await,
    ];
    for response in not_found {
        assert_eq!(response.status(), 404);
    }
    // Bob follows the same URL: his feed gets its own icon, and still
    // cannot read Ada's.
    let bobs = bob.follow(&server.url("/feed.xml")).await;
    assert_eq!(bob.refresh(&bobs).await["status"], "SUCCEEDED");
    assert_eq!(
        get_icon(&app, &bobs, Some(&format!("Bearer {}", bob.token)))
            .await
            .status(),
        200
    );
    assert_eq!(get_icon(&app, &bobs, Some(&bearer)).await.status(), 404);
}

async fn reader_apps_get_the_icon_from_this_server(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/icon.png", Route::ok("image/png", png()));
    let (ada, gr) = crate::reader_apps::ada(&app).await;
    let feed = pull_with_icon(&ada, &server, "/icon.png").await;
    // One more feed, without any icon to find.
    let bare = ada
        .pull_new(
            &server,
            "/bare.xml",
            Route::rss(feed_with_site("https://no-icon.example/")),
        )
        .await;

    let list = gr.json("subscription/list?output=json").await;
    let subscription = |id: &str| {
        list["subscriptions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["id"] == format!("feed/{id}"))
            .cloned()
            .unwrap()
    };
    let icon = app.url(&format!("/icons/{feed}"));
    assert_eq!(subscription(&feed)["iconUrl"], json!(icon));
    assert_eq!(subscription(&bare)["iconUrl"], "");
    // The app fetches it with its own token.
    let response = get_icon(&app, &feed, Some(&format!("GoogleLogin auth={}", gr.auth))).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.bytes().await.unwrap().to_vec(), png());

    let key = [("api_key", crate::reader_apps::ADA_FEVER_KEY)];
    let answer = fever(&app, "feeds&favicons", &key).await;
    let feeds = answer["feeds"].as_array().unwrap();
    let favicon_id = |id: &str| {
        feeds
            .iter()
            .find(|f| f["id"] == json!(id.parse::<i64>().unwrap()))
            .unwrap()["favicon_id"]
            .clone()
    };
    let feed_id: i64 = feed.parse().unwrap();
    assert_eq!(favicon_id(&feed), json!(feed_id));
    assert_eq!(favicon_id(&bare), json!(0));
    assert_eq!(
        answer["favicons"],
        json!([{ "id": feed_id, "data": format!("image/png;base64,{PNG_BASE64}") }])
    );
}

async fn a_non_image_icon_is_refused_and_nothing_stored(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    // A server that answers every path with a page, icons included, and
    // claims it is a PNG.
    let page = "<!doctype html><html><body>not an image</body></html>";
    server.set("/fake.png", Route::ok("image/png", page));
    server.set("/favicon.ico", Route::ok("image/x-icon", page));
    let ada = Reader::new(&app, "ada").await;
    let feed = pull_with_icon(&ada, &server, "/fake.png").await;
    assert_eq!(server.hits("/fake.png"), 1);
    assert_eq!(
        server.hits("/favicon.ico"),
        1,
        "the next candidate is tried"
    );
    assert_eq!(icon_url(&ada, &feed).await, Value::Null);
    let bearer = format!("Bearer {}", ada.token);
    assert_eq!(get_icon(&app, &feed, Some(&bearer)).await.status(), 404);
    assert_eq!(ada.items(json!({ "feedId": feed })).await.len(), 1);
}

async fn the_feed_still_pulls_when_its_icon_cannot_be_fetched(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/site/", Route::status(500));
    server.set("/favicon.ico", Route::status(503));
    let ada = Reader::new(&app, "ada").await;
    let feed = ada
        .pull_new(
            &server,
            "/feed.xml",
            Route::rss(feed_with_site(&server.url("/site/"))),
        )
        .await;
    assert_eq!(server.hits("/site/"), 1);
    assert_eq!(server.hits("/favicon.ico"), 1);
    let state = ada.feed(&feed).await;
    assert_eq!(state["itemCount"], 1, "{state}");
    assert_eq!(state["fetchState"]["lastError"], Value::Null, "{state}");
    assert_eq!(icon_url(&ada, &feed).await, Value::Null);

    // Once the site serves one, the next pull picks it up.
    server.set("/favicon.ico", Route::ok("image/x-icon", png()));
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    assert_eq!(
        icon_url(&ada, &feed).await,
        json!(app.url(&format!("/icons/{feed}")))
    );
}
