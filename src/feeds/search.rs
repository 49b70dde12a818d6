//! Full-text search over items' title and content: SQLite FTS5 (kept in step
//! by triggers) or PostgreSQL's generated `tsvector` (GIN-indexed). User
//! text never reaches the query syntax: it is cut into word terms, each
//! matched as a prefix, all required. A query with no word characters
//! falls back to a plain substring match on titles. Feeds are matched by
//! name or URL substring.

use entity::{feed, item};
use sea_orm::{
    ColumnTrait, Condition, DatabaseBackend, DatabaseConnection, EntityTrait, FromQueryResult,
    Iterable, QueryFilter, QueryOrder, QuerySelect, Select, Statement,
    sea_query::{Expr, ExprTrait, Func, LikeExpr, SimpleExpr},
};
use uuid::Uuid;

use crate::error::AppResult;

/// At most this many terms are used; the rest of a long query is ignored.
pub const MAX_TERMS: usize = 16;
const MAX_TERM_CHARS: usize = 64;

/// The word terms of a query: runs of letters and digits, lower-cased.
pub fn terms(query: &str) -> Vec<String> {
    query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|term| !term.is_empty())
        .map(|term| {
            term.chars()
                .take(MAX_TERM_CHARS)
                .collect::<String>()
                .to_lowercase()
        })
        .take(MAX_TERMS)
        .collect()
}

/// FTS5: every term as a quoted prefix (`"rust"* "async"*`).
pub fn fts5_query(terms: &[String]) -> String {
    terms
        .iter()
        .map(|term| format!("\"{}\"*", term.replace('"', "")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `to_tsquery`: every term as a prefix, all required (`rust:* & async:*`).
/// Terms are letters and digits only, so nothing else of tsquery's syntax
/// can appear.
pub fn tsquery(terms: &[String]) -> String {
    terms
        .iter()
        .map(|term| format!("{term}:*"))
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

/// The user's best `limit` items for `query`, best first (BM25 on SQLite,
/// `ts_rank` on PostgreSQL; title matches weigh more than content).
pub async fn ranked_items(
    db: &DatabaseConnection,
    user: Uuid,
    query: &str,
    limit: u64,
) -> AppResult<Vec<item::Model>> {
    let terms = terms(query);
    if terms.is_empty() {
        return Ok(fallback(user, query, limit).all(db).await?);
    }
    let columns = item::Column::iter()
        .map(|column| format!("items.{}", sea_orm::IdenStatic::as_str(&column)))
        .collect::<Vec<_>>()
        .join(", ");
    let backend = db.get_database_backend();
    let statement = match backend {
        DatabaseBackend::Postgres => Statement::from_sql_and_values(
            backend,
            format!(
                "SELECT {columns} FROM items, to_tsquery('simple', $2) AS q \
                 WHERE items.user_id = $1 AND items.search @@ q \
                 ORDER BY ts_rank(items.search, q) DESC, items.pub_date DESC, items.id DESC LIMIT $3"
            ),
            [user.into(), tsquery(&terms).into(), (limit as i64).into()],
        ),
        _ => Statement::from_sql_and_values(
            backend,
            format!(
                "SELECT {columns} FROM items_fts JOIN items ON items.id = items_fts.rowid \
                 WHERE items_fts MATCH $2 AND items.user_id = $1 \
                 ORDER BY bm25(items_fts, 10.0, 1.0), items.pub_date DESC, items.id DESC LIMIT $3"
            ),
            [
                user.into(),
                fts5_query(&terms).into(),
                (limit as i64).into(),
            ],
        ),
    };
    Ok(item::Model::find_by_statement(statement).all(db).await?)
}

fn fallback(user: Uuid, query: &str, limit: u64) -> Select<item::Entity> {
    item::Entity::find()
        .filter(item::Column::UserId.eq(user))
        .filter(title_contains(query))
        .order_by_desc(item::Column::PubDate)
        .limit(limit)
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
        assert_eq!(terms("Überraschung 日本語"), vec!["überraschung", "日本語"]);
        assert!(terms(" !!! ").is_empty());
        assert_eq!(terms(&"a ".repeat(40)).len(), MAX_TERMS);
    }

    #[test]
    fn backend_queries_quote_every_term_as_a_prefix() {
        let t = terms("tokio OR select");
        assert_eq!(fts5_query(&t), r#""tokio"* "or"* "select"*"#);
        assert_eq!(tsquery(&t), "tokio:* & or:* & select:*");
    }
}
