//! The feed reader end to end: a loopback publisher serves RSS 2.0, RSS 1.0,
//! Atom and JSON Feed (and misbehaves on purpose), the real server pulls
//! through its job runner, and everything is checked through GraphQL — on
//! SQLite and on PostgreSQL.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Value, json};

use crate::{
    feedserver::{FeedServer, Route, rss2, utf16be_rss},
    helpers::{AppOptions, Backend, TestApp, spawn_app_with},
    on_both_backends,
    websocket::{next, subscribe},
};

on_both_backends!(
    nested_lists_are_priced_by_their_size,
    every_format_is_pulled_sanitized_and_listed,
    content_is_sanitized_once_when_stored,
    conditional_get_304_keeps_validators,
    failing_feed_backs_off_and_recovers,
    retry_after_in_seconds_and_as_a_date_holds_the_feed,
    timeouts_oversized_and_malformed_bodies_fail_cleanly,
    redirects_are_followed_and_gzip_is_decoded,
    full_text_search_finds_prefixes_and_stays_per_user,
    ranked_search_is_planned_from_the_index_and_time_bounded,
    two_users_never_see_each_others_data,
    bookmark_survives_its_feeds_deletion,
    groups_read_state_and_stars,
    the_default_group_comes_with_the_user_and_reads_write_nothing,
    users_from_before_the_rule_get_their_default_group,
    a_hold_before_the_first_check_is_due_when_it_ends,
    scheduler_pulls_new_feeds_and_subscribers_hear_it,
    settings_round_trip,
    opml_round_trip,
    control_characters_never_reach_an_opml_export,
    discovery_finds_linked_feeds,
    retention_deletes_only_old_read_items,
    hostile_publishers_cannot_break_the_worker,
    a_utf16_feed_with_a_bom_is_read,
    fever_api_serves_and_marks_the_users_items,
    google_reader_api_serves_and_edits_the_users_items,
    google_reader_continuations_hold_their_place_while_items_arrive,
);

mod limits {
    #[tokio::test]
    async fn pulls_respect_the_global_and_per_host_limits() {
        super::pulls_respect_the_global_and_per_host_limits().await
    }
}

crate::on_every_runner!(a_hanging_publisher_never_keeps_resource_tasks_waiting);

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

/// The app with its SSRF guard opened for the loopback publisher.
pub(crate) async fn app(backend: Backend) -> TestApp {
    spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true"),
    )
    .await
}

/// One signed-in user's GraphQL calls.
pub(crate) struct Reader<'a> {
    pub(crate) app: &'a TestApp,
    pub(crate) token: String,
}

impl<'a> Reader<'a> {
    pub(crate) async fn new(app: &'a TestApp, username: &str) -> Self {
        Reader {
            app,
            token: app.member(username).await.access,
        }
    }

    pub(crate) async fn raw(&self, query: &str, variables: Value) -> crate::helpers::GqlResponse {
        self.app
            .gql(query, variables)
            .bearer(&self.token)
            .send()
            .await
    }

    pub(crate) async fn data(&self, query: &str, variables: Value) -> Value {
        self.raw(query, variables).await.data().clone()
    }

    pub(crate) async fn follow(&self, link: &str) -> String {
        let data = self
            .data(
                "mutation($i: CreateFeedInput!) { createFeed(input: $i) { id } }",
                json!({ "i": { "link": link } }),
            )
            .await;
        data["createFeed"]["id"].as_str().unwrap().to_owned()
    }

    /// Publishes `route` at `path`, follows it and pulls it once; returns the feed id.
    pub(crate) async fn pull_new(&self, server: &FeedServer, path: &str, route: Route) -> String {
        server.set(path, route);
        let feed = self.follow(&server.url(path)).await;
        let task = self.refresh(&feed).await;
        assert_eq!(task["status"], "SUCCEEDED", "{task}");
        feed
    }

    /// Refreshes one feed and waits for its task to end; returns the task.
    pub(crate) async fn refresh(&self, feed: &str) -> Value {
        let data = self
            .data(
                "mutation($id: ID!) { refreshFeed(id: $id) { id } }",
                json!({ "id": feed }),
            )
            .await;
        self.wait(data["refreshFeed"]["id"].as_str().unwrap()).await
    }

    /// Creates `feeds` (`CreateFeedInput`s) and asks for a refresh of each,
    /// without waiting; returns the refresh tasks' ids.
    pub(crate) async fn refresh_each(&self, feeds: Vec<Value>) -> Vec<String> {
        let created = self
            .data(
                "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
                json!({ "i": feeds }),
            )
            .await;
        let mut tasks = Vec::new();
        for feed in created["createFeeds"].as_array().unwrap() {
            let task = self
                .data(
                    "mutation($id: ID!) { refreshFeed(id: $id) { id } }",
                    json!({ "id": feed["id"] }),
                )
                .await;
            tasks.push(task["refreshFeed"]["id"].as_str().unwrap().to_owned());
        }
        tasks
    }

    pub(crate) async fn refresh_all(&self) -> Value {
        let data = self
            .data("mutation { refreshAllFeeds { id } }", json!({}))
            .await;
        self.wait(data["refreshAllFeeds"]["id"].as_str().unwrap())
            .await
    }

    /// Imports an OPML document and waits for its task to end.
    pub(crate) async fn import_opml(&self, opml: &str) -> Value {
        let task = self
            .data(
                "mutation($o: String!) { importOpml(opml: $o) { id } }",
                json!({ "o": opml }),
            )
            .await["importOpml"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        self.wait(&task).await
    }

    pub(crate) async fn wait(&self, task: &str) -> Value {
        for _ in 0..600 {
            let data = self
                .data(
                    "query($id: ID!) { task(id: $id) { status error result attemptCount } }",
                    json!({ "id": task }),
                )
                .await;
            let status = data["task"]["status"].as_str().unwrap_or_default();
            if !["QUEUED", "RUNNING"].contains(&status) {
                return data["task"].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("task {task} did not finish");
    }

    pub(crate) async fn feed(&self, id: &str) -> Value {
        self.data(
            "query($id: ID!) { feed(id: $id) { id name siteUrl unreadCount itemCount
                fetchState { etag lastModified lastCheckedAt nextCheckAt lastHttpStatus retryAfterUntil
                             lastSuccessAt lastError consecutiveFailures } } }",
            json!({ "id": id }),
        )
        .await["feed"]
            .clone()
    }

    pub(crate) async fn items(&self, filter: Value) -> Vec<Value> {
        self.data(
            "query($f: ItemFilter) { items(filter: $f, first: 200) { edges { node {
                id feedId guid title link content rawContent pubDate unread starred } } } }",
            json!({ "f": filter }),
        )
        .await["items"]["edges"]
            .as_array()
            .unwrap()
            .iter()
            .map(|edge| edge["node"].clone())
            .collect()
    }
}

