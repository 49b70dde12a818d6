//! Database connection: SQLite (the embedded default) or PostgreSQL, chosen
//! from the URL scheme, with the settings each needs to be safe under load.

use std::time::Duration;

use anyhow::Context;
use migration::{Migrator, MigratorTrait};
use sea_orm::{
    ConnectOptions, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend, DbErr,
    ExecResult, QueryResult, SqliteTransactionMode, Statement, TransactionOptions,
    TransactionTrait,
    sqlx::sqlite::{SqliteJournalMode, SqliteSynchronous},
};
use secrecy::ExposeSecret;

use crate::config::{Backend, Config};

/// SQLite's default page size, in which `TRELLIS_SQLITE_MAX_BYTES` is
/// counted (every database this server creates uses it).
const SQLITE_PAGE_BYTES: u64 = 4096;
/// The WAL file is truncated back to this size after a checkpoint.
const SQLITE_JOURNAL_LIMIT_BYTES: u64 = 16 * 1024 * 1024;

/// Opens the pool and applies pending migrations: first refusing a database
/// newer than this binary, and copying an existing SQLite database aside
/// (`ops::upgrade::before_migrating`).
pub async fn connect(config: &Config) -> anyhow::Result<DatabaseConnection> {
    let backend = config.backend()?;
    crate::datadir::create_dir(&config.data_dir)?;
    let sqlite_file = config.sqlite_path();
    if let Some(path) = &sqlite_file {
        // Created private before SQLite opens it: its WAL and shared-memory
        // files take the database file's mode.
        crate::datadir::create_private_file(path)?;
    }
    let url = config.database_url();
    let mut options = ConnectOptions::new(url.expose_secret().to_owned());
    options
        .max_connections(config.db_max_connections)
        .min_connections(1)
        .connect_timeout(Duration::from_secs(10))
        .acquire_timeout(Duration::from_secs(30))
        // A connection that sat idle is pinged before use (a server,
        // proxy or firewall may have dropped it); a busy one is not: the
        // default pings on every checkout, one more round trip before
        // every statement.
        .test_before_acquire_if_idle_for(Duration::from_secs(30))
        .sqlx_logging(false);
    if backend == Backend::Sqlite {
        // WAL lets readers proceed while one writer commits; foreign keys are
        // off by default in SQLite; the busy timeout turns writer contention
        // into a short wait instead of an immediate SQLITE_BUSY.
        //
        // The page budget makes a database that outgrows
        // `TRELLIS_SQLITE_MAX_BYTES` refuse writes (`SQLITE_FULL` →
        // `STORAGE_FULL`) rather than fill the disk; checkpoints every
        // 1000 pages and a 16 MiB journal size limit keep the WAL from
        // growing in routine use (seed 003).
        let max_pages = (config.sqlite_max_bytes / SQLITE_PAGE_BYTES).max(1);
        options.map_sqlx_sqlite_opts(move |opts| {
            opts.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .foreign_keys(true)
                .busy_timeout(Duration::from_secs(10))
                .create_if_missing(true)
                .pragma("max_page_count", max_pages.to_string())
                .pragma("wal_autocheckpoint", "1000")
                .pragma("journal_size_limit", SQLITE_JOURNAL_LIMIT_BYTES.to_string())
        });
    }
    if backend == Backend::Sqlite {
        // Migrations on one connection of their own: SQLite checks a
        // `DROP COLUMN`'s column against the connection's cached schema
        // while preparing it, so a pooled connection that missed an earlier
        // migration's `ADD COLUMN` refused it ("no such column") now and
        // then, and the server did not start.
        let mut single = options.clone();
        single.max_connections(1).min_connections(1);
        let migrating = sea_orm::Database::connect(single)
            .await
            .context("connecting to the database")?;
        crate::ops::upgrade::before_migrating(&migrating, &config.data_dir, sqlite_file.is_some())
            .await?;
        Migrator::up(&migrating, None)
            .await
            .context("applying database migrations")?;
        migrating
            .close()
            .await
            .context("closing the migrations' connection")?;
    }
    let db = sea_orm::Database::connect(options)
        .await
        .context("connecting to the database")?;
    if backend != Backend::Sqlite {
        crate::ops::upgrade::before_migrating(&db, &config.data_dir, false).await?;
        Migrator::up(&db, None)
            .await
            .context("applying database migrations")?;
    }
    let mut private = vec![config.data_dir.clone()];
    if let Some(path) = sqlite_file {
        for suffix in ["-wal", "-shm"] {
            private.push(sqlite_side_file(&path, suffix));
        }
        private.push(path);
    }
    crate::datadir::warn_if_open(&private);
    Ok(db)
}

