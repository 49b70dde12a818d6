//! Full-text search over items' title and content: SQLite FTS5 (kept in step
//! by triggers) or PostgreSQL's generated `tsvector` (GIN-indexed), both
//! over the text stored for search ([`indexable`]: the title and the
//! content's plain text, never its markup; CJK characters one by one). User
//! text never reaches the query syntax: it is cut into word terms, each
//! matched as a prefix, all required. A query with no word characters
//! falls back to a plain substring match on titles. Feeds are matched by
//! name or URL substring.
//!
//! A ranked search is bounded three ways ([`Searcher`]): at most
//! `TRELLIS_SEARCH_CONCURRENCY` run at once in the process (so slow ones
//! never hold every pooled connection), a search waits at most its time
//! limit for its turn (then `RATE_LIMITED`), and its statement is stopped
//! after `TRELLIS_SEARCH_TIMEOUT_MS` (PostgreSQL's `statement_timeout`;
//! an SQLite progress handler that interrupts it) — `BAD_USER_INPUT`
//! asking for more specific words.
//!
//! On SQLite the FTS5 table drives the join (`items_fts CROSS JOIN
//! items`): the planner would otherwise walk the user's items by index and
//! run the full-text match once per item (seconds per query at 10k items).

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use entity::{feed, item};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseBackend, DatabaseConnection, DbErr,
    EntityTrait, FromQueryResult, Iterable, QueryFilter, QueryOrder, QueryResult, QuerySelect,
    QueryTrait, RuntimeErr, Statement, TransactionTrait,
    sea_query::{Expr, ExprTrait, Func, LikeExpr, SimpleExpr},
    sqlx,
};
use tokio::sync::Semaphore;
use uuid::Uuid;

use crate::error::{AppError, AppResult};

/// At most this many terms are used; the rest of a long query is ignored.
pub const MAX_TERMS: usize = 16;
const MAX_TERM_CHARS: usize = 64;

/// Chinese, Japanese and Korean characters: written without spaces between
/// words, so each is indexed and searched as a word of its own.
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x1100..=0x11FF // Hangul Jamo
        | 0x3040..=0x30FF // Hiragana, Katakana
        | 0x3130..=0x318F // Hangul compatibility Jamo
        | 0x31F0..=0x31FF // Katakana extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xAC00..=0xD7AF // Hangul syllables
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0x20000..=0x3134F // CJK extensions B–G
    )
}

/// Text as it is indexed (`items.search_title` / `search_body`): every CJK
/// character set apart by spaces, so that FTS5's `unicode61` and
/// PostgreSQL's parser, which treat a run of them as one word, see each
/// character as a word and a query can find a word inside a run.
pub fn indexable(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 4);
    for c in text.chars() {
        if is_cjk(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    out
}

/// The terms of a query: runs of letters and digits, lower-cased. A run
/// holding CJK characters becomes a phrase of its characters (`東 京`),
/// matched as adjacent words.
pub fn terms(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|term| !term.is_empty())
        .map(|term| {
            let term = term
                .chars()
                .take(MAX_TERM_CHARS)
                .collect::<String>()
                .to_lowercase();
            indexable(&term)
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ")
        })
        .take(MAX_TERMS)
        .collect()
}