fn time(value: &Value) -> DateTime<Utc> {
    value
        .as_str()
        .unwrap_or_else(|| panic!("a timestamp, got {value}"))
        .parse()
        .unwrap()
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

async fn full_text_search_finds_prefixes_and_stays_per_user(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    ada.pull_new(
        &server,
        "/search.xml",
        Route::rss(rss2(
            "Metallurgy Weekly",
            &[
                ("s1", "Ferrous alloys explained", "<p>iron and carbon</p>"),
                ("s2", "Copper wiring", "<p>a ferromagnetic aside</p>"),
                ("s3", "Gardening", "<p>tomatoes</p>"),
            ],
        )),
    )
    .await;

    let titles = |items: Vec<Value>| -> Vec<String> {
        items
            .iter()
            .map(|i| i["title"].as_str().unwrap().to_owned())
            .collect()
    };
    let found = titles(ada.items(json!({ "query": "ferr" })).await);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found.contains(&"Ferrous alloys explained".to_owned()));
    assert!(
        titles(ada.items(json!({ "query": "iron carb" })).await) == ["Ferrous alloys explained"]
    );
    assert!(
        ada.items(json!({ "query": "tomatoes copper" }))
            .await
            .is_empty(),
        "all terms are required"
    );
    assert_eq!(
        ada.items(json!({ "query": "\"OR* NEAR(" })).await.len(),
        0,
        "query syntax is inert"
    );

    let result = ada
        .data(
            "query { search(query: \"ferr\") { feeds { name } items { title } } }",
            json!({}),
        )
        .await;
    let ranked: Vec<&str> = result["search"]["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["title"].as_str().unwrap())
        .collect();
    assert_eq!(
        ranked.first(),
        Some(&"Ferrous alloys explained"),
        "title matches rank first: {ranked:?}"
    );
    let feeds = ada
        .data(
            "query { search(query: \"metallurgy\") { feeds { name } items { title } } }",
            json!({}),
        )
        .await;
    assert_eq!(feeds["search"]["feeds"][0]["name"], "Metallurgy Weekly");
    let wildcard = ada
        .data(
            "query { search(query: \"%\") { feeds { name } } }",
            json!({}),
        )
        .await;
    assert_eq!(
        wildcard["search"]["feeds"],
        json!([]),
        "LIKE wildcards are literal"
    );

    let bob = Reader::new(&app, "bob").await;
    assert!(bob.items(json!({ "query": "ferr" })).await.is_empty());
    let theirs = bob
        .data(
            "query { search(query: \"ferr\") { feeds { name } items { title } } }",
            json!({}),
        )
        .await;
    assert_eq!(theirs["search"]["items"], json!([]));
}

/// The ranked search on SQLite is driven by the FTS index (not one match
/// per item), every search stops at `TRELLIS_SEARCH_TIMEOUT_MS` with a
/// client error, the server goes on serving, and a NUL in the query is the
/// client's mistake on both backends.
async fn ranked_search_is_planned_from_the_index_and_time_bounded(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default()
            .env("TRELLIS_ALLOW_PRIVATE_FEEDS", "true")
            // Far less than ranking thousands of matches takes.
            .env("TRELLIS_SEARCH_TIMEOUT_MS", "1"),
    )
    .await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let entries: String = (0..5000)
        .map(|n| {
            format!(
                "<item><guid>g{n}</guid><title>Gazette item {n}</title><link>/p/{n}</link>\
                 <description>gazette gardening gossip about gates, number {n}</description>\
                 <pubDate>Mon, 30 Nov 2026 10:00:00 GMT</pubDate></item>"
            )
        })
        .collect();
    let body = format!(
        r#"<?xml version="1.0" encoding="utf-8"?><rss version="2.0"><channel><title>Big</title><link>https://big.example/</link>{entries}</channel></rss>"#
    );
    ada.pull_new(&server, "/big.xml", Route::rss(body)).await;

    let search = "query($q: String!) { search(query: $q) { items { id } } }";
    let slow = ada.raw(search, json!({ "q": "g" })).await;
    assert_eq!(slow.error_code(), Some("BAD_USER_INPUT"), "{:?}", slow.body);
    assert!(
        slow.body.to_string().contains("took longer than 1 ms"),
        "{:?}",
        slow.body
    );
    let nul = ada.raw(search, json!({ "q": "a\u{0}b" })).await;
    assert_eq!(nul.error_code(), Some("BAD_USER_INPUT"), "{:?}", nul.body);
    // Still serving, the same connection pool included.
    assert_eq!(ada.items(json!({})).await.len(), 200);

    if backend == Backend::Sqlite {
        let db = app.database().await;
        let statement = trellis::feeds::search::ranked_statement(
            sea_orm::DatabaseBackend::Sqlite,
            uuid::Uuid::new_v4(),
            "gazette",
            50,
        );
        let plan = sea_orm::ConnectionTrait::query_all_raw(
            &db,
            sea_orm::Statement::from_sql_and_values(
                sea_orm::DatabaseBackend::Sqlite,
                format!("EXPLAIN QUERY PLAN {}", statement.sql),
                statement.values.map(|values| values.0).unwrap_or_default(),
            ),
        )
        .await
        .unwrap();
        let steps: Vec<String> = plan
            .iter()
            .map(|row| row.try_get::<String>("", "detail").unwrap())
            .collect();
        assert!(
            steps[0].starts_with("SCAN items_fts VIRTUAL TABLE"),
            "the full-text match drives the join: {steps:?}"
        );
    }
}

async fn two_users_never_see_each_others_data(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let bob = Reader::new(&app, "bob").await;
    let ada_feed = ada
        .pull_new(
            &server,
            "/shared.xml",
            Route::rss(rss2("Shared", &[("x", "X", "x")])),
        )
        .await;
    let ada_item = ada.items(json!({})).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ada.data(
        "mutation($i: [ID!]!) { starItems(ids: $i) }",
        json!({ "i": [ada_item] }),
    )
    .await;
    let bookmark = ada
        .data(
            "mutation($i: CreateBookmarkInput!) { createBookmark(input: $i) { id } }",
            json!({ "i": { "itemId": ada_item } }),
        )
        .await["createBookmark"]["id"]
        .clone();

    // Bob sees none of it, and cannot touch it.
    let seen = bob
        .data(
            "query($f: ID!, $i: ID!, $b: ID!) { feeds { id } feed(id: $f) { id } item(id: $i) { id }
               bookmark(id: $b) { id } bookmarks { edges { node { id } } } items { edges { node { id } } } }",
            json!({ "f": ada_feed, "i": ada_item, "b": bookmark }),
        )
        .await;
    assert_eq!(seen["feeds"], json!([]));
    assert_eq!(seen["feed"], Value::Null);
    assert_eq!(seen["item"], Value::Null);
    assert_eq!(seen["bookmark"], Value::Null);
    assert_eq!(seen["bookmarks"]["edges"], json!([]));
    assert_eq!(seen["items"]["edges"], json!([]));
    let marked = bob
        .data(
            "mutation($i: [ID!]!) { markItemsRead(ids: $i) }",
            json!({ "i": [ada_item] }),
        )
        .await;
    assert_eq!(marked["markItemsRead"], 0);
    let deleted = bob
        .raw(
            "mutation($f: ID!) { deleteFeed(id: $f) }",
            json!({ "f": ada_feed }),
        )
        .await;
    assert_eq!(deleted.error_code(), Some("NOT_FOUND"));
    let refresh = bob
        .raw(
            "mutation($f: ID!) { refreshFeed(id: $f) { id } }",
            json!({ "f": ada_feed }),
        )
        .await;
    assert_eq!(refresh.error_code(), Some("NOT_FOUND"));
    let all = bob
        .data("mutation { markAllRead(all: true) }", json!({}))
        .await;
    assert_eq!(all["markAllRead"], 0);

    // Both may follow the same URL; read state stays each user's own.
    let bob_feed = bob.follow(&server.url("/shared.xml")).await;
    bob.refresh(&bob_feed).await;
    bob.data("mutation { markAllRead(all: true) }", json!({}))
        .await;
    let ada_view = ada.items(json!({})).await;
    assert_eq!(ada_view[0]["unread"], true);
    assert_eq!(ada_view[0]["starred"], true);
    assert_eq!(bob.items(json!({})).await[0]["unread"], false);

    let anonymous = app.gql("{ feeds { id } }", json!({})).send().await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
}

