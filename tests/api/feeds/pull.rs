//! Pulling: every format, conditional GET, failures and back-off,
//! `Retry-After`, hostile and slow publishers, the pull limits, the
//! scheduler and the SSRF guard.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::{
    feedserver::{FeedServer, Route, rss2, utf16be_rss},
    helpers::{AppOptions, Backend, spawn_app_with},
    websocket::{next, subscribe},
};

use super::{Reader, app, time};

crate::on_both_backends!(
    every_format_is_pulled_sanitized_and_listed,
    content_is_sanitized_once_when_stored,
    conditional_get_304_keeps_validators,
    failing_feed_backs_off_and_recovers,
    retry_after_in_seconds_and_as_a_date_holds_the_feed,
    timeouts_oversized_and_malformed_bodies_fail_cleanly,
    redirects_are_followed_and_gzip_is_decoded,
    a_hold_before_the_first_check_is_due_when_it_ends,
    scheduler_pulls_new_feeds_and_subscribers_hear_it,
    hostile_publishers_cannot_break_the_worker,
    a_utf16_feed_with_a_bom_is_read,
);

mod limits {
    #[tokio::test]
    async fn pulls_respect_the_global_and_per_host_limits() {
        super::pulls_respect_the_global_and_per_host_limits().await
    }
}

crate::on_every_runner!(a_hanging_publisher_never_keeps_resource_tasks_waiting,);

mod ssrf {
    #[tokio::test]
    async fn private_targets_are_refused_and_never_fetched() {
        super::private_targets_are_refused_and_never_fetched().await
    }

    #[tokio::test]
    async fn a_redirect_to_a_private_address_is_refused() {
        super::a_redirect_to_a_private_address_is_refused().await
    }
}

/// `b - a` in whole seconds.
fn seconds_between(a: &Value, b: &Value) -> i64 {
    (time(b) - time(a)).num_seconds()
}

const RSS1: &str = r#"<?xml version="1.0"?><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/" xmlns:dc="http://purl.org/dc/elements/1.1/">
  <channel rdf:about="https://rdf.example/"><title>RDF Site</title><link>https://rdf.example/</link></channel>
  <item rdf:about="https://rdf.example/1"><title>RDF one</title><link>https://rdf.example/1</link><description>first rdf</description><dc:date>2026-11-20T10:00:00Z</dc:date></item>
</rdf:RDF>"#;

const ATOM: &str = r#"<?xml version="1.0" encoding="utf-8"?><feed xmlns="http://www.w3.org/2005/Atom">
  <title>Atom Site</title><link rel="alternate" href="https://atom.example/blog/"/><id>urn:atom</id><updated>2026-11-29T10:00:00Z</updated>
  <entry><title>Atom one</title><id>urn:atom:1</id><link href="https://atom.example/blog/1"/><updated>2026-11-29T10:00:00Z</updated>
    <content type="html">&lt;p onclick="x()"&gt;Hello &lt;a href="/about"&gt;about&lt;/a&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src="pics/cat.png"&gt;&lt;/p&gt;</content></entry>
  <entry><title>Atom two</title><id>urn:atom:2</id><link href="https://atom.example/blog/2"/><updated>2026-11-28T10:00:00Z</updated><summary>only a summary</summary></entry>
</feed>"#;

const JSON_FEED: &str = r#"{"version":"https://jsonfeed.org/version/1.1","title":"JSON Site","home_page_url":"https://json.example/",
  "items":[{"id":"j1","url":"https://json.example/j1","title":"JSON one","content_html":"<p>json body</p>","date_published":"2026-11-27T10:00:00Z"}]}"#;

