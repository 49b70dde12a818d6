//! Schema migrations for Trellis.
//!
//! Migrations are numbered by date and applied in order at start-up (and by
//! `trellis migrate`), so an empty SQLite file or PostgreSQL database
//! bootstraps itself. Every migration opens with a comment saying why it
//! exists; the code says what it does. They must run on SQLite and on
//! PostgreSQL alike: use the schema builder, and branch on the backend only
//! where a backend-specific feature (FTS5, `tsvector`) is the point.

pub use sea_orm_migration::prelude::*;

mod m20261130_000001_users_and_sessions;
mod m20261130_000002_jobs;
mod m20261130_000003_feeds;
mod m20261130_000004_reader_credentials;
mod m20261130_000005_nodes;
mod m20261130_000006_node_config_digest;
mod m20261201_000007_partial_task_indexes;
mod m20261201_000008_outbox_position;
mod m20261201_000009_lean_task_indexes;
mod m20261201_000010_task_event_snapshots;
mod m20261202_000011_item_arrival;
mod m20261202_000012_item_undated;
mod m20261202_000013_reconciled_generation;
mod m20261202_000014_item_search_text;
mod m20261203_000015_default_group_with_user;
mod m20261203_000016_sanitized_content;
mod m20261203_000017_drop_orphans_checked;
mod m20261203_000018_item_authors_enclosures;
mod m20261203_000019_feed_icons;
mod m20261203_000020_docs_mirror;
mod m20261203_000021_docs_search;
mod m20261203_000022_gateway;
mod m20261204_000023_gateway_events;
mod m20261204_000024_oidc;
mod m20261204_000025_bookmark_authors_enclosures;
mod m20261204_000026_item_rank_index;
mod m20261204_000027_resource_nodes_leaf_index;

pub struct Migrator;

#[async_trait::async_trait]
impl MigratorTrait for Migrator {
    fn migrations() -> Vec<Box<dyn MigrationTrait>> {
        vec![
            Box::new(m20261130_000001_users_and_sessions::Migration),
            Box::new(m20261130_000002_jobs::Migration),
            Box::new(m20261130_000003_feeds::Migration),
            Box::new(m20261130_000004_reader_credentials::Migration),
            Box::new(m20261130_000005_nodes::Migration),
            Box::new(m20261130_000006_node_config_digest::Migration),
            Box::new(m20261201_000007_partial_task_indexes::Migration),
            Box::new(m20261201_000008_outbox_position::Migration),
            Box::new(m20261201_000009_lean_task_indexes::Migration),
            Box::new(m20261201_000010_task_event_snapshots::Migration),
            Box::new(m20261202_000011_item_arrival::Migration),
            Box::new(m20261202_000012_item_undated::Migration),
            Box::new(m20261202_000013_reconciled_generation::Migration),
            Box::new(m20261202_000014_item_search_text::Migration),
            Box::new(m20261203_000015_default_group_with_user::Migration),
            Box::new(m20261203_000016_sanitized_content::Migration),
            Box::new(m20261203_000017_drop_orphans_checked::Migration),
            Box::new(m20261203_000018_item_authors_enclosures::Migration),
            Box::new(m20261203_000019_feed_icons::Migration),
            Box::new(m20261203_000020_docs_mirror::Migration),
            Box::new(m20261203_000021_docs_search::Migration),
            Box::new(m20261203_000022_gateway::Migration),
            Box::new(m20261204_000023_gateway_events::Migration),
            Box::new(m20261204_000024_oidc::Migration),
            Box::new(m20261204_000025_bookmark_authors_enclosures::Migration),
            Box::new(m20261204_000026_item_rank_index::Migration),
            Box::new(m20261204_000027_resource_nodes_leaf_index::Migration),
        ]
    }
}