async fn bookmark_survives_its_feeds_deletion(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let feed = ada
        .pull_new(
            &server,
            "/gone.xml",
            Route::rss(rss2("Gone soon", &[("k", "Keep me", "<p>precious</p>")])),
        )
        .await;
    let item = ada.items(json!({})).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let saved = ada
        .data(
            "mutation($i: CreateBookmarkInput!) { createBookmark(input: $i) { id itemId feedId feedName } }",
            json!({ "i": { "itemId": item } }),
        )
        .await["createBookmark"]
        .clone();
    assert_eq!(saved["itemId"], item.as_str());
    assert_eq!(saved["feedName"], "Gone soon");
    let duplicate = ada
        .raw(
            "mutation($i: CreateBookmarkInput!) { createBookmark(input: $i) { id } }",
            json!({ "i": { "itemId": item } }),
        )
        .await;
    assert_eq!(duplicate.error_code(), Some("CONFLICT"));

    ada.data(
        "mutation($f: ID!) { deleteFeed(id: $f) }",
        json!({ "f": feed }),
    )
    .await;
    let after = ada
        .data(
            "query($b: ID!) { bookmark(id: $b) { title itemId feedId content link } items { edges { node { id } } } }",
            json!({ "b": saved["id"] }),
        )
        .await;
    assert_eq!(
        after["items"]["edges"],
        json!([]),
        "the feed's items are gone"
    );
    assert_eq!(after["bookmark"]["title"], "Keep me");
    assert_eq!(after["bookmark"]["itemId"], Value::Null);
    assert_eq!(after["bookmark"]["feedId"], Value::Null);
    assert!(
        after["bookmark"]["content"]
            .as_str()
            .unwrap()
            .contains("precious")
    );

    let snapshot = ada
        .data(
            "mutation($i: CreateBookmarkInput!) { createBookmark(input: $i) { title } }",
            json!({ "i": { "link": "https://elsewhere.example/a", "title": "Snap", "content": "<p>s</p>" } }),
        )
        .await;
    assert_eq!(snapshot["createBookmark"]["title"], "Snap");
    let list = ada
        .data("{ bookmarks { edges { node { title } } } }", json!({}))
        .await;
    assert_eq!(list["bookmarks"]["edges"].as_array().unwrap().len(), 2);
}

/// The user's default feed groups, read straight from the database.
async fn default_groups(db: &sea_orm::DatabaseConnection, user: uuid::Uuid) -> Vec<String> {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    entity::feed_group::Entity::find()
        .filter(entity::feed_group::Column::UserId.eq(user))
        .filter(entity::feed_group::Column::IsDefault.eq(true))
        .all(db)
        .await
        .unwrap()
        .into_iter()
        .map(|group| group.name)
        .collect()
}

/// Every user has their default group from the moment the user exists,
/// however the user was made; listing groups writes nothing.
async fn the_default_group_comes_with_the_user_and_reads_write_nothing(backend: Backend) {
    use sea_orm::{EntityTrait, PaginatorTrait};
    let app = app(backend).await;
    let db = app.database().await;
    let admin = app.admin().await;
    let ada = app.member("ada").await;
    let me = app
        .gql("{ me { id } }", json!({}))
        .bearer(&ada.access)
        .send()
        .await;
    let ada_id: uuid::Uuid = me.data()["me"]["id"].as_str().unwrap().parse().unwrap();
    // Before any feeds request of hers: made with the account.
    assert_eq!(
        default_groups(&db, ada_id).await,
        [trellis::feeds::service::DEFAULT_GROUP_NAME]
    );
    let rows_before = entity::feed_group::Entity::find().count(&db).await.unwrap();
    assert_eq!(rows_before, 2, "the first admin's and ada's");
    let listed = app
        .gql("{ groups { name isDefault } }", json!({}))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        listed.data()["groups"],
        json!([{ "name": "Default", "isDefault": true }])
    );
    assert_eq!(
        entity::feed_group::Entity::find().count(&db).await.unwrap(),
        rows_before
    );
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

/// Accounts made before the default group came with the user get theirs
/// when the database is migrated; accounts made after get theirs at once.
async fn users_from_before_the_rule_get_their_default_group(backend: Backend) {
    use migration::MigratorTrait;
    use sea_orm::{ActiveModelTrait, Set};
    let dir = tempfile::tempdir().unwrap();
    let database = crate::helpers::TestDatabase::create(backend, dir.path()).await;
    let db = sea_orm::Database::connect(&database.url).await.unwrap();
    let user = |name: &str| entity::user::ActiveModel {
        id: Set(uuid::Uuid::now_v7()),
        username: Set(name.to_owned()),
        password_hash: Set("not a hash".to_owned()),
        role: Set(entity::user::Role::Member),
        created_at: Set(Utc::now()),
        updated_at: Set(Utc::now()),
    };
    // Up to the migration before the rule.
    migration::Migrator::up(&db, Some(14)).await.unwrap();
    let old = user("old").insert(&db).await.unwrap();
    assert!(default_groups(&db, old.id).await.is_empty());
    migration::Migrator::up(&db, None).await.unwrap();
    assert_eq!(default_groups(&db, old.id).await, ["Default"]);
    let new = user("new").insert(&db).await.unwrap();
    assert_eq!(default_groups(&db, new.id).await, ["Default"]);
    assert_eq!(default_groups(&db, old.id).await, ["Default"], "still one");
}

