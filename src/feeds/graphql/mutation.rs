//! The feeds' mutations.

use super::{inputs::patch, *};

#[derive(Default)]
pub struct FeedsMutation;

#[Object]
impl FeedsMutation {
    async fn create_group(
        &self,
        ctx: &Context<'_>,
        name: String,
    ) -> async_graphql::Result<FeedGroup> {
        let viewer = ctx.viewer()?;
        Ok(FeedGroup(
            feeds(ctx)?.create_group(viewer.user_id, &name).await?,
        ))
    }

    /// Renames a group.
    async fn update_group(
        &self,
        ctx: &Context<'_>,
        id: ID,
        name: String,
    ) -> async_graphql::Result<FeedGroup> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(FeedGroup(
            feeds(ctx)?.rename_group(viewer.user_id, id, &name).await?,
        ))
    }

    /// Deletes a group; its feeds move to the default group.
    async fn delete_group(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        feeds(ctx)?.delete_group(viewer.user_id, id).await?;
        Ok(true)
    }

    async fn create_feed(
        &self,
        ctx: &Context<'_>,
        input: CreateFeedInput,
    ) -> async_graphql::Result<Feed> {
        let viewer = ctx.viewer()?;
        let created = feeds(ctx)?
            .create_feeds(viewer.user_id, vec![new_feed(input)?])
            .await?;
        created
            .into_iter()
            .next()
            .map(Feed)
            .ok_or_else(|| AppError::internal(anyhow::anyhow!("feed not created")).into())
    }

    /// Creates several feeds: all of them or, on any error, none.
    async fn create_feeds(
        &self,
        ctx: &Context<'_>,
        input: Vec<CreateFeedInput>,
    ) -> async_graphql::Result<Vec<Feed>> {
        let viewer = ctx.viewer()?;
        let new = input
            .into_iter()
            .map(new_feed)
            .collect::<AppResult<Vec<_>>>()?;
        Ok(feeds(ctx)?
            .create_feeds(viewer.user_id, new)
            .await?
            .into_iter()
            .map(Feed)
            .collect())
    }

    async fn update_feed(
        &self,
        ctx: &Context<'_>,
        id: ID,
        input: UpdateFeedInput,
    ) -> async_graphql::Result<Feed> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        let patch = FeedPatch {
            link: input.link,
            name: input.name,
            group_id: input
                .group_id
                .as_ref()
                .map(|g| parse_int_id("groupId", g))
                .transpose()?,
            site_url: patch(input.site_url),
            suspended: input.suspended,
            refresh_interval_seconds: patch(input.refresh_interval_seconds),
        };
        Ok(Feed(
            feeds(ctx)?.update_feed(viewer.user_id, id, patch).await?,
        ))
    }

    /// Deletes a feed and its items; bookmarks keep their snapshots.
    async fn delete_feed(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        feeds(ctx)?.delete_feed(viewer.user_id, id).await?;
        Ok(true)
    }

    /// Marks 1–1000 items read; returns how many changed.
    async fn mark_items_read(&self, ctx: &Context<'_>, ids: Vec<ID>) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_unread(viewer.user_id, &ids, false).await? as i64)
    }

    /// Marks 1–1000 items unread; returns how many changed.
    async fn mark_items_unread(
        &self,
        ctx: &Context<'_>,
        ids: Vec<ID>,
    ) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_unread(viewer.user_id, &ids, true).await? as i64)
    }

    /// Marks every unread item of one feed, one group, or (`all: true`)
    /// everything read, optionally only those that arrived (were stored by
    /// Trellis) by `before` — what the client had seen then.
    /// Exactly one of `feedId`, `groupId`, `all` must be given.
    async fn mark_all_read(
        &self,
        ctx: &Context<'_>,
        feed_id: Option<ID>,
        group_id: Option<ID>,
        all: Option<bool>,
        before: Option<DateTime<Utc>>,
    ) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let scope = match (feed_id, group_id, all.unwrap_or(false)) {
            (Some(feed), None, false) => ReadScope::Feed(parse_int_id("feedId", &feed)?),
            (None, Some(group), false) => ReadScope::Group(parse_int_id("groupId", &group)?),
            (None, None, true) => ReadScope::All,
            _ => {
                return Err(AppError::bad_input(
                    "feedId",
                    "give exactly one of feedId, groupId or all: true",
                )
                .into());
            }
        };
        Ok(feeds(ctx)?
            .mark_all_read(viewer.user_id, scope, before)
            .await? as i64)
    }

    async fn star_items(&self, ctx: &Context<'_>, ids: Vec<ID>) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_starred(viewer.user_id, &ids, true).await? as i64)
    }

    async fn unstar_items(&self, ctx: &Context<'_>, ids: Vec<ID>) -> async_graphql::Result<i64> {
        let viewer = ctx.viewer()?;
        let ids = parse_ids("ids", &ids)?;
        Ok(feeds(ctx)?.set_starred(viewer.user_id, &ids, false).await? as i64)
    }

    /// Bookmarks an item (`itemId`) or saves a full snapshot (`link`, `title`, `content`…).
    async fn create_bookmark(
        &self,
        ctx: &Context<'_>,
        input: CreateBookmarkInput,
    ) -> async_graphql::Result<Bookmark> {
        let viewer = ctx.viewer()?;
        let service = feeds(ctx)?;
        let model = match (&input.item_id, &input.link) {
            (Some(item), None) => {
                service
                    .bookmark_item(viewer.user_id, parse_int_id("itemId", item)?)
                    .await?
            }
            (None, Some(link)) => {
                service
                    .insert_bookmark(
                        viewer.user_id,
                        Snapshot {
                            item_id: None,
                            feed_id: None,
                            link: link.clone(),
                            title: input.title.clone().unwrap_or_else(|| link.clone()),
                            content: input.content.clone().unwrap_or_default(),
                            pub_date: input.pub_date,
                            feed_name: input.feed_name.clone(),
                            authors: Default::default(),
                            enclosures: Default::default(),
                        },
                    )
                    .await?
            }
            _ => {
                return Err(AppError::bad_input(
                    "itemId",
                    "give either itemId or a snapshot with link",
                )
                .into());
            }
        };
        Ok(model.into())
    }

    /// Renames a bookmark.
    async fn update_bookmark(
        &self,
        ctx: &Context<'_>,
        id: ID,
        title: String,
    ) -> async_graphql::Result<Bookmark> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        Ok(feeds(ctx)?
            .rename_bookmark(viewer.user_id, id, &title)
            .await?
            .into())
    }

    async fn delete_bookmark(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        let id = parse_int_id("id", &id)?;
        feeds(ctx)?.delete_bookmark(viewer.user_id, id).await?;
        Ok(true)
    }

    /// Changes preferences; an omitted field is left alone, null resets it.
    async fn update_settings(
        &self,
        ctx: &Context<'_>,
        input: UpdateSettingsInput,
    ) -> async_graphql::Result<Settings> {
        let viewer = ctx.viewer()?;
        let patch = SettingsPatch {
            retention_days: patch(input.retention_days),
            unread_only: patch(input.unread_only),
            oldest_first: patch(input.oldest_first),
            mark_read_on_scroll: patch(input.mark_read_on_scroll),
        };
        Ok(feeds(ctx)?
            .update_settings(viewer.user_id, patch)
            .await?
            .into())
    }

    /// Imports an OPML subscription list. The document is checked now
    /// (`BAD_USER_INPUT` if it is not OPML or lists no feeds); the feeds are
    /// created by the returned task, which skips those you already follow.
    async fn import_opml(
        &self,
        ctx: &Context<'_>,
        opml: String,
        idempotency_key: Option<String>,
    ) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let feeds =
            opml::parse(&opml).map_err(|error| AppError::bad_input("opml", error.to_string()))?;
        let mut task = NewTask::new(
            IMPORT_KIND,
            Queue::Medium,
            json!({ "userId": viewer.user_id, "feeds": feeds }),
        );
        task.owner_id = Some(viewer.user_id);
        task.idempotency_key = idempotency_key;
        Ok(Task::from(
            &ctx.service::<Jobs>()?.enqueue(task).await?.task,
        ))
    }

    /// Sets the password mobile reader apps sign in with (your username —
    /// lower case — and this password). It must differ from your account
    /// password (`currentPassword`), because the Fever protocol sends
    /// `md5(username:password)` with every request. Changing the account
    /// password turns the reader APIs off again. An account created by an
    /// OIDC login has no account password: it omits `currentPassword` and
    /// must have signed in within the last ten minutes (else `FORBIDDEN`).
    /// Reader apps keep working with `TRELLIS_OIDC_DISABLE_PASSWORD_LOGIN`:
    /// they cannot speak OIDC, and this password opens only their APIs.
    async fn set_reader_password(
        &self,
        ctx: &Context<'_>,
        #[graphql(secret)] current_password: Option<String>,
        #[graphql(secret)] password: String,
    ) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        ctx.service::<ReaderAccounts>()?
            .set_password(
                viewer,
                current_password.map(secrecy::SecretString::from),
                password.into(),
                ctx.request_meta()?,
            )
            .await?;
        Ok(true)
    }

    /// Turns the reader APIs off for you; returns whether they were on.
    async fn clear_reader_password(&self, ctx: &Context<'_>) -> async_graphql::Result<bool> {
        let viewer = ctx.viewer()?;
        Ok(ctx.service::<ReaderAccounts>()?.clear(viewer).await?)
    }

    /// Pulls one feed now (bypassing its schedule). Returns the task at once.
    async fn refresh_feed(&self, ctx: &Context<'_>, id: ID) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let feed = feeds(ctx)?
            .feed(viewer.user_id, parse_int_id("id", &id)?)
            .await?;
        let mut task = NewTask::new(
            PULL_KIND,
            Queue::Short,
            json!({ "feedId": feed.id, "mode": PullMode::Manual }),
        );
        task.owner_id = Some(viewer.user_id);
        task.max_attempts = Some(1);
        Ok(Task::from(
            &ctx.service::<Jobs>()?.enqueue(task).await?.task,
        ))
    }

    /// Pulls all your non-suspended feeds now. Returns the task at once; it
    /// succeeds when every feed has been tried (its result counts them).
    async fn refresh_all_feeds(&self, ctx: &Context<'_>) -> async_graphql::Result<Task> {
        let viewer = ctx.viewer()?;
        let mut task = NewTask::new(
            REFRESH_ALL_KIND,
            Queue::Medium,
            json!({ "userId": viewer.user_id }),
        );
        task.owner_id = Some(viewer.user_id);
        Ok(Task::from(
            &ctx.service::<Jobs>()?.enqueue(task).await?.task,
        ))
    }
}

fn new_feed(input: CreateFeedInput) -> AppResult<NewFeed> {
    Ok(NewFeed {
        link: input.link,
        name: input.name,
        group_id: input
            .group_id
            .as_ref()
            .map(|id| parse_int_id("groupId", id))
            .transpose()?,
        site_url: input.site_url,
        suspended: input.suspended,
        refresh_interval_seconds: input.refresh_interval_seconds,
    })
}
