//! SeaORM entities, one file per table. The migrations in `migration/` are
//! the source of truth for the schema; these mirror them for typed queries.

pub mod bookmark;
pub mod cooldown;
pub mod docs_alias;
pub mod docs_asset;
pub mod docs_document;
pub mod docs_link;
pub mod docs_setting;
pub mod docs_sync_run;
pub mod feed;
pub mod feed_fetch_state;
pub mod feed_group;
pub mod feed_icon;
pub mod feed_settings;
pub mod gateway_link;
pub mod gateway_oauth_state;
pub mod idempotency_key;
pub mod instance_secret;
pub mod item;
pub mod node;
pub mod node_dirty;
pub mod node_tree;
pub mod outbox_event;
pub mod periodic_run;
pub mod probe_effect;
pub mod reader_credential;
pub mod refresh_token;
pub mod resource;
pub mod resource_node;
pub mod session;
pub mod task;
pub mod task_scope;
pub mod user;
