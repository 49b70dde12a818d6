//! Feeds (SPEC §4, seed 000): groups, feeds, items, search, bookmarks and
//! the pull worker. So far the pure parts: [`pullpolicy`] (when to pull)
//! and [`mapping`] (how an entry becomes an item).

pub mod mapping;
pub mod pullpolicy;
