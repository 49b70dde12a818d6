//! The feeds' DataLoaders: one fresh set per request (`graphql::loaders`
//! says why and how).

use std::{collections::HashMap, sync::Arc};

use async_graphql::dataloader::{DataLoader, Loader};
use entity::{feed, feed_fetch_state, feed_group, feed_icon, item};
use sea_orm::{
    ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    sea_query::{Expr, Func},
};

use crate::{graphql::loaders::ById, keyed};

keyed!(feed::Entity, i64, Id, id);
keyed!(feed_group::Entity, i64, Id, id);
keyed!(feed_fetch_state::Entity, i64, FeedId, feed_id);

/// The loaders of one request.
pub struct FeedLoaders {
    pub feeds: DataLoader<ById<feed::Entity>>,
    pub feed_groups: DataLoader<ById<feed_group::Entity>>,
    pub fetch_states: DataLoader<ById<feed_fetch_state::Entity>>,
    pub item_counts: DataLoader<ItemCountLoader>,
    pub group_feeds: DataLoader<GroupFeedsLoader>,
    pub icons: DataLoader<IconLoader>,
}

impl FeedLoaders {
    pub fn new(db: &DatabaseConnection) -> Arc<Self> {
        Arc::new(FeedLoaders {
            feeds: DataLoader::new(ById::new(db), tokio::spawn),
            feed_groups: DataLoader::new(ById::new(db), tokio::spawn),
            fetch_states: DataLoader::new(ById::new(db), tokio::spawn),
            item_counts: DataLoader::new(ItemCountLoader(db.clone()), tokio::spawn),
            group_feeds: DataLoader::new(GroupFeedsLoader(db.clone()), tokio::spawn),
            icons: DataLoader::new(IconLoader(db.clone()), tokio::spawn),
        })
    }
}

/// A group's feeds by name, for every group on the page in one query. The
/// keys are ids of groups the caller was already shown (a group and its
/// feeds always have the same owner).
pub struct GroupFeedsLoader(DatabaseConnection);

impl Loader<i64> for GroupFeedsLoader {
    type Value = Vec<feed::Model>;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Self::Value>, Self::Error> {
        let feeds = feed::Entity::find()
            .filter(feed::Column::GroupId.is_in(keys.iter().copied()))
            .order_by_asc(feed::Column::Name)
            .order_by_asc(feed::Column::Id)
            .all(&self.0)
            .await?;
        let mut by_group: HashMap<i64, Vec<feed::Model>> =
            keys.iter().map(|key| (*key, Vec::new())).collect();
        for feed in feeds {
            by_group.entry(feed.group_id).or_default().push(feed);
        }
        Ok(by_group)
    }
}

/// How many items a feed has, and how many are unread.
#[derive(Debug, Clone, Copy, Default)]
pub struct ItemCounts {
    pub total: i64,
    pub unread: i64,
}

/// Item counts by feed id: one grouped query for every feed on the page.
pub struct ItemCountLoader(DatabaseConnection);

impl Loader<i64> for ItemCountLoader {
    type Value = ItemCounts;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Self::Value>, Self::Error> {
        let unread = Expr::case(item::Column::Unread.eq(true), 1).finally(0);
        let rows: Vec<(i64, i64, i64)> = item::Entity::find()
            .select_only()
            .column(item::Column::FeedId)
            .expr(Func::count(Expr::col(item::Column::Id)))
            .expr(Func::sum(unread))
            .filter(item::Column::FeedId.is_in(keys.iter().copied()))
            .group_by(item::Column::FeedId)
            .into_tuple()
            .all(&self.0)
            .await?;
        let mut counts: HashMap<i64, ItemCounts> = keys
            .iter()
            .map(|key| (*key, ItemCounts::default()))
            .collect();
        for (feed_id, total, unread) in rows {
            counts.insert(feed_id, ItemCounts { total, unread });
        }
        Ok(counts)
    }
}

/// Which feeds have an icon, with its hash — without its bytes.
pub struct IconLoader(DatabaseConnection);

impl Loader<i64> for IconLoader {
    type Value = String;
    type Error = Arc<sea_orm::DbErr>;

    async fn load(&self, keys: &[i64]) -> Result<HashMap<i64, Self::Value>, Self::Error> {
        let found: Vec<(i64, String)> = feed_icon::Entity::find()
            .select_only()
            .column(feed_icon::Column::FeedId)
            .column(feed_icon::Column::Hash)
            .filter(feed_icon::Column::FeedId.is_in(keys.iter().copied()))
            .filter(feed_icon::Column::Hash.ne(""))
            .into_tuple()
            .all(&self.0)
            .await?;
        Ok(found.into_iter().collect())
    }
}