async fn every_format_is_pulled_sanitized_and_listed(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set(
        "/rss2.xml",
        Route::rss(rss2(
            "RSS Two",
            &[("a", "Alpha", "<b>alpha</b>"), ("b", "Beta", "beta")],
        )),
    );
    server.set("/rss1.xml", Route::ok("application/rdf+xml", RSS1));
    server.set("/atom.xml", Route::ok("application/atom+xml", ATOM));
    server.set("/feed.json", Route::ok("application/feed+json", JSON_FEED));
    let reader = Reader::new(&app, "ada").await;
    let mut ids = Vec::new();
    for path in ["/rss2.xml", "/rss1.xml", "/atom.xml", "/feed.json"] {
        ids.push(reader.follow(&server.url(path)).await);
    }

    let task = reader.refresh_all().await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
    assert_eq!(task["result"]["succeeded"], 4, "{task}");
    assert_eq!(task["result"]["newItems"], 6, "{task}");

    let rss = reader.feed(&ids[0]).await;
    assert_eq!(rss["name"], "RSS Two", "named from the feed's title");
    assert_eq!(rss["siteUrl"], "https://publisher.example/");
    assert_eq!(rss["itemCount"], 2);
    assert_eq!(rss["unreadCount"], 2);
    assert_eq!(rss["fetchState"]["lastHttpStatus"], 200);
    assert_eq!(rss["fetchState"]["consecutiveFailures"], 0);

    let items = reader.items(json!({})).await;
    assert_eq!(items.len(), 6);
    let dates: Vec<DateTime<Utc>> = items.iter().map(|item| time(&item["pubDate"])).collect();
    assert!(
        dates.windows(2).all(|w| w[0] >= w[1]),
        "newest first: {dates:?}"
    );

    let atom = reader.items(json!({ "feedId": ids[2] })).await;
    let one = atom
        .iter()
        .find(|item| item["title"] == "Atom one")
        .unwrap();
    let content = one["content"].as_str().unwrap();
    assert!(
        !content.contains("script") && !content.contains("onclick"),
        "{content}"
    );
    assert!(
        content.contains(r#"href="https://atom.example/about""#),
        "{content}"
    );
    assert!(
        content.contains(r#"src="https://atom.example/blog/pics/cat.png""#),
        "{content}"
    );
    assert!(
        one["rawContent"].as_str().unwrap().contains("<script>"),
        "raw content is kept"
    );
    let two = atom
        .iter()
        .find(|item| item["title"] == "Atom two")
        .unwrap();
    assert_eq!(
        two["rawContent"], "only a summary",
        "content falls back to the summary"
    );

    let rss_items = reader.items(json!({ "feedId": ids[0] })).await;
    assert!(
        rss_items
            .iter()
            .any(|item| item["link"] == server.url("/posts/a").as_str()),
        "relative links resolve against the feed's URL: {rss_items:?}"
    );

    // Refetching the same document adds nothing.
    let again = reader.refresh_all().await;
    assert_eq!(again["result"]["newItems"], 0, "{again}");
    assert_eq!(reader.items(json!({})).await.len(), 6);
}

async fn conditional_get_304_keeps_validators(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let mut route = Route::rss(rss2("Cached", &[("c1", "One", "one")]))
        .header("last-modified", "Sun, 29 Nov 2026 10:00:00 GMT")
        .header("cache-control", "max-age=7200");
    route.etag = Some("\"v1\"".into());
    route.etag_on_304 = false;
    server.set("/cached.xml", route);
    let reader = Reader::new(&app, "ada").await;
    let feed = reader.follow(&server.url("/cached.xml")).await;

    assert_eq!(reader.refresh(&feed).await["status"], "SUCCEEDED");
    let first = reader.feed(&feed).await["fetchState"].clone();
    assert_eq!(first["etag"], "\"v1\"");
    assert_eq!(first["lastModified"], "Sun, 29 Nov 2026 10:00:00 GMT");
    assert_eq!(
        seconds_between(&first["lastCheckedAt"], &first["nextCheckAt"]),
        7200,
        "max-age beats the 30 min interval"
    );

    let task = reader.refresh(&feed).await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
    assert_eq!(task["result"]["outcome"], "NOT_MODIFIED");
    assert_eq!(
        server
            .last_header("/cached.xml", "if-none-match")
            .as_deref(),
        Some("\"v1\"")
    );
    assert_eq!(
        server
            .last_header("/cached.xml", "if-modified-since")
            .as_deref(),
        Some("Sun, 29 Nov 2026 10:00:00 GMT")
    );
    let second = reader.feed(&feed).await["fetchState"].clone();
    assert_eq!(second["lastHttpStatus"], 304);
    assert_eq!(
        second["etag"], "\"v1\"",
        "a 304 without ETag keeps the stored one"
    );
    assert_eq!(second["lastModified"], "Sun, 29 Nov 2026 10:00:00 GMT");
    assert_eq!(
        seconds_between(&second["lastCheckedAt"], &second["nextCheckAt"]),
        7200,
        "the kept Cache-Control still applies"
    );
    assert_eq!(reader.items(json!({})).await.len(), 1);
}

async fn failing_feed_backs_off_and_recovers(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/flaky.xml", Route::status(500));
    let reader = Reader::new(&app, "ada").await;
    let feed = reader.follow(&server.url("/flaky.xml")).await;

    let task = reader.refresh(&feed).await;
    assert_eq!(task["status"], "FAILED");
    assert_eq!(task["error"], "HTTP 500 Internal Server Error");
    let state = reader.feed(&feed).await["fetchState"].clone();
    assert_eq!(state["consecutiveFailures"], 1);
    assert_eq!(state["lastError"], "HTTP 500 Internal Server Error");
    assert_eq!(state["lastHttpStatus"], 500);
    // 1800 × 1.8¹
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["nextCheckAt"]),
        3240
    );

    reader.refresh(&feed).await;
    let state = reader.feed(&feed).await["fetchState"].clone();
    assert_eq!(state["consecutiveFailures"], 2);
    // 1800 × 1.8² = 5832
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["nextCheckAt"]),
        5832
    );

    server.set(
        "/flaky.xml",
        Route::rss(rss2("Back", &[("r", "Recovered", "ok")])),
    );
    assert_eq!(reader.refresh(&feed).await["status"], "SUCCEEDED");
    let state = reader.feed(&feed).await["fetchState"].clone();
    assert_eq!(state["consecutiveFailures"], 0);
    assert_eq!(state["lastHttpStatus"], 200);
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["nextCheckAt"]),
        1800
    );
    assert_eq!(reader.items(json!({})).await.len(), 1);
}