/// FTS5: every term as a quoted prefix (`"rust"* "async"*`), a CJK phrase
/// as a quoted phrase (`"東 京"`).
pub fn fts5_query(terms: &[String]) -> String {
    terms
        .iter()
        .map(|term| {
            let term = term.replace('"', "");
            if term.contains(' ') {
                format!("\"{term}\"")
            } else {
                format!("\"{term}\"*")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// `to_tsquery`: every term as a prefix, all required (`rust:* & async:*`),
/// a CJK phrase as adjacent words (`(東 <-> 京)`). Terms are letters, digits
/// and single spaces only, so nothing else of tsquery's syntax can appear.
pub fn tsquery(terms: &[String]) -> String {
    terms
        .iter()
        .map(|term| {
            if term.contains(' ') {
                format!("({})", term.split(' ').collect::<Vec<_>>().join(" <-> "))
            } else {
                format!("{term}:*")
            }
        })
        .collect::<Vec<_>>()
        .join(" & ")
}

/// A condition on `items` for the `items(filter: {query})` list (which keeps
/// its date order).
pub fn matches(backend: DatabaseBackend, query: &str) -> SimpleExpr {
    let terms = terms(query);
    if terms.is_empty() {
        return title_contains(query);
    }
    // sea-query renumbers `$n` inside custom SQL on PostgreSQL; SQLite
    // needs the positional `?` it uses for the rest of the statement.
    match backend {
        DatabaseBackend::Postgres => Expr::cust_with_values(
            "items.search @@ to_tsquery('simple', $1)",
            [tsquery(&terms)],
        ),
        _ => Expr::cust_with_values(
            "items.id IN (SELECT rowid FROM items_fts WHERE items_fts MATCH ?)",
            [fts5_query(&terms)],
        ),
    }
}

/// `%text%` with LIKE's wildcards in `text` escaped: a literal substring.
fn substring(text: &str) -> LikeExpr {
    let escaped = text
        .trim()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    LikeExpr::new(format!("%{escaped}%")).escape('\\')
}

fn title_contains(query: &str) -> SimpleExpr {
    Expr::col((item::Entity, item::Column::Title)).like(substring(query))
}

/// The user's feeds whose name or URL contains `query` (ignoring case), by name.
pub async fn matching_feeds(
    db: &DatabaseConnection,
    user: Uuid,
    query: &str,
    limit: u64,
) -> AppResult<Vec<feed::Model>> {
    let lower = |column: feed::Column| Expr::expr(Func::lower(Expr::col(column)));
    let pattern = query.to_lowercase();
    Ok(feed::Entity::find()
        .filter(feed::Column::UserId.eq(user))
        .filter(
            Condition::any()
                .add(lower(feed::Column::Name).like(substring(&pattern)))
                .add(lower(feed::Column::Link).like(substring(&pattern))),
        )
        .order_by_asc(feed::Column::Name)
        .limit(limit)
        .all(db)
        .await?)
}

/// `TRELLIS_SEARCH_TIMEOUT_MS` and `TRELLIS_SEARCH_CONCURRENCY`.
#[derive(Debug, Clone)]
pub struct SearchLimits {
    /// How long one search statement may run.
    pub timeout: Duration,
    /// Searches running at once in this process.
    pub concurrency: usize,
}

impl Default for SearchLimits {
    fn default() -> Self {
        SearchLimits {
            timeout: Duration::from_millis(2000),
            concurrency: 4,
        }
    }
}

/// SQLite calls the progress handler every this many VM instructions
/// (well under a millisecond apart).
const PROGRESS_OPS: i32 = 1000;

/// Runs ranked searches within [`SearchLimits`]; cheap to clone (one
/// semaphore per process).
#[derive(Clone)]
pub struct Searcher {
    db: DatabaseConnection,
    slots: Arc<Semaphore>,
    timeout: Duration,
}

/// How a bounded statement ended badly.
enum Stopped {
    /// Past the time limit.
    Timeout,
    Db(DbErr),
}

impl From<DbErr> for Stopped {
    fn from(error: DbErr) -> Self {
        Stopped::Db(error)
    }
}

impl Searcher {
    pub fn new(db: DatabaseConnection, limits: SearchLimits) -> Self {
        Searcher {
            db,
            slots: Arc::new(Semaphore::new(limits.concurrency.max(1))),
            timeout: limits.timeout.max(Duration::from_millis(1)),
        }
    }

    /// The user's best `limit` items for `query`, best first (BM25 on
    /// SQLite, `ts_rank` on PostgreSQL; title matches weigh more than
    /// content).
    pub async fn ranked_items(
        &self,
        user: Uuid,
        query: &str,
        limit: u64,
    ) -> AppResult<Vec<item::Model>> {
        let statement = ranked_statement(self.db.get_database_backend(), user, query, limit);
        // Waiting for a turn takes no longer than a search may run.
        let _slot = tokio::time::timeout(self.timeout, self.slots.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or(AppError::RateLimited { retry_after: 1 })?;
        let rows = match self.db.get_database_backend() {
            DatabaseBackend::Postgres => self.on_postgres(statement).await,
            _ => self.on_sqlite(statement).await,
        };
        let rows = match rows {
            Ok(rows) => rows,
            Err(Stopped::Timeout) => {
                metrics::counter!("trellis_search_timeouts_total").increment(1);
                return Err(AppError::bad_input(
                    "query",
                    format!(
                        "the search took longer than {} ms; use longer or more specific words",
                        self.timeout.as_millis()
                    ),
                ));
            }
            Err(Stopped::Db(error)) => return Err(error.into()),
        };
        rows.iter()
            .map(|row| item::Model::from_query_result(row, "").map_err(AppError::from))
            .collect()
    }

    /// `statement_timeout` for this statement only (`SET LOCAL` in its
    /// own read transaction).
    async fn on_postgres(&self, statement: Statement) -> Result<Vec<QueryResult>, Stopped> {
        let txn = self.db.begin().await?;
        txn.execute_unprepared(&format!(
            "SET LOCAL statement_timeout = {}",
            self.timeout.as_millis()
        ))
        .await?;
        match txn.query_all_raw(statement).await {
            Ok(rows) => {
                txn.commit().await?;
                Ok(rows)
            }
            // 57014 query_canceled: the timeout fired.
            Err(error) if database_code(&error).as_deref() == Some("57014") => {
                Err(Stopped::Timeout)
            }
            Err(error) => Err(error.into()),
        }
    }

    /// A progress handler interrupts the statement at its deadline. It is
    /// installed on one pooled connection for the statement and removed
    /// after; if the search is dropped half-way (the request timed out),
    /// the connection is closed instead of going back to the pool with it.
    async fn on_sqlite(&self, statement: Statement) -> Result<Vec<QueryResult>, Stopped> {
        struct Armed(sqlx::pool::PoolConnection<sqlx::Sqlite>, bool);
        impl Drop for Armed {
            fn drop(&mut self) {
                if self.1 {
                    self.0.close_on_drop();
                }
            }
        }
        let sqlx_error = |error: sqlx::Error| DbErr::Conn(RuntimeErr::SqlxError(error.into()));
        let pool = self.db.get_sqlite_connection_pool();
        let mut conn = Armed(pool.acquire().await.map_err(sqlx_error)?, true);
        let deadline = Instant::now() + self.timeout;
        conn.0
            .lock_handle()
            .await
            .map_err(sqlx_error)?
            .set_progress_handler(PROGRESS_OPS, move || Instant::now() < deadline);
        let mut query = sqlx::query(sqlx::AssertSqlSafe(statement.sql.as_str()));
        for value in statement.values.iter().flat_map(|values| values.0.iter()) {
            query = match value {
                sea_orm::Value::Uuid(Some(uuid)) => query.bind(*uuid),
                sea_orm::Value::String(Some(text)) => query.bind(text.clone()),
                sea_orm::Value::BigInt(Some(number)) => query.bind(*number),
                sea_orm::Value::BigUnsigned(Some(number)) => {
                    query.bind(i64::try_from(*number).unwrap_or(i64::MAX))
                }
                other => {
                    return Err(Stopped::Db(DbErr::Custom(format!(
                        "unexpected search parameter {other:?}"
                    ))));
                }
            };
        }
        let result = query.fetch_all(&mut *conn.0).await;
        conn.0
            .lock_handle()
            .await
            .map_err(sqlx_error)?
            .remove_progress_handler();
        conn.1 = false;
        match result {
            Ok(rows) => Ok(rows.into_iter().map(QueryResult::from).collect()),
            // SQLITE_INTERRUPT: the progress handler stopped it.
            Err(sqlx::Error::Database(error)) if error.code().as_deref() == Some("9") => {
                Err(Stopped::Timeout)
            }
            Err(error) => Err(Stopped::Db(sqlx_error(error))),
        }
    }
}

/// The driver's error code (SQLSTATE on PostgreSQL).
fn database_code(error: &DbErr) -> Option<String> {
    match error {
        DbErr::Query(RuntimeErr::SqlxError(error))
        | DbErr::Exec(RuntimeErr::SqlxError(error))
        | DbErr::Conn(RuntimeErr::SqlxError(error)) => match error.as_ref() {
            sqlx::Error::Database(error) => error.code().map(|code| code.into_owned()),
            _ => None,
        },
        _ => None,
    }
}

/// The ranked search's one statement (the title fallback when the query
/// has no word terms). Parameters are a UUID, text and a 64-bit limit only.
pub fn ranked_statement(
    backend: DatabaseBackend,
    user: Uuid,
    query: &str,
    limit: u64,
) -> Statement {
    let terms = terms(query);
    if terms.is_empty() {
        return item::Entity::find()
            .filter(item::Column::UserId.eq(user))
            .filter(title_contains(query))
            .order_by_desc(item::Column::PubDate)
            .limit(limit)
            .build(backend);
    }
    let columns = item::Column::iter()
        .map(|column| format!("items.{}", sea_orm::IdenStatic::as_str(&column)))
        .collect::<Vec<_>>()
        .join(", ");
    // Rank first, then read: the ranking carries only the id and its sort
    // keys through the top-N sort, and the whole rows (content, sanitized
    // HTML, search text: kilobytes each) are read for the `limit` winners
    // alone. Sorting whole rows cost PostgreSQL a third more time per
    // query once items grew their search and HTML columns
    // (`docs/benchmarks.md`, "Paired re-run").
    let ranking = match backend {
        DatabaseBackend::Postgres => {
            "SELECT items.id, ts_rank(items.search, q) AS rank, items.pub_date \
             FROM items, to_tsquery('simple', $2) AS q \
             WHERE items.user_id = $1 AND items.search @@ q \
             ORDER BY rank DESC, items.pub_date DESC, items.id DESC LIMIT $3"
        }
        // CROSS JOIN: SQLite keeps the left table outermost, so the
        // full-text match runs once and drives the join. BM25 is lower
        // for better matches.
        _ => {
            "SELECT items.id, -bm25(items_fts, 10.0, 1.0) AS rank, items.pub_date \
             FROM items_fts CROSS JOIN items ON items.id = items_fts.rowid \
             WHERE items_fts MATCH $2 AND items.user_id = $1 \
             ORDER BY rank DESC, items.pub_date DESC, items.id DESC LIMIT $3"
        }
    };
    // SQLite's CROSS JOIN keeps the winners outermost; PostgreSQL has no
    // CROSS JOIN … ON and plans the fifty lookups by the key on its own.
    let (query, join) = match backend {
        DatabaseBackend::Postgres => (tsquery(&terms), "JOIN"),
        _ => (fts5_query(&terms), "CROSS JOIN"),
    };
    Statement::from_sql_and_values(
        backend,
        format!(
            "SELECT {columns} FROM ({ranking}) AS best {join} items ON items.id = best.id \
             ORDER BY best.rank DESC, best.pub_date DESC, best.id DESC"
        ),
        [user.into(), query.into(), (limit as i64).into()],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_text_becomes_safe_prefix_terms() {
        assert_eq!(terms("Rust's  async-IO!"), vec!["rust", "s", "async", "io"]);
        assert_eq!(
            terms("NEAR OR \"x\" * ^col:"),
            vec!["near", "or", "x", "col"]
        );
        assert_eq!(
            terms("Überraschung 日本語"),
            vec!["überraschung", "日 本 語"]
        );
        assert_eq!(terms("東京2020"), vec!["東 京 2020"]);
        assert!(terms(" !!! ").is_empty());
        assert_eq!(terms(&"a ".repeat(40)).len(), MAX_TERMS);
    }

    #[test]
    fn backend_queries_quote_every_term_as_a_prefix() {
        let t = terms("tokio OR select");
        assert_eq!(fts5_query(&t), r#""tokio"* "or"* "select"*"#);
        assert_eq!(tsquery(&t), "tokio:* & or:* & select:*");
        let cjk = terms("rust 東京");
        assert_eq!(fts5_query(&cjk), r#""rust"* "東 京""#);
        assert_eq!(tsquery(&cjk), "rust:* & (東 <-> 京)");
    }

    #[test]
    fn cjk_characters_are_indexed_one_by_one() {
        assert_eq!(indexable("今日は東京 ok"), " 今  日  は  東  京  ok");
        assert_eq!(indexable("plain text"), "plain text");
    }
}
