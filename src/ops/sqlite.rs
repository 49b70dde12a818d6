//! SQLite's part of backups: a consistent copy of a live database through
//! `VACUUM INTO`, and the check that a copy is sound.

use std::{path::Path, time::Duration};

use anyhow::Context;
use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, Statement,
    sqlx::{self, ConnectOptions, Connection, sqlite::SqliteConnectOptions},
};

/// Opens an existing SQLite database file (never creates one), with the
/// server's busy timeout: a backup waits for a checkpoint instead of failing.
pub async fn open_existing(path: &Path) -> anyhow::Result<DatabaseConnection> {
    let options = SqliteConnectOptions::new()
        .filename(path)
        .create_if_missing(false)
        .busy_timeout(Duration::from_secs(10));
    let pool = sqlx::sqlite::SqlitePoolOptions::new()
        .max_connections(1)
        .connect_with(options)
        .await
        .with_context(|| format!("opening the database {}", path.display()))?;
    Ok(sea_orm::SqlxSqliteConnector::from_sqlx_sqlite_pool(pool))
}

/// Writes a consistent copy of `conn`'s database into `dest`, which must be
/// absent or empty. `VACUUM INTO` reads in one transaction, so the copy is
/// the database as of one commit, while other connections go on writing
/// (WAL); it is also compact, without the WAL.
pub async fn vacuum_into(conn: &impl ConnectionTrait, dest: &Path) -> anyhow::Result<()> {
    let dest_text = dest
        .to_str()
        .with_context(|| format!("{} is not a UTF-8 path", dest.display()))?;
    conn.execute_raw(Statement::from_sql_and_values(
        DbBackend::Sqlite,
        "VACUUM INTO $1",
        [dest_text.into()],
    ))
    .await
    .with_context(|| format!("copying the database into {}", dest.display()))?;
    Ok(())
}

/// `PRAGMA integrity_check` of the database file at `path`, opened read-only
/// and immutable (no `-wal` or `-shm` is made beside it). `Err` says why it
/// is not a sound SQLite database.
pub async fn integrity_check(path: &Path) -> Result<(), String> {
    let mut conn = SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .immutable(true)
        .connect()
        .await
        .map_err(|error| format!("the database cannot be opened ({error})"))?;
    let checked: Result<Vec<String>, _> = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_all(&mut conn)
        .await;
    let _ = conn.close().await;
    match checked {
        Ok(rows) if rows == ["ok"] => Ok(()),
        Ok(rows) => Err(format!(
            "the database fails its integrity check: {}",
            rows.into_iter().take(5).collect::<Vec<_>>().join("; ")
        )),
        Err(error) => Err(format!("the database cannot be read ({error})")),
    }
}
