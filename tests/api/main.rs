//! Integration tests: the real server, real SQLite and PostgreSQL (and Redis
//! where a feature needs it), driven over HTTP and WebSocket.

mod helpers;

mod auth;
mod cli;
mod crash;
mod feeds;
mod feedserver;
mod graphql_http;
mod jobs;
mod nodes;
mod ops;
mod reconcile;
mod websocket;
