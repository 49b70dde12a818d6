//! Feeds (SPEC §4, seed 000): groups, feeds, items, search, bookmarks and
//! the pull worker. So far: [`pullpolicy`], the pure scheduling rules the
//! pull worker will follow.

pub mod pullpolicy;