async fn retry_after_in_seconds_and_as_a_date_holds_the_feed(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set(
        "/busy.xml",
        Route::status(429).header("retry-after", "10000"),
    );
    let reader = Reader::new(&app, "ada").await;
    let feed = reader.follow(&server.url("/busy.xml")).await;

    reader.refresh(&feed).await;
    let state = reader.feed(&feed).await["fetchState"].clone();
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["retryAfterUntil"]),
        10000
    );
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["nextCheckAt"]),
        10000,
        "Retry-After beats interval and backoff"
    );

    let until = (Utc::now() + chrono::Duration::hours(20)).format("%a, %d %b %Y %H:%M:%S GMT");
    server.set(
        "/busy.xml",
        Route::status(503).header("retry-after", &until.to_string()),
    );
    reader.refresh(&feed).await;
    let state = reader.feed(&feed).await["fetchState"].clone();
    let held = seconds_between(&state["lastCheckedAt"], &state["retryAfterUntil"]);
    assert!((71_990..=72_000).contains(&held), "held {held} s");
    assert_eq!(state["lastHttpStatus"], 503);
}

async fn timeouts_oversized_and_malformed_bodies_fail_cleanly(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true")
            .env("TRELLIS_PULL_TIMEOUT", "1")
            .env("TRELLIS_FETCH_MAX_BYTES", "100000"),
    )
    .await;
    let server = FeedServer::start().await;
    let reader = Reader::new(&app, "ada").await;

    server.set(
        "/slow.xml",
        Route {
            delay: Some(Duration::from_secs(4)),
            ..Route::rss(rss2("Slow", &[("s", "Slow", "s")]))
        },
    );
    let slow = reader.follow(&server.url("/slow.xml")).await;
    reader.refresh(&slow).await;
    let error = reader.feed(&slow).await["fetchState"]["lastError"].clone();
    assert!(error.as_str().unwrap().contains("timed out"), "{error}");

    let big = "x".repeat(200_000);
    server.set("/big.xml", Route::rss(rss2("Big", &[("b", "Big", &big)])));
    let oversized = reader.follow(&server.url("/big.xml")).await;
    reader.refresh(&oversized).await;
    let error = reader.feed(&oversized).await["fetchState"]["lastError"].clone();
    assert!(
        error.as_str().unwrap().contains("larger than 100000 bytes"),
        "{error}"
    );

    // The same cap holds for a body that only grows when decompressed.
    server.set(
        "/bomb.xml",
        Route {
            gzip: true,
            ..Route::rss(rss2("Bomb", &[("b", "Bomb", &big)]))
        },
    );
    let bomb = reader.follow(&server.url("/bomb.xml")).await;
    reader.refresh(&bomb).await;
    let error = reader.feed(&bomb).await["fetchState"]["lastError"].clone();
    assert!(error.as_str().unwrap().contains("larger than"), "{error}");

    server.set(
        "/good.xml",
        Route::rss(rss2("Good", &[("g1", "Kept", "kept")])),
    );
    let good = reader.follow(&server.url("/good.xml")).await;
    reader.refresh(&good).await;
    server.set("/good.xml", Route::rss("<rss><channel><item><title>broken"));
    let task = reader.refresh(&good).await;
    assert_eq!(task["status"], "FAILED");
    let state = reader.feed(&good).await;
    assert!(
        state["fetchState"]["lastError"]
            .as_str()
            .unwrap()
            .starts_with("not a valid RSS, Atom or JSON feed"),
        "{state}"
    );
    assert_eq!(
        state["itemCount"], 1,
        "a malformed document loses no stored item"
    );
}

