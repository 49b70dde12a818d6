//! The nodes' DataLoaders: one fresh set per request (`graphql::loaders`
//! says why and how).

use std::{collections::HashMap, sync::Arc};

use async_graphql::dataloader::{DataLoader, Loader};
use entity::{node, resource};
use sea_orm::{ConnectionTrait, DatabaseConnection, FromQueryResult, Statement};
use uuid::Uuid;

use crate::{
    graphql::loaders::{ById, limited_per_key},
    keyed,
};

keyed!(node::Entity, i64, Id, id);

/// The loaders of one request.
pub struct NodeLoaders {
    pub nodes: DataLoader<ById<node::Entity>>,
    pub node_children: DataLoader<ChildrenLoader>,
    pub node_resources: DataLoader<NodeResourcesLoader>,
    pub resource_nodes: DataLoader<ResourceNodesLoader>,
}

impl NodeLoaders {
    pub fn new(db: &DatabaseConnection) -> Arc<Self> {
        Arc::new(NodeLoaders {
            nodes: DataLoader::new(ById::new(db), tokio::spawn),
            node_children: DataLoader::new(ChildrenLoader(db.clone()), tokio::spawn),
            node_resources: DataLoader::new(NodeResourcesLoader(db.clone()), tokio::spawn),
            resource_nodes: DataLoader::new(ResourceNodesLoader(db.clone()), tokio::spawn),
        })
    }
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
