//! Why: the tree is computed under one node configuration. When the server
//! starts with another (a new rule, template or class), the stored
//! properties, statuses and even the mapping are stale, and nothing would
//! recompute them until each resource changed. `node_tree.config_digest`
//! records the configuration the tree follows; a server that loads a
//! different one marks everything for a full reconciliation
//! (`NodesService::adopt_config`). `NULL` (trees built before this column)
//! counts as different.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(NodeTree::Table)
                    .add_column(string_len_null(NodeTree::ConfigDigest, 64))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(NodeTree::Table)
                    .drop_column(NodeTree::ConfigDigest)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum NodeTree {
    Table,
    ConfigDigest,
}
