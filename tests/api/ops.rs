use crate::{
    helpers::{AppOptions, Backend, redis_url, spawn_app, spawn_app_with},
    on_both_backends,
};

on_both_backends!(
    health_and_readiness_report_the_database,
    readiness_checks_redis_when_configured,
    metrics_are_prometheus_text,
    sigterm_shuts_down_gracefully,
    unknown_routes_are_json_404,
);

async fn health_and_readiness_report_the_database(backend: Backend) {
    let app = spawn_app(backend).await;
    let health = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(body["checks"]["database"], "ok");
    assert_eq!(body["checks"]["redis"], "not_configured");
}

async fn readiness_checks_redis_when_configured(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("REDIS_URL", &redis_url()),
    )
    .await;
    let ready = app.client.get(app.url("/readyz")).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    let body: serde_json::Value = ready.json().await.unwrap();
    assert_eq!(
        body["checks"]["redis"], "ok",
        "Redis must run at TRELLIS_TEST_REDIS_URL"
    );
}

async fn metrics_are_prometheus_text(backend: Backend) {
    let app = spawn_app(backend).await;
    app.login_response("admin", "wrong-password").await;
    app.client.get(app.url("/healthz")).send().await.unwrap();
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = response.text().await.unwrap();
    assert!(
        text.contains(
            "trellis_http_requests_total{method=\"POST\",route=\"/graphql\",status=\"200\"}"
        ),
        "{text}"
    );
    assert!(
        text.contains("trellis_login_attempts_total{outcome=\"failure\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("trellis_http_request_duration_seconds_bucket"),
        "{text}"
    );
}

async fn sigterm_shuts_down_gracefully(backend: Backend) {
    let mut app = spawn_app(backend).await;
    assert_eq!(
        app.client
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let status = app.terminate().await;
    assert!(status.success(), "exit status {status:?}");
}

async fn unknown_routes_are_json_404(backend: Backend) {
    let app = spawn_app(backend).await;
    let response = app.client.get(app.url("/nope")).send().await.unwrap();
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "NOT_FOUND");
}

#[test]
fn schema_graphql_matches_the_code() {
    let committed = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/schema.graphql"))
        .expect("schema.graphql at the repository root");
    assert!(
        committed == trellis::graphql::sdl(),
        "schema.graphql is out of date: run `cargo run -- schema > schema.graphql`"
    );
}
