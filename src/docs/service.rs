//! The docs mirror's service: what resolvers, the CLI and the sync task
//! call. Instance-wide: admins configure and sync, members read.

use std::sync::Arc;

use async_graphql::SimpleObject;

use super::settings::Settings;

#[derive(Clone)]
pub struct DocsService {
    settings: Arc<Settings>,
}

/// The docs mirror's configuration, as admins see it: credentials only as
/// "set" or not, never their values.
#[derive(SimpleObject, Debug, Clone, PartialEq, Eq)]
pub struct DocsSettings {
    /// `TRELLIS_NOTION_TOKEN` is set.
    pub notion_configured: bool,
    pub notion_api_url: String,
    /// Requests per second to Notion's API (and, apart, to its assets).
    pub notion_qps: i32,
    /// `TRELLIS_FEISHU_APP_ID` and `TRELLIS_FEISHU_APP_SECRET` are set.
    pub feishu_configured: bool,
    /// The app id (not a secret; the app secret is never shown).
    pub feishu_app_id: Option<String>,
    pub feishu_api_url: String,
    pub feishu_qps: i32,
    /// The wiki spaces mirrored; null for every space the app can see.
    pub feishu_wiki_spaces: Option<Vec<String>>,
    pub feishu_drive_folders: Vec<String>,
    /// Seconds between scheduled syncs; 0 when they are off.
    pub sync_interval_seconds: i64,
    /// Every how many Notion runs one is full.
    pub reconcile_every_runs: i32,
    pub trash_keep_days: i32,
    pub bitable_inline_max_rows: i32,
}

impl DocsService {
    pub fn new(settings: Arc<Settings>) -> Self {
        DocsService { settings }
    }

    /// The settings without their secrets (callers check the admin).
    pub fn settings_view(&self) -> DocsSettings {
        let s = &self.settings;
        // The knobs are small (clap parsed them as u32/u64 from the
        // environment); saturate rather than wrap if one is absurd.
        let int = |value: u32| i32::try_from(value).unwrap_or(i32::MAX);
        DocsSettings {
            notion_configured: s.notion_configured(),
            notion_api_url: s.notion_api_url.to_string(),
            notion_qps: int(s.notion_qps),
            feishu_configured: s.feishu_configured(),
            feishu_app_id: s.feishu_app_id.clone(),
            feishu_api_url: s.feishu_api_url.to_string(),
            feishu_qps: int(s.feishu_qps),
            feishu_wiki_spaces: s.wiki_spaces(),
            feishu_drive_folders: s.drive_folders(),
            sync_interval_seconds: i64::try_from(s.docs_sync_interval).unwrap_or(i64::MAX),
            reconcile_every_runs: int(s.docs_reconcile_every_runs),
            trash_keep_days: int(s.docs_trash_keep_days),
            bitable_inline_max_rows: int(s.docs_bitable_inline_max_rows),
        }
    }
}