/// A SQLite database's side file: `trellis.db-wal` beside `trellis.db`.
pub fn sqlite_side_file(db_path: &std::path::Path, suffix: &str) -> std::path::PathBuf {
    let mut side = db_path.as_os_str().to_owned();
    side.push(suffix);
    side.into()
}

/// SQLite's one writer, as a queue in this process: write transactions
/// take turns here (first come, first served) instead of in SQLite's busy
/// handler, which sleeps and polls — under load, writers that happened to
/// poll late waited out the busy timeout and failed with "database is
/// locked". One process writes a SQLite file (it is the embedded
/// backend), so one gate per process is the file's.
static SQLITE_WRITER: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(1);

/// How long a write transaction waits for its turn before the caller is
/// told the database is busy (`UNAVAILABLE`, retry): SQLite's busy timeout.
const SQLITE_WRITER_WAIT: Duration = Duration::from_secs(10);

/// A transaction that writes: on SQLite it holds the process's writer
/// turn until it commits or rolls back (or is dropped). Derefs to the
/// transaction for statements.
pub struct WriteTxn {
    txn: DatabaseTransaction,
    _turn: Option<tokio::sync::SemaphorePermit<'static>>,
}

impl std::ops::Deref for WriteTxn {
    type Target = DatabaseTransaction;

    fn deref(&self) -> &DatabaseTransaction {
        &self.txn
    }
}

/// Statements run in the transaction, so a `&WriteTxn` goes wherever a
/// connection does (`.exec(&txn)`).
#[async_trait::async_trait]
impl ConnectionTrait for WriteTxn {
    fn get_database_backend(&self) -> DbBackend {
        self.txn.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.txn.execute_raw(stmt).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.txn.execute_unprepared(sql).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        self.txn.query_one_raw(stmt).await
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.txn.query_all_raw(stmt).await
    }

    fn support_returning(&self) -> bool {
        self.txn.support_returning()
    }
}

impl WriteTxn {
    pub async fn commit(self) -> Result<(), DbErr> {
        self.txn.commit().await
    }

    pub async fn rollback(self) -> Result<(), DbErr> {
        self.txn.rollback().await
    }
}

/// Begins a transaction that will write. On SQLite it first waits for the
/// process's writer turn (see [`SQLITE_WRITER`]; after
/// [`SQLITE_WRITER_WAIT`], a busy error), then is `BEGIN IMMEDIATE`: the
/// write lock is taken up front, so a transaction that reads before it
/// writes never fails to upgrade. PostgreSQL takes row locks as it goes;
/// there it is a plain `BEGIN`.
pub async fn begin_write(db: &DatabaseConnection) -> Result<WriteTxn, DbErr> {
    let turn = if db.get_database_backend() == DbBackend::Sqlite {
        let permit = tokio::time::timeout(SQLITE_WRITER_WAIT, SQLITE_WRITER.acquire())
            .await
            .map_err(|_| DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::Timeout))?
            .map_err(|_| DbErr::ConnectionAcquire(sea_orm::ConnAcquireErr::ConnectionClosed))?;
        Some(permit)
    } else {
        None
    };
    let txn = db
        .begin_with_options(TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..Default::default()
        })
        .await?;
    Ok(WriteTxn { txn, _turn: turn })
}