async fn redirects_are_followed_and_gzip_is_decoded(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/old.xml", Route::redirect("/new.xml"));
    server.set(
        "/new.xml",
        Route {
            gzip: true,
            ..Route::rss(rss2(
                "Moved",
                &[("m1", "Moved one", "m"), ("m2", "Moved two", "m")],
            ))
        },
    );
    server.set("/loop-a", Route::redirect("/loop-b"));
    server.set("/loop-b", Route::redirect("/loop-a"));
    let reader = Reader::new(&app, "ada").await;

    let moved = reader.follow(&server.url("/old.xml")).await;
    assert_eq!(reader.refresh(&moved).await["status"], "SUCCEEDED");
    assert_eq!(reader.feed(&moved).await["itemCount"], 2);
    assert!(
        server
            .last_header("/new.xml", "accept-encoding")
            .unwrap()
            .contains("gzip"),
        "the client offers gzip"
    );

    let looping = reader.follow(&server.url("/loop-a")).await;
    reader.refresh(&looping).await;
    let error = reader.feed(&looping).await["fetchState"]["lastError"].clone();
    assert!(error.as_str().unwrap().contains("redirects"), "{error}");
}

/// The scheduler's rule, as the database runs it: a feed is due when its
/// `next_check_at` is unset or past and no `Retry-After` hold is in force;
/// suspended feeds never are. A hold set before the first check (a 429 on
/// the first pull) makes the feed due when the hold ends, not now — so the
/// scheduler neither pulls it early nor sleeps past an earlier feed.
async fn a_hold_before_the_first_check_is_due_when_it_ends(backend: Backend) {
    use migration::MigratorTrait;
    use sea_orm::{ActiveModelTrait, Set};
    use trellis::feeds::store::{claim_due_feeds, earliest_due};
    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    migration::Migrator::up(&db, None).await.unwrap();
    let now: DateTime<Utc> = "2026-12-02T12:00:00Z".parse().unwrap();
    let minutes = |n: i64| now + chrono::Duration::minutes(n);
    let user = entity::user::ActiveModel {
        id: Set(uuid::Uuid::now_v7()),
        username: Set("ada".to_owned()),
        password_hash: Set("not a hash".to_owned()),
        role: Set(entity::user::Role::Member),
        created_at: Set(now),
        updated_at: Set(now),
    }
    .insert(&db)
    .await
    .unwrap();
    let group = {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        entity::feed_group::Entity::find()
            .filter(entity::feed_group::Column::UserId.eq(user.id))
            .one(&db)
            .await
            .unwrap()
            .unwrap()
    };
    let feed = |name: &str, suspended: bool, next: Option<i64>, hold: Option<i64>| {
        let db = db.clone();
        let name = name.to_owned();
        async move {
            let feed = entity::feed::ActiveModel {
                user_id: Set(user.id),
                group_id: Set(group.id),
                name: Set(name.clone()),
                link: Set(format!("https://example.com/{name}.xml")),
                site_url: Set(None),
                suspended: Set(suspended),
                refresh_interval_seconds: Set(None),
                created_at: Set(now),
                updated_at: Set(now),
                ..Default::default()
            }
            .insert(&db)
            .await
            .unwrap();
            entity::feed_fetch_state::ActiveModel {
                feed_id: Set(feed.id),
                etag: Set(None),
                last_modified: Set(None),
                cache_control: Set(None),
                expires_at: Set(None),
                last_checked_at: Set(None),
                next_check_at: Set(next.map(minutes)),
                last_http_status: Set(None),
                retry_after_until: Set(hold.map(minutes)),
                last_success_at: Set(None),
                last_error_at: Set(None),
                last_error: Set(None),
                consecutive_failures: Set(0),
                updated_at: Set(now),
            }
            .insert(&db)
            .await
            .unwrap();
            feed.id
        }
    };
    let held = feed("held", false, None, Some(60)).await;
    let later = feed("later", false, Some(10), None).await;
    feed("suspended", true, None, None).await;

    assert_eq!(
        earliest_due(&db).await.unwrap(),
        Some(minutes(10)),
        "the earliest feed is the one due in 10 minutes, not the held one"
    );
    let claimed = |at: i64| {
        let db = db.clone();
        async move {
            let claimed = claim_due_feeds(&db, minutes(at), minutes(at + 180), 10)
                .await
                .unwrap();
            let mut ids: Vec<i64> = claimed.into_iter().map(|(id, _)| id).collect();
            ids.sort();
            ids
        }
    };
    assert_eq!(claimed(0).await, Vec::<i64>::new(), "nothing is due yet");
    assert_eq!(claimed(11).await, [later]);
    assert_eq!(earliest_due(&db).await.unwrap(), Some(minutes(60)));
    assert_eq!(claimed(59).await, Vec::<i64>::new(), "still held");
    assert_eq!(claimed(61).await, [held]);
}

