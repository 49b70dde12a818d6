//! DataLoaders: batch the per-row lookups a field would otherwise make
//! (no N+1). One set is created per request, so caches never outlive the
//! request or cross users. Loaders resolve ids taken from rows the resolver
//! already authorized (an item's feed, a feed's group), never ids from the
//! client.
//!
//! The shared pieces; each domain keeps its own loaders (`feeds::loaders`,
//! `nodes::loaders`) and adds a fresh set to every request's data. Pattern:
//! rows by primary key go through [`ById`] (implement [`Keyed`] for the
//! entity with [`keyed!`]); anything else gets its own `Loader<K>` that
//! loads many keys with one `WHERE … IN (…)` query ([`limited_per_key`]
//! when each key wants at most so many rows).

use std::{collections::HashMap, hash::Hash, marker::PhantomData, sync::Arc};

use async_graphql::dataloader::Loader;
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, FromQueryResult, QueryFilter,
    Statement,
};

use crate::db::placeholders;

/// An entity loadable by its single-column primary key.
pub trait Keyed: EntityTrait {
    type Key: Into<sea_orm::Value> + Copy + Eq + Hash + Send + Sync + 'static;
    fn key_column() -> Self::Column;
    fn key_of(model: &Self::Model) -> Self::Key;
}

/// Implements [`Keyed`]: `keyed!(entity, key type, key column, key field)`.
#[macro_export]
macro_rules! keyed {
    ($entity:path, $key:ty, $column:ident, $field:ident) => {
        impl $crate::graphql::loaders::Keyed for $entity {
            type Key = $key;
            fn key_column() -> Self::Column {
                <$entity as ::sea_orm::EntityTrait>::Column::$column
            }
            fn key_of(model: &Self::Model) -> $key {
                model.$field
            }
        }
    };
}

/// Rows by primary key.
pub struct ById<E>(DatabaseConnection, PhantomData<E>);

impl<E> ById<E> {
    pub fn new(db: &DatabaseConnection) -> Self {
        ById(db.clone(), PhantomData)
    }
}

impl<E> Loader<E::Key> for ById<E>
where
    E: Keyed + Send + Sync,
    E::Model: Clone + Send + Sync,
{
    type Value = E::Model;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[E::Key]) -> Result<HashMap<E::Key, Self::Value>, Self::Error> {
        Ok(E::find()
            .filter(E::key_column().is_in(keys.iter().copied()))
            .all(&self.0)
            .await?
            .into_iter()
            .map(|model| (E::key_of(&model), model))
            .collect())
    }
}

/// Rows for keys of (id, at most how many): `sql` reads the ids where it
/// says `{}`, and the largest limit asked in the batch as `$1`, which it
/// applies per id with `ROW_NUMBER()` (so one id with many rows does not
/// bring them all); each row names its id `link`. Returns the rows of each
/// key, cut to the key's own limit.
pub async fn limited_per_key<T: FromQueryResult + Clone>(
    db: &DatabaseConnection,
    sql: &str,
    keys: &[(i64, u64)],
) -> Result<HashMap<(i64, u64), Vec<T>>, Arc<sea_orm::DbErr>> {
    let largest = keys.iter().map(|(_, limit)| *limit).max().unwrap_or(0);
    let mut values: Vec<sea_orm::Value> = vec![(largest as i64).into()];
    values.extend(keys.iter().map(|&(id, _)| sea_orm::Value::from(id)));
    let rows = db
        .query_all_raw(Statement::from_sql_and_values(
            db.get_database_backend(),
            sql.replace("{}", &placeholders(2, keys.len())),
            values,
        ))
        .await?;
    let mut by_id: HashMap<i64, Vec<T>> = HashMap::new();
    for row in rows {
        by_id
            .entry(row.try_get("", "link")?)
            .or_default()
            .push(T::from_query_result(&row, "")?);
    }
    Ok(keys
        .iter()
        .map(|&(id, limit)| {
            let mut rows = by_id.get(&id).cloned().unwrap_or_default();
            rows.truncate(limit as usize);
            ((id, limit), rows)
        })
        .collect())
}