/// Runs one writing statement on its own. On SQLite it goes through
/// [`begin_write`], taking the writer's turn like every write transaction:
/// a write outside the gate waits in SQLite's busy handler instead, which
/// sleeps between tries (up to 100 ms each) while the gate's transactions
/// keep the lock busy (the outbox publisher's position was saved 100 ms
/// late under a stream of stage commits). Elsewhere it runs as it is.
pub async fn execute_write(
    db: &DatabaseConnection,
    statement: Statement,
) -> Result<sea_orm::ExecResult, DbErr> {
    if db.get_database_backend() != DbBackend::Sqlite {
        return db.execute_raw(statement).await;
    }
    let txn = begin_write(db).await?;
    let result = txn.execute_raw(statement).await?;
    txn.commit().await?;
    Ok(result)
}

/// An entity whose rows belong to one user, by an integer id.
pub trait Owned: sea_orm::EntityTrait {
    /// What the row is, for `NOT_FOUND` (`"feed"`, `"item"`…).
    const NAME: &'static str;
    fn id_column() -> Self::Column;
    fn owner_column() -> Self::Column;
}

/// The row of `E` with this id if it belongs to `user`, else `NOT_FOUND`:
/// another user's row and no row at all answer the same, so ids tell
/// nothing about other users.
pub async fn owned<E: Owned>(
    db: &impl sea_orm::ConnectionTrait,
    user: uuid::Uuid,
    id: i64,
) -> crate::error::AppResult<E::Model> {
    use sea_orm::{ColumnTrait, QueryFilter};
    E::find()
        .filter(E::id_column().eq(id))
        .filter(E::owner_column().eq(user))
        .one(db)
        .await?
        .ok_or(crate::error::AppError::NotFound(E::NAME))
}

