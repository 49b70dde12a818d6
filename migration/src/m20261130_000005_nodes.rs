//! Why: Resources & Nodes (SPEC §5, seed 001). Clients write resources; the
//! server derives a tree of nodes from them, reconciled by a staged task on
//! the job runner.
//!
//! - `resources`: the client's JSON attributes. `version` counts applied
//!   mutations; `deleting` marks a resource whose delete is in flight;
//!   `needs_mapping` marks one whose nodes the next reconciliation must
//!   recompute.
//! - `nodes`: `business_key` = hash(class ‖ parent key ‖ position token) is
//!   unique, so inserts are idempotent upserts. `path` is the materialized
//!   path of ids (`/1/42/`); a subtree is the byte range `[path, stem‖'0')`,
//!   so deleting one is one statement on the path index. On PostgreSQL the
//!   column uses the "C" collation so that the range is byte-wise (a
//!   linguistic collation would ignore the `/`). `parent_id` cascades as a
//!   safety net; the path range already covers the subtree.
//! - `resource_nodes`: the mapping, kept by delta (never rebuilt). `leaf`
//!   marks the last node of the resource's chain.
//! - `nodes.partials`: statistics (count, sum, min, max) of the attributes
//!   the rules read, over the node's resources. They combine, so a node's
//!   are its children's plus its leaf resources': an update reads a
//!   node's children, never every resource below it.
//! - `node_dirty`: work the pipeline owes: nodes whose properties
//!   (`props`) or aggregated status (`status`) must be recomputed. Kept in
//!   the database, not in a task, so that work a superseded task leaves
//!   behind is done by the newer one.
//! - `node_dirty_classes`: classes that lost nodes to a subtree delete;
//!   the classes depending on them must be recomputed.
//! - `node_tree`: one row; the generation of the last request whose
//!   mutation was applied.
//! - `tasks(scope, generation)`: the mutation stage reads the requests
//!   between the last applied generation and its own.