async fn scheduler_pulls_new_feeds_and_subscribers_hear_it(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set(
        "/auto.xml",
        Route::rss(rss2(
            "Auto",
            &[("a1", "Auto one", "a"), ("a2", "Auto two", "a")],
        )),
    );
    let ada = Reader::new(&app, "ada").await;

    let mut socket = subscribe(
        &app,
        &ada.token,
        "f",
        "subscription { feedUpdated { newItems feed { name } fetchState { lastHttpStatus } } }",
        json!({}),
    )
    .await;
    // The subscription is live once it hears a pull made after it.
    server.set("/ready.xml", Route::rss(rss2("Ready", &[("r", "R", "r")])));
    ada.follow(&server.url("/ready.xml")).await;
    loop {
        let update = next(&mut socket).await.expect("a feedUpdated message");
        if update["payload"]["data"]["feedUpdated"]["feed"]["name"] == "Ready" {
            break;
        }
    }

    // No refresh call: creating the feed wakes the scheduler.
    let feed = ada.follow(&server.url("/auto.xml")).await;
    let update = next(&mut socket).await.expect("a feedUpdated message");
    assert_eq!(update["type"], "next", "{update}");
    let payload = &update["payload"]["data"]["feedUpdated"];
    assert_eq!(payload["newItems"], 2, "{update}");
    assert_eq!(payload["feed"]["name"], "Auto");
    assert_eq!(payload["fetchState"]["lastHttpStatus"], 200);
    assert_eq!(ada.feed(&feed).await["itemCount"], 2);
    assert_eq!(
        server.hits("/auto.xml"),
        1,
        "pulled once, then scheduled 30 min out"
    );
    // The scheduled pulls (of both feeds) are the feeds' owner's tasks,
    // nobody else's.
    let query = r#"{ tasks(filter: { kind: "feeds.pull" }) { edges { node { status } } } }"#;
    let mine = ada.data(query, json!({})).await;
    assert_eq!(
        mine["tasks"]["edges"].as_array().unwrap().len(),
        2,
        "{mine}"
    );
    let bob = Reader::new(&app, "bob").await;
    let theirs = bob.data(query, json!({})).await;
    assert_eq!(theirs["tasks"]["edges"], json!([]));
}

