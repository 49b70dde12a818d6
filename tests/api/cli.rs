//! The command line: `migrate`, `user add`, `schema --check`.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use crate::{
    helpers::{Backend, TestDatabase, trellis_command},
    on_both_backends,
};

on_both_backends!(migrate_then_user_add_creates_a_working_account);
on_both_backends!(a_failure_at_start_up_names_its_cause);

/// Runs `trellis migrate`, asserting it succeeds.
async fn migrate(dir: &std::path::Path, url: &str) {
    let status = trellis_command(dir, url)
        .arg("migrate")
        .status()
        .await
        .unwrap();
    assert!(status.success());
}

/// Runs `trellis user add ARGS…` with `password` on stdin.
async fn user_add(
    dir: &std::path::Path,
    url: &str,
    args: &[&str],
    password: &str,
) -> std::process::Output {
    let mut add = trellis_command(dir, url)
        .args(["user", "add"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = add.stdin.take().unwrap();
    stdin
        .write_all(format!("{password}\n").as_bytes())
        .await
        .unwrap();
    drop(stdin);
    add.wait_with_output().await.unwrap()
}

async fn migrate_then_user_add_creates_a_working_account(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(backend, dir.path()).await;

    migrate(dir.path(), &db.url).await;
    let output = user_add(
        dir.path(),
        &db.url,
        &["Olga", "--role", "admin"],
        "olga-password-1",
    )
    .await;
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("created olga"));

    // The same name again is refused, and says why.
    let output = user_add(dir.path(), &db.url, &["olga"], "another-password").await;
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("already taken"));

    // And the account works against a server on the same database.
    let mut serve = trellis_command(dir.path(), &db.url);
    serve.env("TRELLIS_LISTEN", "127.0.0.1:0").arg("serve");
    let app = crate::helpers::TestApp::from_command(serve, db, dir).await;
    let login = app.login_response("olga", "olga-password-1").await;
    assert_eq!(login.data()["login"]["user"]["role"], "ADMIN");
}

#[tokio::test]
async fn schema_check_detects_drift() {
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("schema.graphql");
    std::fs::write(&stale, "type Query { old: Int }\n").unwrap();
    let status = trellis_command(dir.path(), "sqlite::memory:")
        .args(["schema", "--check"])
        .arg(&stale)
        .status()
        .await
        .unwrap();
    assert!(!status.success());
    std::fs::write(&stale, trellis::schema::sdl()).unwrap();
    let status = trellis_command(dir.path(), "sqlite::memory:")
        .args(["schema", "--check"])
        .arg(&stale)
        .status()
        .await
        .unwrap();
    assert!(status.success());
}

/// An unexpected failure in the CLI or at start-up says what went wrong
/// underneath, not just "internal error".
async fn a_failure_at_start_up_names_its_cause(backend: Backend) {
    use sea_orm::ConnectionTrait;

    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(backend, dir.path()).await;
    migrate(dir.path(), &db.url).await;
    // A database damaged behind the server's back: the accounts table is gone.
    let conn = sea_orm::Database::connect(&db.url).await.unwrap();
    conn.execute_unprepared("ALTER TABLE users RENAME TO users_elsewhere")
        .await
        .unwrap();
    conn.close().await.unwrap();

    let output = user_add(dir.path(), &db.url, &["olga"], "olga-password-1").await;
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("creating user `olga`"), "{stderr}");
    assert!(stderr.contains("users"), "the cause is named: {stderr}");

    let serve = trellis_command(dir.path(), &db.url)
        .env("TRELLIS_LISTEN", "127.0.0.1:0")
        .env("TRELLIS_ADMIN_USER", "admin")
        .env("TRELLIS_ADMIN_PASSWORD", "admin-password-1")
        .arg("serve")
        .stderr(Stdio::piped())
        .output()
        .await
        .unwrap();
    assert!(!serve.status.success());
    let stderr = String::from_utf8_lossy(&serve.stderr);
    assert!(stderr.contains("creating the first admin"), "{stderr}");
    assert!(stderr.contains("users"), "the cause is named: {stderr}");
}
