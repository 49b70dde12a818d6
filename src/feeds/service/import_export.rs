//! `FeedsService`: OPML.

use super::*;

impl FeedsService {
    /// Imports an OPML list in one transaction: groups are found or
    /// created by name; feeds already followed (or listed twice) and
    /// unusable links are skipped, not errors.
    pub async fn import_feeds(&self, user: Uuid, feeds: Vec<OpmlFeed>) -> AppResult<ImportReport> {
        let txn = crate::db::begin_write(&self.db).await?;
        let default = default_group_in(&txn, user).await?;
        let mut groups: HashMap<String, i64> = feed_group::Entity::find()
            .filter(feed_group::Column::UserId.eq(user))
            .all(&txn)
            .await?
            .into_iter()
            .map(|group| (group.name, group.id))
            .collect();
        let mut links: HashSet<String> = feed::Entity::find()
            .filter(feed::Column::UserId.eq(user))
            .all(&txn)
            .await?
            .into_iter()
            .map(|feed| feed.link)
            .collect();
        let now = Utc::now();
        let mut report = ImportReport::default();
        let mut created = Vec::new();
        for entry in feeds {
            let Ok(link) = self.feed_link(&entry.link) else {
                report.skipped += 1;
                continue;
            };
            if !links.insert(link.clone()) {
                report.skipped += 1;
                continue;
            }
            let group_id = match entry
                .group
                .as_deref()
                .map(str::trim)
                .filter(|g| !g.is_empty())
            {
                None => default.id,
                // A folder name of nothing but control characters: the default group.
                Some(name) => match names::clean(name) {
                    None => default.id,
                    Some(name) => match groups.get(&name) {
                        Some(id) => *id,
                        None => {
                            let group = new_group(user, name.clone(), now).insert(&txn).await?;
                            report.groups_created += 1;
                            groups.insert(name, group.id);
                            group.id
                        }
                    },
                },
            };
            let name = entry
                .name
                .as_deref()
                .and_then(names::clean)
                .unwrap_or_else(|| name_from_link(&link));
            let model = insert_feed(
                &txn,
                feed::ActiveModel {
                    user_id: Set(user),
                    group_id: Set(group_id),
                    name: Set(name),
                    link: Set(link),
                    site_url: Set(entry.site_url.as_deref().and_then(|url| web_url(url).ok())),
                    suspended: Set(false),
                    refresh_interval_seconds: Set(None),
                    ..Default::default()
                },
                now,
            )
            .await?;
            created.push(model.id);
        }
        report.feeds_created = created.len() as u64;
        if !created.is_empty() {
            feeds_changed(&txn, user, created).await?;
        }
        txn.commit().await?;
        Ok(report)
    }

    /// The user's subscriptions as OPML 2.0, one outline per group.
    pub async fn export_opml(&self, user: Uuid) -> AppResult<String> {
        let groups = self.groups(user).await?;
        let mut feeds = self
            .feeds_of(user)
            .order_by_asc(feed::Column::Name)
            .all(&self.db)
            .await?;
        let export = groups
            .into_iter()
            .map(|group| ExportGroup {
                feeds: feeds
                    .extract_if(.., |feed| feed.group_id == group.id)
                    .map(|feed| ExportFeed {
                        // Names stored before control characters were refused.
                        name: names::clean(&feed.name)
                            .unwrap_or_else(|| name_from_link(&feed.link)),
                        link: feed.link,
                        site_url: feed.site_url,
                    })
                    .collect(),
                name: names::clean(&group.name).unwrap_or_else(|| format!("Group {}", group.id)),
            })
            .collect();
        opml::render("Trellis subscriptions", export)
            .map_err(|error| AppError::internal(anyhow::anyhow!(error)))
    }
}
