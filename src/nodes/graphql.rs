//! GraphQL surface of Resources & Nodes: the five operations (each returns
//! its task at once), reads of resources and the node tree, the loaded
//! `nodeConfig`, and the `nodeStatusChanged` subscription. Members only.

use std::sync::Arc;

use async_graphql::{
    ComplexObject, Context, Enum, ID, InputObject, Object, SimpleObject, Subscription,
};
use chrono::{DateTime, Utc};
use entity::{node, resource};
use futures_util::Stream;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{
    NODE_STATUS_CHANGED,
    config::{NodeConfig, StatusLevel},
    loaders::{ChildView, NodeLoaders},
    ops::{Operation, Replacement},
    plan,
    service::{MAX_LIST, MAX_TREE_NODES, NodesService},
};
use crate::{
    error::{AppError, AppResult},
    graphql::{
        context::ContextExt,
        json::Json,
        pagination::{KeyValue, Keyset, KeysetConnection, PageRequest, paginate},
    },
    jobs::graphql::{Task, parse_id},
};

fn nodes<'a>(ctx: &'a Context<'_>) -> AppResult<&'a NodesService> {
    ctx.service::<NodesService>()
}

fn loaders<'a>(ctx: &'a Context<'_>) -> AppResult<&'a NodeLoaders> {
    Ok(ctx.service::<Arc<NodeLoaders>>()?)
}

fn node_id(field: &'static str, id: &ID) -> AppResult<i64> {
    id.parse::<i64>()
        .map_err(|_| AppError::bad_input(field, "not a valid node id"))
}

fn object(field: &'static str, value: Value) -> AppResult<Map<String, Value>> {
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(AppError::bad_input(field, "must be a JSON object")),
    }
}

/// A client-written resource.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct Resource {
    pub id: ID,
    pub attributes: Json,
    /// Applied mutations so far.
    pub version: i64,
    /// A delete is in flight.
    pub deleting: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<resource::Model> for Resource {
    fn from(model: resource::Model) -> Self {
        Resource {
            id: ID(model.id.to_string()),
            attributes: Json(model.attributes),
            version: model.version,
            deleting: model.deleting,
            created_at: model.created_at,
            updated_at: model.updated_at,
        }
    }
}

