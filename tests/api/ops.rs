use std::{os::unix::fs::PermissionsExt, path::Path, process::Stdio};

use crate::{
    helpers::{
        AppOptions, Backend, TestDatabase, redis_url, spawn_app, spawn_app_with, trellis_command,
    },
    on_both_backends,
};

on_both_backends!(
    health_and_readiness_report_the_database,
    readiness_checks_redis_when_configured,
    metrics_are_prometheus_text,
    sigterm_shuts_down_gracefully,
    unknown_routes_are_json_404,
    metrics_can_require_a_token_and_an_address,
    every_error_answer_is_json_with_a_code,
    html_answers_carry_security_headers,
    data_dir_and_database_files_are_private_to_the_server,
    start_up_warns_when_the_data_is_readable_by_others,
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
        committed == trellis::schema::sdl(),
        "schema.graphql is out of date: run `cargo run -- schema > schema.graphql`"
    );
}

async fn metrics_can_require_a_token_and_an_address(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_METRICS_TOKEN", "scrape-token-1"),
    )
    .await;
    let metrics = || app.client.get(app.url("/metrics"));
    let anonymous = metrics().send().await.unwrap();
    assert_eq!(anonymous.status(), 401);
    let body: serde_json::Value = anonymous.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "UNAUTHENTICATED");
    let wrong = metrics()
        .bearer_auth("scrape-token-2")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let right = metrics()
        .bearer_auth("scrape-token-1")
        .send()
        .await
        .unwrap();
    assert_eq!(right.status(), 200);
    assert!(
        right
            .text()
            .await
            .unwrap()
            .contains("trellis_http_requests_total")
    );

    // Loopback is allowed by default; a list without it refuses us.
    let elsewhere = spawn_app_with(
        backend,
        AppOptions::default().env("TRELLIS_METRICS_ALLOW", "10.0.0.0/8, 192.0.2.7"),
    )
    .await;
    let refused = elsewhere
        .client
        .get(elsewhere.url("/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let body: serde_json::Value = refused.json().await.unwrap();
    assert_eq!(body["errors"][0]["extensions"]["code"], "FORBIDDEN");
}

async fn every_error_answer_is_json_with_a_code(backend: Backend) {
    let app = spawn_app(backend).await;
    async fn code_of(response: reqwest::Response) -> (u16, String) {
        let status = response.status().as_u16();
        let body: serde_json::Value = response.json().await.expect("a JSON body");
        let code = body["errors"][0]["extensions"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (status, code)
    }
    let wrong_method = app.client.delete(app.url("/graphql")).send().await.unwrap();
    assert_eq!(
        code_of(wrong_method).await,
        (405, "METHOD_NOT_ALLOWED".into())
    );
    let wrong_method = app.client.get(app.url("/resources")).send().await.unwrap();
    assert_eq!(
        code_of(wrong_method).await,
        (405, "METHOD_NOT_ALLOWED".into())
    );
    let not_utf8 = app
        .client
        .get(app.url("/tasks/%ff%fe"))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(not_utf8).await, (400, "BAD_USER_INPUT".into()));
    let not_utf8 = app
        .client
        .post(app.url("/resources/%ff%fe/delete"))
        .send()
        .await
        .unwrap();
    assert_eq!(code_of(not_utf8).await, (400, "BAD_USER_INPUT".into()));

    // A signed-in browser whose Authorization header is not ASCII is refused,
    // not silently served with the cookie.
    let login = app
        .login_response("admin", crate::helpers::ADMIN_PASSWORD)
        .await;
    let cookie = login.set_cookie().expect("login sets the session cookie");
    let cookie = cookie.split(';').next().unwrap().to_owned();
    let me = |authorization: Option<&[u8]>| {
        let mut request = app
            .client
            .post(app.url("/graphql"))
            .header("cookie", &cookie)
            .json(&serde_json::json!({ "query": "{ me { username } }" }));
        if let Some(value) = authorization {
            request = request.header(
                "authorization",
                reqwest::header::HeaderValue::from_bytes(value).unwrap(),
            );
        }
        request.send()
    };
    let with_cookie: serde_json::Value = me(None).await.unwrap().json().await.unwrap();
    assert_eq!(with_cookie["data"]["me"]["username"], "admin");
    let garbled = me(Some(b"Bearer \xe2\x82\xac-token")).await.unwrap();
    assert_eq!(code_of(garbled).await, (401, "UNAUTHENTICATED".into()));
}

async fn html_answers_carry_security_headers(backend: Backend) {
    let (app, _build) = crate::web::spawn_with_build(backend).await;
    let page = app.client.get(app.url("/graphql")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let header = |name: &str| {
        page.headers()
            .get(name)
            .unwrap_or_else(|| panic!("{name} missing"))
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("x-frame-options"), "DENY");
    assert_eq!(header("referrer-policy"), "no-referrer");
    let csp = header("content-security-policy");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    let script_src = csp
        .split(';')
        .map(str::trim)
        .find(|directive| directive.starts_with("script-src"))
        .expect("a script-src directive");
    // Our own files only: nothing inline, no other origin.
    assert_eq!(script_src, "script-src 'self'");

    // JSON answers say nosniff too.
    let health = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(health.headers()["x-content-type-options"], "nosniff");
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|error| panic!("{}: {error}", path.display()))
        .permissions()
        .mode()
        & 0o777
}

async fn data_dir_and_database_files_are_private_to_the_server(backend: Backend) {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("nested/data");
    let mut options = AppOptions::default().env("TRELLIS_DATA_DIR", data.to_str().unwrap());
    if backend == Backend::Sqlite {
        options = options.env(
            "DATABASE_URL",
            &format!("sqlite://{}?mode=rwc", data.join("trellis.db").display()),
        );
    }
    let app = spawn_app_with(backend, options).await;
    app.admin().await;
    assert_eq!(mode(&data), 0o700, "the data directory");
    if backend == Backend::Sqlite {
        for file in ["trellis.db", "trellis.db-wal", "trellis.db-shm"] {
            assert_eq!(mode(&data.join(file)), 0o600, "{file}");
        }
    }
}

/// The paths `trellis migrate` warns about, from its JSON log.
async fn warned_paths(dir: &Path, database_url: &str) -> Vec<String> {
    let output = trellis_command(dir, database_url)
        .arg("migrate")
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{log}");
    log.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["level"] == "WARN")
        .filter_map(|event| event["path"].as_str().map(str::to_owned))
        .collect()
}

