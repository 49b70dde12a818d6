//! Client mistakes are `BAD_USER_INPUT` (or HTTP 400) on both backends,
//! never `INTERNAL` (issue 16, item 14): a NUL character in any string,
//! a cursor of the right shape with the wrong types, a feed URL longer than
//! a name column, an overlong task scope.

use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use serde_json::{Value, json};

use crate::{
    helpers::{Backend, TestApp, spawn_app},
    on_both_backends,
};

on_both_backends!(
    nul_in_any_graphql_string_is_bad_user_input,
    nul_in_plain_http_bodies_and_forms_is_a_400,
    cursors_of_the_wrong_types_are_bad_user_input,
    long_feed_links_fit_the_name_column,
    long_task_scopes_are_bad_user_input,
);

/// A GraphQL string literal holding a NUL (the escape, in the document).
const NUL: &str = "\"a\\u0000b\"";

async fn nul_in_any_graphql_string_is_bad_user_input(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await;
    let inline = [
        (
            format!("mutation {{ createGroup(name: {NUL}) {{ id }} }}"),
            "name",
        ),
        (
            format!(
                "mutation {{ createBookmark(input: {{ link: \"https://example.com/a\", title: {NUL} }}) {{ id }} }}"
            ),
            "input",
        ),
        (format!("{{ search(query: {NUL}) {{ total }} }}"), "query"),
        (
            format!("{{ tasks(filter: {{ kind: {NUL} }}) {{ totalCount }} }}"),
            "filter",
        ),
        (
            format!("{{ nodes(filter: {{ class: {NUL} }}) {{ totalCount }} }}"),
            "filter",
        ),
        (
            format!(
                "mutation {{ createResource(attributes: {{ kind: {NUL} }}, idempotencyKey: \"k1\") {{ id }} }}"
            ),
            "attributes",
        ),
        (
            format!(
                "mutation {{ createResource(attributes: {{}}, idempotencyKey: {NUL}) {{ id }} }}"
            ),
            "idempotencyKey",
        ),
        (
            format!("mutation {{ probeTask(input: {{ scope: {NUL} }}) {{ id }} }}"),
            "input",
        ),
    ];
    for (query, field) in inline {
        let response = app
            .gql(&query, json!({}))
            .bearer(&admin.access)
            .send()
            .await;
        assert_eq!(response.status, 200);
        assert_eq!(
            response.error_code(),
            Some("BAD_USER_INPUT"),
            "{query}: {}",
            response.body
        );
        assert_eq!(response.body["errors"][0]["extensions"]["field"], field);
        let message = response.body["errors"][0]["message"].as_str().unwrap();
        assert!(message.contains("NUL"), "{message}");
    }

    // The same through variables, NUL in a value or in an object key.
    let with_variables = [
        (
            "mutation($n: String!) { createGroup(name: $n) { id } }",
            json!({ "n": "a\u{0}b" }),
        ),
        (
            "mutation($a: JSON!) { createResource(attributes: $a, idempotencyKey: \"k2\") { id } }",
            json!({ "a": { "tags": ["ok", "a\u{0}b"] } }),
        ),
        (
            "mutation($a: JSON!) { createResource(attributes: $a, idempotencyKey: \"k3\") { id } }",
            json!({ "a": { "bad\u{0}key": 1 } }),
        ),
        (
            "query($q: String!) { search(query: $q) { total } }",
            json!({ "q": "\u{0}" }),
        ),
    ];
    for (query, variables) in with_variables {
        let response = app
            .gql(query, variables.clone())
            .bearer(&admin.access)
            .send()
            .await;
        assert_eq!(
            response.error_code(),
            Some("BAD_USER_INPUT"),
            "{variables}: {}",
            response.body
        );
        let message = response.body["errors"][0]["message"].as_str().unwrap();
        assert!(message.starts_with("variable `$"), "{message}");
    }
    // Nothing was written.
    let groups = app
        .gql("{ groups { name } }", json!({}))
        .bearer(&admin.access)
        .send()
        .await;
    let names = groups.data()["groups"].to_string();
    assert!(!names.contains("\\u0000"), "{names}");
}