/// With the guard on (the default), nothing private is fetched, whichever
/// way the address is written; each feed says why.
async fn private_targets_are_refused_and_never_fetched() {
    let app = spawn_app_with(Backend::Sqlite, AppOptions::default()).await;
    let server = FeedServer::start().await;
    server.set(
        "/secret.xml",
        Route::rss(rss2("Secret", &[("s", "S", "s")])),
    );
    let port = server.addr.port();
    let ada = Reader::new(&app, "ada").await;
    let targets = [
        (format!("http://127.0.0.1:{port}/secret.xml"), "127.0.0.1"),
        (format!("http://localhost:{port}/secret.xml"), "localhost"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/secret.xml"),
            "127.0.0.1",
        ),
        (format!("http://[::1]:{port}/secret.xml"), "::1"),
        ("http://10.1.2.3/feed.xml".to_owned(), "10.1.2.3"),
        (
            "http://169.254.169.254/latest/meta-data".to_owned(),
            "169.254.169.254",
        ),
    ];
    let mut feeds = Vec::new();
    for (link, _) in &targets {
        feeds.push(ada.follow(link).await);
    }
    let task = ada.refresh_all().await;
    assert_eq!(task["result"]["failed"], targets.len(), "{task}");
    for (feed, (_, address)) in feeds.iter().zip(&targets) {
        let state = ada.feed(feed).await["fetchState"].clone();
        let error = state["lastError"].as_str().unwrap_or_default();
        assert!(
            error.contains("TRELLIS_ALLOW_PRIVATE_FEEDS") || error.contains("may not be fetched"),
            "{address}: {error}"
        );
        assert!(error.contains(address), "{address}: {error}");
        assert_eq!(state["lastHttpStatus"], Value::Null);
    }
    assert_eq!(
        server.total_hits(),
        0,
        "no request reached the private server"
    );
}

async fn a_redirect_to_a_private_address_is_refused() {
    // Only the publisher's own address is opened; its redirect to another
    // loopback address must not be followed.
    let app = spawn_app_with(
        Backend::Sqlite,
        AppOptions::default().env("TRELLIS_ALLOW_PRIVATE_NETWORKS", "127.0.0.1/32"),
    )
    .await;
    let server = FeedServer::start().await;
    let port = server.addr.port();
    server.set(
        "/hop.xml",
        Route::redirect(&format!("http://127.0.0.2:{port}/inner.xml")),
    );
    server.set("/inner.xml", Route::rss(rss2("Inner", &[("i", "I", "i")])));
    let ada = Reader::new(&app, "ada").await;
    let feed = ada.follow(&server.url("/hop.xml")).await;
    let task = ada.refresh(&feed).await;
    assert_eq!(task["status"], "FAILED");
    let error = ada.feed(&feed).await["fetchState"]["lastError"].clone();
    assert!(error.as_str().unwrap().contains("127.0.0.2"), "{error}");
    assert_eq!(server.hits("/hop.xml"), 1);
    assert_eq!(server.hits("/inner.xml"), 0);
}

