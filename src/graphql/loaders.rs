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
use entity::{feed, feed_fetch_state, feed_group, item, node, resource, user};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, FromQueryResult, QueryFilter,
    QueryOrder, QuerySelect, Statement,
    sea_query::{Expr, Func},
};
use uuid::Uuid;

use crate::db::placeholders;

/// The loaders of one request.
pub struct Loaders {
    pub users: DataLoader<ById<user::Entity>>,
    pub feeds: DataLoader<ById<feed::Entity>>,
    pub feed_groups: DataLoader<ById<feed_group::Entity>>,
    pub fetch_states: DataLoader<ById<feed_fetch_state::Entity>>,
    pub item_counts: DataLoader<ItemCountLoader>,
    pub group_feeds: DataLoader<GroupFeedsLoader>,
    pub nodes: DataLoader<ById<node::Entity>>,
    pub node_children: DataLoader<ChildrenLoader>,
    pub node_resources: DataLoader<NodeResourcesLoader>,
    pub resource_nodes: DataLoader<ResourceNodesLoader>,
}

impl Loaders {
    pub fn new(db: &DatabaseConnection) -> Arc<Self> {
        Arc::new(Loaders {
            users: DataLoader::new(ById::new(db), tokio::spawn),
            feeds: DataLoader::new(ById::new(db), tokio::spawn),
            feed_groups: DataLoader::new(ById::new(db), tokio::spawn),
            fetch_states: DataLoader::new(ById::new(db), tokio::spawn),
            item_counts: DataLoader::new(ItemCountLoader(db.clone()), tokio::spawn),
            group_feeds: DataLoader::new(GroupFeedsLoader(db.clone()), tokio::spawn),
            nodes: DataLoader::new(ById::new(db), tokio::spawn),
            node_children: DataLoader::new(ChildrenLoader(db.clone()), tokio::spawn),
            node_resources: DataLoader::new(NodeResourcesLoader(db.clone()), tokio::spawn),
            resource_nodes: DataLoader::new(ResourceNodesLoader(db.clone()), tokio::spawn),
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
keyed!(node::Entity, i64, Id, id);

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

/// A group's feeds by name, for every group on the page in one query. The
/// keys are ids of groups the caller was already shown (a group and its
/// feeds always have the same owner).
pub struct GroupFeedsLoader(DatabaseConnection);

impl Loader<i64> for GroupFeedsLoader {
    type Value = Vec<feed::Model>;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Self::Value>, Self::Error> {
        let feeds = feed::Entity::find()
            .filter(feed::Column::GroupId.is_in(keys.iter().copied()))
            .order_by_asc(feed::Column::Name)
            .order_by_asc(feed::Column::Id)
            .all(&self.0)
            .await?;
        let mut by_group: HashMap<i64, Vec<feed::Model>> =
            keys.iter().map(|key| (*key, Vec::new())).collect();
        for feed in feeds {
            by_group.entry(feed.group_id).or_default().push(feed);
        }
        Ok(by_group)
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

/// Rows for keys of (id, at most how many): `sql` reads the ids where it
/// says `{}`, and the largest limit asked in the batch as `$1`, which it
/// applies per id with `ROW_NUMBER()` (so one id with many rows does not
/// bring them all); each row names its id `link`. Returns the rows of each
/// key, cut to the key's own limit.
async fn limited_per_key<T: FromQueryResult + Clone>(
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

/// Children of nodes, in id order, keyed by (parent id, at most how many):
/// one query for every node on the page.
pub struct ChildrenLoader(DatabaseConnection);

impl Loader<(i64, u64)> for ChildrenLoader {
    type Value = Vec<node::Model>;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(
        &self,
        keys: &[(i64, u64)],
    ) -> Result<HashMap<(i64, u64), Self::Value>, Self::Error> {
        limited_per_key(
            &self.0,
            "SELECT * FROM (SELECT nodes.*, parent_id AS link, ROW_NUMBER() OVER \
             (PARTITION BY parent_id ORDER BY id) AS row_in_parent FROM nodes \
             WHERE parent_id IN ({})) AS ranked WHERE row_in_parent <= $1 ORDER BY link, id",
            keys,
        )
        .await
    }
}

/// Resources mapped to nodes, oldest first, keyed by (node id, at most how
/// many): one query for every node on the page.
pub struct NodeResourcesLoader(DatabaseConnection);

impl Loader<(i64, u64)> for NodeResourcesLoader {
    type Value = Vec<resource::Model>;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(
        &self,
        keys: &[(i64, u64)],
    ) -> Result<HashMap<(i64, u64), Self::Value>, Self::Error> {
        limited_per_key(
            &self.0,
            "SELECT * FROM (SELECT r.*, rn.node_id AS link, ROW_NUMBER() OVER \
             (PARTITION BY rn.node_id ORDER BY r.created_at, r.id) AS row_in_node \
             FROM resource_nodes rn JOIN resources r ON r.id = rn.resource_id \
             WHERE rn.node_id IN ({})) AS ranked WHERE row_in_node <= $1 \
             ORDER BY link, created_at, id",
            keys,
        )
        .await
    }
}

/// The nodes each resource maps to, root first: one query for every
/// resource on the page (a resource maps to one chain of nodes).
pub struct ResourceNodesLoader(DatabaseConnection);

impl Loader<Uuid> for ResourceNodesLoader {
    type Value = Vec<node::Model>;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[Uuid]) -> Result<HashMap<Uuid, Self::Value>, Self::Error> {
        let backend = self.0.get_database_backend();
        let (named, values) = crate::db::uuid_in(backend, "rn.resource_id", 1, keys);
        let sql = format!(
            "SELECT n.*, rn.resource_id AS link FROM resource_nodes rn \
             JOIN nodes n ON n.id = rn.node_id WHERE {named} \
             ORDER BY rn.resource_id, n.depth, n.id"
        );
        let rows = self
            .0
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
        let mut by_resource: HashMap<Uuid, Vec<node::Model>> =
            keys.iter().map(|&key| (key, Vec::new())).collect();
        for row in rows {
            by_resource
                .entry(row.try_get("", "link")?)
                .or_default()
                .push(node::Model::from_query_result(&row, "")?);
        }
        Ok(by_resource)
    }
}
