//! `feeds.retention`: the optional per-user clean-up, run hourly as a
//! periodic job. For every user whose `retentionDays` is set, it deletes
//! read items published more than that many days ago — never starred or
//! bookmarked ones. The pull worker does not import entries older than the
//! same horizon, so a deleted item still listed in its feed does not come
//! back as unread.

use chrono::{DateTime, Utc};
use entity::{bookmark, feed_settings, item};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DatabaseConnection, EntityTrait, QueryFilter, QuerySelect,
    sea_query::Query,
};
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use uuid::Uuid;

use crate::{
    error::AppResult,
    jobs::{
        handler::{SingleStage, StageError, StageRun},
        model::{NewTask, Queue},
    },
};

pub const KIND: &str = "feeds.retention";

pub fn new_task() -> NewTask {
    NewTask::new(KIND, Queue::Long, json!({}))
}

/// The oldest publication date a user keeps, if they chose a retention.
pub async fn horizon(
    db: &impl ConnectionTrait,
    user: Uuid,
    now: DateTime<Utc>,
) -> AppResult<Option<DateTime<Utc>>> {
    let days: Option<Option<i32>> = feed_settings::Entity::find_by_id(user)
        .select_only()
        .column(feed_settings::Column::RetentionDays)
        .into_tuple()
        .one(db)
        .await?;
    Ok(days
        .flatten()
        .map(|days| now - chrono::Duration::days(i64::from(days))))
}

pub struct RetentionHandler {
    pub db: DatabaseConnection,
}

#[async_trait::async_trait]
impl SingleStage for RetentionHandler {
    const KIND: &'static str = KIND;
    const QUEUE: Queue = Queue::Long;
    const STAGE: &'static str = "delete-old-read-items";
    type Payload = IgnoredAny;

    async fn run(
        &self,
        _payload: IgnoredAny,
        _run: &mut StageRun<'_>,
    ) -> Result<Value, StageError> {
        let now = Utc::now();
        let users: Vec<(Uuid, i32)> = feed_settings::Entity::find()
            .select_only()
            .column(feed_settings::Column::UserId)
            .column(feed_settings::Column::RetentionDays)
            .filter(feed_settings::Column::RetentionDays.is_not_null())
            .into_tuple()
            .all(&self.db)
            .await?;
        let mut deleted = 0;
        for (user, days) in &users {
            deleted += delete_old_read_items(
                &self.db,
                *user,
                now - chrono::Duration::days(i64::from(*days)),
            )
            .await?;
        }
        Ok(json!({ "users": users.len(), "items": deleted }))
    }
}

/// Deletes the user's read, unstarred, unbookmarked items published before `before`.
pub async fn delete_old_read_items(
    db: &impl ConnectionTrait,
    user: Uuid,
    before: DateTime<Utc>,
) -> AppResult<u64> {
    Ok(item::Entity::delete_many()
        .filter(item::Column::UserId.eq(user))
        .filter(item::Column::Unread.eq(false))
        .filter(item::Column::Starred.eq(false))
        .filter(item::Column::PubDate.lt(before))
        .filter(
            item::Column::Id.not_in_subquery(
                Query::select()
                    .column(bookmark::Column::ItemId)
                    .from(bookmark::Entity)
                    .and_where(bookmark::Column::UserId.eq(user))
                    .and_where(bookmark::Column::ItemId.is_not_null())
                    .to_owned(),
            ),
        )
        .exec(db)
        .await?
        .rows_affected)
}
