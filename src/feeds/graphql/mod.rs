//! GraphQL surface of the feed reader: thin resolvers over
//! [`FeedsService`]; every one starts from `ctx.viewer()` and passes the
//! viewer's id down, so nothing crosses users.

use std::sync::Arc;

use async_graphql::{
    ComplexObject, Context, Enum, ID, InputObject, MaybeUndefined, Object, SimpleObject,
    Subscription,
};
use chrono::{DateTime, Utc};
use entity::{bookmark, feed, feed_fetch_state, feed_group, feed_settings, item};
use futures_util::Stream;
use serde_json::json;

use super::{
    FEED_UPDATED, IMPORT_KIND, PULL_KIND, REFRESH_ALL_KIND, REFRESH_INTERVALS,
    discover::Discoverer,
    icons::IconLinks,
    item_list::{GroupRef, ItemQuery},
    loaders::{FeedLoaders, ItemCounts},
    opml,
    pull::PullMode,
    reader_auth::ReaderAccounts,
    sanitize,
    service::{FeedPatch, FeedsService, NewFeed, ReadScope, SettingsPatch, Snapshot},
};
use crate::{
    error::{AppError, AppResult},
    graphql::{
        context::ContextExt,
        pagination::{KeysetConnection, PageRequest},
    },
    jobs::{
        Jobs,
        graphql::Task,
        model::{NewTask, Queue},
    },
};

mod inputs;
mod mutation;
mod objects;
mod query;
mod subscription;

pub use self::{inputs::*, mutation::*, objects::*, query::*, subscription::*};

fn feeds<'a>(ctx: &'a Context<'_>) -> AppResult<&'a FeedsService> {
    ctx.service::<FeedsService>()
}

fn loaders<'a>(ctx: &'a Context<'_>) -> AppResult<&'a FeedLoaders> {
    Ok(ctx.service::<Arc<FeedLoaders>>()?)
}

/// Feed-domain ids are integers; clients treat them as opaque strings.
pub fn parse_int_id(field: &'static str, id: &ID) -> AppResult<i64> {
    id.parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| AppError::bad_input(field, "not a valid id"))
}

fn parse_ids(field: &'static str, ids: &[ID]) -> AppResult<Vec<i64>> {
    ids.iter().map(|id| parse_int_id(field, id)).collect()
}
