//! Resources & Nodes as the API sees them: submitting operations (checked,
//! then enqueued as tasks) and reading resources and the node tree.
//! Resources and nodes are instance-wide: every signed-in member reads and
//! writes them; resolvers require a viewer before calling in.

use std::{collections::BTreeSet, sync::Arc};

use entity::{node, node_tree, resource, task};
use sea_orm::{
    ColumnTrait, Condition, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter,
    QueryOrder, QuerySelect, Statement,
};
use uuid::Uuid;

use super::{
    config::NodeConfig,
    ops::{self, Operation},
    pipeline, plan, reconcile,
};
use crate::{
    auth::Viewer,
    error::{AppError, AppResult},
    jobs::{
        Jobs,
        model::NewTask,
        store::{self, Enqueued},
    },
};

/// Most nodes one `nodeTree` answer holds.
pub const MAX_TREE_NODES: u64 = 10_000;
/// Most rows a list field (`children`, `resources`…) returns.
pub const MAX_LIST: u64 = 1_000;

#[derive(Clone)]
pub struct NodesService {
    db: DatabaseConnection,
    jobs: Jobs,
    config: Arc<NodeConfig>,
}

impl NodesService {
    pub fn new(db: DatabaseConnection, jobs: Jobs, config: Arc<NodeConfig>) -> Self {
        NodesService { db, jobs, config }
    }

    pub fn config(&self) -> &NodeConfig {
        &self.config
    }

    pub fn db(&self) -> &DatabaseConnection {
        &self.db
    }

