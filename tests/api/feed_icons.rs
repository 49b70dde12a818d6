//! Feed icons (issue 19 item 9): the pull worker finds a feed's icon on
//! its site page through the SSRF-guarded client and keeps it; GraphQL,
//! Google Reader and Fever point only at our own copy, at a signed URL
//! that needs no credential (apps load icons with plain image requests)
//! and that nobody can make up — on SQLite and PostgreSQL. A look that
//! found nothing is remembered for a day.

use base64::{Engine, prelude::BASE64_STANDARD};
use serde_json::{Value, json};

use crate::{
    feeds::{Reader, app, fever},
    feedserver::{FeedServer, Route},
    helpers::{Backend, TestApp},
    on_both_backends,
};

on_both_backends!(
    a_pulled_feeds_icon_is_served_at_a_signed_url,
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

/// A plain `GET` of an icon URL, as an `<img>` or a reader app sends it:
/// no credential.
async fn get(url: &str) -> reqwest::Response {
    reqwest::get(url).await.unwrap()
}

/// Makes every look for an icon `age` old.
async fn age_icons(app: &TestApp, age: chrono::TimeDelta) {
    let db = app.database().await;
    sea_orm::ConnectionTrait::execute_raw(
        &db,
        sea_orm::Statement::from_sql_and_values(
            db.get_database_backend(),
            "UPDATE feed_icons SET fetched_at = $1",
            [(chrono::Utc::now() - age).into()],
        ),
    )
    .await
    .unwrap();
}

/// The icon URL the API gives, checked for shape: `<app>/icons/<feed>/<sig>`.
fn signed(app: &TestApp, feed: &str, url: &Value) -> String {
    let url = url.as_str().expect("an icon URL").to_owned();
    let prefix = app.url(&format!("/icons/{feed}/"));
    let sig = url.strip_prefix(prefix.as_str()).expect("our own route");
    assert_eq!(sig.len(), 32, "{url}");
    assert!(sig.bytes().all(|b| b.is_ascii_hexdigit()), "{url}");
    url
}

async fn a_pulled_feeds_icon_is_served_at_a_signed_url(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/img/icon.png", Route::ok("image/png", png()));
    let ada = Reader::new(&app, "ada").await;
    let feed = pull_with_icon(&ada, &server, "/img/icon.png").await;
    assert_eq!(server.hits("/img/icon.png"), 1);

    let url = signed(&app, &feed, &icon_url(&ada, &feed).await);
    // No credential needed: the URL is the capability.
    let response = get(&url).await;
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
        Some("public, max-age=31536000, immutable")
    );
    let etag = header("etag").expect("an ETag");
    assert_eq!(response.bytes().await.unwrap().to_vec(), png());
    let revalidated = app
        .client
        .get(&url)
        .header("if-none-match", &etag)
        .send()
        .await
        .unwrap();
    assert_eq!(revalidated.status(), 304);
    assert!(revalidated.bytes().await.unwrap().is_empty());

    // A made-up or altered URL tells nothing, not even whether the feed exists.
    let sig = url.rsplit('/').next().unwrap().to_owned();
    let flipped = format!(
        "{}{}",
        &sig[..31],
        if sig.ends_with('0') { '1' } else { '0' }
    );
    for made_up in [
        app.url(&format!("/icons/{feed}/{flipped}")),
        app.url(&format!("/icons/999999/{sig}")),
        app.url(&format!("/icons/{feed}/{}", &sig[..31])),
        app.url(&format!("/icons/not-a-number/{sig}")),
        app.url(&format!("/icons/{feed}")),
    ] {
        assert_eq!(get(&made_up).await.status(), 404, "{made_up}");
    }
    // Bob follows the same URL: his feed has its own icon URL.
    let bob = Reader::new(&app, "bob").await;
    let bobs = bob.follow(&server.url("/feed.xml")).await;
    assert_eq!(bob.refresh(&bobs).await["status"], "SUCCEEDED");
    let bobs_url = signed(&app, &bobs, &icon_url(&bob, &bobs).await);
    assert_ne!(bobs_url, url);
    assert_eq!(get(&bobs_url).await.status(), 200);
    // A new icon at the site is a new URL; the old one no longer answers.
    let mut bigger = png();
    bigger.extend_from_slice(b"trailing bytes a PNG decoder ignores");
    server.set("/img/icon.png", Route::ok("image/png", bigger.clone()));
    age_icons(&app, chrono::TimeDelta::days(8)).await;
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    let renewed = signed(&app, &feed, &icon_url(&ada, &feed).await);
    assert_ne!(renewed, url);
    assert_eq!(get(&renewed).await.bytes().await.unwrap().to_vec(), bigger);
    assert_eq!(get(&url).await.status(), 404);
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
    // The same signed URL GraphQL gives.
    let icon = signed(&app, &feed, &subscription(&feed)["iconUrl"]);
    assert_eq!(json!(icon), icon_url(&ada, &feed).await);
    assert_eq!(subscription(&bare)["iconUrl"], "");
    // The app's image loader fetches it without any credential.
    let response = get(&icon).await;
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

    // The miss is remembered: the next pull does not ask the site again.
    server.set("/favicon.ico", Route::ok("image/x-icon", png()));
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    assert_eq!((server.hits("/site/"), server.hits("/favicon.ico")), (1, 1));
    assert_eq!(icon_url(&ada, &feed).await, Value::Null);

    // A day later it looks again, and picks up what the site serves now.
    age_icons(&app, chrono::TimeDelta::hours(25)).await;
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    assert_eq!(server.hits("/favicon.ico"), 2);
    let url = signed(&app, &feed, &icon_url(&ada, &feed).await);
    assert_eq!(get(&url).await.bytes().await.unwrap().to_vec(), png());
}