/// `$start, $start+1, …` (`count` of them): the placeholders of an
/// `IN (…)` list or a `VALUES` row in raw SQL (sea-orm binds `$n` on both
/// backends).
pub fn placeholders(start: usize, count: usize) -> String {
    (start..start + count)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `($start, $start+1), ($start+2, $start+3), …`: `rows` tuples of
/// `width` placeholders, for a multi-row `VALUES` or a row-value `IN`.
pub fn placeholder_rows(start: usize, rows: usize, width: usize) -> String {
    (0..rows)
        .map(|row| format!("({})", placeholders(start + row * width, width)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A raw statement with `$n` placeholders for `conn`'s backend.
pub fn stmt(
    conn: &impl ConnectionTrait,
    sql: impl Into<String>,
    values: Vec<sea_orm::Value>,
) -> Statement {
    Statement::from_sql_and_values(conn.get_database_backend(), sql, values)
}

/// `sql` with every placeholder `$n` renumbered `$(n + by)`, so that it can
/// join another statement's text whose `by` parameters come first.
/// Quoted text (`'…'`, `"…"`) is left alone; dollar-quoted strings are not
/// recognised (none of our statements has one).
pub fn shift_placeholders(sql: &str, by: usize) -> String {
    if by == 0 {
        return sql.to_owned();
    }
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut quote = None;
    while let Some(c) = chars.next() {
        match quote {
            Some(q) => {
                out.push(c);
                if c == q {
                    quote = None;
                }
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) => {
                let mut digits = String::new();
                while let Some(d) = chars.next_if(char::is_ascii_digit) {
                    digits.push(d);
                }
                // Digits only, so the parse cannot fail short of overflow.
                let n: usize = digits.parse().unwrap_or(0);
                out.push('$');
                out.push_str(&(n + by).to_string());
            }
            None => out.push(c),
        }
    }
    out
}

/// `column` is one of `ids`, for raw SQL whose parameters start at `$start`.
/// On PostgreSQL it is `= ANY($start)` with one array parameter: the same
/// statement text whatever the count, so it is prepared once per
/// connection instead of once per list length (hot statements with `IN`
/// lists of every length from 1 to 64 evicted each other from the prepared
/// statement cache). SQLite has no arrays: an `IN` list.
pub fn uuid_in(
    backend: sea_orm::DbBackend,
    column: &str,
    start: usize,
    ids: &[uuid::Uuid],
) -> (String, Vec<sea_orm::Value>) {
    if backend == sea_orm::DbBackend::Postgres {
        (format!("{column} = ANY(${start})"), vec![uuid_array(ids)])
    } else {
        (
            format!("{column} IN ({})", placeholders(start, ids.len())),
            ids.iter().map(|id| (*id).into()).collect(),
        )
    }
}

/// [`uuid_in`] for the query builder.
pub fn uuid_in_expr(
    backend: sea_orm::DbBackend,
    column: impl sea_orm::ColumnTrait,
    ids: &[uuid::Uuid],
) -> sea_orm::sea_query::SimpleExpr {
    use sea_orm::sea_query::{Expr, ExprTrait, PgFunc};
    if backend == sea_orm::DbBackend::Postgres {
        Expr::col(column).eq(PgFunc::any(Expr::val(uuid_array(ids))))
    } else {
        column.is_in(ids.iter().copied())
    }
}

fn uuid_array(ids: &[uuid::Uuid]) -> sea_orm::Value {
    sea_orm::Value::Array(
        sea_orm::sea_query::ArrayType::Uuid,
        Some(Box::new(ids.iter().map(|id| (*id).into()).collect())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writers queue for their turn in the process instead of in SQLite's
    /// busy handler: with a busy timeout far shorter than the first
    /// writer holds the lock, every other writer still commits (without
    /// the gate they gave up with "database is locked").
    #[tokio::test]
    async fn sqlite_writers_wait_their_turn_instead_of_failing_busy() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("gate.db").display());
        let mut options = ConnectOptions::new(url);
        options.max_connections(10).sqlx_logging(false);
        options.map_sqlx_sqlite_opts(|opts| {
            opts.journal_mode(SqliteJournalMode::Wal)
                .busy_timeout(Duration::from_millis(20))
        });
        let db = sea_orm::Database::connect(options).await.unwrap();
        db.execute_unprepared("CREATE TABLE t (n INTEGER)")
            .await
            .unwrap();

        let held = begin_write(&db).await.unwrap();
        held.execute_unprepared("INSERT INTO t VALUES (0)")
            .await
            .unwrap();
        let writers: Vec<_> = (1..=8)
            .map(|n| {
                let db = db.clone();
                tokio::spawn(async move {
                    let txn = begin_write(&db).await?;
                    txn.execute_unprepared(&format!("INSERT INTO t VALUES ({n})"))
                        .await?;
                    txn.commit().await
                })
            })
            .collect();
        // The first writer holds the lock ten times SQLite's busy timeout.
        tokio::time::sleep(Duration::from_millis(200)).await;
        held.commit().await.unwrap();
        for writer in writers {
            writer.await.unwrap().expect("a waiting writer commits");
        }
        let row = db
            .query_one_raw(Statement::from_string(
                DbBackend::Sqlite,
                "SELECT COUNT(*) AS n FROM t",
            ))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(row.try_get::<i64>("", "n").unwrap(), 9);
    }

    #[test]
    fn placeholder_rows_number_each_row_after_the_last() {
        assert_eq!(placeholder_rows(1, 2, 2), "($1, $2), ($3, $4)");
        assert_eq!(placeholder_rows(3, 3, 1), "($3), ($4), ($5)");
        assert_eq!(placeholder_rows(1, 0, 2), "");
    }

    #[test]
    fn placeholders_are_shifted_outside_quotes_only() {
        assert_eq!(
            shift_placeholders("UPDATE t SET a = $1, b = $12 WHERE c = ANY($3)", 4),
            "UPDATE t SET a = $5, b = $16 WHERE c = ANY($7)"
        );
        assert_eq!(
            shift_placeholders("SELECT '$1', \"$2\", $2, 'it''s $3' || $3", 10),
            "SELECT '$1', \"$2\", $12, 'it''s $3' || $13"
        );
        assert_eq!(
            shift_placeholders("SELECT $ AS x, $1", 1),
            "SELECT $ AS x, $2"
        );
        assert_eq!(shift_placeholders("SELECT $1", 0), "SELECT $1");
    }
}
