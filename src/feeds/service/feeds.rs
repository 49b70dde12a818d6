//! `FeedsService`: feeds.

use super::*;

impl FeedsService {
    pub async fn feed(&self, user: Uuid, id: i64) -> AppResult<feed::Model> {
        owned::<feed::Entity>(&self.db, user, id).await
    }

    pub fn feeds_of(&self, user: Uuid) -> Select<feed::Entity> {
        feed::Entity::find().filter(feed::Column::UserId.eq(user))
    }

    /// The user's feeds by name, optionally of one group.
    pub async fn feeds(&self, user: Uuid, group: Option<i64>) -> AppResult<Vec<feed::Model>> {
        let mut select = self.feeds_of(user);
        if let Some(group) = group {
            select = select.filter(feed::Column::GroupId.eq(group));
        }
        Ok(select
            .order_by_asc(feed::Column::Name)
            .order_by_asc(feed::Column::Id)
            .all(&self.db)
            .await?)
    }

    pub async fn fetch_state(&self, feed_id: i64) -> AppResult<Option<feed_fetch_state::Model>> {
        Ok(feed_fetch_state::Entity::find_by_id(feed_id)
            .one(&self.db)
            .await?)
    }

    /// Creates feeds in one transaction: all or none. Each starts due now.
    pub async fn create_feeds(
        &self,
        user: Uuid,
        feeds: Vec<NewFeed>,
    ) -> AppResult<Vec<feed::Model>> {
        if feeds.is_empty() || feeds.len() > MAX_BATCH {
            return Err(AppError::bad_input(
                "input",
                format!("give 1–{MAX_BATCH} feeds"),
            ));
        }
        let txn = crate::db::begin_write(&self.db).await?;
        let default = default_group_in(&txn, user).await?;
        let now = Utc::now();
        let mut created = Vec::with_capacity(feeds.len());
        for new in feeds {
            let link = self.feed_link(&new.link)?;
            let group_id = match new.group_id {
                Some(id) => owned_group(&txn, user, id).await?.id,
                None => default.id,
            };
            check_interval(new.refresh_interval_seconds)?;
            let name = match new.name.as_deref().map(str::trim) {
                Some(name) if !name.is_empty() => checked_name(name)?,
                // Named after its URL until the first pull finds its title.
                _ => name_from_link(&link),
            };
            let model = insert_feed(
                &txn,
                feed::ActiveModel {
                    user_id: Set(user),
                    group_id: Set(group_id),
                    name: Set(name),
                    link: Set(link.clone()),
                    site_url: Set(new.site_url.as_deref().map(web_url).transpose()?),
                    suspended: Set(new.suspended),
                    refresh_interval_seconds: Set(new.refresh_interval_seconds),
                    ..Default::default()
                },
                now,
            )
            .await
            .map_err(|error| match error {
                AppError::Conflict(_) => AppError::Conflict(format!("you already follow {link}")),
                other => other,
            })?;
            created.push(model);
        }
        feeds_changed(&txn, user, created.iter().map(|feed| feed.id)).await?;
        txn.commit().await?;
        Ok(created)
    }