#[ComplexObject]
impl Resource {
    /// The nodes the resource maps to, root first.
    #[graphql(complexity = "ASSUMED_RESOURCE_NODES * child_complexity")]
    async fn nodes(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Node>> {
        let id = parse_id("id", &self.id)?;
        Ok(loaders(ctx)?
            .resource_nodes
            .load_one(id)
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(Node::from)
            .collect())
    }
}

/// A node of the derived tree.
#[derive(SimpleObject)]
#[graphql(complex)]
pub struct Node {
    pub id: ID,
    pub class: String,
    /// hash(class ‖ parent's key ‖ position token): stable across rebuilds.
    pub business_key: String,
    pub position_token: String,
    pub parent_id: Option<ID>,
    /// Materialized path of ids, `/1/42/`.
    pub path: String,
    /// 0 for a root.
    pub depth: i32,
    /// Computed by the Engine from the node's resources and dependencies.
    pub properties: Json,
    /// `properties.status`.
    pub status: i32,
    /// max(status, children's aggregated statuses), unless the class patches it.
    pub aggregated_status: i32,
    pub updated_at: DateTime<Utc>,
}

impl From<node::Model> for Node {
    fn from(model: node::Model) -> Self {
        Node {
            id: ID(model.id.to_string()),
            class: model.class,
            business_key: model.business_key,
            position_token: model.position_token,
            parent_id: model.parent_id.map(|id| ID(id.to_string())),
            path: model.path,
            depth: model.depth,
            properties: Json(model.properties),
            status: model.status,
            aggregated_status: model.aggregated_status,
            updated_at: model.updated_at,
        }
    }
}

/// How many nodes a resource is assumed to map to, and a node to have as
/// ancestors, when the complexity limit prices a query (the real count is
/// not known before running it).
pub const ASSUMED_RESOURCE_NODES: usize = 10;
pub const ASSUMED_ANCESTORS: usize = 10;

fn limit(first: Option<i32>, default: u64) -> u64 {
    first.map_or(default, |n| n.max(0) as u64).min(MAX_LIST)
}

#[ComplexObject]
impl Node {
    async fn parent(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<Node>> {
        let Some(parent) = &self.parent_id else {
            return Ok(None);
        };
        Ok(loaders(ctx)?
            .nodes
            .load_one(node_id("parentId", parent)?)
            .await?
            .map(Node::from))
    }

    /// Children (at most `first`, ≤ 1000): in id order, or with
    /// `order: WORST_FIRST` by aggregated status, worst first (then id);
    /// only those at least `minAggregatedStatus` when given. Page on with
    /// `after`: the id of the last child received (`NOT_FOUND` once that
    /// child is gone from this parent).
    #[graphql(
        complexity = "crate::graphql::pagination::list_cost(MAX_LIST, first, child_complexity)"
    )]
    async fn children(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 100)] first: i32,
        min_aggregated_status: Option<i32>,
        #[graphql(default)] order: ChildOrder,
        after: Option<ID>,
    ) -> async_graphql::Result<Vec<Node>> {
        let parent = node_id("id", &self.id)?;
        let loaders = loaders(ctx)?;
        let after = match after {
            Some(after) => {
                let sibling = loaders
                    .nodes
                    .load_one(node_id("after", &after)?)
                    .await?
                    .filter(|sibling| sibling.parent_id == Some(parent))
                    .ok_or(AppError::NotFound("child node `after`"))?;
                Some((sibling.aggregated_status, sibling.id))
            }
            None => None,
        };
        let view = ChildView {
            min_aggregated_status,
            worst_first: order == ChildOrder::WorstFirst,
            after,
        };
        Ok(loaders
            .node_children
            .load_one((parent, limit(Some(first), 100), view))
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(Node::from)
            .collect())
    }

    /// How many children the node has (all of them, whatever a filter).
    async fn child_count(&self, ctx: &Context<'_>) -> async_graphql::Result<i64> {
        Ok(loaders(ctx)?
            .child_summaries
            .load_one(node_id("id", &self.id)?)
            .await?
            .unwrap_or_default()
            .count)
    }

    /// The worst aggregated status among the children (null without
    /// children): what a collapsed branch hides.
    async fn worst_child_status(&self, ctx: &Context<'_>) -> async_graphql::Result<Option<i32>> {
        Ok(loaders(ctx)?
            .child_summaries
            .load_one(node_id("id", &self.id)?)
            .await?
            .unwrap_or_default()
            .worst)
    }

    /// Ancestors, root first (read from the node's path).
    #[graphql(complexity = "ASSUMED_ANCESTORS * child_complexity")]
    async fn ancestors(&self, ctx: &Context<'_>) -> async_graphql::Result<Vec<Node>> {
        let ids = plan::ancestors(&self.path);
        let mut found = loaders(ctx)?.nodes.load_many(ids.iter().copied()).await?;
        Ok(ids
            .iter()
            .filter_map(|id| found.remove(id))
            .map(Node::from)
            .collect())
    }

    /// Resources mapped to the node, oldest first (at most `first`, ≤ 1000).
    #[graphql(
        complexity = "crate::graphql::pagination::list_cost(MAX_LIST, first, child_complexity)"
    )]
    async fn resources(
        &self,
        ctx: &Context<'_>,
        #[graphql(default = 100)] first: i32,
    ) -> async_graphql::Result<Vec<Resource>> {
        let key = (node_id("id", &self.id)?, limit(Some(first), 100));
        Ok(loaders(ctx)?
            .node_resources
            .load_one(key)
            .await?
            .unwrap_or_default()
            .into_iter()
            .map(Resource::from)
            .collect())
    }
}

/// The order of `Node.children`.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Default)]
pub enum ChildOrder {
    /// By id: creation order (the default).
    #[default]
    Id,
    /// Worst aggregated status first, then by id.
    WorstFirst,
}

/// One value of the status scale (`nodeConfig.statusScale`).
#[derive(SimpleObject)]
#[graphql(name = "StatusLevel")]
pub struct StatusLevelView {
    pub value: i32,
    /// What the value means, e.g. `failing`.
    pub label: String,
}

impl From<&StatusLevel> for StatusLevelView {
    fn from(level: &StatusLevel) -> Self {
        StatusLevelView {
            value: level.value,
            label: level.label.clone(),
        }
    }
}

/// Narrows `nodes`.
#[derive(InputObject, Default)]
pub struct NodeFilter {
    pub class: Option<String>,
    pub min_aggregated_status: Option<i32>,
}

/// One resource's new attributes in `updateResourceC`.
#[derive(InputObject)]
pub struct ResourceReplacementInput {
    pub id: ID,
    pub attributes: Json,
}

/// A node class as configured.
#[derive(SimpleObject)]
pub struct NodeClass {
    pub name: String,
    pub parent: Option<String>,
    pub depth: i32,
    /// The position token template, e.g. `{region}`.
    pub position: String,
    pub properties: Vec<PropertyRuleView>,
    pub depends_on: Vec<String>,
    pub patch_aggregated_status: Option<String>,
    /// Part of a dependency cycle (computed to a bounded fixpoint).
    pub cyclic: bool,
}

/// One configured property and its rule.
#[derive(SimpleObject)]
pub struct PropertyRuleView {
    pub name: String,
    pub rule: String,
}

