//! `FeedsService`: groups.

use super::*;

impl FeedsService {
    /// The user's default group (created with the user: migration 000015).
    pub async fn default_group(&self, user: Uuid) -> AppResult<feed_group::Model> {
        default_group_in(&self.db, user).await
    }

    pub async fn groups(&self, user: Uuid) -> AppResult<Vec<feed_group::Model>> {
        Ok(feed_group::Entity::find()
            .filter(feed_group::Column::UserId.eq(user))
            .order_by_desc(feed_group::Column::IsDefault)
            .order_by_asc(feed_group::Column::Name)
            .order_by_asc(feed_group::Column::Id)
            .all(&self.db)
            .await?)
    }

    pub async fn group(&self, user: Uuid, id: i64) -> AppResult<feed_group::Model> {
        owned::<feed_group::Entity>(&self.db, user, id).await
    }

    pub async fn create_group(&self, user: Uuid, name: &str) -> AppResult<feed_group::Model> {
        let name = group_name(name)?;
        let now = Utc::now();
        new_group(user, name.clone(), now)
            .insert(&self.db)
            .await
            .map_err(|error| unique_conflict(error, format!("a group named {name:?} exists")))
    }

    pub async fn rename_group(
        &self,
        user: Uuid,
        id: i64,
        name: &str,
    ) -> AppResult<feed_group::Model> {
        let name = group_name(name)?;
        let mut group = self.group(user, id).await?.into_active_model();
        group.name = Set(name.clone());
        group.updated_at = Set(Utc::now());
        group
            .update(&self.db)
            .await
            .map_err(|error| unique_conflict(error, format!("a group named {name:?} exists")))
    }

    /// Deletes a group after moving its feeds to the default group (seed §6).
    pub async fn delete_group(&self, user: Uuid, id: i64) -> AppResult<()> {
        let group = self.group(user, id).await?;
        if group.is_default {
            return Err(AppError::bad_input(
                "id",
                "the default group cannot be deleted",
            ));
        }
        let txn = crate::db::begin_write(&self.db).await?;
        let default = default_group_in(&txn, user).await?;
        feed::Entity::update_many()
            .col_expr(feed::Column::GroupId, Expr::value(default.id))
            .col_expr(feed::Column::UpdatedAt, Expr::value(Utc::now()))
            .filter(feed::Column::GroupId.eq(group.id))
            .filter(feed::Column::UserId.eq(user))
            .exec(&txn)
            .await?;
        feed_group::Entity::delete_by_id(group.id)
            .exec(&txn)
            .await?;
        txn.commit().await?;
        Ok(())
    }
}
