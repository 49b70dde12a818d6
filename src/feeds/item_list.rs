//! Lists of a user's items (the one query behind GraphQL `items` and the
//! reader APIs' streams), bookmarks and matching feeds, so the resolvers
//! and protocol handlers build no SQL of their own.

use async_graphql::OutputType;
use chrono::{DateTime, Utc};
use entity::{bookmark, feed, feed_group, item};
use sea_orm::{ColumnTrait, QueryFilter, QueryOrder, Select, sea_query::Query};
use uuid::Uuid;

use super::{
    search,
    service::{FeedsService, feed_ids_in_group},
};
use crate::{
    error::AppResult,
    graphql::pagination::{
        Cursor, KeyValue, Keyset, KeysetConnection, PageRequest, keyset_page, paginate,
    },
};

/// A group, by id (GraphQL) or by name (the Google Reader API's labels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupRef {
    Id(i64),
    Name(String),
}

/// Which of a user's items a list holds. Conditions add up: asking for
/// unread and read items at once (a stream of read items that excludes
/// read ones) matches nothing, as the conditions say.
#[derive(Debug, Clone, Default)]
pub struct ItemQuery {
    pub feed: Option<i64>,
    pub group: Option<GroupRef>,
    unread: Vec<bool>,
    starred: Vec<bool>,
    /// A full-text match, in the search's syntax.
    pub text: Option<String>,
    /// Arrived at or after this instant (Google Reader's `ot`).
    pub arrived_since: Option<DateTime<Utc>>,
    /// Arrived before this instant (Google Reader's `nt`).
    pub arrived_before: Option<DateTime<Utc>>,
}

/// The order of an item list: newest first, or oldest first; the id breaks
/// ties, so the order is total and a cursor names an exact place in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ItemOrder {
    #[default]
    NewestFirst,
    OldestFirst,
}

impl ItemOrder {
    fn keyset(self) -> Keyset<item::Column> {
        let columns = vec![item::Column::PubDate, item::Column::Id];
        match self {
            ItemOrder::NewestFirst => Keyset::descending(columns),
            ItemOrder::OldestFirst => Keyset::ascending(columns),
        }
    }
}

/// An item's place in an [`ItemOrder`].
pub fn item_key(item: &item::Model) -> Vec<KeyValue> {
    vec![KeyValue::Time(item.pub_date), KeyValue::Int(item.id)]
}

impl ItemQuery {
    /// Only unread (`true`) or only read (`false`) items.
    pub fn unread(&mut self, unread: bool) -> &mut Self {
        self.unread.push(unread);
        self
    }

    /// Only starred (`true`) or only unstarred (`false`) items.
    pub fn starred(&mut self, starred: bool) -> &mut Self {
        self.starred.push(starred);
        self
    }
}

impl FeedsService {
    fn select_items(&self, user: Uuid, query: &ItemQuery) -> Select<item::Entity> {
        let mut select = self.items_of(user);
        if let Some(feed) = query.feed {
            select = select.filter(item::Column::FeedId.eq(feed));
        }
        select = match &query.group {
            None => select,
            Some(GroupRef::Id(group)) => {
                select.filter(item::Column::FeedId.in_subquery(feed_ids_in_group(user, *group)))
            }
            Some(GroupRef::Name(name)) => {
                select.filter(item::Column::FeedId.in_subquery(feed_ids_in_named_group(user, name)))
            }
        };
        for unread in &query.unread {
            select = select.filter(item::Column::Unread.eq(*unread));
        }
        for starred in &query.starred {
            select = select.filter(item::Column::Starred.eq(*starred));
        }
        if let Some(text) = query.text.as_deref().filter(|text| !text.trim().is_empty()) {
            select = select.filter(search::matches(self.db().get_database_backend(), text));
        }
        if let Some(since) = query.arrived_since {
            select = select.filter(item::Column::ArrivedAt.gte(since));
        }
        if let Some(until) = query.arrived_before {
            select = select.filter(item::Column::ArrivedAt.lt(until));
        }
        select
    }

    /// At most `limit` of the user's matching items after `after` (checked
    /// first; `field` names the argument it came in), and where the next
    /// page starts, when there is one.
    pub async fn items_after(
        &self,
        user: Uuid,
        query: &ItemQuery,
        order: ItemOrder,
        after: Option<&Cursor>,
        field: &'static str,
        limit: u64,
    ) -> AppResult<(Vec<item::Model>, Option<Cursor>)> {
        let (rows, more) = keyset_page(
            self.db(),
            self.select_items(user, query),
            &order.keyset(),
            after,
            field,
            limit,
        )
        .await?;
        let next = rows
            .last()
            .filter(|_| more)
            .map(|last| Cursor(item_key(last)));
        Ok((rows, next))
    }

    /// The user's matching items in `order`, as a connection.
    pub async fn item_connection<N: OutputType>(
        &self,
        user: Uuid,
        query: &ItemQuery,
        order: ItemOrder,
        page: PageRequest,
        node: impl Fn(item::Model) -> N,
    ) -> AppResult<KeysetConnection<N>> {
        paginate(
            self.db(),
            self.select_items(user, query),
            order.keyset(),
            page,
            item_key,
            node,
        )
        .await
    }
}

impl FeedsService {
    /// The user's items of these ids (others' and unknown ids are left
    /// out), newest first.
    pub async fn items_by_ids(&self, user: Uuid, ids: &[i64]) -> AppResult<Vec<item::Model>> {
        Ok(self
            .items_of(user)
            .filter(item::Column::Id.is_in(ids.iter().copied()))
            .order_by_desc(item::Column::PubDate)
            .order_by_desc(item::Column::Id)
            .all(self.db())
            .await?)
    }

    /// The user's bookmarks, newest first, as a connection.
    pub async fn bookmark_connection<N: OutputType>(
        &self,
        user: Uuid,
        page: PageRequest,
        node: impl Fn(bookmark::Model) -> N,
    ) -> AppResult<KeysetConnection<N>> {
        paginate(
            self.db(),
            self.bookmarks_of(user),
            Keyset::descending(vec![bookmark::Column::CreatedAt, bookmark::Column::Id]),
            page,
            |b| vec![KeyValue::Time(b.created_at), KeyValue::Int(b.id)],
            node,
        )
        .await
    }

    /// The user's feeds whose names or addresses match a search.
    pub async fn matching_feeds(
        &self,
        user: Uuid,
        query: &str,
        limit: u64,
    ) -> AppResult<Vec<feed::Model>> {
        search::matching_feeds(self.db(), user, query, limit).await
    }
}

/// The ids of the user's feeds in the group of that name.
fn feed_ids_in_named_group(user: Uuid, name: &str) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .column(feed::Column::Id)
        .from(feed::Entity)
        .and_where(feed::Column::UserId.eq(user))
        .and_where(
            feed::Column::GroupId.in_subquery(
                Query::select()
                    .column(feed_group::Column::Id)
                    .from(feed_group::Entity)
                    .and_where(feed_group::Column::UserId.eq(user))
                    .and_where(feed_group::Column::Name.eq(name))
                    .to_owned(),
            ),
        )
        .to_owned()
}
