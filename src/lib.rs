//! Trellis: one self-hosted server for feeds, resource reconciliation, a
//! docs mirror and a reading-progress gateway, behind one GraphQL schema.
//!
//! Start at `docs/architecture.md`. Shared infrastructure lives in
//! [`config`], [`db`], [`app`], [`http`], [`graphql`], [`auth`] and
//! [`error`]; each domain gets a folder of its own.

pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod datadir;
pub mod db;
pub mod digest;
pub mod error;
pub mod feeds;
pub mod graphql;
pub mod http;
pub mod httpc;
pub mod input;
pub mod jobs;
pub mod nodes;
pub mod telemetry;