async fn start_up_warns_when_the_data_is_readable_by_others(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(backend, dir.path()).await;
    let database = dir.path().join("trellis.db");
    let open = std::fs::Permissions::from_mode;
    std::fs::set_permissions(dir.path(), open(0o755)).unwrap();
    if backend == Backend::Sqlite {
        // As an older version left it: world-readable.
        std::fs::write(&database, b"").unwrap();
        std::fs::set_permissions(&database, open(0o644)).unwrap();
    }
    let warned = warned_paths(dir.path(), &db.url).await;
    assert!(
        warned.contains(&dir.path().display().to_string()),
        "{warned:?}"
    );
    if backend == Backend::Sqlite {
        assert!(
            warned.contains(&database.display().to_string()),
            "{warned:?}"
        );
    }

    // Modes an operator chose are not changed, only reported; once private, silence.
    assert_eq!(mode(dir.path()), 0o755);
    std::fs::set_permissions(dir.path(), open(0o700)).unwrap();
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        std::fs::set_permissions(entry.unwrap().path(), open(0o600)).unwrap();
    }
    assert_eq!(
        warned_paths(dir.path(), &db.url).await,
        Vec::<String>::new()
    );
}

/// With autovacuum off for a table, its planner statistics are refreshed
/// by `system.analyze` once it changed enough; `/readyz` says autovacuum's
/// state. PostgreSQL only: SQLite's planner takes no statistics here.
#[tokio::test]
async fn tables_autovacuum_skips_are_analyzed_by_the_server() {
    use sea_orm::ConnectionTrait;
    use serde_json::json;
    let app = spawn_app(Backend::Postgres).await;
    let db = app.database().await;
    db.execute_unprepared("ALTER TABLE tasks SET (autovacuum_enabled = false)")
        .await
        .unwrap();
    let ready: serde_json::Value = app
        .client
        .get(app.url("/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // What the server's setting is (autovacuum may be off on this machine).
    let server_on = db
        .query_one_raw(sea_orm::Statement::from_string(
            sea_orm::DbBackend::Postgres,
            "SELECT current_setting('autovacuum') = 'on' AS on",
        ))
        .await
        .unwrap()
        .unwrap()
        .try_get::<bool>("", "on")
        .unwrap();
    assert_eq!(
        ready["checks"]["autovacuum"],
        if server_on { "on" } else { "off" },
        "{ready}"
    );

    let admin = app.admin().await;
    for _ in 0..60 {
        app.gql("mutation { probeTask(input: {}) { id } }", json!({}))
            .bearer(&admin.access)
            .send()
            .await
            .data();
    }
    // PostgreSQL counts changes per backend and publishes them within
    // seconds: wait until it shows them (bounded).
    let modified = "SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = 'tasks'";
    let mut seen = 0;
    for _ in 0..300 {
        seen = db
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                modified,
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get::<i64>("", "n_mod_since_analyze")
            .unwrap();
        if seen > 50 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(seen > 50, "PostgreSQL never showed the changes ({seen})");

    let run = app
        .gql(
            "mutation { runPeriodicJob(name: \"system.analyze\") { id } }",
            json!({}),
        )
        .bearer(&admin.access)
        .send()
        .await;
    let id = run.data()["runPeriodicJob"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let task = crate::jobs::wait_terminal(&app, &admin.access, &id).await;
    assert_eq!(task["status"], "SUCCEEDED", "{task}");
    let analyzed = task["result"]["analyzed"].as_array().unwrap();
    assert!(analyzed.iter().any(|name| name == "tasks"), "{task}");
    // A table that barely changed is left alone.
    assert!(!analyzed.iter().any(|name| name == "users"), "{task}");
    // As published by PostgreSQL's statistics, again within seconds.
    let mut last = false;
    for _ in 0..300 {
        last = db
            .query_one_raw(sea_orm::Statement::from_string(
                sea_orm::DbBackend::Postgres,
                "SELECT last_analyze IS NOT NULL AS done FROM pg_stat_user_tables \
                 WHERE relname = 'tasks'",
            ))
            .await
            .unwrap()
            .unwrap()
            .try_get::<bool>("", "done")
            .unwrap();
        if last {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(last, "tasks was not analyzed");
}
