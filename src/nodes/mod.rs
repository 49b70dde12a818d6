//! Resources & Nodes (SPEC §5, seed 001): clients write resources; the
//! server derives a tree of nodes with live aggregated status.
//!
//! - [`config`]: the node configuration (classes, position templates,
//!   rules), validated at start-up; [`rules`] its rule language.
//! - [`engine`]: the Engine trait (the oracle for properties and status
//!   patches) and the built-in [`engine::RuleEngine`].
//! - [`ops`]: the operations, their queues and their validation.
//! - [`plan`]: the reconciliation's decisions as pure functions.
//! - [`reconcile`]: the seed's phases against the database, one function
//!   each; [`pipeline`]: the seven-stage task that runs them.
//! - [`service`]: submit and read; [`graphql`] and [`http`] are thin APIs
//!   over it.
//! - Wiring: [`settings`] (`TRELLIS_NODE_CONFIG`), [`domain`] (what the app
//!   builds and starts), [`loaders`] (its DataLoaders).

pub mod config;
pub mod domain;
pub mod engine;
pub mod graphql;
pub mod http;
pub mod loaders;
pub mod ops;
pub mod pipeline;
pub mod plan;
pub mod reconcile;
pub mod rules;
pub mod service;
pub mod settings;

pub use domain::setup;
pub use settings::Settings;

/// Event: a node's aggregated status changed (`nodeStatusChanged`).
pub const NODE_STATUS_CHANGED: &str = "node.status_changed";
