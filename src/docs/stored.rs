//! Settings admins store over GraphQL (`updateDocsSettings`), over the
//! environment's: each stored value wins over its `TRELLIS_*` variable;
//! clearing it falls back to the variable. Secrets (the Notion token, the
//! Feishu app secret) are sealed with the server key and never returned.
//!
//! Read at each use (a sync, the doctor, `docsSettings`, the CLI), so a
//! change applies to the next sync without a restart — except the
//! schedule (`syncIntervalSeconds`), which is set when the server starts.

use std::str::FromStr;

use chrono::Utc;
use entity::docs_setting;
use sea_orm::{
    ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter,
    sea_query::OnConflict,
};

use super::settings::Settings;
use crate::auth::keys::{Credential, ServerSecret};

/// The label secrets are sealed under.
const SEAL_LABEL: &str = "docs-settings";

/// The settings that may be stored, by key (the `TRELLIS_` variable's
/// name, lower-cased, without the prefix), and whether each is a secret.
pub const KEYS: [(&str, bool); 13] = [
    ("notion_token", true),
    ("notion_api_url", false),
    ("notion_qps", false),
    ("feishu_app_id", false),
    ("feishu_app_secret", true),
    ("feishu_api_url", false),
    ("feishu_qps", false),
    ("feishu_wiki_spaces", false),
    ("feishu_drive_folders", false),
    ("docs_sync_interval", false),
    ("docs_reconcile_every_runs", false),
    ("docs_trash_keep_days", false),
    ("docs_bitable_inline_max_rows", false),
];

/// Why a value cannot be stored: the key and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct Invalid {
    pub key: &'static str,
    pub message: String,
}

fn invalid(key: &'static str, message: impl Into<String>) -> Invalid {
    Invalid {
        key,
        message: message.into(),
    }
}

fn number<T>(key: &'static str, value: &str, min: T) -> Result<T, Invalid>
where
    T: FromStr + PartialOrd + std::fmt::Display,
{
    let parsed: T = value
        .trim()
        .parse()
        .map_err(|_| invalid(key, "not a whole number"))?;
    if parsed < min {
        return Err(invalid(key, format!("must be at least {min}")));
    }
    Ok(parsed)
}

fn api_url(key: &'static str, value: &str) -> Result<url::Url, Invalid> {
    let url = url::Url::parse(value.trim()).map_err(|error| invalid(key, error.to_string()))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(invalid(key, "must be an http(s) URL with a host"));
    }
    Ok(url)
}

/// `base` with `stored` (key, plain value) laid over it (pure).
pub fn overlay(base: &Settings, stored: &[(String, String)]) -> Result<Settings, Invalid> {
    let mut settings = base.clone();
    for (key, value) in stored {
        let Some((key, _)) = KEYS.iter().find(|(known, _)| known == key) else {
            // A key a later version wrote: ignored, not fatal.
            continue;
        };
        let key: &'static str = key;
        match key {
            "notion_token" => {
                settings.notion_token = Some(
                    Credential::from_str(value).map_err(|_| invalid(key, "must not be empty"))?,
                )
            }
            "notion_api_url" => settings.notion_api_url = api_url(key, value)?,
            "notion_qps" => settings.notion_qps = number(key, value, 1u32)?,
            "feishu_app_id" => {
                let id = value.trim();
                if id.is_empty() {
                    return Err(invalid(key, "must not be empty"));
                }
                settings.feishu_app_id = Some(id.to_owned());
            }
            "feishu_app_secret" => {
                settings.feishu_app_secret = Some(
                    Credential::from_str(value).map_err(|_| invalid(key, "must not be empty"))?,
                )
            }
            "feishu_api_url" => settings.feishu_api_url = api_url(key, value)?,
            "feishu_qps" => settings.feishu_qps = number(key, value, 1u32)?,
            "feishu_wiki_spaces" => settings.feishu_wiki_spaces = value.trim().to_owned(),
            "feishu_drive_folders" => settings.feishu_drive_folders = value.trim().to_owned(),
            "docs_sync_interval" => settings.docs_sync_interval = number(key, value, 0u64)?,
            "docs_reconcile_every_runs" => {
                settings.docs_reconcile_every_runs = number(key, value, 1u32)?
            }
            "docs_trash_keep_days" => settings.docs_trash_keep_days = number(key, value, 0u32)?,
            "docs_bitable_inline_max_rows" => {
                settings.docs_bitable_inline_max_rows = number(key, value, 0u32)?
            }
            _ => {}
        }
    }
    Ok(settings)
}

