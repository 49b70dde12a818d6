//! Integration tests: the real server, real SQLite and PostgreSQL (and Redis
//! where a feature needs it), driven over HTTP and WebSocket.

mod helpers;

mod auth;
mod cli;
mod corpus;
mod crash;
mod dashboard;
mod docs_engine;
mod docs_fakes;
mod docs_feishu;
mod docs_notion;
mod docs_settings;
mod docs_sync;
mod feed_icons;
mod feeds;
mod feedserver;
mod fuzz;
mod gateway;
mod gateway_events;
mod gateway_fakes;
mod graphql_http;
mod ingest;
mod input;
mod jobs;
mod limits;
mod nodes;
mod oidc;
mod oidc_fakes;
mod operations;
mod ops;
mod reader_apps;
mod reader_items;
mod reader_sync;
mod reconcile;
mod slowclient;
mod task_contract;
mod web;
mod websocket;
