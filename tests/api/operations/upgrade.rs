//! Upgrade safety: a database a newer version migrated is refused at
//! start, `migrate --dry-run` lists and changes nothing, and migrating an
//! existing SQLite database copies it first.

use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, Database, DatabaseConnection};

use super::{
    SCHEMA_NEWER, applied, assert_refused, integrity, migrate, run, sqlite_url, stderr, strings,
};
use crate::{
    helpers::{Backend, TestDatabase},
    on_both_backends,
};

on_both_backends!(
    a_database_migrated_by_a_newer_version_is_refused_at_start,
    migrate_dry_run_lists_pending_migrations_and_changes_nothing,
);

async fn a_database_migrated_by_a_newer_version_is_refused_at_start(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(backend, dir.path()).await;
    migrate(dir.path(), &db.url).await;
    let future = "m20991231_000001_from_a_newer_version";
    let conn = Database::connect(db.url.as_str()).await.unwrap();
    conn.execute_unprepared(&format!(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('{future}', 0)"
    ))
    .await
    .unwrap();
    let before = applied(&conn).await;

    for args in [&["serve"][..], &["migrate"], &["migrate", "--dry-run"]] {
        let output = run(dir.path(), &db.url, args, &[]).await;
        assert_refused(&output, SCHEMA_NEWER, &["newer than this binary", future]);
    }
    assert_eq!(applied(&conn).await, before);
    assert!(
        !dir.path().join("backups").exists(),
        "no copy of a refused database"
    );
    conn.close().await.unwrap();
}

/// The tables (and on SQLite indexes and triggers) the database holds.
async fn schema_objects(conn: &DatabaseConnection, backend: Backend) -> Vec<String> {
    let sql = if backend == Backend::Sqlite {
        "SELECT name FROM sqlite_master ORDER BY name"
    } else {
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() ORDER BY 1"
    };
    strings(conn, sql).await
}

fn known() -> Vec<String> {
    Migrator::migrations()
        .iter()
        .map(|migration| migration.name().to_owned())
        .collect()
}

async fn migrate_dry_run_lists_pending_migrations_and_changes_nothing(backend: Backend) {
    let dir = tempfile::tempdir().unwrap();
    let db = TestDatabase::create(backend, dir.path()).await;

    // No database yet: every migration is pending, and none is created.
    let output = run(dir.path(), &db.url, &["migrate", "--dry-run"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listed: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(listed, known());
    assert!(!dir.path().join("trellis.db").exists());

    // Two migrations behind.
    migrate(dir.path(), &db.url).await;
    let conn = Database::connect(db.url.as_str()).await.unwrap();
    Migrator::down(&conn, Some(2)).await.unwrap();
    let before = applied(&conn).await;
    let tables = schema_objects(&conn, backend).await;

    let output = run(dir.path(), &db.url, &["migrate", "--dry-run"], &[]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let all = known();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("{}\n{}\n", all[all.len() - 2], all[all.len() - 1])
    );
    assert_eq!(applied(&conn).await, before, "nothing applied");
    assert_eq!(schema_objects(&conn, backend).await, tables);
    assert!(!dir.path().join("backups").exists(), "no copy taken");
    conn.close().await.unwrap();
}

/// Migrating an existing SQLite database copies it first into
/// `<data dir>/backups`, keeping the newest five; a new database gets none.
#[tokio::test]
async fn migrating_an_existing_sqlite_database_copies_it_first() {
    let dir = tempfile::tempdir().unwrap();
    let url = sqlite_url(&dir.path().join("trellis.db"));
    migrate(dir.path(), &url).await;
    let backups = dir.path().join("backups");
    assert!(!backups.exists(), "a new database has nothing to copy");

    let conn = Database::connect(url.as_str()).await.unwrap();
    Migrator::down(&conn, Some(1)).await.unwrap();
    let behind = applied(&conn).await;
    conn.close().await.unwrap();
    std::fs::create_dir(&backups).unwrap();
    let old: Vec<String> = (0..6)
        .map(|n| format!("pre-migrate-2020010{n}T000000.000Z.db"))
        .collect();
    for name in &old {
        std::fs::write(backups.join(name), "old").unwrap();
    }
    std::fs::write(backups.join("keep-me.txt"), "mine").unwrap();

    migrate(dir.path(), &url).await;
    let mut names: Vec<String> = std::fs::read_dir(&backups)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    let new: Vec<&String> = names
        .iter()
        .filter(|name| name.starts_with("pre-migrate-2") && !old.contains(name))
        .collect();
    assert_eq!(new.len(), 1, "{names:?}");
    let copy = backups.join(new[0]);
    // The newest five are kept: ours and the four latest old ones.
    let mut expected: Vec<String> = old[2..].to_vec();
    expected.push(new[0].clone());
    expected.push("keep-me.txt".into());
    expected.sort();
    assert_eq!(names, expected);

    // The copy is the database as it was before the migration.
    assert_eq!(integrity(&copy).await, ["ok"]);
    let conn = Database::connect(format!("sqlite://{}?mode=ro", copy.display()))
        .await
        .unwrap();
    assert_eq!(applied(&conn).await, behind);
    conn.close().await.unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&copy).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
    let conn = Database::connect(url.as_str()).await.unwrap();
    assert_eq!(applied(&conn).await, known());
    conn.close().await.unwrap();
}
