//! Relay cursor connections over keyset pagination — the one pagination
//! helper every list in the schema uses.
//!
//! How it maps to Relay: `first` (default 50, at most 200) and `after` are
//! the forward-pagination arguments; each edge's `cursor` is the opaque
//! encoding of the row's sort key (base64url of a small JSON array), and the
//! page after it is `WHERE (k1, k2, …) > (v1, v2, …)` (or `<` for a
//! descending order) — a row-value comparison both SQLite and PostgreSQL
//! serve from the index on the key. The last key column must be unique (an
//! id), so the order is total and stable while rows are inserted.
//! `pageInfo.hasNextPage` comes from fetching one row more than asked;
//! `totalCount` is counted only when a client selects it.
//!
//! A cursor comes from the client, so it is checked before any SQL: it
//! must have one value per key column, each of the column's type (a text
//! compared with a `bigint` is an error on PostgreSQL, not an empty page),
//! and pass the input rules (`crate::input`); else `BAD_USER_INPUT`.

use std::sync::Arc;

use async_graphql::{
    Object, OutputType,
    connection::{Connection, CursorType, Edge},
};
use base64::{Engine, engine::general_purpose::URL_SAFE_NO_PAD};
use chrono::{DateTime, Utc};
use futures_util::future::BoxFuture;
use sea_orm::{
    ColumnTrait, ColumnType, DatabaseConnection, EntityTrait, Order, PaginatorTrait, QueryFilter,
    QueryOrder, QuerySelect, Select,
    sea_query::{Expr, ExprTrait, IntoColumnRef, SimpleExpr},
};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::error::{AppError, AppResult};

pub const DEFAULT_PAGE_SIZE: usize = 50;
pub const MAX_PAGE_SIZE: usize = 200;

/// One component of a sort key.
/// Tagged, so a text that happens to look like a UUID or a date decodes as
/// the type it was encoded from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KeyValue {
    #[serde(rename = "i")]
    Int(i64),
    #[serde(rename = "u")]
    Uuid(Uuid),
    #[serde(rename = "t")]
    Time(DateTime<Utc>),
    #[serde(rename = "s")]
    Text(String),
}

impl KeyValue {
    /// Whether this value may stand for a value of a column of `column_type`:
    /// the same kind of value, within what both databases store.
    fn fits(&self, column_type: &ColumnType) -> bool {
        match self {
            KeyValue::Int(_) => matches!(
                column_type,
                ColumnType::TinyInteger
                    | ColumnType::SmallInteger
                    | ColumnType::Integer
                    | ColumnType::BigInteger
            ),
            KeyValue::Uuid(_) => matches!(column_type, ColumnType::Uuid),
            KeyValue::Time(time) => {
                matches!(
                    column_type,
                    ColumnType::TimestampWithTimeZone
                        | ColumnType::Timestamp
                        | ColumnType::DateTime
                ) && (1..=9999).contains(&chrono::Datelike::year(time))
            }
            KeyValue::Text(text) => {
                matches!(
                    column_type,
                    ColumnType::String(_) | ColumnType::Text | ColumnType::Char(_)
                ) && crate::input::check_text(text).is_ok()
            }
        }
    }
}

/// Whether `cursor` is a key of a list ordered by columns of these types
/// (`field` names the argument it came in).
fn check_cursor(
    cursor: &Cursor,
    column_types: &[ColumnType],
    field: &'static str,
) -> AppResult<()> {
    let fits = cursor.0.len() == column_types.len()
        && cursor
            .0
            .iter()
            .zip(column_types)
            .all(|(value, column_type)| value.fits(column_type));
    if fits {
        Ok(())
    } else {
        Err(AppError::bad_input(
            field,
            "cursor does not belong to this list",
        ))
    }
}

impl From<KeyValue> for sea_orm::Value {
    fn from(value: KeyValue) -> Self {
        match value {
            KeyValue::Int(v) => v.into(),
            KeyValue::Uuid(v) => v.into(),
            KeyValue::Time(v) => v.into(),
            KeyValue::Text(v) => v.into(),
        }
    }
}

/// The opaque cursor: a row's sort key.
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor(pub Vec<KeyValue>);

impl CursorType for Cursor {
    type Error = &'static str;

    fn decode_cursor(s: &str) -> Result<Self, Self::Error> {
        let bytes = URL_SAFE_NO_PAD.decode(s).map_err(|_| "invalid cursor")?;
        serde_json::from_slice(&bytes)
            .map(Cursor)
            .map_err(|_| "invalid cursor")
    }

