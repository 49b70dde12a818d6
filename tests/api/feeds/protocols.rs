//! The reader protocols' everyday use: Fever and Google Reader serving and
//! editing a user's items, and Google Reader continuations.

use chrono::Utc;
use serde_json::{Value, json};

use crate::{
    feedserver::{FeedServer, Route, rss2},
    helpers::Backend,
};

use super::{GReader, Reader, app, fever};

crate::on_both_backends!(
    fever_api_serves_and_marks_the_users_items,
    google_reader_api_serves_and_edits_the_users_items,
    google_reader_continuations_hold_their_place_while_items_arrive,
);

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