/// Twelve slow feeds on four hosts, pulled at once: never more than
/// `TRELLIS_PULL_CONCURRENCY` (3) requests in flight, never more than 2 to
/// one host — and the limits are reached, so they are what paces the run.
async fn pulls_respect_the_global_and_per_host_limits() {
    let app = spawn_app_with(
        Backend::Sqlite,
        AppOptions::default()
            .env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true")
            .env("TRELLIS_PULL_CONCURRENCY", "3"),
    )
    .await;
    let server = FeedServer::start_on_hosts(4).await;
    let ada = Reader::new(&app, "ada").await;
    let mut feeds = Vec::new();
    for n in 0..12 {
        let path = format!("/slow-{n}.xml");
        server.set(
            &path,
            Route {
                delay: Some(Duration::from_millis(300)),
                ..Route::rss(rss2("Slow", &[("s", "S", "s")]))
            },
        );
        feeds.push(json!({ "link": server.url_on(n % 4, &path), "suspended": true }));
    }
    // Suspended feeds are left alone by the scheduler; manual refreshes are not.
    let tasks = ada.refresh_each(feeds).await;
    for task in &tasks {
        assert_eq!(ada.wait(task).await["status"], "SUCCEEDED");
    }
    let (total, per_host) = server.max_in_flight();
    assert_eq!(total, 3, "global limit: at most 3 at once, and reached");
    assert!(per_host <= 2, "per-host limit: {per_host} at once");
}

/// Pulls waiting for a busy host do not sit in `q:short` worker slots: with
/// three workers and a publisher that hangs its two allowed requests, four
/// more pulls of that host queue up — and a resource task still runs at
/// once. When the publisher answers, every pull ends, never more than two
/// at once against the host.
async fn a_hanging_publisher_never_keeps_resource_tasks_waiting(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true")
            .env("TRELLIS_QUEUE_SHORT_CONCURRENCY", "3")
            .env("TRELLIS_TASK_POLL_MS", "50"),
    )
    .await;
    let server = FeedServer::start().await;
    let gate = std::sync::Arc::new(tokio::sync::Semaphore::new(0));
    let ada = Reader::new(&app, "ada").await;
    let mut feeds = Vec::new();
    for n in 0..6 {
        let path = format!("/hanging-{n}.xml");
        server.set(
            &path,
            Route {
                gate: Some(gate.clone()),
                ..Route::rss(rss2("Hanging", &[("h", "H", "h")]))
            },
        );
        feeds.push(json!({ "link": server.url(&path), "suspended": true }));
    }
    let pulls = ada.refresh_each(feeds).await;
    server.wait_answering(2).await;

    let response = app
        .client
        .post(app.url("/resources"))
        .bearer_auth(&ada.token)
        .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
        .json(&json!({ "attributes": {
            "region": "eu", "zone": "a", "cluster": "k1", "namespace": "shop",
            "service": "cart", "instance": "i-1", "health": 0, "cpu": 1.0,
        } }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 202);
    let resource_task: Value = response.json().await.unwrap();
    let resource_task = resource_task["task_id"].as_str().unwrap();
    let done = crate::jobs::wait_terminal(&app, &ada.token, resource_task).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    // The publisher has answered nothing yet: every pull is still waiting.
    assert_eq!(server.answering(), 2);
    for pull in &pulls {
        let status = ada
            .data(
                "query($id: ID!) { task(id: $id) { status } }",
                json!({ "id": pull }),
            )
            .await["task"]["status"]
            .clone();
        assert!(status == "QUEUED" || status == "RUNNING", "{status}");
    }

    gate.add_permits(pulls.len());
    for pull in &pulls {
        let task = ada.wait(pull).await;
        assert_eq!(task["status"], "SUCCEEDED", "{task}");
        assert_eq!(
            task["attemptCount"], 1,
            "a deferral is not an attempt: {task}"
        );
    }
    let (_, per_host) = server.max_in_flight();
    assert_eq!(per_host, 2, "the host's limit held, and was reached");
}