    pub async fn update_feed(
        &self,
        user: Uuid,
        id: i64,
        patch: FeedPatch,
    ) -> AppResult<feed::Model> {
        let txn = crate::db::begin_write(&self.db).await?;
        let current = feed::Entity::find_by_id(id)
            .filter(feed::Column::UserId.eq(user))
            .one(&txn)
            .await?
            .ok_or(AppError::NotFound("feed"))?;
        let mut model = current.clone().into_active_model();
        let mut reschedule = false;
        let mut new_source = false;
        if let Some(link) = &patch.link {
            let link = self.feed_link(link)?;
            new_source = link != current.link;
            model.link = Set(link);
        }
        if let Some(name) = &patch.name {
            model.name = Set(checked_name(name)?);
        }
        if let Some(group_id) = patch.group_id {
            model.group_id = Set(owned_group(&txn, user, group_id).await?.id);
        }
        if let Some(site_url) = &patch.site_url {
            model.site_url = Set(site_url.as_deref().map(web_url).transpose()?);
        }
        if let Some(suspended) = patch.suspended {
            reschedule |= current.suspended && !suspended;
            model.suspended = Set(suspended);
        }
        if let Some(interval) = patch.refresh_interval_seconds {
            check_interval(interval)?;
            // Seed §8: a changed or cleared override makes the feed due now
            // and drops any Retry-After hold.
            reschedule |= interval != current.refresh_interval_seconds;
            model.refresh_interval_seconds = Set(interval);
        }
        model.updated_at = Set(Utc::now());
        let updated = model
            .update(&txn)
            .await
            .map_err(|error| unique_conflict(error, "you already follow that link".into()))?;
        if new_source || reschedule {
            let mut update = feed_fetch_state::Entity::update_many()
                .col_expr(
                    feed_fetch_state::Column::NextCheckAt,
                    Expr::value(None::<DateTime<Utc>>),
                )
                .col_expr(
                    feed_fetch_state::Column::RetryAfterUntil,
                    Expr::value(None::<DateTime<Utc>>),
                );
            if new_source {
                // The old URL's validators mean nothing to the new one.
                for column in [
                    feed_fetch_state::Column::Etag,
                    feed_fetch_state::Column::LastModified,
                    feed_fetch_state::Column::CacheControl,
                ] {
                    update = update.col_expr(column, Expr::value(None::<String>));
                }
                update = update
                    .col_expr(
                        feed_fetch_state::Column::ExpiresAt,
                        Expr::value(None::<DateTime<Utc>>),
                    )
                    .col_expr(
                        feed_fetch_state::Column::ConsecutiveFailures,
                        Expr::value(0),
                    );
            }
            update
                .filter(feed_fetch_state::Column::FeedId.eq(id))
                .exec(&txn)
                .await?;
        }
        feeds_changed(&txn, user, [id]).await?;
        txn.commit().await?;
        Ok(updated)
    }

    /// Deletes a feed and its items; bookmarks keep their snapshots (seed §6).
    pub async fn delete_feed(&self, user: Uuid, id: i64) -> AppResult<()> {
        let txn = crate::db::begin_write(&self.db).await?;
        let feed = feed::Entity::find_by_id(id)
            .filter(feed::Column::UserId.eq(user))
            .one(&txn)
            .await?
            .ok_or(AppError::NotFound("feed"))?;
        bookmark::Entity::update_many()
            .col_expr(bookmark::Column::ItemId, Expr::value(None::<i64>))
            .col_expr(bookmark::Column::FeedId, Expr::value(None::<i64>))
            .filter(bookmark::Column::FeedId.eq(feed.id))
            .exec(&txn)
            .await?;
        item::Entity::delete_many()
            .filter(item::Column::FeedId.eq(feed.id))
            .exec(&txn)
            .await?;
        feed::Entity::delete_by_id(feed.id).exec(&txn).await?;
        feeds_changed(&txn, user, [feed.id]).await?;
        txn.commit().await?;
        Ok(())
    }

    /// A feed URL the user may add: absolute http(s). Where it may lead is
    /// the SSRF guard's call at every fetch (DNS can change), recorded in
    /// the feed's `fetchState.lastError`.
    pub(super) fn feed_link(&self, link: &str) -> AppResult<String> {
        let url = Url::parse(link.trim())
            .map_err(|error| AppError::bad_input("link", format!("not a valid URL: {error}")))?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(AppError::bad_input(
                "link",
                "feeds are fetched over http or https",
            ));
        }
        let link = url.to_string();
        if link.len() > MAX_LINK_BYTES {
            return Err(AppError::bad_input(
                "link",
                format!("a feed URL is at most {MAX_LINK_BYTES} bytes"),
            ));
        }
        Ok(link)
    }
}
