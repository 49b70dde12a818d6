//! `FeedsService`: items.

use super::*;

impl FeedsService {
    pub async fn item(&self, user: Uuid, id: i64) -> AppResult<item::Model> {
        owned::<item::Entity>(&self.db, user, id).await
    }

    pub fn items_of(&self, user: Uuid) -> Select<item::Entity> {
        item::Entity::find().filter(item::Column::UserId.eq(user))
    }

    /// Marks the user's items read or unread; returns how many changed.
    pub async fn set_unread(&self, user: Uuid, ids: &[i64], unread: bool) -> AppResult<u64> {
        self.set_flag(user, ids, item::Column::Unread, unread).await
    }

    /// Stars or unstars the user's items; returns how many changed.
    pub async fn set_starred(&self, user: Uuid, ids: &[i64], starred: bool) -> AppResult<u64> {
        self.set_flag(user, ids, item::Column::Starred, starred)
            .await
    }

    async fn set_flag(
        &self,
        user: Uuid,
        ids: &[i64],
        column: item::Column,
        value: bool,
    ) -> AppResult<u64> {
        check_ids(ids)?;
        Ok(item::Entity::update_many()
            .col_expr(column, Expr::value(value))
            .col_expr(item::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(item::Column::UserId.eq(user))
            .filter(item::Column::Id.is_in(ids.iter().copied()))
            .filter(column.eq(!value))
            .exec(&self.db)
            .await?
            .rows_affected)
    }

    /// Marks every unread item of a feed, a group or all feeds read that
    /// arrived (was stored by Trellis) by `before` — one statement,
    /// server-side. Arrival, not publication: an item published earlier
    /// but pulled later was never seen by whoever asks, and stays unread.
    pub async fn mark_all_read(
        &self,
        user: Uuid,
        scope: ReadScope,
        before: Option<DateTime<Utc>>,
    ) -> AppResult<u64> {
        let mut update = item::Entity::update_many()
            .col_expr(item::Column::Unread, Expr::value(false))
            .col_expr(item::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(item::Column::UserId.eq(user))
            .filter(item::Column::Unread.eq(true));
        match scope {
            ReadScope::Feed(id) => {
                self.feed(user, id).await?;
                update = update.filter(item::Column::FeedId.eq(id));
            }
            ReadScope::Group(id) => {
                self.group(user, id).await?;
                update =
                    update.filter(item::Column::FeedId.in_subquery(feed_ids_in_group(user, id)));
            }
            ReadScope::All => {}
        }
        if let Some(before) = before {
            update = update.filter(item::Column::ArrivedAt.lte(before));
        }
        Ok(update.exec(&self.db).await?.rows_affected)
    }
}
