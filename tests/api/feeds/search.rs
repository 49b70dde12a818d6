//! Full-text search: prefixes, ranking from the index, per-user results.

use serde_json::{Value, json};

use crate::{
    feedserver::{FeedServer, Route, rss2},
    helpers::{AppOptions, Backend, spawn_app_with},
};

use super::{Reader, app};

crate::on_both_backends!(
    full_text_search_finds_prefixes_and_stays_per_user,
    ranked_search_is_planned_from_the_index_and_time_bounded,
);

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
        // The first table the plan reads (after the ranking's
        // co-routine or materialisation step) is the full-text index.
        let first_read = steps
            .iter()
            .find(|step| step.starts_with("SCAN") || step.starts_with("SEARCH"));
        assert!(
            first_read.is_some_and(|step| step.starts_with("SCAN items_fts VIRTUAL TABLE")),
            "the full-text match drives the join: {steps:?}"
        );
    }
}