/// The stored values, secrets opened.
async fn load(
    db: &DatabaseConnection,
    secret: &ServerSecret,
) -> anyhow::Result<Vec<(String, String)>> {
    let rows = docs_setting::Entity::find().all(db).await?;
    rows.into_iter()
        .map(|row| {
            let value = if row.sealed {
                let opened = secret.open(SEAL_LABEL, &row.value).map_err(|error| {
                    anyhow::anyhow!("stored {} cannot be opened: {error:?}", row.key)
                })?;
                String::from_utf8(opened)
                    .map_err(|_| anyhow::anyhow!("stored {} is not text", row.key))?
            } else {
                row.value
            };
            Ok((row.key, value))
        })
        .collect()
}

/// The settings in force: the environment's with the stored ones over it.
pub async fn effective(
    db: &DatabaseConnection,
    secret: &ServerSecret,
    base: &Settings,
) -> anyhow::Result<Settings> {
    let stored = load(db, secret).await?;
    overlay(base, &stored).map_err(|error| anyhow::anyhow!("stored docs setting {error}"))
}

/// Applies `changes` (key → a value to store, or `None` to clear it)
/// after checking the result: nothing is stored when one is invalid.
pub async fn update(
    db: &DatabaseConnection,
    secret: &ServerSecret,
    base: &Settings,
    changes: &[(&'static str, Option<String>)],
) -> Result<Settings, UpdateError> {
    let mut stored = load(db, secret).await.map_err(UpdateError::Other)?;
    for (key, change) in changes {
        stored.retain(|(existing, _)| existing != key);
        if let Some(value) = change {
            stored.push(((*key).to_owned(), value.clone()));
        }
    }
    let settings = overlay(base, &stored).map_err(UpdateError::Invalid)?;
    let now = Utc::now();
    for (key, change) in changes {
        let sealed = KEYS.iter().any(|(known, secret)| known == key && *secret);
        match change {
            None => {
                docs_setting::Entity::delete_many()
                    .filter(docs_setting::Column::Key.eq(*key))
                    .exec(db)
                    .await
                    .map_err(|error| UpdateError::Other(error.into()))?;
            }
            Some(value) => {
                let value = if sealed {
                    secret.seal(SEAL_LABEL, value.trim().as_bytes())
                } else {
                    value.trim().to_owned()
                };
                docs_setting::Entity::insert(docs_setting::ActiveModel {
                    key: Set((*key).to_owned()),
                    value: Set(value),
                    sealed: Set(sealed),
                    updated_at: Set(now),
                })
                .on_conflict(
                    OnConflict::column(docs_setting::Column::Key)
                        .update_columns([
                            docs_setting::Column::Value,
                            docs_setting::Column::Sealed,
                            docs_setting::Column::UpdatedAt,
                        ])
                        .to_owned(),
                )
                .exec_without_returning(db)
                .await
                .map_err(|error| UpdateError::Other(error.into()))?;
            }
        }
    }
    Ok(settings)
}

/// Why an update was refused.
#[derive(Debug, thiserror::Error)]
pub enum UpdateError {
    #[error(transparent)]
    Invalid(Invalid),
    #[error(transparent)]
    Other(anyhow::Error),
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        settings: Settings,
    }

    fn base() -> Settings {
        Cli::parse_from(["trellis"]).settings
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn stored_values_win_over_the_environment() {
        let settings = overlay(
            &base(),
            &pairs(&[
                ("notion_token", "ntn_x"),
                ("notion_qps", "7"),
                ("feishu_wiki_spaces", "1,2"),
                ("docs_trash_keep_days", "0"),
                ("from_a_later_version", "ignored"),
            ]),
        )
        .unwrap();
        assert!(settings.notion_configured());
        assert_eq!(settings.notion_qps, 7);
        assert_eq!(settings.wiki_spaces(), Some(vec!["1".into(), "2".into()]));
        assert_eq!(settings.docs_trash_keep_days, 0);
        assert!(!settings.feishu_configured());
    }

    #[test]
    fn bad_values_name_their_setting() {
        for (key, value, message) in [
            ("notion_qps", "0", "must be at least 1"),
            ("notion_qps", "fast", "not a whole number"),
            (
                "notion_api_url",
                "ftp://x",
                "must be an http(s) URL with a host",
            ),
            ("feishu_app_secret", "  ", "must not be empty"),
            ("docs_reconcile_every_runs", "0", "must be at least 1"),
        ] {
            let error = overlay(&base(), &pairs(&[(key, value)])).unwrap_err();
            assert_eq!((error.key, error.message.as_str()), (key, message));
        }
    }
}
