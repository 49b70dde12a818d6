//! DataLoaders: batch the per-row lookups a field would otherwise make
//! (no N+1). One set is created per request, so caches never outlive the
//! request or cross users. Loaders resolve ids taken from rows the resolver
//! already authorized (an item's feed, a feed's group), never ids from the
//! client.
//!
//! Pattern for a domain: rows by primary key go through [`ById`] (implement
//! [`Keyed`] for the entity); anything else gets its own `Loader<K>` that
//! loads many keys with one `WHERE … IN (…)` query. Add it to [`Loaders`]
//! and in the field resolver call `loaders.<loader>.load_one(key)`.

use std::{collections::HashMap, hash::Hash, marker::PhantomData, sync::Arc};

use async_graphql::dataloader::{DataLoader, Loader};
use entity::{feed, feed_fetch_state, feed_group, item, user};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect,
    sea_query::{Expr, Func},
};
use uuid::Uuid;

/// The loaders of one request.
pub struct Loaders {
    pub users: DataLoader<ById<user::Entity>>,
    pub feeds: DataLoader<ById<feed::Entity>>,
    pub feed_groups: DataLoader<ById<feed_group::Entity>>,
    pub fetch_states: DataLoader<ById<feed_fetch_state::Entity>>,
    pub item_counts: DataLoader<ItemCountLoader>,
}

impl Loaders {
    pub fn new(db: &DatabaseConnection) -> Arc<Self> {
        Arc::new(Loaders {
            users: DataLoader::new(ById::new(db), tokio::spawn),
            feeds: DataLoader::new(ById::new(db), tokio::spawn),
            feed_groups: DataLoader::new(ById::new(db), tokio::spawn),
            fetch_states: DataLoader::new(ById::new(db), tokio::spawn),
            item_counts: DataLoader::new(ItemCountLoader(db.clone()), tokio::spawn),
        })
    }
}

/// An entity loadable by its single-column primary key.
pub trait Keyed: EntityTrait {
    type Key: Into<sea_orm::Value> + Copy + Eq + Hash + Send + Sync + 'static;
    fn key_column() -> Self::Column;
    fn key_of(model: &Self::Model) -> Self::Key;
}

macro_rules! keyed {
    ($entity:path, $key:ty, $column:ident, $field:ident) => {
        impl Keyed for $entity {
            type Key = $key;
            fn key_column() -> Self::Column {
                <$entity as EntityTrait>::Column::$column
            }
            fn key_of(model: &Self::Model) -> $key {
                model.$field
            }
        }
    };
}

keyed!(user::Entity, Uuid, Id, id);
keyed!(feed::Entity, i64, Id, id);
keyed!(feed_group::Entity, i64, Id, id);
keyed!(feed_fetch_state::Entity, i64, FeedId, feed_id);

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

/// How many items a feed has, and how many are unread.
#[derive(Debug, Clone, Copy, Default)]
pub struct ItemCounts {
    pub total: i64,
    pub unread: i64,
}

/// Item counts by feed id: one grouped query for every feed on the page.
pub struct ItemCountLoader(DatabaseConnection);

impl Loader<i64> for ItemCountLoader {
    type Value = ItemCounts;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Self::Value>, Self::Error> {
        let unread = Expr::case(item::Column::Unread.eq(true), 1).finally(0);
        let rows: Vec<(i64, i64, i64)> = item::Entity::find()
            .select_only()
            .column(item::Column::FeedId)
            .expr(Func::count(Expr::col(item::Column::Id)))
            .expr(Func::sum(unread))
            .filter(item::Column::FeedId.is_in(keys.iter().copied()))
            .group_by(item::Column::FeedId)
            .into_tuple()
            .all(&self.0)
            .await?;
        let mut counts: HashMap<i64, ItemCounts> = keys
            .iter()
            .map(|key| (*key, ItemCounts::default()))
            .collect();
        for (feed_id, total, unread) in rows {
            counts.insert(feed_id, ItemCounts { total, unread });
        }
        Ok(counts)
    }
}