/// The loaded node configuration.
#[derive(SimpleObject)]
pub struct NodeConfigView {
    /// Parents before children.
    pub classes: Vec<NodeClass>,
    pub max_fixpoint_iterations: i32,
    /// Attributes position templates read (changing one needs Update B).
    pub position_attributes: Vec<String>,
    /// What each status value means, least severe first (the
    /// configuration's `statusScale`).
    pub status_scale: Vec<StatusLevelView>,
}

impl From<&NodeConfig> for NodeConfigView {
    fn from(config: &NodeConfig) -> Self {
        NodeConfigView {
            classes: config
                .classes
                .iter()
                .map(|class| NodeClass {
                    name: class.name.clone(),
                    parent: class.parent.clone(),
                    depth: class.depth as i32,
                    position: class.position.to_string(),
                    properties: class
                        .properties
                        .iter()
                        .map(|(name, rule)| PropertyRuleView {
                            name: name.clone(),
                            rule: rule.to_string(),
                        })
                        .collect(),
                    depends_on: class.depends_on.clone(),
                    patch_aggregated_status: class.patch_text.clone(),
                    cyclic: config.units[class.unit].cyclic,
                })
                .collect(),
            max_fixpoint_iterations: config.max_fixpoint_iterations as i32,
            position_attributes: config.token_attributes.iter().cloned().collect(),
            status_scale: config
                .status_scale
                .iter()
                .map(StatusLevelView::from)
                .collect(),
        }
    }
}

#[derive(Default)]
pub struct NodesQuery;

#[Object]
impl NodesQuery {
    /// Resources, oldest first.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn resources(
        &self,
        ctx: &Context<'_>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<Resource>> {
        ctx.viewer()?;
        let service = nodes(ctx)?;
        Ok(paginate(
            service.db(),
            service.resources_select(),
            Keyset::ascending(vec![resource::Column::CreatedAt, resource::Column::Id]),
            PageRequest::new(first, after)?,
            |r| vec![KeyValue::Time(r.created_at), KeyValue::Uuid(r.id)],
            Resource::from,
        )
        .await?)
    }

    async fn resource(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Resource>> {
        ctx.viewer()?;
        let Ok(id) = parse_id("id", &id) else {
            return Ok(None);
        };
        Ok(nodes(ctx)?.resource(id).await?.map(Resource::from))
    }

    async fn node(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Option<Node>> {
        ctx.viewer()?;
        let Ok(id) = node_id("id", &id) else {
            return Ok(None);
        };
        Ok(nodes(ctx)?.node(id).await?.map(Node::from))
    }

    /// The subtree under `rootId` (every root when null), `depth` levels
    /// below it, in path order (parents first; build the tree from
    /// `parentId`). At most `first` nodes (≤ 10000).
    #[graphql(
        complexity = "crate::graphql::pagination::list_cost(MAX_TREE_NODES, first, child_complexity)"
    )]
    async fn node_tree(
        &self,
        ctx: &Context<'_>,
        root_id: Option<ID>,
        #[graphql(default = 2)] depth: i32,
        #[graphql(default = 1000)] first: i32,
    ) -> async_graphql::Result<Vec<Node>> {
        ctx.viewer()?;
        if !(0..=64).contains(&depth) {
            return Err(AppError::bad_input("depth", "depth must be 0–64").into());
        }
        let root = root_id
            .as_ref()
            .map(|id| node_id("rootId", id))
            .transpose()?;
        let limit = (first.max(0) as u64).min(MAX_TREE_NODES);
        Ok(nodes(ctx)?
            .tree(root, depth as u32, limit)
            .await?
            .into_iter()
            .map(Node::from)
            .collect())
    }

    /// Nodes in id order, optionally of one class and at least a status.
    #[graphql(complexity = "crate::graphql::pagination::page_cost(first, child_complexity)")]
    async fn nodes(
        &self,
        ctx: &Context<'_>,
        filter: Option<NodeFilter>,
        first: Option<i32>,
        after: Option<String>,
    ) -> async_graphql::Result<KeysetConnection<Node>> {
        ctx.viewer()?;
        let service = nodes(ctx)?;
        let filter = filter.unwrap_or_default();
        Ok(paginate(
            service.db(),
            service.nodes_select(filter.class, filter.min_aggregated_status),
            Keyset::ascending(vec![node::Column::Id]),
            PageRequest::new(first, after)?,
            |n| vec![KeyValue::Int(n.id)],
            Node::from,
        )
        .await?)
    }

    /// The node configuration the server loaded.
    async fn node_config(&self, ctx: &Context<'_>) -> async_graphql::Result<NodeConfigView> {
        ctx.viewer()?;
        Ok(NodeConfigView::from(nodes(ctx)?.config()))
    }
}

#[derive(Default)]
pub struct NodesMutation;

