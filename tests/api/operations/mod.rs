//! Running it for real (issue 22), through the real binary: `backup` and
//! `restore` (`backup.rs`), and upgrade safety — a newer database refused,
//! `migrate --dry-run`, the copy taken before migrating (`upgrade.rs`).
//! Exit codes as `docs/operations.md` documents them.

use std::{
    path::Path,
    process::{Output, Stdio},
    time::Duration,
};

use sea_orm::{ConnectionTrait, Database, DatabaseConnection, Statement};

use crate::helpers::trellis_command;

mod backup;
mod upgrade;

pub const SCHEMA_NEWER: i32 = 10;
pub const NOT_SQLITE: i32 = 11;
pub const TARGET_EXISTS: i32 = 12;
pub const BAD_ARCHIVE: i32 = 13;
pub const IN_USE: i32 = 14;

/// Runs `trellis ARGS…` to its end (a guard of two minutes against a command
/// that never exits, e.g. a server that did not refuse).
pub async fn run(dir: &Path, url: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut command = trellis_command(dir, url);
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("TRELLIS_LISTEN", "127.0.0.1:0");
    for (key, value) in env {
        command.env(key, value);
    }
    tokio::time::timeout(Duration::from_secs(120), command.output())
        .await
        .unwrap_or_else(|_| panic!("trellis {args:?} did not exit"))
        .unwrap()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The command exited with `code` and its message says each of `words`.
pub fn assert_refused(output: &Output, code: i32, words: &[&str]) {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(code), "{message}");
    for word in words {
        assert!(message.contains(word), "{word:?} is not in: {message}");
    }
}

pub async fn migrate(dir: &Path, url: &str) {
    let output = run(dir, url, &["migrate"], &[]).await;
    assert!(output.status.success(), "{}", stderr(&output));
}

pub fn sqlite_url(path: &Path) -> String {
    format!("sqlite://{}?mode=rwc", path.display())
}

pub async fn strings(conn: &DatabaseConnection, sql: &str) -> Vec<String> {
    conn.query_all_raw(Statement::from_string(conn.get_database_backend(), sql))
        .await
        .unwrap()
        .iter()
        .map(|row| row.try_get_by_index::<String>(0).unwrap())
        .collect()
}

pub async fn integrity(path: &Path) -> Vec<String> {
    let conn = Database::connect(format!("sqlite://{}?mode=ro", path.display()))
        .await
        .unwrap();
    let result = strings(&conn, "PRAGMA integrity_check").await;
    conn.close().await.unwrap();
    result
}

pub async fn applied(conn: &DatabaseConnection) -> Vec<String> {
    strings(
        conn,
        "SELECT version FROM seaql_migrations ORDER BY version",
    )
    .await
}
