//! `FeedsService`: what the reader apps (Fever, Google Reader) ask for.

use super::*;

impl FeedsService {
    /// The user's feeds that have an icon, with its hash (`feeds::icons`).
    pub async fn feeds_with_icons(&self, user: Uuid) -> AppResult<HashMap<i64, String>> {
        let found: Vec<(i64, String)> = feed_icon::Entity::find()
            .select_only()
            .column(feed_icon::Column::FeedId)
            .column(feed_icon::Column::Hash)
            .filter(feed_icon::Column::FeedId.in_subquery(user_feed_ids(user)))
            .filter(feed_icon::Column::Hash.ne(""))
            .into_tuple()
            .all(&self.db)
            .await?;
        Ok(found.into_iter().collect())
    }

    /// The icons of the user's feeds (Fever inlines them).
    pub async fn feed_icons(&self, user: Uuid) -> AppResult<Vec<feed_icon::Model>> {
        Ok(feed_icon::Entity::find()
            .filter(feed_icon::Column::FeedId.in_subquery(user_feed_ids(user)))
            .filter(feed_icon::Column::Hash.ne(""))
            .order_by_asc(feed_icon::Column::FeedId)
            .all(&self.db)
            .await?)
    }

    /// How many items the user has.
    pub async fn item_count(&self, user: Uuid) -> AppResult<u64> {
        Ok(self.items_of(user).count(&self.db).await?)
    }

    /// The ids of the user's unread or starred items, ascending.
    pub async fn item_ids_in_state(&self, user: Uuid, state: ItemState) -> AppResult<Vec<i64>> {
        let flag = match state {
            ItemState::Unread => item::Column::Unread,
            ItemState::Starred => item::Column::Starred,
        };
        Ok(self
            .items_of(user)
            .select_only()
            .column(item::Column::Id)
            .filter(flag.eq(true))
            .order_by_asc(item::Column::Id)
            .into_tuple()
            .all(&self.db)
            .await?)
    }

    /// When each of the user's feeds was last checked successfully.
    pub async fn last_successes(&self, user: Uuid) -> AppResult<HashMap<i64, DateTime<Utc>>> {
        let rows: Vec<(i64, Option<DateTime<Utc>>)> = feed_fetch_state::Entity::find()
            .select_only()
            .column(feed_fetch_state::Column::FeedId)
            .column(feed_fetch_state::Column::LastSuccessAt)
            .filter(feed_fetch_state::Column::FeedId.in_subquery(user_feed_ids(user)))
            .into_tuple()
            .all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .filter_map(|(feed, at)| Some((feed, at?)))
            .collect())
    }

    /// When any of the user's feeds was last checked, successfully or not.
    pub async fn last_checked(&self, user: Uuid) -> AppResult<Option<DateTime<Utc>>> {
        let latest: Option<Option<DateTime<Utc>>> = feed_fetch_state::Entity::find()
            .select_only()
            .expr(sea_orm::sea_query::Func::max(Expr::col(
                feed_fetch_state::Column::LastCheckedAt,
            )))
            .filter(feed_fetch_state::Column::FeedId.in_subquery(user_feed_ids(user)))
            .into_tuple()
            .one(&self.db)
            .await?;
        Ok(latest.flatten())
    }

    /// Per feed: how many unread items it has and the newest one's date.
    pub async fn unread_per_feed(&self, user: Uuid) -> AppResult<Vec<UnreadCount>> {
        let rows: Vec<(i64, i64, Option<DateTime<Utc>>)> = self
            .items_of(user)
            .select_only()
            .column(item::Column::FeedId)
            .column_as(item::Column::Id.count(), "count")
            .column_as(item::Column::PubDate.max(), "newest")
            .filter(item::Column::Unread.eq(true))
            .group_by(item::Column::FeedId)
            .into_tuple()
            .all(&self.db)
            .await?;
        Ok(rows
            .into_iter()
            .map(|(feed_id, count, newest)| UnreadCount {
                feed_id,
                count,
                newest,
            })
            .collect())
    }

    /// One page of at most `limit` of the user's items by id (Fever's paging).
    pub async fn item_page(
        &self,
        user: Uuid,
        page: ItemPage,
        limit: u64,
    ) -> AppResult<Vec<item::Model>> {
        let select = self.items_of(user);
        let select = match page {
            ItemPage::WithIds(ids) => select
                .filter(item::Column::Id.is_in(ids))
                .order_by_asc(item::Column::Id),
            ItemPage::Before(Some(max)) => select
                .filter(item::Column::Id.lt(max))
                .order_by_desc(item::Column::Id),
            ItemPage::Before(None) => select.order_by_desc(item::Column::Id),
            ItemPage::After(since) => select
                .filter(item::Column::Id.gt(since))
                .order_by_asc(item::Column::Id),
        };
        Ok(select.limit(limit).all(&self.db).await?)
    }
}