async fn reader_token(app: &TestApp, member: &str) -> String {
    let tokens = app.member(member).await;
    app.gql(
        "mutation($c: String!) { setReaderPassword(currentPassword: $c, password: \"reader-pass-1\") }",
        json!({ "c": format!("{member}-password") }),
    )
    .bearer(&tokens.access)
    .send()
    .await
    .data();
    app.gql("mutation { createGroup(name: \"Tech\") { id } }", json!({}))
        .bearer(&tokens.access)
        .send()
        .await
        .data();
    let login = app
        .client
        .post(app.url("/accounts/ClientLogin"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("Email={member}&Passwd=reader-pass-1"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    login
        .lines()
        .find_map(|line| line.strip_prefix("Auth="))
        .unwrap_or_else(|| panic!("no token in {login}"))
        .to_owned()
}

async fn assert_bad_request(response: reqwest::Response, what: &str) {
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 400, "{what}: {body}");
    assert_eq!(
        body["errors"][0]["extensions"]["code"], "BAD_USER_INPUT",
        "{what}: {body}"
    );
}

async fn nul_in_plain_http_bodies_and_forms_is_a_400(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await;
    for (n, attributes) in [
        json!({ "kind": "a\u{0}b" }),
        json!({ "nested": { "list": [1, "\u{0}"] } }),
        json!({ "bad\u{0}key": 1 }),
    ]
    .into_iter()
    .enumerate()
    {
        let response = app
            .client
            .post(app.url("/resources"))
            .bearer_auth(&admin.access)
            .header("Idempotency-Key", format!("nul-{n}"))
            .json(&json!({ "attributes": attributes }))
            .send()
            .await
            .unwrap();
        assert_bad_request(response, &format!("POST /resources {attributes}")).await;
    }

    let token = reader_token(&app, "ada").await;
    let auth = format!("GoogleLogin auth={token}");
    let form = |path: &str, body: &'static str| {
        app.client
            .post(app.url(path))
            .header("authorization", &auth)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let rename = form(
        "/reader/api/0/rename-tag",
        "s=user/-/label/Tech&dest=user/-/label/a%00b",
    )
    .await
    .unwrap();
    assert_bad_request(rename, "rename-tag").await;
    let edit = form(
        "/reader/api/0/subscription/edit",
        "ac=subscribe&s=feed/https://example.invalid/feed&a=user/-/label/x%00",
    )
    .await
    .unwrap();
    assert_bad_request(edit, "subscription/edit").await;
    let get = |path: &str| {
        app.client
            .get(app.url(path))
            .header("authorization", &auth)
            .send()
    };
    let stream = get("/reader/api/0/stream/contents/user/-/label/a%00b");
    assert_bad_request(stream.await.unwrap(), "stream/contents/<label>").await;
    let by_query = get("/reader/api/0/stream/items/ids?s=user/-/label/a%00b");
    assert_bad_request(by_query.await.unwrap(), "stream/items/ids?s=").await;
    let fever = app
        .client
        .post(app.url("/fever/?api&groups"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("api_key=abc%00")
        .send()
        .await
        .unwrap();
    assert_bad_request(fever, "fever").await;
    // The label is untouched and the reader still works.
    let tags: Value = get("/reader/api/0/tag/list?output=json")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(tags.to_string().contains("label/Tech"), "{tags}");
}

fn cursor(key: Value) -> String {
    URL_SAFE_NO_PAD.encode(key.to_string())
}

async fn cursors_of_the_wrong_types_are_bad_user_input(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await;
    let member = app.member("ada").await;
    let cases = [
        // The issue's: an integer for the username.
        ("users", "W3siaSI6IDV9XQ".to_owned(), &admin),
        ("users", cursor(json!([{ "s": "a\u{0}" }])), &admin),
        ("tasks", cursor(json!([{ "s": "x" }])), &admin),
        ("tasks", cursor(json!([{ "i": 1 }])), &admin),
        (
            "items",
            cursor(json!([{ "s": "2026-01-01" }, { "i": 1 }])),
            &member,
        ),
        (
            "items",
            cursor(
                json!([{ "t": "2026-01-01T00:00:00Z" }, { "u": "00000000-0000-0000-0000-000000000000" }]),
            ),
            &member,
        ),
        (
            "bookmarks",
            cursor(json!([{ "i": 1 }, { "i": 1 }])),
            &member,
        ),
        ("resources", cursor(json!([{ "i": 1 }, { "i": 1 }])), &admin),
        (
            "nodes",
            cursor(json!([{ "t": "2026-01-01T00:00:00Z" }])),
            &admin,
        ),
    ];
    for (list, after, caller) in cases {
        let response = app
            .gql(
                &format!(
                    "query($a: String) {{ {list}(after: $a) {{ totalCount edges {{ cursor }} }} }}"
                ),
                json!({ "a": after }),
            )
            .bearer(&caller.access)
            .send()
            .await;
        assert_eq!(
            response.error_code(),
            Some("BAD_USER_INPUT"),
            "{list}(after: {after}): {}",
            response.body
        );
        assert_eq!(response.body["errors"][0]["extensions"]["field"], "after");
    }
    // A cursor the server gave out still works.
    let first = app
        .gql("{ users(first: 1) { edges { cursor } } }", json!({}))
        .bearer(&admin.access)
        .send()
        .await;
    let given = first.data()["users"]["edges"][0]["cursor"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = app
        .gql(
            "query($a: String) { users(after: $a) { edges { node { username } } } }",
            json!({ "a": given }),
        )
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        next.data()["users"]["edges"][0]["node"]["username"],
        "admin"
    );
}

async fn long_feed_links_fit_the_name_column(backend: Backend) {
    let app = spawn_app(backend).await;
    let member = app.member("ada").await;
    let create = "mutation($l: String!) { createFeed(input: { link: $l }) { name link } }";
    let long = format!("https://example.invalid/{}", "a".repeat(300));
    let created = app
        .gql(create, json!({ "l": long }))
        .bearer(&member.access)
        .send()
        .await;
    let feed = &created.data()["createFeed"];
    assert_eq!(feed["link"], long.as_str());
    let name = feed["name"].as_str().unwrap();
    assert_eq!(name.chars().count(), 255);
    assert!(long.starts_with(name));

    let too_long = format!("https://example.invalid/{}", "a".repeat(3000));
    let refused = app
        .gql(create, json!({ "l": too_long }))
        .bearer(&member.access)
        .send()
        .await;
    assert_eq!(
        refused.error_code(),
        Some("BAD_USER_INPUT"),
        "{}",
        refused.body
    );
    assert_eq!(refused.body["errors"][0]["extensions"]["field"], "link");
}

async fn long_task_scopes_are_bad_user_input(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await;
    let probe = "mutation($s: String) { probeTask(input: { scope: $s, effects: false }) { id } }";
    let refused = app
        .gql(probe, json!({ "s": "s".repeat(300) }))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(
        refused.error_code(),
        Some("BAD_USER_INPUT"),
        "{}",
        refused.body
    );
    assert_eq!(refused.body["errors"][0]["extensions"]["field"], "scope");
    let accepted = app
        .gql(probe, json!({ "s": "s".repeat(200) }))
        .bearer(&admin.access)
        .send()
        .await;
    assert!(accepted.data()["probeTask"]["id"].is_string());
}
