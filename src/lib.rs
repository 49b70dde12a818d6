//! Trellis: one self-hosted server for feeds, resource reconciliation, a
//! docs mirror and a reading-progress gateway, behind one GraphQL schema.
//!
//! Start at `docs/architecture.md`. Shared infrastructure lives in
//! [`config`], [`db`], [`http`], [`httpc`], [`graphql`], [`jobs`], [`auth`]
//! and [`error`]; each domain ([`feeds`], [`nodes`]) gets a folder of its
//! own and implements [`domain::Domain`]. The roots that know every domain
//! are [`app`] (wiring), [`schema`] (the GraphQL roots) and [`cli`].

pub mod app;
pub mod auth;
pub mod cli;
pub mod config;
pub mod datadir;
pub mod db;
pub mod digest;
pub mod docs;
pub mod domain;
pub mod error;
pub mod feeds;
pub mod fulltext;
pub mod gateway;
pub mod graphql;
pub mod http;
pub mod httpc;
pub mod input;
pub mod jobs;
mod layering;
pub mod nodes;
pub mod ops;
pub mod readerapi;
pub mod schema;
pub mod telemetry;