async fn submit(
    ctx: &Context<'_>,
    operation: Operation,
    idempotency_key: String,
) -> async_graphql::Result<Task> {
    let viewer = ctx.viewer()?;
    let enqueued = nodes(ctx)?
        .submit(viewer, operation, idempotency_key)
        .await?;
    Ok(Task::from(&enqueued.task))
}

fn patch_arguments(id: &ID, patch: Json) -> AppResult<(uuid::Uuid, Map<String, Value>)> {
    Ok((parse_id("id", id)?, object("patch", patch.0)?))
}

#[Object]
impl NodesMutation {
    /// Creates a resource; its id is the returned task's id. Queue `q:short`.
    async fn create_resource(
        &self,
        ctx: &Context<'_>,
        attributes: Json,
        idempotency_key: String,
    ) -> async_graphql::Result<Task> {
        let attributes = object("attributes", attributes.0)?;
        submit(ctx, Operation::Create { attributes }, idempotency_key).await
    }

    /// Merges `patch` (JSON merge patch) into attributes no position
    /// template reads; the resource cannot move. Queue `q:short`.
    async fn update_resource_a(
        &self,
        ctx: &Context<'_>,
        id: ID,
        patch: Json,
        idempotency_key: String,
    ) -> async_graphql::Result<Task> {
        let (resource_id, patch) = patch_arguments(&id, patch)?;
        submit(
            ctx,
            Operation::UpdateA { resource_id, patch },
            idempotency_key,
        )
        .await
    }

    /// Merges `patch` into any attributes; the resource may move in the
    /// tree. Queue `q:medium`.
    async fn update_resource_b(
        &self,
        ctx: &Context<'_>,
        id: ID,
        patch: Json,
        idempotency_key: String,
    ) -> async_graphql::Result<Task> {
        let (resource_id, patch) = patch_arguments(&id, patch)?;
        submit(
            ctx,
            Operation::UpdateB { resource_id, patch },
            idempotency_key,
        )
        .await
    }

    /// Replaces the attributes of resource `id` and of each of `others`
    /// wholesale, in one request (up to 1000 resources). Queue `q:long`.
    async fn update_resource_c(
        &self,
        ctx: &Context<'_>,
        id: ID,
        attributes: Json,
        others: Option<Vec<ResourceReplacementInput>>,
        idempotency_key: String,
    ) -> async_graphql::Result<Task> {
        let mut resources = vec![Replacement {
            id: parse_id("id", &id)?,
            attributes: object("attributes", attributes.0)?,
        }];
        for other in others.unwrap_or_default() {
            resources.push(Replacement {
                id: parse_id("others.id", &other.id)?,
                attributes: object("others.attributes", other.attributes.0)?,
            });
        }
        submit(ctx, Operation::UpdateC { resources }, idempotency_key).await
    }

    /// Deletes a resource; nodes left without resources go with their
    /// subtrees. Queue `q:medium`.
    async fn delete_resource(
        &self,
        ctx: &Context<'_>,
        id: ID,
        idempotency_key: String,
    ) -> async_graphql::Result<Task> {
        let operation = Operation::Delete {
            resource_id: parse_id("id", &id)?,
        };
        submit(ctx, operation, idempotency_key).await
    }
}

/// A node's aggregated status changed.
#[derive(SimpleObject, Deserialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct NodeStatusChange {
    pub id: ID,
    pub class: String,
    pub path: String,
    pub status: i32,
    pub aggregated_status: i32,
    pub previous_aggregated_status: i32,
}

#[derive(Default)]
pub struct NodesSubscription;

#[Subscription]
impl NodesSubscription {
    /// Every node whose aggregated status changes (in the subtree of
    /// `subtreeOf`, itself included, when given), as committed. A
    /// subscriber that fell behind gets an `EVENTS_LAGGED` error (with
    /// `missed`) and should re-read the tree.
    async fn node_status_changed(
        &self,
        ctx: &Context<'_>,
        subtree_of: Option<ID>,
    ) -> async_graphql::Result<impl Stream<Item = async_graphql::Result<NodeStatusChange>> + use<>>
    {
        ctx.viewer()?;
        let service = nodes(ctx)?.clone();
        let root_path = match subtree_of {
            None => None,
            Some(id) => Some(
                service
                    .node(node_id("subtreeOf", &id)?)
                    .await?
                    .ok_or(AppError::NotFound("node"))?
                    .path,
            ),
        };
        let bus = ctx.service::<crate::jobs::Jobs>()?.bus();
        Ok(crate::graphql::subscription::follow(bus, move |event| {
            let change = (event.topic == NODE_STATUS_CHANGED)
                .then(|| event.payload::<NodeStatusChange>())
                .flatten()
                .filter(|change| {
                    root_path
                        .as_deref()
                        .is_none_or(|root| plan::in_subtree(&change.path, root))
                });
            async move { change }
        }))
    }
}
