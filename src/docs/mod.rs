//! The docs mirror (SPEC §6, seed 002, issue 20): Notion and Feishu
//! workspaces mirrored to a local Markdown tree under the data dir, one
//! file per document, with a manifest in the main database.
//!
//! Built so far, each part with its tests:
//!
//! - [`naming`]: how a title becomes a path component (the seed's rule
//!   chain: slug, `untitled-<id8>`, reserved names, 200-byte cap, sibling
//!   collisions, numeric fallback), stable across runs.
//! - [`mode`]: whether a platform's run is full or incremental, and why.
//! - [`adapter`]: the contract between the engine and a platform; its
//!   comments are the spec.
//! - [`markers`]: the degradation markers written into bodies, and their
//!   count by kind for a run's stats.
//! - [`frontmatter`]: the hand-rendered, byte-stable YAML frontmatter, and
//!   the parser that reads back what it writes.
//! - [`assets`]: content-addressed asset paths, the extension sniffed from
//!   the bytes, and the in-body URL replacement and pending marker.
//! - [`engine`]: one platform's sync run over an adapter, the manifest
//!   (`docs_*` tables) and the mirror tree: tree and placement, the seed's
//!   processing order, atomic writes, assets, moves, trash and its guard,
//!   link rewriting, `INDEX.md`.
//!
//! - [`sync`]: one sync of the mirror (platforms in parallel, each under
//!   its own lock), run by the `docs.sync` task ([`task`], on `q:long`,
//!   with progress events) and by `trellis docs sync` ([`cli`]).
//! - [`platforms`]: the adapters built from the settings, one line each.
//! - [`browse`]: a folder's entries and a reader's path, over the manifest.
//! - [`doctor`]: checks with stable codes.
//!
//! Wired into the app as a domain ([`domain`]): its [`settings`] (every
//! `TRELLIS_NOTION_*`, `TRELLIS_FEISHU_*` and `TRELLIS_DOCS_*` knob), its
//! [`service`], its task and schedule, and its GraphQL ([`graphql`]).
//!
//! [`notion`] is the Notion adapter and [`feishu`] the Feishu adapter (its
//! docx blocks rendered to Markdown by [`feishu::blocks`]), both paced by
//! [`ratelimit`]; [`search`] is the full-text search over the mirrored
//! text (`searchDocs`).
//!
//! [`stored`] lays what admins store over GraphQL (`updateDocsSettings`,
//! secrets sealed) over the environment's settings.
//!
//! `docs/docs-mirror.md` describes the formats, the engine, the API and
//! the CLI as built.

pub mod adapter;
pub mod assets;
pub mod browse;
pub mod cli;
pub mod doctor;
mod domain;
pub mod engine;
pub mod feishu;
pub mod frontmatter;
pub mod graphql;
mod http;
pub mod markers;
pub mod mode;
pub mod naming;
pub mod notion;
pub mod platforms;
pub mod ratelimit;
pub mod schedule;
pub mod search;
pub mod service;
pub mod settings;
pub mod stored;
pub mod sync;
pub mod task;

pub use domain::setup;
pub use settings::Settings;
