//! Bad input at the GraphQL endpoint: every failure is a typed error.

use serde_json::{Value, json};

use crate::{
    helpers::{AppOptions, Backend, TestApp, spawn_app, spawn_app_with},
    on_both_backends,
};

on_both_backends!(
    malformed_json_is_a_bad_request,
    wrong_content_type_is_refused,
    invalid_graphql_gets_parse_and_validation_codes,
    oversized_body_is_refused_with_413,
    depth_bomb_is_refused,
    alias_and_batch_floods_are_refused,
    bad_argument_types_are_bad_user_input,
    batched_operations_each_get_an_answer,
);

async fn raw(app: &TestApp, content_type: &str, body: impl Into<reqwest::Body>) -> (u16, Value) {
    let response = app
        .client
        .post(app.url("/graphql"))
        .header("content-type", content_type)
        .body(body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.expect("JSON error body"))
}

fn code(body: &Value) -> &str {
    body["errors"][0]["extensions"]["code"]
        .as_str()
        .unwrap_or_default()
}

async fn malformed_json_is_a_bad_request(backend: Backend) {
    let app = spawn_app(backend).await;
    let (status, body) = raw(&app, "application/json", "{\"query\": ").await;
    assert_eq!(status, 400);
    assert_eq!(code(&body), "BAD_REQUEST");
    assert!(
        body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("malformed")
    );
    let (status, body) = raw(&app, "application/json", "{\"variables\": {}}").await;
    assert_eq!((status, code(&body)), (400, "BAD_REQUEST"));
}

async fn wrong_content_type_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let (status, body) = raw(
        &app,
        "application/x-www-form-urlencoded",
        "query=%7Bme%7Bid%7D%7D",
    )
    .await;
    assert_eq!((status, code(&body)), (415, "UNSUPPORTED_MEDIA_TYPE"));
}

async fn invalid_graphql_gets_parse_and_validation_codes(backend: Backend) {
    let app = spawn_app(backend).await;
    let syntax = app.gql("{ me { username ", json!({})).send().await;
    assert_eq!(syntax.error_code(), Some("GRAPHQL_PARSE_FAILED"));
    let unknown = app.gql("{ me { password } }", json!({})).send().await;
    assert_eq!(unknown.error_code(), Some("GRAPHQL_VALIDATION_FAILED"));
    assert!(
        unknown.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("password")
    );
}

async fn oversized_body_is_refused_with_413(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_MAX_BODY_BYTES", "4096"),
    )
    .await;
    let padding = "x".repeat(10_000);
    let body = json!({ "query": "{ me { id } }", "variables": { "pad": padding } }).to_string();
    let refused = app
        .client
        .post(app.url("/graphql"))
        .header("content-type", "application/json")
        .body(body.clone())
        .send()
        .await
        .unwrap();
    // The rest of the body was not read, so the connection cannot carry
    // another request: the answer says so, and no client reuses it.
    assert_eq!(refused.headers()["connection"], "close");
    let (status, body) = raw(&app, "application/json", body).await;
    assert_eq!((status, code(&body)), (413, "PAYLOAD_TOO_LARGE"));
    // The server is fine afterwards.
    assert!(app.gql("{ me { id } }", json!({})).send().await.data()["me"].is_null());
}

async fn depth_bomb_is_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let mut query = String::from("name");
    for _ in 0..20 {
        query = format!("ofType {{ {query} }}");
    }
    let bomb = format!("{{ __schema {{ types {{ fields {{ type {{ {query} }} }} }} }} }}");
    let response = app.gql(&bomb, json!({})).send().await;
    assert_eq!(response.error_code(), Some("GRAPHQL_VALIDATION_FAILED"));
    assert!(
        response.body["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("nested too deep")
    );
}

async fn alias_and_batch_floods_are_refused(backend: Backend) {
    let app = spawn_app(backend).await;
    let aliases: String = (0..31).map(|i| format!("a{i}: me {{ id }} ")).collect();
    let response = app.gql(&format!("{{ {aliases} }}"), json!({})).send().await;
    assert_eq!(response.error_code(), Some("GRAPHQL_VALIDATION_FAILED"));

    let batch: Vec<Value> = (0..11)
        .map(|_| json!({ "query": "{ me { id } }" }))
        .collect();
    let (status, body) = raw(&app, "application/json", Value::Array(batch).to_string()).await;
    assert_eq!((status, code(&body)), (400, "BAD_REQUEST"));
}

async fn bad_argument_types_are_bad_user_input(backend: Backend) {
    let app = spawn_app(backend).await;
    let admin = app.admin().await;
    let response = app
        .gql(
            "query($n: Int) { users(first: $n) { totalCount } }",
            json!({ "n": "ten" }),
        )
        .bearer(&admin.access)
        .send()
        .await;
    let code = response.error_code().unwrap();
    assert!(
        code == "BAD_USER_INPUT" || code == "GRAPHQL_VALIDATION_FAILED",
        "{code}"
    );
    let negative = app
        .gql("{ users(first: -1) { totalCount } }", json!({}))
        .bearer(&admin.access)
        .send()
        .await;
    assert_eq!(negative.error_code(), Some("BAD_USER_INPUT"));
}

async fn batched_operations_each_get_an_answer(backend: Backend) {
    let app = spawn_app(backend).await;
    let batch = json!([{ "query": "{ me { id } }" }, { "query": "{ nope }" }]);
    let (status, body) = raw(&app, "application/json", batch.to_string()).await;
    assert_eq!(status, 200);
    assert!(body[0]["data"]["me"].is_null());
    assert_eq!(
        body[1]["errors"][0]["extensions"]["code"],
        "GRAPHQL_VALIDATION_FAILED"
    );
}
