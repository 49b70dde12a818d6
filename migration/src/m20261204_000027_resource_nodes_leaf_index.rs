//! Why: a leaf change recomputes the attribute statistics of every node on
//! its chain, and a chain node's own statistics come from the resources
//! mapped to it as their leaf (`rn.leaf AND rn.node_id IN (…)`,
//! `nodes::reconcile::properties`). With an index on `node_id` alone,
//! both databases walked every mapping row of each chain node to find the
//! few leaf ones: a region of 49,000 resources meant 49,000 row reads for
//! none. On the 99k-node tree that was the whole Properties phase's growth
//! (4.3 ms on 6k nodes, 20.1 ms on 99k; `docs/benchmarks.md`). Indexed on
//! `(node_id, leaf)` the lookup reads only the leaf rows (19.2 ms →
//! 0.01 ms for a chain of six in a synthetic SQLite copy of that tree).
//! The old index is a prefix of the new one, so it goes.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const NEW: &str = "idx_resource_nodes_node_leaf";
const OLD: &str = "idx_resource_nodes_node";

#[derive(DeriveIden)]
enum ResourceNodes {
    Table,
    NodeId,
    Leaf,
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .if_not_exists()
                    .name(NEW)
                    .table(ResourceNodes::Table)
                    .col(ResourceNodes::NodeId)
                    .col(ResourceNodes::Leaf)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .if_exists()
                    .name(OLD)
                    .table(ResourceNodes::Table)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .if_not_exists()
                    .name(OLD)
                    .table(ResourceNodes::Table)
                    .col(ResourceNodes::NodeId)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .if_exists()
                    .name(NEW)
                    .table(ResourceNodes::Table)
                    .to_owned(),
            )
            .await
    }
}
