//! Full-text search, one way for every domain: how text is indexed and
//! how a user's query becomes a backend query (SQLite FTS5 or PostgreSQL's
//! `tsvector`), and the [`Searcher`] that runs ranked statements within
//! bounds. User text never reaches the query syntax: it is cut into word
//! terms, each matched as a prefix, all required; CJK characters are
//! indexed and searched one by one.
//!
//! A ranked search is bounded three ways ([`Searcher`]): at most
//! `TRELLIS_SEARCH_CONCURRENCY` run at once in the process (so slow ones
//! never hold every pooled connection), a search waits at most its time
//! limit for its turn (then `RATE_LIMITED`), and its statement is stopped
//! after `TRELLIS_SEARCH_TIMEOUT_MS` (PostgreSQL's `statement_timeout`;
//! an SQLite progress handler that interrupts it) — `BAD_USER_INPUT`
//! asking for more specific words.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use sea_orm::{
    ConnectionTrait, DatabaseBackend, DatabaseConnection, DbErr, QueryResult, RuntimeErr,
    Statement, TransactionTrait, sqlx,
};
use tokio::sync::Semaphore;

use crate::error::{AppError, AppResult};

/// At most this many terms are used; the rest of a long query is ignored.
pub const MAX_TERMS: usize = 16;
const MAX_TERM_CHARS: usize = 64;

/// Chinese, Japanese and Korean characters: written without spaces between
/// words, so each is indexed and searched as a word of its own.
pub fn is_cjk(c: char) -> bool {
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

    /// The database's backend, for building statements.
    pub fn backend(&self) -> DatabaseBackend {
        self.db.get_database_backend()
    }

    /// Runs a ranked search's `statement` within the limits: waits at most
    /// the time limit for a turn (then `RATE_LIMITED`), and a statement
    /// past it is stopped (`BAD_USER_INPUT` asking for more specific
    /// words). Parameters may be UUIDs, text and 64-bit integers.
    pub async fn run(&self, statement: Statement) -> AppResult<Vec<QueryResult>> {
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
        match rows {
            Ok(rows) => Ok(rows),
            Err(Stopped::Timeout) => {
                metrics::counter!("trellis_search_timeouts_total").increment(1);
                Err(AppError::bad_input(
                    "query",
                    format!(
                        "the search took longer than {} ms; use longer or more specific words",
                        self.timeout.as_millis()
                    ),
                ))
            }
            Err(Stopped::Db(error)) => Err(error.into()),
        }
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