use sea_orm_migration::{prelude::*, schema::*, sea_orm::DatabaseBackend};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Resources::Table)
                    .col(pk_uuid(Resources::Id))
                    .col(json(Resources::Attributes))
                    .col(big_integer(Resources::Version).default(0))
                    .col(boolean(Resources::Deleting).default(false))
                    .col(boolean(Resources::NeedsMapping).default(false))
                    .col(timestamp_with_time_zone(Resources::CreatedAt))
                    .col(timestamp_with_time_zone(Resources::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        // Partial: only marked resources are in it, so finding them does not
        // depend on the table's size (queries say `WHERE needs_mapping`).
        manager
            .get_connection()
            .execute_unprepared(
                "CREATE INDEX idx_resources_needs_mapping ON resources (id) WHERE needs_mapping",
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_resources_created")
                    .table(Resources::Table)
                    .col(Resources::CreatedAt)
                    .col(Resources::Id)
                    .to_owned(),
            )
            .await?;

        let mut path = text(Nodes::Path);
        if manager.get_database_backend() == DatabaseBackend::Postgres {
            path.extra("COLLATE \"C\"");
        }
        manager
            .create_table(
                Table::create()
                    .table(Nodes::Table)
                    .col(big_integer(Nodes::Id).auto_increment().primary_key())
                    .col(string_len(Nodes::Class, 64))
                    .col(string_len(Nodes::BusinessKey, 64).unique_key())
                    .col(big_integer_null(Nodes::ParentId))
                    .col(path)
                    .col(integer(Nodes::Depth))
                    .col(text(Nodes::PositionToken))
                    .col(json(Nodes::Properties))
                    .col(json(Nodes::Partials))
                    .col(integer(Nodes::Status).default(0))
                    .col(integer(Nodes::AggregatedStatus).default(0))
                    .col(timestamp_with_time_zone(Nodes::CreatedAt))
                    .col(timestamp_with_time_zone(Nodes::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Nodes::Table, Nodes::ParentId)
                            .to(Nodes::Table, Nodes::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        for (name, columns) in [
            ("idx_nodes_parent", vec![Nodes::ParentId]),
            ("idx_nodes_path", vec![Nodes::Path]),
            ("idx_nodes_class", vec![Nodes::Class, Nodes::Id]),
            (
                "idx_nodes_aggregated_status",
                vec![Nodes::AggregatedStatus, Nodes::Id],
            ),
        ] {
            let mut index = Index::create();
            index.name(name).table(Nodes::Table);
            for column in columns {
                index.col(column);
            }
            manager.create_index(index.to_owned()).await?;
        }

        manager
            .create_table(
                Table::create()
                    .table(ResourceNodes::Table)
                    .col(uuid(ResourceNodes::ResourceId))
                    .col(big_integer(ResourceNodes::NodeId))
                    .col(boolean(ResourceNodes::Leaf).default(false))
                    .primary_key(
                        Index::create()
                            .col(ResourceNodes::ResourceId)
                            .col(ResourceNodes::NodeId),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(ResourceNodes::Table, ResourceNodes::ResourceId)
                            .to(Resources::Table, Resources::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(ResourceNodes::Table, ResourceNodes::NodeId)
                            .to(Nodes::Table, Nodes::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_resource_nodes_node")
                    .table(ResourceNodes::Table)
                    .col(ResourceNodes::NodeId)
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(NodeDirty::Table)
                    .col(big_integer(NodeDirty::NodeId).primary_key())
                    .col(boolean(NodeDirty::Props).default(false))
                    .col(boolean(NodeDirty::Status).default(false))
                    .foreign_key(
                        ForeignKey::create()
                            .from(NodeDirty::Table, NodeDirty::NodeId)
                            .to(Nodes::Table, Nodes::Id)
                            .on_delete(ForeignKeyAction::Cascade),
                    )
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(NodeDirtyClasses::Table)
                    .col(string_len(NodeDirtyClasses::Class, 64).primary_key())
                    .to_owned(),
            )
            .await?;

        manager
            .create_table(
                Table::create()
                    .table(NodeTree::Table)
                    .col(integer(NodeTree::Id).primary_key())
                    .col(big_integer(NodeTree::AppliedGeneration).default(0))
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(NodeTree::Table)
                    .columns([NodeTree::Id, NodeTree::AppliedGeneration])
                    .values_panic([1.into(), 0.into()])
                    .to_owned(),
            )
            .await?;

        manager
            .create_index(
                Index::create()
                    .name("idx_tasks_scope_generation")
                    .table(Tasks::Table)
                    .col(Tasks::Scope)
                    .col(Tasks::Generation)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("idx_tasks_scope_generation")
                    .table(Tasks::Table)
                    .to_owned(),
            )
            .await?;
        for table in [
            NodeTree::Table.into_iden(),
            NodeDirtyClasses::Table.into_iden(),
            NodeDirty::Table.into_iden(),
            ResourceNodes::Table.into_iden(),
            Nodes::Table.into_iden(),
            Resources::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Resources {
    Table,
    Id,
    Attributes,
    Version,
    Deleting,
    NeedsMapping,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Nodes {
    Table,
    Id,
    Class,
    BusinessKey,
    ParentId,
    Path,
    Depth,
    PositionToken,
    Properties,
    Partials,
    Status,
    AggregatedStatus,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum ResourceNodes {
    Table,
    ResourceId,
    NodeId,
    Leaf,
}

#[derive(DeriveIden)]
enum NodeDirty {
    Table,
    NodeId,
    Props,
    Status,
}

#[derive(DeriveIden)]
enum NodeDirtyClasses {
    Table,
    Class,
}

#[derive(DeriveIden)]
enum NodeTree {
    Table,
    Id,
    AppliedGeneration,
}

#[derive(DeriveIden)]
enum Tasks {
    Table,
    Scope,
    Generation,
}
