//! Upgrade safety, at every start (`serve`, `migrate`, and each command that
//! opens the database) before migrations run: a database that a newer
//! version migrated is refused ([`Refusal::SchemaNewer`]), and an existing
//! SQLite database is copied to `<data dir>/backups/pre-migrate-<UTC>.db`
//! before pending migrations change it. `trellis migrate --dry-run` reads
//! the same plan and changes nothing.

use std::path::{Path, PathBuf};

use anyhow::Context;
use chrono::{DateTime, Utc};
use migration::{Migrator, MigratorTrait};
use sea_orm::{ConnectionTrait, DbBackend, Statement};
use secrecy::ExposeSecret;

use super::{
    Refusal,
    plan::{self, MigrationPlan},
    sqlite,
};
use crate::config::{Backend, Config};

/// `<data dir>/backups`: the pre-migration copies.
pub const BACKUPS_DIR: &str = "backups";

/// This binary's migrations, in the order they run.
pub fn known_migrations() -> Vec<String> {
    Migrator::migrations()
        .iter()
        .map(|migration| migration.name().to_owned())
        .collect()
}

/// The migrations applied in the database (none when it has no
/// `seaql_migrations` table yet), read without creating anything.
pub async fn applied_migrations(conn: &impl ConnectionTrait) -> anyhow::Result<Vec<String>> {
    let backend = conn.get_database_backend();
    let exists = match backend {
        DbBackend::Postgres => {
            "SELECT COUNT(*) AS n FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_name = 'seaql_migrations'"
        }
        _ => {
            "SELECT COUNT(*) AS n FROM sqlite_master WHERE type = 'table' AND name = 'seaql_migrations'"
        }
    };
    let tables: i64 = conn
        .query_one_raw(Statement::from_string(backend, exists))
        .await?
        .context("counting the migrations table")?
        .try_get("", "n")?;
    if tables == 0 {
        return Ok(Vec::new());
    }
    let rows = conn
        .query_all_raw(Statement::from_string(
            backend,
            "SELECT version FROM seaql_migrations ORDER BY version",
        ))
        .await
        .context("reading the applied migrations")?;
    rows.iter()
        .map(|row| {
            row.try_get::<String>("", "version")
                .map_err(anyhow::Error::from)
        })
        .collect()
}

/// The database's plan; a database newer than the binary is refused.
pub async fn plan(conn: &impl ConnectionTrait) -> anyhow::Result<MigrationPlan> {
    refuse_newer(MigrationPlan::new(
        &known_migrations(),
        &applied_migrations(conn).await?,
    ))
}

fn refuse_newer(plan: MigrationPlan) -> anyhow::Result<MigrationPlan> {
    if plan.unknown.is_empty() {
        Ok(plan)
    } else {
        Err(Refusal::SchemaNewer(plan.unknown).into())
    }
}

/// Runs before the migrator: refuses a newer database and, when `sqlite`
/// (a file, not memory) holds data that pending migrations will change,
/// copies it into `<data_dir>/backups` first.
pub async fn before_migrating(
    conn: &impl ConnectionTrait,
    data_dir: &Path,
    sqlite: bool,
) -> anyhow::Result<()> {
    let plan = plan(conn).await?;
    if sqlite && plan.changes_existing_database() {
        let path = pre_migrate_backup(conn, &data_dir.join(BACKUPS_DIR), Utc::now()).await?;
        tracing::info!(
            path = %path.display(),
            pending = plan.pending.len(),
            "copied the database before migrating it"
        );
    }
    Ok(())
}

/// Copies the database into `dir` as `pre-migrate-<now>.db` (`0600`), then
/// deletes all but the newest [`plan::KEEP_PRE_MIGRATE_BACKUPS`].
async fn pre_migrate_backup(
    conn: &impl ConnectionTrait,
    dir: &Path,
    now: DateTime<Utc>,
) -> anyhow::Result<PathBuf> {
    crate::datadir::create_dir(dir)?;
    let path = dir.join(plan::pre_migrate_backup_name(now));
    // Created private and empty: `VACUUM INTO` fills an empty file.
    crate::datadir::create_private_file(&path)?;
    if let Err(error) = sqlite::vacuum_into(conn, &path).await {
        let _ = std::fs::remove_file(&path);
        return Err(error.context("backing up the database before migrating it"));
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        if let Ok(name) = entry?.file_name().into_string() {
            names.push(name);
        }
    }
    for name in plan::backups_to_prune(&names, plan::KEEP_PRE_MIGRATE_BACKUPS) {
        let old = dir.join(&name);
        if let Err(error) = std::fs::remove_file(&old) {
            tracing::warn!(path = %old.display(), %error, "could not delete an old pre-migration backup");
        }
    }
    Ok(path)
}

/// `trellis migrate --dry-run`: the plan, read without creating or changing
/// anything (no database file yet: every migration is pending).
pub async fn dry_run(config: &Config) -> anyhow::Result<MigrationPlan> {
    let applied = match config.backend()? {
        Backend::Sqlite => match config.sqlite_path() {
            Some(path) if path.exists() => {
                let conn = sqlite::open_existing(&path).await?;
                let applied = applied_migrations(&conn).await;
                conn.close().await?;
                applied?
            }
            _ => Vec::new(),
        },
        Backend::Postgres => {
            let mut options =
                sea_orm::ConnectOptions::new(config.database_url().expose_secret().to_owned());
            options.max_connections(1).sqlx_logging(false);
            let conn = sea_orm::Database::connect(options)
                .await
                .context("connecting to the database")?;
            let applied = applied_migrations(&conn).await;
            conn.close().await?;
            applied?
        }
    };
    refuse_newer(MigrationPlan::new(&known_migrations(), &applied))
}
