//! Full-text search over items' title and content: SQLite FTS5 (kept in step
//! by triggers) or PostgreSQL's generated `tsvector` (GIN-indexed), both
//! over the text stored for search ([`crate::fulltext::indexable`]: the title and the
//! content's plain text, never its markup; CJK characters one by one), the
//! terms and bounds of [`crate::fulltext`]. A query with no word characters
//! falls back to a plain substring match on titles. Feeds are matched by
//! name or URL substring.
//!
//! On SQLite the FTS5 table drives the join (`items_fts CROSS JOIN
//! items`): the planner would otherwise walk the user's items by index and
//! run the full-text match once per item (seconds per query at 10k items).

use entity::{feed, item};
use sea_orm::{
    ColumnTrait, Condition, DatabaseBackend, DatabaseConnection, EntityTrait, FromQueryResult,
    Iterable, QueryFilter, QueryOrder, QuerySelect, QueryTrait, Statement,
    sea_query::{Expr, ExprTrait, Func, LikeExpr, SimpleExpr},
};
use uuid::Uuid;

use crate::{
    error::{AppError, AppResult},
    fulltext::{Searcher, fts5_query, terms, tsquery},
};

/// The user's best `limit` items for `query`, best first (BM25 on SQLite,
/// `ts_rank` on PostgreSQL; title matches weigh more than content), within
/// the searcher's bounds.
pub async fn ranked_items(
    searcher: &Searcher,
    user: Uuid,
    query: &str,
    limit: u64,
) -> AppResult<Vec<item::Model>> {
    let statement = ranked_statement(searcher.backend(), user, query, limit);
    searcher
        .run(statement)
        .await?
        .iter()
        .map(|row| item::Model::from_query_result(row, "").map_err(AppError::from))
        .collect()
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
        // for better matches. `idx_items_rank` (id, user_id, pub_date) is
        // all the ranking reads of an item: it spares reading every
        // matched row, kilobytes each (migration 000026).
        _ => {
            "SELECT items.id, -bm25(items_fts, 10.0, 1.0) AS rank, items.pub_date \
             FROM items_fts CROSS JOIN items INDEXED BY idx_items_rank ON items.id = items_fts.rowid \
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
