//! The user's library: groups, read state and stars, bookmarks, settings,
//! OPML, discovery, retention, the price of nested lists, and isolation
//! between users.

use chrono::Utc;
use serde_json::{Value, json};

use crate::{
    feedserver::{FeedServer, Route, rss2},
    helpers::Backend,
};

use super::{Reader, app};

crate::on_both_backends!(
    nested_lists_are_priced_by_their_size,
    two_users_never_see_each_others_data,
    bookmark_survives_its_feeds_deletion,
    groups_read_state_and_stars,
    the_default_group_comes_with_the_user_and_reads_write_nothing,
    users_from_before_the_rule_get_their_default_group,
    settings_round_trip,
    opml_round_trip,
    control_characters_never_reach_an_opml_export,
    discovery_finds_linked_feeds,
    retention_deletes_only_old_read_items,
);

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