async fn groups_read_state_and_stars(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set(
        "/g1.xml",
        Route::rss(rss2(
            "G1",
            &[("1", "One", "1"), ("2", "Two", "2"), ("3", "Three", "3")],
        )),
    );
    server.set("/g2.xml", Route::rss(rss2("G2", &[("4", "Four", "4")])));
    let ada = Reader::new(&app, "ada").await;
    let tech = ada
        .data(
            "mutation { createGroup(name: \"Tech\") { id name isDefault } }",
            json!({}),
        )
        .await["createGroup"]
        .clone();
    assert_eq!(tech["isDefault"], false);
    let dup = ada
        .raw("mutation { createGroup(name: \"Tech\") { id } }", json!({}))
        .await;
    assert_eq!(dup.error_code(), Some("CONFLICT"));
    let g1 = ada
        .data(
            "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id group { name } } }",
            json!({ "i": [
                { "link": server.url("/g1.xml"), "groupId": tech["id"] },
                { "link": server.url("/g2.xml") }
            ] }),
        )
        .await["createFeeds"]
        .clone();
    assert_eq!(g1[0]["group"]["name"], "Tech");
    assert_eq!(g1[1]["group"]["name"], "Default");
    // A batch with one bad feed creates none.
    let bad = ada
        .raw(
            "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
            json!({ "i": [{ "link": server.url("/g3.xml") }, { "link": "ftp://nope.example/" }] }),
        )
        .await;
    assert_eq!(bad.error_code(), Some("BAD_USER_INPUT"));
    assert_eq!(
        ada.data("{ feeds { id } }", json!({})).await["feeds"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    let interval = ada
        .raw(
            "mutation($f: ID!) { updateFeed(id: $f, input: { refreshIntervalSeconds: 61 }) { id } }",
            json!({ "f": g1[0]["id"] }),
        )
        .await;
    assert_eq!(interval.error_code(), Some("BAD_USER_INPUT"));
    ada.refresh_all().await;

    // Read state: by ids, then everything in a group up to a date.
    let group_items = ada.items(json!({ "groupId": tech["id"] })).await;
    assert_eq!(group_items.len(), 3);
    let first = group_items[0]["id"].clone();
    let n = ada
        .data(
            "mutation($i: [ID!]!) { markItemsRead(ids: $i) }",
            json!({ "i": [first] }),
        )
        .await;
    assert_eq!(n["markItemsRead"], 1);
    assert_eq!(ada.items(json!({ "unread": false })).await.len(), 1);
    let n = ada
        .data(
            "mutation($i: [ID!]!) { markItemsUnread(ids: $i) }",
            json!({ "i": [first] }),
        )
        .await;
    assert_eq!(n["markItemsUnread"], 1);
    // `before` bounds arrival, not publication: items published 1–3 Nov
    // that arrived just now are all after 2 Nov, and all before a moment
    // from now.
    let mark_group = |before: String| {
        ada.data(
            "mutation($g: ID!, $b: DateTime!) { markAllRead(groupId: $g, before: $b) }",
            json!({ "g": tech["id"], "b": before }),
        )
    };
    let n = mark_group("2026-11-02T12:00:00Z".into()).await;
    assert_eq!(n["markAllRead"], 0, "published before, arrived after");
    let n = mark_group((Utc::now() + chrono::Duration::seconds(1)).to_rfc3339()).await;
    assert_eq!(n["markAllRead"], 3, "everything that had arrived");
    assert_eq!(ada.items(json!({ "unread": true })).await.len(), 1);
    let too_many: Vec<String> = (1..=1001).map(|i| i.to_string()).collect();
    let refused = ada
        .raw(
            "mutation($i: [ID!]!) { markItemsRead(ids: $i) }",
            json!({ "i": too_many }),
        )
        .await;
    assert_eq!(refused.error_code(), Some("BAD_USER_INPUT"));
    let ambiguous = ada.raw("mutation { markAllRead }", json!({})).await;
    assert_eq!(ambiguous.error_code(), Some("BAD_USER_INPUT"));

    let n = ada
        .data(
            "mutation($i: [ID!]!) { starItems(ids: $i) }",
            json!({ "i": [first] }),
        )
        .await;
    assert_eq!(n["starItems"], 1);
    assert_eq!(ada.items(json!({ "starred": true })).await.len(), 1);
    ada.data(
        "mutation($i: [ID!]!) { unstarItems(ids: $i) }",
        json!({ "i": [first] }),
    )
    .await;
    assert!(ada.items(json!({ "starred": true })).await.is_empty());

    // Deleting the group moves its feed to the default group.
    ada.data(
        "mutation($g: ID!) { deleteGroup(id: $g) }",
        json!({ "g": tech["id"] }),
    )
    .await;
    let groups = ada
        .data("{ groups { id name isDefault feeds { id } } }", json!({}))
        .await;
    assert_eq!(groups["groups"].as_array().unwrap().len(), 1);
    assert_eq!(groups["groups"][0]["feeds"].as_array().unwrap().len(), 2);
    let default = groups["groups"][0]["id"].clone();
    let undeletable = ada
        .raw(
            "mutation($g: ID!) { deleteGroup(id: $g) }",
            json!({ "g": default }),
        )
        .await;
    assert_eq!(undeletable.error_code(), Some("BAD_USER_INPUT"));
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

async fn settings_round_trip(backend: Backend) {
    let app = app(backend).await;
    let ada = Reader::new(&app, "ada").await;
    let fresh = ada
        .data(
            "{ settings { retentionDays unreadOnly oldestFirst } }",
            json!({}),
        )
        .await;
    assert_eq!(
        fresh["settings"],
        json!({ "retentionDays": null, "unreadOnly": null, "oldestFirst": null })
    );
    let set = ada
        .data(
            "mutation { updateSettings(input: { retentionDays: 30, unreadOnly: true }) { retentionDays unreadOnly oldestFirst } }",
            json!({}),
        )
        .await;
    assert_eq!(
        set["updateSettings"],
        json!({ "retentionDays": 30, "unreadOnly": true, "oldestFirst": null })
    );
    let partial = ada
        .data(
            "mutation { updateSettings(input: { unreadOnly: null }) { retentionDays unreadOnly } }",
            json!({}),
        )
        .await;
    assert_eq!(
        partial["updateSettings"],
        json!({ "retentionDays": 30, "unreadOnly": null })
    );
    let bad = ada
        .raw(
            "mutation { updateSettings(input: { retentionDays: 0 }) { retentionDays } }",
            json!({}),
        )
        .await;
    assert_eq!(bad.error_code(), Some("BAD_USER_INPUT"));
    let bob = Reader::new(&app, "bob").await;
    let theirs = bob.data("{ settings { retentionDays } }", json!({})).await;
    assert_eq!(theirs["settings"]["retentionDays"], Value::Null);
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

async fn opml_round_trip(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    for path in ["/o1.xml", "/o2.xml", "/o3.xml"] {
        server.set(path, Route::rss(rss2(path, &[("o", "O", "o")])));
    }
    let opml = format!(
        r#"<?xml version="1.0"?><opml version="2.0"><head><title>mine</title></head><body>
        <outline text="News"><outline text="One" type="rss" xmlUrl="{}" htmlUrl="https://one.example/"/></outline>
        <outline text="Tech"><outline text="Two" type="rss" xmlUrl="{}"/><outline text="Three &amp; more" xmlUrl="{}"/></outline>
        <outline text="Bad" xmlUrl="ftp://nope.example/feed"/>
        </body></opml>"#,
        server.url("/o1.xml"),
        server.url("/o2.xml"),
        server.url("/o3.xml")
    );
    let ada = Reader::new(&app, "ada").await;
    let done = ada.import_opml(&opml).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(
        done["result"],
        json!({ "feedsCreated": 3, "groupsCreated": 2, "skipped": 1 })
    );
    let groups = ada
        .data("{ groups { name feeds { name link } } }", json!({}))
        .await;
    let names: Vec<&str> = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Default", "News", "Tech"]);
    let news = ada.data("{ feeds { name siteUrl } }", json!({})).await;
    assert!(
        news["feeds"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["siteUrl"] == "https://one.example/"),
        "{news}"
    );
    assert_eq!(groups["groups"][2]["feeds"][1]["name"], "Two");

    let again = ada.import_opml(&opml).await;
    assert_eq!(again["result"]["skipped"], 4, "already followed");

    let exported = ada.data("{ exportOpml }", json!({})).await["exportOpml"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(exported.contains(&server.url("/o2.xml")), "{exported}");
    assert!(exported.contains("Three &amp; more"), "{exported}");
    let bob = Reader::new(&app, "bob").await;
    let done = bob.import_opml(&exported).await;
    assert_eq!(done["result"]["feedsCreated"], 3);
    let bobs = bob
        .data("{ groups { name feeds { name link } } }", json!({}))
        .await;
    assert_eq!(
        bobs, groups,
        "the export carries groups, names and links over"
    );

    let invalid = ada
        .raw(
            "mutation { importOpml(opml: \"<html>nope</html>\") { id } }",
            json!({}),
        )
        .await;
    assert_eq!(invalid.error_code(), Some("BAD_USER_INPUT"));
}

/// XML 1.0 cannot carry control characters (and the OPML reader refuses
/// them): names typed with one are refused, names from a feed's own title
/// or an imported list lose theirs, so the export is well-formed XML that imports elsewhere
/// unchanged.
async fn control_characters_never_reach_an_opml_export(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;

    for (query, variables) in [
        (
            "mutation($n: String!) { createGroup(name: $n) { id } }",
            json!({ "n": "bell\u{7}group" }),
        ),
        (
            "mutation($l: String!, $n: String!) { createFeed(input: { link: $l, name: $n }) { id } }",
            json!({ "l": server.url("/typed.xml"), "n": "two\nlines" }),
        ),
    ] {
        let refused = ada.raw(query, variables).await;
        assert_eq!(refused.error_code(), Some("BAD_USER_INPUT"), "{query}");
    }

    // A feed's own title names it, without its control characters.
    let titled = json!({
        "version": "https://jsonfeed.org/version/1.1",
        "title": "Bell\u{7}\u{1b} title\nhere",
        "items": [{ "id": "t1", "title": "t", "content_text": "t" }]
    })
    .to_string();
    server.set("/titled.json", Route::ok("application/feed+json", titled));
    let feed = ada.follow(&server.url("/titled.json")).await;
    assert_eq!(ada.refresh(&feed).await["status"], "SUCCEEDED");
    assert_eq!(ada.feed(&feed).await["name"], "Bell title here");

    // An imported list's line breaks and tabs (legal XML) become spaces.
    server.set(
        "/listed.xml",
        Route::rss(rss2("Listed", &[("l", "L", "l")])),
    );
    let opml = format!(
        "<?xml version=\"1.0\"?><opml version=\"2.0\"><head><title>mine</title></head><body>\
         <outline text=\"Tech&#10;Stuff\"><outline text=\"Listed&#9;one\" type=\"rss\" xmlUrl=\"{}\"/></outline>\
         </body></opml>",
        server.url("/listed.xml")
    );
    let done = ada.import_opml(&opml).await;
    assert_eq!(done["status"], "SUCCEEDED");
    let groups = ada
        .data("{ groups { name feeds { name link } } }", json!({}))
        .await;
    assert_eq!(groups["groups"][1]["name"], "Tech Stuff", "{groups}");
    assert_eq!(
        groups["groups"][1]["feeds"][0]["name"], "Listed one",
        "{groups}"
    );

    let exported = ada.data("{ exportOpml }", json!({})).await["exportOpml"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        exported
            .chars()
            .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t')),
        "well-formed XML 1.0: {exported:?}"
    );
    let bob = Reader::new(&app, "bob").await;
    let done = bob.import_opml(&exported).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(done["result"]["feedsCreated"], 2, "{done}");
    let bobs = bob
        .data("{ groups { name feeds { name link } } }", json!({}))
        .await;
    assert_eq!(bobs, groups, "the export imports unchanged");
}

async fn discovery_finds_linked_feeds(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    server.set("/feed.xml", Route::rss(rss2("Found", &[("d", "D", "d")])));
    server.set(
        "/blog/",
        Route::ok(
            "text/html",
            r#"<!doctype html><html><head><title>Blog</title>
            <link rel="alternate" type="application/rss+xml" title="All posts" href="/feed.xml">
            <link rel="alternate" type="application/atom+xml" href="atom">
            </head><body>hi</body></html>"#,
        ),
    );
    let ada = Reader::new(&app, "ada").await;
    let query = "query($u: String!) { discoverFeeds(url: $u) { url title kind } }";
    let found = ada.data(query, json!({ "u": server.url("/blog/") })).await;
    assert_eq!(
        found["discoverFeeds"],
        json!([
            { "url": server.url("/feed.xml"), "title": "All posts", "kind": "rss" },
            { "url": server.url("/blog/atom"), "title": null, "kind": "atom" }
        ])
    );
    let itself = ada
        .data(query, json!({ "u": server.url("/feed.xml") }))
        .await;
    assert_eq!(
        itself["discoverFeeds"],
        json!([{ "url": server.url("/feed.xml"), "title": "Found", "kind": "feed" }])
    );
    let missing = ada.raw(query, json!({ "u": server.url("/nothing") })).await;
    assert_eq!(missing.error_code(), Some("BAD_USER_INPUT"));
    let anonymous = app
        .gql(query, json!({ "u": server.url("/blog/") }))
        .send()
        .await;
    assert_eq!(anonymous.error_code(), Some("UNAUTHENTICATED"));
}

async fn retention_deletes_only_old_read_items(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let feed = ada
        .pull_new(
            &server,
            "/old.xml",
            Route::rss(rss2(
                "Old",
                &[
                    ("1", "Read", "1"),
                    ("2", "Starred", "2"),
                    ("3", "Bookmarked", "3"),
                    ("4", "Unread", "4"),
                ],
            )),
        )
        .await;
    let items = ada.items(json!({})).await;
    let id = |title: &str| items.iter().find(|i| i["title"] == title).unwrap()["id"].clone();
    ada.data(
        "mutation($i: [ID!]!) { markItemsRead(ids: $i) }",
        json!({ "i": [id("Read"), id("Starred"), id("Bookmarked")] }),
    )
    .await;
    ada.data(
        "mutation($i: [ID!]!) { starItems(ids: $i) }",
        json!({ "i": [id("Starred")] }),
    )
    .await;
    ada.data(
        "mutation($i: CreateBookmarkInput!) { createBookmark(input: $i) { id } }",
        json!({ "i": { "itemId": id("Bookmarked") } }),
    )
    .await;
    // Everything is from early November; keep one day.
    ada.data(
        "mutation { updateSettings(input: { retentionDays: 1 }) { retentionDays } }",
        json!({}),
    )
    .await;

    let admin = app.admin().await;
    let run = app
        .gql(
            "mutation { runPeriodicJob(name: \"feeds.retention\") { id } }",
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    let task = run.data()["runPeriodicJob"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let admin_reader = Reader {
        app: &app,
        token: admin.access.clone(),
    };
    let done = admin_reader.wait(&task).await;
    assert_eq!(done["status"], "SUCCEEDED", "{done}");
    assert_eq!(done["result"]["items"], 1, "{done}");
    let mut left: Vec<String> = ada
        .items(json!({}))
        .await
        .iter()
        .map(|i| i["title"].as_str().unwrap().to_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["Bookmarked", "Starred", "Unread"]);

    // The deleted entry is still in the feed: it must not come back unread.
    ada.refresh(&feed).await;
    assert_eq!(ada.items(json!({})).await.len(), 3);
    let member = ada
        .raw(
            "mutation { runPeriodicJob(name: \"feeds.retention\") { id } }",
            json!({}),
        )
        .await;
    assert_eq!(member.error_code(), Some("FORBIDDEN"));
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

/// POSTs to the Fever endpoint: `flags` in the query string (after `api`),
/// `form` as the urlencoded body.
pub(crate) async fn fever(app: &TestApp, flags: &str, form: &[(&str, &str)]) -> Value {
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let response = app
        .client
        .post(app.url(&format!("/fever/?api&{flags}")))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn fever_api_serves_and_marks_the_users_items(backend: Backend) {
    // md5("ada:fever-pass-123") and md5("bob:bob-fever-pass"), computed independently.
    const ADA_KEY: &str = "6d0a61d0f861fd498fcb095142f30b5e";
    const BOB_KEY: &str = "d9ec1bad9ea1b8a951a7b554554f2c5c";
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let feed = ada
        .pull_new(
            &server,
            "/fever.xml",
            Route::rss(rss2(
                "Fever Feed",
                &[
                    ("1", "One", "<p>1<script>x()</script></p>"),
                    ("2", "Two", "2"),
                    ("3", "Three", "3"),
                ],
            )),
        )
        .await;
    let off = fever(&app, "items", &[("api_key", ADA_KEY)]).await;
    assert_eq!(
        off,
        json!({ "api_version": 3, "auth": 0 }),
        "not enabled yet"
    );
    let set = "mutation($c: String!, $p: String!) { setReaderPassword(currentPassword: $c, password: $p) }";
    let same = ada
        .raw(set, json!({ "c": "ada-password", "p": "ada-password" }))
        .await;
    assert_eq!(
        same.error_code(),
        Some("BAD_USER_INPUT"),
        "never the account password"
    );
    let stolen = ada
        .raw(set, json!({ "c": "a-guess-at-it", "p": "fever-pass-123" }))
        .await;
    assert_eq!(
        stolen.error_code(),
        Some("BAD_USER_INPUT"),
        "a session alone is not enough"
    );
    ada.data(
        "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"fever-pass-123\") }",
        json!({}),
    )
    .await;
    assert_eq!(
        ada.data("{ readerApiEnabled }", json!({})).await["readerApiEnabled"],
        true
    );
    let short = ada
        .raw(
            "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"short\") }",
            json!({}),
        )
        .await;
    assert_eq!(short.error_code(), Some("BAD_USER_INPUT"));

    let key = [("api_key", ADA_KEY)];
    let lists = fever(&app, "groups&feeds", &key).await;
    assert_eq!(lists["auth"], 1);
    assert_eq!(lists["groups"][0]["title"], "Default");
    assert_eq!(lists["feeds"][0]["title"], "Fever Feed");
    assert_eq!(lists["feeds"][0]["id"].to_string(), feed);
    assert_eq!(lists["feeds_groups"][0]["feed_ids"], feed.as_str());
    assert!(lists["last_refreshed_on_time"].as_i64().unwrap() > 0);

    let items = fever(&app, "items", &key).await;
    assert_eq!(items["total_items"], 3);
    let ids: Vec<i64> = items["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids.len(), 3);
    assert!(
        ids.windows(2).all(|w| w[0] < w[1]),
        "ascending ids: {ids:?}"
    );
    assert!(
        items["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|i| i["is_read"] == 0)
    );
    let html = items["items"][0]["html"].as_str().unwrap();
    assert!(
        html.contains("<p>1</p>") && !html.contains("script"),
        "sanitized: {html}"
    );
    let newer = fever(&app, &format!("items&since_id={}", ids[0]), &key).await;
    assert_eq!(newer["items"].as_array().unwrap().len(), 2);
    let older = fever(&app, &format!("items&max_id={}", ids[2]), &key).await;
    assert_eq!(older["items"][0]["id"], ids[1], "max_id pages backwards");
    let chosen = fever(&app, &format!("items&with_ids={},{}", ids[0], ids[2]), &key).await;
    assert_eq!(chosen["items"].as_array().unwrap().len(), 2);

    let all_unread = ids.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
    assert_eq!(
        fever(&app, "unread_item_ids", &key).await["unread_item_ids"],
        all_unread.as_str()
    );
    let first = ids[0].to_string();
    let marked = fever(
        &app,
        "unread_item_ids",
        &[
            ("api_key", ADA_KEY),
            ("mark", "item"),
            ("as", "read"),
            ("id", &first),
        ],
    )
    .await;
    assert_eq!(marked["unread_item_ids"], format!("{},{}", ids[1], ids[2]));
    assert_eq!(
        ada.items(json!({ "unread": false })).await.len(),
        1,
        "the API and GraphQL agree"
    );
    let saved = fever(
        &app,
        "saved_item_ids",
        &[
            ("api_key", ADA_KEY),
            ("mark", "item"),
            ("as", "saved"),
            ("id", &first),
        ],
    )
    .await;
    assert_eq!(saved["saved_item_ids"], first.as_str());
    // The protocol's whole seconds, rounded up: every item had arrived.
    let now = (Utc::now().timestamp() + 1).to_string();
    let caught_up = fever(
        &app,
        "unread_item_ids",
        &[
            ("api_key", ADA_KEY),
            ("mark", "feed"),
            ("as", "read"),
            ("id", &feed),
            ("before", &now),
        ],
    )
    .await;
    assert_eq!(caught_up["unread_item_ids"], "");

    // Another user's key sees none of it and changes none of it.
    let bob = Reader::new(&app, "bob").await;
    bob.data(
        "mutation { setReaderPassword(currentPassword: \"bob-password\", password: \"bob-fever-pass\") }",
        json!({}),
    )
    .await;
    let theirs = fever(
        &app,
        "items&feeds&saved_item_ids",
        &[
            ("api_key", BOB_KEY),
            ("mark", "item"),
            ("as", "unsaved"),
            ("id", &first),
        ],
    )
    .await;
    assert_eq!(theirs["auth"], 1);
    assert_eq!(theirs["items"], json!([]));
    assert_eq!(theirs["feeds"], json!([]));
    assert_eq!(theirs["saved_item_ids"], "");
    assert_eq!(ada.items(json!({ "starred": true })).await.len(), 1);

    let in_query = fever(&app, &format!("items&api_key={ADA_KEY}"), &[]).await;
    assert_eq!(in_query["auth"], 0, "the key is only read from the body");
    let wrong = fever(
        &app,
        "items",
        &[("api_key", "00000000000000000000000000000000")],
    )
    .await;
    assert_eq!(wrong, json!({ "api_version": 3, "auth": 0 }));
    ada.data("mutation { clearReaderPassword }", json!({}))
        .await;
    assert_eq!(fever(&app, "items", &key).await["auth"], 0);

    // Changing the account password turns the reader APIs off.
    bob.data(
        "mutation { changePassword(currentPassword: \"bob-password\", newPassword: \"bob-password-2\") }",
        json!({}),
    )
    .await;
    assert_eq!(
        fever(&app, "items", &[("api_key", BOB_KEY)]).await["auth"],
        0
    );
}

/// A Google Reader API client: its token and the server.
pub(crate) struct GReader<'a> {
    pub(crate) app: &'a TestApp,
    pub(crate) auth: String,
}

impl<'a> GReader<'a> {
    pub(crate) async fn login(
        app: &'a TestApp,
        username: &str,
        password: &str,
    ) -> Result<Self, (u16, String)> {
        let response = app
            .client
            .post(app.url("/accounts/ClientLogin"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("Email={username}&Passwd={password}"))
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        if status != 200 {
            return Err((status, body));
        }
        let auth = body
            .lines()
            .find_map(|line| line.strip_prefix("Auth="))
            .expect("an Auth line")
            .to_owned();
        Ok(GReader { app, auth })
    }

    pub(crate) async fn get(&self, path: &str) -> (u16, String) {
        let response = self
            .app
            .client
            .get(self.app.url(&format!("/reader/api/0/{path}")))
            .header("authorization", format!("GoogleLogin auth={}", self.auth))
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub(crate) async fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    pub(crate) async fn post(&self, path: &str, form: &[(&str, &str)]) -> (u16, String) {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(form)
            .finish();
        let response = self
            .app
            .client
            .post(self.app.url(&format!("/reader/api/0/{path}")))
            .header("authorization", format!("GoogleLogin auth={}", self.auth))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    }

    pub(crate) async fn ids(&self, query: &str) -> (Vec<String>, Option<String>) {
        let body = self.json(&format!("stream/items/ids?{query}")).await;
        let ids = body["itemRefs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect();
        (ids, body["continuation"].as_str().map(str::to_owned))
    }
}

/// A continuation is a place in the stream, not an offset: an item that
/// arrives between two pages neither repeats an item on the next page nor
/// hides one (with an offset, the newest-first page 2 would start one item
/// early: `2` again, and `1` lost).
async fn google_reader_continuations_hold_their_place_while_items_arrive(backend: Backend) {
    const READING_LIST: &str = "user/-/state/com.google/reading-list";
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let items = [("1", "One", "1"), ("2", "Two", "2"), ("3", "Three", "3")];
    server.set("/paged.xml", Route::rss(rss2("Paged", &items)));
    let feed = ada
        .data(
            "mutation($i: CreateFeedInput!) { createFeed(input: $i) { id } }",
            json!({ "i": { "link": server.url("/paged.xml") } }),
        )
        .await["createFeed"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ada.refresh(&feed).await;
    ada.data(
        "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"reader-pass-1\") }",
        json!({}),
    )
    .await;
    let gr = GReader::login(&app, "ada", "reader-pass-1").await.unwrap();
    let title_of = |id: &str, all: &Value| {
        all["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|item| {
                item["id"]
                    .as_str()
                    .unwrap()
                    .ends_with(&format!("{:016x}", id.parse::<i64>().unwrap()))
            })
            .map(|item| item["title"].as_str().unwrap().to_owned())
            .unwrap()
    };

    let (first, continuation) = gr.ids(&format!("s={READING_LIST}&n=2")).await;
    let continuation = continuation.expect("a continuation after two of three");
    // A fourth, newer item arrives between the pages.
    let mut more = items.to_vec();
    more.push(("4", "Four", "4"));
    server.set("/paged.xml", Route::rss(rss2("Paged", &more)));
    ada.refresh(&feed).await;
    let (second, end) = gr
        .ids(&format!("s={READING_LIST}&n=2&c={continuation}"))
        .await;
    assert_eq!(end, None, "the page after the second holds the rest");

    let all = gr
        .json(&format!("stream/contents/{READING_LIST}?n=10"))
        .await;
    let titles =
        |ids: &[String]| -> Vec<String> { ids.iter().map(|id| title_of(id, &all)).collect() };
    assert_eq!(titles(&first), ["Three", "Two"]);
    assert_eq!(titles(&second), ["One"]);

    // Oldest first pages the same way; a continuation this server did not
    // give is refused, naming the parameter.
    let (oldest, next) = gr.ids(&format!("s={READING_LIST}&n=3&r=o")).await;
    assert_eq!(titles(&oldest), ["One", "Two", "Three"]);
    let (last, _) = gr
        .ids(&format!(
            "s={READING_LIST}&n=3&r=o&c={}",
            next.expect("one more")
        ))
        .await;
    assert_eq!(titles(&last), ["Four"]);
    let (status, body) = gr
        .get(&format!("stream/items/ids?s={READING_LIST}&c=20"))
        .await;
    assert_eq!(status, 400, "{body}");
}

async fn google_reader_api_serves_and_edits_the_users_items(backend: Backend) {
    const READING_LIST: &str = "user/-/state/com.google/reading-list";
    let app = app(backend).await;
    let server = FeedServer::start().await;
    let ada = Reader::new(&app, "ada").await;
    let tech = ada
        .data("mutation { createGroup(name: \"Tech\") { id } }", json!({}))
        .await["createGroup"]["id"]
        .clone();
    server.set(
        "/gr.xml",
        Route::rss(rss2(
            "GR Feed",
            &[("1", "One", "1"), ("2", "Two", "2"), ("3", "Three", "3")],
        )),
    );
    let feed = ada
        .data(
            "mutation($i: CreateFeedInput!) { createFeed(input: $i) { id } }",
            json!({ "i": { "link": server.url("/gr.xml"), "groupId": tech } }),
        )
        .await["createFeed"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ada.refresh(&feed).await;

    assert_eq!(
        GReader::login(&app, "ada", "reader-pass-1")
            .await
            .err()
            .map(|e| e.0),
        Some(401),
        "no reader password yet"
    );
    ada.data(
        "mutation { setReaderPassword(currentPassword: \"ada-password\", password: \"reader-pass-1\") }",
        json!({}),
    )
    .await;
    let wrong = GReader::login(&app, "ada", "not-it-at-all")
        .await
        .err()
        .unwrap();
    assert_eq!(wrong, (401, "Error=BadAuthentication\n".to_owned()));
    let gr = GReader::login(&app, "ada", "reader-pass-1").await.unwrap();
    let anonymous = GReader {
        app: &app,
        auth: "nope".into(),
    };
    assert_eq!(anonymous.get("subscription/list?output=json").await.0, 401);

    let subscriptions = gr.json("subscription/list?output=json").await;
    let feed_stream = format!("feed/{feed}");
    assert_eq!(
        subscriptions["subscriptions"][0]["id"],
        feed_stream.as_str()
    );
    assert_eq!(subscriptions["subscriptions"][0]["title"], "GR Feed");
    assert_eq!(
        subscriptions["subscriptions"][0]["categories"][0]["label"],
        "Tech"
    );
    let tags = gr.json("tag/list?output=json").await.to_string();
    assert!(
        tags.contains("user/-/state/com.google/starred") && tags.contains("user/-/label/Tech"),
        "{tags}"
    );
    let counts = gr.json("unread-count?output=json").await;
    let count_of = |counts: &Value, id: &str| {
        counts["unreadcounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .map(|c| c["count"].clone())
    };
    assert_eq!(count_of(&counts, READING_LIST), Some(json!(3)));
    assert_eq!(count_of(&counts, &feed_stream), Some(json!(3)));
    assert_eq!(count_of(&counts, "user/-/label/Tech"), Some(json!(3)));
    assert_eq!(gr.json("user-info?output=json").await["userName"], "ada");

    let (first_page, continuation) = gr.ids(&format!("s={READING_LIST}&n=2")).await;
    assert_eq!(first_page.len(), 2);
    let (rest, end) = gr
        .ids(&format!(
            "s={READING_LIST}&n=2&c={}",
            continuation.expect("a continuation")
        ))
        .await;
    assert_eq!((rest.len(), end), (1, None));
    let first: i64 = first_page[0].parse().unwrap();
    let long_first = format!("tag:google.com,2005:reader/item/{first:016x}");
    let (status, body) = gr
        .post(
            "stream/items/contents",
            &[("i", &long_first), ("i", &first_page[1])],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let contents: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(contents["items"].as_array().unwrap().len(), 2);
    assert_eq!(contents["items"][0]["id"], long_first.as_str());
    assert_eq!(
        contents["items"][0]["origin"]["streamId"],
        feed_stream.as_str()
    );

    assert_eq!(
        gr.post(
            "edit-tag",
            &[("i", &long_first), ("a", "user/-/state/com.google/read")]
        )
        .await,
        (200, "OK".to_owned())
    );
    gr.post(
        "edit-tag",
        &[
            ("i", &first_page[1]),
            ("a", "user/-/state/com.google/starred"),
        ],
    )
    .await;
    let (unread, _) = gr
        .ids(&format!("s={READING_LIST}&xt=user/-/state/com.google/read"))
        .await;
    assert_eq!(unread.len(), 2);
    let (starred, _) = gr.ids("s=user/-/state/com.google/starred").await;
    assert_eq!(starred, [first_page[1].clone()]);
    assert_eq!(
        ada.items(json!({ "unread": false })).await.len(),
        1,
        "GraphQL sees the same state"
    );
    let in_feed = gr
        .json(&format!("stream/contents/{feed_stream}?n=10"))
        .await;
    assert_eq!(in_feed["items"].as_array().unwrap().len(), 3);

    let now_usec = (Utc::now().timestamp_micros()).to_string();
    gr.post(
        "mark-all-as-read",
        &[("s", "user/-/label/Tech"), ("ts", &now_usec)],
    )
    .await;
    let counts = gr.json("unread-count?output=json").await;
    assert_eq!(count_of(&counts, READING_LIST), Some(json!(0)));

    // Tags in the user-id spelling, as some clients write them.
    let (unread_again, _) = gr
        .ids(&format!(
            "s={READING_LIST}&xt=user/1005921515/state/com.google/read"
        ))
        .await;
    assert!(unread_again.is_empty(), "everything was marked read");
    gr.post(
        "edit-tag",
        &[
            ("i", &rest[0]),
            ("r", "user/1005921515/state/com.google/read"),
        ],
    )
    .await;
    let counts = gr.json("unread-count?output=json").await;
    assert_eq!(count_of(&counts, READING_LIST), Some(json!(1)));

    // Folders: rename, then delete (its feed moves to the default group).
    gr.post(
        "rename-tag",
        &[("s", "user/-/label/Tech"), ("dest", "user/-/label/Science")],
    )
    .await;
    let tags = gr.json("tag/list").await.to_string();
    assert!(
        tags.contains("user/-/label/Science") && !tags.contains("label/Tech"),
        "{tags}"
    );
    gr.post("disable-tag", &[("s", "user/-/label/Science")])
        .await;
    let subscriptions = gr.json("subscription/list").await;
    assert_eq!(
        subscriptions["subscriptions"][0]["categories"][0]["label"],
        "Default"
    );

    // The login answers JSON when asked, and never takes the password in a URL.
    let json_login = app
        .client
        .post(app.url("/accounts/ClientLogin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("Email=ada&Passwd=reader-pass-1&output=json")
        .send()
        .await
        .unwrap();
    let body: Value = json_login.json().await.unwrap();
    assert!(
        body["Auth"].as_str().is_some_and(|auth| !auth.is_empty()),
        "{body}"
    );
    let by_get = app
        .client
        .get(app.url("/accounts/ClientLogin?Email=ada&Passwd=reader-pass-1"))
        .send()
        .await
        .unwrap();
    assert_eq!(by_get.status(), 405);

    server.set("/gr2.xml", Route::rss(rss2("Second", &[("x", "X", "x")])));
    let (status, body) = gr
        .post(
            "subscription/quickadd",
            &[("quickadd", &server.url("/gr2.xml"))],
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let added: Value = serde_json::from_str(&body).unwrap();
    let stream = added["streamId"].as_str().unwrap().to_owned();
    gr.post(
        "subscription/edit",
        &[
            ("ac", "edit"),
            ("s", &stream),
            ("t", "Renamed"),
            ("a", "user/-/label/News"),
        ],
    )
    .await;
    let groups = ada
        .data("{ groups { name feeds { name } } }", json!({}))
        .await;
    let news = groups["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == "News")
        .cloned();
    assert_eq!(news.unwrap()["feeds"][0]["name"], "Renamed");
    gr.post(
        "subscription/edit",
        &[("ac", "unsubscribe"), ("s", &stream)],
    )
    .await;
    assert_eq!(
        ada.data("{ feeds { id } }", json!({})).await["feeds"]
            .as_array()
            .unwrap()
            .len(),
        1
    );

    // Another user's token sees and changes nothing of ada's.
    let bob = Reader::new(&app, "bob").await;
    bob.data(
        "mutation { setReaderPassword(currentPassword: \"bob-password\", password: \"bob-reader-1\") }",
        json!({}),
    )
    .await;
    let bob_gr = GReader::login(&app, "bob", "bob-reader-1").await.unwrap();
    assert_eq!(
        bob_gr.json("subscription/list").await["subscriptions"],
        json!([])
    );
    bob_gr
        .post(
            "edit-tag",
            &[
                ("i", &first_page[1]),
                ("r", "user/-/state/com.google/starred"),
            ],
        )
        .await;
    assert_eq!(ada.items(json!({ "starred": true })).await.len(), 1);

    ada.data("mutation { clearReaderPassword }", json!({}))
        .await;
    assert_eq!(
        gr.get("subscription/list").await.0,
        401,
        "clearing the password revokes tokens"
    );
}

/// Issue 16 item 3: a list field multiplies what is under it by its page
/// size (or, unpaged, its assumed size), so lists nested in lists are
/// refused by the complexity limit; a group's feeds come through a
/// DataLoader and stay right.
async fn nested_lists_are_priced_by_their_size(backend: Backend) {
    let app = app(backend).await;
    let server = FeedServer::start().await;
    // Titled as named, so a pull that renames a feed changes nothing here.
    for (path, title) in [("/a.xml", "Alpha"), ("/b.xml", "Beta"), ("/c.xml", "Gamma")] {
        server.set(path, Route::rss(rss2(title, &[])));
    }
    let ada = Reader::new(&app, "ada").await;
    let tech = ada
        .data("mutation { createGroup(name: \"Tech\") { id } }", json!({}))
        .await["createGroup"]["id"]
        .clone();
    ada.data(
        "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
        json!({ "i": [
            { "link": server.url("/b.xml"), "name": "Beta", "groupId": tech },
            { "link": server.url("/a.xml"), "name": "Alpha", "groupId": tech },
            { "link": server.url("/c.xml"), "name": "Gamma" }
        ] }),
    )
    .await;
    // Someone else's feeds never show in Ada's groups.
    let bob = Reader::new(&app, "bob").await;
    bob.data(
        "mutation($i: [CreateFeedInput!]!) { createFeeds(input: $i) { id } }",
        json!({ "i": [{ "link": server.url("/a.xml"), "name": "Bob's" }] }),
    )
    .await;
    let groups = ada
        .data(
            "{ groups { name feeds { name group { name } } } }",
            json!({}),
        )
        .await["groups"]
        .clone();
    let names: Vec<(String, Vec<String>)> = groups
        .as_array()
        .unwrap()
        .iter()
        .map(|group| {
            let feeds = group["feeds"].as_array().unwrap();
            for feed in feeds {
                assert_eq!(feed["group"]["name"], group["name"]);
            }
            (
                group["name"].as_str().unwrap().to_owned(),
                feeds
                    .iter()
                    .map(|feed| feed["name"].as_str().unwrap().to_owned())
                    .collect(),
            )
        })
        .collect();
    assert_eq!(
        names,
        vec![
            ("Default".to_owned(), vec!["Gamma".to_owned()]),
            (
                "Tech".to_owned(),
                vec!["Alpha".to_owned(), "Beta".to_owned()]
            ),
        ]
    );

    for hostile in [
        "{ groups { feeds { group { feeds { group { feeds { group { feeds { id } } } } } } } } }",
        "{ feeds { group { feeds { group { feeds { id } } } } } }",
        "{ items(first: 200) { edges { node { feed { group { feeds { group { feeds { id } } } } } } } } }",
        "{ nodeTree(first: 10000, depth: 10) { id resources(first: 1000) { id } \
           children(first: 1000) { id resources(first: 1000) { id } } } }",
    ] {
        let refused = ada.raw(hostile, json!({})).await;
        assert_eq!(
            refused.error_code(),
            Some("GRAPHQL_VALIDATION_FAILED"),
            "{hostile}: {}",
            refused.body
        );
        assert!(
            refused.body.to_string().contains("too complex"),
            "{hostile}: {}",
            refused.body
        );
    }
}
