//! Feeds (SPEC §4, seed 000): a per-user RSS/Atom/JSON Feed reader.
//!
//! - [`service`]: the user's operations (groups, feeds, items, bookmarks,
//!   settings); [`graphql`] is the thin API over it; [`search`] the
//!   full-text queries per backend.
//! - The pull worker: [`pullpolicy`] decides when (pure), [`scheduler`]
//!   enqueues due pulls, [`pull`] fetches and records one feed through
//!   [`crate::httpc`], [`prepare`], [`parse`] and [`mapping`] turn bytes
//!   into items ([`text`] makes titles plain text, [`dates`] reads
//!   real-world dates),
//!   [`store`] is its SQL, [`tasks`] the runner's task kinds.
//! - [`retention`]: the optional hourly clean-up of old read items.
//! - [`sanitize`]: item HTML as it is served; [`discover`] finds feeds a
//!   page links to; [`icons`] fetches, keeps and serves each feed's icon;
//!   [`opml`] reads and writes subscription lists, whose
//!   names [`names`] keeps fit for XML.
//! - [`item_list`]: the item lists (GraphQL `items`, the reader APIs'
//!   streams) and bookmarks, paged by keyset.
//! - [`reader_auth`]: the password mobile reader apps sign in with; the
//!   protocols themselves are `crate::readerapi`.
//! - Wiring: [`settings`] (its command-line settings), [`domain`] (what the
//!   app builds and starts), [`loaders`] (its DataLoaders).

pub mod dates;
pub mod discover;
pub mod domain;
pub mod graphql;
pub mod icons;
pub mod item_list;
pub mod loaders;
pub mod mapping;
pub mod names;
pub mod opml;
pub mod parse;
pub mod prepare;
pub mod pull;
pub mod pullpolicy;
pub mod reader_auth;
pub mod retention;
pub mod sanitize;
pub mod scheduler;
pub mod search;
pub mod service;
pub mod settings;
pub mod store;
pub mod tasks;
pub mod text;

pub use domain::setup;
pub use settings::Settings;

/// Event: a feed was created, changed or deleted (wakes the schedulers).
pub const FEED_CHANGED: &str = "feed.changed";
/// Event: a pull finished (new items, fetch state).
pub const FEED_UPDATED: &str = "feed.updated";
/// Task kind: pull one feed.
pub const PULL_KIND: &str = "feeds.pull";
/// Task kind: import a parsed OPML list for one user.
pub const IMPORT_KIND: &str = "feeds.import_opml";
/// Task kind: pull every non-suspended feed of one user.
pub const REFRESH_ALL_KIND: &str = "feeds.refresh_all";

/// The closed set a feed's `refreshIntervalSeconds` override is chosen from
/// (15 min to 1 day).
pub const REFRESH_INTERVALS: [i32; 8] = [900, 1800, 3600, 7200, 14_400, 21_600, 43_200, 86_400];
