//! `FeedsService`: bookmarks.

use super::*;

impl FeedsService {
    pub fn bookmarks_of(&self, user: Uuid) -> Select<bookmark::Entity> {
        bookmark::Entity::find().filter(bookmark::Column::UserId.eq(user))
    }

    pub async fn bookmark(&self, user: Uuid, id: i64) -> AppResult<bookmark::Model> {
        owned::<bookmark::Entity>(&self.db, user, id).await
    }

    /// Bookmarks an item: a snapshot of its content as it is now.
    pub async fn bookmark_item(&self, user: Uuid, item_id: i64) -> AppResult<bookmark::Model> {
        let item = self.item(user, item_id).await?;
        let feed = self.feed(user, item.feed_id).await?;
        let link = item
            .link
            .clone()
            .unwrap_or_else(|| format!("{}#{}", feed.link, item.guid));
        self.insert_bookmark(
            user,
            Snapshot {
                item_id: Some(item.id),
                feed_id: Some(feed.id),
                link,
                title: item.title,
                content: item.content,
                pub_date: Some(item.pub_date),
                feed_name: Some(feed.name),
                authors: item.authors,
                enclosures: item.enclosures,
            },
        )
        .await
    }

    pub async fn insert_bookmark(
        &self,
        user: Uuid,
        snapshot: Snapshot,
    ) -> AppResult<bookmark::Model> {
        let link = web_url(&snapshot.link)?;
        let now = Utc::now();
        bookmark::ActiveModel {
            user_id: Set(user),
            item_id: Set(snapshot.item_id),
            feed_id: Set(snapshot.feed_id),
            link: Set(link.clone()),
            title: Set(bounded("title", snapshot.title.trim(), 1000)?),
            content_html: Set(Some(sanitize_html(
                &snapshot.content,
                Url::parse(&link).ok().as_ref(),
            ))),
            content: Set(snapshot.content),
            pub_date: Set(snapshot.pub_date),
            feed_name: Set(snapshot.feed_name),
            authors: Set(snapshot.authors),
            enclosures: Set(snapshot.enclosures),
            created_at: Set(now),
            updated_at: Set(now),
            ..Default::default()
        }
        .insert(&self.db)
        .await
        .map_err(|error| unique_conflict(error, format!("{link} is already bookmarked")))
    }

    pub async fn rename_bookmark(
        &self,
        user: Uuid,
        id: i64,
        title: &str,
    ) -> AppResult<bookmark::Model> {
        let mut model = self.bookmark(user, id).await?.into_active_model();
        model.title = Set(bounded("title", title.trim(), 1000)?);
        model.updated_at = Set(Utc::now());
        Ok(model.update(&self.db).await?)
    }

    pub async fn delete_bookmark(&self, user: Uuid, id: i64) -> AppResult<()> {
        let bookmark = self.bookmark(user, id).await?;
        bookmark::Entity::delete_by_id(bookmark.id)
            .exec(&self.db)
            .await?;
        Ok(())
    }
}