    /// Makes the tree follow the loaded configuration. When it was computed
    /// under another one (or before configurations were recorded), every
    /// resource is marked for remapping and every node for recomputation,
    /// and a `resources.reconcile` task is enqueued to do it — in one
    /// transaction, which holds the `resources` scope like a request's
    /// enqueue, so no stage runs while the marks are set. Of several
    /// processes starting with the same new configuration, one does it.
    /// Returns the task, if one was enqueued.
    pub async fn adopt_config(&self) -> AppResult<Option<task::Model>> {
        let digest = self.config.digest();
        let stored = node_tree::Entity::find_by_id(1)
            .one(&self.db)
            .await?
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("node_tree row missing")))?;
        if stored.config_digest.as_deref() == Some(digest.as_str()) {
            return Ok(None);
        }
        let backend = self.db.get_database_backend();
        let record = || {
            Statement::from_sql_and_values(
                backend,
                "UPDATE node_tree SET config_digest = $1 WHERE id = 1 \
                 AND (config_digest IS NULL OR config_digest <> $1)",
                vec![digest.clone().into()],
            )
        };
        let empty = resource::Entity::find().one(&self.db).await?.is_none()
            && node::Entity::find().one(&self.db).await?.is_none();
        if stored.config_digest.is_none() && empty {
            // Nothing was ever computed: record the configuration, nothing to redo.
            self.db.execute_raw(record()).await?;
            return Ok(None);
        }
        let txn = crate::db::begin_write(&self.db).await?;
        // The tree's lock before the scope's, in the order a stage takes
        // them, so the two never wait for each other.
        reconcile::lock_tree(&txn).await?;
        // Then the scope, held before the digest is compared.
        let task = store::insert_task(
            &txn,
            &pipeline::reconcile_task(),
            Uuid::now_v7(),
            self.jobs.settings().max_attempts,
        )
        .await?;
        if txn.execute_raw(record()).await?.rows_affected() == 0 {
            // Another process adopted it meanwhile.
            txn.rollback().await?;
            return Ok(None);
        }
        txn.execute_raw(Statement::from_string(
            backend,
            "UPDATE resources SET needs_mapping = TRUE",
        ))
        .await?;
        txn.execute_raw(Statement::from_string(
            backend,
            "INSERT INTO node_dirty (node_id, props, status) SELECT id, TRUE, TRUE FROM nodes \
             WHERE TRUE ON CONFLICT (node_id) DO UPDATE SET props = TRUE, status = TRUE",
        ))
        .await?;
        txn.commit().await?;
        tracing::info!(
            config_digest = %digest,
            task_id = %task.id,
            "the node configuration changed: the whole tree will be reconciled"
        );
        self.jobs.after_commit(Some(&task)).await;
        Ok(Some(task))
    }

    /// Checks an operation and enqueues its task. A repeat with the same
    /// idempotency key and payload returns the first task — looked up
    /// first, so a retry gets its task even once its target is gone (a
    /// delete that succeeded); the same key with another payload is
    /// `IDEMPOTENCY_KEY_REUSED`.
    pub async fn submit(
        &self,
        viewer: &Viewer,
        operation: Operation,
        idempotency_key: String,
    ) -> AppResult<Enqueued> {
        let operation = operation.canonical()?;
        let payload = serde_json::to_value(&operation).map_err(AppError::internal)?;
        let mut new = NewTask::new(operation.kind(), operation.queue(), payload);
        new.owner_id = Some(viewer.user_id);
        new.idempotency_key = Some(idempotency_key);
        new.scope = Some(ops::SCOPE.to_owned());
        if let Some(earlier) = self.jobs.replay(&new).await? {
            return Ok(earlier);
        }
        operation.validate(&self.config)?;
        self.check_targets(&operation.targets()).await?;
        self.jobs.enqueue(new).await
    }

    /// Every target exists and is not being deleted, or is the resource of
    /// a create that is still on its way.
    async fn check_targets(&self, targets: &[Uuid]) -> AppResult<()> {
        if targets.is_empty() {
            return Ok(());
        }
        // A create not applied yet (its generation is past the applied
        // one) is on its way; an applied one whose row is missing was
        // deleted. Read before the rows: a create applied in between is
        // then found among them.
        let applied: i64 = node_tree::Entity::find_by_id(1)
            .one(&self.db)
            .await?
            .map_or(0, |tree| tree.applied_generation);
        let existing: BTreeSet<Uuid> = resource::Entity::find()
            .select_only()
            .column(resource::Column::Id)
            .filter(resource::Column::Id.is_in(targets.iter().copied()))
            .filter(resource::Column::Deleting.eq(false))
            .into_tuple::<Uuid>()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        let missing: Vec<Uuid> = targets
            .iter()
            .copied()
            .filter(|id| !existing.contains(id))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let on_its_way: BTreeSet<Uuid> = task::Entity::find()
            .select_only()
            .column(task::Column::Id)
            .filter(task::Column::Id.is_in(missing.iter().copied()))
            .filter(task::Column::Kind.eq(ops::CREATE_KIND))
            .filter(task::Column::Generation.gt(applied))
            .filter(task::Column::Status.is_not_in([task::Status::Failed, task::Status::Cancelled]))
            .into_tuple::<Uuid>()
            .all(&self.db)
            .await?
            .into_iter()
            .collect();
        if missing.iter().all(|id| on_its_way.contains(id)) {
            Ok(())
        } else {
            Err(AppError::NotFound("resource"))
        }
    }

    pub async fn resource(&self, id: Uuid) -> AppResult<Option<resource::Model>> {
        Ok(resource::Entity::find_by_id(id).one(&self.db).await?)
    }

    pub fn resources_select(&self) -> sea_orm::Select<resource::Entity> {
        resource::Entity::find()
    }

    pub async fn node(&self, id: i64) -> AppResult<Option<node::Model>> {
        Ok(node::Entity::find_by_id(id).one(&self.db).await?)
    }

    /// The subtree under `root` (or every root's), down to `depth` levels
    /// below it, in path order; parents come before their children.
    pub async fn tree(
        &self,
        root: Option<i64>,
        depth: u32,
        limit: u64,
    ) -> AppResult<Vec<node::Model>> {
        let mut select = node::Entity::find();
        match root {
            Some(id) => {
                let root = self.node(id).await?.ok_or(AppError::NotFound("node"))?;
                let (lower, upper) = plan::subtree_range(&root.path);
                select = select
                    .filter(node::Column::Path.gte(lower))
                    .filter(node::Column::Path.lt(upper))
                    .filter(node::Column::Depth.lte(root.depth + depth as i32));
            }
            None => {
                select = select.filter(node::Column::Depth.lte(depth as i32));
            }
        }
        Ok(select
            .order_by_asc(node::Column::Path)
            .limit(limit.min(MAX_TREE_NODES))
            .all(&self.db)
            .await?)
    }

    /// Filtered nodes for `nodes(filter, …)`.
    pub fn nodes_select(
        &self,
        class: Option<String>,
        min_aggregated_status: Option<i32>,
    ) -> sea_orm::Select<node::Entity> {
        let mut condition = Condition::all();
        if let Some(class) = class {
            condition = condition.add(node::Column::Class.eq(class));
        }
        if let Some(min) = min_aggregated_status {
            condition = condition.add(node::Column::AggregatedStatus.gte(min));
        }
        node::Entity::find().filter(condition)
    }
}