/// Item HTML is sanitized when the item is stored, not on every read: the
/// stored row carries it beside the raw content. A row stored before that
/// (no sanitized HTML) is still served sanitized, and the next pull fills
/// it in.
async fn content_is_sanitized_once_when_stored(backend: Backend) {
    use sea_orm::{ConnectionTrait, EntityTrait};
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let raw = r#"<p onclick="steal()">Hi <a href="/about">about</a></p><script>alert(1)</script>"#;
    let feed = ada
        .pull_new(
            &server,
            "/dirty.xml",
            Route::rss(rss2("Dirty", &[("d1", "Dirty", raw)])),
        )
        .await;
    let db = app.database().await;
    let stored = || async {
        let rows = entity::item::Entity::find().all(&db).await.unwrap();
        assert_eq!(rows.len(), 1);
        rows.into_iter().next().unwrap()
    };
    let row = stored().await;
    assert_eq!(row.content, raw, "the raw content is kept as published");
    let html = row.content_html.expect("sanitized when stored");
    assert!(
        !html.contains("script") && !html.contains("onclick"),
        "{html}"
    );
    assert!(html.contains(&server.url("/about")), "{html}");
    assert_eq!(ada.items(json!({})).await[0]["content"], html.as_str());

    // As a row from before the column existed.
    db.execute_unprepared("UPDATE items SET content_html = NULL")
        .await
        .unwrap();
    assert_eq!(
        ada.items(json!({})).await[0]["content"],
        html.as_str(),
        "served sanitized all the same"
    );
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    assert_eq!(stored().await.content_html.as_deref(), Some(html.as_str()));
}

async fn hostile_publishers_cannot_break_the_worker(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;

    // A Retry-After far beyond any sane hold is capped like every delay.
    server.set(
        "/forever.xml",
        Route::status(429).header("retry-after", "100000000000000"),
    );
    let forever = ada.follow(&server.url("/forever.xml")).await;
    assert_eq!(ada.refresh(&forever).await["status"], "FAILED");
    let state = ada.feed(&forever).await["fetchState"].clone();
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["retryAfterUntil"]),
        172_800
    );
    assert_eq!(
        seconds_between(&state["lastCheckedAt"], &state["nextCheckAt"]),
        172_800
    );

    // NUL characters, an absurd guid and a javascript: link are stored safely.
    let json_feed = json!({
        "version": "https://jsonfeed.org/version/1.1",
        "title": "Hostile",
        "items": [{
            "id": "g".repeat(3000),
            "title": "nul\u{0}title",
            "content_html": "a\u{0}b",
            "url": "javascript:alert(1)",
            "date_published": "2026-11-20T10:00:00Z"
        }]
    })
    .to_string();
    let feed = ada
        .pull_new(
            &server,
            "/hostile.json",
            Route::ok("application/feed+json", json_feed),
        )
        .await;
    let items = ada.items(json!({ "feedId": feed })).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(items[0]["guid"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(items[0]["title"], "nultitle");
    assert_eq!(items[0]["rawContent"], "ab");
    assert_eq!(items[0]["link"], Value::Null);
    // The same document again is the same item.
    ada.refresh(&feed).await;
    assert_eq!(ada.items(json!({ "feedId": feed })).await.len(), 1);
}

/// A UTF-16BE feed with a BOM (which the parser once panicked on) is
/// decoded and read like any other.
async fn a_utf16_feed_with_a_bom_is_read(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let wide = ada
        .pull_new(&server, "/wide.xml", Route::rss(utf16be_rss()))
        .await;
    let items = ada.items(json!({ "feedId": wide })).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["title"], "Wide one");
    assert_eq!(ada.feed(&wide).await["name"], "Wide");
}
