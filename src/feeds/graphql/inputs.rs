//! The feeds' GraphQL input objects, and how a patch's fields read.

use super::*;

#[derive(InputObject, Default)]
pub struct ItemFilter {
    pub feed_id: Option<ID>,
    pub group_id: Option<ID>,
    pub unread: Option<bool>,
    pub starred: Option<bool>,
    /// Full-text query over title and content.
    pub query: Option<String>,
}

/// The order of `items`: by `pubDate`, the id breaking ties.
#[derive(Enum, Copy, Clone, Eq, PartialEq, Default)]
pub enum ItemSort {
    /// Newest first (the default).
    #[default]
    NewestFirst,
    /// Oldest first: read a backlog in the order it was written.
    OldestFirst,
}

impl From<ItemSort> for super::super::item_list::ItemOrder {
    fn from(sort: ItemSort) -> Self {
        match sort {
            ItemSort::NewestFirst => Self::NewestFirst,
            ItemSort::OldestFirst => Self::OldestFirst,
        }
    }
}

#[derive(InputObject)]
pub struct CreateFeedInput {
    /// The feed's URL (http or https).
    pub link: String,
    /// Defaults to the URL until the first pull finds the feed's title.
    pub name: Option<String>,
    /// Defaults to the default group.
    pub group_id: Option<ID>,
    pub site_url: Option<String>,
    #[graphql(default)]
    pub suspended: bool,
    /// One of `refreshIntervalOptions`; null for the server's interval.
    pub refresh_interval_seconds: Option<i32>,
}

#[derive(InputObject)]
pub struct UpdateFeedInput {
    pub link: Option<String>,
    pub name: Option<String>,
    pub group_id: Option<ID>,
    pub site_url: MaybeUndefined<String>,
    pub suspended: Option<bool>,
    /// Null clears the override; omitted leaves it.
    pub refresh_interval_seconds: MaybeUndefined<i32>,
}

#[derive(InputObject)]
pub struct CreateBookmarkInput {
    /// Snapshot this item; or give the snapshot fields instead.
    pub item_id: Option<ID>,
    pub link: Option<String>,
    pub title: Option<String>,
    pub content: Option<String>,
    pub pub_date: Option<DateTime<Utc>>,
    pub feed_name: Option<String>,
}

#[derive(InputObject)]
pub struct UpdateSettingsInput {
    pub retention_days: MaybeUndefined<i32>,
    pub unread_only: MaybeUndefined<bool>,
    pub oldest_first: MaybeUndefined<bool>,
    pub mark_read_on_scroll: MaybeUndefined<bool>,
}

pub(super) fn patch<T>(value: MaybeUndefined<T>) -> Option<Option<T>> {
    match value {
        MaybeUndefined::Undefined => None,
        MaybeUndefined::Null => Some(None),
        MaybeUndefined::Value(value) => Some(Some(value)),
    }
}

/// What the complexity limit assumes of unpaged lists, whose real length is
/// not known before the query runs: a user's groups, a group's feeds, a
/// user's feeds. A field under such a list counts that many times, so lists
/// nested in lists (`groups { feeds { group { feeds … } } }`) are refused.
pub const ASSUMED_GROUPS: usize = 20;
pub const ASSUMED_GROUP_FEEDS: usize = 100;
pub const ASSUMED_FEEDS: usize = 100;
