//! The command line: `migrate`, `user add`, `schema --check`.

use std::process::Stdio;

use tokio::io::AsyncWriteExt;

use crate::{
    helpers::{Backend, TestDatabase, trellis_command},
    on_both_backends,
};

on_both_backends!(migrate_then_user_add_creates_a_working_account);

async fn migrate_then_user_add_creates_a_working_account(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(backend, dir.path()).await;

    let migrate = trellis_command(dir.path(), &db.url)
        .arg("migrate")
        .status()
        .await
        .unwrap();
    assert!(migrate.success());

    let mut add = trellis_command(dir.path(), &db.url)
        .args(["user", "add", "Olga", "--role", "admin"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    add.stdin
        .take()
        .unwrap()
        .write_all(b"olga-password-1\n")
        .await
        .unwrap();
    let output = add.wait_with_output().await.unwrap();
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("created olga"));

    // The same name again is refused, and says why.
    let mut again = trellis_command(dir.path(), &db.url)
        .args(["user", "add", "olga"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    again
        .stdin
        .take()
        .unwrap()
        .write_all(b"another-password\n")
        .await
        .unwrap();
    let output = again.wait_with_output().await.unwrap();
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
    std::fs::write(&stale, trellis::graphql::sdl()).unwrap();
    let status = trellis_command(dir.path(), "sqlite::memory:")
        .args(["schema", "--check"])
        .arg(&stale)
        .status()
        .await
        .unwrap();
    assert!(status.success());
}
