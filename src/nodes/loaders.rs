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
    pub child_summaries: DataLoader<ChildSummaryLoader>,
    pub node_resources: DataLoader<NodeResourcesLoader>,
    pub resource_nodes: DataLoader<ResourceNodesLoader>,
}

impl NodeLoaders {
    pub fn new(db: &DatabaseConnection) -> Arc<Self> {
        Arc::new(NodeLoaders {
            nodes: DataLoader::new(ById::new(db), tokio::spawn),
            node_children: DataLoader::new(ChildrenLoader(db.clone()), tokio::spawn),
            child_summaries: DataLoader::new(ChildSummaryLoader(db.clone()), tokio::spawn),
            node_resources: DataLoader::new(NodeResourcesLoader(db.clone()), tokio::spawn),
            resource_nodes: DataLoader::new(ResourceNodesLoader(db.clone()), tokio::spawn),
        })
    }
}

/// Which of a node's children, in which order: `Node.children`'s
/// arguments. Every value is an integer, written into the SQL as such.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ChildView {
    /// Only children whose aggregated status is at least this.
    pub min_aggregated_status: Option<i32>,
    /// Worst first (aggregated status descending, then id); else id order.
    pub worst_first: bool,
    /// Only children after this one in the order: its (aggregated status, id).
    pub after: Option<(i32, i64)>,
}

impl ChildView {
    fn order(&self) -> &'static str {
        if self.worst_first {
            "aggregated_status DESC, id"
        } else {
            "id"
        }
    }

    fn conditions(&self) -> String {
        let mut sql = String::new();
        if let Some(min) = self.min_aggregated_status {
            sql.push_str(&format!(" AND aggregated_status >= {min}"));
        }
        match (self.after, self.worst_first) {
            (Some((status, id)), true) => sql.push_str(&format!(
                " AND (aggregated_status < {status} OR (aggregated_status = {status} AND id > {id}))"
            )),
            (Some((_, id)), false) => sql.push_str(&format!(" AND id > {id}")),
            (None, _) => {}
        }
        sql
    }
}

/// Children of nodes, keyed by (parent id, at most how many, which and in
/// what order): one query per distinct view for every node on the page.
pub struct ChildrenLoader(DatabaseConnection);

impl Loader<(i64, u64, ChildView)> for ChildrenLoader {
    type Value = Vec<node::Model>;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(
        &self,
        keys: &[(i64, u64, ChildView)],
    ) -> Result<HashMap<(i64, u64, ChildView), Self::Value>, Self::Error> {
        let mut views: HashMap<ChildView, Vec<(i64, u64)>> = HashMap::new();
        for &(parent, limit, view) in keys {
            views.entry(view).or_default().push((parent, limit));
        }
        let mut found = HashMap::new();
        for (view, parents) in views {
            let order = view.order();
            let sql = format!(
                "SELECT * FROM (SELECT nodes.*, parent_id AS link, ROW_NUMBER() OVER \
                 (PARTITION BY parent_id ORDER BY {order}) AS row_in_parent FROM nodes \
                 WHERE parent_id IN ({{}}){conditions}) AS ranked WHERE row_in_parent <= $1 \
                 ORDER BY link, {order}",
                conditions = view.conditions(),
            );
            for ((parent, limit), rows) in limited_per_key(&self.0, &sql, &parents).await? {
                found.insert((parent, limit, view), rows);
            }
        }
        Ok(found)
    }
}

/// How many children a node has, and the worst of their aggregated
/// statuses: what a collapsed row shows before it is expanded.
#[derive(Debug, Clone, Copy, Default)]
pub struct ChildSummary {
    pub count: i64,
    pub worst: Option<i32>,
}

/// Child summaries of nodes: one grouped query for every node on the page.
pub struct ChildSummaryLoader(DatabaseConnection);

impl Loader<i64> for ChildSummaryLoader {
    type Value = ChildSummary;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Self::Value>, Self::Error> {
        let backend = self.0.get_database_backend();
        let sql = format!(
            "SELECT parent_id, COUNT(*) AS children, MAX(aggregated_status) AS worst \
             FROM nodes WHERE parent_id IN ({}) GROUP BY parent_id",
            crate::db::placeholders(1, keys.len())
        );
        let values: Vec<sea_orm::Value> = keys.iter().map(|&id| id.into()).collect();
        let rows = self
            .0
            .query_all_raw(Statement::from_sql_and_values(backend, sql, values))
            .await?;
        let mut found: HashMap<i64, ChildSummary> = keys
            .iter()
            .map(|&key| (key, ChildSummary::default()))
            .collect();
        for row in rows {
            let parent: i64 = row.try_get("", "parent_id")?;
            let worst: Option<i32> = row.try_get("", "worst")?;
            found.insert(
                parent,
                ChildSummary {
                    count: row.try_get("", "children")?,
                    worst,
                },
            );
        }
        Ok(found)
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
