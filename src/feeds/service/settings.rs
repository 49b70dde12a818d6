//! `FeedsService`: settings.

use super::*;

impl FeedsService {
    pub async fn settings(&self, user: Uuid) -> AppResult<feed_settings::Model> {
        Ok(feed_settings::Entity::find_by_id(user)
            .one(&self.db)
            .await?
            .unwrap_or(feed_settings::Model {
                user_id: user,
                retention_days: None,
                unread_only: None,
                oldest_first: None,
                mark_read_on_scroll: None,
                updated_at: Utc::now(),
            }))
    }

    pub async fn update_settings(
        &self,
        user: Uuid,
        patch: SettingsPatch,
    ) -> AppResult<feed_settings::Model> {
        let mut settings = self.settings(user).await?;
        if let Some(days) = patch.retention_days {
            if days.is_some_and(|days| !(1..=36_500).contains(&days)) {
                return Err(AppError::bad_input(
                    "retentionDays",
                    "retentionDays must be 1–36500, or null to keep items forever",
                ));
            }
            settings.retention_days = days;
        }
        if let Some(value) = patch.unread_only {
            settings.unread_only = value;
        }
        if let Some(value) = patch.oldest_first {
            settings.oldest_first = value;
        }
        if let Some(value) = patch.mark_read_on_scroll {
            settings.mark_read_on_scroll = value;
        }
        settings.updated_at = Utc::now();
        let model = feed_settings::ActiveModel {
            user_id: Set(user),
            retention_days: Set(settings.retention_days),
            unread_only: Set(settings.unread_only),
            oldest_first: Set(settings.oldest_first),
            mark_read_on_scroll: Set(settings.mark_read_on_scroll),
            updated_at: Set(settings.updated_at),
        };
        feed_settings::Entity::insert(model)
            .on_conflict(
                OnConflict::column(feed_settings::Column::UserId)
                    .update_columns([
                        feed_settings::Column::RetentionDays,
                        feed_settings::Column::UnreadOnly,
                        feed_settings::Column::OldestFirst,
                        feed_settings::Column::MarkReadOnScroll,
                        feed_settings::Column::UpdatedAt,
                    ])
                    .to_owned(),
            )
            .exec_without_returning(&self.db)
            .await?;
        Ok(settings)
    }
}