    fn encode_cursor(&self) -> String {
        // Serialising plain values to JSON cannot fail.
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&self.0).unwrap_or_default())
    }
}

/// `totalCount` on every connection, computed only when selected.
#[derive(Clone)]
pub struct TotalCount(Arc<dyn Fn() -> BoxFuture<'static, AppResult<u64>> + Send + Sync>);

#[Object]
impl TotalCount {
    /// Number of items in the whole list, across all pages.
    async fn total_count(&self) -> async_graphql::Result<u64> {
        Ok((self.0)().await?)
    }
}

pub type KeysetConnection<N> = Connection<Cursor, N, TotalCount>;

/// The complexity of a paged list field: every field under it counts once
/// per row the page may hold (`first`, capped like [`PageRequest::new`]).
pub fn page_cost(first: Option<i32>, child_complexity: usize) -> usize {
    let rows = first.map_or(DEFAULT_PAGE_SIZE, |n| {
        usize::try_from(n).unwrap_or(0).min(MAX_PAGE_SIZE)
    });
    rows.saturating_mul(child_complexity)
}

/// The complexity of a list field of at most `max` rows.
pub fn list_cost(max: u64, first: i32, child_complexity: usize) -> usize {
    let rows = std::cmp::min(u64::try_from(first).unwrap_or(0), max) as usize;
    rows.saturating_mul(child_complexity)
}

/// The forward-pagination arguments, validated.
#[derive(Debug, Clone)]
pub struct PageRequest {
    pub limit: usize,
    pub after: Option<Cursor>,
}

impl PageRequest {
    pub fn new(first: Option<i32>, after: Option<String>) -> AppResult<Self> {
        let limit = match first {
            None => DEFAULT_PAGE_SIZE,
            Some(n) if n < 0 => {
                return Err(AppError::bad_input("first", "first must not be negative"));
            }
            Some(n) => (n as usize).min(MAX_PAGE_SIZE),
        };
        let after = after
            .map(|text| Cursor::decode_cursor(&text))
            .transpose()
            .map_err(|message| AppError::bad_input("after", message))?;
        Ok(PageRequest { limit, after })
    }
}

/// A sort order over key columns (all in the same direction; the last one unique).
pub struct Keyset<C> {
    pub columns: Vec<C>,
    pub order: Order,
}

impl<C: ColumnTrait + IntoColumnRef + Copy> Keyset<C> {
    pub fn ascending(columns: Vec<C>) -> Self {
        Keyset {
            columns,
            order: Order::Asc,
        }
    }

    pub fn descending(columns: Vec<C>) -> Self {
        Keyset {
            columns,
            order: Order::Desc,
        }
    }

    fn after(&self, cursor: &Cursor, field: &'static str) -> AppResult<SimpleExpr> {
        let column_types: Vec<ColumnType> = self
            .columns
            .iter()
            .map(|column| column.def().get_column_type().clone())
            .collect();
        check_cursor(cursor, &column_types, field)?;
        let left = Expr::tuple(self.columns.iter().map(|c| Expr::col(*c)));
        let right = Expr::tuple(
            cursor
                .0
                .iter()
                .cloned()
                .map(|v| Expr::val(sea_orm::Value::from(v))),
        );
        Ok(match self.order {
            Order::Desc => left.lt(right),
            _ => left.gt(right),
        })
    }
}

/// Runs `select` as one page of a connection.
///
/// `select` carries the list's filters (and nothing about order or limits);
/// `key` extracts a row's sort key in the keyset's column order.
pub async fn paginate<E, N>(
    db: &DatabaseConnection,
    select: Select<E>,
    keyset: Keyset<E::Column>,
    page: PageRequest,
    key: impl Fn(&E::Model) -> Vec<KeyValue>,
    node: impl Fn(E::Model) -> N,
) -> AppResult<KeysetConnection<N>>
where
    E: EntityTrait,
    E::Model: Sync,
    N: OutputType,
{
    try_paginate(db, select, keyset, page, key, |row| Ok(node(row))).await
}

/// [`paginate`] for nodes built from a row by a conversion that can fail
/// (a stored value the code cannot read): the page fails with the first
/// such error.
pub async fn try_paginate<E, N>(
    db: &DatabaseConnection,
    select: Select<E>,
    keyset: Keyset<E::Column>,
    page: PageRequest,
    key: impl Fn(&E::Model) -> Vec<KeyValue>,
    node: impl Fn(E::Model) -> AppResult<N>,
) -> AppResult<KeysetConnection<N>>
where
    E: EntityTrait,
    E::Model: Sync,
    N: OutputType,
{
    let total = {
        let (db, select) = (db.clone(), select.clone());
        TotalCount(Arc::new(move || {
            let (db, select) = (db.clone(), select.clone());
            Box::pin(async move { Ok(select.count(&db).await?) })
        }))
    };

    let (rows, has_next_page) = keyset_page(
        db,
        select,
        &keyset,
        page.after.as_ref(),
        "after",
        page.limit as u64,
    )
    .await?;
    let mut connection =
        Connection::with_additional_fields(page.after.is_some(), has_next_page, total);
    for row in rows {
        let cursor = Cursor(key(&row));
        connection.edges.push(Edge::new(cursor, node(row)?));
    }
    Ok(connection)
}

/// One page of `select` in the keyset's order: at most `limit` rows after
/// `after` (checked first; `field` names the argument it came in), and
/// whether more follow. `select` carries the filters, not the order.
pub async fn keyset_page<E>(
    db: &DatabaseConnection,
    select: Select<E>,
    keyset: &Keyset<E::Column>,
    after: Option<&Cursor>,
    field: &'static str,
    limit: u64,
) -> AppResult<(Vec<E::Model>, bool)>
where
    E: EntityTrait,
{
    let mut query = select;
    if let Some(cursor) = after {
        query = query.filter(keyset.after(cursor, field)?);
    }
    for column in &keyset.columns {
        query = query.order_by(*column, keyset.order.clone());
    }
    let mut rows = query.limit(limit.saturating_add(1)).all(db).await?;
    let more = rows.len() as u64 > limit;
    rows.truncate(limit as usize);
    Ok((rows, more))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_round_trips_every_key_type() {
        let cursor = Cursor(vec![
            KeyValue::Time("2026-11-30T10:00:00Z".parse().unwrap()),
            KeyValue::Uuid(Uuid::nil()),
            KeyValue::Int(-4),
            KeyValue::Text("alice".into()),
        ]);
        let decoded = Cursor::decode_cursor(&cursor.encode_cursor()).unwrap();
        assert_eq!(decoded.0.len(), 4);
        assert_eq!(decoded.0[2], KeyValue::Int(-4));
        assert_eq!(decoded.0[3], KeyValue::Text("alice".into()));
    }

    #[test]
    fn a_cursor_must_match_the_key_columns_in_number_and_type() {
        let key = [ColumnType::TimestampWithTimeZone, ColumnType::BigInteger];
        let at = |text: &str| KeyValue::Time(text.parse().unwrap());
        let ok = Cursor(vec![at("2026-11-30T10:00:00Z"), KeyValue::Int(7)]);
        assert!(check_cursor(&ok, &key, "after").is_ok());
        for wrong in [
            vec![KeyValue::Int(5)],
            vec![KeyValue::Int(5), KeyValue::Int(7)],
            vec![at("2026-11-30T10:00:00Z"), KeyValue::Text("7".into())],
            vec![at("2026-11-30T10:00:00Z"), KeyValue::Uuid(Uuid::nil())],
            vec![
                KeyValue::Time(
                    chrono::TimeZone::with_ymd_and_hms(&Utc, 12026, 11, 30, 10, 0, 0).unwrap(),
                ),
                KeyValue::Int(7),
            ],
            vec![
                at("2026-11-30T10:00:00Z"),
                KeyValue::Int(7),
                KeyValue::Int(8),
            ],
        ] {
            let error = check_cursor(&Cursor(wrong.clone()), &key, "after").unwrap_err();
            assert_eq!(error.code(), "BAD_USER_INPUT", "{wrong:?}");
        }
        let text = [ColumnType::String(Default::default())];
        assert!(
            check_cursor(
                &Cursor(vec![KeyValue::Text("alice".into())]),
                &text,
                "after"
            )
            .is_ok()
        );
        assert!(check_cursor(&Cursor(vec![KeyValue::Text("a\0".into())]), &text, "after").is_err());
        // `users(after: "W3siaSI6IDV9XQ")`: an integer for the username.
        let cursor = Cursor::decode_cursor("W3siaSI6IDV9XQ").unwrap();
        assert!(check_cursor(&cursor, &text, "after").is_err());
    }

    #[test]
    fn bad_page_arguments_are_user_errors() {
        assert!(PageRequest::new(Some(-1), None).is_err());
        assert!(PageRequest::new(None, Some("%%%".into())).is_err());
        assert_eq!(
            PageRequest::new(Some(10_000), None).unwrap().limit,
            MAX_PAGE_SIZE
        );
        assert_eq!(
            PageRequest::new(None, None).unwrap().limit,
            DEFAULT_PAGE_SIZE
        );
    }
}
